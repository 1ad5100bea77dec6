/* Waits of a detached thread: pure sleeps are served in user space against
 * the TSC (clock.c); waits on descriptors are forwarded with the thread's
 * signal mask applied for their length. */
#include "runtime/waits.h"
#include "runtime/clock.h"
#include "runtime/signals.h"
#include "runtime/uaccess.h"

#include <string.h>
#include <sys/syscall.h>

/* Pure sleeps: served by clock.c; anything with descriptors is forwarded. */
long do_sleep(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	if (t->observed)
		return forward(t, nr, a);
	switch (nr) {
	case SYS_clock_nanosleep:
		if (!timed_wait_clock_ok((clockid_t)a[0]))
			return forward(t, nr, a);
		count(t, nr, &t->stats->emulated);
		return timed_sleep(t, (clockid_t)a[0], (int)a[1], (const struct timespec *)a[2],
				   (struct timespec *)a[3], uc);
	case SYS_nanosleep:
		count(t, nr, &t->stats->emulated);
		return timed_sleep(t, CLOCK_MONOTONIC, 0, (const struct timespec *)a[0], (struct timespec *)a[1], uc);
	case SYS_select:
		if ((int)a[0] < 0)
			return forward(t, nr, a);       /* the kernel's EINVAL, not a sleep */
		if (sigfd_in_fdset((const void *)a[1], a[0]))
			return local_call(t, nr, a);
		if (a[0] != 0 && (a[1] || a[2] || a[3]))
			return forward(t, nr, a);
		count(t, nr, &t->stats->emulated);
		return timed_select(t, (struct timeval *)a[4]);
	case SYS_poll:
		if (sigfd_in_pollfds((const void *)a[0], (unsigned long)a[1]))
			return local_call(t, nr, a);
		if (a[1] != 0)
			return forward(t, nr, a);
		count(t, nr, &t->stats->emulated);
		return timed_poll(t, (int)a[2]);
	}
	return forward(t, nr, a);
}

/* ppoll, pselect6, epoll_pwait(2): the mask is the detached thread's for the
 * length of the wait; the proxy keeps its own (all blocked) and the wait is
 * interrupted when a handler runs here.  ppoll and pselect6
 * without descriptors are sleeps, served here like nanosleep. */
static long masked_wait(struct dt_thread *t, long nr, long *a)
{
	struct { const uint64_t *ss; size_t len; } psel, pa;
	const uint64_t *mask;
	uint64_t m, old;
	long b[6], ret;

	/* What cannot be read here is the kernel's to refuse: the call goes to
	 * it as it is, and it answers in its order (EINVAL, EFAULT) before it
	 * waits. */
	if (nr == SYS_pselect6) {
		if (a[5] && copy_from_user(&pa, (const void *)a[5], sizeof(pa)))
			return forward(t, nr, a);
		mask = a[5] && pa.len == 8 ? pa.ss : NULL;
	} else {
		int i = nr == SYS_ppoll ? 3 : 4;
		mask = a[i + 1] == 8 ? (const uint64_t *)a[i] : NULL;
	}
	if (mask && copy_from_user(&m, mask, sizeof(m)))
		return forward(t, nr, a);
	/* a negative nfds is the kernel's EINVAL, not a sleep */
	bool sleep = !t->observed &&
		     ((nr == SYS_ppoll && a[1] == 0) ||
		      (nr == SYS_pselect6 && (int)a[0] >= 0 && (a[0] == 0 || !(a[1] || a[2] || a[3]))));
	/* a signalfd in the set: the whole wait runs here, with the mask the
	 * kernel applies itself (SIGSYS and SIGTRAP kept open: see kept_open) */
	bool here = nr == SYS_ppoll ? sigfd_in_pollfds((const void *)a[0], (unsigned long)a[1]) :
		    nr == SYS_pselect6 ? sigfd_in_fdset((const void *)a[1], a[0]) : sigfd_is(a[0]);

	if (here) {
		memcpy(b, a, sizeof(b));
		if (mask) {
			m &= ~kept_open();
			if (nr == SYS_pselect6) {
				psel.ss = &m;
				psel.len = 8;
				b[5] = (long)&psel;
			} else {
				b[nr == SYS_ppoll ? 3 : 4] = (long)&m;
			}
		}
		return local_call(t, nr, b);
	}
	if (!sleep && (!mask || calls_stay(t)))
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
		/* Counted before the mask is applied: every handler that runs
		 * from there on, until the wait ends, ends the call with EINTR,
		 * as natively any signal the mask lets in does (the kernel's
		 * swap of the mask and its wait are one step).  One pending
		 * already is delivered on the way out of rt_sigprocmask and is
		 * seen at once below; one that comes after that look and before
		 * the wait loop is entered returns into plain code and leaves
		 * no intr_first mark: the wait itself compares the count
		 * (masked_wait_ended, in timed_ppoll's loop and in wait_reply,
		 * which then cancels the proxy's call: started after the
		 * handler, it would wait for a signal already taken).  A
		 * handler with no action to run (an ignored SIGCHLD) returns
		 * nothing and lets the wait go on, as natively. */
		uint64_t since = MASKED_WAIT | t->handler_returns;
		/* the record before the mask: a handler that runs as soon as
		 * the mask is applied must find it (a compiler fence: only
		 * this thread, and handlers on top of it, read it) */
		if (!sleep)
			t->masked_wait = since;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		m &= ~kept_open();
		sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &m, &old, 8);
		if (masked_wait_ended(t, since)) {
			sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
			return -EINTR;
		}
		ret = sleep ? timed_ppoll(t, (struct timespec *)(nr == SYS_ppoll ? a[2] : a[4]), since) : forward(t, nr, b);
		sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
		return ret;
	}
	return timed_ppoll(t, (struct timespec *)(nr == SYS_ppoll ? a[2] : a[4]), 0);
}

long do_masked_wait(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	/* t->masked_wait is this call's while it runs (masked_wait sets
	 * it for a forwarded wait with a mask), 0 for one without: a handler's
	 * masked wait inside another's window keeps its own, and gives the
	 * outer one's back when it ends */
	uint64_t outer = t->masked_wait;
	long r;

	(void)uc;
	t->masked_wait = 0;
	/* compiler fences: the stores stay around the call, in this order */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	r = masked_wait(t, nr, a);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->masked_wait = outer;
	return r;
}
