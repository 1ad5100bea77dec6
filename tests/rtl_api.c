/* Description: the RTLinux API of detach-rtl (include/detach/rtl.h), as an
 * RTLinux module linked with the library's main(): every call's return
 * values (RT-FIFOs, mbuffs, clocks, thread calls); the executive's priority
 * order (two periodic threads released together, 300 times: the higher
 * priority runs first for every release both served); overruns counted in
 * periods; suspend, wakeup, cancel and join; and, on the kernel's own
 * counters of the executive thread, that 600 switches between RT threads
 * made no system call and no sleep.  Timing is counted in periods, never in durations.
 * Timeout: 120 */
#include "helpers/t_chan.h"
#include <detach/rtl.h>

#include <sys/mman.h>

#define PERIOD_NS 1000000LL
#define PERIODS 300
#define FIFO_A 60                 /* numbers no example uses */

/* Before the library's main() mounts /dev/rtfN: no FUSE, a skip. */
__attribute__((constructor)) static void need_fuse(void)
{
	t_need_fuse();
}

static pthread_t hi, lo, over, ctl;
static volatile int log_len;
static char order[2 * PERIODS + 8];
/* the release each job of hi and lo served: its index on their common grid */
static unsigned long long served[2 * PERIODS + 8];
static volatile int phase;        /* 1: hi/lo running, 2: they ended, 3: all done */
static struct t_kernel k_before, k_after;
static pid_t exec_tid;

static void *periodic(void *arg)
{
	char me = (char)(long)arg;

	for (int i = 0; i < PERIODS; i++) {
		struct rtl_thread_stats st;

		pthread_wait_np();
		/* releases it ran and releases it missed: both advance its
		 * grid by one period from the common start */
		rtl_thread_stats(pthread_self(), &st);
		if (log_len < (int)sizeof(order)) {
			served[log_len] = st.releases + st.overruns - 1;
			order[log_len++] = me;
		}
		if (me == 'H' && i == 0)
			phase = 1;
	}
	return arg;
}

/* Overruns: every 10th job takes 2.5 periods, so it misses 2 releases
 * (3 when the executive is late by more than half a period). */
static struct rtl_thread_stats over_st;

static void *overrunning(void *arg)
{
	(void)arg;
	pthread_make_periodic_np(pthread_self(), gethrtime(), PERIOD_NS);
	for (int i = 0; i < 100; i++) {
		pthread_wait_np();
		if (i % 10 == 5) {
			hrtime_t end = gethrtime() + 5 * PERIOD_NS / 2;
			while (gethrtime() < end)
				;
		}
	}
	rtl_thread_stats(pthread_self(), &over_st);
	return NULL;
}

/* The lowest priority: runs when the others wait. */
static void *controller(void *arg)
{
	struct rtl_thread_stats st;
	void *ret = NULL;
	hrtime_t t0;
	int r;

	(void)arg;
	t_check(pthread_join(hi, &ret) == 0 && ret == (void *)'H', "join hi");
	t_check(pthread_join(lo, &ret) == 0 && ret == (void *)'L', "join lo");
	t_check(pthread_join(hi, NULL) == ESRCH, "a second join of a joined thread");
	phase = 2;
	/* wait for the Linux side to read the counters */
	while (phase != 4)
		usleep(1000);
	pthread_create(&over, NULL, overrunning, NULL);
	r = pthread_join(over, NULL);
	t_check(r == 0, "join over: %d", r);
	/* suspend / wakeup: a suspended thread does not run */
	t0 = gethrtime();
	r = pthread_make_periodic_np(pthread_self(), t0, PERIOD_NS);
	t_check(r == 0, "make_periodic self: %d", r);
	t_check(pthread_wait_np() == 0, "wait_np");
	t_check(rtl_thread_stats(pthread_self(), &st) == 0 && st.releases == 1, "one release, %llu", st.releases);
	phase = 3;
	return NULL;
}

static void fifo_calls(void)
{
	char buf[8192] = { 0 };

	t_check(rtf_create(RTF_NO, 100) == -ENODEV, "rtf_create(RTF_NO)");
	t_check(rtf_create(FIFO_A, 0) == -EINVAL, "rtf_create size 0");
	t_check(rtf_create(FIFO_A, 4000) == 0, "rtf_create");
	t_check(rtf_create(FIFO_A, 4000) == -EBUSY, "rtf_create twice");
	t_check(rtf_put(FIFO_A + 1, buf, 1) == -EINVAL, "rtf_put to no FIFO");
	t_check(rtf_get(FIFO_A + 1, buf, 1) == -EINVAL, "rtf_get from no FIFO");
	t_check(rtf_put(FIFO_A, buf, -1) == -EINVAL, "rtf_put count -1");
	t_check(rtf_create_handler(FIFO_A + 1, NULL) == -EINVAL, "rtf_create_handler no FIFO");
	t_check(rtf_put(FIFO_A, buf, 4096) == 4096, "rtf_put 4096 into 4000 (a page)");
	t_check(rtf_put(FIFO_A, buf, 1) == -ENOSPC, "rtf_put into a full FIFO");
	t_check(rtf_put(FIFO_A, buf, 8192) == -ENOSPC, "rtf_put more than the FIFO holds");
	t_check(rtf_get(FIFO_A, buf, 10) == 0, "rtf_get: nothing written by Linux");
	t_check(rtf_flush(FIFO_A) == 0, "rtf_flush");
	t_check(rtf_flush(FIFO_A + 1) == -EINVAL, "rtf_flush no FIFO");
	t_check(rtf_get_wait(FIFO_A, buf, 10, gethrtime() + PERIOD_NS) == -EPERM, "rtf_get_wait off the executive");
	t_check(rtf_destroy(FIFO_A) == 0, "rtf_destroy");
	t_check(rtf_destroy(FIFO_A) == -EINVAL, "rtf_destroy twice");
	t_check(rtf_put(FIFO_A, buf, 1) == -EINVAL, "rtf_put after destroy");
}

static void mbuff_calls(void)
{
	long page = sysconf(_SC_PAGESIZE);
	char name[64], shm[80];
	char *a, *b;
	void *p;

	snprintf(name, sizeof(name), "rtl-api-%d", (int)getpid());
	t_check(mbuff_alloc(NULL, 100) == NULL, "mbuff_alloc no name");
	t_check(mbuff_alloc(name, 0) == NULL, "mbuff_alloc size 0");
	a = mbuff_alloc(name, 10000);
	b = mbuff_alloc(name, 10000);
	t_check(a && b, "mbuff_alloc");
	if (!a || !b)
		return;
	t_check(((uintptr_t)a & (uintptr_t)(page - 1)) == 0, "mbuff page-aligned");
	strcpy(a, "same region");
	t_check(!strcmp(b, "same region"), "two mbuff_alloc of one name: one region");
	mbuff_free(name, a);
	snprintf(shm, sizeof(shm), "mbuff.%s", name);
	t_check(dt_shm_open(shm, 0, 0, &p) == 0, "the region stays while a user is left");
	dt_shm_close(p);
	mbuff_free(name, b);
	t_check(dt_shm_open(shm, 0, 0, &p) == -ENOENT, "the last mbuff_free removes it");
}

static void clock_calls(void)
{
	hrtime_t a = gethrtime(), b = clock_gethrtime(CLOCK_REALTIME), c = clock_gethrtime(rtl_getschedclock());
	struct timespec ts;

	t_check(a > 0 && a <= b && b <= c, "clocks in order: %lld %lld %lld", a, b, c);
	t_check(clock_gethrtime(CLOCK_PROCESS_CPUTIME_ID) == -EINVAL, "clock_gethrtime of another clock");
	t_check(clock_gettime(CLOCK_REALTIME, &ts) == 0 && timespec_to_ns(&ts) >= c, "clock_gettime: the RT clock");
	ts.tv_nsec = NSECS_PER_SEC;
	t_check(clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL) == EINVAL, "clock_nanosleep bad nsec");
	t_check(rtl_printf("rtl_printf: %d\n", 42) == 15, "rtl_printf's count");
}

static void thread_calls(void)
{
	t_check(pthread_make_periodic_np(NULL, 0, PERIOD_NS) == ESRCH, "make_periodic no thread");
	t_check(pthread_wait_np() == EPERM, "pthread_wait_np off the executive");
	t_check(pthread_join(NULL, NULL) == ESRCH, "join no thread");
	t_check(pthread_cancel(NULL) == ESRCH, "cancel no thread");
	t_check(pthread_wakeup_np(NULL) == ESRCH, "wakeup no thread");
	t_check(pthread_suspend_np(NULL) == ESRCH, "suspend no thread");
	t_check(pthread_self() == NULL, "pthread_self off the executive");
	t_check(pthread_attr_setfp_np(NULL, 1) == 0, "setfp");
	{
		pthread_attr_t a;
		struct sched_param sp = { 0 };

		pthread_attr_init(&a);
		t_check(pthread_attr_setschedparam(&a, &sp) == EINVAL, "priority 0 is not a SCHED_FIFO one");
		sp.sched_priority = 99;
		t_check(pthread_attr_setschedparam(&a, &sp) == 0, "priority 99");
	}
}

/* A thread that never runs again once suspended, and one cancelled while it
 * sleeps: both end as their calls say. */
static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		usleep(1000000);
	return NULL;
}

int init_module(void)
{
	pthread_attr_t attr;
	struct sched_param sp;
	pthread_t s;
	void *ret;
	hrtime_t start;

	exec_tid = t_find_thread("rtl-exec");
	t_check(exec_tid > 0, "no thread named rtl-exec");
	fifo_calls();
	mbuff_calls();
	clock_calls();
	thread_calls();

	t_check(pthread_create(&s, NULL, sleeper, NULL) == 0, "create sleeper");
	t_check(pthread_cancel(s) == 0 && pthread_join(s, &ret) == 0 && ret == PTHREAD_CANCELED, "cancel a sleeper");

	pthread_attr_init(&attr);
	/* hi and lo: released together, PERIODS times; created low first */
	start = gethrtime() + 20 * PERIOD_NS;
	sp.sched_priority = 5;
	pthread_attr_setschedparam(&attr, &sp);
	t_check(pthread_create(&lo, &attr, periodic, (void *)'L') == 0, "create lo");
	sp.sched_priority = 10;
	pthread_attr_setschedparam(&attr, &sp);
	t_check(pthread_create(&hi, &attr, periodic, (void *)'H') == 0, "create hi");
	t_check(pthread_make_periodic_np(lo, start, PERIOD_NS) == 0, "make_periodic lo");
	t_check(pthread_make_periodic_np(hi, start, PERIOD_NS) == 0, "make_periodic hi");
	t_check(pthread_make_periodic_np(hi, start, 0) == EINVAL, "make_periodic period 0");
	/* the lowest priority: runs when the others wait (made last: it
	 * joins hi and lo, which must be there) */
	sp.sched_priority = 1;
	pthread_attr_setschedparam(&attr, &sp);
	t_check(pthread_create(&ctl, &attr, controller, NULL) == 0, "create controller");

	/* the kernel's view of the executive while hi and lo switch */
	while (phase < 1)
		usleep(1000);
	t_kernel_read(exec_tid, &k_before);
	start = gethrtime();
	while (phase < 2)
		usleep(1000);
	t_kernel_read(exec_tid, &k_after);
	t_kernel_flat("600 switches between RT threads", &k_before, &k_after, (uint64_t)(gethrtime() - start));
	phase = 4;
	while (phase != 3)
		usleep(1000);
	kill(getpid(), SIGTERM);
	return 0;
}

void cleanup_module(void)
{
	int both = 0, inverted = 0;

	order[log_len] = 0;
	/* A release that both served: hi's job must come first.  Not "H, L
	 * in every period": when Linux preempts the executive (a CPU not
	 * isolated) past a release, hi's next job rightly runs before lo's
	 * overdue one, and a release missed by one of them pairs with nothing. */
	for (int i = 0; i < log_len; i++) {
		if (order[i] != 'L')
			continue;
		for (int j = 0; j < log_len; j++) {
			if (order[j] != 'H' || served[j] != served[i])
				continue;
			both++;
			inverted += j > i;
		}
	}
	printf("order of the first jobs: %.24s...; %d releases served by both, hi first in %d\n", order, both,
	       both - inverted);
	t_check(log_len == 2 * PERIODS, "%d jobs, expected %d", log_len, 2 * PERIODS);
	t_check(both >= PERIODS / 2, "only %d of %d releases served by both hi and lo", both, PERIODS);
	t_check(inverted == 0, "lo ran before hi in %d releases both served", inverted);
	printf("overrunning thread: %llu releases, %llu missed (10 jobs of 2.5 periods)\n", over_st.releases,
	       over_st.overruns);
	t_check(over_st.releases == 100, "releases %llu, expected 100", over_st.releases);
	/* each long job misses 2 releases, 3 if it started late by half a
	 * period: at least 20.  More when Linux preempts the executive (a CPU
	 * not isolated): no upper bound is a property of the code. */
	t_check(over_st.overruns >= 20, "overruns %llu, expected at least 20", over_st.overruns);
	exit(t_done());
}
