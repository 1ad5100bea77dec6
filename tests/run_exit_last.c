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
 * entry of its exit call for HOLD_MS, then lets it go, in two programs:
 *  - handler: a SIGALRM handler calls exit(2) on top of a pipe read;
 *  - storm: the program calls exit(2) while a 1 ms SIGALRM handler calls
 *    getppid: the thread, waiting for its proxy to be gone, must not run a
 *    handler whose call is forwarded to no proxy (it waited for good).
 * Both must exit 7 within LIMIT_MS.  Both modes.
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

static void ask_ppid(int s)
{
	(void)s;
	syscall(SYS_getppid);
}

/* The program (role r): says its pid and its proxy's tid, reads "g" (the
 * tracer is in place), then ends its thread with status 7. */
static int workload(const char *r)
{
	bool storm = !strcmp(r, "storm");
	struct sigaction sa = { .sa_handler = storm ? ask_ppid : exit_now, .sa_flags = SA_RESTART };
	struct itimerval it = { { 0, storm ? 1000 : 0 }, { 0, storm ? 1000 : 50000 } };
	char c;
	int ready = t_workload_ready();

	if (ready)
		return ready;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	if (storm) {
		/* a while of handlers on top of forwarded calls first */
		for (int i = 0; i < 500; i++)
			syscall(SYS_getppid);
		syscall(SYS_exit, 7);
	}
	/* a read nobody writes to, with a SIGALRM 50 ms into it whose
	 * handler ends the thread */
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

/* Runs role r under detach run, its proxy held at its exit: the
 * program's status (128 + a signal; 137 when killed after LIMIT_MS). */
static void run_case(char *self, char *r)
{
	char *args[64], line[256] = "";
	int in[2], out[2], st, rc = -1;
	bool held = false, ended = false;
	char thread_held = '?';
	pid_t p, pid = 0, proxy = 0;
	struct timespec t0;
	FILE *f;

	t_detach_argv(args, NULL, NULL, self, r);
	if ((p = t_spawn_workload(args, in, out)) < 0) {
		t_check(0, "pipe or fork: %s", strerror(errno));
		return;
	}
	f = fdopen(out[0], "r");
	if (!fgets(line, sizeof(line), f) || sscanf(line, "%d %d", &pid, &proxy) != 2) {
		waitpid(p, &st, 0);
		t_check(0, "%s: the program said '%s', exit %d", r, line,
			WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		fclose(f);
		close(in[1]);
		return;
	}
	if (ptrace(PTRACE_SEIZE, proxy, NULL, (void *)(long)PTRACE_O_TRACESYSGOOD)) {
		int e = errno;
		kill(pid, SIGKILL);
		waitpid(p, &st, 0);
		if (e == EPERM)
			t_skip("cannot trace the proxy (ptrace: EPERM; kernel.yama.ptrace_scope?)");
		t_check(0, "PTRACE_SEIZE %d: %s", (int)proxy, strerror(e));
		fclose(f);
		close(in[1]);
		return;
	}
	/* from the next stop on, every system call of the proxy stops it */
	ptrace(PTRACE_INTERRUPT, proxy, NULL, NULL);
	t_check(write(in[1], "g", 1) == 1, "write: %s", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ms_since(&t0) < LIMIT_MS) {
		int ws, sig = 0;
		/* at once: a slow tracer lets interrupts of the proxy pile
		 * up, each SIGSYS frame on top of the last at its handler's
		 * first instruction, until its stack overflows */
		pid_t w = waitpid(proxy, &ws, __WALL);

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
				thread_held = task_state(pid, pid);
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
		t_untrace(proxy);
		fprintf(stderr, "the proxy did not exit within %d ms:\n", LIMIT_MS);
		t_print_threads(pid);
		kill(pid, SIGKILL);
	}
	close(in[1]);
	/* its end, within the limit: a thread that waits for no proxy never
	 * ends */
	for (int i = 0; i < LIMIT_MS / 10 && waitpid(p, &st, WNOHANG) == 0; i++)
		usleep(10000);
	if (waitpid(p, &st, WNOHANG) == 0) {
		fprintf(stderr, "%s: the program did not end within %d ms of its proxy's exit:\n", r, LIMIT_MS);
		t_print_threads(pid);
		kill(pid, SIGKILL);
		waitpid(p, &st, 0);
		t_reap_registry();
	}
	fclose(f);
	rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	printf("%-8s proxy held at its exit for %d ms: %s; the detached thread's state then: %c; program: %s %d\n",
	       r, HOLD_MS, held ? "yes" : "no", thread_held, WIFEXITED(st) ? "exit" : "signal",
	       WIFEXITED(st) ? rc : rc - 128);
	t_check(held, "%s: the proxy's exit was not seen", r);
	t_check(rc == 7, "%s: the program exited %d, natively 7 (its last thread's exit)", r, rc);
}

int main(int argc, char **argv)
{
	if (getenv("T_WORKLOAD"))
		return workload(argc > 1 ? argv[1] : "");
	run_case(argv[0], "handler");
	run_case(argv[0], "storm");
	return t_done();
}
