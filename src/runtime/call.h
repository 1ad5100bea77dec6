/* Layer 2b (mechanism, docs/architecture.md): how a routed call runs: on the thread
 * itself, or forwarded to its proxy, and counted.  The functions of the
 * routing table (dispatch.c) have the type call_fn; each file that carries
 * some out declares them in its own header. */
#ifndef DETACH_RUNTIME_CALL_H
#define DETACH_RUNTIME_CALL_H

#include <signal.h>
#include <stdint.h>
#include <ucontext.h>

#include "runtime/config.h"
#include "runtime/proxy.h"
#include "runtime/thread.h"

/* SIGSYS carries our traps (see do_sigprocmask) */
#define SIGSYS_BIT (1ull << (SIGSYS - 1))
#define SIGTRAP_BIT (1ull << (SIGTRAP - 1))
/* The signals a detached or watched thread never blocks, whatever the
 * program asks: SIGSYS (Syscall User Dispatch kills a thread that traps with
 * it blocked) and, in rewrite mode, SIGTRAP (the kernel forces a blocked
 * int3 trap to its default action: a thread that met the int3 of a site
 * being rewritten would be killed, rewrite.c). */
static inline uint64_t kept_open(void)
{
	return SIGSYS_BIT | (dt_rewrite_on ? SIGTRAP_BIT : 0);
}
/* glibc's internal signals (__SIGRTMIN and __SIGRTMIN + 1): pthread_cancel's
 * and the one by which set*id() reaches every thread of the process */
#define GLIBC_SIGCANCEL 32
#define GLIBC_SIGSETXID 33
/* Every signal but the faults, the runtime's own (kept_open) and glibc's
 * two: what a detached thread blocks while it has no proxy (a renewal,
 * call.c; its end, threads.c), where a handler's call runs on the thread
 * (t->proxyless: calls_stay) and, natively, would have come after the
 * renewal's call, or not at all after the exit.  glibc's two stay open:
 * a setuid() made by another thread meanwhile holds glibc's lock of the
 * thread stacks while it waits for every thread's SIGSETXID handler, and
 * the retired proxy needs that lock to end (its stack goes back to the
 * cache); with SIGSETXID blocked here the setuid waited for this thread,
 * the proxy for the setuid, and this thread for the proxy's end, for
 * ever.  Their handlers' calls (the setuid itself, a futex wake) run here,
 * and the new proxy, made from this thread after them, inherits the new
 * credentials. */
static inline uint64_t no_proxy_blocked(void)
{
	return ~((1ull << (SIGILL - 1)) | (1ull << (SIGBUS - 1)) | (1ull << (SIGFPE - 1)) |
		 (1ull << (SIGSEGV - 1)) | (1ull << (GLIBC_SIGCANCEL - 1)) | (1ull << (GLIBC_SIGSETXID - 1)) |
		 kept_open());
}
#define KERNEL_UCONTEXT_SIZE 304   /* struct ucontext of the kernel, x86-64 */

/* One call of a detached thread handled by a function of the table: nr and
 * its six arguments, and uc, the trap's signal context (NULL when the call
 * came through a rewritten site, without a frame). */
typedef long call_fn(struct dt_thread *t, long nr, long *a, ucontext_t *uc);

/* A call_fn's (or the program's seccomp filters', sandbox.c) answer to a
 * call that came without a frame (uc NULL: a rewritten site) and needs one:
 * "send the call to its site's kept `syscall`, to trap there" (a clone's
 * child, sigaltstack, a filter's SECCOMP_RET_TRAP).  It goes up as
 * dt_dispatch's result, and dt_trampoline_dispatch (rewrite.c) tests for
 * it: the request travels with its own call.  Kept in the thread's state
 * instead, a handler's call made in the window between the two, or
 * abandoned there by a second handler's siglongjmp, took or left the
 * request of the call it interrupted (a fork that returned 0 in the
 * parent, or a call run twice).  Below -4095 it is no error, and as a
 * value no address a mapping can have (not canonical), no pid, count or
 * fcntl(F_GETOWN)'s -pgid; only an lseek of /proc/PID/mem or /dev/mem to
 * exactly there could return it (the lseek would then run again from the
 * trap).  Never returned when uc is there (the trap path, both modes), so
 * never seen by the program. */
#define DT_NEED_TRAP ((long)0x8000000000000000ull)
/* The same kind of request, from do_clone: "run this vfork, fork or
 * clone3 in the clone gate" (trampoline.S), the trampoline's own way for a
 * detached thread's clone at a rewritten site.  Never returned when uc is
 * there. */
#define DT_CLONE_GATE ((long)0x8000000000000001ull)
/* A clone3 child's packet below its stack top (trampoline.S, .Lgate): the
 * fixed part; the xsave area goes below it.  A stack smaller than this and
 * the area and GATE_STACK_MIN takes the trap path. */
#define GATE_PACKET 320
/* The size of an xsave area of the enabled features (64-aligned; set by
 * rewrite.c at start): what the trampoline saves, and what the clone gate
 * copies into a clone3 packet */
extern uint64_t dt_xsave_size DT_HIDDEN;
#define GATE_STACK_MIN 16384

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

/* Was the wait whose frame is at wait left (a handler siglongjmp'd out of
 * it) when a call's frame is at frame?  On one stack, a frame at or above
 * the wait's is code that left it (stacks grow down).  Across stacks, the
 * order of stack_of: a handler that runs on top of a wait runs on the
 * wait's stack or on the alternate stack the kernel holds (the program's,
 * or the runtime's signal half when it set none), and its calls stay where
 * they are or go to the runtime's stack from the thread's (rewrite mode's
 * trampoline) or from the alternate stack (stack_trap_move, when no moved
 * trap's work is in use, so never on top of a wait there); a call on a
 * stack ranked lower than the wait's comes from code the wait's caller
 * left:
 *  - a wait on the runtime's stack, a call on the alternate one: a handler
 *    on top (a stack buffer of main's lies above the runtime's mmap'd
 *    stack; such a call once cancelled the read it interrupted and left the
 *    handler's return spinning in a wait for a reply that had gone to its
 *    own call, run_altstack_above);
 *  - a wait on the runtime's stack, a call on the thread's: the first call
 *    after a siglongjmp, in sud mode, traps in place there (the handler
 *    left the alternate stack disarmed);
 *  - a wait on the alternate stack (a handler's call during a moved
 *    trap's sleep or sigsuspend, stack.c), a call on another: main code's
 *    after a siglongjmp out of the handler (run_altstack_wait_left). */
static inline bool left_wait(const struct dt_thread *t, uintptr_t frame, uintptr_t wait)
{
	int f = stack_of(t, frame), w = stack_of(t, wait);

	return f == w ? frame >= wait : f < w;
}

/* A forwarded call in flight whose wait a handler longjmp'd out of: the
 * proxy is told to cancel it.  Below the waiting frame (stacks grow down) is
 * a handler that runs on top of the wait; at it or above it, code that left
 * it.  At it: proxy_forward is often a tail call (dt_dispatch's `jmp
 * proxy_forward`), so its frame is where its caller's was, and the next call
 * through the same path (rewrite mode's trampoline starts every call at the
 * same stack top) has exactly that frame; a handler on top of the wait runs
 * below wait_reply's frame, strictly below.  Missed, the abandoned call stayed
 * in the proxy (a read that took the data written after it) while every
 * later call ran on this thread: run_signals' read timeout hung. */
static inline __attribute__((always_inline)) void forget_abandoned_at(struct dt_thread *t, uintptr_t at)
{
	if (t->depth > 0 && left_wait(t, at, t->wait_frame))
		proxy_abandoned(t);
}

static inline __attribute__((always_inline)) void forget_abandoned(struct dt_thread *t)
{
	forget_abandoned_at(t, (uintptr_t)__builtin_frame_address(0));
}

/* What dt_dispatch judges a call by (at, for forget_abandoned_at): the
 * calling code's rsp, the trapped code's or the program's at the
 * trampoline's entry, not a frame of ours, whose height depends on the way
 * in.  The kernel writes the frame of a trap from code on no alternate
 * stack at the top of the runtime's signal half (stack.c, stack_real; or
 * intercept_entry.S moves it there from the program's), below the
 * trampoline's half (rewrite mode: the upper half); the trampoline puts a
 * vector save area (1-3 KB) below its frame for a call that may touch
 * vector registers, and a sleep passes through dispatch_sleep's frame.
 * Judged by such a frame, a wait on the trampoline's half left by
 * siglongjmp (the read-timeout idiom; a handler without SA_ONSTACK that
 * interrupted a trampoline call made its own call there) seemed to be
 * above the next call, as if that call ran on top of it: the call ran on
 * the thread (depth 1), and the left read stayed on the proxy and took
 * the data written next (a back-off's nanosleep, or a trap, after the
 * timeout: tests/run_longjmp_left_read.c).  The calling code's rsp ranks
 * it where it runs: the thread's stack (0) for code outside handlers,
 * below the wait for a handler on top of it (a trap nests there: the
 * stack is disarmed in a handler; the trampoline stays on the runtime's
 * stack), the program's alternate stack (2) for a handler there, and at
 * or above the left call's caller for code that left it. */

/* Whether t's calls run on t itself rather than on its proxy: a call made
 * by a signal handler while the proxy is busy with the call that handler
 * interrupted (the proxy cannot take it, this thread can); a watched thread
 * (threads.c), which has no proxy; a detached thread between two proxies
 * or at its end (proxyless: a handler of glibc's SIGSETXID or SIGCANCEL,
 * call.h, no_proxy_blocked).  Every place that chooses whether to forward
 * asks this. */
static inline bool calls_stay(const struct dt_thread *t)
{
	return t->depth > 0 || t->observed || t->proxyless;
}

/* forward() of call, counted in the statistics as the program's nr: a call
 * the runtime makes in place of the program's (waits.c, a busy-poll's
 * bounded wait) */
static inline long forward_as(struct dt_thread *t, long nr, long call, const long a[6])
{
	forget_abandoned(t);
	if (calls_stay(t))
		return local_call(t, call, a);
	count(t, nr, &t->stats->forwarded);
	return proxy_forward(t, call, a);
}

static inline long forward(struct dt_thread *t, long nr, const long a[6])
{
	return forward_as(t, nr, nr, a);
}

/* A call that changes what its thread is to the kernel: run alone, with a
 * new proxy made after it (call.c). */
long proxy_renewed_around(struct dt_thread *t, long nr, const long a[6]) DT_HIDDEN;

#endif
