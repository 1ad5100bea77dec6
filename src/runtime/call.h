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
#define KERNEL_UCONTEXT_SIZE 304   /* struct ucontext of the kernel, x86-64 */

/* One call of a detached thread handled by a function of the table: nr and
 * its six arguments, and uc, the trap's signal context (NULL when the call
 * came through a rewritten site, without a frame). */
typedef long call_fn(struct dt_thread *t, long nr, long *a, ucontext_t *uc);

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

/* Which stack an address lies on: the runtime's own (stack.c, both
 * halves), the program's alternate one, or any other (the thread's). */
static inline int stack_of(const struct dt_thread *t, uintptr_t a)
{
	if (a - t->stack_lo < t->stack_hi - t->stack_lo)
		return 1;
	if (a - t->app_ss_lo < t->app_ss_hi - t->app_ss_lo)
		return 2;
	return 0;
}

/* Only frames of one stack say which is above the other.  An SA_ONSTACK
 * handler's call on the program's alternate stack, while the wait runs on
 * the runtime's, is on top of that wait whatever the two addresses are: a
 * stack buffer of main's lies above the runtime's mmap'd stack, and such a
 * call once cancelled the read it interrupted and left the handler's
 * return spinning in a wait for a reply that had gone to its own call
 * (run_altstack_above). */
static inline bool same_stack(const struct dt_thread *t, uintptr_t a, uintptr_t b)
{
	return stack_of(t, a) == stack_of(t, b);
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
static inline __attribute__((always_inline)) void forget_abandoned(struct dt_thread *t)
{
	uintptr_t frame = (uintptr_t)__builtin_frame_address(0);

	if (t->depth > 0 && frame >= t->wait_frame && same_stack(t, frame, t->wait_frame))
		proxy_abandoned(t);
}

static inline long forward(struct dt_thread *t, long nr, const long a[6])
{
	/* A call made by a signal handler while our proxy is busy with the call
	 * that handler interrupted: the proxy cannot take it, this thread can.
	 * A watched thread (threads.c) has no proxy: its calls are its own. */
	forget_abandoned(t);
	if (t->depth > 0 || t->observed)
		return local_call(t, nr, a);
	count(t, nr, &t->stats->forwarded);
	return proxy_forward(t, nr, a);
}

/* A call that changes what its thread is to the kernel: run alone, with a
 * new proxy made after it (call.c). */
long proxy_renewed_around(struct dt_thread *t, long nr, const long a[6]) DT_HIDDEN;

#endif
