/* Description: timed waits of a detached thread are served in user space:
 * 1,000 sleeps of every kind (nanosleep, clock_nanosleep relative and
 * absolute on MONOTONIC, REALTIME and BOOTTIME, usleep, poll, select and
 * ppoll without descriptors) never wake early, and the kernel shows no
 * sleep: no voluntary switch of the detached thread nor of its (spinning)
 * proxy.  A signal ends a sleep with EINTR and the time left, as natively,
 * also in a sleep's last microseconds (in sud mode they are waited after
 * the trap's return, clock_resume.S).  select and pselect write back the
 * time left, unless the personality has STICKY_TIMEOUTS. */
#include "helpers/t_detach.h"

#include <poll.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct timespec ts_of(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
	return ts;
}

static void on_alarm(int s) { (void)s; }

static void arm_alarm(long us)
{
	struct itimerval it = { { 0, 0 }, { us / 1000000, us % 1000000 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

static int early;

static void check_late(const char *what, clockid_t c, uint64_t deadline)
{
	uint64_t t = now_ns(c);
	if (t < deadline) {
		if (early++ < 5)
			fprintf(stderr, "%s woke %llu ns early\n", what, (unsigned long long)(deadline - t));
	}
}

int main(int argc, char **argv)
{
	static const char *const spin[] = { "--proxy", "spin", NULL };

	t_reexec_detached(argc, argv, spin);
	pid_t me = t_main_tid(), proxy = t_find_proxy();
	t_check(proxy > 0, "not detached");

	long long v0 = t_task_value(me, "status", "voluntary_ctxt_switches");
	long long p0 = t_task_value(proxy, "status", "voluntary_ctxt_switches");
	const clockid_t clocks[] = { CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME };
	for (int i = 0; i < 1000; i++) {
		uint64_t d = 20000 + (uint64_t)(i % 10) * 20000;          /* 20..200 us */
		clockid_t c = clocks[i % 3];
		uint64_t deadline;
		struct timespec ts;
		struct timeval tv;
		switch (i % 8) {
		case 0:
			deadline = now_ns(CLOCK_MONOTONIC) + d;
			ts = ts_of(d);
			nanosleep(&ts, NULL);
			check_late("nanosleep", CLOCK_MONOTONIC, deadline);
			break;
		case 1:
			deadline = now_ns(c) + d;
			ts = ts_of(d);
			clock_nanosleep(c, 0, &ts, NULL);
			check_late("clock_nanosleep relative", c, deadline);
			break;
		case 2:
			deadline = now_ns(c) + d;
			ts = ts_of(deadline);
			clock_nanosleep(c, TIMER_ABSTIME, &ts, NULL);
			check_late("clock_nanosleep absolute", c, deadline);
			break;
		case 3:
			deadline = now_ns(CLOCK_MONOTONIC) + d;
			usleep((useconds_t)(d / 1000));
			check_late("usleep", CLOCK_MONOTONIC, deadline);
			break;
		case 4:
			deadline = now_ns(CLOCK_MONOTONIC) + 1000000;
			poll(NULL, 0, 1);
			check_late("poll", CLOCK_MONOTONIC, deadline);
			break;
		case 5:
			deadline = now_ns(CLOCK_MONOTONIC) + d / 1000 * 1000;
			tv.tv_sec = 0;
			tv.tv_usec = (suseconds_t)(d / 1000);
			select(0, NULL, NULL, NULL, &tv);
			check_late("select", CLOCK_MONOTONIC, deadline);
			break;
		case 6:
			deadline = now_ns(CLOCK_MONOTONIC) + d;
			ts = ts_of(d);
			ppoll(NULL, 0, &ts, NULL);
			check_late("ppoll", CLOCK_MONOTONIC, deadline);
			break;
		default:
			deadline = now_ns(CLOCK_MONOTONIC) + d;
			ts = ts_of(d);
			syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts, NULL);
			check_late("raw clock_nanosleep", CLOCK_MONOTONIC, deadline);
		}
	}
	long long v1 = t_task_value(me, "status", "voluntary_ctxt_switches");
	long long p1 = t_task_value(proxy, "status", "voluntary_ctxt_switches");
	printf("1000 sleeps: %d early; voluntary switches: detached +%lld, proxy +%lld\n", early, v1 - v0, p1 - p0);
	t_check(early == 0, "%d sleeps woke early", early);
	t_check(v1 == v0, "the detached thread slept in the kernel %lld times", v1 - v0);
	t_check(p1 == p0, "its proxy slept in the kernel %lld times: sleeps were forwarded", p1 - p0);

	/* EINTR and the time left */
	struct sigaction sa = { .sa_handler = on_alarm };
	sigaction(SIGALRM, &sa, NULL);
	struct timespec req = { 0, 300000000 }, rem = { 0, 0 };
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	arm_alarm(50000);
	int r = nanosleep(&req, &rem);
	int e = errno;
	uint64_t slept = now_ns(CLOCK_MONOTONIC) - t0;
	long long left = rem.tv_sec * 1000000000ll + rem.tv_nsec, expect = 300000000ll - (long long)slept;
	printf("nanosleep 300 ms, SIGALRM at 50 ms: %d (%s), slept %llu us, %lld us left\n", r, strerror(e),
	       (unsigned long long)slept / 1000, left / 1000);
	t_check(r == -1 && e == EINTR, "interrupted nanosleep: %d %s", r, strerror(e));
	t_check(left > 0 && left <= 300000000 && llabs(left - expect) < 20000000,
		"time left %lld ns, want about %lld", left, expect);

	uint64_t abs_deadline = now_ns(CLOCK_MONOTONIC) + 300000000ull;
	struct timespec abs = ts_of(abs_deadline);
	arm_alarm(50000);
	r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, NULL);
	t_check(r == EINTR, "interrupted absolute clock_nanosleep returned %d", r);
	t_check(now_ns(CLOCK_MONOTONIC) < abs_deadline, "absolute sleep was not interrupted");

	arm_alarm(50000);
	errno = 0;
	r = poll(NULL, 0, 300);
	t_check(r == -1 && errno == EINTR, "interrupted poll: %d %s", r, strerror(errno));

	/* select and pselect6 without descriptors write back the time left;
	 * with STICKY_TIMEOUTS in the personality they keep the timeout
	 * (glibc's pselect never shows it: it passes a copy) */
	int persona = personality(0xffffffff);
	for (int sticky = 0; sticky <= 1; sticky++) {
		personality((unsigned long)(sticky ? persona | STICKY_TIMEOUTS : persona));
		struct timeval tv = { 0, 300000 };
		arm_alarm(50000);
		r = select(0, NULL, NULL, NULL, &tv);
		e = errno;
		struct timespec pts = { 0, 300000000 };
		arm_alarm(50000);
		long pr = syscall(SYS_pselect6, 0, NULL, NULL, NULL, &pts, NULL);
		int pe = errno;
		personality((unsigned long)persona);
		printf("select 300 ms, SIGALRM at 50 ms%s: %ld us left; pselect6: %ld us left\n",
		       sticky ? " (STICKY_TIMEOUTS)" : "", (long)tv.tv_usec, pts.tv_nsec / 1000);
		t_check(r == -1 && e == EINTR && pr == -1 && pe == EINTR, "interrupted select %d %s, pselect6 %ld %s",
			r, strerror(e), pr, strerror(pe));
		if (sticky) {
			t_check(tv.tv_sec == 0 && tv.tv_usec == 300000, "select changed a sticky timeout");
			t_check(pts.tv_sec == 0 && pts.tv_nsec == 300000000, "pselect6 changed a sticky timeout");
		} else {
			t_check(tv.tv_sec == 0 && tv.tv_usec > 0 && tv.tv_usec < 300000, "select's time left is wrong");
			t_check(pts.tv_sec == 0 && pts.tv_nsec > 0 && pts.tv_nsec < 300000000, "pselect6's time left is wrong");
		}
	}

	/* 15 us sleeps under a 37 us interval timer: signals land in the last
	 * microseconds of a sleep, and in none at all */
	struct itimerval fast = { { 0, 37 }, { 0, 37 } }, off = { { 0, 0 }, { 0, 0 } };
	int intr = 0, bad_rem = 0;
	early = 0;
	setitimer(ITIMER_REAL, &fast, NULL);
	for (int i = 0; i < 1000; i++) {
		struct timespec q = { 0, 15000 }, left_ts = { 0, 0 };
		uint64_t deadline = now_ns(CLOCK_MONOTONIC) + 15000;
		if (nanosleep(&q, &left_ts) == 0) {
			check_late("nanosleep under signals", CLOCK_MONOTONIC, deadline);
		} else {
			intr++;
			uint64_t now = now_ns(CLOCK_MONOTONIC);
			if (errno != EINTR || left_ts.tv_sec || left_ts.tv_nsec > 15000 ||
			    (now < deadline && (uint64_t)left_ts.tv_nsec < deadline - now))
				bad_rem++;
		}
	}
	setitimer(ITIMER_REAL, &off, NULL);
	printf("1000 sleeps of 15 us under a 37 us timer: %d interrupted, %d early, %d bad time left\n",
	       intr, early, bad_rem);
	t_check(early == 0, "%d sleeps under signals woke early", early);
	t_check(bad_rem == 0, "%d interrupted sleeps reported a wrong time left", bad_rem);
	t_check(intr > 0, "no sleep was interrupted: the timer did not reach the thread");
	return t_detached_done();
}
