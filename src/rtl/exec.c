/* The executive: RT threads of one task on one detached thread, as RTLinux's
 * own scheduler ran them (docs/rtl.md).
 *
 * The executive is a thread detached with dt_detach() on a CPU of its own.
 * Every RT thread is a stack of its own on it; the ready thread of highest
 * priority runs (equal priorities: the one ready first) until it reaches a
 * wait point (pthread_wait_np, a sleep, rtf_get_wait, a suspend, a join, its
 * end), which switches back to the scheduler loop with rtl_switch
 * (switch.S): saving and loading a few registers, no kernel entry.  A
 * running thread is never preempted.  The scheduler loop looks at release
 * times against dt_now_ns() (the TSC), at the FIFOs' counters and at
 * requests from other threads (cancel, suspend, wakeup), all in memory.
 *
 * Other threads (init_module on the main thread, the FUSE server) only
 * publish: a new thread's slot, request counters.  Only the executive
 * changes a thread's state, so no lock is needed.
 *
 * Longer than 500 lines: the thread calls and the scheduler loop share
 * struct rtl_thread's private fields, which stay in this one file rather
 * than in a header every part of the library sees. */
#include "rtl/rtl_int.h"

#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#define RTL_MAX_THREADS 64
#define STACK_MIN (64u * 1024)
#define STACK_MAX (1024u * 1024)

enum state { T_READY, T_RUNNING, T_SLEEP, T_PERIOD, T_FIFO, T_BELL, T_SUSPENDED, T_JOIN, T_DONE };

struct rtl_thread {
	void *sp;                        /* saved while switched out */
	void *(*fn)(void *);
	void *arg, *ret;
	void *stack;
	size_t stack_bytes;
	int used;                        /* slot taken (CAS) */
	int published;                   /* the executive may look at it (release) */
	int done;                        /* ended; ret is valid (release) */
	int joined;
	int prio;                        /* written by setschedparam, read by the scheduler */
	enum state state;                /* the executive's alone */
	uint64_t ready_seq;              /* FIFO order within a priority */
	uint64_t wake_at;                /* T_SLEEP, T_FIFO (0: no deadline) */
	unsigned fifo;                   /* T_FIFO */
	struct dt_bell *bell;            /* T_BELL */
	struct rtl_thread *join_target;  /* T_JOIN */
	bool timed_out;
	/* periodic: the next release, the period (0: not periodic) */
	int64_t next_release, period;
	int64_t req_start, req_period;   /* pthread_make_periodic_np from another thread */
	bool first_wait;
	uint64_t released_at;            /* for the delay statistic */
	/* requests from any thread: counters the executive compares */
	uint32_t req_cancel, req_suspend, req_wakeup, req_periodic;
	uint32_t seen_suspend, seen_wakeup, seen_periodic;
	struct rtl_thread_stats st;
};

static struct rtl_thread threads[RTL_MAX_THREADS];
static int nslots;                       /* slots ever used: the scan's bound */
static struct rtl_thread *current;       /* the running RT thread, NULL in the scheduler */
static void *sched_sp;
static uint64_t ready_seq;
static __thread bool on_exec;
static int exec_state;                   /* 0 starting, 1 detached, -errno failed */
static int exec_stop;
static pthread_t exec_thread;

void rtl_switch(void **save_sp, void *to_sp);
void rtl_thread_entry(void);
void rtl_thread_main(struct rtl_thread *t) __attribute__((noreturn, used));

bool rtl_on_executive(void)
{
	return on_exec;
}

/* ---- thread life --------------------------------------------------------- */

static void make_ready(struct rtl_thread *t)
{
	t->state = T_READY;
	t->ready_seq = ++ready_seq;
}

/* The calling RT thread waits in `state`; back when the scheduler picks it. */
static void block(struct rtl_thread *t, enum state state)
{
	int saved_errno = errno;         /* errno is the executive thread's, shared */

	t->state = state;
	if (state == T_READY)
		t->ready_seq = ++ready_seq;
	rtl_switch(&t->sp, sched_sp);
	errno = saved_errno;
}

static void finish(struct rtl_thread *t, void *ret)
{
	t->ret = ret;
	t->state = T_DONE;
	store_release(&t->done, 1);
}

void rtl_thread_main(struct rtl_thread *t)
{
	finish(t, t->fn(t->arg));
	rtl_switch(&t->sp, sched_sp);
	__builtin_unreachable();
}

RTL_API void rtl_pthread_exit(void *ret)
{
	struct rtl_thread *t = on_exec ? current : NULL;

	if (!t)
		pthread_exit(ret);       /* a Linux thread: the libc's */
	finish(t, ret);
	rtl_switch(&t->sp, sched_sp);
	__builtin_unreachable();
}

/* A stack of its own, locked and written, with a guard page below. */
static int stack_init(struct rtl_thread *t, size_t bytes)
{
	uint64_t *top;
	long page = sysconf(_SC_PAGESIZE);

	bytes = (bytes + (size_t)page - 1) & ~((size_t)page - 1);
	t->stack = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_POPULATE,
			-1, 0);
	if (t->stack == MAP_FAILED)
		return -ENOMEM;
	t->stack_bytes = bytes;
	mprotect(t->stack, (size_t)page, PROT_NONE);
	mlock((char *)t->stack + page, bytes - (size_t)page);   /* best effort: the runtime may hold MCL_FUTURE */
	memset((char *)t->stack + page, 0, bytes - (size_t)page);
	/* what rtl_switch pops: control words, r15 r14 r13 r12 rbx rbp, return */
	top = (uint64_t *)((char *)t->stack + bytes);
	top -= 8;
	top[0] = 0x1f80ull | (0x037full << 32);  /* MXCSR and x87 control word, the ABI's initial values */
	top[4] = (uint64_t)(uintptr_t)t;         /* r12 */
	top[7] = (uint64_t)(uintptr_t)rtl_thread_entry;
	t->sp = top;
	return 0;
}

RTL_API int rtl_pthread_create(rtl_pthread_t *out, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	struct sched_param sp = { 0 };
	size_t bytes = 256u * 1024;
	struct rtl_thread *t = NULL;
	int i, zero, err;

	if (!out || !fn)
		return EINVAL;
	if (attr) {
		pthread_attr_getschedparam(attr, &sp);
		pthread_attr_getstacksize(attr, &bytes);
		bytes = bytes < STACK_MIN ? STACK_MIN : bytes > STACK_MAX ? STACK_MAX : bytes;
	}
	for (i = 0; i < RTL_MAX_THREADS && !t; i++) {
		zero = 0;
		if (__atomic_compare_exchange_n(&threads[i].used, &zero, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			t = &threads[i];
	}
	if (!t)
		return EAGAIN;
	/* all but the slot's claim, which other creators may be testing */
	memset(t, 0, offsetof(struct rtl_thread, used));
	memset(&t->published, 0, sizeof(*t) - offsetof(struct rtl_thread, published));
	if ((err = stack_init(t, bytes))) {
		store_release(&t->used, 0);
		return -err;
	}
	t->fn = fn;
	t->arg = arg;
	t->prio = sp.sched_priority;
	t->st.priority = sp.sched_priority;
	t->state = T_READY;
	t->ready_seq = __atomic_add_fetch(&ready_seq, 1, __ATOMIC_RELAXED);
	*out = t;
	i = (int)(t - threads) + 1;
	for (int n = load_acquire(&nslots); n < i;)
		if (__atomic_compare_exchange_n(&nslots, &n, i, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			break;
	/* release: the executive sees the whole slot once it sees this */
	store_release(&t->published, 1);
	return 0;
}

static bool valid(rtl_pthread_t t)
{
	return t >= threads && t < threads + RTL_MAX_THREADS && load_acquire(&t->published);
}

RTL_API rtl_pthread_t rtl_pthread_self(void)
{
	return on_exec ? current : NULL;
}

RTL_API int rtl_pthread_equal(rtl_pthread_t a, rtl_pthread_t b)
{
	return a == b;
}

RTL_API int rtl_pthread_cancel(rtl_pthread_t t)
{
	if (!valid(t))
		return ESRCH;
	__atomic_add_fetch(&t->req_cancel, 1, __ATOMIC_RELEASE);
	return 0;
}

RTL_API int rtl_pthread_join(rtl_pthread_t t, void **ret)
{
	struct timespec ms = { 0, 1000000 };

	if (!valid(t))
		return ESRCH;
	if (on_exec && t == current)
		return EDEADLK;
	if (__atomic_exchange_n(&t->joined, 1, __ATOMIC_ACQ_REL))
		return EINVAL;
	if (on_exec && current) {
		current->join_target = t;
		if (!load_acquire(&t->done))
			block(current, T_JOIN);
	} else {
		while (!load_acquire(&t->done))
			nanosleep(&ms, NULL);    /* a Linux thread: it may sleep */
	}
	if (ret)
		*ret = t->ret;
	if (t->st.overruns)
		fprintf(stderr, "detach-rtl: RT thread %d (priority %d) missed %llu of %llu periods\n",
			(int)(t - threads), t->st.priority, t->st.overruns, t->st.overruns + t->st.releases);
	store_release(&t->published, 0);
	munmap(t->stack, t->stack_bytes);
	store_release(&t->used, 0);
	return 0;
}

RTL_API int pthread_delete_np(rtl_pthread_t t)
{
	int err = rtl_pthread_cancel(t);

	return err ? err : rtl_pthread_join(t, NULL);
}

RTL_API int rtl_pthread_setschedparam(rtl_pthread_t t, int policy, const struct sched_param *p)
{
	(void)policy;
	if (!valid(t))
		return ESRCH;
	if (!p)
		return EINVAL;
	__atomic_store_n(&t->prio, p->sched_priority, __ATOMIC_RELAXED);
	t->st.priority = p->sched_priority;
	return 0;
}

RTL_API int rtl_pthread_attr_setschedparam(pthread_attr_t *attr, const struct sched_param *p)
{
	int err = pthread_attr_setschedpolicy(attr, SCHED_FIFO);

	return err ? err : pthread_attr_setschedparam(attr, p);
}

RTL_API int rtl_pthread_getschedparam(rtl_pthread_t t, int *policy, struct sched_param *p)
{
	if (!valid(t))
		return ESRCH;
	if (policy)
		*policy = SCHED_FIFO;
	if (p)
		p->sched_priority = __atomic_load_n(&t->prio, __ATOMIC_RELAXED);
	return 0;
}

RTL_API int rtl_sched_yield(void)
{
	if (on_exec && current)
		block(current, T_READY);
	else
		sched_yield();
	return 0;
}

/* ---- periodic threads ---------------------------------------------------- */

RTL_API int pthread_make_periodic_np(rtl_pthread_t t, hrtime_t start, hrtime_t period)
{
	if (!valid(t))
		return ESRCH;
	if (period <= 0 || start < 0)
		return EINVAL;
	if (on_exec && t == current) {
		t->next_release = start;
		t->first_wait = true;
		t->period = period;
		return 0;
	}
	/* another thread's: the executive applies it (a thread waiting in
	 * pthread_wait_np is then released at start, as in RTLinux) */
	t->req_start = start;
	t->req_period = period;
	__atomic_add_fetch(&t->req_periodic, 1, __ATOMIC_RELEASE);
	return 0;
}

RTL_API int pthread_wait_np(void)
{
	struct rtl_thread *t = on_exec ? current : NULL;
	int64_t period, now, missed;

	if (!t)
		return EPERM;
	period = t->period;
	if (!period) {
		block(t, T_SUSPENDED);   /* RTLinux: not periodic, it waits for a wakeup */
		return 0;
	}
	now = (int64_t)dt_now_ns();
	if (t->first_wait) {
		t->first_wait = false;
	} else if (now >= t->next_release) {
		/* overrun: the release it waits for has passed; count what it
		 * missed and keep its phase */
		missed = (now - t->next_release) / period + 1;
		t->st.overruns += (unsigned long long)missed;
		t->next_release += missed * period;
	}
	block(t, T_PERIOD);
	return 0;
}

RTL_API int pthread_wakeup_np(rtl_pthread_t t)
{
	if (!valid(t))
		return ESRCH;
	__atomic_add_fetch(&t->req_wakeup, 1, __ATOMIC_RELEASE);
	return 0;
}

RTL_API int pthread_suspend_np(rtl_pthread_t t)
{
	if (!valid(t))
		return ESRCH;
	if (on_exec && t == current) {
		block(t, T_SUSPENDED);
		return 0;
	}
	__atomic_add_fetch(&t->req_suspend, 1, __ATOMIC_RELEASE);
	return 0;
}

RTL_API int pthread_attr_setfp_np(pthread_attr_t *attr, int flag)
{
	(void)attr, (void)flag;
	return 0;
}

RTL_API int pthread_setfp_np(rtl_pthread_t t, int flag)
{
	(void)flag;
	return valid(t) ? 0 : ESRCH;
}

RTL_API int rtl_thread_stats(rtl_pthread_t t, struct rtl_thread_stats *s)
{
	if (!valid(t) || !s)
		return ESRCH;
	*s = t->st;
	return 0;
}

/* ---- waits for sleeps and FIFOs (clock.c and fifo.c call these) ---------- */

/* The calling RT thread sleeps until deadline (ns, dt_now_ns's clock).
 * false: not an RT thread (the caller sleeps the Linux way). */
bool rtl_exec_sleep_until(uint64_t deadline)
{
	struct rtl_thread *t = on_exec ? current : NULL;

	if (!t)
		return false;
	t->wake_at = deadline;
	block(t, T_SLEEP);
	return true;
}

/* The calling RT thread waits until FIFO fifo is readable or the deadline
 * (0: none).  -ETIMEDOUT, 0, or -EPERM off the executive. */
int rtl_exec_wait_fifo(unsigned fifo, uint64_t deadline)
{
	struct rtl_thread *t = on_exec ? current : NULL;

	if (!t)
		return -EPERM;
	t->fifo = fifo;
	t->wake_at = deadline;
	t->timed_out = false;
	block(t, T_FIFO);
	return t->timed_out ? -ETIMEDOUT : 0;
}

RTL_API int rtl_bell_wait(struct dt_bell *b, hrtime_t deadline)
{
	struct rtl_thread *t = on_exec ? current : NULL;

	if (!t)
		return -EPERM;
	if (!b)
		return -EINVAL;
	if (!dt_bell_wait(b, 0))
		return 0;
	t->bell = b;
	t->wake_at = deadline > 0 ? (uint64_t)deadline : 0;
	t->timed_out = false;
	block(t, T_BELL);
	return t->timed_out ? -ETIMEDOUT : 0;
}

/* ---- the scheduler loop -------------------------------------------------- */

/* Applies requests and time to a thread that is not running. */
static void update(struct rtl_thread *t, uint64_t now)
{
	uint32_t r;

	if (t->state == T_DONE)
		return;
	if (load_acquire(&t->req_cancel)) {
		finish(t, PTHREAD_CANCELED);
		return;
	}
	if ((r = load_acquire(&t->req_suspend)) != t->seen_suspend) {
		t->seen_suspend = r;
		t->state = T_SUSPENDED;
	}
	if ((r = load_acquire(&t->req_periodic)) != t->seen_periodic) {
		t->seen_periodic = r;
		t->next_release = t->req_start;
		t->period = t->req_period;
		t->first_wait = true;
		if (t->state == T_SUSPENDED || t->state == T_PERIOD) {
			t->first_wait = false;
			t->state = T_PERIOD;
		}
	}
	if ((r = load_acquire(&t->req_wakeup)) != t->seen_wakeup) {
		t->seen_wakeup = r;
		if (t->state != T_READY)
			make_ready(t);
	}
	switch (t->state) {
	case T_SLEEP:
		if (now >= t->wake_at)
			make_ready(t);
		break;
	case T_PERIOD:
		if ((int64_t)now >= t->next_release) {
			t->released_at = (uint64_t)t->next_release;
			t->next_release += t->period;
			t->st.releases++;
			make_ready(t);
		}
		break;
	case T_FIFO:
		if (rtl_fifo_readable(t->fifo)) {
			make_ready(t);
		} else if (t->wake_at && now >= t->wake_at) {
			t->timed_out = true;
			make_ready(t);
		}
		break;
	case T_BELL:
		/* dt_bell_wait without a deadline: memory only */
		if (!dt_bell_wait(t->bell, 0)) {
			make_ready(t);
		} else if (t->wake_at && now >= t->wake_at) {
			t->timed_out = true;
			make_ready(t);
		}
		break;
	case T_JOIN:
		if (load_acquire(&t->join_target->done))
			make_ready(t);
		break;
	default:
		break;
	}
}

static void run(struct rtl_thread *t)
{
	if (t->released_at) {
		int64_t d = (int64_t)(dt_now_ns() - t->released_at);

		if (d > t->st.max_release_delay_ns)
			t->st.max_release_delay_ns = d;
		t->released_at = 0;
	}
	t->st.switches_in++;
	t->state = T_RUNNING;
	current = t;
	rtl_switch(&sched_sp, t->sp);
	current = NULL;
}

static void schedule(void)
{
	while (!load_acquire(&exec_stop)) {
		struct rtl_thread *pick = NULL;
		uint64_t now;
		int n = load_acquire(&nslots);

		rtl_fifo_run_handlers();
		now = dt_now_ns();
		for (int i = 0; i < n; i++) {
			struct rtl_thread *t = &threads[i];
			int prio;

			if (!load_acquire(&t->published))
				continue;
			update(t, now);
			if (t->state != T_READY)
				continue;
			prio = __atomic_load_n(&t->prio, __ATOMIC_RELAXED);
			if (!pick || prio > pick->prio || (prio == pick->prio && t->ready_seq < pick->ready_seq))
				pick = t;
		}
		if (pick)
			run(pick);
		else
			__builtin_ia32_pause();
	}
}

static void *exec_main(void *arg)
{
	int cpu = (int)(intptr_t)arg, err;

	prctl(PR_SET_NAME, "rtl-exec");
	dt_now_ns();                              /* the clock calibrated before detaching */
	err = dt_detach(cpu);
	on_exec = true;
	store_release(&exec_state, err ? err : 1);
	if (err)
		return NULL;
	schedule();
	on_exec = false;
	dt_attach();
	return NULL;
}

int rtl_exec_start(int cpu)
{
	struct timespec ms = { 0, 1000000 };
	int st, err;

	store_release(&exec_stop, 0);
	if ((err = pthread_create(&exec_thread, NULL, exec_main, (void *)(intptr_t)cpu)))
		return -err;
	while (!(st = load_acquire(&exec_state)))
		nanosleep(&ms, NULL);
	if (st < 0) {
		pthread_join(exec_thread, NULL);
		return st;
	}
	return 0;
}

void rtl_exec_stop(void)
{
	if (load_acquire(&exec_state) != 1)
		return;
	store_release(&exec_stop, 1);
	pthread_join(exec_thread, NULL);
	exec_state = 0;
}

void rtl_exec_report(void)
{
	for (int i = 0; i < RTL_MAX_THREADS; i++) {
		struct rtl_thread *t = &threads[i];

		if (load_acquire(&t->published) && t->st.overruns)
			fprintf(stderr, "detach-rtl: RT thread %d (priority %d) missed %llu of %llu periods\n", i,
				t->st.priority, t->st.overruns, t->st.overruns + t->st.releases);
	}
}
