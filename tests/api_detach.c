/* Description: the API linked into a program that was not started by
 * `detach run`: dt_detach() on a second thread while the first stays an
 * ordinary thread, then dt_attach(); checked on the kernel's counters (the
 * detached thread's writes leave its syscw alone, it runs on its CPU only,
 * a proxy thread exists while it is detached and is gone after). */
#include "helpers/t_detach.h"
#include <detach/detach.h>

#include <pthread.h>

static int writes(int n)
{
	int fd = open("/dev/null", O_WRONLY), ok = 0;
	for (int i = 0; i < n; i++)
		ok += write(fd, "x", 1) == 1;
	close(fd);
	return ok;
}

static void *second(void *arg)
{
	pid_t me = (pid_t)syscall(SYS_gettid);
	char cpus[32];
	struct dt_stats st;
	int err;

	(void)arg;
	t_check((err = dt_detach(T_DETACHED_CPU)) == 0, "dt_detach: %s", strerror(-err));
	t_check(dt_is_detached() == 1, "dt_is_detached() after dt_detach");
	t_check(dt_detach(T_DETACHED_CPU) == -EBUSY, "a second dt_detach is not refused");
	long long w0 = t_task_value(me, "io", "syscw");
	writes(1000);
	long long w1 = t_task_value(me, "io", "syscw");
	t_task_status_str(me, "Cpus_allowed_list", cpus, sizeof(cpus));
	printf("detached: 1000 writes added %lld to syscw; CPUs %s; proxy tid %d\n", w1 - w0, cpus, t_find_proxy());
	t_check(w1 == w0, "writes of the detached thread reached its syscw (+%lld)", w1 - w0);
	t_check(!strcmp(cpus, "1"), "detached thread on CPUs %s", cpus);
	t_check(t_find_proxy() > 0, "no proxy thread while detached");
	t_check(dt_stats(&st) == 0 && st.forwarded >= 1000 && st.cpu == 1, "dt_stats: %llu forwarded, cpu %d",
		(unsigned long long)st.forwarded, st.cpu);
	uint64_t t0 = dt_now_ns(), deadline = t0 + 2000000;
	t_check(dt_wait_until(deadline) == 0 && dt_now_ns() >= deadline, "dt_wait_until woke early");

	t_check((err = dt_attach()) == 0, "dt_attach: %s", strerror(-err));
	t_check(dt_is_detached() == 0, "dt_is_detached() after dt_attach");
	w0 = t_task_value(me, "io", "syscw");
	writes(100);
	w1 = t_task_value(me, "io", "syscw");
	t_task_status_str(me, "Cpus_allowed_list", cpus, sizeof(cpus));
	struct timespec ts = { 0, 20000000 };
	nanosleep(&ts, NULL);                    /* let the proxy finish leaving */
	printf("attached again: 100 writes added %lld to syscw; CPUs %s; proxy tid %d\n", w1 - w0, cpus, t_find_proxy());
	t_check(w1 - w0 >= 100, "writes after dt_attach were not the thread's own (+%lld)", w1 - w0);
	t_check(strcmp(cpus, "1") != 0, "still on the detached CPU after dt_attach: %s", cpus);
	t_check(t_find_proxy() == 0, "the proxy outlived dt_attach");
	t_check(dt_attach() == -EINVAL, "dt_attach of an ordinary thread is not refused");
	return NULL;
}

int main(void)
{
	pthread_t th;
	char before[32], after[32];

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		t_skip("needs 2 CPUs");
	if (getenv("DETACH_PID"))
		t_skip("runs without detach run");
	t_task_status_str(getpid(), "Cpus_allowed_list", before, sizeof(before));
	pthread_create(&th, NULL, second, NULL);
	pthread_join(th, NULL);
	t_task_status_str(getpid(), "Cpus_allowed_list", after, sizeof(after));
	t_check(dt_is_detached() == 0, "the first thread is detached");
	t_check(!strcmp(before, after), "the first thread's CPUs changed: %s -> %s", before, after);
	return t_done();
}
