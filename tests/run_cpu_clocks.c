/* Description: every encoding of the calling thread's CPU clock is the
 * detached thread's: CLOCK_THREAD_CPUTIME_ID (3) and the kernel's
 * MAKE_THREAD_CPUCLOCK(0, PROF/VIRT/SCHED) (-4, -3, -2) read its time, not
 * the proxy's: over 200 ms of computing, the SCHED clocks advance what the
 * kernel's schedstat counts for the thread, within 10%, the tick-sampled
 * PROF and VIRT at least half of it (on a CPU shared with other work the
 * thread computes for less than the 200 ms that pass), and a 2 ms thread-CPU timer (glibc's timer_create passes
 * -2) expires once per 2 ms of the CPU time the kernel counts for the
 * thread (schedstat), within 10%, as natively: expirations counted with
 * their overruns, since on a shared CPU the tick that checks the timer
 * may land while another task runs. */
#include "helpers/t_detach.h"

#include <signal.h>
#include <time.h>

#define BUSY_NS 500000000ull
#define TIMER_NS 2000000l

static timer_t timer;
static volatile sig_atomic_t fired;
static void on_timer(int s)
{
	int over = timer_getoverrun(timer);

	(void)s;
	fired += 1 + (over > 0 ? over : 0);
}

/* The calling thread's CPU time as the kernel counts it: the first field
 * of /proc/self/task/TID/schedstat, in ns. */
static uint64_t kernel_cpu_ns(void)
{
	char path[64];
	unsigned long long ns = 0;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/schedstat", (long)syscall(SYS_gettid));
	FILE *f = fopen(path, "r");
	if (!f || fscanf(f, "%llu", &ns) != 1)
		t_check(0, "cannot read %s", path);
	if (f)
		fclose(f);
	return ns;
}

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

/* Expirations of a 2 ms CLOCK_THREAD_CPUTIME_ID timer while this thread
 * computes, per 2 ms of its CPU time as the kernel counts it (1.0: exact). */
static double timer_ratio(void)
{
	struct sigevent ev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1 };
	struct itimerspec it = { { 0, TIMER_NS }, { 0, TIMER_NS } };

	signal(SIGUSR1, on_timer);
	if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &timer)) {
		t_check(0, "timer_create: %s", strerror(errno));
		return 0;
	}
	fired = 0;
	uint64_t cpu0 = kernel_cpu_ns();
	timer_settime(timer, 0, &it, NULL);
	busy(BUSY_NS);
	timer_delete(timer);
	uint64_t cpu = kernel_cpu_ns() - cpu0;
	return cpu ? fired * (double)TIMER_NS / (double)cpu : 0;
}

int main(int argc, char **argv)
{
	static const char *const adaptive[] = { "--proxy", "adaptive", NULL };
	char ratio[32];

	if (!getenv("T_DETACHED")) {
		snprintf(ratio, sizeof(ratio), "%.3f", timer_ratio());
		setenv("T_NATIVE_RATIO", ratio, 1);
	}
	/* an adaptive proxy computes little: its clock is told from ours */
	t_reexec_detached(argc, argv, adaptive);
	pid_t proxy = t_find_proxy();
	t_check(proxy > 0, "not detached");

	const clockid_t own[] = { CLOCK_THREAD_CPUTIME_ID, -2, -3, -4 };
	const char *names[] = { "CLOCK_THREAD_CPUTIME_ID", "THREAD_CPUCLOCK(0, SCHED)",
				"THREAD_CPUCLOCK(0, VIRT)", "THREAD_CPUCLOCK(0, PROF)" };
	uint64_t before[4], after[4];
	uint64_t k0 = kernel_cpu_ns();
	for (int i = 0; i < 4; i++)
		before[i] = clock_of(own[i]);
	busy(200000000ull);
	for (int i = 0; i < 4; i++)
		after[i] = clock_of(own[i]);
	double kernel = (double)(kernel_cpu_ns() - k0);
	for (int i = 0; i < 4; i++) {
		double adv = (double)(after[i] - before[i]);
		bool sched = i < 2;
		printf("%-26s advanced %.1f ms over 200 ms of computing (the kernel's schedstat: %.1f ms)\n", names[i],
		       adv / 1e6, kernel / 1e6);
		t_check(sched ? adv > kernel * 0.9 && adv < kernel * 1.1 : adv > kernel * 0.5,
			"%s is not the detached thread's clock", names[i]);
	}

	double native = atof(getenv("T_NATIVE_RATIO")), detached = timer_ratio();
	printf("2 ms thread-CPU timer, expirations per 2 ms of the kernel's CPU time: %.3f natively, %.3f detached\n",
	       native, detached);
	t_check(native > 0.9 && native < 1.1, "natively the thread-CPU timer expires %.3f times per period", native);
	t_check(detached > 0.9 && detached < 1.1, "the thread-CPU timer expires %.3f times per period, natively %.3f",
		detached, native);
	return t_detached_done();
}
