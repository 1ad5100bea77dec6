/* Description: a debugger's backtrace of a thread blocked in a system call
 * walks on to the program's frames under detach, as it does natively: gdb
 * attached to a program (detach run --select first) whose detached thread
 * waits in a forwarded read (sud mode: from the SIGSYS handler, through
 * the runtime's restorer's signal-frame CFI; rewrite mode: from the
 * trampoline, whose CFI skips the stub to the site's function) and whose
 * other thread, not detached, blocks in read at the same rewritten site
 * (dt_native_syscall) sees blocked_reader and main, and other_reader, in
 * their backtraces.  Checked natively first.
 * Timeout: 120 */
#include "helpers/t_detach.h"

#include <pthread.h>

static int wake[2];

__attribute__((noinline)) void blocked_reader(int fd)
{
	char c;

	t_check(read(fd, &c, 1) == 1, "read: %s", strerror(errno));
	__asm__ volatile("" ::: "memory");      /* not a tail call */
}

__attribute__((noinline)) void other_reader(int fd)
{
	char c;

	t_check(read(fd, &c, 1) == 1, "read: %s", strerror(errno));
	__asm__ volatile("" ::: "memory");
}

static void *other(void *arg)
{
	(void)arg;
	other_reader(wake[0]);
	return NULL;
}

/* Blocks in read on stdin (the test's pipe) after a first read through the
 * same site (rewrite mode: the site is rewritten by then) */
static int target(void)
{
	int first[2];
	pthread_t th;

	t_check(pipe(first) == 0 && pipe(wake) == 0 && write(first[1], "x", 1) == 1, "pipe");
	blocked_reader(first[0]);
	t_check(pthread_create(&th, NULL, other, NULL) == 0, "pthread_create");
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	blocked_reader(0);
	t_check(write(wake[1], "x", 1) == 1, "write");
	pthread_join(th, NULL);
	return t_done();
}

/* Starts `prefix self target`, attaches gdb once both threads block, and
 * checks their backtraces; then lets the target end. */
static void check(const char *self, const char *prefix, const char *label)
{
	char cmd[4400], line[1024], out[1 << 16];
	size_t len = 0;
	int in[2], outp[2], pid = 0;

	t_check(pipe(in) == 0 && pipe(outp) == 0, "pipe");
	fflush(NULL);
	pid_t child = fork();
	if (child == 0) {
		dup2(in[0], 0);
		dup2(outp[1], 1);
		close(in[1]);
		close(outp[0]);
		snprintf(cmd, sizeof(cmd), "exec %s %s target", prefix, self);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(outp[1]);
	FILE *f = fdopen(outp[0], "r");
	if (f && fgets(line, sizeof(line), f))
		sscanf(line, "ready %d", &pid);
	t_check(pid > 0, "%s: the target did not start", label);
	if (pid > 0) {
		usleep(300000);         /* both threads in their reads */
		snprintf(cmd, sizeof(cmd),
			 "gdb -nx -batch -ex 'set pagination off' -ex 'thread apply all bt' -p %d 2>&1 </dev/null",
			 pid);
		FILE *g = popen(cmd, "r");
		while (g && fgets(line, sizeof(line), g)) {
			if (line[0] != '#' && strncmp(line, "Thread", 6))
				continue;
			printf("  %s| %s", label, line);
			size_t n = strlen(line);
			if (len + n < sizeof(out)) {
				memcpy(out + len, line, n);
				len += n;
			}
		}
		if (g)
			pclose(g);
		out[len] = '\0';
		t_check(strstr(out, " blocked_reader (") && strstr(out, " main ("),
			"%s: the blocked thread's backtrace does not reach blocked_reader and main", label);
		t_check(strstr(out, " other_reader ("), "%s: the other thread's backtrace does not reach other_reader",
			label);
	}
	t_check(write(in[1], "x", 1) == 1, "write");
	close(in[1]);
	int st;
	waitpid(child, &st, 0);
	t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the target ended with status %#x", label, st);
	if (f)
		fclose(f);
}

int main(int argc, char **argv)
{
	char self[4096], prefix[4200];
	ssize_t n;

	if (argc > 1 && !strcmp(argv[1], "target"))
		return target();
	if (system("gdb --version >/dev/null 2>&1") != 0)
		t_skip("gdb is not installed (tools/install-deps.sh)");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = '\0';
	check(self, "", "native");
	if (t_failures)
		return t_done();
	if (!getenv("DETACH_BIN"))
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	snprintf(prefix, sizeof(prefix), "%s run -c 1 --select first --", getenv("DETACH_BIN"));
	check(self, prefix, getenv("DETACH_MODE") && *getenv("DETACH_MODE") ? getenv("DETACH_MODE") : "default");
	return t_done();
}
