/* Description: signals keep native semantics on a detached thread: a pipe
 * read forwarded to the proxy ends with EINTR without SA_RESTART and goes on
 * with it; a handler that itself writes while the read waits works (a trap
 * inside a trap); a handler that siglongjmps out of a blocked read (the
 * timeout idiom) leaves nothing behind; the proxy never runs the program's
 * handlers. */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>

static int pipefd[2], outfd[2];
static pid_t me;
static volatile sig_atomic_t handled_on;   /* tid that ran the handler */

static void handler(int s)
{
	static const char msg[] = "from handler";
	(void)s;
	handled_on = (sig_atomic_t)syscall(SYS_gettid);
	/* a system call inside a handler that interrupted a forwarded call */
	if (write(outfd[1], msg, sizeof(msg)) != sizeof(msg))
		_exit(3);
}

static void nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

/* From a normal thread: signal the detached thread, then maybe feed the pipe. */
static bool feed;
static void *poker(void *arg)
{
	(void)arg;
	nap(200);
	syscall(SYS_tgkill, getpid(), me, SIGUSR1);
	nap(200);
	if (feed && write(pipefd[1], "data", 4) != 4)
		_exit(4);
	return NULL;
}

static void one(bool restart)
{
	struct sigaction sa = { .sa_handler = handler, .sa_flags = restart ? SA_RESTART : 0 };
	pthread_t th;
	char buf[16], msg[32];
	ssize_t n;

	sigaction(SIGUSR1, &sa, NULL);
	handled_on = 0;
	feed = restart;
	pthread_create(&th, NULL, poker, NULL);
	errno = 0;
	n = read(pipefd[0], buf, sizeof(buf));   /* blocks: forwarded, waits */
	int e = errno;
	pthread_join(th, NULL);
	printf("%s: read -> %zd (%s), handler on tid %d\n", restart ? "SA_RESTART" : "no SA_RESTART",
	       n, n < 0 ? strerror(e) : "data", handled_on);
	if (restart)
		t_check(n == 4 && !memcmp(buf, "data", 4), "SA_RESTART: read %zd %s", n, strerror(e));
	else
		t_check(n == -1 && e == EINTR, "no SA_RESTART: read %zd %s", n, strerror(e));
	t_check(handled_on == me, "handler ran on tid %d, not the detached %d", handled_on, me);
	n = read(outfd[0], msg, sizeof(msg));
	t_check(n == 13 && !strcmp(msg, "from handler"), "handler's write arrived: %zd", n);
}

/* A handler that runs while the detached thread waits on a forwarded call
 * that does not block (the proxy is just slow): nothing is lost or doubled. */
static volatile long ticks;
static void tick(int s) { (void)s; ticks++; }

static void many(void)
{
	struct sigaction sa = { .sa_handler = tick, .sa_flags = SA_RESTART };
	struct itimerval it = { { 0, 500 }, { 0, 500 } };
	int fd = open("/dev/null", O_WRONLY);
	long ok = 0;

	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (int i = 0; i < 20000; i++)
		ok += write(fd, "x", 1) == 1;
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	close(fd);
	printf("20000 writes under a 2 kHz SIGALRM: %ld succeeded, %ld ticks\n", ok, ticks);
	t_check(ok == 20000, "only %ld of 20000 writes succeeded", ok);
	t_check(ticks > 0, "no SIGALRM handled");
}

/* The read-timeout idiom: alarm, and a handler that siglongjmps out of the
 * blocked read.  The abandoned read must not swallow later data. */
static sigjmp_buf jump;
static void jump_out(int s) { (void)s; siglongjmp(jump, 1); }

static void timeout_idiom(void)
{
	struct sigaction sa = { .sa_handler = jump_out };
	struct itimerval it = { { 0, 0 }, { 0, 100000 } };
	volatile int timeouts = 0;
	int p[2];
	char buf[8];

	if (pipe(p))
		return;
	sigaction(SIGALRM, &sa, NULL);
	for (volatile int i = 0; i < 3; i++) {
		if (sigsetjmp(jump, 1) == 0) {
			setitimer(ITIMER_REAL, &it, NULL);
			if (read(p[0], buf, sizeof(buf)) >= 0)
				break;
		} else {
			timeouts++;
		}
	}
	ssize_t n = write(p[1], "abc", 3);
	n = read(p[0], buf, sizeof(buf));
	printf("read timeout by siglongjmp: %d timeouts, then read %zd\n", timeouts, n);
	t_check(timeouts == 3, "%d timeouts of 3", timeouts);
	t_check(n == 3 && !memcmp(buf, "abc", 3), "data after the timeouts: %zd", n);
	close(p[0]);
	close(p[1]);
}

int main(int argc, char **argv)
{
	t_reexec_detached(argc, argv, NULL);
	me = t_main_tid();
	if (!t_find_proxy()) {
		fprintf(stderr, "not detached\n");
		return 1;
	}
	if (pipe(pipefd) || pipe(outfd))
		return 1;
	one(false);
	one(true);
	many();
	timeout_idiom();
	return t_detached_done();
}
