/* Description: the channel watcher (the detach-ipc thread) stays out of the
 * detached thread's way, on the kernel's own counters.  Channels opened
 * before dt_detach() started it on any CPU: after the detach it is allowed
 * only on the housekeeping CPUs.  While no Linux thread waits it sleeps:
 * over 300 ms of a detached producer streaming to a Linux consumer that
 * polls (deadline 0) it sleeps and wakes a few dozen times, not the 6,000
 * of a 50 us period.  A Linux thread asleep in dt_chan_get makes it look
 * every 50 us (thousands of sleeps in 100 ms), and a detached put then
 * wakes that thread. */
#include "helpers/t_chan.h"

#include <sched.h>

#define MS 1000000ull

static char name[64];
static struct dt_chan *prod, *cons;
static pid_t main_tid, watcher;
static volatile int detached, stop_streaming, stopped, main_asleep_phase;
static long long busy_sleeps = -1;

static long long watcher_sleeps(void)
{
	return t_task_value(watcher, "status", "voluntary_ctxt_switches");
}

static void *poller(void *arg)
{
	uint64_t v, got = 0;

	(void)arg;
	while (!stop_streaming)
		if (dt_chan_get(cons, &v, sizeof(v), 0) == sizeof(v))
			got++;
	return (void *)(uintptr_t)got;
}

static char task_state(pid_t tid)
{
	char buf[512], *p;

	if (t_task_file(tid, "stat", buf, sizeof(buf)) || !(p = strrchr(buf, ')')))
		return '?';
	return p[2];
}

static void *producer(void *arg)
{
	uint64_t seq = 0, end;
	long long s0;

	(void)arg;
	if (t_detach_self())
		return NULL;
	detached = 1;
	while (!stop_streaming)
		if (dt_chan_put(prod, &seq, sizeof(seq)) == 0)
			seq++;
	stopped = 1;
	/* the Linux side's main thread goes to sleep in dt_chan_get: it is
	 * looked after now (reads of /proc are forwarded: not counted here) */
	while (!main_asleep_phase)
		cpu_relax();
	for (end = dt_now_ns() + 5000 * MS; task_state(main_tid) != 'S' && dt_now_ns() < end;)
		dt_wait_until(dt_now_ns() + MS);
	dt_wait_until(dt_now_ns() + 10 * MS);
	s0 = watcher_sleeps();
	dt_wait_until(dt_now_ns() + 100 * MS);
	busy_sleeps = watcher_sleeps() - s0;
	dt_chan_put(prod, &seq, sizeof(seq));
	dt_attach();
	return NULL;
}

int main(void)
{
	pthread_t p, q;
	cpu_set_t allowed;
	long long s0, s1;
	uint64_t v = 0, got;
	int err;

	t_chan_setup(name, sizeof(name), "t-watcher");
	main_tid = t_gettid();
	dt_chan_unlink(name);
	if ((err = dt_chan_open(name, DT_CHAN_CREATE | DT_CHAN_PRODUCER, 0, &prod)) ||
	    (err = dt_chan_open(name, DT_CHAN_CONSUMER, 0, &cons))) {
		fprintf(stderr, "open: %s\n", strerror(-err));
		return 1;
	}
	watcher = t_find_thread("detach-ipc");
	t_check(watcher > 0, "no detach-ipc thread after an open");
	pthread_create(&q, NULL, poller, NULL);
	pthread_create(&p, NULL, producer, NULL);
	while (!detached)
		usleep(1000);
	usleep(20000);
	t_check(!sched_getaffinity(watcher, sizeof(allowed), &allowed) && !CPU_ISSET(T_DETACHED_CPU, &allowed),
		"the watcher may still run on the detached CPU %d", T_DETACHED_CPU);
	s0 = watcher_sleeps();
	usleep(300000);
	s1 = watcher_sleeps();
	stop_streaming = 1;
	pthread_join(q, (void **)&got);
	printf("300 ms of a detached producer and a polling Linux consumer (%llu messages): the watcher slept %lld times\n",
	       (unsigned long long)got, s1 - s0);
	t_check(got > 0, "the polling consumer got nothing");
	t_check(s0 >= 0 && s1 - s0 < 300, "the watcher kept waking (%lld sleeps) with no Linux waiter", s1 - s0);
	/* drained: the next get sleeps until the producer's last put */
	while (!stopped)
		usleep(1000);
	while (dt_chan_get(cons, &v, sizeof(v), 0) == sizeof(v))
		;
	main_asleep_phase = 1;
	long n = dt_chan_get(cons, &v, sizeof(v), dt_now_ns() + 10000 * MS);
	pthread_join(p, NULL);
	printf("a Linux thread asleep in dt_chan_get: the watcher slept %lld times in 100 ms; the get returned %ld\n",
	       busy_sleeps, n);
	t_check(busy_sleeps > 300, "the watcher did not look after a sleeping Linux waiter (%lld sleeps)", busy_sleeps);
	t_check(n == sizeof(v), "the sleeping get was not woken by the detached put: %ld", n);
	dt_chan_close(cons);
	dt_chan_close(prod);
	dt_chan_unlink(name);
	return t_done();
}
