/* Description: on a CPU the detached thread shares (a busy process pinned
 * there too), its CPU clock still counts what it computed: the runtime
 * takes out of the kernel's figure only the cycles its waits spent on the
 * CPU, not the time the thread was preempted in them (which the kernel
 * never counted).  Counting those took the clock to 0 (LTP clock_gettime01).
 * The thread computes 2 ms and sleeps 2 ms (served in user space), 100
 * times, beside the busy process; its CLOCK_THREAD_CPUTIME_ID must advance
 * by at least an eighth of the wall time it spent computing (about half,
 * with the CPU shared in two, and less where it was preempted while it
 * computed; it read 0 before). */
#include "helpers/t_detach.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	t_reexec_detached(argc, argv, NULL);

	/* the other process on CPU 1: a child runs undetached, where the
	 * runtime placed it, until it pins itself */
	pid_t hog = fork();
	if (hog == 0) {
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(1, &one);
		sched_setaffinity(0, sizeof(one), &one);
		for (;;)
			__asm__ volatile("" ::: "memory");
	}
	t_check(hog > 0, "fork: %s", strerror(errno));
	struct timespec nap = { 0, 50000000 };
	nanosleep(&nap, NULL);          /* the hog reaches CPU 1 */

	uint64_t busy_wall = 0, cpu0 = thread_cpu_ns();
	struct timespec two_ms = { 0, 2000000 };
	for (int i = 0; i < 100; i++) {
		uint64_t s = mono_ns();
		while (mono_ns() - s < 2000000)
			__asm__ volatile("" ::: "memory");
		busy_wall += mono_ns() - s;
		nanosleep(&two_ms, NULL);
	}
	uint64_t cpu = thread_cpu_ns() - cpu0;
	kill(hog, SIGKILL);
	waitpid(hog, NULL, 0);
	printf("computed for %.1f ms of wall time; the thread's CPU clock advanced %.1f ms\n", busy_wall / 1e6,
	       cpu / 1e6);
	t_check(cpu >= busy_wall / 8, "the CPU clock advanced %.1f ms for %.1f ms of computing on a shared CPU",
		cpu / 1e6, busy_wall / 1e6);
	return t_detached_done();
}
