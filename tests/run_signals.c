/* Description: signals keep native semantics on a detached thread: a pipe
 * read forwarded to the proxy ends with EINTR without SA_RESTART and goes on
 * with it; a handler that itself writes while the read waits works (a trap
 * inside a trap); a handler that siglongjmps out of a blocked read (the
 * timeout idiom) leaves nothing behind; the proxy never runs the program's
 * handlers; a signal pending while blocked ends a ppoll, pselect6 or
 * epoll_pwait whose mask unblocks it with EINTR at once (the kernel applies
 * the mask before it waits), with descriptors (forwarded) or without (a
 * sleep). */
#include "helpers/t_detach.h"

#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/select.h>
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
	/* The abandoned read was cancelled: the proxy is not still reading
	 * the pipe (it would take the data written next; reading its state is
	 * itself a call, the first after the jump) */
	char sc[256], want[32];
	snprintf(want, sizeof(want), "0 0x%x ", p[0]);
	if (t_task_file(t_find_proxy(), "syscall", sc, sizeof(sc)) == 0 && !strncmp(sc, want, strlen(want))) {
		t_check(false, "the proxy still reads the pipe the program left by siglongjmp: %s", sc);
		return;         /* the read below would wait for good */
	}
	ssize_t n = write(p[1], "abc", 3);
	n = read(p[0], buf, sizeof(buf));
	printf("read timeout by siglongjmp: %d timeouts, then read %zd\n", timeouts, n);
	t_check(timeouts == 3, "%d timeouts of 3", timeouts);
	t_check(n == 3 && !memcmp(buf, "abc", 3), "data after the timeouts: %zd", n);
	close(p[0]);
	close(p[1]);
}

static volatile sig_atomic_t usr2_seen;
static void on_usr2(int s) { (void)s; usr2_seen++; }

/* SIGUSR2 blocked and pending; each wait's mask unblocks it */
static void pending_unblocked(void)
{
	struct sigaction sa = { .sa_handler = on_usr2 };
	sigset_t blk, none;
	struct timespec ts = { 2, 0 }, t0, t1;
	int p[2], ep = epoll_create1(0);
	struct epoll_event ev;

	sigemptyset(&blk);
	sigaddset(&blk, SIGUSR2);
	sigemptyset(&none);
	sigaction(SIGUSR2, &sa, NULL);
	if (pipe(p) || ep < 0)
		return;
	for (int k = 0; k < 5; k++) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		fd_set rd;
		int r, e, seen = usr2_seen;

		FD_ZERO(&rd);
		FD_SET(p[0], &rd);
		sigprocmask(SIG_BLOCK, &blk, NULL);
		raise(SIGUSR2);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		switch (k) {
		case 0: r = ppoll(NULL, 0, &ts, &none); break;
		case 1: r = ppoll(&pfd, 1, &ts, &none); break;
		case 2: r = pselect(0, NULL, NULL, NULL, &ts, &none); break;
		case 3: r = pselect(p[0] + 1, &rd, NULL, NULL, &ts, &none); break;
		default: r = epoll_pwait(ep, &ev, 1, 2000, &none); break;
		}
		e = errno;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		sigprocmask(SIG_UNBLOCK, &blk, NULL);
		double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
		t_check(r == -1 && e == EINTR && usr2_seen == seen + 1 && secs < 1,
			"wait %d with a pending signal its mask unblocks: %d (%s) after %.3f s, handler ran %d times",
			k, r, strerror(e), secs, usr2_seen - seen);
	}
	close(p[0]);
	close(p[1]);
	close(ep);
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
	pending_unblocked();
	return t_detached_done();
}
