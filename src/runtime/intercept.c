/* The entry of every trap of a detached thread (layer 5,
 * docs/architecture.md; sud.c arms the thread).  Each `syscall` instruction
 * the thread runs outside the runtime's `detach_allow` section turns into
 * SIGSYS with the registers in the signal frame.  The handler hands the call
 * to dt_dispatch (dispatch.c), puts the result in the frame's rax, and
 * returns through the runtime's own restorer (glibc's lies outside the range
 * and would trap while returning from a trap).
 *
 * SIMD state needs no care here: the kernel saves the complete FPU/vector
 * state in the signal frame on entry and restores it on rt_sigreturn, so the
 * program sees every register but rax exactly as it left it.  (The
 * non-trapping entry of rewrite mode, trampoline.S, saves it with xsave.)
 *
 * In rewrite mode the handler also rewrites the site that trapped
 * (rewrite.c), and takes the calls the trampoline sends back on purpose to
 * the site's kept `syscall` because they need a signal frame (retraps).  SIGTRAP is the runtime's
 * too in rewrite mode: a thread that meets the int3 of a site being
 * rewritten is sent on by it; every other SIGTRAP goes where the program
 * wanted it.  A debugger's breakpoints never reach it: the tracer takes
 * those SIGTRAPs before any handler runs.
 */
#include "runtime/intercept.h"
#include "runtime/config.h"
#include "runtime/dispatch.h"
#include "runtime/proxy.h"
#include "runtime/rewrite.h"
#include "runtime/signals.h"
#include "runtime/stack.h"
#include "runtime/sud.h"

#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#ifndef SYS_USER_DISPATCH
#define SYS_USER_DISPATCH 2
#endif

/* intercept_entry.S: the kernel's handler of SIGSYS, which goes to one of
 * these two */
void sigsys_entry(int sig, siginfo_t *si, void *ctx) DT_HIDDEN;
void sigsys_handler(int sig, siginfo_t *si, void *ctx) DT_HIDDEN;
__attribute__((noreturn)) void sigsys_moved(int sig, siginfo_t *si, ucontext_t *uc) DT_HIDDEN;
static void sigtrap_handler(int sig, siginfo_t *si, void *ctx);

/* SIGTRAP (rewrite mode): as SIGSYS, on our stack, and never deferred,
 * since a thread may meet a pending int3 again inside a handler. */
static const struct ksigaction sigtrap_action = {
	.handler = (void *)sigtrap_handler,
	.flags = SA_SIGINFO | SA_NODEFER | SA_RESTART | SA_ONSTACK | SA_RESTORER,
	.restorer = (void *)sys_sigreturn_restorer,
	.mask = 0,
};

/* The handlers of this file as the process's actions: SIGSYS (sud.c), and
 * SIGTRAP in rewrite mode; and signals.c's for SIGSEGV and SIGBUS, the
 * faults of the runtime's accesses to the program's memory; and its
 * tty_handler for SIGTTIN and SIGTTOU where the program handles them (the
 * proxies open those only for a call: proxy.c). */
int intercept_install(void)
{
	int err = sud_install(sigsys_entry);
	long r = 0;

	if (!err)
		err = signal_fault_install();
	if (!err)
		err = signal_tty_capture();
	if (!err && dt_rewrite_on)
		r = sys_call4(SYS_rt_sigaction, SIGTRAP, &sigtrap_action, &dt_app_sigtrap, 8);
	return err ? err : r < 0 ? (int)r : 0;
}

/* Before a site is staged with int3 (rewrite.c): is the kernel's SIGTRAP
 * action ours?  A thread that is not detached calls sigaction natively and
 * may have replaced it; its action is then the program's wish, and ours goes
 * back.  False: it cannot be installed, the site is not staged. */
bool intercept_own_sigtrap(void)
{
	struct ksigaction cur;

	if (sys_call4(SYS_rt_sigaction, SIGTRAP, NULL, &cur, 8) < 0)
		return false;
	if (cur.handler == sigtrap_action.handler)
		return true;
	dt_app_sigtrap = cur;
	return sys_call4(SYS_rt_sigaction, SIGTRAP, &sigtrap_action, NULL, 8) == 0;
}

/* A thread met the int3 of a site being rewritten (rewrite.c stages the
 * patch with it), or a SIGTRAP that is the program's. */
static void sigtrap_handler(int sig, siginfo_t *si, void *ctx)
{
	if (si->si_code == SI_KERNEL && rewrite_int3(ctx)) {
		if (dt_self)
			dt_self->stats->int3_hits++;
		return;
	}
	signal_deliver_app(&dt_app_sigtrap, sig, si, ctx, si->si_code == SI_KERNEL);
}

static void trap(struct dt_thread *t, siginfo_t *si, ucontext_t *uc, bool moved);

/* A trap on the program's alternate stack runs on ours (stack.c,
 * stack_trap_move): there first, then the program's stack below what is
 * still in use is armed for the program's handlers.  stack_trap_moved says
 * so to a trap nested under this one's wait (a handler's call), which
 * moves to the level below.  A handler that leaves the wait by siglongjmp
 * leaves the count up: the next trap from code on no alternate stack moves
 * all the same (nothing of ours is in use then) and sets it to 0. */
static void trap_moved(void *si, void *uc, uintptr_t live)
{
	/* at a lower level, a trap nested under another's wait: on the way
	 * back the program's stack keeps what the kernel saved
	 * (stack_on_return) */
	bool top = stack_trap_moved(dt_self) == 0;

	stack_trap_arm_below(dt_self, live);
	/* the program's signals may come (blocked by sigsys_handler; the mask
	 * they were taken with is the frame's: SIGSYS's action adds none) */
	sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &((ucontext_t *)uc)->uc_sigmask, NULL, 8);
	trap(dt_self, si, uc, top);
	/* dt_self again: a fork child is no detached thread when its fork
	 * returns here (lifecycle.c), dt_self is NULL then (its calls do not
	 * trap: nothing moves onto our stack).  The program's signals wait
	 * from the clear until the SIGSYS frame's rt_sigreturn: our frames on
	 * the way back lie where a handler's trap would move (stack.c) */
	if (dt_self)
		stack_trap_leaves(dt_self, (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RSP]);
}

/* A trap from code on no alternate stack whose frame the kernel wrote at
 * the top of the program's (intercept_entry.S says why it left it): here
 * on our stack, TRAP_COPY_ROOM below the top of its signal half.  The frame
 * (ucontext, siginfo, and the FPU state its fpregs points to, extended_size
 * bytes as the kernel's software-reserved bytes say) is copied into that
 * room, 64-byte aligned as XRSTOR wants it, and the trap returns from the
 * copy: the program's stack is read, never written.  With the frame copied,
 * nothing of ours is in use there: the whole stack is armed again
 * (stack_real), and a signal during the call runs its handler at its top,
 * as natively (an 8 KiB stack holds it: LTP's sigaltstack01).  A frame too
 * large for the room (none is, today) stays where it is, below what is
 * armed (stack_trap_arm_below). */
void sigsys_moved(int sig, siginfo_t *si, ucontext_t *uc)
{
	struct dt_thread *t = dt_self;
	uintptr_t top = t->stack_lo + STACK_SIGNAL_SIZE, lo = (uintptr_t)uc;
	uintptr_t hi = (uintptr_t)si + sizeof(*si), fp = (uintptr_t)uc->uc_mcontext.fpregs;
	ucontext_t *run = uc;
	stack_t real;

	(void)sig;
	if (fp) {
		/* struct _fpx_sw_bytes at 464 of the FXSAVE area: magic1,
		 * extended_size (the XSAVE area and magic2); without magic1, the
		 * 512-byte FXSAVE area alone */
		const uint32_t *sw = (const uint32_t *)(fp + 464);
		uintptr_t end = fp + (sw[0] == 0x46505853u /* FP_XSTATE_MAGIC1 */ ? sw[1] : 512);
		if (end > hi)
			hi = end;
	}
	stack_trap_moved(t);
	if (hi - lo + 128 <= TRAP_COPY_ROOM) {     /* 128: the alignment below */
		uintptr_t to = ((top - (hi - lo)) & ~(uintptr_t)63) - 64 + (lo & 63);

		memcpy((void *)to, uc, hi - lo);
		run = (ucontext_t *)to;
		si = (siginfo_t *)((uintptr_t)si - lo + to);
		if (fp)
			run->uc_mcontext.fpregs = (fpregset_t)(fp - lo + to);
		stack_real(t, &real);
		sys_call2(SYS_sigaltstack, &real, NULL);
	} else {
		stack_trap_arm_below(t, lo);
	}
	/* the program's stack is armed again: its signals may come (blocked
	 * by sigsys_entry; the mask they were taken with is the frame's) */
	sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &run->uc_sigmask, NULL, 8);
	trap(t, si, run, true);
	/* dt_self again: a fork child is no detached thread when its fork
	 * returns here (lifecycle.c), dt_self is NULL then (its calls do not
	 * trap: nothing moves onto the copy).  The program's signals wait from
	 * the clear until the rt_sigreturn, which puts the frame's mask back:
	 * a handler's trap taken between moved onto the copy (stack.c) */
	if (dt_self)
		stack_trap_leaves(dt_self, (uintptr_t)run->uc_mcontext.gregs[REG_RSP]);
	sys_sigreturn_at(run);
}

void sigsys_handler(int sig, siginfo_t *si, void *ctx)
{
	struct dt_thread *t = dt_self;
	uintptr_t top;

	if (si->si_code != SYS_USER_DISPATCH) {
		if (dt_is_proxy && si->si_code == SI_QUEUE && si->si_pid == dt_cfg.pid)
			proxy_interrupt_taken(ctx);
		else
			signal_deliver_app(&dt_app_sigsys, sig, si, ctx, false);
		return;
	}
	if (!t)
		dt_die("a system call trapped on a thread that is not detached (tid %ld)", sys_call0(SYS_gettid));
	if ((top = stack_trap_move(t, ctx))) {
		/* The program's signals wait until trap_moved has said the top
		 * is in use and armed the program's stack below this frame: a
		 * handler's trap taken in between moved to the same top, over
		 * our frames (a crash), and one that set its stack without
		 * SS_AUTODISARM has it armed whole (stack_on_return), so a
		 * signal taken while we run on ours wrote its frame at its top,
		 * over the handler under this trap. */
		sys_call4(SYS_rt_sigprocmask, SIG_BLOCK, &stack_trap_blocked, NULL, 8);
		sys_run_on(trap_moved, si, ctx, top);
	} else
		trap(t, si, ctx, false);
}

/* One trapped call of the detached thread t: dispatched, its result in the
 * frame's rax (moved: on our stack, trap_moved). */
static void trap(struct dt_thread *t, siginfo_t *si, ucontext_t *uc, bool moved)
{
	greg_t *g = uc->uc_mcontext.gregs;
	long a[6];

	/* Counted before the call: it may not return (exit, execve).  A trap
	 * at a site already rewritten (rewrite.h, TRAP_AT_REWRITTEN) is a
	 * retrap; the others are the warm-up's, at most one per rewritten
	 * site, and those at sites left trapping. */
	switch (rewrite_site(t, (uintptr_t)si->si_call_addr - 2, g)) {
	case TRAP_AT_REWRITTEN:
		t->stats->retraps++;
		break;
	case TRAP_REWROTE:
		t->stats->traps++;
		break;
	case TRAP_LEFT_TRAPPING:
		t->stats->traps++;
		if (dt_rewrite_on)
			t->stats->traps_refused++;
		break;
	}
	a[0] = g[REG_RDI];
	a[1] = g[REG_RSI];
	a[2] = g[REG_RDX];
	a[3] = g[REG_R10];
	a[4] = g[REG_R8];
	a[5] = g[REG_R9];
	g[REG_RAX] = dt_dispatch(t, si->si_syscall, a, rewrite_trap_ip((uintptr_t)g[REG_RIP]), uc,
				 (uintptr_t)g[REG_RSP]);
	stack_on_return(t, uc, moved);
}
