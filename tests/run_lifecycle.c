/* Description: fork, vfork, posix_spawn, system() and pthread_create from a
 * detached thread at SCHED_FIFO, with RT throttling on and off: children and
 * threads start as SCHED_OTHER on the housekeeping CPUs and all complete. */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

/* A child's own view: policy and affinity (0 = as required). */
static int self_check(void)
{
	cpu_set_t set;
	int bad = 0;

	if (sched_getscheduler(0) != SCHED_OTHER)
		bad |= 1;
	if (sched_getaffinity(0, sizeof(set), &set) || CPU_ISSET(T_DETACHED_CPU, &set))
		bad |= 2;
	return bad;
}

static void *thread_main(void *arg)
{
	*(int *)arg = self_check();
	return NULL;
}

static int wait_status(pid_t p)
{
	int st;
	if (waitpid(p, &st, 0) != p)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void run_all(const char *label)
{
	pid_t p;
	int r;

	p = fork();
	if (p == 0)
		_exit(self_check());
	r = wait_status(p);
	t_check(r == 0, "%s: fork child: %d", label, r);

	p = vfork();
	if (p == 0)
		_exit(self_check());
	r = wait_status(p);
	t_check(r == 0, "%s: vfork child: %d", label, r);

	/* the child checks itself with the shell and chrt */
	char *argv[] = { "sh", "-c",
		"chrt -p $$ | grep -q SCHED_OTHER && ! grep Cpus_allowed_list /proc/$$/status | grep -qw 1", NULL };
	t_check(posix_spawnp(&p, "sh", NULL, NULL, argv, environ) == 0, "%s: posix_spawn", label);
	r = wait_status(p);
	t_check(r == 0, "%s: posix_spawn child: %d", label, r);

	r = system("chrt -p $$ | grep -q SCHED_OTHER && ! grep Cpus_allowed_list /proc/$$/status | grep -qw 1");
	t_check(WIFEXITED(r) && WEXITSTATUS(r) == 0, "%s: system(): %#x", label, r);

	pthread_t th;
	int tr = -1;
	t_check(pthread_create(&th, NULL, thread_main, &tr) == 0, "%s: pthread_create", label);
	pthread_join(th, NULL);
	t_check(tr == 0, "%s: thread: %d", label, tr);
	printf("%s: fork, vfork, posix_spawn, system, pthread_create checked\n", label);
}

int main(int argc, char **argv)
{
	static const char *const fifo[] = { "-P", "f:10", NULL };
	const char *knob = "/proc/sys/kernel/sched_rt_runtime_us";

	if (!getenv("T_DETACHED")) {
		char saved[32];
		if (geteuid() != 0)
			t_skip("needs root (SCHED_FIFO, RT throttling)");
		if (read_text_file(knob, saved, sizeof(saved)))
			t_skip("no %s", knob);
		int fails = 0;
		for (int off = 0; off < 2; off++) {
			if (write_text_file(knob, off ? "-1" : "950000"))
				t_skip("cannot write %s", knob);
			pid_t p = fork();
			if (p == 0) {
				setenv("T_THROTTLING", off ? "off" : "on", 1);
				t_reexec_detached(argc, argv, fifo);
			}
			int r = wait_status(p);
			printf("throttling %s: exit %d\n", off ? "off" : "on", r);
			fails += r != 0;
		}
		write_text_file(knob, saved);   /* as it was */
		return fails ? 1 : 0;
	}
	t_check(t_find_proxy() > 0, "not detached");
	/* -P f:N is the kernel's policy for the thread; the program sees its own */
	t_check(t_task_stat_field(getpid(), 41) == SCHED_FIFO, "detached thread is not SCHED_FIFO");
	t_check(sched_getscheduler(0) == SCHED_OTHER, "the program sees policy %d", sched_getscheduler(0));
	run_all(getenv("T_THROTTLING"));
	return t_detached_done();
}
