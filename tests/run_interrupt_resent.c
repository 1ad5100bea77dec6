/* Description: an interrupt of the proxy that is lost is sent again.  A
 * detached program's SIGALRM handler (SA_RESTART) runs while its pipe read
 * waits on the proxy, so the runtime interrupts the proxy with a SIGSYS of
 * its own and waits for the proxy's acknowledgment before the read returns.
 * This test traces the proxy thread (ptrace) and discards the first SIGSYS
 * the kernel is about to deliver to it, as if it were lost: the runtime
 * must send it again (the proxy's second SIGSYS, seen by the tracer, and
 * interrupts_resent in --stats) and the read must return the byte written
 * after it, where a runtime without the re-send waits for good.  And
 * interrupts do not pile up on the proxy: with a 100 us SIGALRM whose
 * handler makes a call, each handler's return during the read asks for
 * one, and the tracer holds every SIGSYS stop of the proxy some 500 us (as
 * strace -f --seccomp-bpf does with its signal-delivery stops); the read
 * returns the byte written after 300 of them and the proxy's rsp at those
 * stops never lies more than 64 KiB below the first's.  Our SIGSYS is
 * SA_NODEFER: a runtime that sent an interrupt for every handler, whether
 * the one before had been taken or not, had the proxy's kernel deliver
 * each on top of the last before its handler ran one instruction, until
 * the proxy's stack ran out (SIGSEGV, exit 139, after some 80 frames).
 * Both modes.
 * Timeout: 60 */
#include "helpers/t_detach.h"

#include <poll.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/time.h>
#include <time.h>

#define LIMIT_MS 5000

static void on_alarm(int s)
{
	(void)s;
}

/* the nested run's handler: a call of its own, as a program's may */
static void on_tick(int s)
{
	(void)s;
	(void)getppid();
}

/* The program: says its pid and its proxy's tid, reads "g" (the tracer is
 * in place), then reads the next byte with a SIGALRM 50 ms into the read. */
static int workload(void)
{
	bool nested = getenv("T_NESTED") != NULL;
	struct sigaction sa = { .sa_handler = nested ? on_tick : on_alarm, .sa_flags = SA_RESTART };
	/* nested: a tick every 100 us all through the read */
	struct itimerval it = nested ? (struct itimerval){ { 0, 100 }, { 0, 100 } } :
				       (struct itimerval){ { 0, 0 }, { 0, 50000 } };
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

/* One program under `detach run`, its proxy traced: the lost interrupt
 * (nested false) or the pile of them (nested true).  false: could not
 * start (a failed check or a skip is recorded). */
static bool one_run(char *self, bool nested)
{
	char *args[64], stats[128], line[256] = "";
	int in[2], out[2], st, sigsys = 0, dropped = 0, rc = -1;
	bool written = false, ended = false;
	long dropped_at = 0;
	pid_t p, pid = 0, proxy = 0;
	unsigned long long first_rsp = 0, low_rsp = 0;
	struct timespec t0;
	FILE *f;

	snprintf(stats, sizeof(stats), "/tmp/detach-resent-%d.json", getpid());
	t_detach_argv(args, stats, NULL, self, NULL);
	if (nested)
		setenv("T_NESTED", "1", 1);
	p = t_spawn_workload(args, in, out);
	unsetenv("T_NESTED");
	if (p < 0) {
		t_check(0, "pipe or fork: %s", strerror(errno));
		return false;
	}
	f = fdopen(out[0], "r");
	if (!fgets(line, sizeof(line), f) || sscanf(line, "%d %d", &pid, &proxy) != 2) {
		waitpid(p, &st, 0);
		t_check(0, "the program said '%s', exit %d", line, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		return false;
	}
	if (ptrace(PTRACE_SEIZE, proxy, NULL, NULL)) {
		kill(pid, SIGKILL);
		waitpid(p, &st, 0);
		if (errno == EPERM)
			t_skip("cannot trace the proxy (ptrace: EPERM; kernel.yama.ptrace_scope?)");
		t_check(0, "PTRACE_SEIZE %d: %s", (int)proxy, strerror(errno));
		return false;
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
			struct user_regs_struct regs;
			if (nested && sig == SIGSYS && !ptrace(PTRACE_GETREGS, proxy, NULL, &regs)) {
				/* delivered, each after this stop's 500 us */
				if (!sigsys++)
					first_rsp = low_rsp = regs.rsp;
				else if (regs.rsp < low_rsp)
					low_rsp = regs.rsp;
				if (sigsys == 300 && !written)
					written = write(in[1], "x", 1) == 1;
			} else if (!nested && sig == SIGSYS && ++sigsys == 1) {
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
	if (nested) {
		printf("a 100 us SIGALRM over the read, each SIGSYS stop of the proxy held: %d SIGSYS, the proxy's "
		       "rsp at most %llu bytes below the first stop's; program: exit %d, '%.*s'\n", sigsys,
		       first_rsp - low_rsp, rc, (int)strcspn(line, "\n"), line);
		t_check(sigsys >= 300, "only %d SIGSYS of the proxy under the 100 us SIGALRM", sigsys);
		t_check(first_rsp - low_rsp < 65536, "interrupts piled up on the proxy: its rsp went %llu bytes down",
			first_rsp - low_rsp);
		t_check(rc == 0 && !strcmp(line, "done\n"), "the program did not end as natively (exit %d)", rc);
		unlink(stats);
		return true;
	}
	printf("the proxy's SIGSYS seen by the tracer: %d (the first discarded at %ld ms); program: exit %d, "
	       "'%.*s'; interrupts_resent %lld\n", sigsys, dropped_at, rc, (int)strcspn(line, "\n"), line,
	       t_stats_value(stats, "interrupts_resent"));
	t_check(dropped, "no interrupt of the proxy to discard: the SIGALRM handler's return did not "
		"interrupt the read");
	t_check(rc == 0 && !strcmp(line, "done\n"), "the program did not end as natively (exit %d)", rc);
	t_check(sigsys >= 2, "the discarded interrupt was not sent again (%d SIGSYS)", sigsys);
	t_check(t_stats_value(stats, "interrupts_resent") >= 1, "interrupts_resent not counted");
	unlink(stats);
	return true;
}

int main(int argc, char **argv)
{
	(void)argc;
	if (getenv("T_WORKLOAD"))
		return workload();
	if (one_run(argv[0], false))
		one_run(argv[0], true);
	return t_done();
}
