/* Helpers for tests that run themselves under `detach run` and check the
 * result with the kernel's own per-thread counters (/proc/PID/task/TID):
 * t_reexec_detached() runs the whole test detached; t_run_inner() runs an
 * inner part (a role) detached and leaves the judging to the outer one,
 * from the statistics it wrote. */
#ifndef DETACH_TESTS_T_DETACH_H
#define DETACH_TESTS_T_DETACH_H

#include "t.h"
#include "lib/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define T_DETACHED_CPU 1

/* The command line `detach run -c 1 [--stats STATS] [extra...] -- self
 * [role]` in args (64 entries); skips without DETACH_BIN or 2 CPUs. */
static inline void t_detach_argv(char **args, const char *stats, const char *const *extra,
				 char *self, const char *role)
{
	const char *bin = getenv("DETACH_BIN");
	int n = 0;

	if (!bin)
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		t_skip("needs 2 CPUs");
	/* the runtime takes DETACH_MODE out of the program's environment:
	 * t_detached_done learns the mode asked for from T_MODE */
	if (getenv("DETACH_MODE"))
		setenv("T_MODE", getenv("DETACH_MODE"), 1);
	args[n++] = (char *)bin;
	args[n++] = "run";
	args[n++] = "-c";
	args[n++] = "1";
	if (stats) {
		args[n++] = "--stats";
		args[n++] = (char *)stats;
	}
	for (int i = 0; extra && extra[i] && n < 58; i++)
		args[n++] = (char *)extra[i];
	args[n++] = "--";
	args[n++] = self;
	if (role)
		args[n++] = (char *)role;
	args[n] = NULL;
}

/* Starts args (args[0] a path) with flag=1 in its environment unless flag
 * is NULL, its stdin the pipe in[1] writes and its stdout the pipe read
 * from out[0]; the child's ends are closed here.  Returns its pid, or -1
 * (errno) when a pipe or the fork fails. */
static inline pid_t t_spawn_piped(char **args, int in[2], int out[2], const char *flag)
{
	pid_t p;

	if (pipe(in) || pipe(out))
		return -1;
	fflush(NULL);
	if ((p = fork()) == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[0]), close(in[1]), close(out[0]), close(out[1]);
		if (flag)
			setenv(flag, "1", 1);
		execv(args[0], args);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	return p;
}

/* Starts args (t_detach_argv's command line, this test under `detach run`)
 * with T_WORKLOAD set, piped as t_spawn_piped says. */
static inline pid_t t_spawn_workload(char **args, int in[2], int out[2])
{
	return t_spawn_piped(args, in, out, "T_WORKLOAD");
}

/* Re-executes this test under `detach run -c 1 [extra...]` unless it already
 * runs there.  Skips without the CPUs the test needs. */
static inline void t_reexec_detached(int argc, char **argv, const char *const *extra)
{
	char *args[64];

	(void)argc;
	if (getenv("T_DETACHED"))
		return;
	/* checks made before the exec are judged here: the detached image
	 * starts counting from zero */
	if (t_failures) {
		fprintf(stderr, "%d check(s) failed before the test re-ran itself detached\n", t_failures);
		exit(1);
	}
	t_detach_argv(args, NULL, extra, argv[0], NULL);
	setenv("T_DETACHED", "1", 1);
	execv(args[0], args);
	perror("execv detach");
	exit(1);
}

/* size bytes of fresh memory with an inaccessible guard page just below
 * (a small stack whose overflow faults at once, as a makecontext stack or
 * CPython's faulthandler alternate stack on its heap would corrupt
 * memory); NULL if the mapping fails. */
static inline char *t_guarded_stack(size_t size)
{
	char *m = mmap(NULL, 4096 + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED || mprotect(m, 4096, PROT_NONE))
		return NULL;
	return m + 4096;
}

/* The size of a small alternate signal stack: the kernel's AT_MINSIGSTKSZ
 * (at least the ABI's MINSIGSTKSZ, 2048) plus extra, in whole pages. */
static inline size_t t_small_altstack_size(size_t extra)
{
	size_t min = getauxval(AT_MINSIGSTKSZ);

	return (((min > 2048 ? min : 2048) + extra) + 4095) & ~(size_t)4095;
}

/* For tests whose checks say what a program sees natively: runs them first
 * natively (a child with T_NATIVE=1), where they must pass too, then
 * re-executes the test under `detach run` as t_reexec_detached does. */
static inline bool t_native(void)
{
	return getenv("T_NATIVE") != NULL;
}

static inline void t_native_then_detached(int argc, char **argv, const char *const *extra)
{
	pid_t pid;
	int st = 0;

	if (getenv("T_DETACHED") || t_native())
		return;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		setenv("T_NATIVE", "1", 1);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "FAIL: the checks fail natively (wait status %#x): the test is wrong\n", st);
		exit(1);
	}
	printf("natively: all checks passed\n");
	fflush(NULL);
	t_reexec_detached(argc, argv, extra);
}

/* Reads /proc/self/task/TID/FILE into buf (through the proxy when called on
 * the detached thread: reading is forwarded like any call). */
static inline int t_task_file(pid_t tid, const char *file, char *buf, size_t len)
{
	char path[128];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", (int)tid, file);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* The process's first thread has ended while others run on: the kernel
 * keeps it as a zombie ('Z' in /proc/self/task/PID/stat); unreadable, it
 * is taken for gone. */
static inline bool t_first_thread_ended(void)
{
	char buf[512], *p;

	if (t_task_file(getpid(), "stat", buf, sizeof(buf)) || !buf[0])
		return true;
	p = strrchr(buf, ')');
	return p && (p[2] == 'Z' || p[2] == 'X');
}

/* Waits up to about a second for thread tid to be in the kernel in call
 * nr with its pc at pc (/proc/self/task/TID/syscall: the number, six
 * arguments, sp, pc): a thread blocked right after a given `syscall`. */
static inline bool t_task_in_syscall_at(pid_t tid, long nr, uintptr_t pc)
{
	char buf[512];

	for (int i = 0; i < 5000; i++) {
		unsigned long v[9] = { 0 };
		if (!t_task_file(tid, "syscall", buf, sizeof(buf)) &&
		    sscanf(buf, "%lu %lx %lx %lx %lx %lx %lx %lx %lx", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
			   &v[6], &v[7], &v[8]) == 9 && (long)v[0] == nr && v[8] == pc)
			return true;
		usleep(200);
	}
	return false;
}

/* Where every thread of process pid is, on stderr: for a run that hung,
 * before it is killed.  Per thread its name, state, the system call it is in
 * (/proc's syscall: number, arguments, sp, pc; "running" in user space) and
 * its kernel wait channel; then gdb's backtraces, where gdb is installed. */
static inline void t_print_threads(pid_t pid)
{
	char dir[64], path[352], buf[512];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	if (!(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		static const char *const files[] = { "comm", "stat", "syscall", "wchan" };
		if (e->d_name[0] == '.')
			continue;
		fprintf(stderr, "pid %d tid %s:", (int)pid, e->d_name);
		for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
			snprintf(path, sizeof(path), "%s/%s/%s", dir, e->d_name, files[i]);
			int fd = open(path, O_RDONLY);
			ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
			if (fd >= 0)
				close(fd);
			buf[n > 0 ? n : 0] = '\0';
			buf[strcspn(buf, "\n")] = '\0';
			if (i == 1 && strrchr(buf, ')')) {   /* stat: the state, after the name */
				char state = strrchr(buf, ')')[2];
				snprintf(buf, sizeof(buf), "%c", state);
			}
			fprintf(stderr, " %s=%s", files[i], buf);
		}
		/* the kernel's view of its signals: one pending and not
		 * delivered, or blocked, where a thread waits for a handler */
		static const char *const masks[] = { "SigPnd", "ShdPnd", "SigBlk" };
		for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
			snprintf(path, sizeof(path), "%s/%s/status", dir, e->d_name);
			FILE *f = fopen(path, "r");
			size_t len = strlen(masks[i]);
			while (f && fgets(buf, sizeof(buf), f))
				if (!strncmp(buf, masks[i], len) && buf[len] == ':') {
					buf[strcspn(buf, "\n")] = '\0';
					fprintf(stderr, " %s=%s", masks[i], buf + len + 2);
				}
			if (f)
				fclose(f);
		}
		fputc('\n', stderr);
	}
	closedir(d);
	/* a thread spinning in user space shows only "running": where it
	 * spins, from gdb's backtraces where gdb is installed, and the
	 * detached threads' mailboxes and nesting (the runtime's TLS dt_self;
	 * a proxy's is NULL, -s skips it) */
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "command -v gdb >/dev/null && timeout 30 gdb -p %d -batch "
		 "-ex 'thread apply all bt 12' -ex 'thread apply all -s p/x dt_self->mb' "
		 "-ex 'thread apply all -s p dt_self->depth' -ex 'thread apply all -s p/x dt_self->intr_first' "
		 "2>&1 | grep -E '^(#|Thread|\\$)' >&2", (int)pid);
	fflush(stderr);
	if (system(cmd) < 0)
		fprintf(stderr, "cannot run gdb\n");
}

/* The value after "key:" (status, io, sched) in /proc/self/task/TID/FILE. */
static inline long long t_task_value(pid_t tid, const char *file, const char *key)
{
	char buf[8192], *p;
	size_t klen = strlen(key);

	if (t_task_file(tid, file, buf, sizeof(buf)))
		return -1;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, key, klen) && (p[klen] == ':' || p[klen] == ' ')) {
			p += klen;
			while (*p == ':' || *p == ' ' || *p == '\t')
				p++;
			return strtoll(p, NULL, 10);
		}
	}
	return -1;
}

/* The line "key:\t..." of status, value only. */
static inline int t_task_status_str(pid_t tid, const char *key, char *out, size_t len)
{
	char buf[8192], *p;
	size_t klen = strlen(key);

	if (t_task_file(tid, "status", buf, sizeof(buf)))
		return -1;
	for (p = buf; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, key, klen) && p[klen] == ':') {
			p += klen + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			snprintf(out, len, "%.*s", (int)strcspn(p, "\n"), p);
			return 0;
		}
	}
	return -1;
}

/* Field n (1-based, as proc(5) numbers them) of /proc/self/task/TID/stat. */
static inline long long t_task_stat_field(pid_t tid, int n)
{
	char buf[4096], *p;

	if (t_task_file(tid, "stat", buf, sizeof(buf)) || !(p = strrchr(buf, ')')))
		return -1;
	p += 2;                       /* field 3 starts here */
	for (int i = 3; i < n && p; i++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return p ? strtoll(p, NULL, 10) : -1;
}

/* The thread of this process whose name starts with prefix (0: none). */
static inline pid_t t_find_thread(const char *prefix)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	pid_t found = 0;

	while (d && (e = readdir(d))) {
		char comm[64];
		pid_t tid = atoi(e->d_name);
		if (tid > 0 && !t_task_file(tid, "comm", comm, sizeof(comm)) && !strncmp(comm, prefix, strlen(prefix)))
			found = tid;
	}
	if (d)
		closedir(d);
	return found;
}

/* The proxy: the thread of this process named "detach-proxy" (0: none). */
static inline pid_t t_find_proxy(void)
{
	return t_find_thread("detach-proxy");
}

/* The workload's side of t_spawn_workload: it says its pid and its
 * proxy's tid on stdout, then waits for "g" on stdin (the test's tracer is
 * in place).  0, or 41 (not detached) or 42 (no "g"): its exit status. */
static inline int t_workload_ready(void)
{
	pid_t proxy = t_find_proxy();
	char c;

	if (!proxy)
		return 41;
	printf("%d %d\n", (int)getpid(), (int)proxy);
	fflush(stdout);
	if (read(0, &c, 1) != 1 || c != 'g')
		return 42;
	return 0;
}

/* The detached thread's tid as the kernel knows it: the thread of this
 * process allowed on exactly the detached CPU. */
static inline pid_t t_main_tid(void)
{
	return (pid_t)getpid();
}

/* The end of a test that ran detached: in rewrite mode (DETACH_MODE, set
 * by the runner's second pass, passed on as T_MODE by t_reexec_detached
 * since the runtime scrubs DETACH_MODE) the runtime must really have rewritten:
 * sites > 0, and no more traps than sites but at sites it refused.  A
 * runtime that fell back to sud silently fails here. */
static inline int t_detached_done(void)
{
	const char *mode = getenv("T_MODE"), *bin = getenv("DETACH_BIN");
	char cmd[512], line[4096];
	long long sites = -1, refused = 0, traps = -1, trefused = 0;
	bool is_rewrite = false;
	FILE *f;

	if (!mode || strcmp(mode, "rewrite") || !bin)
		return t_done();
	snprintf(cmd, sizeof(cmd), "%s ps --json", bin);
	f = popen(cmd, "r");
	char pidpat[32];
	snprintf(pidpat, sizeof(pidpat), "\"pid\": %d,", getpid());
	bool mine = false;
	while (f && fgets(line, sizeof(line), f)) {
		char *p;
		if (strstr(line, "\"pid\": "))
			mine = strstr(line, pidpat) != NULL;
		if (!mine)
			continue;
		if (strstr(line, "\"mode\": \"rewrite\""))
			is_rewrite = true;
		if ((p = strstr(line, "\"sites_rewritten\": ")))
			sites = atoll(p + 19);
		if ((p = strstr(line, "\"sites_refused\": ")))
			refused = atoll(p + 17);
		if ((p = strstr(line, "\"traps\": ")))
			traps = atoll(p + 9);
		if ((p = strstr(line, "\"traps_refused\": ")))
			trefused = atoll(p + 17);
	}
	if (f)
		pclose(f);
	printf("rewrite mode: %lld sites rewritten, %lld refused, %lld traps (%lld at refused sites)\n",
	       sites, refused, traps, trefused);
	t_check(is_rewrite, "not in rewrite mode");
	t_check(sites > 0, "no site rewritten");
	t_check(traps >= 0 && traps - trefused <= sites + refused, "%lld traps for %lld sites", traps - trefused,
		sites + refused);
	return t_done();
}

/* Forks and execs `detach run -c 1 --stats FILE [extra...] -- self ROLE`,
 * waits; returns the wait status; stats_path receives the file name. */
static inline int t_run_inner(char *self, const char *role, const char *const *extra,
			      char *stats_path, size_t len, bool quiet_stderr)
{
	char *args[64];
	int st;
	pid_t p;

	snprintf(stats_path, len, "/tmp/detach-test-%d-%s.json", getpid(), role);
	t_detach_argv(args, stats_path, extra, self, role);
	p = fork();
	if (p == 0) {
		if (quiet_stderr) {
			int fd = open("/dev/null", O_WRONLY);
			dup2(fd, 2);
		}
		execv(args[0], args);
		_exit(127);
	}
	waitpid(p, &st, 0);
	return st;
}

/* The statistics file at path, NUL-terminated in buf; false if unreadable. */
static inline bool t_stats_read(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return true;
}

/* A wait status as a shell tells it: the exit status, or 128 + the signal
 * that ended the process */
static inline int t_exit_code(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Runs cmd with the shell (system()): t_exit_code of its status */
static inline int t_run_status(const char *cmd)
{
	return t_exit_code(system(cmd));
}

/* Runs cmd with the shell, its stdout read into out (NUL-terminated, cut
 * at len - 1): t_exit_code of its status, -1 if it could not start */
static inline int t_run_output(const char *cmd, char *out, size_t len)
{
	size_t n = 0;
	FILE *p;

	fflush(NULL);
	if (!(p = popen(cmd, "r")))
		return -1;
	while (n + 1 < len && fgets(out + n, (int)(len - n), p))
		n += strlen(out + n);
	out[n] = '\0';
	return t_exit_code(pclose(p));
}

/* Whether a line of strace's output written with `-e signal=SIGTRAP` is an
 * int3 the kernel delivered (SIGTRAP with si_code=SI_KERNEL): a thread that
 * met a staged or guarded site (rewrite.c).  site 0: any such int3; else
 * one met in the 16 bytes from site, by the address strace -i shows (in
 * brackets, after the tid of -f): the one after the int3.  The runtime's
 * proxy runs glibc's sites too (proxy.c: nanosleep) and may meet the int3
 * of one the detached thread is rewriting meanwhile, which is no int3 of
 * the site's. */
static inline bool t_strace_int3_at(const char *line, uintptr_t site)
{
	const char *b;

	if (!strstr(line, "SIGTRAP") || !strstr(line, "si_code=SI_KERNEL"))
		return false;
	if (!site)
		return true;
	b = strchr(line, '[');
	return b && strtoul(b + 1, NULL, 16) - 1 - site < 16;
}

/* The lines t_strace_int3_at counts in an strace output file */
static inline int t_strace_int3s_at(const char *trace, uintptr_t site)
{
	char line[1024];
	int n = 0;
	FILE *f = fopen(trace, "r");

	while (f && fgets(line, sizeof(line), f))
		n += t_strace_int3_at(line, site);
	if (f)
		fclose(f);
	return n;
}

/* Every int3 the kernel delivered in an strace output file */
static inline int t_strace_int3s(const char *trace)
{
	return t_strace_int3s_at(trace, 0);
}

/* The SIGSYS of Syscall User Dispatch (SYS_USER_DISPATCH: a trap of the
 * runtime's) in an strace output file written with `-e signal=SIGSYS`
 * whose line holds match too (NULL: every one), e.g.
 * "si_syscall=__NR_vfork" */
static inline int t_strace_sigsys(const char *trace, const char *match)
{
	char line[1024];
	int n = 0;
	FILE *f = fopen(trace, "r");

	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, "SYS_USER_DISPATCH") && (!match || strstr(line, match));
	if (f)
		fclose(f);
	return n;
}

/* The line of /proc/self/maps that holds a: its name, as the statistics'
 * sites name a mapping (registry.c: an unnamed one "[anon]"), into name,
 * and a's offset in the mapped file into *off (off may be NULL).  False
 * (name "none") if no mapping holds a. */
static inline bool t_map_of(uintptr_t a, char *name, size_t len, unsigned long *off)
{
	char line[512];
	unsigned long lo, hi, o;
	int at;
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	snprintf(name, len, "none");
	while (!found && f && fgets(line, sizeof(line), f)) {
		at = 0;
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &lo, &hi, &o, &at) < 3 || a < lo || a >= hi)
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(name, len, "%s", line[at] ? line + at : "[anon]");
		if (off)
			*off = a - lo + o;
		found = true;
	}
	if (f)
		fclose(f);
	return found;
}

/* A number from the statistics JSON of the first thread: "key": N */
static inline long long t_stats_value(const char *path, const char *key)
{
	char buf[1 << 16], pat[64], *p;

	if (!t_stats_read(path, buf, sizeof(buf)))
		return -1;
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(buf, pat);
	return p ? atoll(p + strlen(pat)) : -1;
}

static inline bool t_stats_has(const char *path, const char *text)
{
	char buf[1 << 16];

	return t_stats_read(path, buf, sizeof(buf)) && strstr(buf, text) != NULL;
}

/* Runs `self inner` detached in the default mode (no --mode) with
 * t_run_inner and checks that it ended with 0 and that the mode was
 * rewrite; stats_path receives its statistics file's name. */
static inline void t_run_inner_rewritten(char *self, char *stats_path, size_t len)
{
	const char *const extra[] = { NULL };
	int st = t_run_inner(self, "inner", extra, stats_path, len, false);

	t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "inner run: status %#x", st);
	t_check(t_stats_has(stats_path, "\"mode\": \"rewrite\""), "the default mode is not rewrite here");
}

/* Lets a thread this test traces (ptrace, seized) go: stops it and
 * detaches, before a hang report (gdb traces every thread) */
static inline void t_untrace(pid_t tid)
{
	int st;

	ptrace(PTRACE_INTERRUPT, tid, NULL, NULL);
	while (waitpid(tid, &st, __WALL) == tid && WIFSTOPPED(st) && ptrace(PTRACE_DETACH, tid, NULL, NULL))
		ptrace(PTRACE_CONT, tid, NULL, NULL);
}

/* A detached program killed by a signal, or one that gave up root, cannot
 * remove its registry file (/dev/shm/detach/PID) and the runner reports it;
 * `detach ps` removes the files of dead programs.  Call after making one. */
static inline void t_reap_registry(void)
{
	const char *bin = getenv("DETACH_BIN");
	char cmd[600];

	if (!bin)
		return;
	snprintf(cmd, sizeof(cmd), "'%s' ps >/dev/null 2>&1", bin);
	if (system(cmd) != 0)
		fprintf(stderr, "%s ps failed\n", bin);
}

/* Runs this test's program again as `self ROLE` (T_ROLE=ROLE in its
 * environment), natively or under `detach run` (T_DETACHED=1), its stdout
 * into out (NULL: ours), killed after limit_s: its exit status, or 128 +
 * the signal that ended it; -1: no /proc/self/exe; -2: it hung (its
 * threads printed, its registry file reaped). */
static inline int t_run_role_to(const char *role, bool detached, int limit_s, FILE *out)
{
	char self[4096], *args[64];
	int st = 0;

	if (!t_self_exe(self, sizeof(self)))
		return -1;
	if (detached)
		t_detach_argv(args, NULL, NULL, self, role);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		if (out)
			dup2(fileno(out), 1);
		setenv("T_ROLE", role, 1);
		if (detached) {
			setenv("T_DETACHED", "1", 1);
			execv(args[0], args);
		} else {
			execl(self, self, role, (char *)NULL);
		}
		_exit(127);
	}
	for (int i = 0; i < limit_s * 100 && waitpid(pid, &st, WNOHANG) == 0; i++)
		usleep(10000);
	if (waitpid(pid, &st, WNOHANG) == 0) {
		fprintf(stderr, "%s %s: still running after %d s\n", role, detached ? "detached" : "natively", limit_s);
		t_print_threads(pid);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		if (detached)
			t_reap_registry();
		return -2;
	}
	return t_exit_code(st);
}

/* t_run_role_to with our stdout */
static inline int t_run_role(const char *role, bool detached, int limit_s)
{
	return t_run_role_to(role, detached, limit_s, NULL);
}

/* t_run_role natively, which must end with native_want, then detached,
 * which must end the same way; each figure printed, each difference a
 * failed check. */
static inline void t_role_same(const char *role, int native_want, int limit_s)
{
	int n = t_run_role(role, false, limit_s), d;

	if (n != native_want) {
		t_check(false, "%s natively: status %d, expected %d", role, n, native_want);
		return;
	}
	d = t_run_role(role, true, limit_s);
	printf("%-16s natively %d, detached %d\n", role, n, d);
	t_check(d == n, "%s detached: status %d, natively %d", role, d, n);
}

#endif
