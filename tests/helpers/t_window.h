/* The nested-handler window, made every time by a tracer (after
 * tests/run_wait_frame_window.c): a handler H1 of the program (SIGUSR1)
 * that makes a forwarded call B (a read of stdin, which nobody writes yet)
 * is started by the tracer at one exact instruction of the runtime's
 * bookkeeping of the program's call A; while B waits on the proxy, a
 * second handler H2 (SIGUSR2) siglongjmps out of B back into H1, which
 * returns into A's bookkeeping.  The tracer traces the detached thread,
 * finds the runtime's function FN in libdetach.so's symbol table (an
 * execution breakpoint at its entry, for the call whose number is in rsi),
 * and lands H1 where the test says (enum t_win_point), with the debug
 * registers: t->wait_frame (writes, 8 bytes) and t->depth (reads and
 * writes, 4 bytes) of the struct dt_thread in rdi, or the return address of
 * FN.  Then it lets the program go and writes one byte to its stdin:
 * main's read after the rounds must get it (a B left on the proxy eats it),
 * and every result is the kernel's.
 *
 * The workload: t_win_workload(a_call, rounds), which prints one line:
 * "rounds N a A_RESULT ms MS poll P byte B 'C' ppid P1 P2 h1 R1 jumped J h2 R2"
 * (a_call's own check, e.g. sigaltstack's oss, in A_RESULT: 0 when it is
 * right). */
#ifndef DETACH_TESTS_T_WINDOW_H
#define DETACH_TESTS_T_WINDOW_H

#include "t_detach.h"
#include "t_win_trace.h"
#include "runtime/thread.h"

#include <poll.h>
#include <setjmp.h>
#include <signal.h>

/* ---- the program ---------------------------------------------------- */

static sigjmp_buf t_win_h1_env;
static volatile sig_atomic_t t_win_h1_armed;
static volatile int t_win_h1_runs, t_win_h1_jumped, t_win_h2_runs;

/* H1: a forwarded read of stdin that blocks (the tracer writes nothing
 * until it has let go), left by H2's siglongjmp.  No system call after the
 * jump (sigsetjmp without the mask: siglongjmp would restore it with
 * rt_sigprocmask, whose dispatch cancels the read left behind, and the
 * window's bookkeeping is then never tested); H1's return restores the
 * mask from its frame. */
static void t_win_on_usr1(int s)
{
	char c;

	(void)s;
	t_win_h1_runs++;
	if (!sigsetjmp(t_win_h1_env, 0)) {
		t_win_h1_armed = 1;
		if (read(0, &c, 1) >= 0)
			t_win_h1_armed = 0;     /* not left: the byte went here */
		t_win_h1_armed = 0;
	} else {
		t_win_h1_jumped++;
	}
}

/* H2: back into H1, out of its read's wait */
static void t_win_on_usr2(int s)
{
	(void)s;
	t_win_h2_runs++;
	if (t_win_h1_armed) {
		t_win_h1_armed = 0;
		siglongjmp(t_win_h1_env, 1);
	}
}

/* The program's parent as the warm-up's getppid saw it (before the tracer
 * came), and a call A that checks a round's getppid against it (0: the
 * same) */
static pid_t t_win_parent_seen;

static inline void t_win_warm_getppid(void)
{
	t_win_parent_seen = getppid();
}

static inline long t_win_a_getppid(void)
{
	return getppid() != t_win_parent_seen;
}

/* warm: called once before the tracer is there (rewrite mode: the site is
 * rewritten at its first trap, so the rounds' calls go through the
 * trampoline); a_call: the call A of each round, 0 when its result is
 * right.  Returns the exit status. */
static int t_win_workload(void (*warm)(void), long (*a_call)(void), int rounds)
{
	struct sigaction s1 = { .sa_handler = t_win_on_usr1, .sa_flags = SA_RESTART };
	struct sigaction s2 = { .sa_handler = t_win_on_usr2, .sa_flags = SA_RESTART };
	struct pollfd pfd = { .fd = 0, .events = POLLIN };
	struct timespec t0;
	long a_bad = 0, ms;
	pid_t ppid1, ppid2;
	ssize_t n = -1;
	char c = '?';
	int r, p;

	sigaction(SIGUSR1, &s1, NULL);
	sigaction(SIGUSR2, &s2, NULL);
	if (warm)
		warm();
	ppid1 = getppid();      /* its site rewritten before the rounds too */
	if ((r = t_workload_ready()))
		return r;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < rounds; i++)
		if (a_call())
			a_bad++;
	ms = t_win_ms_since(&t0);
	/* the tracer's byte, 100 ms after it let go: a read left on the
	 * proxy takes it first */
	p = poll(&pfd, 1, 3000);
	if (p == 1)
		n = read(0, &c, 1);
	ppid2 = getppid();
	printf("rounds %d a %ld ms %ld poll %d byte %zd '%c' ppid %d %d h1 %d jumped %d h2 %d\n", rounds, a_bad, ms,
	       p, n, n == 1 ? c : '?', (int)ppid1, (int)ppid2, t_win_h1_runs, t_win_h1_jumped, t_win_h2_runs);
	fflush(stdout);
	return 0;
}

/* ---- the tracer ----------------------------------------------------- */

/* Where H1 lands in the round's call A (the instruction after the one
 * that trapped: data breakpoints trap after the access) */
enum t_win_point {
	T_WIN_AFTER_STORE,      /* proxy_forward's first store of its own wait_frame (depth 0) */
	T_WIN_AFTER_TEST,       /* the first access of depth after that store: the old
				 * runtime's test of depth, the new one's xadd */
	T_WIN_AFTER_LOWER,      /* depth's store of 0 after the wait (depth--) */
	T_WIN_AT_RETURN,        /* FN's return address (entered with rcx == 0: uc NULL) */
	T_WIN_STEPS,            /* the instruction boundary ROUND single steps after
				 * proxy_forward's store of its wait frame, while depth
				 * is still 0 (before the raise): once a step is seen
				 * to raise it (the window is then known: its last
				 * boundary is the one before that step), that step's
				 * round lands just after the raise, and each later
				 * round at the window's last boundary (the instruction
				 * that raises depth, or the store of a compiled
				 * depth++ whose load came before) */
};
static const char *const t_win_point_name[] = {
	"after proxy_forward's store of its wait frame", "after proxy_forward's first access of depth after it",
	"after proxy_forward's depth-- (the store of 0)", "at the function's return address",
	"single steps after proxy_forward's store of its wait frame",
};

/* DR7: 0 writes of 8 bytes (wait_frame), 1 reads and writes of 4 bytes
 * (depth), 2 execution (an entry or a return address) */
static bool t_win_dr7(bool watch, bool exec)
{
	return t_win_dr7_of(watch, 4, exec);
}

/* What the tracer saw and the program said (t_win_run). */
struct t_win_result {
	pid_t pid, ppid;
	int rc;                 /* the program's exit status */
	int rounds_done;        /* rounds whose H1 was landed and H2 sent */
	int injected_at[8];     /* H1's rip - FN, per round */
	bool failed;            /* the tracer could not make the window */
	bool no_window;         /* AT_RETURN: FN was entered with a frame (rcx != 0)
				 * before any entry without one: the site traps */
	bool released;
	/* AFTER_LOWER rounds: what call A left when it returned (its
	 * proxy_forward's return address, rsp at it), after H1 had returned
	 * into its way out: depth, wait_frame, and A's own frame and the
	 * wait_frame it found at its entry (its outer) */
	bool back_seen[8];
	/* STEPS rounds: the boundary landed on (steps after the store; -1:
	 * just after the raise), and the window's boundaries before the raise
	 * (0: no step was seen to raise depth) */
	int step_at[8], window_len;
	int back_depth[8];
	uintptr_t back_frame[8], a_frame[8], a_outer[8];
	/* the program's line */
	bool said;
	int rounds, poll, h1, jumped, h2, ppid1, ppid2;
	long a_bad, ms, n;
	char c;
};

#define T_WIN_LIMIT_MS 8000

/* Runs argv[0] under detach as the workload and makes its rounds: round i
 * lands H1 at points[i] in the i-th call of the round's function fn whose
 * number (rsi) is nr.  Fills res; the checks are the caller's. */
/* A round ended (its H2 ran, or call A's return was read): true with the
 * next round's call armed (the breakpoint at fn's entry), or, after the
 * last round, false with the program let go (sig delivered, 0: none). */
static bool t_win_next_round(pid_t pid, uintptr_t fa, int sig, int round, int rounds, struct t_win_result *res)
{
	res->rounds_done = round;
	if (round < rounds) {
		t_win_set_dr(2, fa);
		t_win_dr7(false, true);
		return true;
	}
	t_win_dr7(false, false);
	if (ptrace(PTRACE_DETACH, pid, NULL, (void *)(long)sig) == 0)
		res->released = true;
	else
		res->failed = true;
	return false;
}

static void t_win_run(char **argv, const char *fn, long nr, const enum t_win_point *points, int rounds,
		      struct t_win_result *res)
{
	char result[512] = "";
	struct t_win_prog pr;
	int st = 0;
	pid_t pid;
	uintptr_t fa, t = 0, frame = 0, ret = 0, a_ret = 0, a_rsp = 0;
	size_t fsize;
	long at_h1 = 0;
	bool raised_seen = false, after_store = false, reaped = false, ended = false, written = false, armed;
	enum { W_ENTRY, W_WINDOW, W_STEP, W_RETURN, W_H1, W_H2, W_BACK, W_DONE } stage = W_ENTRY;
	int want = 0, stepped = 0;
	int round = 0;
	struct timespec t0;
	FILE *f;

	memset(res, 0, sizeof(*res));
	res->rc = -1;
	if (!t_win_start(argv, fn, &pr, &armed)) {
		res->failed = true;
		return;
	}
	res->failed = !armed;
	res->pid = pid = pr.pid;
	res->ppid = pr.ppid;
	fa = pr.fa;
	fsize = pr.fsize;
	f = pr.f;
	clock_gettime(CLOCK_MONOTONIC, &t0);

	while (!res->failed && stage != W_DONE && t_win_ms_since(&t0) < T_WIN_LIMIT_MS) {
		struct user_regs_struct r;
		long dr6 = 0;
		int sig = 0, inject = 0;
		enum t_win_event ev = t_win_next(&pr, &st, &reaped, &sig, &dr6, &r);

		if (ev == T_WIN_NONE) {
			/* H1's read waits on the proxy: H2 50 ms into it */
			if (stage == W_H1 && t_win_ms_since(&t0) > at_h1 + 50) {
				syscall(SYS_tgkill, pid, pid, SIGUSR2);
				stage = W_H2;
			}
			usleep(200);
			continue;
		}
		if (ev == T_WIN_AGAIN)
			continue;
		if (ev == T_WIN_ENDED) {
			ended = true;
			break;
		}
		if (ev == T_WIN_SIGNAL && stage == W_STEP && sig == SIGTRAP) {
			/* a single step in the window (STEPS) */
			int depth = (int)t_win_peek(t + offsetof(struct dt_thread, depth));
			int inj = 0;

			ptrace(PTRACE_GETREGS, pid, NULL, &r);
			if (depth != 0) {
				/* this step raised it: the window had `stepped`
				 * boundaries; land just after the raise */
				res->window_len = stepped + 1;
				if (round < 8)
					res->step_at[round] = -1;
				inj = SIGUSR1;
			} else if (++stepped == want) {
				if (round < 8)
					res->step_at[round] = stepped;
				inj = SIGUSR1;
			}
			if (!inj) {
				ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL);
				continue;
			}
			char where[512];
			t_win_where(pid, r.rip, where, sizeof(where));
			if (round < 8)
				res->injected_at[round] = (int)(r.rip - fa);
			fprintf(stderr, "round %d: signal 1 %s, %d single step(s) after the store of the wait frame%s, at %s\n",
				round, fn, stepped + (depth != 0), depth != 0 ? " (the last one raised depth)" : "", where);
			at_h1 = t_win_ms_since(&t0);
			stage = W_H1;
			ptrace(PTRACE_CONT, pid, NULL, (void *)(long)inj);
			continue;
		}
		if (ev == T_WIN_SIGNAL) {
			/* not ours (SIGSYS in sud mode, H2's SIGUSR2) */
			if (stage == W_H2 && sig == SIGUSR2 && points[round] == T_WIN_AFTER_LOWER) {
				/* H2 goes to H1, which returns into A's way
				 * out: what A leaves is read at its return */
				if (!t_win_set_dr(2, a_ret) || !t_win_dr7(false, true))
					res->failed = true;
				stage = W_BACK;
			} else if (stage == W_H2 && sig == SIGUSR2) {
				if (!t_win_next_round(pid, fa, sig, ++round, rounds, res)) {
					stage = W_DONE;
					continue;
				}
				after_store = raised_seen = false;
				stage = W_ENTRY;
			}
			ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
			continue;
		}
		if ((dr6 & 4) && stage == W_BACK && r.rip == a_ret && r.rsp == a_rsp + 8) {
			/* A's proxy_forward returned: what it left */
			if (round < 8) {
				res->back_seen[round] = true;
				res->back_depth[round] = (int)t_win_peek(t + offsetof(struct dt_thread, depth));
				res->back_frame[round] = (uintptr_t)t_win_peek(t + offsetof(struct dt_thread, wait_frame));
			}
			if (!t_win_next_round(pid, fa, 0, ++round, rounds, res)) {
				stage = W_DONE;
				continue;
			}
			after_store = raised_seen = false;
			stage = W_ENTRY;
			ptrace(PTRACE_CONT, pid, NULL, NULL);
			continue;
		}
		bool in_fn = r.rip > fa && r.rip < fa + fsize;
		enum t_win_point point = points[round];
		if ((dr6 & 4) && stage == W_ENTRY && r.rip == fa && r.rsi == (unsigned long long)nr &&
		    point == T_WIN_AT_RETURN && r.rcx != 0) {
			/* the call came with a frame: its site was not
			 * rewritten, no request is made; let it go */
			res->no_window = true;
			t_win_dr7(false, false);
			res->released = ptrace(PTRACE_DETACH, pid, NULL, NULL) == 0;
			stage = W_DONE;
			continue;
		}
		if ((dr6 & 4) && stage == W_ENTRY && r.rip == fa && r.rsi == (unsigned long long)nr &&
		    (point != T_WIN_AT_RETURN || r.rcx == 0)) {
			if (!t) {
				t = r.rdi;
				if (!t_win_layout(t, &pr)) {
					res->failed = true;
					break;
				}
			}
			if (point == T_WIN_AT_RETURN) {
				ret = (uintptr_t)t_win_peek(r.rsp);
				frame = r.rsp + 8;      /* rsp at the return */
				if (!t_win_set_dr(2, ret) || !t_win_dr7(false, true))
					res->failed = true;
				stage = W_RETURN;
			} else {
				/* proxy_forward's frame address (its rbp) once
				 * its prologue has run; its return address and
				 * the wait frame it found (its outer) */
				frame = r.rsp - 8;
				a_ret = (uintptr_t)t_win_peek(r.rsp);
				a_rsp = r.rsp;
				if (round < 8) {
					res->a_frame[round] = frame;
					res->a_outer[round] = (uintptr_t)t_win_peek(t + offsetof(struct dt_thread, wait_frame));
				}
				if (!t_win_set_dr(0, t + offsetof(struct dt_thread, wait_frame)) ||
				    !t_win_set_dr(1, t + offsetof(struct dt_thread, depth)) || !t_win_dr7(true, false))
					res->failed = true;
				stage = W_WINDOW;
			}
		} else if ((dr6 & 4) && stage == W_RETURN && r.rip == ret && r.rsp == frame) {
			inject = SIGUSR1;
		} else if ((dr6 & 3) && stage == W_WINDOW && in_fn && r.rbp == frame) {
			long wf = t_win_peek(t + offsetof(struct dt_thread, wait_frame));
			int depth = (int)t_win_peek(t + offsetof(struct dt_thread, depth));
			if ((dr6 & 1) && !after_store && (uintptr_t)wf == frame && depth == 0) {
				after_store = true;
				if (point == T_WIN_AFTER_STORE)
					inject = SIGUSR1;
				want = round;
				if (res->window_len && want > res->window_len - 1)
					want = res->window_len - 1;
				if (point == T_WIN_STEPS && want == 0) {
					if (round < 8)
						res->step_at[round] = 0;
					inject = SIGUSR1;
				} else if (point == T_WIN_STEPS) {
					/* step from here, the data breakpoints off */
					t_win_dr7(false, false);
					stepped = 0;
					stage = W_STEP;
					ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL);
					continue;
				}
			} else if ((dr6 & 2) && after_store && point == T_WIN_AFTER_TEST) {
				inject = SIGUSR1;
			} else if ((dr6 & 2) && after_store && depth == 1) {
				raised_seen = true;
			} else if ((dr6 & 2) && raised_seen && depth == 0 && point == T_WIN_AFTER_LOWER) {
				inject = SIGUSR1;
			}
		}
		if (inject) {
			if (round < 8)
				res->injected_at[round] = (int)(r.rip - fa);
			char where[512];
			t_win_where(pid, r.rip, where, sizeof(where));
			fprintf(stderr, "round %d: signal 1 %s (%s), at %s\n", round, t_win_point_name[point], fn, where);
			t_win_dr7(false, false);
			at_h1 = t_win_ms_since(&t0);
			stage = W_H1;
		}
		ptrace(PTRACE_CONT, pid, NULL, (void *)(long)inject);
	}
	if (stage != W_DONE && !ended) {
		/* let the program go before it is killed (gdb, in the hang
		 * report, traces every thread) */
		t_win_let_go(pid);
		fprintf(stderr, "the tracer was still at round %d stage %d after %d ms\n", round, (int)stage,
			T_WIN_LIMIT_MS);
	}
	/* the byte main's read must get, 100 ms after the rounds */
	usleep(100000);
	written = write(pr.in[1], "x", 1) == 1;
	t_check(written, "write of the byte: %s", strerror(errno));
	struct pollfd pfd = { .fd = pr.out[0], .events = POLLIN };
	if (poll(&pfd, 1, 6000) == 1 && fgets(result, sizeof(result), f))
		result[strcspn(result, "\n")] = '\0';
	if (!result[0]) {
		fprintf(stderr, "the program said nothing within 6 s of the byte:\n");
		t_print_threads(pid);
		kill(pid, SIGKILL);
	}
	close(pr.in[1]);
	/* its end, within 5 s of its line (killed after: exit 137) */
	for (int i = 0; !reaped && i < 5000; i++) {
		if (waitpid(pr.p, &st, WNOHANG) == pr.p)
			reaped = true;
		else
			usleep(1000);
	}
	if (!reaped) {
		fprintf(stderr, "the program did not end within 5 s of its line:\n");
		t_print_threads(pid);
		kill(pid, SIGKILL);
		waitpid(pr.p, &st, 0);
	}
	res->rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	printf("program (pid %d, parent %d): exit %d, '%s'; the tracer made %d of %d rounds\n", (int)pid,
	       (int)res->ppid, res->rc, result, res->rounds_done, rounds);
	res->said = sscanf(result, "rounds %d a %ld ms %ld poll %d byte %ld '%c' ppid %d %d h1 %d jumped %d h2 %d",
			   &res->rounds, &res->a_bad, &res->ms, &res->poll, &res->n, &res->c, &res->ppid1, &res->ppid2,
			   &res->h1, &res->jumped, &res->h2) == 11;
}

/* The checks every round's test makes: the window was made, the program
 * ended as natively, H1 ran and was left by H2's jump each round, the byte
 * reached main (no read left on the proxy took it), getppid is the
 * kernel's. */
static void t_win_check_common(const struct t_win_result *res, int rounds)
{
	t_check(!res->failed, "the tracer could not make the window (above)");
	t_check(res->rounds_done == rounds && res->released, "the tracer made %d of %d rounds", res->rounds_done,
		rounds);
	t_check(res->said, "no result line from the program (it hung: above)");
	t_check(res->rc == 0, "the program did not end as natively (exit %d)", res->rc);
	if (!res->said)
		return;
	t_check(res->h1 == rounds && res->jumped == rounds && res->h2 == rounds,
		"handler 1 ran %d times, left by handler 2's siglongjmp %d times, handler 2 ran %d times; "
		"expected %d each", res->h1, res->jumped, res->h2, rounds);
	t_check(res->poll == 1 && res->n == 1 && res->c == 'x',
		"main's read after the rounds did not get the byte written to it (poll %d, read %ld): "
		"handler 1's read, left by handler 2's siglongjmp, stayed on the proxy and took it",
		res->poll, res->n);
	t_check(res->ppid1 == res->ppid && res->ppid2 == res->ppid, "getppid returned %d and %d, the parent is %d",
		res->ppid1, res->ppid2, (int)res->ppid);
}

#endif
