/* Layer 1: what a detached thread is (its mailbox to the proxy, its state);
 * the services below threads.c take it as an argument, threads.c makes and
 * ends it. */
#ifndef DETACH_RUNTIME_THREAD_H
#define DETACH_RUNTIME_THREAD_H

#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/registry.h"
#include "lib/util.h"
#include "runtime/sys.h"

/* ---- the mailbox between a detached thread and its proxy ----------------
 * Request and reply sit on separate cache lines: each line has one writer,
 * so the only traffic is the hand-over itself. */
enum { DT_CMD_QUIT = -1, DT_CMD_STATS = -2, DT_CMD_COUNTERS = -3, DT_CMD_RETIRE = -4 };
/* What a handler that ran on the detached thread during a forwarded call
 * asks of that call (proxy.c, send_interrupt).  INTR_CANCEL is tested by
 * sys_proxy_call (stubs.S) as the byte 1. */
enum { INTR_NONE = 0, INTR_CANCEL = 1, INTR_EINTR = 2, INTR_RESTART = 3 };

struct mailbox {
	_Alignas(64)
	volatile uint64_t req_seq;      /* detached thread -> proxy */
	long nr;
	long args[6];
	_Alignas(64)
	volatile uint64_t done_seq;     /* proxy -> detached thread */
	long ret;
	/* an adaptive proxy idle for long sleeps in the kernel on req_seq's low
	 * half until the next request wakes it (proxy.c, sleep_until_called):
	 * here, on the line the detached thread reads anyway while it waits */
	volatile uint32_t proxy_asleep;
	volatile uint64_t intr_ack;     /* intr_sent as last seen by the proxy's handler */
	volatile int32_t raised;        /* a signal the call raised on the proxy (SIGPIPE...) */
	_Alignas(64)
	volatile uint8_t intr;          /* INTR_*: set by the detached thread */
	volatile uint64_t intr_sent;
	/* Of SIGTTIN and SIGTTOU (TTY_SIGNALS), those the detached thread
	 * blocks (signals.c records each change it sees), which its proxy
	 * blocks too (proxy.c, tty_signals_follow).  On this line, which the
	 * proxy reads at every call and the detached thread writes rarely. */
	volatile uint64_t tty_blocked;
};
/* The signals of job control a terminal sends a background process that
 * reads it, or writes it under tostop or changes its settings (the kernel's
 * tty_jobctrl.c, judged by the calling thread's mask and the action). */
#define TTY_SIGNALS ((1ull << (SIGTTIN - 1)) | (1ull << (SIGTTOU - 1)))

/* The kernel's struct sched_attr (sched_setattr(2)), VER1 (56 bytes). */
struct kernel_sched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime, sched_deadline, sched_period;
	uint32_t sched_util_min, sched_util_max;
};
/* A detached thread's scheduling settings as the program made them (sched.c) */
struct app_sched {
	struct kernel_sched_attr attr;
	cpu_set_t affinity;
};

struct sandbox_filter;
struct wait_record;

/* A detached or watched thread: all its mutable state (threads.c owns it). */
struct dt_thread {
	struct mailbox mb;
	/* set by a vfork child that borrows this thread's TLS (trampoline.S reads
	 * it: asm_offsets.c), cleared by the parent when it resumes */
	volatile uint8_t vfork_child;
	/* The runtime's own stack (stack.c), where the trampoline and the
	 * SIGSYS handler run (its alternate signal stack when the program set
	 * none), and the program's alternate stack as the program set it (0, 0:
	 * none).  trampoline.S reads the four (asm_offsets.c). */
	uintptr_t stack_lo, stack_hi;
	uintptr_t app_ss_lo, app_ss_hi;
	stack_t app_ss;                 /* what sigaltstack reports (signals.c) */
	/* how many moved traps' work is in use on the signal half of the
	 * runtime's stack, each at a level of its own (stack.c,
	 * stack_trap_move; intercept.c, trap_moved) */
	uint8_t traps_moved;
	/* Watched, not detached: a thread of a program whose threads are chosen
	 * by rule (threads.c).  Its calls trap and run on itself, natively, but
	 * for the few that may choose it. */
	bool observed;
	/* Detached, but without a proxy to take its calls: from a renewal's
	 * retirement of the old one until the new one runs (call.c,
	 * proxy_renewed_around), and from its end's first command to the
	 * proxy on (threads.c, thread_end); proxy_start clears it.  Its calls
	 * then run on itself (call.h, calls_stay): only glibc's SIGSETXID and
	 * SIGCANCEL handlers can make any (call.h, no_proxy_blocked). */
	bool proxyless;
	volatile bool evicted;          /* another thread took its CPU (threads.c) */
	int pending_cpu;                /* >= 0: detach on this CPU at the next trap */
	uintptr_t locked_lo, locked_hi; /* its stack range memlock.c locked */
	struct dt_thread *next;         /* threads.c's list */
	pid_t tid;
	int cpu;
	int node;
	pid_t proxy_tid;
	volatile int depth;             /* forwarded calls in flight (signal nesting) */
	uintptr_t wait_frame;           /* stack frame of the forwarded call in flight */
	/* The number of the first signal whose handler ran on top of a wait
	 * of ours (a forwarded call's, a timed one's) and returned into it
	 * since the wait last looked; 0: none.  The first, neither the last
	 * nor every one: natively the first signal delivered during a call
	 * decides whether it restarts (SA_RESTART) or ends with EINTR, and a
	 * second one pending as the first handler's rt_sigreturn ends is
	 * delivered before the call is entered again, to a frame whose
	 * decision is made (the kernel's rt_sigreturn clears orig_ax).  The
	 * wait cannot look between the two.  Set only while 0 by the
	 * program's handlers' return (stubs.S, dt_app_restorer; signals.c,
	 * do_sigreturn), taken with an exchange by the wait. */
	volatile uint32_t intr_first;
	volatile uint32_t handler_returns; /* the program's handlers returned (signals.c) */
	/* A forwarded masked wait (ppoll, pselect6, epoll_pwait: waits.c)
	 * in progress: MASKED_WAIT | handler_returns as it was before the
	 * wait's mask was applied; 0: none (masked_wait_since) */
	uint64_t masked_wait;
	/* Busy-polls (waits.c, fd_wait): the TSC at the end of this thread's
	 * last zero-timeout poll or epoll_wait that found nothing (0: none
	 * yet, or a gap since), the timeout the next one converted gets, and
	 * the runtime's own timespec it goes with, which the proxy's kernel
	 * writes the time left into (never the program's memory) */
	uint64_t busy_poll_last;
	uint32_t busy_poll_ns;
	struct timespec busy_poll_ts;
	siginfo_t raised_info;          /* written by the proxy with mb.raised */
	/* A SIGTTIN or SIGTTOU of the terminal that this thread took while it
	 * waited for a call of its proxy that the terminal judges: held until
	 * the call ends (signals.c, tty_handler; proxy.c, tty_held_deliver);
	 * 0: none */
	volatile int tty_held;
	siginfo_t tty_held_info;
	volatile uint8_t selector;      /* Syscall User Dispatch selector byte */
	uint32_t persona;               /* its personality(2): STICKY_TIMEOUTS keeps
	                                 * the timeout of a wait served here (clock.c) */
	uint64_t app_blocked_open;      /* of the signals kept open (call.h:
					 * kept_open), those the program believes blocked */
	uint64_t cpu_seen[5][3];        /* CPU times last answered (cputime.c) */
	struct app_sched app;           /* scheduling settings it believes in */
	/* the program's seccomp filters, newest first (sandbox.c): NULL, the
	 * one branch a call pays when there are none */
	const struct sandbox_filter *filters;
	/* the trampoline frame's record of the rewritten call in dispatch (NULL:
	 * none), where a sleep leaves its rest for the trampoline (clock.c) */
	struct wait_record *wait_tail;
	struct dt_thread_stats *stats;
	char path[4096 + 64];           /* /proc/thread-self rewriting */
	struct dt_thread_stats own_stats; /* counters until a registry slot is had */
	/* The signal mask the clone gate (trampoline.S: a vfork, fork or
	 * clone3 at a rewritten site) blocked every signal over, put back by the parent when it
	 * resumes and by the child before it runs the program */
	uint64_t gate_mask;
	/* the gate's call: its clone flags (for clone_done), and for clone3
	 * the child's stack top, where its packet goes (trampoline.S) */
	uint64_t gate_flags;
	uintptr_t gate_top;
	/* vfork on the shared stack: the frame both child and parent resume from */
	_Alignas(64) char frame[16384];
};

/* A call's wait begins (a forwarded call, proxy.c; a timed one's is
 * wait_aside's, clock.c, which at depth > 0 puts the mark back after):
 * a mark left before it (a handler that returned into an earlier wait
 * after its last look, or ran before this call began) is not this call's
 * interruption; natively such a handler runs before the call or after it.
 * Called outside detach_wait, so that no handler's return can set the mark
 * between this and the wait.  Only outermost: inside a handler that
 * interrupted a forwarded call (depth > 0) the mark may be that call's. */
static inline void wait_begins(struct dt_thread *t)
{
	if (!t->depth)
		t->intr_first = 0;
}

/* A masked wait's record of handler_returns (t->masked_wait, and the
 * timed one's argument, clock.c): the count before its mask was applied,
 * with this bit set, so that 0 says "no masked wait". */
#define MASKED_WAIT (1ull << 32)

/* Whether a handler of the program returned since the masked wait whose
 * record is m applied its mask (m 0: never).  Natively the kernel swaps
 * the mask and waits in one step, so every signal the mask lets in ends
 * the call with EINTR; here the mask is applied by a call of its own
 * before the wait, and a handler that runs between the two returns into
 * code outside detach_wait, leaving no intr_first mark: only the count
 * shows that it ran. */
static inline bool masked_wait_ended(const struct dt_thread *t, uint64_t m)
{
	return m && (uint32_t)m != t->handler_returns;
}

/* The masked wait's record for the forwarded call nr in wait_reply: only
 * ppoll, pselect6 and epoll_pwait(2) reach the proxy through
 * do_masked_wait, which sets t->masked_wait for its own call and 0 for one
 * without a mask; any other call (a handler's read, made between the
 * mask and the masked call's forward) is not judged by it. */
static inline uint64_t masked_wait_since(const struct dt_thread *t, long nr)
{
	return nr == SYS_ppoll || nr == SYS_pselect6 || nr == SYS_epoll_pwait || nr == SYS_epoll_pwait2 ?
		t->masked_wait : 0;
}

/* Which stack of t's an address lies on: 0 any other (the thread's), 1 the
 * runtime's own (stack.c, both halves), 2 the program's alternate one.  The
 * order is the order in which handlers nest (call.h, left_wait). */
static inline int stack_of(const struct dt_thread *t, uintptr_t a)
{
	if (a - t->stack_lo < t->stack_hi - t->stack_lo)
		return 1;
	if (a - t->app_ss_lo < t->app_ss_hi - t->app_ss_lo)
		return 2;
	return 0;
}

/* The calling thread's, NULL on threads that are not detached or watched
 * (defined in threads.c). */
extern __thread struct dt_thread *dt_self DT_HIDDEN;

#endif
