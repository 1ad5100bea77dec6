/* Description: a handler's call made between a forwarded call's store of
 * its wait frame and its depth++ leaves the caller's wait frame as it was.
 * The window is two instructions, so a tracer makes it every time: it
 * traces the detached thread of a program whose SIGUSR1 handler (SA_RESTART)
 * calls getpid, finds its struct dt_thread at proxy_forward's entry (an
 * execution breakpoint, the address from libdetach.so's symbol table) and
 * watches t->wait_frame (writes) and t->mb.intr (reads) with the debug
 * registers.  During the program's getppid it delivers a SIGUSR1 just
 * after the store of wait_frame (the handler's getpid is forwarded: depth
 * is still 0) and a second one just after the wait for the reply, before
 * depth--, at the same stack pointer.  A runtime that left the handler's
 * own wait frame in t->wait_frame took the getppid for abandoned there
 * (depth went to -1), and a third SIGUSR1 during the next forwarded call
 * (a pipe read) had its getpid share the mailbox with that read: the read
 * never returned.  Every result is checked against the kernel's (getppid,
 * the handlers' getpid, the byte read, uname), and the program must end
 * within the test's limit.  Both modes.
 * Timeout: 90 */
#include "helpers/t_win_trace.h"
#include "runtime/thread.h"

#include <poll.h>
#include <signal.h>
#include <sys/utsname.h>

#define LIMIT_MS 5000

static volatile pid_t handler_pid[8];
static volatile int handler_runs;

static void on_usr1(int s)
{
	pid_t p = getpid();

	(void)s;
	if (handler_runs < 8)
		handler_pid[handler_runs] = p;
	handler_runs++;
}

/* The program: says its pid and its proxy's tid, reads "g" (the tracer is
 * in place), makes the getppid the tracer puts the first two signals into,
 * reads "x" with the third signal during the read, then one more getppid
 * and a uname, and says what each returned. */
static int workload(void)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	struct utsname u;
	pid_t ppid1, ppid2;
	ssize_t n;
	int ur;
	char c = 0;
	int r;

	sigaction(SIGUSR1, &sa, NULL);
	if ((r = t_workload_ready()))
		return r;
	ppid1 = getppid();
	n = read(0, &c, 1);
	ppid2 = getppid();
	ur = uname(&u);
	printf("getppid %d %d read %zd '%c' uname %d handlers %d:", (int)ppid1, (int)ppid2, n,
	       n == 1 ? c : '?', ur, handler_runs);
	for (int i = 0; i < handler_runs && i < 8; i++)
		printf(" %d", (int)handler_pid[i]);
	printf("\n");
	return 0;
}

/* Debug register 7: breakpoint 0 on writes of 8 bytes (t->wait_frame),
 * 1 on reads and writes of 1 byte (t->mb.intr), 2 on execution
 * (proxy_forward's entry); each enabled or not. */
static bool set_dr7(bool watch, bool entry)
{
	return t_win_dr7_of(watch, 1, entry);
}

/* Where the tracer is: it waits for the program's getppid at
 * proxy_forward's entry, then for its store of wait_frame (signal 1), its
 * read of mb.intr after the wait (signal 2), the read's entry, its store
 * of wait_frame, sends signal 3 during the read's wait, writes the byte,
 * and lets go at the read's read of mb.intr. */
enum stage { S_AT_ENTRY, S_AT_STORE, S_IN_HANDLER1, S_AFTER_SIGNAL2, S_AT_READ_STORE, S_IN_READ, S_SIGNALLED3, S_RELEASED };
static const char *const stage_name[] = {
	"waiting for the getppid's entry", "waiting for the getppid's store of wait_frame",
	"waiting for the getppid's read of mb.intr after its wait", "waiting for the read's entry",
	"waiting for the read's store of wait_frame", "in the read's wait", "waiting for the read to return",
	"released",
};

int main(int argc, char **argv)
{
	char result[512] = "";
	struct t_win_prog pr;
	int st = 0, rc = -1;
	pid_t pid, ppid;
	uintptr_t pf, t = 0;
	size_t pf_size;
	unsigned long long outer_sp = 0, read_sp = 0;
	long depth_before_read = 0, at3 = 0;
	int nested1 = 0, nested2 = 0, nested3 = 0, hits = 0;
	enum stage stage = S_AT_ENTRY;
	bool failed = false, ended = false, written = false, delivered3 = false, armed;
	bool reaped = false;
	struct timespec t0;
	FILE *f;

	(void)argc;
	if (getenv("T_WORKLOAD"))
		return workload();
	if (!t_win_start(argv, "proxy_forward", &pr, &armed))
		return t_done();
	failed = !armed;
	pid = pr.pid;
	ppid = pr.ppid;
	pf = pr.fa;
	pf_size = pr.fsize;
	f = pr.f;
	clock_gettime(CLOCK_MONOTONIC, &t0);

	while (!failed && stage != S_RELEASED && t_win_ms_since(&t0) < LIMIT_MS) {
		struct user_regs_struct r;
		long dr6 = 0;
		int sig = 0, inject = 0;
		enum t_win_event ev = t_win_next(&pr, &st, &reaped, &sig, &dr6, &r);

		if (ev == T_WIN_NONE) {
			/* the read waits on the proxy: signal 3 50 ms into
			 * it, the byte 100 ms after the signal */
			if (stage == S_IN_READ && t_win_ms_since(&t0) > at3 + 50) {
				syscall(SYS_tgkill, pid, pid, SIGUSR1);
				stage = S_SIGNALLED3;
				at3 = t_win_ms_since(&t0);
			} else if (stage == S_SIGNALLED3 && delivered3 && !written && t_win_ms_since(&t0) > at3 + 100) {
				written = write(pr.in[1], "x", 1) == 1;
			}
			usleep(200);
			continue;
		}
		if (ev == T_WIN_AGAIN)
			continue;
		if (ev == T_WIN_ENDED) {
			/* the program ended while traced: reaped here */
			ended = true;
			break;
		}
		if (ev == T_WIN_SIGNAL) {
			/* not ours (SIGSYS in sud mode, the third SIGUSR1):
			 * delivered; the byte goes 100 ms after the third */
			if (stage == S_SIGNALLED3 && sig == SIGUSR1 && !delivered3) {
				delivered3 = true;
				at3 = t_win_ms_since(&t0);
			}
			ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
			continue;
		}
		hits++;
		bool in_pf = r.rip > pf && r.rip <= pf + pf_size;
		if (dr6 & 4) {                  /* proxy_forward's entry */
			if (stage == S_AT_ENTRY && r.rsi == SYS_getppid) {
				t = r.rdi;
				if (!t_win_layout(t, &pr)) {
					failed = true;
				} else if (!t_win_set_dr(0, t + offsetof(struct dt_thread, wait_frame)) ||
					   !t_win_set_dr(1, t + offsetof(struct dt_thread, mb.intr)) || !set_dr7(true, false)) {
					failed = true;
				}
				stage = S_AT_STORE;
			} else if (stage == S_AFTER_SIGNAL2 && r.rsi == SYS_read &&
				   t_win_peek(r.rdx) == 0 && t_win_peek(r.rdx + 16) == 1) {
				set_dr7(true, false);
				stage = S_AT_READ_STORE;
			}
		} else if (dr6 & 1) {           /* a store of t->wait_frame */
			long v = t_win_peek(t + offsetof(struct dt_thread, wait_frame));
			long depth = (int)t_win_peek(t + offsetof(struct dt_thread, depth));
			/* a wait's own frame (not the store that puts the
			 * caller's back, after it) */
			bool own = in_pf && (unsigned long)v == r.rbp;
			if (stage == S_AT_STORE) {
				if (!own || depth != 0) {
					t_check(0, "the first store of wait_frame after the getppid's entry is not "
						"its own (rip %#llx in proxy_forward %d, value %#lx, rbp %#llx, depth %ld)",
						r.rip, in_pf, v, r.rbp, depth);
					failed = true;
				}
				/* in the window: wait_frame stored, depth 0 */
				outer_sp = r.rsp;
				inject = SIGUSR1;
				stage = S_IN_HANDLER1;
			} else if (own && r.rsp < outer_sp && stage == S_IN_HANDLER1) {
				nested1++;
			} else if (own && r.rsp < outer_sp && stage == S_AFTER_SIGNAL2) {
				nested2++;
			} else if (stage == S_AT_READ_STORE) {
				if (!own) {
					t_check(0, "the first store of wait_frame after the read's entry is not its own");
					failed = true;
				}
				depth_before_read = depth;
				read_sp = r.rsp;
				at3 = t_win_ms_since(&t0);
				stage = S_IN_READ;
			} else if (own && r.rsp < read_sp && (stage == S_IN_READ || stage == S_SIGNALLED3)) {
				/* a handler's (below the read's frame): the
				 * read's own second store, after its depth++,
				 * is at its own stack pointer */
				nested3++;
			}
		} else if (dr6 & 2) {           /* an access to t->mb.intr */
			if (stage == S_IN_HANDLER1 && in_pf && r.rsp == outer_sp) {
				/* the getppid's wait is over, depth still 1:
				 * signal 2 at the stack pointer of signal 1 */
				if (!nested1) {
					t_check(0, "signal 1's handler made no forwarded call: it did not run "
						"between the store of wait_frame and depth++");
					failed = true;
				}
				inject = SIGUSR1;
				set_dr7(true, true);
				stage = S_AFTER_SIGNAL2;
			} else if (stage == S_SIGNALLED3 && in_pf && r.rsp == read_sp) {
				/* the read's wait is over: let go */
				set_dr7(false, false);
				if (ptrace(PTRACE_DETACH, pid, NULL, NULL) == 0)
					stage = S_RELEASED;
				else
					failed = true;
				continue;
			}
		}
		ptrace(PTRACE_CONT, pid, NULL, (void *)(long)inject);
	}
	if (stage != S_RELEASED && !ended) {
		/* let the program go before it is killed (gdb, in the hang
		 * report, traces every thread) */
		t_win_let_go(pid);
		fprintf(stderr, "the tracer was still %s after %d ms\n", stage_name[stage], LIMIT_MS);
		if (!written && write(pr.in[1], "x", 1) == 1)
			written = true;
	}
	/* the rest of the program, untraced, in what remains of the limit */
	struct pollfd pfd = { .fd = pr.out[0], .events = POLLIN };
	long left = LIMIT_MS - t_win_ms_since(&t0);
	if (poll(&pfd, 1, left > 0 ? left : 0) == 1 && fgets(result, sizeof(result), f))
		result[strcspn(result, "\n")] = '\0';
	if (!result[0]) {
		fprintf(stderr, "the program said nothing within %d ms:\n", LIMIT_MS);
		t_print_threads(pid);
		kill(pid, SIGKILL);
	}
	close(pr.in[1]);
	if (!reaped)
		waitpid(pr.p, &st, 0);
	rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	printf("tracer: %s, %d debug traps; forwarded calls made by signal 1's handler %d, signal 2's %d, "
	       "signal 3's %d; depth before the read %ld\n", stage_name[stage], hits, nested1, nested2, nested3,
	       depth_before_read);
	printf("program (pid %d, parent %d): exit %d, '%s'\n", (int)pid, (int)ppid, rc, result);

	int ppid1 = 0, ppid2 = 0, ur = -1, runs = 0, off = 0;
	long n = -1;
	char c = 0;
	t_check(!failed, "the tracer could not make the window (above)");
	t_check(stage == S_RELEASED, "the read during which signal 3 came did not return");
	t_check(rc == 0, "the program did not end as natively (exit %d)", rc);
	t_check(depth_before_read == 0, "depth %ld after the getppid: taken for abandoned", depth_before_read);
	/* a handler's call during a forwarded call runs on the thread, the
	 * proxy being busy: one forwarded took the call for abandoned (2) or
	 * shared the mailbox with it (3) */
	t_check(nested2 == 0, "signal 2's handler forwarded %d call(s): the getppid was taken for abandoned "
		"after its wait", nested2);
	t_check(nested3 == 0, "signal 3's handler forwarded %d call(s) while the read was in flight", nested3);
	if (sscanf(result, "getppid %d %d read %ld '%c' uname %d handlers %d:%n", &ppid1, &ppid2, &n, &c, &ur,
		   &runs, &off) == 6) {
		t_check(ppid1 == ppid && ppid2 == ppid, "getppid returned %d and %d, the parent is %d", ppid1, ppid2,
			(int)ppid);
		t_check(n == 1 && c == 'x', "the read returned %ld", n);
		t_check(ur == 0, "uname returned %d", ur);
		t_check(runs == 3, "the handler ran %d times, 3 signals were delivered", runs);
		for (int i = 0; i < runs && i < 8; i++) {
			int hp = 0, k = 0;
			if (sscanf(result + off, " %d%n", &hp, &k) != 1)
				break;
			off += k;
			t_check(hp == pid, "the handler's getpid %d returned %d, the pid is %d", i + 1, hp, (int)pid);
		}
	} else {
		t_check(0, "no result line from the program");
	}
	return t_done();
}
