/* Description: the runtime's messages (-v) never go through stdio, whose
 * lock the program may hold: a thread chosen by `--select name:` is
 * detached at its prctl, inside the trap, and the runtime reports it while
 * the first thread holds stderr's lock and waits for it.  Through stdio the
 * report would wait for the lock forever.  Detached from inside the trap,
 * on the runtime's own stack, its own stack is still locked (the kernel's
 * VmLck; it once tried to lock from the runtime's stack up, across a guard
 * page, and failed). */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

static void *chosen(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "chosen");   /* the rule chooses it here: the runtime says so */
	return NULL;
}

static int inner(void)
{
	pthread_t th;
	struct timespec until;
	int err;

	flockfile(stderr);
	pthread_create(&th, NULL, chosen, NULL);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	err = pthread_timedjoin_np(th, NULL, &until);
	funlockfile(stderr);
	if (err) {
		fprintf(stderr, "the chosen thread did not finish in 10 s: %s\n", strerror(err));
		_exit(1);
	}
	char status[4096] = "";
	int fd = open("/proc/self/status", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, status, sizeof(status) - 1) : -1;
	status[n > 0 ? n : 0] = '\0';
	char *lck = strstr(status, "VmLck:");
	printf("%.*s\n", lck ? (int)strcspn(lck, "\n") : 0, lck ? lck : "");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "inner"))
		return inner();
	const char *extra[] = { "-v", "--select", "name:chosen", NULL };
	char *args[64], log[8192] = "";
	int fd[2], st = 0;
	long locked_kb = -1;

	t_detach_argv(args, NULL, extra, argv[0], "inner");
	if (pipe(fd))
		return 1;
	pid_t p = fork();
	if (p == 0) {
		dup2(fd[1], 1);
		dup2(fd[1], 2);
		close(fd[0]);
		execv(args[0], args);
		_exit(127);
	}
	close(fd[1]);
	size_t got = 0;
	ssize_t r;
	while (got < sizeof(log) - 1 && (r = read(fd[0], log + got, sizeof(log) - 1 - got)) > 0)
		got += (size_t)r;
	log[got] = '\0';
	waitpid(p, &st, 0);
	printf("%s", log);
	t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "detached run ended with status %#x", st);
	t_check(strstr(log, "detached on CPU 1") != NULL, "no report of the chosen thread's detaching");
	t_check(!strstr(log, "cannot lock"), "the runtime could not lock memory");
	if (strstr(log, "VmLck:"))
		locked_kb = strtol(strstr(log, "VmLck:") + 6, NULL, 10);
	t_check(locked_kb >= 256, "VmLck %ld kB: the chosen thread's stack (256 kB of it at least) is not locked", locked_kb);
	return t_done();
}
