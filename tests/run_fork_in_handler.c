/* Description: a fork child made by a signal handler that runs on top of a
 * forwarded call resumes that call as natively.  Each case runs as its own
 * program, natively and then under `detach run`, within a time limit, and
 * must end the same way (status 0: every check below held):
 *  - eintr: main blocks in a read of an empty pipe; a SIGALRM handler
 *    without SA_RESTART calls fork().  After the handler both processes
 *    must get EINTR from the read, the child saying so with its exit status
 *    (it spun for ever in its copy of the runtime's wait for the proxy's
 *    reply, which no proxy answers: the parent killed it after 5 s);
 *  - restart: the same with SA_RESTART; a third process writes 2 bytes
 *    300 ms later, and both reads, entered again after the handler, must
 *    get one byte each.
 * Timeout: 120 */
#include "helpers/t_detach.h"

#include <signal.h>
#include <time.h>

#define LIMIT_S 20
#define CHILD_WAIT_S 5

/* the child's exit statuses */
enum { CHILD_READ_ONE = 2, CHILD_EINTR = 3, CHILD_OTHER = 4 };

static volatile sig_atomic_t in_child;
static volatile pid_t forked = -1;

static void fork_here(int s)
{
	pid_t p;

	(void)s;
	p = fork();
	if (p == 0)
		in_child = 1;
	else
		forked = p;
}

/* The exit status of child pid, waited for at most limit_s; -1: it did not
 * end (killed), -2: no such child. */
static int reap(pid_t pid, int limit_s)
{
	int st = 0;

	if (pid <= 0)
		return -2;
	for (int i = 0; i < limit_s * 100; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (r < 0)
			return -2;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static int fork_in_read(bool restart)
{
	struct sigaction sa = { .sa_handler = fork_here, .sa_flags = restart ? SA_RESTART : 0 };
	pid_t writer = -1;
	int p[2], e, child;
	ssize_t n;
	char c;

	if (pipe(p))
		return 20;
	if (restart && (writer = fork()) == 0) {
		usleep(300000);
		_exit(write(p[1], "ab", 2) == 2 ? 0 : 1);
	}
	sigaction(SIGALRM, &sa, NULL);
	ualarm(50000, 0);
	n = read(p[0], &c, 1);
	e = errno;
	if (in_child)
		_exit(n == 1 ? CHILD_READ_ONE : n < 0 && e == EINTR ? CHILD_EINTR : CHILD_OTHER);
	child = reap(forked, CHILD_WAIT_S);
	if (restart)
		reap(writer, CHILD_WAIT_S);
	printf("parent: read %zd (%s); child: %s %d\n", n, n < 0 ? strerror(e) : "data",
	       child == -1 ? "still running after 5 s, killed," : "status", child);
	if (child == -1)
		return 50;                      /* the child never came back from its read */
	if (child != (restart ? CHILD_READ_ONE : CHILD_EINTR))
		return 40 + (child >= 0 && child < 10 ? child : 9);
	if (restart ? n != 1 : !(n < 0 && e == EINTR))
		return 30;
	return 0;
}

static int role(const char *r)
{
	if (getenv("T_DETACHED") && !t_find_proxy())
		return 10;                      /* under detach run, but not detached */
	if (!strcmp(r, "eintr"))
		return fork_in_read(false);
	if (!strcmp(r, "restart"))
		return fork_in_read(true);
	return 11;
}

int main(int argc, char **argv)
{
	static const char *const roles[] = { "eintr", "restart" };

	if (argc == 2)
		return role(argv[1]);
	if (!getenv("DETACH_BIN"))
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		t_role_same(roles[i], 0, LIMIT_S);
	return t_done();
}
