/* Description: a seccomp filter the program installs applies to the
 * program's calls and never to the runtime's: each role runs natively and
 * under `detach run`, with the same output and the same wait status: an
 * allowlist sandbox prints its line and exits 0; a denied call kills the
 * process with SIGSYS; ERRNO returns the errno (capped at 4095); TRAP
 * delivers SIGSYS with si_code, si_errno, si_syscall, si_arch and the
 * registers of the call; on the detached thread the filter is judged
 * without entering the kernel (its voluntary switches, syscr and syscw
 * flat across 200,000 judged, emulated calls; its stime too in rewrite
 * mode, where such a call never enters the kernel); a fork child, a
 * thread created after install (watched, and under --select first not
 * intercepted at all), a vfork child and the image after execve (one that
 * loads the runtime, and a static one) are still judged; KILL_THREAD ends
 * a thread, and the last one's the process; TSYNC with one thread works. */
#include "helpers/t_detach.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <ucontext.h>

#define LD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1), RET(SECCOMP_RET_ALLOW)
#define ON(nr, v) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1), RET(v)

static int install(struct sock_filter *f, unsigned short len)
{
	struct sock_fprog p = { .len = len, .filter = f };

	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p);
}
#define INSTALL(f) install(f, sizeof(f) / sizeof(f[0]))

/* a user's report's /tmp/allow.c, as it is */
static int role_allow(bool deny)
{
	struct sock_filter f[] = {
		LD_NR,
		ALLOW(SYS_read), ALLOW(SYS_write), ALLOW(SYS_exit), ALLOW(SYS_exit_group), ALLOW(SYS_brk),
		ALLOW(SYS_fstat), ALLOW(SYS_newfstatat), ALLOW(SYS_getpid),
		RET(SECCOMP_RET_KILL_PROCESS),
	};
	if (INSTALL(f)) { perror("seccomp"); return 1; }
	char buf[64];
	int n = snprintf(buf, sizeof buf, "sandboxed pid %d\n", getpid());
	if (write(1, buf, n) != n)
		return 1;
	if (deny)
		syscall(SYS_getppid);   /* not on the list: SIGSYS */
	return 0;
}

static int role_errno(void)
{
	struct sock_filter f[] = {
		LD_NR,
		ON(SYS_getppid, SECCOMP_RET_ERRNO | 5000),      /* capped at 4095 */
		ON(SYS_uname, SECCOMP_RET_ERRNO | EPERM),
		ON(SYS_getuid, SECCOMP_RET_ERRNO | 0),          /* "succeeds" with 0 */
		ON(SYS_getpgid, SECCOMP_RET_TRACE),             /* no tracer: ENOSYS */
		RET(SECCOMP_RET_ALLOW),
	};
	/* a second filter (with TSYNC): the stricter action wins whatever the order */
	struct sock_filter g[] = { LD_NR, ON(SYS_uname, SECCOMP_RET_ERRNO | EACCES), RET(SECCOMP_RET_LOG) };
	struct sock_fprog gp = { .len = sizeof(g) / sizeof(g[0]), .filter = g };
	if (INSTALL(f) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &gp)) {
		perror("seccomp");      /* TSYNC with one thread: nothing to reach */
		return 1;
	}
	long r1 = syscall(SYS_getppid); int e1 = errno;
	long r2 = syscall(SYS_uname, NULL); int e2 = errno;
	long r3 = syscall(SYS_getuid);
	long r4 = syscall(SYS_getpgid, 0); int e4 = errno;
	printf("getppid %ld errno %d\nuname %ld %s\ngetuid %ld\ngetpgid %ld %s\nprctl(PR_GET_SECCOMP) %d\n",
	       r1, e1, r2, strerrorname_np(e2), r3, r4, strerrorname_np(e4), prctl(PR_GET_SECCOMP));
	return 0;
}

static volatile int got_code, got_errno, got_nr, got_rax_nr, got_site;
static volatile unsigned got_arch;

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	const unsigned char *ip = si->si_call_addr;

	(void)sig;
	got_code = si->si_code;
	got_errno = si->si_errno;
	got_nr = si->si_syscall;
	got_arch = si->si_arch;
	got_rax_nr = uc->uc_mcontext.gregs[REG_RAX] == si->si_syscall;
	/* after a `syscall` (0f 05), or the `call *%rax` (ff d0) rewrite mode put there */
	got_site = ip == (void *)uc->uc_mcontext.gregs[REG_RIP] &&
		   ((ip[-2] == 0x0f && ip[-1] == 0x05) || (ip[-2] == 0xff && ip[-1] == 0xd0));
	uc->uc_mcontext.gregs[REG_RAX] = 4242;  /* the call's result */
}

static int role_trap(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
	struct sock_filter f[] = { LD_NR, ON(SYS_getppid, SECCOMP_RET_TRAP | 77), RET(SECCOMP_RET_ALLOW) };

	sigaction(SIGSYS, &sa, NULL);
	if (INSTALL(f)) { perror("seccomp"); return 1; }
	long r = syscall(SYS_getppid);
	printf("getppid %ld: si_code %d si_errno %d si_syscall %d si_arch %#x rax=nr %d at the site %d\n",
	       r, got_code, got_errno, got_nr, got_arch, got_rax_nr, got_site);
	/* blocked, a trapped call takes the default action: SIGSYS kills */
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGSYS);
	sigprocmask(SIG_BLOCK, &s, NULL);
	fflush(stdout);
	syscall(SYS_getppid);
	return 0;
}

/* On the detached thread, judging a call enters no kernel: 200,000
 * emulated gettid calls, each judged by a 24-instruction filter that
 * looks at the argument, leave the thread's kernel counters flat. */
static int role_counters(void)
{
	struct sock_filter f[24];
	int n = 0;

	f[n++] = (struct sock_filter)LD_NR;
	for (int i = 0; i < 8; i++) {           /* some work: 16 compares */
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 10000 + i, 0, 1);
		f[n++] = (struct sock_filter)RET(SECCOMP_RET_KILL_PROCESS);
	}
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_gettid, 0, 3);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 12345, 0, 1);
	f[n++] = (struct sock_filter)RET(SECCOMP_RET_ERRNO | EPERM);
	f[n++] = (struct sock_filter)RET(SECCOMP_RET_ALLOW);
	if (install(f, (unsigned short)n)) { perror("seccomp"); return 1; }
	pid_t me = (pid_t)syscall(SYS_gettid, 0);
	long long st0 = t_task_stat_field(me, 15), vol0 = t_task_value(me, "status", "voluntary_ctxt_switches");
	long long r0 = t_task_value(me, "io", "syscr"), w0 = t_task_value(me, "io", "syscw");
	long bad = 0;
	for (int i = 0; i < 200000; i++)
		bad += syscall(SYS_gettid, 0) != me;
	long long st1 = t_task_stat_field(me, 15), vol1 = t_task_value(me, "status", "voluntary_ctxt_switches");
	long long r1 = t_task_value(me, "io", "syscr"), w1 = t_task_value(me, "io", "syscw");
	long r = syscall(SYS_gettid, 12345);
	printf("gettid(0) wrong %ld times; gettid(12345) %ld %s\n", bad, r, strerrorname_np(errno));
	if (getenv("T_DETACHED")) {
		fprintf(stderr, "detached tid %d: stime %lld -> %lld ticks, voluntary switches %lld -> %lld, "
			"syscr %lld -> %lld, syscw %lld -> %lld\n", me, st0, st1, vol0, vol1, r0, r1, w0, w1);
		/* in sud mode every call traps (a kernel entry of its own): stime
		 * is the evidence in rewrite mode only */
		bool rewrite = getenv("T_MODE") && !strcmp(getenv("T_MODE"), "rewrite");
		if ((rewrite && st1 - st0 > 1) || vol1 != vol0 || r1 != r0 || w1 != w0) {
			fprintf(stderr, "FAIL: the detached thread entered the kernel while calls were judged\n");
			return 1;
		}
	}
	return 0;
}

/* Inherited: a fork child, a thread created after install (watched by
 * default, left alone under --select first), a vfork child, an exec'd image
 * keep being judged. */
static void *thread_main(void *arg)
{
	long r = syscall(SYS_getppid);
	printf("thread getppid %ld %s\n", r, strerrorname_np(errno));
	return arg;
}

/* the memfd the filters travel in (sandbox.c) is closed by the new image */
static bool open_memfd(void)
{
	char path[64], link[256];
	bool found = false;

	for (int fd = 0; fd < 1024 && !found; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		found = n > 0 && (link[n] = '\0', strstr(link, "detach-seccomp") != NULL);
	}
	return found;
}

static int role_inherit(const char *self)
{
	struct sock_filter f[] = { LD_NR, ON(SYS_getppid, SECCOMP_RET_ERRNO | EPERM), RET(SECCOMP_RET_ALLOW) };
	pthread_t th;
	int st;

	if (INSTALL(f)) { perror("seccomp"); return 1; }
	pid_t p = fork();
	if (p == 0) {
		long r = syscall(SYS_getppid);
		printf("fork child getppid %ld %s\n", r, strerrorname_np(errno));
		_exit(0);
	}
	waitpid(p, &st, 0);
	pthread_create(&th, NULL, thread_main, NULL);
	pthread_join(th, NULL);
	p = vfork();
	if (p == 0) {
		execl(self, self, "exec", (char *)NULL);
		_exit(127);
	}
	waitpid(p, &st, 0);
	printf("vfork+exec child: status %#x\n", st);
	fflush(stdout);
	execl(self, self, "exec", (char *)NULL);
	return 1;
}

/* KILL_THREAD ends a thread that is not the last, silently; the last
 * one's takes the process (SIGSYS). */
static void *doomed(void *arg)
{
	syscall(SYS_getppid);
	printf("the killed thread went on\n");
	return arg;
}

static int role_kill_thread(void)
{
	struct sock_filter f[] = { LD_NR, ON(SYS_getppid, SECCOMP_RET_KILL_THREAD), RET(SECCOMP_RET_ALLOW) };
	pthread_t th;

	if (INSTALL(f)) { perror("seccomp"); return 1; }
	pthread_create(&th, NULL, doomed, NULL);
	pthread_join(th, NULL);
	printf("joined the killed thread\n");
	syscall(SYS_getppid);
	printf("the last thread went on\n");
	return 0;
}

/* exit() from a thread the runtime does not intercept (--select first):
 * the kernel filter it carries judges the runtime's own exit work too, if
 * the runtime does any there (its statistics: unlink, open). */
static void *exiting(void *arg)
{
	exit(0);
	return arg;
}

static int role_exit_first(void)
{
	struct sock_filter f[] = {
		LD_NR, ON(SYS_unlink, SECCOMP_RET_KILL_PROCESS), ON(SYS_unlinkat, SECCOMP_RET_KILL_PROCESS),
		ON(SYS_openat, SECCOMP_RET_KILL_PROCESS), RET(SECCOMP_RET_ALLOW),
	};
	pthread_t th;

	if (INSTALL(f)) { perror("seccomp"); return 1; }
	pthread_create(&th, NULL, exiting, NULL);
	pthread_join(th, NULL);
	return 3;
}

static int role(const char *self, const char *r)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (!strcmp(r, "allow") || !strcmp(r, "deny"))
		return role_allow(!strcmp(r, "deny"));
	if (!strcmp(r, "errno"))
		return role_errno();
	if (!strcmp(r, "trap"))
		return role_trap();
	if (!strcmp(r, "counters"))
		return role_counters();
	if (!strcmp(r, "inherit") || !strcmp(r, "inherit-first"))
		return role_inherit(self);
	if (!strcmp(r, "exit-first"))
		return role_exit_first();
	if (!strcmp(r, "kill-thread"))
		return role_kill_thread();
	if (!strcmp(r, "exec-static")) {        /* an image that cannot take the runtime */
		struct sock_filter f[] = { LD_NR, ON(SYS_getppid, SECCOMP_RET_ERRNO | EPERM), RET(SECCOMP_RET_ALLOW) };
		if (INSTALL(f)) { perror("seccomp"); return 1; }
		execl(getenv("T_STATIC"), "static", (char *)NULL);
		return 1;
	}
	if (!strcmp(r, "exec")) {
		long ret = syscall(SYS_getppid);
		int e = errno;
		printf("exec'd image getppid %ld %s, PR_GET_SECCOMP %d%s\n", ret, strerrorname_np(e),
		       prctl(PR_GET_SECCOMP), open_memfd() ? ", a descriptor of the runtime's left open" : "");
		return 0;
	}
	return 2;
}

/* Runs self ROLE natively or under detach run; its stdout in out. */
static int run(char *self, const char *r, bool detached, char *out, size_t len)
{
	char *args[64] = { self, (char *)r, NULL };
	int fds[2], st = 0;
	size_t got = 0;
	ssize_t n;
	pid_t p;

	static const char *const first[] = { "--select", "first", NULL };

	if (detached)
		t_detach_argv(args, NULL, strncmp(r + strcspn(r, "-"), "-first", 6) ? NULL : first, self, r);
	if (pipe(fds))
		return -1;
	p = fork();
	if (p == 0) {
		struct rlimit none = { 0, 0 };
		setrlimit(RLIMIT_CORE, &none);  /* SIGSYS dumps core: not here */
		if (detached)
			setenv("T_DETACHED", "1", 1);
		dup2(fds[1], 1);
		execv(args[0], args);
		_exit(127);
	}
	close(fds[1]);
	while (got < len - 1 && (n = read(fds[0], out + got, len - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(fds[0]);
	waitpid(p, &st, 0);
	return st;
}

int main(int argc, char **argv)
{
	static const char *const roles[] = { "allow", "deny", "errno", "trap", "counters", "inherit",
					      "inherit-first", "kill-thread", "exec-static", "exit-first" };
	static const int killed_by[] = { 0, SIGSYS, 0, SIGSYS, 0, 0, 0, SIGSYS, 0, 0 };        /* natively */
	char nat[1024], det[1024], st[64];

	if (argc > 1)
		return role(argv[0], argv[1]);
	/* the static image: calls getppid and says what it got */
	snprintf(st, sizeof(st), "/tmp/detach-seccomp-static-%d", getpid());
	char src[80], cmd[256];
	snprintf(src, sizeof(src), "%s.c", st);
	FILE *c = fopen(src, "w");
	if (c) {
		fputs("#include <errno.h>\n#include <stdio.h>\n#include <string.h>\n#include <sys/syscall.h>\n#include <unistd.h>\n"
		      "int main(void) { long r = syscall(SYS_getppid); int e = errno;\n"
		      "\tprintf(\"static image getppid %ld errno %d\\n\", r, e); return 0; }\n", c);
		fclose(c);
	}
	snprintf(cmd, sizeof(cmd), "gcc -static -o %s %s 2>/dev/null", st, src);
	bool have_static = system(cmd) == 0;
	setenv("T_STATIC", st, 1);
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
		if (!strcmp(roles[i], "exec-static") && !have_static) {
			printf("exec-static: not run: cannot build a static program (libc6-dev)\n");
			continue;
		}
		int sn = run(argv[0], roles[i], false, nat, sizeof(nat));
		int sd = run(argv[0], roles[i], true, det, sizeof(det));

		printf("%-8s natively: status %#x, %s%s", roles[i], sn, nat, *nat ? "" : "\n");
		printf("%-8s detached: status %#x, %s%s", roles[i], sd, det, *det ? "" : "\n");
		t_check(killed_by[i] ? WIFSIGNALED(sn) && WTERMSIG(sn) == killed_by[i] : sn == 0,
			"%s: natively wait status %#x: the test is wrong", roles[i], sn);
		t_check(sn == sd, "%s: wait status %#x detached, %#x natively", roles[i], sd, sn);
		if (!strncmp(nat, "sandboxed pid ", 14)) {
			t_check(!strncmp(det, "sandboxed pid ", 14), "%s: output '%s'", roles[i], det);
		} else {
			t_check(!strcmp(nat, det), "%s: output differs", roles[i]);
		}
	}
	unlink(st);
	unlink(src);
	t_reap_registry();      /* the killed ones leave their registry file */
	return t_done();
}
