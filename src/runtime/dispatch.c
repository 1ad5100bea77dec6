/* Where each system call of a detached thread is carried out.
 *
 * The default is the paper's: forward it to the proxy.  The table below
 * holds the exceptions, one row per call with the reason, in one place:
 *   LOCAL    runs on the detached thread itself (its meaning is the thread)
 *   MIRROR   runs locally, then on the proxy too (per-thread kernel context
 *            that later forwarded calls depend on: credentials, personality)
 *   RENEW    runs locally with the proxy gone, then a new proxy is made from
 *            the thread (namespaces, Landlock: call.c, proxy_renewed_around)
 *   EMULATE  answered without the kernel
 *   a fn     decided per call by a function below
 * tid_arg / path_arg: forwarded, but an argument naming the caller
 * implicitly (pid 0, /proc/thread-self) is first made to name the detached
 * thread instead of the proxy.
 */
#include "runtime/dispatch.h"
#include "runtime/clock.h"
#include "runtime/config.h"
#include "runtime/cputime.h"
#include "runtime/identity.h"
#include "runtime/lifecycle.h"
#include "runtime/membarrier.h"
#include "runtime/sandbox.h"
#include "runtime/sched.h"
#include "runtime/seccomp.h"
#include "runtime/signals.h"
#include "runtime/select.h"
#include "runtime/threads.h"
#include "runtime/uaccess.h"
#include "runtime/waits.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>

enum action { FORWARD = 0, LOCAL, MIRROR, RENEW, EMULATE, SPECIAL };

struct rule {
	uint8_t action;
	int8_t tid_arg;      /* 1 + index of a pid/tid argument where 0 means "me" */
	int8_t path_arg;     /* 1 + index of a path argument */
	int8_t sigfd_arg;    /* 1 + index of a descriptor: a signalfd makes the call local */
	call_fn *fn;
	const char *why;
};

#define R_LOCAL(why_)        { .action = LOCAL, .why = why_ }
#define R_MIRROR(why_)       { .action = MIRROR, .why = why_ }
#define R_RENEW(why_)        { .action = RENEW, .why = why_ }
#define R_FN(fn_, why_)      { .action = SPECIAL, .fn = fn_, .why = why_ }
#define R_EMU(fn_, why_)     { .action = EMULATE, .fn = fn_, .why = why_ }
#define R_TID(i, why_)       { .action = FORWARD, .tid_arg = (i) + 1, .why = why_ }
#define R_PATH(i)            { .action = FORWARD, .path_arg = (i) + 1, .why = "may name /proc/thread-self" }
#define R_SIGFD(i)           { .action = FORWARD, .sigfd_arg = (i) + 1, \
			       .why = "a signalfd reads the signals of the calling thread" }

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
	[SYS_personality]     = R_MIRROR("personality of the calling task: forwarded calls honour it too"),
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
	/* signalfd: reading (or polling) one dequeues the caller's pending
	 * signals, so calls on one run here (signals.c tracks which fds are) */
	[SYS_signalfd]        = R_FN(do_fd_track, "the descriptor is remembered as a signalfd"),
	[SYS_signalfd4]       = R_FN(do_fd_track, "the descriptor is remembered as a signalfd"),
	[SYS_read]            = R_SIGFD(0),
	[SYS_readv]           = R_SIGFD(0),
	[SYS_epoll_wait]      = R_FN(do_fd_wait, "a signalfd's set runs here; a busy-poll waits a little (waits.c)"),
	[SYS_close]           = R_FN(do_fd_track, "a closed signalfd is forgotten"),
	[SYS_close_range]     = R_FN(do_fd_track, "closed signalfds are forgotten"),
	[SYS_dup]             = R_FN(do_fd_track, "a copy of a signalfd is one"),
	[SYS_dup2]            = R_FN(do_fd_track, "a copy of a signalfd is one"),
	[SYS_dup3]            = R_FN(do_fd_track, "a copy of a signalfd is one"),
	[SYS_fcntl]           = R_FN(do_fd_track, "a copy of a signalfd is one"),
	[SYS_epoll_ctl]       = R_FN(do_fd_track, "an epoll set holding a signalfd reads the caller's signals"),
	/* tracing: the tracer is the thread that attached (or the parent
	 * thread of a PTRACE_TRACEME child); the kernel takes requests from it
	 * alone.  Waiting for tracees works from any thread of the group. */
	[SYS_ptrace]          = R_LOCAL("requests are accepted from the tracing thread only"),
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
	[SYS_capset]          = R_FN(do_capset, "capabilities are per thread; the proxy's copy names itself"),
	[SYS_unshare]         = R_RENEW("fs, files and namespaces of the calling thread"),
	[SYS_setns]           = R_RENEW("namespaces of the calling thread"),
	[SYS_landlock_restrict_self] = R_RENEW("a Landlock domain restricts the calling thread"),
	[SYS_keyctl]          = R_FN(do_keyctl, "joining a session keyring changes the calling thread"),
	[SYS_seccomp]         = R_FN(do_seccomp, "filters apply to the calling thread; strict mode is refused"),
	[SYS_prctl]           = R_FN(do_prctl, "options act on the calling thread"),
	/* calls naming the caller implicitly */
	/* the detached thread's own scheduling settings are kept (sched.c) */
	[SYS_sched_setaffinity] = R_FN(do_setaffinity, "the thread's own: kept by the runtime"),
	[SYS_sched_getaffinity] = R_FN(do_affinity, "the thread's own: kept by the runtime"),
	[SYS_sched_setscheduler] = R_FN(do_sched_set, "the thread's own: kept by the runtime"),
	[SYS_sched_setparam]  = R_FN(do_sched_set, "the thread's own: kept by the runtime"),
	[SYS_sched_setattr]   = R_FN(do_sched_set, "the thread's own: kept by the runtime"),
	[SYS_sched_getscheduler] = R_FN(do_sched_get, "the thread's own: kept by the runtime"),
	[SYS_sched_getparam]  = R_FN(do_sched_get, "the thread's own: kept by the runtime"),
	[SYS_sched_getattr]   = R_FN(do_sched_get, "the thread's own: kept by the runtime"),
	[SYS_sched_rr_get_interval] = R_TID(0, "pid 0 is the calling thread"),
	[SYS_perf_event_open] = R_TID(1, "pid 0 is the calling thread"),
	[SYS_getpriority]     = R_FN(do_priority, "PRIO_PROCESS 0 is the calling thread: its nice is kept"),
	[SYS_setpriority]     = R_FN(do_priority, "PRIO_PROCESS 0 is the calling thread: its nice is kept"),
	[SYS_ioprio_get]      = R_FN(do_priority, "IOPRIO_WHO_PROCESS 0 is the calling thread"),
	[SYS_ioprio_set]      = R_FN(do_priority, "IOPRIO_WHO_PROCESS 0 is the calling thread"),
	/* CPU time: the caller's clocks are the detached thread's, less the
	 * runtime's waiting (cputime.c) */
	[SYS_getrusage]       = R_FN(do_getrusage, "RUSAGE_THREAD is the calling thread; less the runtime's time"),
	[SYS_times]           = R_FN(do_times, "less the runtime's time"),
	[SYS_getrlimit]       = R_FN(do_rlimit, "RLIMIT_CPU is the program's while the runtime keeps it"),
	[SYS_setrlimit]       = R_FN(do_rlimit, "RLIMIT_CPU is the program's while the runtime keeps it"),
	[SYS_prlimit64]       = R_FN(do_rlimit, "RLIMIT_CPU is the program's while the runtime keeps it"),
	[SYS_clock_gettime]   = R_FN(do_cpu_clock, "every encoding of the caller's CPU clock is the detached thread's"),
	[SYS_clock_getres]    = R_FN(do_cpu_clock, "every encoding of the caller's CPU clock is the detached thread's"),
	[SYS_timer_create]    = R_FN(do_cpu_clock, "every encoding of the caller's CPU clock is the detached thread's"),
	[SYS_gettid]          = R_EMU(do_gettid, "the answer is known"),
	[SYS_getcpu]          = R_EMU(do_getcpu, "the detached thread stays on its CPU"),
	[SYS_sched_yield]     = R_EMU(do_sched_yield, "would yield the proxy; alone on its CPU there is nobody to yield to"),
	[SYS_membarrier]      = R_FN(do_membarrier, "the runtime's registration for its patches is not the program's"),
	/* paths */
	[SYS_open] = R_PATH(0), [SYS_openat] = R_PATH(1), [SYS_openat2] = R_PATH(1),
	[SYS_stat] = R_PATH(0), [SYS_lstat] = R_PATH(0), [SYS_newfstatat] = R_PATH(1),
	[SYS_statx] = R_PATH(1), [SYS_readlink] = R_PATH(0), [SYS_readlinkat] = R_PATH(1),
	[SYS_access] = R_PATH(0), [SYS_faccessat] = R_PATH(1), [SYS_faccessat2] = R_PATH(1),
	[SYS_chdir] = R_PATH(0),
};

/* "/proc/thread-self/..." -> "/proc/<pid>/task/<tid>/..." in t->path:
 * 0 and *p the path to pass on (the program's own when it names no
 * thread-self; also when it cannot be read: the kernel says EFAULT), or
 * -ENAMETOOLONG. */
static long thread_self_path(struct dt_thread *t, const char **p)
{
	static const char prefix[] = "/proc/thread-self";
	const size_t plen = sizeof(prefix) - 1;
	char num[24], head[sizeof(prefix) + 1], *o = t->path, *end = t->path + sizeof(t->path) - 1;
	size_t i;
	long n;

	/* the prefix and the byte after it, read as the kernel would */
	n = strncpy_from_user(head, *p, sizeof(head));
	if (n < (long)plen || memcmp(head, prefix, plen) || (head[plen] && head[plen] != '/'))
		return 0;
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
	n = strncpy_from_user(o, *p + plen, (size_t)(end - o) + 1);
	if (n < 0)
		return 0;                       /* the kernel says EFAULT */
	if (o + n > end)
		return -ENAMETOOLONG;
	*p = t->path;
	return 0;
}

/* Whether dt_dispatch carries nr out in general registers alone, so that
 * the trampoline need not save the vector state (rewrite.c): a plain
 * forward (forward(), proxy_forward, the wait), gettid, and the sleeps
 * when clock.c reads the clock through the vDSO directly.  Rewritten paths
 * use libc's string functions, which use vector registers; so do the
 * special functions and watched threads (the trampoline checks those).
 * Nothing on these paths may call into libc. */
bool dispatch_general_only(long nr)
{
	const struct rule *r = &rules[nr];

	if ((nr == SYS_nanosleep || nr == SYS_clock_nanosleep) && timed_wait_general_only())
		return true;                    /* do_sleep, clock.c: the vDSO's clock only */
	if (r->fn == do_fd_wait)
		return true;                    /* waits.c: a forward, or a local call */
	return nr == SYS_gettid || (r->action == FORWARD && !r->path_arg);
}

long dt_dispatch(struct dt_thread *t, long nr, long a[6], uintptr_t ip, ucontext_t *uc, uintptr_t sp)
{
	/* The kernel reads the number as 32 bits (do_syscall_64's int nr), so
	 * does the runtime: syscall(-1) is ENOSYS there, and no number of the
	 * program's is ever one of the proxy's commands (negative: thread.h),
	 * which -1 was (DT_CMD_QUIT: the proxy ended, the thread waited for it
	 * forever). */
	nr = (long)(uint32_t)nr;
	const struct rule *r = nr < DT_NR_SYSCALLS ? &rules[nr] : &rules[0];
	long b[6];

	/* First: a call from code that left a forwarded call's wait by
	 * siglongjmp cancels that call, whatever this one is.  Left to
	 * forward(), the depth the abandoned call left behind misled every
	 * path before it that asks whether a call is in flight: an unshare
	 * ran on the thread alone and the proxy stayed in the old namespace
	 * (proxy_renewed_around), a setuid was not made on the proxy
	 * (MIRROR).  The call is judged by the calling code's rsp (call.h,
	 * forget_abandoned_at): the trapped code's, or the program's at the
	 * trampoline's entry, not by a frame of ours, whose height depends on
	 * the path (a trap's frame on the signal half, the trampoline's
	 * vector save area, dispatch_sleep's frame).  Under its own
	 * expected-false test of depth: the common path falls through. */
	if (__builtin_expect(t->depth > 0, 0))
		forget_abandoned_at(t, sp);
	if (t->evicted)
		thread_end(t, THREAD_EVICTED); /* a thread pinned to its CPU took it over */
	if (t->observed && t->pending_cpu >= 0)
		detach_thread(t, t->pending_cpu);       /* a watched thread a rule chose */
	if (t->filters) {
		/* the program's seccomp filters judge its call, wherever it runs */
		long ret;
		switch (sandbox_judge(t, nr, a, ip, uc, &ret)) {
		case SANDBOX_RUN:
			break;
		case SANDBOX_DONE:
			return ret;
		case SANDBOX_END_THREAD:
			return do_exit(t, SYS_exit, (long[6]){ SIGSYS }, uc);
		}
	}
	if (t->observed)
		observe_call(t, nr, a);         /* a call that ran may choose it (select.c) */
	if ((unsigned long)nr >= DT_NR_SYSCALLS)
		return forward(t, nr, a);       /* the kernel will say ENOSYS */
	switch (r->action) {
	case LOCAL:
		return local_call(t, nr, a);
	case MIRROR: {
		long ret = local_call(t, nr, a);

		if (nr == SYS_personality && ret >= 0 && (uint32_t)a[0] != 0xffffffff)
			t->persona = (uint32_t)a[0];    /* the waits served here honour it */
		/* The proxy follows; it may already have (glibc's SIGSETXID broadcast
		 * reaches it too), so its answer is not the program's. */
		if (ret >= 0 && !calls_stay(t))
			proxy_forward(t, nr, a);
		return ret;
	}
	case RENEW:
		return proxy_renewed_around(t, nr, a);
	case EMULATE:
		if (t->observed)
			return local_call(t, nr, a);
		count(t, nr, &t->stats->emulated);
		return r->fn(t, nr, a, uc);
	case SPECIAL:
		return r->fn(t, nr, a, uc);
	}
	if (r->sigfd_arg && sigfd_is(a[r->sigfd_arg - 1]))
		return local_call(t, nr, a);
	if (r->tid_arg || r->path_arg) {
		memcpy(b, a, sizeof(b));
		if (r->tid_arg && b[r->tid_arg - 1] == 0)
			b[r->tid_arg - 1] = t->tid;
		if (r->path_arg) {
			const char *p = (const char *)b[r->path_arg - 1];
			long err = thread_self_path(t, &p);
			if (err)
				return err;
			b[r->path_arg - 1] = (long)p;
		}
		return forward(t, nr, b);
	}
	return forward(t, nr, a);
}
