/* Description: signals at any point of the first calls of a program (the
 * sites being rewritten in rewrite mode) and of the forwarded calls after
 * them never hang it nor change a result: a 20 us SA_RESTART SIGALRM whose
 * handler makes a call of its own, while the first calls of getppid, uname,
 * getcwd, access and getuid are made, then STORM_CALLS more of getppid and
 * uname (a signal that lands as a forwarded call begins: its handler's
 * getpid once took the call's place in the mailbox, and uname returned the
 * pid); 100 fresh processes under `detach run`, each with its own time
 * limit, all print "done" as the program does natively.
 * Timeout: 300 */
#include "helpers/t_detach.h"

#include <poll.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>

#define RUNS 100
#define RUN_LIMIT_MS 5000
#define HUNG_ENOUGH 3            /* stop counting after this many */
#define STORM_CALLS 2000         /* forwarded calls per process after the first ones */

static volatile sig_atomic_t ticks;

static void on_alarm(int s)
{
	(void)s;
	ticks++;
	getpid();          /* a call of its own inside the handler */
}

static int workload(void)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	struct itimerval it = { { 0, 20 }, { 0, 20 } }, off = { { 0, 0 }, { 0, 0 } };
	struct utsname u;
	char cwd[4096];
	pid_t parent = getppid();      /* before the storm */

	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (int i = 0; i < 3; i++) {
		long r[5];
		errno = 0;
		r[0] = getppid();
		r[1] = uname(&u);
		r[2] = getcwd(cwd, sizeof(cwd)) ? 0 : -errno;
		r[3] = access("/", R_OK) ? -errno : 0;
		r[4] = getuid() == (uid_t)-2 ? -1 : 0;
		if (r[0] != parent || r[1] || r[2] || r[3] || r[4]) {
			fprintf(stderr, "getppid %ld, uname %ld, getcwd %ld, access %ld, getuid %ld\n", r[0], r[1],
				r[2], r[3], r[4]);
			return 1;
		}
	}
	for (int i = 0; i < STORM_CALLS; i++) {
		long p = getppid(), n = uname(&u);
		if (p != parent || n) {
			fprintf(stderr, "call %d of the storm: getppid %ld (not %ld), uname %ld\n", i, p,
				(long)parent, n);
			return 1;
		}
	}
	setitimer(ITIMER_REAL, &off, NULL);
	printf("done\n");
	return 0;
}

/* Runs argv[0] as the workload, natively or under `detach run`; its output
 * in out; -1 when it did not end within RUN_LIMIT_MS (then it is killed). */
static int one_run(char *self, bool detached, const char *stats, char *out, size_t len)
{
	int fd[2], st;
	size_t got = 0;
	pid_t p;

	if (pipe(fd))
		return -2;
	p = fork();
	if (p == 0) {
		const char *bin = getenv("DETACH_BIN");
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		setenv("T_WORKLOAD", "1", 1);
		if (detached)
			execl(bin, bin, "run", "-c", "1", "--stats", stats, "--", self, (char *)NULL);
		else
			execl(self, self, (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pf = { fd[0], POLLIN, 0 };
		clock_gettime(CLOCK_MONOTONIC, &t1);
		long left = RUN_LIMIT_MS - ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&pf, 1, (int)left) <= 0) {
			fprintf(stderr, "a run did not end within %d ms:\n", RUN_LIMIT_MS);
			t_print_threads(p);
			kill(p, SIGKILL);
			waitpid(p, &st, 0);
			close(fd[0]);
			return -1;
		}
		ssize_t n = read(fd[0], out + got, len - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	out[got] = '\0';
	close(fd[0]);
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* "key": value of the first thread in a --stats file. */
static long long stat_value(const char *path, const char *key)
{
	char buf[16384], pat[64], *p;
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(buf, pat);
	return p ? atoll(p + strlen(pat)) : -1;
}

int main(int argc, char **argv)
{
	char native[256], out[256], stats[128];
	const char *mode = getenv("DETACH_MODE");
	int hung = 0, wrong = 0, rc;
	long long sites = 0, resent = 0;

	(void)argc;
	if (getenv("T_WORKLOAD"))
		return workload();
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		t_skip("needs 2 CPUs");
	if (!getenv("DETACH_BIN"))
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	rc = one_run(argv[0], false, NULL, native, sizeof(native));
	t_check(rc == 0 && !strcmp(native, "done\n"), "natively: exit %d, output '%s'", rc, native);
	snprintf(stats, sizeof(stats), "/tmp/detach-rwsig-%d.json", getpid());
	for (int i = 0; i < RUNS; i++) {
		rc = one_run(argv[0], true, stats, out, sizeof(out));
		if (rc == -1) {
			if (++hung == HUNG_ENOUGH)
				break;
			continue;
		}
		if (rc != 0 || strcmp(out, native)) {
			if (!wrong)
				fprintf(stderr, "run %d: exit %d, output '%s'\n", i, rc, out);
			wrong++;
		}
		if (mode && !strcmp(mode, "rewrite"))
			sites += stat_value(stats, "sites_rewritten");
		long long again = stat_value(stats, "interrupts_resent");
		resent += again > 0 ? again : 0;
	}
	unlink(stats);
	/* an interrupt the proxy did not acknowledge within 10 ms, sent
	 * again (proxy.c, ack_late): a loaded machine, or the lost SIGSYS
	 * that once hung a run here */
	printf("%d runs: %d hung (killed after %d ms), %d with another result than natively; "
	       "%lld interrupts sent again\n", RUNS, hung, RUN_LIMIT_MS, wrong, resent);
	t_check(hung == 0, "%d of %d runs hung", hung, RUNS);
	t_check(wrong == 0, "%d of %d runs differ from the native run", wrong, RUNS);
	if (mode && !strcmp(mode, "rewrite")) {
		printf("rewrite mode: %lld sites rewritten in all\n", sites);
		t_check(sites > 0, "no site rewritten: not in rewrite mode");
	}
	return t_done();
}
