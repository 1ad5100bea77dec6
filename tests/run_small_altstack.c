/* Description: a program whose alternate signal stack is small (the
 * kernel's AT_MINSIGSTKSZ plus 4 KiB, a guard page under it, as CPython's
 * faulthandler allocates one on its heap) makes system calls detached as
 * natively: the runtime's work for a trap may not run past the bottom of
 * that stack (CPython under faulthandler: sched_setaffinity's path overflowed it into
 * CPython's heap, "free(): invalid pointer" at exit).  And an SA_ONSTACK
 * handler that interrupts a forwarded call's wait still runs on the
 * program's alternate stack, as natively (Go's handlers require it). */
#include "helpers/t_altstack.h"

#include <sys/time.h>
#include <sys/utsname.h>
#include <time.h>

static char *ss_lo;
static size_t ss_size;
static volatile int on_altstack = -1;

static void on_alarm(int sig)
{
	(void)sig;
	on_altstack = t_runs_on(ss_lo, ss_size);
}

static int calls(void)
{
	struct utsname u;
	struct timespec ts = { 0, 1000000 };
	cpu_set_t own, one;
	int p[2];
	char c;

	if (getppid() <= 0 || uname(&u) || strcmp(u.sysname, "Linux"))
		return 1;
	if (nanosleep(&ts, NULL))
		return 2;
	/* the deep path CPython's test_sched_setaffinity reached: a
	 * thread pinned to the detached CPU may be chosen by the "pinned" rule,
	 * which looks the CPU partition up; pid -1 is ESRCH in the end */
	if (sched_getaffinity(0, sizeof(own), &own) || sched_setaffinity(0, sizeof(own), &own))
		return 3;
	CPU_ZERO(&one);
	CPU_SET(T_DETACHED_CPU, &one);
	if (sched_setaffinity(-1, sizeof(one), &one) != -1 || errno != ESRCH)
		return 3;
	/* a handler on top of a forwarded read's wait, on the alternate stack */
	if (pipe(p))
		return 4;
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_ONSTACK };
	struct itimerval it = { .it_value = { 0, 50000 } };
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	if (read(p[0], &c, 1) != -1 || errno != EINTR)
		return 5;
	if (on_altstack != 1)
		return 6;
	close(p[0]);
	close(p[1]);
	return 0;
}

static int run(void)
{
	ss_size = t_small_altstack_size(4096);
	if (!(ss_lo = t_altstack_set(ss_size)))
		return 10;
	return calls();
}

/* r: the step of calls() or run() that went wrong */
int main(int argc, char **argv)
{
	return t_altstack_main(argc, argv, run, "calls with a small alternate stack");
}
