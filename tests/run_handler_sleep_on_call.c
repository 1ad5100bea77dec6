/* Description: a handler's sleep made on top of a forwarded call that an
 * earlier handler interrupted sleeps its length, and the call ends as the
 * first signal's action says, as natively.  A SIGUSR1 handler raises
 * SIGUSR2 (blocked by its sa_mask) while main's pipe read waits on the
 * proxy: SIGUSR2 is delivered as SIGUSR1's handler returns into the read's
 * wait, before the wait looks, and its handler sleeps 2 ms (nanosleep,
 * poll, select, ppoll without descriptors: served by the runtime).  The
 * first handler's return left its mark for the read (intr_first); the
 * sleep took that mark for its own interruption and ended at once with
 * EINTR, and the read then ended as SIGUSR2's SA_RESTART said: a read
 * that natively ends with EINTR (SIGUSR1 without SA_RESTART) went on, one
 * that natively goes on (SIGUSR1 with it, SIGUSR2 without) ended with
 * EINTR.  Each sleep must return 0 after 2 ms or more; the read must
 * return EINTR or the byte written after the signal as natively.
 * Natively first, then detached; both modes.
 * Timeout: 60 */
#include "helpers/t_detach.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/select.h>
#include <time.h>

#define SLEEP_NS 2000000

static int p[2], kind;
static pid_t main_tid;
static volatile long sleep_ret;
static volatile int sleep_errno;
static volatile uint64_t slept_ns;
static const char *const kinds[] = { "nanosleep", "poll", "select", "ppoll" };

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void on_usr1(int s)
{
	(void)s;
	raise(SIGUSR2);         /* blocked here: delivered as this returns */
}

static void on_usr2(int s)
{
	struct timespec d = { 0, SLEEP_NS };
	struct timeval tv = { 0, SLEEP_NS / 1000 };
	uint64_t a = now_ns();

	(void)s;
	errno = 0;
	if (kind == 0)
		sleep_ret = nanosleep(&d, NULL);
	else if (kind == 1)
		sleep_ret = poll(NULL, 0, SLEEP_NS / 1000000);
	else if (kind == 2)
		sleep_ret = select(0, NULL, NULL, NULL, &tv);
	else
		sleep_ret = ppoll(NULL, 0, &d, NULL);
	sleep_errno = errno;
	slept_ns = now_ns() - a;
}

static void *helper(void *x)
{
	(void)x;
	usleep(50000);
	syscall(SYS_tgkill, getpid(), main_tid, SIGUSR1);
	usleep(50000);
	if (write(p[1], "x", 1) != 1)
		abort();
	return NULL;
}

int main(int argc, char **argv)
{
	/* SA_RESTART of SIGUSR1, of SIGUSR2; the read's end natively (the
	 * first signal's decides) */
	static const struct { int f1, f2; bool eintr; } cases[] = {
		{ 0, SA_RESTART, true },
		{ SA_RESTART, SA_RESTART, false },
		{ SA_RESTART, 0, false },
	};

	t_native_then_detached(argc, argv, NULL);
	main_tid = (pid_t)syscall(SYS_gettid);
	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		for (kind = 0; kind < 4; kind++) {
			struct sigaction s1 = { .sa_handler = on_usr1, .sa_flags = cases[c].f1 };
			struct sigaction s2 = { .sa_handler = on_usr2, .sa_flags = cases[c].f2 };
			pthread_t th;
			char ch;

			sigemptyset(&s1.sa_mask);
			sigaddset(&s1.sa_mask, SIGUSR2);
			sigemptyset(&s2.sa_mask);
			sigaction(SIGUSR1, &s1, NULL);
			sigaction(SIGUSR2, &s2, NULL);
			t_check(pipe(p) == 0, "pipe: %s", strerror(errno));
			sleep_ret = 99;
			t_check(pthread_create(&th, NULL, helper, NULL) == 0, "pthread_create");
			ssize_t n = read(p[0], &ch, 1);
			int e = errno;
			pthread_join(th, NULL);
			printf("SIGUSR1 %s, SIGUSR2 %s, %s: read %zd (%s); the handler's sleep %ld (%s) after %.3f ms\n",
			       cases[c].f1 ? "SA_RESTART" : "no SA_RESTART", cases[c].f2 ? "SA_RESTART" : "no SA_RESTART",
			       kinds[kind], n, n < 0 ? strerror(e) : "ok", (long)sleep_ret,
			       sleep_ret ? strerror(sleep_errno) : "ok", slept_ns / 1e6);
			if (cases[c].eintr)
				t_check(n == -1 && e == EINTR, "%s: the read returned %zd, not EINTR (SIGUSR1, first, has no SA_RESTART)",
					kinds[kind], n);
			else
				t_check(n == 1, "%s: the read returned %zd (%s), not its byte (SIGUSR1, first, has SA_RESTART)",
					kinds[kind], n, n < 0 ? strerror(e) : "ok");
			t_check(sleep_ret == 0 && slept_ns >= SLEEP_NS, "%s in SIGUSR2's handler returned %ld (%s) after %llu ns, not 0 after %d",
				kinds[kind], (long)sleep_ret, strerror(sleep_errno), (unsigned long long)slept_ns, SLEEP_NS);
			close(p[0]);
			close(p[1]);
		}
	}
	return t_native() ? t_done() : t_detached_done();
}
