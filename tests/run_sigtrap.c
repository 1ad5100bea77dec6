/* Description: SIGTRAP reaches the program as natively although rewrite
 * mode owns its handler (the int3 of a site being rewritten): a handler of
 * the program's sees each of 1,000 int3 in its own code with si_code
 * SI_KERNEL and rip after the int3, raise() with SI_TKILL, SA_RESETHAND
 * resets it, sigaction reads back what was set, and an int3 under the
 * default action kills with SIGTRAP; a breakpoint set by gdb (batch mode)
 * stops the program three times and it exits normally, as it does without
 * detach.  Checked natively first.
 * Timeout: 120 */
#include "helpers/t_detach.h"

#include <signal.h>
#include <ucontext.h>

#define INT3S 1000

extern const char t_int3_insn[], t_int3_after[];
void t_int3(void);
__asm__(".text\n"
	".globl t_int3\n"
	"t_int3:\n"
	".globl t_int3_insn\n"
	"t_int3_insn:\n"
	"	int3\n"
	".globl t_int3_after\n"
	"t_int3_after:\n"
	"	ret\n");

static volatile int hits, bad_code, bad_rip, last_code;

static void on_trap(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	(void)sig;
	hits++;
	last_code = si->si_code;
	if (si->si_code == SI_KERNEL) {
		if ((const char *)uc->uc_mcontext.gregs[REG_RIP] != t_int3_after)
			bad_rip++;
	} else if (si->si_code != SI_TKILL) {
		bad_code++;
	}
}

/* gdb's target: three stops at the breakpoint, a system call between */
__attribute__((noinline)) void t_gdb_mark(int i)
{
	__asm__ volatile("" : : "r"(i) : "memory");
}

static int gdb_target(void)
{
	for (int i = 0; i < 3; i++) {
		t_gdb_mark(i);
		printf("mark %d\n", i);
		fflush(stdout);
	}
	return 0;
}

/* Runs gdb on `prefix... self gdb-target`; returns the breakpoint stops,
 * -1 unless the program exited normally. */
static int gdb_stops(const char *self, const char *prefix)
{
	char cmd[2048], line[1024];
	int stops = 0;
	bool exited = false;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "gdb -nx -batch -ex 'set startup-with-shell off' -ex 'set breakpoint pending on' "
		 "-ex 'handle SIGSYS nostop noprint pass' -ex 'break t_gdb_mark' -ex run "
		 "-ex continue -ex continue -ex continue --args %s %s gdb-target 2>&1 </dev/null",
		 prefix, self);
	f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f)) {
		fputs("  gdb| ", stdout);
		fputs(line, stdout);
		if (!strncmp(line, "Breakpoint 1, ", 14) || strstr(line, " hit Breakpoint 1, "))
			stops++;
		if (strstr(line, "exited normally"))
			exited = true;
	}
	if (f)
		pclose(f);
	return exited ? stops : -1;
}

/* The wait status of a fork child that executes an int3 */
static int int3_in_child(void)
{
	int st = -1;
	pid_t p;

	fflush(NULL);
	p = fork();
	if (p == 0) {
		t_int3();
		_exit(0);
	}
	return p > 0 && waitpid(p, &st, 0) == p ? st : -1;
}

static void handler_checks(void)
{
	struct sigaction sa = { 0 }, got;
	int st;

	sa.sa_sigaction = on_trap;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	t_check(sigaction(SIGTRAP, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
	t_check(sigaction(SIGTRAP, NULL, &got) == 0 && got.sa_sigaction == on_trap &&
		(got.sa_flags & (SA_SIGINFO | SA_RESETHAND | SA_ONSTACK)) == SA_SIGINFO,
		"sigaction reads back handler %p flags %#x", (void *)got.sa_sigaction, got.sa_flags);
	for (int i = 0; i < INT3S; i++) {
		t_int3();
		getppid();       /* a system call site between, rewritten in rewrite mode */
	}
	printf("%d int3: handler ran %d times, %d bad si_code, %d bad rip\n", INT3S, hits, bad_code, bad_rip);
	t_check(hits == INT3S && bad_code == 0 && bad_rip == 0, "int3 seen %d times of %d", hits, INT3S);
	hits = 0;
	raise(SIGTRAP);
	t_check(hits == 1 && last_code == SI_TKILL, "raise: %d runs, si_code %d", hits, last_code);

	/* SA_RESETHAND: the second int3 finds the default action (in a child) */
	sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
	sigaction(SIGTRAP, &sa, NULL);
	hits = 0;
	t_int3();
	t_check(hits == 1, "SA_RESETHAND handler ran %d times", hits);
	t_check(sigaction(SIGTRAP, NULL, &got) == 0 && got.sa_handler == SIG_DFL,
		"after SA_RESETHAND the action is %p", (void *)got.sa_handler);
	st = int3_in_child();
	t_check(WIFSIGNALED(st) && WTERMSIG(st) == SIGTRAP, "int3 under the default action: wait status %#x", st);
	/* ignored: a trap the kernel raises takes the default action anyway */
	signal(SIGTRAP, SIG_IGN);
	st = int3_in_child();
	t_check(WIFSIGNALED(st) && WTERMSIG(st) == SIGTRAP, "int3 with SIGTRAP ignored: wait status %#x", st);
	signal(SIGTRAP, SIG_DFL);
	/* blocked, with a handler: the mask reads back as set, and an int3
	 * still kills (the kernel forces a blocked trap to its default) */
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGTRAP, &sa, NULL);
	sigset_t trap, cur;
	sigemptyset(&trap);
	sigaddset(&trap, SIGTRAP);
	sigprocmask(SIG_BLOCK, &trap, NULL);
	sigprocmask(SIG_BLOCK, NULL, &cur);
	t_check(sigismember(&cur, SIGTRAP), "SIGTRAP blocked but the mask reads it open");
	st = int3_in_child();
	t_check(WIFSIGNALED(st) && WTERMSIG(st) == SIGTRAP, "int3 with SIGTRAP blocked: wait status %#x", st);
	hits = 0;
	raise(SIGTRAP);      /* kept pending natively; see docs/runtime.md */
	sigprocmask(SIG_UNBLOCK, &trap, NULL);
	sigprocmask(SIG_BLOCK, NULL, &cur);
	t_check(!sigismember(&cur, SIGTRAP), "SIGTRAP unblocked but the mask reads it blocked");
	t_check(hits == 1, "a SIGTRAP raised while blocked ran the handler %d times", hits);
	signal(SIGTRAP, SIG_DFL);
}

int main(int argc, char **argv)
{
	char self[4096], prefix[4200];

	if (argc > 1 && !strcmp(argv[1], "gdb-target"))
		return gdb_target();
	if (getenv("T_DETACHED") || t_native()) {
		handler_checks();
		return getenv("T_DETACHED") ? t_detached_done() : t_done();
	}
	t_need_gdb();
	if (!t_self_exe(self, sizeof(self)))
		return 1;
	int native = gdb_stops(self, "");
	printf("natively: gdb stopped %d times at the breakpoint\n", native);
	t_check(native == 3, "gdb without detach: %d stops (-1: no normal exit)", native);
	if (!getenv("DETACH_BIN"))
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	snprintf(prefix, sizeof(prefix), "%s run -c 1", getenv("DETACH_BIN"));
	int detached = gdb_stops(self, prefix);
	printf("under detach (%s mode): gdb stopped %d times at the breakpoint\n",
	       getenv("DETACH_MODE") ? getenv("DETACH_MODE") : "default", detached);
	t_check(detached == 3, "gdb on detach run: %d stops (-1: no normal exit)", detached);
	if (t_failures)
		return t_done();
	t_native_then_detached(argc, argv, NULL);
	return 1;      /* not reached */
}
