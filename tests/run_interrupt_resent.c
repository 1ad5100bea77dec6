/* Description: an interrupt of the proxy that is lost is sent again.  A
 * detached program's SIGALRM handler (SA_RESTART) runs while its pipe read
 * waits on the proxy, so the runtime interrupts the proxy with a SIGSYS of
 * its own and waits for the proxy's acknowledgment before the read returns.
 * This test traces the proxy thread (ptrace) and discards the first SIGSYS
 * the kernel is about to deliver to it, as if it were lost: the runtime
 * must send it again (the proxy's second SIGSYS, seen by the tracer, and
 * interrupts_resent in --stats) and the read must return the byte written
 * after it, where a runtime without the re-send waits for good.  Both modes.
 * Timeout: 60 */
#include "helpers/t_detach.h"

#include <poll.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/time.h>
#include <time.h>

#define LIMIT_MS 5000

static void on_alarm(int s)
{
	(void)s;
}

/* The program: says its pid and its proxy's tid, reads "g" (the tracer is
 * in place), then reads the next byte with a SIGALRM 50 ms into the read. */
static int workload(void)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	struct itimerval it = { { 0, 0 }, { 0, 50000 } };
	char c;
	int r = t_workload_ready();

	if (r)
		return r;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	if (read(0, &c, 1) != 1 || c != 'x')
		return 43;
	printf("done\n");
	return 0;
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

int main(int argc, char **argv)
{
	char *args[64], stats[128], line[256] = "";
	int in[2], out[2], st, sigsys = 0, dropped = 0, rc = -1;
	bool written = false, ended = false;
	long dropped_at = 0;
	pid_t p, pid = 0, proxy = 0;
	struct timespec t0;
	FILE *f;

	(void)argc;
	if (getenv("T_WORKLOAD"))
		return workload();
	snprintf(stats, sizeof(stats), "/tmp/detach-resent-%d.json", getpid());
	t_detach_argv(args, stats, NULL, argv[0], NULL);
	if ((p = t_spawn_workload(args, in, out)) < 0) {
		perror("pipe or fork");
		return 1;
	}
	f = fdopen(out[0], "r");
	if (!fgets(line, sizeof(line), f) || sscanf(line, "%d %d", &pid, &proxy) != 2) {
		waitpid(p, &st, 0);
		t_check(0, "the program said '%s', exit %d", line, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		return t_done();
	}
	if (ptrace(PTRACE_SEIZE, proxy, NULL, NULL)) {
		kill(pid, SIGKILL);
		waitpid(p, &st, 0);
		if (errno == EPERM)
			t_skip("cannot trace the proxy (ptrace: EPERM; kernel.yama.ptrace_scope?)");
		t_check(0, "PTRACE_SEIZE %d: %s", (int)proxy, strerror(errno));
		return t_done();
	}
	t_check(write(in[1], "g", 1) == 1, "write: %s", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* The proxy's signal-delivery stops: the first SIGSYS is discarded,
	 * every other signal delivered.  The second byte goes 200 ms after the
	 * drop, well past the re-send's 10 ms, so the read ends only if the
	 * runtime does not wait for the lost acknowledgment. */
	while (ms_since(&t0) < LIMIT_MS) {
		int ws;
		pid_t w = waitpid(proxy, &ws, __WALL | WNOHANG);

		if (w == proxy && WIFSTOPPED(ws)) {
			int sig = WSTOPSIG(ws);
			if (sig == SIGSYS && ++sigsys == 1) {
				dropped = 1;
				dropped_at = ms_since(&t0);
				sig = 0;
			}
			ptrace(PTRACE_CONT, proxy, NULL, (void *)(long)sig);
		} else if (w == proxy || w < 0) {
			/* the proxy is gone (the program ended), reaped here:
			 * a traced thread's exit waits for its tracer */
			ended = true;
			break;
		}
		if (dropped && !written && ms_since(&t0) > dropped_at + 200)
			written = write(in[1], "x", 1) == 1;
		usleep(500);
	}
	if (!ended) {
		t_untrace(proxy);      /* before the hang report */
		fprintf(stderr, "the program did not end within %d ms:\n", LIMIT_MS);
		t_print_threads(pid);
		kill(pid, SIGKILL);
	}
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	close(in[1]);
	waitpid(p, &st, 0);
	rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	printf("the proxy's SIGSYS seen by the tracer: %d (the first discarded at %ld ms); program: exit %d, "
	       "'%.*s'; interrupts_resent %lld\n", sigsys, dropped_at, rc, (int)strcspn(line, "\n"), line,
	       t_stats_value(stats, "interrupts_resent"));
	t_check(dropped, "no interrupt of the proxy to discard: the SIGALRM handler's return did not "
		"interrupt the read");
	t_check(rc == 0 && !strcmp(line, "done\n"), "the program did not end as natively (exit %d)", rc);
	t_check(sigsys >= 2, "the discarded interrupt was not sent again (%d SIGSYS)", sigsys);
	t_check(t_stats_value(stats, "interrupts_resent") >= 1, "interrupts_resent not counted");
	unlink(stats);
	return t_done();
}
