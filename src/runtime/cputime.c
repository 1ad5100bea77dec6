/* CPU time as the program sees it: every encoding of "this thread's" CPU
 * clock names the detached thread, not the proxy that carries out the call.
 *
 * The kernel's CPU-clock ids (include/linux/posix-timers_types.h) are
 * negative: ~pid << 3 | PERTHREAD (4) | which (PROF 0, VIRT 1, SCHED 2), pid
 * 0 meaning the caller.  glibc passes CLOCK_THREAD_CPUTIME_ID (3) to
 * clock_gettime, but MAKE_THREAD_CPUCLOCK(0, SCHED) (-2) to timer_create;
 * pthread_getcpuclockid gives MAKE_THREAD_CPUCLOCK(tid, SCHED).  Process
 * clocks (CLOCK_PROCESS_CPUTIME_ID, pid 0) name the same process on the
 * proxy. */
#include "runtime/dispatch.h"

#include <string.h>
#include <sys/syscall.h>

#define CPUCLOCK_PERTHREAD 4
#define CPUCLOCK_SCHED     2
#define CPUCLOCK_WHICH(c)  ((c) & 3)
#define CPUCLOCK_PID(c)    ((pid_t)~((c) >> 3))
#define MAKE_THREAD_CPUCLOCK(tid, which) \
	((clockid_t)((~(unsigned)(tid) << 3) | CPUCLOCK_PERTHREAD | (unsigned)(which)))

/* The clock the caller means, named so that the proxy reads the same. */
static clockid_t own_clock(const struct dt_thread *t, clockid_t clk)
{
	if (clk == CLOCK_THREAD_CPUTIME_ID)
		return MAKE_THREAD_CPUCLOCK(t->tid, CPUCLOCK_SCHED);
	if (clk < 0 && (clk & CPUCLOCK_PERTHREAD) && CPUCLOCK_PID(clk) == 0)
		return MAKE_THREAD_CPUCLOCK(t->tid, CPUCLOCK_WHICH(clk));
	return clk;
}

/* clock_gettime, clock_getres, timer_create: the clock is a[0]. */
long do_cpu_clock(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	long b[6];

	(void)uc;
	memcpy(b, a, sizeof(b));
	b[0] = (long)own_clock(t, (clockid_t)a[0]);
	return forward(t, nr, b);
}
