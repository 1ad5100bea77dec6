/* Description: signals a forwarded call raises on the thread that made it
 * reach the detached thread, as natively: a write to a pipe without reader
 * raises SIGPIPE (handled on the detached thread before write returns EPIPE;
 * with the default action the process dies of it), a write past
 * RLIMIT_FSIZE raises SIGXFSZ (EFBIG; default: killed).  A blocked SIGPIPE
 * stays pending on the detached thread.  Checked natively first, then
 * detached. */
#include "helpers/t_detach.h"

#include <signal.h>
#include <sys/resource.h>

static volatile pid_t handled_on;
static volatile int handled_sig;
static void on_sig(int s)
{
	handled_sig = s;
	handled_on = (pid_t)syscall(SYS_gettid);
}

/* argv[1] "pipe-default" / "xfsz-default": die of the signal, as a child */
static int die_of(const char *what, const char *dir)
{
	char path[4200];
	int fd, p[2];

	if (!strcmp(what, "pipe-default")) {
		if (pipe(p))
			return 2;
		close(p[0]);
		ssize_t n = write(p[1], "x", 1);
		printf("write to a pipe without reader returned %zd\n", n);
		return 3;                 /* natively never reached */
	}
	struct rlimit rl = { 4096, RLIM_INFINITY };
	snprintf(path, sizeof(path), "%s/big", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || setrlimit(RLIMIT_FSIZE, &rl))
		return 2;
	char buf[4096] = { 0 };
	ssize_t a = write(fd, buf, sizeof(buf)), b = write(fd, buf, sizeof(buf));
	printf("writes past RLIMIT_FSIZE returned %zd, %zd\n", a, b);
	return 3;
}

/* Runs this test as "what dir", natively or under `detach run`, from the
 * outer (not detached) test process: it must die of sig either way. */
static void expect_death(char **argv, const char *what, int sig, bool detached)
{
	char dir[] = "/tmp/detach-raised.XXXXXX", path[4200], self[4096];
	const char *bin = getenv("DETACH_BIN");
	int st = 0;

	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (len <= 0 || !mkdtemp(dir))
		return;
	self[len] = '\0';
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		if (detached)
			execl(bin, bin, "run", "-c", "1", "--", self, what, dir, (char *)NULL);
		else
			execl("/proc/self/exe", argv[0], what, dir, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &st, 0);
	if (detached)
		t_reap_registry();      /* killed: its registry file stays */
	snprintf(path, sizeof(path), "%s/big", dir);
	unlink(path);
	rmdir(dir);
	printf("%s %s: %s %d\n", detached ? "detached" : "natively", what,
	       WIFSIGNALED(st) ? "killed by signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	t_check(WIFSIGNALED(st) && WTERMSIG(st) == sig, "%s %s: wait status %#x, natively killed by %d",
		detached ? "detached" : "natively", what, st, sig);
}

static void handled(void)
{
	struct sigaction sa = { .sa_handler = on_sig };
	pid_t me = (pid_t)syscall(SYS_gettid);
	sigset_t set, pend;
	int p[2];

	sigaction(SIGPIPE, &sa, NULL);
	if (pipe(p))
		return;
	close(p[0]);
	handled_on = 0;
	errno = 0;
	ssize_t n = write(p[1], "x", 1);
	int e = errno;
	/* the handler ran before write returned, on this thread */
	printf("SIGPIPE handled: write %zd (%s), handler %d on tid %d (me %d)\n", n, strerror(e), handled_sig,
	       (int)handled_on, (int)me);
	t_check(n == -1 && e == EPIPE, "write %zd %s", n, strerror(e));
	t_check(handled_on == me && handled_sig == SIGPIPE, "handler ran on %d for %d", (int)handled_on, handled_sig);

	/* blocked: pending on this thread afterwards */
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigprocmask(SIG_BLOCK, &set, NULL);
	handled_on = 0;
	n = write(p[1], "x", 1);
	sigpending(&pend);
	printf("SIGPIPE blocked: write %zd, pending %d, handler ran %s\n", n, sigismember(&pend, SIGPIPE),
	       handled_on ? "yes" : "no");
	t_check(sigismember(&pend, SIGPIPE) == 1, "SIGPIPE not pending while blocked");
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	t_check(handled_on == me, "the pending SIGPIPE was not delivered on unblocking");
	close(p[1]);
	signal(SIGPIPE, SIG_DFL);
}

int main(int argc, char **argv)
{
	if (argc == 3)
		return die_of(argv[1], argv[2]);
	if (!getenv("T_DETACHED") && !t_native()) {
		if (!getenv("DETACH_BIN"))
			t_skip("DETACH_BIN is not set: run through tests/run.sh");
		for (int d = 0; d < 2; d++) {
			expect_death(argv, "pipe-default", SIGPIPE, d);
			expect_death(argv, "xfsz-default", SIGXFSZ, d);
		}
		if (t_failures)
			return t_done();
	}
	t_native_then_detached(argc, argv, NULL);
	printf("%s\n", t_native() ? "natively:" : "detached:");
	if (!t_native() && !t_find_proxy()) {
		fprintf(stderr, "not detached\n");
		return 1;
	}
	handled();
	return t_native() ? t_done() : t_detached_done();
}
