/* Where each system call of a detached thread is carried out.
 *
 * The default is the paper's: forward it to the proxy.  The table below
 * holds the exceptions, one row per call with the reason, in one place:
 *   LOCAL    runs on the detached thread itself (its meaning is the thread)
 *   MIRROR   runs locally, then on the proxy too (per-thread kernel context
 *            that later forwarded calls depend on: credentials, namespaces)
 *   EMULATE  answered without the kernel
 *   a fn     decided per call by a function below
 * tid_arg / path_arg: forwarded, but an argument naming the caller
 * implicitly (pid 0, /proc/thread-self) is first made to name the detached
 * thread instead of the proxy.
 */
#include "runtime/runtime.h"

#include <errno.h>
#include <stdatomic.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs[REG_RAX]) == 144, "UC_RAX in stubs.S");

/* SIGSYS carries our traps (see do_sigprocmask) */
#define SIGSYS_BIT (1ull << (SIGSYS - 1))

enum action { FORWARD = 0, LOCAL, MIRROR, EMULATE, SPECIAL };

typedef long (*special_fn)(struct dt_thread *t, long nr, long a[6], ucontext_t *uc);

struct rule {
	uint8_t action;
	int8_t tid_arg;      /* 1 + index of a pid/tid argument where 0 means "me" */
	int8_t path_arg;     /* 1 + index of a path argument */
	special_fn fn;
	const char *why;
};

static long do_exit(struct dt_thread *, long, long *, ucontext_t *);
static long do_exit_group(struct dt_thread *, long, long *, ucontext_t *);
static long do_clone(struct dt_thread *, long, long *, ucontext_t *);
static long do_execve(struct dt_thread *, long, long *, ucontext_t *);
static long do_sigreturn(struct dt_thread *, long, long *, ucontext_t *);
static long do_sigaction(struct dt_thread *, long, long *, ucontext_t *);
static long do_futex(struct dt_thread *, long, long *, ucontext_t *);
static long do_sigprocmask(struct dt_thread *, long, long *, ucontext_t *);
static long do_sigsuspend(struct dt_thread *, long, long *, ucontext_t *);
static long do_sigaltstack(struct dt_thread *, long, long *, ucontext_t *);
static long do_masked_wait(struct dt_thread *, long, long *, ucontext_t *);
static long do_sleep(struct dt_thread *, long, long *, ucontext_t *);
static long do_kill(struct dt_thread *, long, long *, ucontext_t *);
static long do_thread_signal(struct dt_thread *, long, long *, ucontext_t *);
static long do_getrusage(struct dt_thread *, long, long *, ucontext_t *);
static long do_thread_clock(struct dt_thread *, long, long *, ucontext_t *);
static long do_priority(struct dt_thread *, long, long *, ucontext_t *);
static long do_prctl(struct dt_thread *, long, long *, ucontext_t *);
static long do_gettid(struct dt_thread *, long, long *, ucontext_t *);
static long do_setscheduler(struct dt_thread *, long, long *, ucontext_t *);
static long do_getcpu(struct dt_thread *, long, long *, ucontext_t *);
static long do_sched_yield(struct dt_thread *, long, long *, ucontext_t *);

#define R_LOCAL(why_)        { .action = LOCAL, .why = why_ }
#define R_MIRROR(why_)       { .action = MIRROR, .why = why_ }
#define R_FN(fn_, why_)      { .action = SPECIAL, .fn = fn_, .why = why_ }
#define R_EMU(fn_, why_)     { .action = EMULATE, .fn = fn_, .why = why_ }
#define R_TID(i, why_)       { .action = FORWARD, .tid_arg = (i) + 1, .why = why_ }
#define R_PATH(i)            { .action = FORWARD, .path_arg = (i) + 1, .why = "may name /proc/thread-self" }

static const struct rule rules[DT_NR_SYSCALLS] = {
	/* thread lifecycle */
	[SYS_exit]            = R_FN(do_exit, "ends the calling thread; its proxy ends first"),
	[SYS_exit_group]      = R_FN(do_exit_group, "statistics are written, then the process ends"),
	[SYS_clone]           = R_FN(do_clone, "the child is a copy of the calling thread"),
	[SYS_clone3]          = R_FN(do_clone, "the child is a copy of the calling thread"),
	[SYS_fork]            = R_FN(do_clone, "the child is a copy of the calling thread"),
	[SYS_vfork]           = R_FN(do_clone, "the child borrows the calling thread's stack"),
	[SYS_execve]          = R_FN(do_execve, "replaces the caller's image; detached state is passed on"),
	[SYS_execveat]        = R_FN(do_execve, "replaces the caller's image; detached state is passed on"),
	/* per-thread registrations */
	[SYS_set_tid_address] = R_LOCAL("clear_child_tid belongs to the calling thread"),
	[SYS_set_robust_list] = R_LOCAL("the robust futex list belongs to the calling thread"),
	[SYS_get_robust_list] = R_LOCAL("pid 0 is the calling thread"),
	[SYS_rseq]            = R_LOCAL("rseq area of the calling thread"),
	[SYS_arch_prctl]      = R_LOCAL("FS/GS base of the calling thread"),
	[SYS_set_mempolicy]   = R_LOCAL("memory policy of the calling thread"),
	[SYS_get_mempolicy]   = R_LOCAL("memory policy of the calling thread"),
	[SYS_personality]     = R_LOCAL("personality of the calling task"),
	[SYS_restart_syscall] = R_LOCAL("continues the calling thread's interrupted call"),
	/* per-thread signal state */
	[SYS_rt_sigprocmask]  = R_FN(do_sigprocmask, "the signal mask is the calling thread's; SIGSYS stays open"),
	[SYS_rt_sigreturn]    = R_FN(do_sigreturn, "returns from a handler on the calling thread"),
	[SYS_rt_sigsuspend]   = R_FN(do_sigsuspend, "waits for signals to the calling thread"),
	[SYS_rt_sigtimedwait] = R_LOCAL("dequeues signals of the calling thread"),
	[SYS_rt_sigpending]   = R_LOCAL("pending set of the calling thread"),
	[SYS_sigaltstack]     = R_FN(do_sigaltstack, "alternate stack of the calling thread"),
	[SYS_rt_sigaction]    = R_FN(do_sigaction, "SIGSYS is the runtime's; the rest is process-wide"),
	[SYS_kill]            = R_FN(do_kill, "a signal to ourselves is delivered before kill returns"),
	[SYS_tgkill]          = R_FN(do_thread_signal, "raise() and abort() rely on synchronous delivery"),
	[SYS_tkill]           = R_FN(do_thread_signal, "raise() and abort() rely on synchronous delivery"),
	[SYS_rt_tgsigqueueinfo] = R_FN(do_thread_signal, "a signal to ourselves is delivered at once"),
	[SYS_rt_sigqueueinfo] = R_FN(do_kill, "a signal to ourselves is delivered at once"),
	[SYS_ppoll]           = R_FN(do_masked_wait, "the mask is the calling thread's; no fds: a sleep"),
	[SYS_pselect6]        = R_FN(do_masked_wait, "the mask is the calling thread's; no fds: a sleep"),
	/* timed waits: in user space against the TSC, no Linux timer (clock.c) */
	[SYS_clock_nanosleep] = R_FN(do_sleep, "served in user space: no Linux timer"),
	[SYS_nanosleep]       = R_FN(do_sleep, "served in user space: no Linux timer"),
	[SYS_select]          = R_FN(do_sleep, "no fds: a sleep, served in user space"),
	[SYS_poll]            = R_FN(do_sleep, "no fds: a sleep, served in user space"),
	[SYS_epoll_pwait]     = R_FN(do_masked_wait, "the mask argument is for the calling thread"),
	[SYS_epoll_pwait2]    = R_FN(do_masked_wait, "the mask argument is for the calling thread"),
	/* PI futexes: the kernel checks the owner tid in the futex word */
	[SYS_futex]           = R_FN(do_futex, "PI operations name the caller as owner"),
	/* credentials and kernel context the proxy must share */
	[SYS_setuid]          = R_MIRROR("credentials are per thread"),
	[SYS_setgid]          = R_MIRROR("credentials are per thread"),
	[SYS_setreuid]        = R_MIRROR("credentials are per thread"),
	[SYS_setregid]        = R_MIRROR("credentials are per thread"),
	[SYS_setresuid]       = R_MIRROR("credentials are per thread"),
	[SYS_setresgid]       = R_MIRROR("credentials are per thread"),
	[SYS_setfsuid]        = R_MIRROR("credentials are per thread"),
	[SYS_setfsgid]        = R_MIRROR("credentials are per thread"),
	[SYS_setgroups]       = R_MIRROR("credentials are per thread"),
	[SYS_capset]          = R_MIRROR("capabilities are per thread"),
	[SYS_unshare]         = R_MIRROR("fs, files and namespaces of the calling thread"),
	[SYS_setns]           = R_MIRROR("namespaces of the calling thread"),
	[SYS_seccomp]         = R_MIRROR("filters apply to the calling thread"),
	[SYS_prctl]           = R_FN(do_prctl, "options act on the calling thread"),
	/* calls naming the caller implicitly */
	[SYS_sched_setaffinity] = R_TID(0, "pid 0 is the calling thread"),
	[SYS_sched_getaffinity] = R_TID(0, "pid 0 is the calling thread"),
	[SYS_sched_setscheduler] = R_FN(do_setscheduler, "pid 0 is the calling thread; RT while throttled is warned"),
	[SYS_sched_getscheduler] = R_TID(0, "pid 0 is the calling thread"),
	[SYS_sched_setparam]  = R_TID(0, "pid 0 is the calling thread"),
	[SYS_sched_getparam]  = R_TID(0, "pid 0 is the calling thread"),
	[SYS_sched_setattr]   = R_TID(0, "pid 0 is the calling thread"),
	[SYS_sched_getattr]   = R_TID(0, "pid 0 is the calling thread"),
	[SYS_sched_rr_get_interval] = R_TID(0, "pid 0 is the calling thread"),
	[SYS_perf_event_open] = R_TID(1, "pid 0 is the calling thread"),
	[SYS_getpriority]     = R_FN(do_priority, "PRIO_PROCESS 0 is the calling thread"),
	[SYS_setpriority]     = R_FN(do_priority, "PRIO_PROCESS 0 is the calling thread"),
	[SYS_ioprio_get]      = R_FN(do_priority, "IOPRIO_WHO_PROCESS 0 is the calling thread"),
	[SYS_ioprio_set]      = R_FN(do_priority, "IOPRIO_WHO_PROCESS 0 is the calling thread"),
	[SYS_getrusage]       = R_FN(do_getrusage, "RUSAGE_THREAD is the calling thread"),
	[SYS_clock_gettime]   = R_FN(do_thread_clock, "CLOCK_THREAD_CPUTIME_ID is the calling thread's"),
	[SYS_clock_getres]    = R_FN(do_thread_clock, "CLOCK_THREAD_CPUTIME_ID is the calling thread's"),
	[SYS_timer_create]    = R_FN(do_thread_clock, "CLOCK_THREAD_CPUTIME_ID is the calling thread's"),
	[SYS_gettid]          = R_EMU(do_gettid, "the answer is known"),
	[SYS_getcpu]          = R_EMU(do_getcpu, "the detached thread stays on its CPU"),
	[SYS_sched_yield]     = R_EMU(do_sched_yield, "would yield the proxy; alone on its CPU there is nobody to yield to"),
	/* paths */
	[SYS_open] = R_PATH(0), [SYS_openat] = R_PATH(1), [SYS_openat2] = R_PATH(1),
	[SYS_stat] = R_PATH(0), [SYS_lstat] = R_PATH(0), [SYS_newfstatat] = R_PATH(1),
	[SYS_statx] = R_PATH(1), [SYS_readlink] = R_PATH(0), [SYS_readlinkat] = R_PATH(1),
	[SYS_access] = R_PATH(0), [SYS_faccessat] = R_PATH(1), [SYS_faccessat2] = R_PATH(1),
	[SYS_chdir] = R_PATH(0),
};

static inline void count(struct dt_thread *t, long nr, volatile uint64_t *kind)
{
	(*kind)++;
	if ((unsigned long)nr < DT_NR_SYSCALLS)
		t->stats->per_nr[nr]++;
}

static inline long local_call(struct dt_thread *t, long nr, const long a[6])
{
	count(t, nr, &t->stats->local);
	return sys_call6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static inline long forward(struct dt_thread *t, long nr, const long a[6])
{
	/* A call made by a signal handler while our proxy is busy with the call
	 * that handler interrupted: the proxy cannot take it, this thread can.
	 * A watched thread (threads.c) has no proxy: its calls are its own. */
	/* Below the waiting frame (stacks grow down) is a handler that runs on
	 * top of the wait; above it, a handler that longjmp'd out of it. */
	if (t->depth > 0 && (uintptr_t)__builtin_frame_address(0) > t->wait_frame)
		proxy_abandoned(t);
	if (t->depth > 0 || t->observed)
		return local_call(t, nr, a);
	count(t, nr, &t->stats->forwarded);
	return proxy_forward(t, nr, a);
}

/* "/proc/thread-self/..." -> "/proc/<pid>/task/<tid>/..." in t->path. */
static const char *thread_self_path(struct dt_thread *t, const char *p)
{
	static const char prefix[] = "/proc/thread-self";
	const size_t plen = sizeof(prefix) - 1;
	char num[24], *o = t->path, *end = t->path + sizeof(t->path) - 1;
	size_t i;

	if (!p || strncmp(p, prefix, plen) || (p[plen] && p[plen] != '/'))
		return p;
	memcpy(o, "/proc/", 6);
	o += 6;
	for (int k = 0; k < 2; k++) {
		long v = k ? t->tid : dt_cfg.pid;
		i = sizeof(num);
		do { num[--i] = (char)('0' + v % 10); v /= 10; } while (v);
		memcpy(o, num + i, sizeof(num) - i);
		o += sizeof(num) - i;
		if (!k) {
			memcpy(o, "/task/", 6);
			o += 6;
		}
	}
	for (p += plen; *p && o < end; )
		*o++ = *p++;
	*o = '\0';
	return *p ? NULL : t->path;   /* NULL: too long */
}

long dt_dispatch(struct dt_thread *t, long nr, long a[6], ucontext_t *uc)
{
	const struct rule *r = (unsigned long)nr < DT_NR_SYSCALLS ? &rules[nr] : &rules[0];
	long b[6];

	if (t->observed) {
		/* a watched thread: detached now if a rule chose it, else watched */
		if (t->pending_cpu >= 0)
			detach_thread(t, t->pending_cpu);
		else
			observe_call(t, nr, a);
	}
	if ((unsigned long)nr >= DT_NR_SYSCALLS)
		return forward(t, nr, a);       /* the kernel will say ENOSYS */
	switch (r->action) {
	case LOCAL:
		return local_call(t, nr, a);
	case MIRROR: {
		long ret = local_call(t, nr, a);
		/* The proxy follows; it may already have (glibc's SIGSETXID broadcast
		 * reaches it too), so its answer is not the program's. */
		if (ret >= 0 && t->depth == 0 && !t->observed)
			proxy_forward(t, nr, a);
		return ret;
	}
	case EMULATE:
		if (t->observed)
			return local_call(t, nr, a);
		count(t, nr, &t->stats->emulated);
		return r->fn(t, nr, a, uc);
	case SPECIAL:
		return r->fn(t, nr, a, uc);
	}
	if (r->tid_arg || r->path_arg) {
		memcpy(b, a, sizeof(b));
		if (r->tid_arg && b[r->tid_arg - 1] == 0)
			b[r->tid_arg - 1] = t->tid;
		if (r->path_arg) {
			const char *p = thread_self_path(t, (const char *)b[r->path_arg - 1]);
			if (!p)
				return -ENAMETOOLONG;
			b[r->path_arg - 1] = (long)p;
		}
		return forward(t, nr, b);
	}
	return forward(t, nr, a);
}

/* ---- lifecycle ----------------------------------------------------------- */

static long do_exit(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	long code = a[0];

	(void)uc;
	if (!t->observed) {
		proxy_stop(t);
		release_cpu(t->cpu);    /* for the next thread a rule chooses */
	}
	intercept_disarm(t);
	count(t, nr, &t->stats->local);
	dt_self = NULL;
	thread_free(t);                 /* nothing of it is used from here */
	return sys_call1(nr, code);
}

static long do_exit_group(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	long none[6] = { 0 };

	(void)uc;
	dt_exit_code = (int)a[0];
	if (t->observed) {
		t->selector = 0;        /* libc may run here: let its calls through */
		stats_finish();
	} else if (t->depth == 0) {
		proxy_forward(t, DT_CMD_STATS, none);
	}
	return local_call(t, nr, a);
}

/* Copies the trap's signal context (ucontext and xsave area) below hi, for
 * a child that resumes the program elsewhere: rax 0, rsp sp.  A new thread
 * starts without an alternate signal stack, as the kernel would give it. */
#define KERNEL_UCONTEXT_SIZE 304   /* struct ucontext of the kernel, x86-64 */
static void *frame_copy(ucontext_t *uc, uintptr_t hi, uintptr_t sp, bool new_thread)
{
	const char *fp = (const char *)uc->uc_mcontext.fpregs;
	uint32_t magic1, fpsize = 512;
	uintptr_t fp_dst, uc_dst;
	ucontext_t *c;

	if (fp) {
		/* struct _fpx_sw_bytes sits at byte 464 of the fxsave image */
		memcpy(&magic1, fp + 464, 4);
		if (magic1 == 0x46505853u)       /* FP_XSTATE_MAGIC1 */
			memcpy(&fpsize, fp + 468, 4);   /* extended_size */
	}
	fp_dst = (hi - fpsize) & ~(uintptr_t)63;          /* xrstor needs 64 */
	uc_dst = (fp_dst - KERNEL_UCONTEXT_SIZE) & ~(uintptr_t)63;
	if (fp)
		memcpy((void *)fp_dst, fp, fpsize);
	memcpy((void *)uc_dst, uc, KERNEL_UCONTEXT_SIZE);
	c = (ucontext_t *)uc_dst;
	c->uc_mcontext.fpregs = fp ? (struct _libc_fpstate *)fp_dst : NULL;
	c->uc_mcontext.gregs[REG_RAX] = 0;
	c->uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
	if (new_thread) {
		c->uc_stack.ss_sp = NULL;
		c->uc_stack.ss_size = 0;
		c->uc_stack.ss_flags = SS_DISABLE;
	}
	return c;
}

static long do_clone(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	unsigned long flags;
	uintptr_t stack = 0;
	void *child_uc = NULL, *parent_uc = NULL;
	long ret;

	if (!uc) {                  /* rewrite mode: the child needs a frame */
		t->need_trap = true;
		return 0;
	}

	switch (nr) {
	case SYS_fork:
		flags = SIGCHLD;
		break;
	case SYS_vfork:
		flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
		break;
	case SYS_clone:
		flags = (unsigned long)a[0];
		stack = (uintptr_t)a[1];
		break;
	default: {                              /* clone3 */
		struct clone_args *ca = (struct clone_args *)a[0];
		if ((unsigned long)a[1] < 64 || !ca)
			return local_call(t, nr, a);    /* the kernel says why */
		flags = ca->flags;
		if (ca->stack)
			stack = (uintptr_t)(ca->stack + ca->stack_size);
		break;
	}
	}
	if (stack) {
		/* A stack of its own: the frame goes just below its top, memory the
		 * child has not used yet. */
		child_uc = frame_copy(uc, stack - 256, stack, (flags & (CLONE_VM | CLONE_VFORK)) == CLONE_VM);
	} else if (flags & CLONE_VM) {
		/* Our stack, shared: the frame goes to a buffer of ours.  The child
		 * may overwrite the handler's frames, so a vfork parent leaves
		 * through the same copy when the child has released it. */
		child_uc = frame_copy(uc, (uintptr_t)t->frame + sizeof(t->frame),
				      (uintptr_t)uc->uc_mcontext.gregs[REG_RSP], !(flags & CLONE_VFORK));
		if (flags & CLONE_VFORK)
			parent_uc = child_uc;
	}
	count(t, nr, &t->stats->local);
	ret = sys_clone_resume(nr, a[0], a[1], a[2], a[3], a[4], child_uc, parent_uc);
	if (ret == 0)
		dt_fork_child();   /* a fork child: private memory, back here */
	else if (flags & CLONE_VFORK)
		dt_vfork_parent_resumed();
	return ret;
}

static long do_execve(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)uc;
	count(t, nr, &t->stats->local);
	return env_execve(nr, a);
}

/* ---- signals ------------------------------------------------------------- */

extern char __start_detach_wait[], __stop_detach_wait[] DT_HIDDEN;

static long do_sigreturn(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)a;
	if (!uc) {                  /* rewrite mode: never here (trampoline.S) */
		t->need_trap = true;
		return 0;
	}
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
		if (signo >= 1 && signo <= 64)
			t->intr_signo = signo;
	}
	count(t, nr, &t->stats->local);
	/* Resume the program's frame directly; ours is dropped.  The kernel
	 * restores its mask and registers, as the handler's return would. */
	sys_sigreturn_at(frame);
}

/* Signals whose handler the program installed without SA_SIGINFO and we
 * installed with it: the kernel writes the siginfo into a handler's frame
 * only with SA_SIGINFO, and do_sigreturn reads the signal number there.  A
 * handler that takes one argument ignores the other two. */
static _Atomic uint64_t siginfo_added;

static long do_sigaction(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	struct ksigaction act, *old = (struct ksigaction *)a[2];
	uint64_t bit = a[0] >= 1 && a[0] <= 64 ? 1ull << (a[0] - 1) : 0;
	bool added_before = atomic_load(&siginfo_added) & bit, add = false;
	long b[6], ret;

	(void)uc;
	if ((unsigned long)a[3] != 8)
		return forward(t, nr, a);               /* the kernel says EINVAL */
	if (a[0] == SIGSYS) {
		/* SIGSYS carries our traps: keep the program's wish, answer from it. */
		count(t, nr, &t->stats->emulated);
		if (old)
			memcpy(old, &dt_app_sigsys, sizeof(dt_app_sigsys));
		if (a[1])
			memcpy(&dt_app_sigsys, (void *)a[1], sizeof(dt_app_sigsys));
		return 0;
	}
	memcpy(b, a, sizeof(b));
	if (a[1]) {
		memcpy(&act, (void *)a[1], sizeof(act));
		/* a handler that blocks SIGSYS would turn our next trap fatal */
		act.mask &= ~SIGSYS_BIT;
		add = act.handler != SIG_DFL && act.handler != SIG_IGN && !(act.flags & SA_SIGINFO);
		if (add)
			act.flags |= SA_SIGINFO;
		b[1] = (long)&act;
	}
	ret = forward(t, nr, b);
	if (ret < 0)
		return ret;
	if (old && added_before)
		old->flags &= ~(unsigned long)SA_SIGINFO;
	if (a[1]) {
		if (add)
			atomic_fetch_or(&siginfo_added, bit);
		else
			atomic_fetch_and(&siginfo_added, ~bit);
	}
	return ret;
}

/* SIGSYS carries our traps: Syscall User Dispatch kills a thread that traps
 * with SIGSYS blocked.  So the detached thread never blocks it; the program
 * is told what it asked for (t->app_blocks_sigsys) and a SIGSYS sent to it
 * meanwhile goes to the program's handler through chain_app_sigsys. */
static long do_sigprocmask(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	/* In the trap handler the kernel's mask is the one the handler's
	 * rt_sigreturn restores from the frame: the change goes there.  From the
	 * trampoline (rewrite mode, no frame) it goes to the kernel directly. */
	uint64_t real, *frame_mask = uc ? (uint64_t *)&uc->uc_sigmask : &real, cur, set;
	const uint64_t never = SIGSYS_BIT | (1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1));
	bool app = t->app_blocks_sigsys;

	count(t, nr, &t->stats->local);
	if (a[3] != 8)
		return -EINVAL;
	if (!uc)
		sys_call4(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &real, 8);
	cur = *frame_mask;
	if (a[1]) {
		set = *(const uint64_t *)a[1];
		switch (a[0]) {
		case SIG_BLOCK:
			cur |= set;
			app = app || (set & SIGSYS_BIT);
			break;
		case SIG_UNBLOCK:
			cur &= ~set;
			app = app && !(set & SIGSYS_BIT);
			break;
		case SIG_SETMASK:
			cur = set;
			app = set & SIGSYS_BIT;
			break;
		default:
			return -EINVAL;
		}
	}
	if (a[2])
		*(uint64_t *)a[2] = *frame_mask | (t->app_blocks_sigsys ? SIGSYS_BIT : 0);
	*frame_mask = cur & ~never;
	t->app_blocks_sigsys = app;
	if (!uc)
		sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &real, NULL, 8);
	return 0;
}

static long do_sigaltstack(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	/* rt_sigreturn also restores the alternate stack from the frame: set it
	 * here (for the checks and the old value) and in the frame. */
	long ret = local_call(t, nr, a);

	if (ret == 0 && a[0] && uc)
		sys_call2(SYS_sigaltstack, NULL, &uc->uc_stack);
	return ret;
}

static long do_sigsuspend(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	uint64_t set;
	long b[6];

	(void)uc;
	memcpy(b, a, sizeof(b));
	if (a[0] && a[1] == 8) {
		set = *(const uint64_t *)a[0] & ~SIGSYS_BIT;
		b[0] = (long)&set;
	}
	return local_call(t, nr, b);
}

/* Pure sleeps: served by clock.c; anything with descriptors is forwarded. */
static long do_sleep(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)uc;
	if (t->observed)
		return forward(t, nr, a);
	switch (nr) {
	case SYS_clock_nanosleep:
		if (!timed_wait_clock_ok((clockid_t)a[0]))
			return forward(t, nr, a);
		count(t, nr, &t->stats->emulated);
		return timed_sleep(t, (clockid_t)a[0], (int)a[1], (const struct timespec *)a[2],
				   (struct timespec *)a[3]);
	case SYS_nanosleep:
		count(t, nr, &t->stats->emulated);
		return timed_sleep(t, CLOCK_MONOTONIC, 0, (const struct timespec *)a[0], (struct timespec *)a[1]);
	case SYS_select:
		if (a[0] != 0 && (a[1] || a[2] || a[3]))
			return forward(t, nr, a);
		count(t, nr, &t->stats->emulated);
		return timed_select(t, (struct timeval *)a[4]);
	case SYS_poll:
		if (a[1] != 0)
			return forward(t, nr, a);
		count(t, nr, &t->stats->emulated);
		return timed_poll(t, (int)a[2]);
	}
	return forward(t, nr, a);
}

/* ppoll, pselect6, epoll_pwait(2): the mask is the detached thread's for the
 * length of the wait; the proxy keeps its own (all blocked) and the wait is
 * interrupted the usual way when a handler runs here.  ppoll and pselect6
 * without descriptors are sleeps, served here like nanosleep. */
static long do_masked_wait(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	struct { const uint64_t *ss; size_t len; } psel, *pa = NULL;
	const uint64_t *mask;
	uint64_t m, old;
	long b[6], ret;

	(void)uc;
	if (nr == SYS_pselect6) {
		pa = (void *)a[5];
		mask = pa && pa->len == 8 ? pa->ss : NULL;
	} else {
		int i = nr == SYS_ppoll ? 3 : 4;
		mask = a[i + 1] == 8 ? (const uint64_t *)a[i] : NULL;
	}
	bool sleep = !t->observed &&
		     ((nr == SYS_ppoll && a[1] == 0) || (nr == SYS_pselect6 && (a[0] == 0 || !(a[1] || a[2] || a[3]))));

	if (!sleep && (!mask || t->depth > 0 || t->observed))
		return forward(t, nr, a);
	if (sleep) {
		count(t, nr, &t->stats->emulated);
	} else {
		/* the proxy waits with its own mask: the call goes without one */
		memcpy(b, a, sizeof(b));
		if (nr == SYS_pselect6) {
			psel.ss = NULL;
			psel.len = 8;
			b[5] = (long)&psel;
		} else {
			b[nr == SYS_ppoll ? 3 : 4] = 0;
		}
	}
	if (mask) {
		m = *mask & ~SIGSYS_BIT;
		sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &m, &old, 8);
	}
	ret = sleep ? timed_ppoll(t, (struct timespec *)(nr == SYS_ppoll ? a[2] : a[4])) : forward(t, nr, b);
	if (mask)
		sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
	return ret;
}

static long do_kill(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)uc;
	if (a[0] == dt_cfg.pid || a[0] == 0)
		return local_call(t, nr, a);
	return forward(t, nr, a);
}

static long do_thread_signal(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	long tid = nr == SYS_tkill ? a[0] : a[1];

	(void)uc;
	if (tid == t->tid)
		return local_call(t, nr, a);
	return forward(t, nr, a);
}

static long do_futex(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	int op = (int)a[1] & FUTEX_CMD_MASK;

	(void)uc;
	switch (op) {
	case FUTEX_LOCK_PI:
	case FUTEX_LOCK_PI2:
	case FUTEX_UNLOCK_PI:
	case FUTEX_TRYLOCK_PI:
	case FUTEX_WAIT_REQUEUE_PI:
	case FUTEX_CMP_REQUEUE_PI:
		return local_call(t, nr, a);
	}
	return forward(t, nr, a);
}

/* ---- implicit identity ------------------------------------------------------ */

static long do_getrusage(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)uc;
	if (a[0] == RUSAGE_THREAD)
		return local_call(t, nr, a);
	return forward(t, nr, a);
}

/* CLOCK_THREAD_CPUTIME_ID names the caller: use the detached thread's own
 * CPU-time clock id, MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED). */
static long do_thread_clock(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	long b[6];

	(void)uc;
	memcpy(b, a, sizeof(b));
	if (b[0] == CLOCK_THREAD_CPUTIME_ID)
		b[0] = (long)(int)((~(unsigned)t->tid << 3) | 6);
	return forward(t, nr, b);
}

/* The program makes its detached thread real-time itself (cyclictest -p 90):
 * a detached thread spins, so with RT throttling on it loses up to 50 ms of
 * every second.  Said once, as `detach run -P` would have. */
static long do_setscheduler(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	static const char msg[] = "detach: warning: the program gives its detached thread a real-time "
				  "policy while RT throttling is on: it spins, so it loses up to 50 ms of every "
				  "second when other tasks want its CPU (detach isolate turns throttling off)\n";
	static bool said;
	int policy = (int)a[1] & ~SCHED_RESET_ON_FORK;
	long b[6];

	(void)uc;
	if ((a[0] == 0 || a[0] == t->tid) && (policy == SCHED_FIFO || policy == SCHED_RR) &&
	    dt_cfg.rt_throttled && !said && !t->observed) {
		said = true;
		sys_call3(SYS_write, 2, msg, sizeof(msg) - 1);
	}
	memcpy(b, a, sizeof(b));
	if (b[0] == 0)
		b[0] = t->tid;
	return forward(t, nr, b);
}

static long do_priority(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	/* PRIO_PROCESS is 0, IOPRIO_WHO_PROCESS is 1 */
	long who_process = (nr == SYS_getpriority || nr == SYS_setpriority) ? PRIO_PROCESS : 1;
	long b[6];

	(void)uc;
	memcpy(b, a, sizeof(b));
	if (b[0] == who_process && b[1] == 0)
		b[1] = t->tid;
	return forward(t, nr, b);
}

static long do_prctl(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	long ret;

	(void)uc;
	ret = local_call(t, nr, a);
	switch (a[0]) {
	case PR_SET_SECCOMP:
	case PR_SET_NO_NEW_PRIVS:
	case PR_CAPBSET_DROP:
	case PR_SET_KEEPCAPS:
	case PR_SET_SECUREBITS:
		/* per-thread credentials: the proxy must follow */
		if (ret >= 0 && t->depth == 0 && !t->observed)
			proxy_forward(t, nr, a);
	}
	return ret;
}

static long do_gettid(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)nr; (void)a; (void)uc;
	return t->tid;
}

static long do_getcpu(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)nr; (void)uc;
	if (a[0])
		*(unsigned *)a[0] = (unsigned)t->cpu;
	if (a[1])
		*(unsigned *)a[1] = (unsigned)t->node;
	return 0;
}

static long do_sched_yield(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)t; (void)nr; (void)a; (void)uc;
	cpu_relax();
	return 0;
}
