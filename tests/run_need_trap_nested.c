/* Description: a signal handler's system call made while an interrupted
 * sigaltstack() is on its way to the trap path (rewrite mode: the call's
 * handler asks for the trap path, and the trampoline looks after the
 * dispatch has returned) runs once, and the interrupted call is made: a
 * loop of sigaltstack(NULL, &oss) under a 20 us SA_RESTART SIGALRM whose
 * handler adds 1 to an eventfd.  The kernel's count (the eventfd) equals
 * the handler's runs, and every oss is written, as natively; the handler's
 * call once took the interrupted call's request for the trap path: it ran
 * twice, and sigaltstack returned 0 without writing oss.  Then a handler
 * that siglongjmps out of the sigaltstack loop: the first call after the
 * jump (an eventfd write) runs once (a request left behind by the
 * abandoned sigaltstack once sent the next call to the trap path too).
 * Timeout: 60 */
#include "helpers/t_detach.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <time.h>

#define TICK_US 20
/* The jumping handler is SA_NODEFER: a tick that comes before the kernel
 * has finished delivering the last one nests a frame on top of it, and at
 * 20 us that is the kernel's own pace on a slow machine (a Firecracker VM:
 * about 22 us per delivered SIGALRM to a thread spinning in user space,
 * natively, 133,000 of the 150,000 ticks of 3 s), so the nesting grew
 * until the stack overflowed, natively or detached (CI, exit 139). */
#define JUMP_TICK_US 100

static int efd;
static volatile long handler_runs;
static volatile sig_atomic_t may_jump;
static sigjmp_buf env;

static void on_alarm(int s)
{
	uint64_t one = 1;

	(void)s;
	syscall(SYS_write, efd, &one, sizeof(one));  /* through the program's syscall() site */
	handler_runs++;
}

static void on_alarm_jump(int s)
{
	(void)s;
	if (may_jump)
		siglongjmp(env, 1);
}

static double since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static uint64_t eventfd_take(void)
{
	uint64_t v = 0;

	if (read(efd, &v, sizeof(v)) != sizeof(v))
		return (uint64_t)-1;
	return v;
}

static void ticks(void (*fn)(int), int flags, long us)
{
	struct sigaction sa = { .sa_handler = fn, .sa_flags = flags };
	struct itimerval it = { { 0, us }, { 0, us } };

	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

static void no_ticks(void)
{
	struct itimerval off = { { 0, 0 }, { 0, 0 } };

	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_IGN);
}

/* sigaltstack(NULL, &oss) in a loop under the ticking handler */
static void nested(double secs)
{
	struct timespec t0;
	long calls = 0, failed = 0, unwritten = 0;

	ticks(on_alarm, SA_RESTART, TICK_US);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 100; i++, calls++) {
			stack_t o;
			memset(&o, 0x5a, sizeof(o));
			if (syscall(SYS_sigaltstack, NULL, &o))
				failed++;
			else if (o.ss_flags == 0x5a5a5a5a)
				unwritten++;
		}
	} while (since(&t0) < secs);
	no_ticks();
	uint64_t counted = eventfd_take();
	printf("nested: %ld sigaltstack calls, %ld failed, %ld returned 0 with oss unwritten; "
	       "%ld handler runs, eventfd counted %llu\n",
	       calls, failed, unwritten, (long)handler_runs, (unsigned long long)counted);
	t_check(handler_runs > 1000, "only %ld handler runs: the test proves nothing", (long)handler_runs);
	t_check(failed == 0, "%ld sigaltstack calls failed, natively none", failed);
	t_check(unwritten == 0, "%ld sigaltstack calls returned 0 without writing oss, natively none", unwritten);
	t_check(counted == (uint64_t)handler_runs,
		"the eventfd counted %llu writes for %ld handler runs: %lld handler calls ran twice, natively none",
		(unsigned long long)counted, (long)handler_runs, (long long)(counted - (uint64_t)handler_runs));
}

/* the handler jumps out of the sigaltstack loop; the first call after the
 * jump writes 1 to the eventfd */
static void jumped(double secs)
{
	static struct timespec t0;
	static volatile long jumps, calls;
	uint64_t one = 1;

	ticks(on_alarm_jump, SA_NODEFER, JUMP_TICK_US);   /* no mask for siglongjmp to restore */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (sigsetjmp(env, 0)) {
		may_jump = 0;
		syscall(SYS_write, efd, &one, sizeof(one));
		jumps++;
	}
	while (since(&t0) < secs) {
		for (int i = 0; i < 100; i++) {
			stack_t o;
			may_jump = 1;
			syscall(SYS_sigaltstack, NULL, &o);
			may_jump = 0;
			calls++;
		}
	}
	no_ticks();
	uint64_t counted = eventfd_take();
	printf("jumped: %ld sigaltstack calls, %ld jumps out of the loop, eventfd counted %llu\n", (long)calls,
	       (long)jumps, (unsigned long long)counted);
	t_check(jumps > 100, "only %ld jumps: the test proves nothing", (long)jumps);
	t_check(counted == (uint64_t)jumps,
		"the eventfd counted %llu writes for %ld jumps: %lld writes after a jump ran twice, natively none",
		(unsigned long long)counted, (long)jumps, (long long)(counted - (uint64_t)jumps));
}

int main(int argc, char **argv)
{
	t_native_then_detached(argc, argv, NULL);
	efd = eventfd(0, 0);
	t_check(efd >= 0, "eventfd: %s", strerror(errno));
	if (efd < 0)
		return t_done();
	nested(t_native() ? 1.0 : 4.0);
	jumped(t_native() ? 1.0 : 3.0);
	return t_native() ? t_done() : t_detached_done();
}
