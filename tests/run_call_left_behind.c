/* Description: what a handler leaves behind around a forwarded call does
 * not outlive it.  Each case runs as its own program, natively and then
 * under `detach run`, within a time limit, and must end the same way:
 *  - longjmp-unshare: a SIGALRM handler siglongjmps out of a blocking pipe
 *    read; the next call, unshare(CLONE_NEWUTS) (with a user namespace when
 *    not root), must take effect for every call after it: every task of the
 *    process is in the thread's new UTS namespace (/proc/self/task/N/ns/uts;
 *    the call once ran on the thread alone, and the proxy, which makes the
 *    later calls, stayed in the old one);
 *  - exit-in-handler: a SIGALRM handler calls exit(2) (the thread's exit,
 *    as the last thread) on top of a blocking pipe read: exit status 7
 *    (it hung: the runtime's last commands to the proxy queued behind the
 *    read);
 *  - renew-storm: unshare(CLONE_FS) again and again (a new proxy each
 *    time) while a 50 us SIGALRM handler calls getppid: every getppid
 *    right, and the program ends (one made while no proxy was there waited
 *    for ever).
 * Timeout: 120 */
#include "helpers/t_detach.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/time.h>

#define LIMIT_S 20
#define RENEWALS 500

static sigjmp_buf back;
static volatile long ppid_bad, ppid_calls;
static pid_t parent;

static void jump_back(int s)
{
	(void)s;
	siglongjmp(back, 1);
}

static void exit_now(int s)
{
	(void)s;
	syscall(SYS_exit, 7);
}

static void ask_ppid(int s)
{
	(void)s;
	if (syscall(SYS_getppid) != parent)
		ppid_bad++;
	ppid_calls++;
}

/* a read of a pipe nobody writes, interrupted by SIGALRM after 50 ms */
static void blocking_read(void (*handler)(int))
{
	struct sigaction sa = { .sa_handler = handler };
	int p[2];
	char c;

	if (pipe(p))
		exit(20);
	sigaction(SIGALRM, &sa, NULL);
	ualarm(50000, 0);
	if (read(p[0], &c, 1) >= 0)
		exit(21);
}

/* the read left by siglongjmp */
static void read_left(void)
{
	if (!sigsetjmp(back, 1))
		blocking_read(jump_back);
}

static int longjmp_unshare(void)
{
	char mine[128] = "", other[128], path[64];
	struct dirent *e;
	DIR *d;
	int flags = CLONE_NEWUTS | (geteuid() ? CLONE_NEWUSER : 0), differ = 0;

	read_left();
	if (unshare(flags)) {
		printf("unshare: %s\n", strerror(errno));
		return 30;
	}
	snprintf(path, sizeof(path), "/proc/self/task/%ld/ns/uts", (long)syscall(SYS_gettid));
	if (readlink(path, mine, sizeof(mine) - 1) < 0 || !(d = opendir("/proc/self/task")))
		return 31;
	while ((e = readdir(d))) {
		ssize_t n;
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/ns/uts", e->d_name);
		if ((n = readlink(path, other, sizeof(other) - 1)) < 0)
			continue;
		other[n] = '\0';
		if (strcmp(mine, other)) {
			fprintf(stderr, "task %s in %s, the thread in %s\n", e->d_name, other, mine);
			differ++;
		}
	}
	closedir(d);
	printf("tasks in another UTS namespace than the thread's: %d\n", differ);
	return differ ? 32 : 0;
}

static int renew_storm(void)
{
	struct sigaction sa = { .sa_handler = ask_ppid, .sa_flags = SA_RESTART };
	struct itimerval on = { { 0, 50 }, { 0, 50 } }, off = { { 0, 0 }, { 0, 0 } };

	parent = getppid();
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &on, NULL);
	for (int i = 0; i < RENEWALS; i++)
		if (unshare(CLONE_FS))
			return 40;
	setitimer(ITIMER_REAL, &off, NULL);
	printf("%d renewals, wrong getppid in handlers: %ld (of %ld)\n", RENEWALS, ppid_bad, ppid_calls);
	return ppid_bad ? 41 : 0;
}

static int role(const char *r)
{
	if (getenv("T_DETACHED") && !t_find_proxy())
		return 10;                      /* under detach run, but not detached */
	if (!strcmp(r, "longjmp-unshare"))
		return longjmp_unshare();
	if (!strcmp(r, "exit-in-handler")) {
		blocking_read(exit_now);
		return 22;
	}
	if (!strcmp(r, "renew-storm"))
		return renew_storm();
	return 11;
}

int main(int argc, char **argv)
{
	static const char *const roles[] = { "longjmp-unshare", "exit-in-handler", "renew-storm" };
	static const int native_status[] = { 0, 7, 0 };

	if (argc == 2)
		return role(argv[1]);
	if (!getenv("DETACH_BIN"))
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		t_role_same(roles[i], native_status[i], LIMIT_S);
	return t_done();
}
