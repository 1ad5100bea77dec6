/* Helpers for the channel tests (tests/api_chan_*.c): a detached thread
 * started with dt_detach() in a program not run by `detach run`, and the
 * kernel's own counters of a thread, which must stay flat while it uses
 * channels, bells and regions. */
#ifndef DETACH_TESTS_T_CHAN_H
#define DETACH_TESTS_T_CHAN_H

#include "t_detach.h"
#include <detach/detach.h>
#include "lib/ipc.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

/* A message that says whether it arrived whole (the corruption tests):
 * its sequence number, a fill byte from it and a checksum of it. */
#define T_MSG_SIZE 48
struct msg {
	uint64_t seq, sum;
	char fill[T_MSG_SIZE - 16];
};

static inline void msg_make(struct msg *m, uint64_t seq)
{
	m->seq = seq;
	memset(m->fill, (int)(seq & 0xff), sizeof(m->fill));
	m->sum = seq * 0x9e3779b97f4a7c15ull;
}

static inline bool msg_ok(const struct msg *m)
{
	for (size_t i = 0; i < sizeof(m->fill); i++)
		if (m->fill[i] != (char)(m->seq & 0xff))
			return false;
	return m->sum == m->seq * 0x9e3779b97f4a7c15ull;
}

/* What a thread costs the kernel: system calls that read or wrote
 * (io syscr, syscw), sleeps (voluntary switches), kernel time (stat stime). */
struct t_kernel {
	long long syscr, syscw, vol, stime, minflt;
};

static inline void t_kernel_read(pid_t tid, struct t_kernel *k)
{
	k->syscr = t_task_value(tid, "io", "syscr");
	k->syscw = t_task_value(tid, "io", "syscw");
	k->vol = t_task_value(tid, "status", "voluntary_ctxt_switches");
	k->stime = t_task_stat_field(tid, 15);
	k->minflt = t_task_stat_field(tid, 10);
}

/* Checks that nothing moved between a and b, ns apart; what names the
 * interval.  Kernel time only up to noise, as tests/rewrite_calls.c:
 * interrupts taken on a CPU that is not isolated (here the disk's) are
 * charged to whoever runs there; a call per message would cost about half
 * of the time. */
static inline void t_kernel_flat(const char *what, const struct t_kernel *a, const struct t_kernel *b, uint64_t ns)
{
	long long ticks = (long long)(ns * (uint64_t)sysconf(_SC_CLK_TCK) / 1000000000ull);

	printf("%s: syscr +%lld, syscw +%lld, voluntary switches +%lld, stime +%lld of %lld ticks, minor faults +%lld\n",
	       what, b->syscr - a->syscr, b->syscw - a->syscw, b->vol - a->vol, b->stime - a->stime, ticks,
	       b->minflt - a->minflt);
	t_check(a->syscr >= 0 && b->syscr == a->syscr, "%s: the detached thread read through the kernel", what);
	t_check(b->syscw == a->syscw, "%s: the detached thread wrote through the kernel", what);
	t_check(b->vol == a->vol, "%s: the detached thread slept in the kernel", what);
	t_check((b->stime - a->stime) * 10 <= ticks + 20, "%s: the detached thread spent time in the kernel", what);
}

static inline pid_t t_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Skips where a detached thread cannot be had; a unique name per test run. */
static inline void t_chan_setup(char *name, size_t len, const char *base)
{
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		t_skip("needs 2 CPUs");
	if (getenv("DETACH_PID"))
		t_skip("runs without detach run");
	snprintf(name, len, "%s-%d", base, (int)getpid());
}

/* The two channels of a test of both directions, down (detached ->
 * Linux) and up (Linux -> detached), named BASE-down-PID and BASE-up-PID
 * (t_chan_setup's skips first): what a run before left is removed, both
 * are created (64 KiB rings) and their roles let go; a shared region of
 * size bytes for the test's processes, named as down, is created at
 * *region (checked). */
static inline void t_chan_pair(char *down, char *up, size_t len, const char *base, size_t size, void **region)
{
	struct dt_chan *keep_down, *keep_up;
	char name[64];

	snprintf(name, sizeof(name), "%s-down", base);
	t_chan_setup(down, len, name);
	snprintf(up, len, "%s-up-%d", base, (int)getpid());
	dt_chan_unlink(down);
	dt_chan_unlink(up);
	dt_shm_unlink(down);
	t_check(dt_chan_open(down, DT_CHAN_CREATE | DT_CHAN_CONSUMER, 65536, &keep_down) == 0, "create");
	t_check(dt_chan_open(up, DT_CHAN_CREATE | DT_CHAN_PRODUCER, 65536, &keep_up) == 0, "create");
	dt_chan_close(keep_down);
	dt_chan_close(keep_up);
	t_check(dt_shm_open(down, DT_CHAN_CREATE, size, region) == 0, "region");
}

/* Removes t_chan_pair's channels and its region (mapped at region) */
static inline void t_chan_pair_remove(const char *down, const char *up, void *region)
{
	dt_chan_unlink(down);
	dt_chan_unlink(up);
	dt_shm_close(region);
	dt_shm_unlink(down);
}

/* Runs fn on a new thread detached on T_DETACHED_CPU; returns when it ends. */
static inline void t_run_detached(void *(*fn)(void *), void *arg)
{
	pthread_t th;

	pthread_create(&th, NULL, fn, arg);
	pthread_join(th, NULL);
}

/* Detaches the calling thread.  The first reads of its counters after
 * dt_detach() still add 2 to its own syscr (seen in sud and rewrite mode,
 * a runtime matter): one warm-up read, so that intervals measured later
 * show the channel's cost only. */
static inline int t_detach_self(void)
{
	struct t_kernel warm;
	int err = dt_detach(T_DETACHED_CPU);

	t_check(err == 0, "dt_detach: %s", strerror(-err));
	if (!err)
		t_kernel_read(t_gettid(), &warm);
	return err;
}

/* Exit status of a child, or -1 if a signal ended it. */
static inline int t_wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
