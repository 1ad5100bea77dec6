/* Description: a detached thread that is its program's last thread and
 * ends with the exit system call (a SIGALRM handler's exit(2) on top of a
 * forwarded pipe read) gives the process its status, 7, as natively.  The
 * kernel takes the status of a process none of whose threads called
 * exit_group from its last thread to exit; the proxy, which the thread's
 * exit stops, answers its last command before glibc ends it with exit(0),
 * and a thread that exited before its proxy was gone made the process exit
 * 0 (run_call_left_behind beside a loaded machine, about one suite run in
 * two).  This test holds the proxy at its own exit every time: it traces
 * the proxy thread (ptrace, system-call stops) and keeps it stopped at the
 * entry of its exit call for HOLD_MS, then lets it go.  Both modes.
 * Timeout: 60 */
#include "helpers/t_detach.h"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/time.h>
#include <sys/user.h>
#include <time.h>

#define LIMIT_MS 5000
#define HOLD_MS 300

static void exit_now(int s)
{
	(void)s;
	syscall(SYS_exit, 7);
}

/* The program: says its pid and its proxy's tid, reads "g" (the tracer is
 * in place), then a read nobody writes to, with a SIGALRM 50 ms into it
 * whose handler ends the thread. */
static int workload(void)
{
	struct sigaction sa = { .sa_handler = exit_now };
	struct itimerval it = { { 0, 0 }, { 0, 50000 } };
	char c;

	if (!t_find_proxy())
		return 41;
	printf("%d %d\n", (int)getpid(), (int)t_find_proxy());
	fflush(stdout);
	if (read(0, &c, 1) != 1 || c != 'g')
		return 42;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	if (read(0, &c, 1) >= 0)
		return 43;
	return 44;
}

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* The state letter of thread tid of process pid ('?': not found). */
static char task_state(pid_t pid, pid_t tid)
{
	char path[64], buf[512], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	if (!(f = fopen(path, "r")))
		return '?';
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	return p && p[1] == ' ' ? p[2] : '?';
}

int main(int argc, char **argv)
{
	char *args[64], line[256] = "";
	int in[2], out[2], st, rc = -1;
	bool held = false, ended = false;
	char leader_held = '?';
	pid_t p, pid = 0, proxy = 0;
	struct timespec t0;
	FILE *f;

	(void)argc;
	if (getenv("T_WORKLOAD"))
		return workload();
	t_detach_argv(args, NULL, NULL, argv[0], NULL);
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
	if (ptrace(PTRACE_SEIZE, proxy, NULL, (void *)(long)PTRACE_O_TRACESYSGOOD)) {
		int e = errno;
		kill(pid, SIGKILL);
		waitpid(p, &st, 0);
		if (e == EPERM)
			t_skip("cannot trace the proxy (ptrace: EPERM; kernel.yama.ptrace_scope?)");
		t_check(0, "PTRACE_SEIZE %d: %s", (int)proxy, strerror(e));
		return t_done();
	}
	/* from the next stop on, every system call of the proxy stops it */
	ptrace(PTRACE_INTERRUPT, proxy, NULL, NULL);
	t_check(write(in[1], "g", 1) == 1, "write: %s", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ms_since(&t0) < LIMIT_MS) {
		int ws, sig = 0;
		pid_t w = waitpid(proxy, &ws, __WALL | WNOHANG);

		if (w == 0) {
			usleep(100);
			continue;
		}
		if (w != proxy || !WIFSTOPPED(ws)) {
			ended = true;   /* gone without its exit seen: reaped here */
			break;
		}
		if (WSTOPSIG(ws) == (SIGTRAP | 0x80)) {
			struct user_regs_struct r;
			if (!ptrace(PTRACE_GETREGS, proxy, NULL, &r) && r.orig_rax == SYS_exit) {
				/* the entry of its exit (which has no exit stop):
				 * the detached thread runs on meanwhile */
				struct timespec h = { 0, HOLD_MS * 1000000L };
				held = true;
				nanosleep(&h, NULL);
				leader_held = task_state(pid, pid);
				ptrace(PTRACE_DETACH, proxy, NULL, NULL);
				ended = true;
				break;
			}
		} else if (ws >> 16 != PTRACE_EVENT_STOP) {
			sig = WSTOPSIG(ws);     /* a signal for it: delivered */
		}
		ptrace(PTRACE_SYSCALL, proxy, NULL, (void *)(long)sig);
	}
	if (!ended) {
		ptrace(PTRACE_INTERRUPT, proxy, NULL, NULL);
		while (waitpid(proxy, &st, __WALL) == proxy && WIFSTOPPED(st) &&
		       ptrace(PTRACE_DETACH, proxy, NULL, NULL))
			ptrace(PTRACE_CONT, proxy, NULL, NULL);
		fprintf(stderr, "the proxy did not exit within %d ms:\n", LIMIT_MS);
		t_print_threads(pid);
		kill(pid, SIGKILL);
	}
	close(in[1]);
	waitpid(p, &st, 0);
	rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	printf("proxy held at its exit for %d ms: %s; the detached thread's state then: %c; program: exit %d\n",
	       HOLD_MS, held ? "yes" : "no", leader_held, rc);
	t_check(held, "the proxy's exit was not seen");
	t_check(rc == 7, "the program exited %d, natively 7 (its last thread's exit)", rc);
	return t_done();
}
