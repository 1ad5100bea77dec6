/* Time for RT code: the RT clock, sleeps that are wait points of the
 * executive, rtl_printf (docs/rtl.md).
 *
 * The RT clock is dt_now_ns(): CLOCK_MONOTONIC from the TSC, no kernel
 * entry.  As in RTLinux, CLOCK_REALTIME in RT code means this clock (RTLinux's
 * CLOCK_REALTIME counted from its start, not the wall clock), so that
 * clock_gethrtime(CLOCK_REALTIME) and clock_nanosleep(CLOCK_REALTIME,
 * TIMER_ABSTIME) agree.  Off the executive (init_module, a Linux thread) a
 * sleep is the kernel's. */
#include "rtl/rtl_int.h"

#include <stdarg.h>

static bool rt_clock(clockid_t clock)
{
	return clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC;
}

RTL_API hrtime_t gethrtime(void)
{
	return (hrtime_t)dt_now_ns();
}

RTL_API hrtime_t clock_gethrtime(clockid_t clock)
{
	return rt_clock(clock) ? (hrtime_t)dt_now_ns() : -EINVAL;
}

RTL_API clockid_t rtl_getschedclock(void)
{
	return CLOCK_REALTIME;
}

RTL_API int rtl_clock_gettime(clockid_t clock, struct timespec *ts)
{
	uint64_t ns;

	if (!rt_clock(clock))
		return clock_gettime(clock, ts);
	if (!ts) {
		errno = EFAULT;
		return -1;
	}
	ns = dt_now_ns();
	ts->tv_sec = (time_t)(ns / NSECS_PER_SEC);
	ts->tv_nsec = (long)(ns % NSECS_PER_SEC);
	return 0;
}

/* Sleeps until the RT clock reads deadline: a wait point on the executive,
 * the kernel's sleep elsewhere, for what is left by the RT clock (whose
 * origin need not be the kernel's CLOCK_MONOTONIC's in a process that
 * never detached). */
static void sleep_until(uint64_t deadline)
{
	uint64_t now;

	if (rtl_exec_sleep_until(deadline))
		return;
	while ((now = dt_now_ns()) < deadline) {
		struct timespec ts = { (time_t)((deadline - now) / NSECS_PER_SEC), (long)((deadline - now) % NSECS_PER_SEC) };

		nanosleep(&ts, NULL);
	}
}

RTL_API int rtl_clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem)
{
	long long ns;

	if (!rt_clock(clock))
		return clock_nanosleep(clock, flags, req, rem);
	if (!req || req->tv_nsec < 0 || req->tv_nsec >= NSECS_PER_SEC || req->tv_sec < 0)
		return EINVAL;
	ns = timespec_to_ns(req);
	sleep_until(flags & TIMER_ABSTIME ? (uint64_t)ns : dt_now_ns() + (uint64_t)ns);
	if (rem && !(flags & TIMER_ABSTIME))
		rem->tv_sec = rem->tv_nsec = 0;
	return 0;
}

RTL_API int rtl_nanosleep(const struct timespec *req, struct timespec *rem)
{
	int err = rtl_clock_nanosleep(CLOCK_MONOTONIC, 0, req, rem);

	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

RTL_API int rtl_usleep(useconds_t us)
{
	sleep_until(dt_now_ns() + (uint64_t)us * 1000);
	return 0;
}

RTL_API unsigned int rtl_sleep(unsigned int s)
{
	sleep_until(dt_now_ns() + (uint64_t)s * NSECS_PER_SEC);
	return 0;
}

RTL_API int rtl_printf(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return n;
	/* one write: on an RT thread the proxy carries it out */
	if (write(STDERR_FILENO, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1) < 0)
		return -errno;
	return n;
}
