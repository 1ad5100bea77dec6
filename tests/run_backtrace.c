/* Description: a debugger's backtrace of a thread blocked in a system call
 * walks on to the program's frames under detach, as it does natively: gdb
 * attached to a program (detach run --select first) whose detached thread
 * waits in a forwarded read (sud mode: from the SIGSYS handler, through
 * the runtime's restorer's signal-frame CFI; rewrite mode: from the
 * trampoline, whose CFI skips the stub to the site's function) and whose
 * other thread, not detached, blocks in read at the same rewritten site
 * (dt_native_syscall) sees blocked_reader and main, and other_reader, in
 * their backtraces; glibc's backtrace() (libgcc's unwinder) in a handler
 * that interrupts the blocked read reaches blocked_reader.  Checked
 * natively first.
 * Timeout: 120 */
#include "helpers/t_detach.h"

#include <execinfo.h>
#include <pthread.h>
#include <signal.h>

static int wake[2];
static volatile int bt_frames, bt_reader;
static void *volatile reader_ret;      /* do_read's return address, in blocked_reader */

__attribute__((noinline)) static ssize_t do_read(int fd, char *c)
{
	reader_ret = __builtin_return_address(0);
	return read(fd, c, 1);
}

/* libgcc's unwinder (glibc's backtrace) from a handler that interrupts
 * the blocked read: does it reach blocked_reader through the runtime's
 * frames and its signal frame? */
static void on_alarm(int sig)
{
	void *b[64];
	int n = backtrace(b, 64);

	(void)sig;
	bt_frames = n;
	for (int i = 0; i < n; i++)
		if (b[i] == reader_ret)
			bt_reader = 1;
}

__attribute__((noinline)) void blocked_reader(int fd)
{
	char c;

	t_check(do_read(fd, &c) == 1, "read: %s", strerror(errno));
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
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	t_check(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
	alarm(1);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	blocked_reader(0);
	t_check(bt_reader, "backtrace() in a handler on the blocked read: %d frames, none in blocked_reader",
		bt_frames);
	t_check(write(wake[1], "x", 1) == 1, "write");
	pthread_join(th, NULL);
	return t_done();
}

/* Starts args (ending in `self target`), attaches gdb once both threads
 * block, and checks their backtraces; then lets the target end. */
static void check(char **args, const char *label)
{
	char cmd[4400], line[1024], out[1 << 16];
	size_t len = 0;
	int in[2], outp[2], pid = 0;

	pid_t child = t_spawn_piped(args, in, outp, NULL);
	t_check(child > 0, "%s: pipe or fork: %s", label, strerror(errno));
	FILE *f = child > 0 ? fdopen(outp[0], "r") : NULL;
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
	usleep(1500000);                /* the target's alarm has come */
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
	char self[4096];

	if (argc > 1 && !strcmp(argv[1], "target"))
		return target();
	t_need_gdb();
	if (!t_self_exe(self, sizeof(self)))
		return 1;
	char *native[] = { self, "target", NULL };
	check(native, "native");
	if (t_failures)
		return t_done();
	if (!getenv("DETACH_BIN"))
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	char *detached[] = { getenv("DETACH_BIN"), "run", "-c", "1", "--select", "first", "--", self, "target", NULL };
	check(detached, getenv("DETACH_MODE") && *getenv("DETACH_MODE") ? getenv("DETACH_MODE") : "default");
	return t_done();
}
