/* Description: every encoding of the calling thread's CPU clock is the
 * detached thread's: CLOCK_THREAD_CPUTIME_ID (3) and the kernel's
 * MAKE_THREAD_CPUCLOCK(0, PROF/VIRT/SCHED) (-4, -3, -2) read its time, not
 * the proxy's, and a 2 ms thread-CPU timer (glibc's timer_create passes
 * -2) fires at the native rate, within 10%, while the thread computes. */
#include "helpers/t_detach.h"

#include <signal.h>
#include <time.h>

#define BUSY_NS 500000000ull
#define TIMER_NS 2000000l

static volatile sig_atomic_t fired;
static void on_timer(int s) { (void)s; fired++; }

/* The raw call: the id as given, whatever libc makes of it. */
static uint64_t clock_of(clockid_t c)
{
	struct timespec ts;
	if (syscall(SYS_clock_gettime, c, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Computes for wall-clock ns (the vDSO's clock: no system call). */
static void busy(uint64_t ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, end = now + ns;
	while (now < end) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	}
}

/* Expirations per second of a 2 ms CLOCK_THREAD_CPUTIME_ID timer while
 * this thread computes. */
static double timer_rate(void)
{
	struct sigevent ev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1 };
	struct itimerspec it = { { 0, TIMER_NS }, { 0, TIMER_NS } };
	timer_t tm;

	signal(SIGUSR1, on_timer);
	if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &tm)) {
		t_check(0, "timer_create: %s", strerror(errno));
		return 0;
	}
	fired = 0;
	timer_settime(tm, 0, &it, NULL);
	busy(BUSY_NS);
	timer_delete(tm);
	return fired * 1e9 / (double)BUSY_NS;
}

int main(int argc, char **argv)
{
	static const char *const adaptive[] = { "--proxy", "adaptive", NULL };
	char rate[32];

	if (!getenv("T_DETACHED")) {
		snprintf(rate, sizeof(rate), "%.1f", timer_rate());
		setenv("T_NATIVE_RATE", rate, 1);
	}
	/* an adaptive proxy computes little: its clock is told from ours */
	t_reexec_detached(argc, argv, adaptive);
	pid_t proxy = t_find_proxy();
	t_check(proxy > 0, "not detached");

	const clockid_t own[] = { CLOCK_THREAD_CPUTIME_ID, -2, -3, -4 };
	const char *names[] = { "CLOCK_THREAD_CPUTIME_ID", "THREAD_CPUCLOCK(0, SCHED)",
				"THREAD_CPUCLOCK(0, VIRT)", "THREAD_CPUCLOCK(0, PROF)" };
	uint64_t before[4], after[4];
	for (int i = 0; i < 4; i++)
		before[i] = clock_of(own[i]);
	busy(200000000ull);
	for (int i = 0; i < 4; i++) {
		after[i] = clock_of(own[i]);
		printf("%-26s advanced %.1f ms over 200 ms of computing\n", names[i], (after[i] - before[i]) / 1e6);
		t_check(after[i] - before[i] > 150000000ull, "%s is not the detached thread's clock", names[i]);
	}

	double native = atof(getenv("T_NATIVE_RATE")), detached = timer_rate();
	printf("2 ms thread-CPU timer: %.1f/s natively, %.1f/s detached\n", native, detached);
	t_check(native > 0 && detached > native * 0.9 && detached < native * 1.1,
		"the thread-CPU timer fires %.1f/s, natively %.1f/s", detached, native);
	return t_detached_done();
}
