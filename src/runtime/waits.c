/* Waits of a detached thread: pure sleeps are served in user space against
 * the TSC (clock.c); waits on descriptors are forwarded with the thread's
 * signal mask applied for their length; a busy-poll (a zero-timeout poll
 * or epoll_wait back to back) is forwarded as a short blocking wait. */
#include "runtime/waits.h"
#include "runtime/clock.h"
#include "runtime/config.h"
#include "runtime/signals.h"
#include "runtime/uaccess.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>

/* ---- busy-polls ----------------------------------------------------------
 * A program that waits by polling its descriptors with timeout 0 back to
 * back (Open MPI's tcp BTL through libevent's poll, UCX's tcp through
 * epoll_wait: 1,200-1,450 a collective's iteration, docs/mpi.md) makes its
 * proxy forward them back to back: the proxy never sleeps, and on a machine
 * where it shares a CPU with the rank the detached one waits for, takes a
 * third of that CPU.  Such a poll is forwarded as a bounded blocking one
 * instead (poll -> ppoll, epoll_wait and epoll_pwait -> epoll_pwait2): the
 * proxy sleeps in the kernel until a descriptor is ready or the bound ends,
 * and its answer is the program's: the ready descriptors as soon as the
 * kernel wakes the proxy, else 0, EINTR when a handler of the program's
 * interrupts it (proxy.c, interrupt_wished; poll and the epoll waits are
 * never restarted, natively as here, and poll(0) ends with EINTR as well
 * when a signal is pending as it looks).  The call took longer; what it
 * returns was true during it.  Natively the thread would have polled again
 * at once, and got the same answer later or the ready one as soon as it
 * came: only a wake-up the kernel cannot see (a flag in shared memory the
 * program checks between its polls) waits up to the bound.
 *
 * Which is a busy-poll: one that comes within BUSY_POLL_GAP_NS (20 us,
 * clock.c) of the end of the same thread's last zero-timeout wait that
 * found nothing.  A forwarded call takes 1-2 us, so back-to-back polls are
 * far below it, and a program that polls between pieces of work of its
 * own (more than 20 us each) keeps every poll as it is.  The bound starts
 * at BUSY_POLL_FIRST_NS and doubles with each empty one up to
 * BUSY_POLL_CAP_NS; a gap resets it.  Non-empty results and other calls in
 * between keep it: the thread is still waiting. */
#define BUSY_POLL_FIRST_NS 10000u
/* The cap: the longest a check the kernel cannot see (shared memory) is
 * held off; measured in docs/mpi.md ("Over TCP") */
#ifndef BUSY_POLL_CAP_NS                /* -D: a build to measure another */
#define BUSY_POLL_CAP_NS 200000u
#endif

/* The bounded call of poll's ([0], ppoll) or the epoll waits' ([1],
 * epoll_pwait2) was refused on the proxy: busy-polls of that kind go as
 * they are.  Any detached thread may set it (a plain store). */
static bool bounded_refused[2];

/* A poll, epoll_wait or epoll_pwait (its mask already the masked_wait's
 * business: a[4] is what the proxy applies) with timeout a[2] or a[3]:
 * forwarded as it is, or as a busy-poll's bounded wait.  No allocation,
 * lock or kernel entry here beyond the forward: the interception path. */
static long fd_wait(struct dt_thread *t, long nr, const long a[6])
{
	int timeout = (int)(nr == SYS_poll ? a[2] : a[3]);
	uint64_t now, since;
	long b[6], ret, ts, call;
	bool busy;

	/* Only a zero timeout on the proxy's path: a handler's call (depth >
	 * 0), a watched or proxyless thread's run on itself as they are.
	 * Only for an adaptive or sleeping proxy: it shares its CPU (one
	 * housekeeping CPU, config.c; or --proxy sleep), where each forwarded
	 * poll takes that CPU from others.  A spinning proxy has a CPU to itself and answers each poll
	 * at once: a bound would only delay what the kernel cannot see (an
	 * MPI rank's shared-memory peers, polled between its TCP polls). */
	if (timeout != 0 || calls_stay(t) || dt_cfg.proxy_wait == PROXY_SPIN ||
	    __atomic_load_n(&bounded_refused[nr != SYS_poll], __ATOMIC_RELAXED))
		return forward(t, nr, a);
	now = rdtsc();                          /* user space: no kernel entry */
	busy = t->busy_poll_last && now - t->busy_poll_last < dt_cfg.busy_poll_gap_cycles;
	if (!busy) {
		t->busy_poll_ns = BUSY_POLL_FIRST_NS;   /* a gap: the backoff starts again */
		ret = forward(t, nr, a);
	} else {
		/* The bound in the thread's own timespec: the proxy's kernel
		 * reads it there and ppoll writes back the time left there,
		 * never into the program's memory (a struct of the runtime's,
		 * no allocation) */
		t->busy_poll_ts.tv_sec = 0;
		t->busy_poll_ts.tv_nsec = t->busy_poll_ns;
		ts = (long)&t->busy_poll_ts;
		if (nr == SYS_poll) {
			/* ppoll(fds, nfds, &ts, NULL, 8): the proxy's own mask
			 * (all blocked) for its length, as for the poll */
			b[0] = a[0]; b[1] = a[1]; b[2] = ts; b[3] = 0; b[4] = 8; b[5] = 0;
			call = SYS_ppoll;
		} else {
			/* epoll_pwait2(epfd, events, max, &ts, mask, size): the
			 * mask argument as the epoll_pwait's forward had it */
			b[0] = a[0]; b[1] = a[1]; b[2] = a[2]; b[3] = ts;
			b[4] = nr == SYS_epoll_pwait ? a[4] : 0;
			b[5] = nr == SYS_epoll_pwait ? a[5] : 8;
			call = SYS_epoll_pwait2;
		}
		/* A masked wait's record judges an epoll_pwait of its own
		 * (masked_wait_since): kept.  A poll or epoll_wait has none,
		 * but run from a handler that came between a masked wait's
		 * record and its forward, it would find that one's under
		 * SYS_ppoll's number: 0 for its length (do_masked_wait's way) */
		since = t->masked_wait;
		if (nr != SYS_epoll_pwait)
			t->masked_wait = 0;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		ret = forward_as(t, nr, call, b);    /* counted as the program's call */
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		t->masked_wait = since;
		/* ENOSYS or EPERM: neither call returns them itself, so a
		 * seccomp filter the process inherited (a container's older
		 * allowlist without epoll_pwait2) refused the bounded call on
		 * the proxy.  The program's own call goes as it is, now and
		 * from now on (already counted). */
		if (__builtin_expect(ret == -ENOSYS || ret == -EPERM, 0)) {
			__atomic_store_n(&bounded_refused[nr != SYS_poll], true, __ATOMIC_RELAXED);
			return proxy_forward(t, nr, a);
		}
		if (ret == 0)
			t->busy_poll_ns = t->busy_poll_ns * 2 < BUSY_POLL_CAP_NS ? t->busy_poll_ns * 2 : BUSY_POLL_CAP_NS;
	}
	/* an empty answer is the chain's next link; a non-empty one or an
	 * error leaves it as it was */
	if (ret == 0)
		t->busy_poll_last = rdtsc();
	return ret;
}

long do_fd_wait(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	(void)uc;
	if (sigfd_is(a[0]))
		return local_call(t, nr, a);    /* a signalfd's epoll set reads the caller's signals */
	return fd_wait(t, nr, a);
}

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
			return fd_wait(t, nr, a);
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
		return nr == SYS_epoll_pwait ? fd_wait(t, nr, a) : forward(t, nr, a);
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
		ret = sleep ? timed_ppoll(t, (struct timespec *)(nr == SYS_ppoll ? a[2] : a[4]), since) :
		      nr == SYS_epoll_pwait ? fd_wait(t, nr, b) : forward(t, nr, b);
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
