/* Description: `detach run --select` detaches the threads its rules choose
 * and no others: order:2, name:GLOB and pinned, each checked on the
 * kernel's counters (the chosen thread's own writes do not reach its syscw,
 * it is allowed on CPU 1 only; the other thread's writes do, on CPU 0).
 * fork: the thread of a forked child is the detached one (its sleeps make
 * no voluntary switch either, its statistics are its own), not the first
 * thread, nor the child's own child. */
#include "helpers/t_detach.h"

#include <glob.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <time.h>

static const char *role;
static pthread_barrier_t done;

struct result { pid_t tid; long long syscw; char cpus[32]; };
static struct result res[2];
static volatile int started;      /* thread a runs: the runtime has counted it */

static void *worker(void *arg)
{
	long i = (long)arg;

	__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
	char name[16];

	snprintf(name, sizeof(name), "worker-%c", 'a' + (int)i);
	if (!strcmp(role, "name"))
		prctl(PR_SET_NAME, name);
	if (!strcmp(role, "pinned")) {
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(i == 1 ? 1 : 0, &one);
		pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
	}
	/* give the chooser its next call: the thread is detached from here on */
	pid_t tid = (pid_t)syscall(SYS_gettid);
	long long w0 = t_task_value(tid, "io", "syscw");
	int fd = open("/dev/null", O_WRONLY);
	for (int k = 0; k < 100; k++)
		if (write(fd, "x", 1) != 1)
			break;
	close(fd);
	res[i].tid = tid;
	res[i].syscw = t_task_value(tid, "io", "syscw") - w0;
	t_task_status_str(tid, "Cpus_allowed_list", res[i].cpus, sizeof(res[i].cpus));
	pthread_barrier_wait(&done);
	return NULL;
}

static int inner(void)
{
	pthread_t th[2];

	pthread_barrier_init(&done, NULL, 2);
	/* one after the other: creation order 1 and 2 */
	for (long i = 0; i < 2; i++) {
		pthread_create(&th[i], NULL, worker, (void *)i);
		/* the runtime numbers a thread when it starts (select.c):
		 * thread b only once thread a runs, however slow its start */
		while (i == 0 && !__atomic_load_n(&started, __ATOMIC_ACQUIRE))
			usleep(100);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	char main_cpus[32];
	t_task_status_str(getpid(), "Cpus_allowed_list", main_cpus, sizeof(main_cpus));
	for (int i = 0; i < 2; i++)
		printf("%s: thread %c (tid %d): its 100 writes added %lld to its syscw, CPUs %s\n", role, 'a' + i,
		       res[i].tid, res[i].syscw, res[i].cpus);
	printf("%s: main thread CPUs %s\n", role, main_cpus);
	/* thread b is chosen, thread a and main are not */
	t_check(res[1].syscw == 0 && !strcmp(res[1].cpus, "1"), "%s: thread b is not detached", role);
	t_check(res[0].syscw >= 100 && strcmp(res[0].cpus, "1"), "%s: thread a is detached", role);
	t_check(strcmp(main_cpus, "1") != 0, "%s: the main thread is on the detached CPU", role);
	return t_done();
}

/* What the kernel counts for the calling process's thread over 100 writes
 * to /dev/null and 10 sleeps of 1 ms (natively each sleep is a voluntary
 * switch; a detached thread's sleep is a wait in user space). */
struct proc_result { pid_t pid; long long syscw, vol; char cpus[32], affinity[32]; };

static void measure(struct proc_result *r)
{
	pid_t tid = (pid_t)syscall(SYS_gettid);
	cpu_set_t seen;
	long long w0 = t_task_value(tid, "io", "syscw");
	long long v0 = t_task_value(tid, "status", "voluntary_ctxt_switches");
	int fd = open("/dev/null", O_WRONLY);

	for (int k = 0; k < 100; k++)
		if (write(fd, "x", 1) != 1)
			break;
	close(fd);
	for (int k = 0; k < 10; k++)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	r->pid = getpid();
	r->syscw = t_task_value(tid, "io", "syscw") - w0;
	r->vol = t_task_value(tid, "status", "voluntary_ctxt_switches") - v0;
	t_task_status_str(tid, "Cpus_allowed_list", r->cpus, sizeof(r->cpus));
	CPU_ZERO(&seen);
	sched_getaffinity(0, sizeof(seen), &seen);
	cpulist_format(&seen, r->affinity, sizeof(r->affinity));
}

static void report(int fd, struct proc_result *r)
{
	measure(r);
	if (write(fd, r, sizeof(*r)) != sizeof(*r))
		_exit(3);
}

static int inner_fork(void)
{
	struct proc_result r[3] = { 0 };        /* first thread, child, grandchild */
	const char *who[3] = { "first thread", "forked child", "its child" };
	int p[2];
	pid_t child;

	if (pipe(p))
		return 1;
	fflush(stdout);
	if ((child = fork()) == 0) {
		report(p[1], &r[1]);
		pid_t g = fork();
		if (g == 0) {
			report(p[1], &r[2]);
			_exit(0);
		}
		_exit(g > 0 && waitpid(g, NULL, 0) == g ? 0 : 2);
	}
	int st = -1;
	t_check(child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"fork: the child ended with wait status %#x", st);
	for (int i = 1; i < 3; i++)
		t_check(read(p[0], &r[i], sizeof(r[i])) == sizeof(r[i]), "fork: no report of the %s", who[i]);
	measure(&r[0]);
	for (int i = 0; i < 3; i++)
		printf("fork: %s (pid %d): 100 writes added %lld to its syscw, 10 sleeps %lld voluntary switches, "
		       "CPUs %s, sched_getaffinity %s\n", who[i], r[i].pid, r[i].syscw, r[i].vol, r[i].cpus,
		       r[i].affinity);
	/* the forked child is the detached one: forwarded writes, sleeps in
	 * user space, on CPU 1 alone, seeing the CPUs it inherited */
	t_check(r[1].syscw == 0 && r[1].vol == 0 && !strcmp(r[1].cpus, "1"), "fork: the forked child is not detached");
	t_check(!strcmp(r[1].affinity, r[0].affinity), "fork: the child sees CPUs %s, its parent has %s",
		r[1].affinity, r[0].affinity);
	for (int i = 0; i < 3; i += 2)
		t_check(r[i].syscw >= 100 && r[i].vol >= 10 && strcmp(r[i].cpus, "1"), "fork: the %s is detached",
			who[i]);
	return t_done();
}

/* --select fork: the statistics of the forked child, in STATS.PID */
static void check_fork_stats(const char *stats)
{
	char pat[160];
	glob_t g;

	snprintf(pat, sizeof(pat), "%s.*", stats);
	t_check(glob(pat, 0, NULL, &g) == 0 && g.gl_pathc == 1, "--select fork: not one file %s", pat);
	if (g.gl_pathc == 1) {
		const char *dot = strrchr(g.gl_pathv[0], '.');
		long long fwd = t_stats_value(g.gl_pathv[0], "forwarded");
		printf("--select fork: %s: pid %lld, %lld calls forwarded\n", g.gl_pathv[0],
		       t_stats_value(g.gl_pathv[0], "pid"), fwd);
		t_check(t_stats_value(g.gl_pathv[0], "pid") == atoll(dot + 1), "--select fork: another pid in %s",
			g.gl_pathv[0]);
		t_check(fwd >= 100, "--select fork: only %lld forwarded calls", fwd);
		unlink(g.gl_pathv[0]);
	}
	t_check(!t_stats_has(stats, "\"tid\""), "--select fork: the first thread has statistics of a detached one");
	globfree(&g);
}

int main(int argc, char **argv)
{
	static const struct { const char *role, *rule; } cases[] = {
		{ "order", "order:2" }, { "name", "name:worker-b" }, { "pinned", "pinned" }, { "fork", "fork" },
	};

	if (argc > 1) {
		role = argv[1];
		return !strcmp(role, "fork") ? inner_fork() : inner();
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *extra[] = { "--select", cases[i].rule, NULL };
		char stats[128];
		int st = t_run_inner(argv[0], cases[i].role, extra, stats, sizeof(stats), false);
		t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "--select %s: status %#x", cases[i].rule, st);
		if (!strcmp(cases[i].role, "fork")) {
			check_fork_stats(stats);
			unlink(stats);
			continue;
		}
		long long fwd = t_stats_value(stats, "forwarded");
		printf("--select %s: %lld calls forwarded\n", cases[i].rule, fwd);
		t_check(fwd >= 100, "--select %s: only %lld forwarded calls", cases[i].rule, fwd);
		unlink(stats);
	}
	return t_done();
}
