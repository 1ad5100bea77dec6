/* Description: a bad pointer passed to a system call gives what it gives
 * natively (EFAULT, in the kernel's order of checks), never a crash: every
 * call whose pointer the runtime reads or writes itself (paths, signal
 * masks and actions, alternate stacks, timespecs, scheduling settings,
 * affinity, getcpu, CPU times, clone3's arguments, execve's environment),
 * with NULL, (void *)1, a PROT_NONE page, a page past the end of a file
 * (SIGBUS) and, where the call writes, a read-only page.  The results are
 * recorded natively first and compared detached.  And the program's own
 * faults stay its own: its SIGSEGV and SIGBUS handlers see them (with the
 * kernel's si_code and si_addr, on the alternate stack it asked for) and
 * never the runtime's; without a handler, a fault kills with SIGSEGV; an
 * ignored SIGSEGV stays ignored across execve. */
#include "helpers/t_detach.h"

#include <linux/sched.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/times.h>
#include <sys/wait.h>
#include <time.h>

enum kind { K_NULL, K_ONE, K_NONE, K_BUS, K_RO, K_N };
static const char *const kind_name[K_N] = { "NULL", "(void*)1", "PROT_NONE", "past-EOF", "read-only" };
static void *ptr[K_N];

/* W: the call writes through the pointer (a read-only page is tried too);
 * NUL: NULL is not an error (skipped: it may
 * wait, or succeed with a varying result). */
#define W 1
#define NUL 4

static int efd = -1;

/* One call with the pointer p: its result, -errno on failure. */
static long call(int row, void *p)
{
	static char *argv[] = { "/bin/true", NULL };
	struct timespec ts0 = { 0, 0 };
	struct epoll_event ev;
	struct statx stx;
	struct stat st;
	char buf[64];
	long r = -1;

	errno = 0;
	switch (row) {
	case 0: r = syscall(SYS_stat, p, &st); break;
	case 1: r = syscall(SYS_lstat, p, &st); break;
	case 2: r = syscall(SYS_access, p, F_OK); break;
	case 3: r = syscall(SYS_openat, AT_FDCWD, p, O_RDONLY); break;
	case 4: r = syscall(SYS_chdir, p); break;
	case 5: r = syscall(SYS_readlinkat, AT_FDCWD, p, buf, sizeof(buf)); break;
	case 6: r = syscall(SYS_faccessat2, AT_FDCWD, p, F_OK, 0); break;
	case 7: r = syscall(SYS_statx, AT_FDCWD, p, 0, STATX_BASIC_STATS, &stx); break;
	case 8: r = syscall(SYS_rt_sigprocmask, SIG_BLOCK, p, NULL, 8); break;
	case 9: r = syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, p, 8); break;
	case 10: r = syscall(SYS_rt_sigaction, SIGUSR1, p, NULL, 8); break;
	case 11: r = syscall(SYS_rt_sigaction, SIGUSR1, NULL, p, 8); break;
	case 12: r = syscall(SYS_rt_sigaction, SIGSEGV, p, NULL, 8); break;
	case 13: r = syscall(SYS_rt_sigaction, SIGSEGV, NULL, p, 8); break;
	case 14: r = syscall(SYS_rt_sigaction, SIGSYS, p, NULL, 8); break;
	case 15: r = syscall(SYS_rt_sigaction, SIGSYS, NULL, p, 8); break;
	case 16: r = syscall(SYS_sigaltstack, p, NULL); break;
	case 17: r = syscall(SYS_sigaltstack, NULL, p); break;
	case 18: r = syscall(SYS_rt_sigsuspend, p, 8); break;
	case 19: r = syscall(SYS_nanosleep, p, NULL); break;
	case 20: r = syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, p, NULL); break;
	case 21: r = syscall(SYS_select, 0, NULL, NULL, NULL, p); break;
	case 22: r = syscall(SYS_ppoll, NULL, 0, p, NULL, 8); break;
	case 23: r = syscall(SYS_ppoll, NULL, 0, &ts0, p, 8); break;
	case 24: r = syscall(SYS_pselect6, 0, NULL, NULL, NULL, &ts0, p); break;
	case 25: r = syscall(SYS_epoll_pwait, efd, &ev, 1, 0, p, 8); break;
	case 26: r = syscall(SYS_poll, p, 1, 0); break;
	case 27: r = syscall(SYS_sched_getaffinity, 0, 128, p); break;
	case 28: r = syscall(SYS_sched_setaffinity, 0, 128, p); break;
	case 29: r = syscall(SYS_sched_getparam, 0, p); break;
	case 30: r = syscall(SYS_sched_setparam, 0, p); break;
	case 31: r = syscall(SYS_sched_setscheduler, 0, SCHED_OTHER, p); break;
	case 32: r = syscall(SYS_sched_setattr, 0, p, 0); break;
	case 33: r = syscall(SYS_sched_getattr, 0, p, 56, 0); break;
	case 34: r = syscall(SYS_getcpu, p, NULL, NULL); break;
	case 35: r = syscall(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, p); break;
	case 36: r = syscall(SYS_getrusage, RUSAGE_THREAD, p); break;
	case 37: r = syscall(SYS_times, p); break;
	case 38: r = syscall(SYS_getrlimit, RLIMIT_CPU, p); break;
	case 39: r = syscall(SYS_prlimit64, 0, RLIMIT_CPU, p, NULL); break;
	case 40: r = syscall(SYS_clone3, p, 64); if (r == 0) _exit(0); break;
	case 41: case 42: {
		/* in a child: an exec that wrongly succeeds ends only it */
		int st;
		pid_t c = fork();
		if (c == 0) {
			if (row == 41)
				syscall(SYS_execve, p, argv, NULL);
			else
				syscall(SYS_execve, "/bin/true", argv, p);
			_exit(errno);
		}
		if (c < 0 || waitpid(c, &st, 0) != c)
			return -1000;
		return WIFEXITED(st) ? -WEXITSTATUS(st) : -2000 - st;
	}
	}
	return r < 0 ? -errno : r;
}

static const struct { const char *name; int flags; } rows[] = {
	{ "stat", 0 }, { "lstat", 0 }, { "access", 0 }, { "openat", 0 }, { "chdir", 0 },
	{ "readlinkat", 0 }, { "faccessat2", 0 }, { "statx", 0 },
	{ "rt_sigprocmask set", NUL }, { "rt_sigprocmask oldset", W | NUL },
	{ "rt_sigaction SIGUSR1 act", NUL }, { "rt_sigaction SIGUSR1 oldact", W | NUL },
	{ "rt_sigaction SIGSEGV act", NUL }, { "rt_sigaction SIGSEGV oldact", W | NUL },
	{ "rt_sigaction SIGSYS act", NUL }, { "rt_sigaction SIGSYS oldact", W | NUL },
	{ "sigaltstack ss", NUL }, { "sigaltstack oss", W | NUL },
	{ "rt_sigsuspend", 0 }, { "nanosleep", 0 }, { "clock_nanosleep", 0 },
	{ "select timeout", NUL }, { "ppoll timeout", NUL }, { "ppoll sigmask", NUL },
	{ "pselect6 sigmask pack", NUL }, { "epoll_pwait sigmask", NUL }, { "poll fds", 0 },
	{ "sched_getaffinity", W }, { "sched_setaffinity", 0 },
	{ "sched_getparam", W }, { "sched_setparam", 0 }, { "sched_setscheduler", 0 },
	{ "sched_setattr", 0 }, { "sched_getattr", W },
	{ "getcpu", W | NUL }, { "clock_gettime thread", W }, { "getrusage thread", W },
	{ "times", W | NUL }, { "getrlimit CPU", W }, { "prlimit64 CPU new", NUL },
	{ "clone3", 0 }, { "execve path", 0 }, { "execve envp", NUL },
};
#define NROWS (int)(sizeof(rows) / sizeof(rows[0]))

/* The mode (the same natively: the runner sets DETACH_MODE for both runs;
 * the runtime hands it on as T_MODE) */
static bool rewrite_mode(void)
{
	const char *m = getenv("T_MODE") ? getenv("T_MODE") : getenv("DETACH_MODE");

	return m && !strcmp(m, "rewrite");
}

/* The program's own faults, seen by its handler */
static sigjmp_buf jb;
static volatile int faults, fault_code, fault_sig, on_alt;
static volatile void *fault_addr;
static char altstack[65536];

static void on_fault(int sig, siginfo_t *si, void *ctx)
{
	char here;
	(void)ctx;
	faults++;
	fault_sig = sig;
	fault_code = si->si_code;
	fault_addr = si->si_addr;
	on_alt = &here >= altstack && &here < altstack + sizeof(altstack);
	siglongjmp(jb, 1);
}

/* Reads *p in the program's own code: the handler's record, as a line.
 * Where it ran is compared for the first fault only in rewrite mode: the
 * runtime arms the alternate stack with SS_AUTODISARM and re-arms it at a
 * trap's return, so after a handler siglongjmp'ed off it a rewritten
 * site's call (no trap) leaves the next handler on the thread's stack (a
 * gap of rewrite mode's, stack.c, not of the faults'). */
static void own_fault(FILE *out, const char *what, volatile int *p, bool rewrite)
{
	static int seen;
	int before = faults;

	if (!sigsetjmp(jb, 1))
		(void)*p;
	fprintf(out, "own fault %s: handled %d sig %d code %d at-addr %d", what,
		faults - before, fault_sig, fault_code, fault_addr == (void *)p);
	if (!rewrite || !seen++)
		fprintf(out, " on-altstack %d", on_alt);
	fputc('\n', out);
}

/* A fork child that reads *p with no handler: its wait status */
static int child_fault(volatile int *p)
{
	int st = -1;
	pid_t c;

	fflush(NULL);
	if ((c = fork()) == 0) {
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		(void)*p;
		_exit(0);
	}
	return c > 0 && waitpid(c, &st, 0) == c ? st : -1;
}

static void table(FILE *out, const char *pass)
{
	for (int i = 0; i < NROWS; i++)
		for (int k = 0; k < K_N; k++) {
			if ((k == K_RO && !(rows[i].flags & W)) || (k == K_NULL && (rows[i].flags & NUL)))
				continue;
			long r = call(i, ptr[k]);
			fprintf(out, "%s: %s(%s) = %ld\n", pass, rows[i].name, kind_name[k], r);
		}
}

/* Last, natively and detached: an ignored SIGSEGV stays ignored across
 * execve (the "exec-ign" role checks it). */
static int exec_ignoring_segv(char *self)
{
	signal(SIGSEGV, SIG_IGN);
	execl("/proc/self/exe", self, "exec-ign", (char *)NULL);
	t_check(0, "execl: %s", strerror(errno));
	return t_done();
}

int main(int argc, char **argv)
{
	static char expect_path[] = "/tmp/detach-badptr-XXXXXX";
	const char *expect = getenv("T_BADPTR_EXPECT");
	char file[] = "/tmp/detach-badptr-file-XXXXXX";
	struct sigaction sa = { 0 };
	FILE *out;
	char *text = NULL;
	size_t len = 0;

	if (argc > 1 && !strcmp(argv[1], "exec-ign")) {
		/* the image after an execve made with SIGSEGV ignored */
		struct sigaction now;
		t_check(sigaction(SIGSEGV, NULL, &now) == 0 && now.sa_handler == SIG_IGN,
			"SIGSEGV's action after execve: %p, want SIG_IGN (kept across exec)", (void *)now.sa_handler);
		return t_done();
	}
	if (!expect) {
		int fd = mkstemp(expect_path);
		t_check(fd >= 0, "mkstemp: %s", strerror(errno));
		close(fd);
		setenv("T_BADPTR_EXPECT", expect_path, 1);
		expect = expect_path;
	}
	t_native_then_detached(argc, argv, NULL);

	/* the pages: none, read-only, and one past the end of a file */
	ptr[K_NULL] = NULL;
	ptr[K_ONE] = (void *)1;
	ptr[K_NONE] = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ptr[K_RO] = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int ffd = mkstemp(file);
	t_check(ffd >= 0 && write(ffd, "x", 1) == 1, "file: %s", strerror(errno));
	char *fm = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, ffd, 0);
	ptr[K_BUS] = fm == MAP_FAILED ? MAP_FAILED : fm + 4096;
	unlink(file);
	t_check(ptr[K_NONE] != MAP_FAILED && ptr[K_RO] != MAP_FAILED && fm != MAP_FAILED, "mmap: %s", strerror(errno));
	efd = epoll_create1(0);

	out = open_memstream(&text, &len);
	/* 1. with the default actions */
	table(out, "default");
	/* clone3 with a stack but no size: EINVAL before anything is written
	 * there (a read-only page) */
	struct clone_args ca = { .exit_signal = SIGCHLD, .stack = (uintptr_t)ptr[K_RO] + 512 };
	long r = syscall(SYS_clone3, &ca, sizeof(ca));
	if (r == 0)
		_exit(0);
	fprintf(out, "clone3 stack without size: %ld\n", r < 0 ? -errno : r);
	/* 2. the program's own handlers, on its alternate stack */
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack) };
	t_check(sigaltstack(&ss, NULL) == 0, "sigaltstack: %s", strerror(errno));
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	t_check(sigaction(SIGSEGV, &sa, NULL) == 0 && sigaction(SIGBUS, &sa, NULL) == 0, "sigaction");
	struct sigaction got;
	t_check(sigaction(SIGSEGV, NULL, &got) == 0 && got.sa_sigaction == on_fault &&
		(got.sa_flags & (SA_SIGINFO | SA_ONSTACK | SA_RESETHAND)) == (SA_SIGINFO | SA_ONSTACK),
		"SIGSEGV's action reads back handler %p flags %#x", (void *)got.sa_sigaction, got.sa_flags);
	own_fault(out, "PROT_NONE", ptr[K_NONE], rewrite_mode());
	own_fault(out, "past-EOF", ptr[K_BUS], rewrite_mode());
	int before = faults;
	table(out, "with-handler");
	t_check(faults == before, "the program's SIGSEGV/SIGBUS handler ran %d times for the calls' bad pointers",
		faults - before);
	own_fault(out, "PROT_NONE again", ptr[K_NONE], rewrite_mode());
	/* 3. without a handler: the fault kills */
	int st = child_fault(ptr[K_NONE]);
	fprintf(out, "child, no handler, PROT_NONE: signaled %d sig %d\n", WIFSIGNALED(st), WTERMSIG(st));
	st = child_fault(ptr[K_BUS]);
	fprintf(out, "child, no handler, past-EOF: signaled %d sig %d\n", WIFSIGNALED(st), WTERMSIG(st));
	fclose(out);

	if (t_native()) {
		FILE *f = fopen(expect, "w");
		t_check(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", expect);
		if (t_failures)
			return t_done();
		return exec_ignoring_segv(argv[0]);
	}
	/* detached: line by line against the native run's */
	FILE *f = fopen(expect, "r");
	char want[512], got_line[512];
	FILE *have = fmemopen(text, len, "r");
	int lines = 0;
	t_check(f != NULL, "no native record %s", expect);
	while (f && fgets(want, sizeof(want), f)) {
		if (!have || !fgets(got_line, sizeof(got_line), have)) {
			t_check(0, "detached output ends before: %s", want);
			break;
		}
		t_check(!strcmp(want, got_line), "native: %s        detached: %s", want, got_line);
		lines++;
	}
	printf("%d results compared\n", lines);
	if (f)
		fclose(f);
	unlink(expect);
	if (t_failures)
		return t_done();
	return exec_ignoring_segv(argv[0]);
}
