/* Description: pselect, ppoll and epoll_pwait end with EINTR for every
 * signal their mask lets in, however soon after the call it comes, as
 * natively (the kernel's swap of the mask and its wait are one step).
 * SIGUSR1 is blocked; each round waits with a mask that opens it (pselect
 * with no descriptors: a sleep served by the runtime; ppoll and
 * epoll_pwait on a pipe that never has data: forwarded to the proxy), and
 * a child sends one SIGUSR1 a random 0-4 us after the round began, so
 * that across the rounds it lands in every part of the call: before the
 * mask is applied, between the mask and the wait, during the wait.  The
 * runtime applies the mask with a call of its own before the wait, and a
 * handler that ran between the two left no mark the wait saw: the wait
 * went on with the signal taken (pselect, in sud mode a hang about once
 * in 40,000-60,000 rounds, in rewrite mode once in 20,000), and a
 * forwarded ppoll interrupted before the proxy entered it was entered
 * after the interrupt and waited for good.  A round not back within 3 s
 * is a hang: the child reports the main thread's /proc status and ends
 * the test with SIGTERM.  Every round must end with EINTR and run the
 * handler.  Natively first, then detached; both modes.
 * Timeout: 60 */
#include "helpers/t_detach.h"

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

/* rounds of each kind for this long detached (natively 1 s: the check
 * that the test is right) */
#define SECONDS_EACH 3
#define HANG_MS 3000

static volatile long hits;
static void on_usr1(int s)
{
	(void)s;
	hits++;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The sender: one SIGUSR1 per byte on ack, a random 0-4 us after it;
 * 'q' ends it.  A round not acknowledged within HANG_MS is a hang. */
static void sender(pid_t parent, int ack)
{
	struct pollfd p = { ack, POLLIN, 0 };
	char c, path[64], line[256];

	srand(1);
	for (long i = 0;; i++) {
		if (poll(&p, 1, HANG_MS) == 0) {
			snprintf(path, sizeof(path), "/proc/%d/task/%d/status", parent, parent);
			FILE *f = fopen(path, "r");
			fprintf(stderr, "FAIL: round %ld: the wait did not end in %d ms after its signal\n", i, HANG_MS);
			while (f && fgets(line, sizeof(line), f))
				if (!strncmp(line, "State", 5) || !strncmp(line, "SigPnd", 6) ||
				    !strncmp(line, "ShdPnd", 6) || !strncmp(line, "SigBlk", 6))
					fprintf(stderr, "  main thread %s", line);
			kill(parent, SIGTERM);
			_exit(1);
		}
		if (read(ack, &c, 1) != 1 || c == 'q')
			_exit(0);
		uint64_t until = now_ns() + (uint64_t)(rand() % 4000);
		while (now_ns() < until)
			;
		kill(parent, SIGUSR1);
	}
}

int main(int argc, char **argv)
{
	static const char *const kinds[] = { "pselect (served)", "ppoll (forwarded)", "epoll_pwait (forwarded)" };
	int ack[2], never[2], ep;
	long total = 0;
	sigset_t usr1, empty;
	struct sigaction sa = { .sa_handler = on_usr1 };
	struct epoll_event ev = { .events = EPOLLIN };

	t_native_then_detached(argc, argv, NULL);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigemptyset(&empty);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	t_check(pipe(ack) == 0 && pipe(never) == 0, "pipe: %s", strerror(errno));
	ep = epoll_create1(0);
	t_check(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, never[0], &ev) == 0, "epoll: %s", strerror(errno));
	pid_t parent = getpid(), child = fork();
	if (child == 0)
		sender(parent, ack[0]);
	t_check(child > 0, "fork: %s", strerror(errno));

	for (int k = 0; k < 3; k++) {
		long rounds = 0, other = 0, h0 = hits;
		uint64_t end = now_ns() + (t_native() ? 1 : SECONDS_EACH) * 1000000000ull;
		struct pollfd pf = { never[0], POLLIN, 0 };
		struct epoll_event out;

		fprintf(stderr, "%s from round %ld\n", kinds[k], total);
		while (now_ns() < end) {
			int r = -1;

			t_check(write(ack[1], "a", 1) == 1, "write: %s", strerror(errno));
			if (k == 0)
				r = pselect(0, NULL, NULL, NULL, NULL, &empty);
			else if (k == 1)
				r = ppoll(&pf, 1, NULL, &empty);
			else
				r = epoll_pwait(ep, &out, 1, -1, &empty);
			if (!(r == -1 && errno == EINTR) && other++ < 3)
				fprintf(stderr, "FAIL: %s returned %d (%s), not EINTR\n", kinds[k], r,
					r < 0 ? strerror(errno) : "no error");
			rounds++;
			total++;
		}
		printf("%s: %ld rounds, %ld not EINTR, %ld handlers run\n", kinds[k], rounds, other, hits - h0);
		t_check(other == 0, "%s: %ld of %ld rounds did not end with EINTR", kinds[k], other, rounds);
		t_check(hits - h0 == rounds, "%s: %ld handlers for %ld signals", kinds[k], hits - h0, rounds);
	}
	t_check(write(ack[1], "q", 1) == 1, "write: %s", strerror(errno));
	waitpid(child, NULL, 0);
	return t_native() ? t_done() : t_detached_done();
}
