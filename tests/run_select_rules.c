/* Description: `detach run --select` detaches the threads its rules choose
 * and no others: order:2, name:GLOB and pinned, each checked on the
 * kernel's counters (the chosen thread's own writes do not reach its syscw,
 * it is allowed on CPU 1 only; the other thread's writes do, on CPU 0). */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <sys/prctl.h>

static const char *role;
static pthread_barrier_t done;

struct result { pid_t tid; long long syscw; char cpus[32]; };
static struct result res[2];

static void *worker(void *arg)
{
	long i = (long)arg;
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
		if (i == 0)
			usleep(1000);
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

int main(int argc, char **argv)
{
	static const struct { const char *role, *rule; } cases[] = {
		{ "order", "order:2" }, { "name", "name:worker-b" }, { "pinned", "pinned" },
	};

	if (argc > 1) {
		role = argv[1];
		return inner();
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *extra[] = { "--select", cases[i].rule, NULL };
		char stats[128];
		int st = t_run_inner(argv[0], cases[i].role, extra, stats, sizeof(stats), false);
		t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "--select %s: status %#x", cases[i].rule, st);
		long long fwd = t_stats_value(stats, "forwarded");
		printf("--select %s: %lld calls forwarded\n", cases[i].rule, fwd);
		t_check(fwd >= 100, "--select %s: only %lld forwarded calls", cases[i].rule, fwd);
		unlink(stats);
	}
	return t_done();
}
