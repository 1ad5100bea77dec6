/* A detached thread's signal state: its handlers' returns, actions (SIGSYS
 * is the runtime's), mask, alternate stack, and signals it sends itself. */
#include "runtime/signals.h"
#include "runtime/claims.h"
#include "runtime/stack.h"
#include "runtime/config.h"
#include "runtime/sud.h"
#include "runtime/uaccess.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <asm/ioctls.h>
#include <sys/syscall.h>

extern char __start_detach_wait[], __stop_detach_wait[] DT_HIDDEN;

/* The detached thread's mask is mask from now on: its proxy blocks SIGTTIN
 * and SIGTTOU as it does (proxy.c, tty_signals_follow).  Written only when
 * it changes: the proxy reads the line at every call. */
static inline void tty_blocked_is(struct dt_thread *t, uint64_t mask)
{
	if (t->mb.tty_blocked != (mask & TTY_SIGNALS))
		t->mb.tty_blocked = mask & TTY_SIGNALS;
}

long do_sigreturn(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)a;
	if (!uc)                    /* rewrite mode: never here (trampoline.S) */
		return DT_NEED_TRAP;
	/* The program's handler returns: its frame's ucontext is at the rsp of
	 * the trapped rt_sigreturn; the siginfo follows the kernel ucontext. */
	char *frame = (char *)uc->uc_mcontext.gregs[REG_RSP];
	ucontext_t *app = (ucontext_t *)frame;
	uintptr_t rip = (uintptr_t)app->uc_mcontext.gregs[REG_RIP];

	/* A handler interrupted our wait for the proxy.  Its number is in the
	 * frame's siginfo (do_sigaction makes sure the kernel writes one); a
	 * handler installed behind our back (by a thread that is not detached)
	 * may have none: then the proxy's call goes on, as under SA_RESTART. */
	if (rip >= (uintptr_t)__start_detach_wait && rip < (uintptr_t)__stop_detach_wait) {
		int signo = ((siginfo_t *)(frame + KERNEL_UCONTEXT_SIZE))->si_signo;
		/* only where no earlier handler's is (the first decides,
		 * thread.h).  A program's handler running on top of this one
		 * (signals are open in our trap) returns into do_sigreturn,
		 * not into the wait, and sets nothing: this read and write
		 * lose none */
		if (signo >= 1 && signo <= 64 && !t->intr_first)
			t->intr_first = (uint32_t)signo;
	}
	t->handler_returns++;
	tty_blocked_is(t, app->uc_sigmask.__val[0]);
	count(t, nr, &t->stats->local);
	stack_trap_leaves(t, (uintptr_t)frame);
	/* Resume the program's frame directly; ours is dropped.  The kernel
	 * restores its mask and registers, as the handler's return would. */
	sys_sigreturn_at(frame);
}

/* Signals whose handler the program installed without SA_SIGINFO and we
 * installed with it: the kernel writes the siginfo into a handler's frame
 * only with SA_SIGINFO, and do_sigreturn reads the signal number there.  A
 * handler that takes one argument ignores the other two. */
static _Atomic uint64_t siginfo_added;

/* The flags the kernel keeps of an action (UAPI_SA_FLAGS on x86-64): the
 * rest it clears, and a program reads back (SA_UNSUPPORTED's probe). */
#define KEPT_SA_FLAGS (SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | 0x800 /* SA_EXPOSE_TAGBITS */ | \
		       SA_RESTORER | SA_ONSTACK | SA_RESTART | SA_NODEFER | SA_RESETHAND)

/* ---- the program's handlers return without a trap ------------------------ */

/* A handler's return through the program's restorer traps (glibc's
 * __restore_rt lies outside the allowed range), and the kernel writes that
 * trap's SIGSYS frame below the handler's frame: on the program's alternate
 * stack when the handler runs there, which natively the return never
 * writes (stubs.S, dt_app_restorer, says what broke).  So the kernel is
 * given the runtime's restorer, which does the same without a trap, in
 * place of the program's when the program's is the plain one: exactly
 * `mov $15,%rax; syscall` (glibc's, musl's, Go's), which nothing but
 * rt_sigreturn can tell from ours.  Any other restorer stays, and its
 * rt_sigreturn traps (do_sigreturn).  The program is told its own
 * (app_restorer, by signal; NULL: not replaced).  An action read by a
 * thread the runtime does not handle shows ours, which works as the
 * program's wherever it is installed again. */
static void *_Atomic app_restorer[65];

static void *restorer_for(const struct ksigaction *act)
{
	static const uint8_t plain[9] = { 0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05 };
	uint8_t code[sizeof(plain)];

	if (act->handler == SIG_DFL || act->handler == SIG_IGN || !(act->flags & SA_RESTORER))
		return act->restorer;
	if (act->restorer == (void *)dt_app_restorer)
		return act->restorer;
	if (copy_from_user(code, act->restorer, sizeof(code)) || memcmp(code, plain, sizeof(plain)))
		return act->restorer;
	return (void *)dt_app_restorer;
}

/* ---- SIGSEGV and SIGBUS: the runtime's accesses to the program's memory - */

/* The runtime reads and writes the program's memory through uaccess.S,
 * whose faults this handler turns into -EFAULT; every other fault (and
 * every SIGSEGV or SIGBUS sent) is the program's and goes where it asked,
 * on the stack and with the mask the kernel chose from the program's own
 * flags (fault_action).  The program's wish is kept here, as SIGSYS's. */
static struct ksigaction app_fault[2];          /* SIGSEGV, SIGBUS */

static void fault_handler(int sig, siginfo_t *si, void *ctx)
{
	/* si_code > 0: raised by the CPU, not sent by kill */
	if (si->si_code > 0 && uaccess_fixup(ctx))
		sys_sigreturn_at(ctx);          /* at the fixup, with no trap on the way */
	signal_deliver_app(&app_fault[sig == SIGBUS], sig, si, ctx, si->si_code > 0);
}

/* The kernel's action for a program's wish: our handler, which the kernel
 * runs where it would run the program's (its SA_ONSTACK) with what the
 * program's would block (its mask and SA_NODEFER), and returns through the
 * program's restorer (a trapped rt_sigreturn, as after any handler of its);
 * without a handler of the program's, on any alternate stack there is. */
static void fault_action(const struct ksigaction *app, struct ksigaction *k)
{
	bool h = app->handler != SIG_DFL && app->handler != SIG_IGN;

	k->handler = (void *)fault_handler;
	k->flags = SA_SIGINFO | SA_RESTORER |
		   (h ? app->flags & (SA_ONSTACK | SA_NODEFER | SA_RESTART) : SA_ONSTACK);
	k->restorer = h && (app->flags & SA_RESTORER) ? restorer_for(app) : (void *)sys_sigreturn_restorer;
	k->mask = h ? app->mask & ~kept_open() : 0;
}

/* At start: the actions the program has (detach pid, dt_detach: maybe its
 * own already) become its wish, and the runtime's handler the kernel's. */
int signal_fault_install(void)
{
	static const int sigs[2] = { SIGSEGV, SIGBUS };
	struct ksigaction cur, k;

	for (int i = 0; i < 2; i++) {
		long r = sys_call4(SYS_rt_sigaction, sigs[i], NULL, &cur, 8);
		if (r < 0)
			return (int)r;
		if (cur.handler == (void *)fault_handler)
			continue;               /* a second start: the wish is kept */
		app_fault[i] = cur;
		fault_action(&cur, &k);
		if ((r = sys_call4(SYS_rt_sigaction, sigs[i], &k, NULL, 8)) < 0)
			return (int)r;
	}
	return 0;
}

/* ---- SIGTTIN and SIGTTOU: job control on the proxy ---------------------- */

/* A terminal judges a background process's access by the calling thread's
 * mask and the action (proxy.c, tty_signals_follow): the proxy, which makes
 * the detached thread's calls, has the two open as the detached thread has
 * them, and the program's handler must not run there.  So where the
 * program has a handler, the kernel's is tty_handler: on a proxy it hands
 * the signal to the detached thread (proxy_tty_signal_taken), anywhere
 * else it runs the program's.  The program's wish is kept here, as
 * SIGSEGV's; a default or ignored action goes to the kernel as it is. */
static struct ksigaction app_tty[2];            /* SIGTTIN, SIGTTOU */

static bool handled(const struct ksigaction *a)
{
	return a->handler != SIG_DFL && a->handler != SIG_IGN;
}

static long tty_install(int sig, const struct ksigaction *app);

/* The terminal sends its signal to the process group (kill_pgrp,
 * tty_jobctrl.c), and the kernel offers it to the main thread first, often
 * the detached one, while the calling thread, natively the one that takes
 * it at its exit from the call, returns -ERESTARTSYS.  When the caller is
 * our proxy and it is slow to take it (a loaded CPU), this thread took it
 * inside its wait and the handler ran; the proxy's kernel, with no signal
 * taken there, entered the call again before the interrupt the handler's
 * return sends came, and that call raised it a second time: the handler
 * ran twice (run_job_control's read- and write-handler-traced make it every
 * time: exit 32 where natively 31).  So the terminal's signal (SI_KERNEL)
 * that comes while this thread spins in the wait (rip in detach_wait: not
 * in a call of its own, whose restart would raise it again here) for a call
 * on a terminal that the terminal judges (read, write, their vector forms,
 * ioctl) is held, and the frame returns without the program's handler: the
 * proxy's call, entered again, raises it again and takes it
 * (proxy_tty_signal_taken), or ends without it, and the held one is
 * delivered then (proxy.c, tty_held_deliver).  The call is interrupted as
 * the handler's return would (intr_first: EINTR without SA_RESTART), so
 * that it ends as natively when it did not raise the signal itself.  A call
 * on anything else did not raise it (another process of the group, or
 * another thread, touched the terminal): its signal runs now, and
 * interrupts it (run_job_control's write-handler-pipe: holding it until a
 * pipe read ended lost the EINTR). */
static bool tty_hold(struct dt_thread *t, int sig, const siginfo_t *si, const ucontext_t *uc)
{
	uintptr_t rip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	long nr = t->mb.nr;
	/* TCGETS fills the kernel's struct termios (36 bytes) */
	char termios[64] __attribute__((aligned(8)));

	if (si->si_code != SI_KERNEL || t->depth <= 0 || t->observed ||
	    rip < (uintptr_t)__start_detach_wait || rip >= (uintptr_t)__stop_detach_wait)
		return false;
	if (nr != SYS_read && nr != SYS_write && nr != SYS_readv && nr != SYS_writev && nr != SYS_ioctl)
		return false;
	/* a terminal: its fd as the call has it (a kernel entry here, on
	 * this rare path only) */
	if (sys_call3(SYS_ioctl, t->mb.args[0], TCGETS, termios) < 0)
		return false;
	t->tty_held_info = *si;
	t->tty_held = sig;
	if (!t->intr_first)
		t->intr_first = (uint32_t)sig;
	return true;
}

static void tty_handler(int sig, siginfo_t *si, void *ctx)
{
	struct ksigaction *app = &app_tty[sig == SIGTTOU];

	if (dt_is_proxy) {
		proxy_tty_signal_taken(sig, si, ctx);
		return;
	}
	if (dt_self && tty_hold(dt_self, sig, si, ctx))
		/* not through the program's restorer: no handler of its ran
		 * on top of the wait (stubs.S, dt_app_restorer) */
		sys_sigreturn_at(ctx);
	/* The mask the kernel applied for this handler, seen here (unlike
	 * another handler's): a terminal access from inside it is judged by
	 * it (its own signal blocked: EIO, or the write goes through); its
	 * return restores the frame's (dt_app_restorer) */
	if (dt_self)
		tty_blocked_is(dt_self, ((ucontext_t *)ctx)->uc_sigmask.__val[0] | app->mask |
				       (app->flags & SA_NODEFER ? 0 : 1ull << (sig - 1)));
	if (handled(app) && (app->flags & SA_RESETHAND)) {
		/* The kernel resets the action as it delivers the signal
		 * (SA_RESETHAND is the wish's, not ours: tty_action): the
		 * default goes to the kernel, and the proxies no longer take
		 * the signal, before the handler runs (one that installs
		 * itself again does so first thing) */
		struct ksigaction once = *app;
		once.flags &= ~SA_RESETHAND;
		app->handler = SIG_DFL;
		tty_install(sig, app);
		signal_deliver_app(&once, sig, si, ctx, false);
		return;
	}
	signal_deliver_app(app, sig, si, ctx, false);
}

/* The kernel's action for a program's wish: as fault_action, with the
 * program's SA_RESTART, which decides a call the signal interrupts here and
 * one it ended on the proxy (proxy_forward reads it back). */
static void tty_action(const struct ksigaction *app, struct ksigaction *k)
{
	if (!handled(app)) {
		*k = *app;
		return;
	}
	k->handler = (void *)tty_handler;
	k->flags = SA_SIGINFO | SA_RESTORER | (app->flags & (SA_ONSTACK | SA_NODEFER | SA_RESTART));
	k->restorer = app->flags & SA_RESTORER ? restorer_for(app) : (void *)sys_sigreturn_restorer;
	k->mask = app->mask & ~kept_open();
}

/* Installs the program's wish app for sig.  dt_tty_handled says a handled
 * one is to be closed on the proxies but during a call, from before the
 * kernel runs our handler for it until the kernel no longer does; a proxy
 * applies it around its next call (proxy.c, tty_signals_follow): one idle
 * meanwhile keeps the signal as it was (docs/runtime.md, Known limits). */
static long tty_install(int sig, const struct ksigaction *app)
{
	struct ksigaction k;
	uint64_t bit = 1ull << (sig - 1);
	long r;

	tty_action(app, &k);
	dt_tty_entry = (uintptr_t)tty_handler;
	if (handled(app))
		atomic_fetch_or(&dt_tty_handled, bit);
	r = sys_call4(SYS_rt_sigaction, sig, &k, NULL, 8);
	if (!handled(app) && r == 0)
		atomic_fetch_and(&dt_tty_handled, ~bit);
	return r;
}

/* At start: the actions the program has (detach pid, dt_detach: maybe a
 * handler already) become its wish. */
int signal_tty_capture(void)
{
	static const int sigs[2] = { SIGTTIN, SIGTTOU };
	struct ksigaction cur;

	for (int i = 0; i < 2; i++) {
		long r = sys_call4(SYS_rt_sigaction, sigs[i], NULL, &cur, 8);
		if (r < 0)
			return (int)r;
		if (cur.handler == (void *)tty_handler)
			continue;               /* a second start: the wish is kept */
		app_tty[i] = cur;
		if (handled(&cur) && (r = tty_install(sigs[i], &cur)) < 0)
			return (int)r;
	}
	return 0;
}

/* execve keeps an ignored action and resets a handled one: the program's
 * SIG_IGN goes to the kernel for the exec (the new image's runtime takes
 * it as the program's), ours comes back if the exec fails. */
void signal_fault_exec(bool before)
{
	static const int sigs[2] = { SIGSEGV, SIGBUS };
	struct ksigaction k;

	for (int i = 0; i < 2; i++) {
		if (app_fault[i].handler != SIG_IGN)
			continue;
		if (before)
			k = app_fault[i];
		else
			fault_action(&app_fault[i], &k);
		sys_call4(SYS_rt_sigaction, sigs[i], &k, NULL, 8);
	}
}

/* rt_sigaction of a signal whose action the runtime keeps (SIGSYS,
 * SIGTRAP in rewrite mode, SIGSEGV, SIGBUS, SIGTTIN, SIGTTOU): the
 * program's wish is kept in app and answered from there, in the kernel's
 * order (act read, the action changed, then oldact written); a fault
 * action is applied through fault_action, a job-control one through
 * tty_install. */
static long kept_action(struct dt_thread *t, long nr, const long *a, struct ksigaction *app)
{
	struct ksigaction want, was = *app, k;

	count(t, nr, &t->stats->emulated);
	if (a[1]) {
		if (copy_from_user(&want, (const void *)a[1], sizeof(want)))
			return -EFAULT;
		want.flags &= KEPT_SA_FLAGS;
		want.mask &= ~((1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)));
		if (app == &app_fault[0] || app == &app_fault[1]) {
			long r;
			fault_action(&want, &k);
			if ((r = sys_call4(SYS_rt_sigaction, a[0], &k, NULL, 8)) < 0)
				return r;
		}
		/* The wish first: our handler reads it from the moment the
		 * kernel has it.  A signal taken between the two ran the old
		 * wish: a default one put the default back in the kernel
		 * (signal_die), and the new handler never ran. */
		if (app == &app_tty[0] || app == &app_tty[1]) {
			*app = want;
			long r = tty_install((int)a[0], &want);
			if (r < 0) {
				*app = was;
				return r;
			}
		}
		*app = want;
	}
	if (a[2] && copy_to_user((void *)a[2], &was, sizeof(was)))
		return -EFAULT;
	return 0;
}

long do_sigaction(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	struct ksigaction act, *old = (struct ksigaction *)a[2];
	uint64_t bit = a[0] >= 1 && a[0] <= 64 ? 1ull << (a[0] - 1) : 0;
	bool added_before = atomic_load(&siginfo_added) & bit, add = false;
	void *restorer_before = bit ? atomic_load(&app_restorer[a[0]]) : NULL, *app_rest = NULL;
	long b[6], ret;

	(void)uc;
	if ((unsigned long)a[3] != 8)
		return forward(t, nr, a);               /* the kernel says EINVAL */
	/* SIGSYS carries our traps, SIGTRAP (rewrite mode) the int3 of sites
	 * being rewritten, SIGSEGV and SIGBUS our faults on the program's
	 * memory: keep the program's wish, answer from it. */
	if (a[0] == SIGSYS)
		return kept_action(t, nr, a, &dt_app_sigsys);
	if (a[0] == SIGTRAP && dt_rewrite_on)
		return kept_action(t, nr, a, &dt_app_sigtrap);
	if (a[0] == SIGSEGV || a[0] == SIGBUS)
		return kept_action(t, nr, a, &app_fault[a[0] == SIGBUS]);
	if (a[0] == SIGTTIN || a[0] == SIGTTOU)
		return kept_action(t, nr, a, &app_tty[a[0] == SIGTTOU]);
	memcpy(b, a, sizeof(b));
	if (a[1]) {
		/* unreadable: the kernel says EFAULT */
		if (copy_from_user(&act, (void *)a[1], sizeof(act)))
			return forward(t, nr, a);
		/* a handler that blocks SIGSYS would turn our next trap fatal */
		act.mask &= ~kept_open();
		add = act.handler != SIG_DFL && act.handler != SIG_IGN && !(act.flags & SA_SIGINFO);
		if (add)
			act.flags |= SA_SIGINFO;
		app_rest = act.restorer;
		if ((act.restorer = restorer_for(&act)) != (void *)dt_app_restorer)
			app_rest = NULL;
		else if (app_rest == (void *)dt_app_restorer)
			app_rest = restorer_before;     /* ours, read back and installed again */
		b[1] = (long)&act;
	}
	ret = forward(t, nr, b);
	if (ret < 0)
		return ret;
	/* the kernel has just written *old: it is writable */
	if (old && added_before)
		old->flags &= ~(unsigned long)SA_SIGINFO;
	if (old && restorer_before && old->restorer == (void *)dt_app_restorer)
		old->restorer = restorer_before;
	if (a[1]) {
		if (bit)
			atomic_store(&app_restorer[a[0]], app_rest);
		if (add)
			atomic_fetch_or(&siginfo_added, bit);
		else
			atomic_fetch_and(&siginfo_added, ~bit);
	}
	return ret;
}

/* SIGSYS carries our traps: Syscall User Dispatch kills a thread that traps
 * with SIGSYS blocked; SIGTRAP, in rewrite mode, the int3 of sites being
 * rewritten (kept_open).  So the detached thread never blocks them; the
 * program is told what it asked for (t->app_blocked_open) and such a signal
 * sent to it meanwhile goes to the program's handler (intercept.c). */
long do_sigprocmask(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	/* In the trap handler the kernel's mask is the one the handler's
	 * rt_sigreturn restores from the frame: the change goes there.  From the
	 * trampoline (rewrite mode, no frame) it goes to the kernel directly. */
	uint64_t real, *frame_mask = uc ? (uint64_t *)&uc->uc_sigmask : &real, cur, set;
	const uint64_t open = kept_open(), never = open | (1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1));
	uint64_t app = t->app_blocked_open, was;

	count(t, nr, &t->stats->local);
	if (a[3] != 8)
		return -EINVAL;
	/* the kernel's order: the new set read (EFAULT), how checked (EINVAL),
	 * the mask changed, then the old one written (EFAULT, changed all the same) */
	if (a[1] && copy_from_user(&set, (const void *)a[1], sizeof(set)))
		return -EFAULT;
	if (!uc)
		sys_call4(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &real, 8);
	cur = *frame_mask;
	if (a[1]) {
		switch (a[0]) {
		case SIG_BLOCK:
			cur |= set;
			app |= set & open;
			break;
		case SIG_UNBLOCK:
			cur &= ~set;
			app &= ~set;
			break;
		case SIG_SETMASK:
			cur = set;
			app = set & open;
			break;
		default:
			return -EINVAL;
		}
	}
	was = *frame_mask | t->app_blocked_open;
	*frame_mask = cur & ~never;
	t->app_blocked_open = app;
	/* The record of SIGTTIN and SIGTTOU follows the mask in force: a
	 * handler that returns before the change takes effect writes the
	 * mask its frame restores (dt_app_restorer), the old one, over a
	 * record written first.  So the kernel has the new mask first: from
	 * the trampoline here, from the trap too when either of the two
	 * changes (else only at the trap's rt_sigreturn, the frame's mask). */
	if (!uc || ((was ^ *frame_mask) & TTY_SIGNALS))
		sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, frame_mask, NULL, 8);
	tty_blocked_is(t, *frame_mask);
	if (a[2] && copy_to_user((void *)a[2], &was, sizeof(was)))
		return -EFAULT;
	return 0;
}

/* The program's alternate stack, as the program sees it: the runtime's own
 * stack (stack.c) is installed when the program has none, and never shown.
 * Applied through the trap's frame (rewrite mode sends the call to the trap
 * path): the handler runs on an alternate stack, where the kernel refuses a
 * change; every trap's return writes stack_real() into its frame's
 * uc_stack (intercept.c), which rt_sigreturn installs.  The checks are the kernel's (kernel/signal.c, do_sigaltstack). */
long do_sigaltstack(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	const stack_t *ss = (const stack_t *)a[0];
	stack_t *oss = (stack_t *)a[1], old = t->app_ss;
	uintptr_t sp;
	bool on_app;

	if (!uc)
		return DT_NEED_TRAP;
	count(t, nr, &t->stats->local);
	sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	on_app = !(old.ss_flags & SS_DISABLE) && sp - (uintptr_t)old.ss_sp < old.ss_size;
	if (on_app)
		old.ss_flags |= SS_ONSTACK;
	if (ss) {
		stack_t want;
		int mode;

		if (copy_from_user(&want, ss, sizeof(want)))
			return -EFAULT;
		mode = want.ss_flags & ~SS_AUTODISARM;

		if (on_app)
			return -EPERM;
		if (mode != 0 && mode != SS_ONSTACK && mode != SS_DISABLE)
			return -EINVAL;
		if (mode != SS_DISABLE) {
			if (want.ss_size < 2048)      /* the kernel's MINSIGSTKSZ */
				return -ENOMEM;
			want.ss_flags &= SS_AUTODISARM;
		}
		/* Until rt_sigreturn installs the new stack, the old one (ours,
		 * when the program had none) stays the kernel's alternate stack
		 * and this handler runs on it: a signal taken from here on would
		 * reach the program's handler on a stack that sigaltstack no
		 * longer reports (Go: "handler not on signal stack").  Every
		 * signal waits until then (rt_sigreturn restores the frame's
		 * mask); blocked before the change becomes visible. */
		uint64_t all = ~0ull;
		sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, 8);
		stack_set_program(t, &want);
	}
	if (oss && copy_to_user(oss, &old, sizeof(old)))
		return -EFAULT;
	return 0;
}

/* A signal of the runtime's own (SIGSYS, SIGTRAP) that is not for the
 * runtime (a SIGSYS that is no Syscall User Dispatch trap nor proxy
 * interrupt: a kill -SYS, or seccomp's SECCOMP_RET_TRAP, sandbox.c; a
 * SIGTRAP that is no pending patch: the program's own int3, a kill -TRAP)
 * goes where the program wanted it (app), as the kernel would have
 * delivered it.  forced: a signal the kernel forces (an int3, seccomp's
 * TRAP), which can be neither ignored nor blocked: force_sig makes it take
 * the default action then. */
void signal_deliver_app(struct ksigaction *app, int sig, siginfo_t *si, void *ctx, bool forced)
{
	void *h = app->handler;
	unsigned long flags = app->flags;
	uint64_t mask = app->mask & ~((1ull << (SIGSYS - 1)) | (1ull << (SIGTRAP - 1)));

	/* Blocked as the program believes: the thread never blocks SIGSYS nor
	 * SIGTRAP for real (kept_open). */
	if (forced && dt_self && (dt_self->app_blocked_open & (1ull << (sig - 1))))
		h = SIG_DFL;
	if (h == SIG_IGN && !forced)
		return;
	if (h == SIG_IGN)
		h = SIG_DFL;
	/* The program's handler is about to run: our SA_RESTART is not its */
	if (h != SIG_DFL && !(flags & SA_RESTART) && frame_restart_pending(ctx))
		frame_end_with_eintr(ctx);
	if (h == SIG_DFL) {
		signal_die(sig);
		return;
	}
	if (flags & SA_RESETHAND)
		app->handler = SIG_DFL;
	/* The handler's mask, as the kernel would block it (our own two
	 * signals stay open: see sud_install); our rt_sigreturn restores the
	 * frame's. */
	if (mask)
		sys_call4(SYS_rt_sigprocmask, SIG_BLOCK, &mask, NULL, 8);
	if (flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))h)(sig, si, ctx);
	else
		((void (*)(int))h)(sig);
}

/* The default action of sig, for real: restored, and the signal sent to
 * the calling thread, which takes it on the way out of tgkill (a fatal one
 * ends the process as natively, with the status a shell shows as 128+sig). */
void signal_die(int sig)
{
	struct ksigaction dfl = { .handler = SIG_DFL };
	uint64_t bit = 1ull << (sig - 1);

	sys_call4(SYS_rt_sigaction, sig, &dfl, NULL, 8);
	sys_call4(SYS_rt_sigprocmask, SIG_UNBLOCK, &bit, NULL, 8);
	sys_call3(SYS_tgkill, sys_call0(SYS_getpid), sys_call0(SYS_gettid), sig);
}

long do_sigsuspend(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	uint64_t set;
	long b[6];

	(void)uc;
	memcpy(b, a, sizeof(b));
	if (a[1] == 8) {
		if (copy_from_user(&set, (const void *)a[0], sizeof(set)))
			return -EFAULT;         /* as the kernel: the size first */
		set &= ~kept_open();
		b[0] = (long)&set;
	}
	return local_call(t, nr, b);
}


long do_kill(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)uc;
	if (a[0] == dt_cfg.pid || a[0] == 0)
		return local_call(t, nr, a);
	return forward(t, nr, a);
}

long do_thread_signal(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	long tid = nr == SYS_tkill ? a[0] : a[1];

	(void)uc;
	if (tid == t->tid)
		return local_call(t, nr, a);
	return forward(t, nr, a);
}

/* ---- signalfd ------------------------------------------------------------ */

/* Descriptors whose readiness is the calling thread's pending signals: a
 * signalfd dequeues (and polls) the signals of the thread that reads it, so
 * a proxy reading one would see its own.  Such calls run on the detached
 * thread itself (in the kernel, where a blocking read waits natively).
 * Remembered per process, by number, up to SIGFD_MAX; epoll sets holding one
 * are marked too.  A signalfd inherited through execve is not known to the
 * new image (docs/runtime.md). */
#define SIGFD_MAX 65536
static _Atomic uint64_t sigfd_bits[SIGFD_MAX / 64];

bool sigfd_is(long fd)
{
	return fd >= 0 && fd < SIGFD_MAX &&
	       (atomic_load_explicit(&sigfd_bits[fd / 64], memory_order_relaxed) >> (fd % 64) & 1);
}

static void sigfd_set(long fd, bool on)
{
	if (fd < 0 || fd >= SIGFD_MAX)
		return;
	if (on)
		atomic_fetch_or_explicit(&sigfd_bits[fd / 64], 1ull << (fd % 64), memory_order_relaxed);
	else if (sigfd_is(fd))
		atomic_fetch_and_explicit(&sigfd_bits[fd / 64], ~(1ull << (fd % 64)), memory_order_relaxed);
}

/* Read in pieces of the program's memory: a set that cannot be read holds
 * none (the call is forwarded, and the kernel says EFAULT). */
bool sigfd_in_pollfds(const void *fds, unsigned long n)
{
	struct pollfd_ { int fd; short events, revents; } p[32];
	const struct pollfd_ *u = fds;

	for (unsigned long i = 0; u && i < n; i += 32) {
		unsigned long k = n - i < 32 ? n - i : 32;
		if (copy_from_user(p, u + i, k * sizeof(p[0])))
			return false;
		for (unsigned long j = 0; j < k; j++)
			if (sigfd_is(p[j].fd))
				return true;
	}
	return false;
}

bool sigfd_in_fdset(const void *set, long nfds)
{
	const uint64_t *u = set;
	uint64_t w;

	for (long fd = 0; u && fd < nfds && fd < SIGFD_MAX; fd += 64) {
		if (copy_from_user(&w, u + fd / 64, sizeof(w)))
			return false;
		for (long b = 0; b < 64 && fd + b < nfds; b++)
			if ((w >> b & 1) && sigfd_is(fd + b))
				return true;
	}
	return false;
}

/* Calls that make, copy or drop a descriptor: carried out as they would
 * be, then the record follows. */
long do_fd_track(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	long ret = -1;

	(void)uc;
	/* The runtime's own descriptor (claims.c) stays open: natively it does
	 * not exist, so closing it alone says EBADF, and a range over every
	 * descriptor (the close-all idiom) closes all but it.  Other threads'
	 * calls are not seen: docs/runtime.md. */
	if (nr == SYS_close && claims_fd_is(a[0]))
		return -EBADF;
	if (nr == SYS_close_range) {
		/* CLOSE_RANGE_UNSHARE: the calling thread's own descriptor table,
		 * as unshare(CLONE_FILES): the first part made runs on the thread
		 * with the proxy made again from it (call.c), the rest on that
		 * new proxy, which shares the new table */
		long fd = (unsigned)a[2] & 4 /* CLOSE_RANGE_CLOEXEC */ ? -1 : claims_fd_in((unsigned)a[0], (unsigned)a[1]);
		long part[2][6] = { { a[0], fd >= 0 ? fd - 1 : a[1], a[2] }, { fd + 1, a[1], a[2] } };
		long flags = a[2];

		ret = 0;
		for (int i = 0; i < (fd >= 0 ? 2 : 1) && !ret; i++) {
			if (fd >= 0 && (unsigned long)part[i][0] > (unsigned long)part[i][1])
				continue;       /* empty: the runtime's descriptor was its end */
			part[i][2] = flags;
			ret = (flags & 2) ? proxy_renewed_around(t, nr, part[i]) : forward(t, nr, part[i]);
			flags &= ~2l;
		}
		if (ret == 0 && !(a[2] & 4))
			for (unsigned long f = (unsigned long)a[0]; f <= (unsigned long)a[1] && f < SIGFD_MAX; f++)
				sigfd_set((long)f, false);
		return ret;
	}
	if ((nr == SYS_dup2 || nr == SYS_dup3) && claims_step_aside(a[1])) {
		ret = forward(t, nr, a);
		claims_stepped_aside(ret >= 0);
		if (ret >= 0)
			sigfd_set(ret, sigfd_is(a[0]));
		return ret;
	}
	if (nr == SYS_epoll_ctl && sigfd_is(a[2]) && a[1] != 2 /* EPOLL_CTL_DEL */) {
		/* marked first: a waiter on the set must run here from now on */
		sigfd_set(a[0], true);
		return forward(t, nr, a);
	}
	ret = forward(t, nr, a);
	switch (nr) {
	case SYS_signalfd:
	case SYS_signalfd4:
		if (ret >= 0)
			sigfd_set(ret, true);
		break;
	case SYS_close:
		sigfd_set(a[0], false);      /* closed even when it fails (EINTR) */
		break;
	case SYS_dup:
	case SYS_dup2:
	case SYS_dup3:
		if (ret >= 0 && ret != a[0])
			sigfd_set(ret, sigfd_is(a[0]));
		break;
	case SYS_fcntl:
		if (ret >= 0 && (a[1] == 0 /* F_DUPFD */ || a[1] == 1030 /* F_DUPFD_CLOEXEC */))
			sigfd_set(ret, sigfd_is(a[0]));
		break;
	}
	return ret;
}
