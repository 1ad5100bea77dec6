/* Description: a program's alternate signal stack (set without
 * SS_AUTODISARM: it stays armed for good natively) survives SA_ONSTACK
 * handlers that leave by siglongjmp, detached as natively: a fault's handler
 * (a JIT's SIGSEGV, CPython's faulthandler, LTP tests), one that makes system
 * calls first (nested traps: on a stack of 8 KiB, the runtime's work for a
 * call as deep as sched_setaffinity's may not run there), and one that
 * interrupts a forwarded call's wait.  After each, the next handler runs on
 * the alternate stack again (its address is in the stack's range), with no
 * system call in between, and sigaltstack reports the stack as set.  The
 * runtime installs the stack with SS_AUTODISARM (src/runtime/stack.c): the
 * kernel disarms it while a handler runs there, and the handler's
 * rt_sigreturn, which a siglongjmp skips, re-arms it. */
#include "helpers/t_altstack.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/utsname.h>

#define ROUNDS 4

static char *ss_lo;
static size_t ss_size;
static sigjmp_buf env;
static volatile int calls_in_handler;   /* the handler's system calls before it leaves */
static volatile int wrong;              /* the first wrong thing a handler saw (0: none) */
static volatile int handled;

/* Deep calls of the runtime's (the partition lookup of sched_setaffinity's
 * "pinned" rule; pid -1 is ESRCH in the end), a forwarded one and a wait. */
static void handler_calls(void)
{
	struct utsname u;
	struct timespec ts = { 0, 100000 };
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(T_DETACHED_CPU, &one);
	if (!wrong && (sched_setaffinity(-1, sizeof(one), &one) != -1 || errno != ESRCH))
		wrong = 20;
	if (!wrong && (uname(&u) || strcmp(u.sysname, "Linux")))
		wrong = 21;
	if (!wrong && nanosleep(&ts, NULL))
		wrong = 22;
}

static void on_signal(int sig)
{
	(void)sig;
	handled++;
	if (!wrong && !t_runs_on(ss_lo, ss_size))
		wrong = 10 + handled;
	if (calls_in_handler)
		handler_calls();
	siglongjmp(env, 1);
}

/* ROUNDS faults in a row, each handler leaving by siglongjmp and the next
 * fault taken with no system call between (the siglongjmp's own
 * rt_sigprocmask runs on the alternate stack, before the jump). */
static int faults(void)
{
	volatile int round = 0;

	handled = 0;
	sigsetjmp(env, 1);
	if (round < ROUNDS) {
		round++;
		__asm__ volatile("ud2");
	}
	return wrong ? wrong : handled == ROUNDS ? 0 : 30;
}

static int run(void)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_ONSTACK };
	stack_t got;
	int p[2], r;
	char c;

	/* 8 KiB or AT_MINSIGSTKSZ plus 4 KiB: room for the program's
	 * handlers, not for the runtime's work too */
	ss_size = t_small_altstack_size(4096);
	if (ss_size < 8192)
		ss_size = 8192;
	if (!(ss_lo = t_altstack_set(ss_size)) || pipe(p))
		return 1;
	if (sigaction(SIGILL, &sa, NULL) || sigaction(SIGALRM, &sa, NULL))
		return 2;
	/* first with calls in the handler: the runtime's work for them does not
	 * fit in what the handler leaves of the stack */
	calls_in_handler = 1;
	if ((r = faults()))
		return 100 + r;
	calls_in_handler = 0;
	if ((r = faults()))
		return 200 + r;
	/* a handler on top of a forwarded read's wait leaves by siglongjmp */
	struct itimerval it = { .it_value = { 0, 20000 } };
	handled = 0;
	if (!sigsetjmp(env, 1)) {
		setitimer(ITIMER_REAL, &it, NULL);
		(void)!read(p[0], &c, 1);
		return 3;
	}
	if (wrong || handled != 1)
		return 300 + wrong;
	if ((r = faults()))
		return 400 + r;
	if (sigaltstack(NULL, &got))
		return 4;
	if (got.ss_sp != ss_lo || got.ss_size != ss_size || got.ss_flags != 0)
		return 5;
	close(p[0]);
	close(p[1]);
	return 0;
}

/* r: 100s the faults with calls in the handler, 200s without, 300 the
 * interrupted wait, 400s the faults after it; +10+n: handler n was not on
 * the alternate stack; 4, 5: sigaltstack's report */
int main(int argc, char **argv)
{
	return t_altstack_main(argc, argv, run, "handlers that siglongjmp on a small alternate stack");
}
