/* Description: a detached thread that busy-polls a pipe with timeout 0
 * (poll, epoll_wait, epoll_pwait) while an undetached thread writes a byte
 * every 50 ms sees every byte (how late is printed, not judged: a CPU 0
 * busy with other work at the proxy's weight delayed a byte by up to 36 ms
 * with a spinning proxy, 10 ms with a sleeping one), and its proxy
 * sleeps in the kernel meanwhile (src/runtime/waits.c, fd_wait: a
 * zero-timeout wait back to back is forwarded as a bounded blocking one).
 * Kernel evidence: the proxy's utime + stime (/proc/self/task/TID/stat)
 * over each second of polling stays under 20% of it; forwarded one by one
 * the polls kept it busy about the whole second.  Run with each proxy: an
 * adaptive proxy (one housekeeping CPU, shared) and a sleeping one (--proxy
 * sleep, a CPU shared with other work) get the bounded waits; a spinning one (--proxy spin, a CPU of its own) gets every poll
 * as it is, and never sleeps in the kernel meanwhile (its voluntary
 * switches in /proc/self/task/TID/status stay near 0, where bounded waits
 * make thousands a second).
 * Timeout: 120 */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <poll.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <time.h>

#define WRITES 20
#define PERIOD_NS 50000000ull

static int pfd[2];
static volatile uint64_t written_at[WRITES];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);    /* the vDSO: no kernel entry */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* undetached: a byte every 50 ms, its time recorded before the write */
static void *writer(void *arg)
{
	struct timespec p = { 0, PERIOD_NS };

	(void)arg;
	for (int i = 0; i < WRITES; i++) {
		nanosleep(&p, NULL);
		written_at[i] = now_ns();
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (write(pfd[1], "x", 1) != 1)
			return (void *)1;
	}
	return NULL;
}

enum way { POLL, EPOLL_WAIT, EPOLL_PWAIT };
static const char *const names[] = { "poll", "epoll_wait", "epoll_pwait" };

static int ready(enum way w, int ep)
{
	struct pollfd p = { .fd = pfd[0], .events = POLLIN };
	struct epoll_event ev;

	switch (w) {
	case POLL:
		return poll(&p, 1, 0);
	case EPOLL_WAIT:
		return epoll_wait(ep, &ev, 1, 0);
	case EPOLL_PWAIT:
		return epoll_pwait(ep, &ev, 1, 0, NULL);
	}
	return -1;
}

static void busy_poll(enum way w, pid_t proxy, const char *kind)
{
	bool bounded = strcmp(kind, "spin") != 0;
	long long vol0 = t_task_value(proxy, "status", "voluntary_ctxt_switches"), vol1;
	struct epoll_event ev = { .events = EPOLLIN };
	long tck = sysconf(_SC_CLK_TCK);
	uint64_t worst = 0, end;
	long long cpu0, cpu1;
	long polls = 0;
	int seen = 0, ep = -1, r;
	pthread_t th;
	char c;

	t_check(pipe(pfd) == 0, "pipe");
	if (w != POLL) {
		ep = epoll_create1(0);
		t_check(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ev) == 0, "epoll set");
	}
	cpu0 = t_task_stat_field(proxy, 14) + t_task_stat_field(proxy, 15);
	t_check(pthread_create(&th, NULL, writer, NULL) == 0, "pthread_create");
	/* past the last write by 100 ms: every byte has had its time */
	end = now_ns() + (WRITES + 2) * PERIOD_NS;
	while (now_ns() < end) {
		r = ready(w, ep);
		polls++;
		if (r < 0) {
			t_check(errno == EINTR, "%s: %s", names[w], strerror(errno));
			continue;
		}
		if (r == 0)
			continue;
		uint64_t at = now_ns();
		t_check(read(pfd[0], &c, 1) == 1, "read");
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (seen < WRITES) {
			uint64_t late = at - written_at[seen];
			if (late > worst)
				worst = late;
		}
		seen++;
	}
	cpu1 = t_task_stat_field(proxy, 14) + t_task_stat_field(proxy, 15);
	vol1 = t_task_value(proxy, "status", "voluntary_ctxt_switches");
	pthread_join(th, NULL);
	t_check(seen == WRITES, "%s: %d bytes seen of %d", names[w], seen, WRITES);
	double secs = (WRITES + 2) * PERIOD_NS / 1e9, share = (double)(cpu1 - cpu0) / tck / secs;
	printf("%s, %s proxy: %ld polls, %d bytes, worst %.3f ms after the write, proxy CPU %.0f%% of %.1f s, "
	       "%lld voluntary switches\n", names[w], kind, polls, seen, worst / 1e6,
	       share * 100, secs, vol1 - vol0);
	if (bounded)
		t_check(share < 0.20, "%s: the proxy took %.0f%% of the %.1f s of busy-polls (< 20%% wanted)",
			names[w], share * 100, secs);
	else    /* a few: the writer's wake-ups, page faults of the kernel's */
		t_check(vol1 - vol0 < 100, "%s: a spinning proxy slept %lld times in %.1f s of busy-polls: "
			"they were bounded", names[w], vol1 - vol0, secs);
	close(pfd[0]);
	close(pfd[1]);
	if (ep >= 0)
		close(ep);
}

int main(int argc, char **argv)
{
	static const char *const proxies[] = { "adaptive", "spin", "sleep" };
	char stats[128];

	if (argc > 1) {                 /* a role: detached, with that proxy */
		pid_t proxy = t_find_proxy();
		t_check(proxy > 0 && proxy != t_main_tid(), "no proxy thread found");
		for (enum way w = POLL; w <= EPOLL_PWAIT; w++)
			busy_poll(w, proxy, argv[1]);
		return t_detached_done();
	}
	for (int i = 0; i < 3; i++) {
		const char *extra[] = { "--proxy", proxies[i], NULL };
		int st = t_run_inner(argv[0], proxies[i], extra, stats, sizeof(stats), false);
		unlink(stats);
		t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "with the %s proxy: status %#x", proxies[i], st);
	}
	return t_done();
}
