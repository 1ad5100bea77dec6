/* Which threads are detached, and making a thread detached.
 *
 * By default the program's first thread, as in the paper.  `detach run
 * --select RULES` (DETACH_SELECT) chooses others, for programs that measure
 * or control in threads they create (cyclictest, oslat):
 *   first       the first thread
 *   order:N     the N-th thread the program creates (1 = the first created)
 *   name:GLOB   a thread that names itself so (prctl PR_SET_NAME; * and ?)
 *   pinned      a thread pinned to exactly one CPU of -c (sched_setaffinity
 *               by itself, or by its creator, as pthread attributes do)
 * With rules other than `first`, every thread is watched ("observed"): its
 * system calls trap too, and run on the thread itself, except that clone
 * passes the watch on to the new thread and the calls above may choose it.
 * A chosen thread is detached at its next system call, on its own CPU with
 * its own proxy.  dt_detach() and dt_attach() (api.c) do the same on demand.
 */
#include "runtime/threads.h"
#include "runtime/config.h"
#include "runtime/cputime.h"
#include "runtime/memlock.h"
#include "runtime/placement.h"
#include "runtime/sched.h"
#include "runtime/stack.h"
#include "runtime/stats.h"
#include "runtime/sud.h"
#include "lib/partition.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Every detached or watched thread's struct, mapped on demand (a program
 * may create any number of threads), on a list for find_observed. */
__thread struct dt_thread *dt_self;

static struct dt_thread *all_threads;
static volatile int list_lock;
static atomic_int created;            /* threads the program created, in order */
static volatile int cpu_lock;
static cpu_set_t cpus_taken;
static bool dt_observing;            /* rules other than `first` */

static void lock(volatile int *l)
{
	while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
		cpu_relax();
}

static void unlock(volatile int *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

/* Raw mmap: this runs in clone children before libc is theirs. */
struct dt_thread *thread_alloc(void)
{
	struct dt_thread *t = (struct dt_thread *)sys_call6(SYS_mmap, 0, sizeof(*t), PROT_READ | PROT_WRITE,
							    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if ((long)t < 0 && (long)t > -4096)
		dt_die("cannot map a thread's state: %s", strerror((int)-(long)t));
	t->pending_cpu = -1;
	t->stats = &t->own_stats;   /* until it is detached and gets a registry slot */
	stack_give(t);
	lock(&list_lock);
	t->next = all_threads;
	all_threads = t;
	unlock(&list_lock);
	return t;
}

/* The thread is leaving (its exit is the next thing it does). */
void thread_free(struct dt_thread *t)
{
	lock(&list_lock);
	for (struct dt_thread **p = &all_threads; *p; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			break;
		}
	unlock(&list_lock);
	stack_return(t);
	sys_call2(SYS_munmap, t, sizeof(*t));
}

/* Claims a CPU of -c for a new detached thread: want if free (-1: the next
 * free one).  -1 when none is left. */
int claim_cpu(int want)
{
	int got = -1;

	lock(&cpu_lock);
	for (int i = 0; i < CPU_SETSIZE && got < 0; i++) {
		if (!CPU_ISSET(i, &dt_cfg.cpus) || CPU_ISSET(i, &cpus_taken))
			continue;
		if (want < 0 || want == i)
			got = i;
	}
	if (got >= 0)
		CPU_SET(got, &cpus_taken);
	unlock(&cpu_lock);
	return got;
}

/* A detached thread exits or attaches again: its CPU is free for another. */
void release_cpu(int cpu)
{
	lock(&cpu_lock);
	CPU_CLR(cpu, &cpus_taken);
	unlock(&cpu_lock);
}

/* The detached CPUs taken now: watched threads are kept off them. */
static void cpus_in_use(cpu_set_t *out)
{
	lock(&cpu_lock);
	*out = cpus_taken;
	unlock(&cpu_lock);
}

/* ---- placing a thread ---------------------------------------------------- */

static void set_policy(pid_t tid)
{
	struct sched_param sp = { 0 };
	int policy = SCHED_OTHER;

	if (dt_cfg.policy[0] == 'f' || dt_cfg.policy[0] == 'r') {
		policy = dt_cfg.policy[0] == 'f' ? SCHED_FIFO : SCHED_RR;
		sp.sched_priority = atoi(dt_cfg.policy + 2);
	} else if (dt_cfg.keep_policy) {
		return;         /* the program's own policy, for real (sched.c) */
	}
	/* SCHED_RESET_ON_FORK: children and new threads start as SCHED_OTHER,
	 * never as a real-time task that would starve behind its parent. */
	if (sched_setscheduler(tid, policy | SCHED_RESET_ON_FORK, &sp))
		dt_die("cannot set policy %s on tid %d: %s", dt_cfg.policy, (int)tid, strerror(errno));
}

/* Into the `detach isolate` partition, when the CPU belongs to one: only
 * then may the thread run there (the program starts among the
 * housekeeping tasks).  Remembers where the program came from. */
static void enter_partition(struct dt_thread *t)
{
	struct partition p;
	const char *home;
	int err;

	if (partition_find(&p) || !CPU_ISSET(t->cpu, &p.cpus))
		return;
	home = dt_cfg.home_cpuset[0] ? dt_cfg.home_cpuset : "/";
	snprintf(dt_cfg.home_tasks, sizeof(dt_cfg.home_tasks), "%s%s/%s", p.root,
		 strcmp(home, "/") ? home : "", p.kind == CG_V2 ? "cgroup.threads" : "tasks");
	if ((err = partition_add_thread(&p, t->tid)))
		dt_die("cannot move tid %d into the partition %s: %s", (int)t->tid, p.dir, strerror(-err));
	dt_verbose("tid %d joined the partition %s", (int)t->tid, p.dir);
}

static void place_and_lock(struct dt_thread *t)
{
	cpu_set_t one;

	enter_partition(t);
	CPU_ZERO(&one);
	CPU_SET(t->cpu, &one);
	if (sched_setaffinity(t->tid, sizeof(one), &one))
		dt_die("cannot pin tid %d to CPU %d: %s", (int)t->tid, t->cpu, strerror(errno));
	set_policy(t->tid);
	memlock_thread(t);
}

static int arm(struct dt_thread *t)
{
	int err = sud_arm(t);

	if (err == -EINVAL)
		dt_die("Syscall User Dispatch is not available (prctl: %s); "
		       "it needs Linux 5.11 or later built with CONFIG_GENERIC_ENTRY", strerror(-err));
	if (err)
		dt_die("cannot arm Syscall User Dispatch: %s", strerror(-err));
	return 0;
}

/* Makes the calling thread a detached thread on cpu (claimed already), from
 * a fresh struct (t NULL) or from a watched one.  Until the trap is armed
 * at the end it may use libc; a watched thread, armed already, lets its
 * own calls through meanwhile (selector ALLOW). */
struct dt_thread *detach_thread(struct dt_thread *t, int cpu)
{
	unsigned node = 0;
	int err;

	if (!t)
		t = thread_alloc();
	/* Set-up runs libc: its calls must run natively, not trap (selector
	 * ALLOW) nor enter the trampoline's detached path (dt_self NULL). */
	t->selector = 0;                        /* SYSCALL_DISPATCH_FILTER_ALLOW */
	dt_self = NULL;
	t->observed = false;
	t->pending_cpu = -1;
	t->tid = (pid_t)syscall(SYS_gettid);
	t->cpu = cpu;
	t->stats = registry_slot(t->tid, cpu);
	if (!t->stats)
		dt_die("no statistics slot for tid %d", (int)t->tid);
	sched_capture(t);               /* what the program sees from now on */
	/* The proxy first: born where the thread runs now, outside the
	 * detached CPU, it moves to the housekeeping CPUs at once.  Born after
	 * the pinning it would wait on the detached CPU, behind a thread that
	 * never sleeps, for the next scheduler tick. */
	if ((err = proxy_start(t)))
		dt_die("cannot start a proxy thread: %s", strerror(-err));
	place_and_lock(t);
	syscall(SYS_getcpu, NULL, &node, NULL);
	t->node = (int)node;
	t->stats->proxy_tid = t->proxy_tid;
	dt_verbose("tid %d detached on CPU %d (policy %s), proxy tid %d on CPUs %s (%s), mode %s",
		   (int)t->tid, cpu, dt_cfg.policy, (int)t->proxy_tid,
		   cpulist_format(&dt_cfg.housekeeping, (char[256]){ 0 }, 256),
		   dt_cfg.proxy_wait == PROXY_SPIN ? "spin" : "adaptive", dt_cfg.mode);
	dt_self = t;
	kernel_counters_read(t->tid, &t->stats->at_detach);
	t->stats->state = 1;
	arm(t);                                 /* selector BLOCK from here */
	return t;
}

/* dt_attach(): the detached thread becomes ordinary again: its counters
 * and its proxy go, the trap is disarmed, it returns to the housekeeping
 * CPUs and cpuset, and its CPU is free for another. */
void attach_thread(struct dt_thread *t)
{
	proxy_stop(t);
	sud_disarm(t);
	memlock_release(t);
	t->stats->state = 0;
	dt_self = NULL;
	placement_home(0);
	/* an ordinary thread again: the affinity and policy the program set
	 * (or had when it was detached), made real (sched.c keeps them) */
	sys_call3(SYS_sched_setaffinity, 0, sizeof(t->app.affinity), &t->app.affinity);
	sys_call3(SYS_sched_setattr, 0, &t->app.attr, 0);
	release_cpu(t->cpu);
	dt_verbose("tid %d attached again", (int)t->tid);
}

/* A watched thread: armed, its calls run on itself (dispatch.c). */
static void observe_thread(struct dt_thread *t)
{
	t->observed = true;
	t->tid = (pid_t)sys_call0(SYS_gettid);
	dt_self = t;
	arm(t);
}

/* ---- the rules --------------------------------------------------------- */

static bool glob_match(const char *g, const char *s)
{
	for (; *g; g++, s++) {
		if (*g == '*') {
			for (const char *r = s;; r++) {
				if (glob_match(g + 1, r))
					return true;
				if (!*r)
					return false;
			}
		}
		if (!*s || (*g != '?' && *g != *s))
			return false;
	}
	return !*s;
}

/* Does rule (e.g. "order:") appear in the list, and its argument? */
static bool rule(const char *kind, char *arg, size_t len, int nth)
{
	size_t klen = strlen(kind);
	const char *p = dt_cfg.select;

	while (*p) {
		size_t n = strcspn(p, ",");
		if (n >= klen && !strncmp(p, kind, klen) && nth-- == 0) {
			if (arg)
				snprintf(arg, len, "%.*s", (int)(n - klen), p + klen);
			return true;
		}
		p += n + (p[n] == ',');
	}
	return false;
}

static bool order_chosen(int n)
{
	char arg[16];

	for (int i = 0; rule("order:", arg, sizeof(arg), i); i++)
		if (atoi(arg) == n)
			return true;
	return false;
}

static bool name_chosen(const char *name)
{
	char arg[64];

	for (int i = 0; rule("name:", arg, sizeof(arg), i); i++)
		if (glob_match(arg, name))
			return true;
	return false;
}

static struct dt_thread *find_observed(pid_t tid)
{
	struct dt_thread *found = NULL;

	lock(&list_lock);
	for (struct dt_thread *t = all_threads; t && !found; t = t->next)
		if (t->observed && t->tid == tid)
			found = t;
	unlock(&list_lock);
	return found;
}

/* Claims made by a creator for a thread that has not registered yet
 * (pthread attributes pin the child from the parent, right after clone). */
static struct { volatile pid_t tid; int cpu; } claims[DT_MAX_THREADS];

static void claim_for(pid_t tid, int cpu)
{
	struct dt_thread *target = find_observed(tid);

	if (target) {
		target->pending_cpu = cpu;
		return;
	}
	for (int i = 0; i < DT_MAX_THREADS; i++)
		if (!claims[i].tid) {
			claims[i].cpu = cpu;
			__atomic_store_n(&claims[i].tid, tid, __ATOMIC_RELEASE);
			return;
		}
}

static int claimed_cpu(pid_t tid)
{
	for (int i = 0; i < DT_MAX_THREADS; i++)
		if (__atomic_load_n(&claims[i].tid, __ATOMIC_ACQUIRE) == tid) {
			claims[i].tid = 0;
			return claims[i].cpu;
		}
	return -1;
}

/* A watched thread that is not chosen pins itself (or another) to CPUs a
 * detached thread owns: it would compete with it there.  The mask loses
 * those CPUs (all of them lost: the housekeeping CPUs instead); a[2] then
 * points at the runtime's copy, which lives until the call is made. */
static __thread cpu_set_t kept_off;

static void keep_off_detached(const long a[6])
{
	cpu_set_t taken, both;
	size_t size = (size_t)a[1] < sizeof(kept_off) ? (size_t)a[1] : sizeof(kept_off);

	cpus_in_use(&taken);
	CPU_ZERO(&kept_off);
	memcpy(&kept_off, (const void *)a[2], size);
	CPU_AND(&both, &kept_off, &taken);
	if (!CPU_COUNT(&both))
		return;
	CPU_XOR(&kept_off, &kept_off, &both);
	if (!CPU_COUNT(&kept_off))
		kept_off = dt_hk_mask;
	((long *)a)[2] = (long)&kept_off;
	((long *)a)[1] = (long)sizeof(kept_off);
}

/* The program's first thread, detached at start, holds CPU c: a thread
 * that pins itself there is the one the program measures with, and takes
 * c over.  The first thread moves to another free CPU of -c, or leaves
 * the detached CPUs at once (the kernel moves it to the housekeeping CPUs)
 * and becomes a watched thread at its next call (thread_evicted). */
static bool take_over(int c)
{
	struct dt_thread *first = NULL;
	cpu_set_t to;
	int other;

	lock(&list_lock);
	for (struct dt_thread *t = all_threads; t; t = t->next)
		if (!t->observed && !t->evicted && t->cpu == c && t->tid == dt_cfg.pid && t->stats->state == 1)
			first = t;
	unlock(&list_lock);
	if (!first)
		return false;
	if ((other = claim_cpu(-1)) >= 0) {
		CPU_ZERO(&to);
		CPU_SET(other, &to);
		first->cpu = first->stats->cpu = other;
		sys_call3(SYS_sched_setaffinity, first->tid, sizeof(to), &to);
		dt_verbose("tid %d moved to CPU %d for a thread pinned to CPU %d", (int)first->tid, other, c);
		return true;
	}
	__atomic_store_n(&first->evicted, true, __ATOMIC_RELEASE);
	placement_home(first->tid);
	dt_verbose("tid %d leaves CPU %d to a thread pinned there", (int)first->tid, c);
	return true;
}

/* Ours, at the next call of a detached thread another took the CPU from:
 * its proxy goes and it is watched from now on, with the scheduling
 * settings it believes in made real (off the detached CPUs). */
void thread_evicted(struct dt_thread *t)
{
	cpu_set_t mine, taken;

	if (t->depth > 0)
		return;                 /* a handler on top of a forwarded call: later */
	proxy_stop(t);
	t->stats->state = 0;
	t->evicted = false;
	t->observed = true;
	t->pending_cpu = -1;
	cpus_in_use(&taken);
	CPU_AND(&mine, &t->app.affinity, &taken);
	CPU_XOR(&mine, &t->app.affinity, &mine);
	if (!CPU_COUNT(&mine))
		mine = dt_hk_mask;
	sys_call3(SYS_sched_setaffinity, 0, sizeof(mine), &mine);
	sys_call3(SYS_sched_setattr, 0, &t->app.attr, 0);
}

/* A thread pins itself or another (a[0]) to CPUs: with the `pinned` rule, a
 * thread pinned to exactly one CPU of -c is chosen, and detached on it.
 * t is the caller, watched or detached.  Returns true when t itself was
 * detached.  Otherwise watched threads are kept off detached CPUs, and a
 * detached thread pinning another onto one is warned about. */
static bool thread_pinning(struct dt_thread *t, long a[6])
{
	cpu_set_t one, taken;
	int cpu;

	if (!a[2] || (size_t)a[1] < 8)
		return false;
	CPU_ZERO(&one);
	memcpy(&one, (const void *)a[2], (size_t)a[1] < sizeof(one) ? (size_t)a[1] : sizeof(one));
	int c = cpuset_nth(&one, 0);
	pid_t tid = a[0] ? (pid_t)a[0] : t->tid;
	if (!rule("pinned", NULL, 0, 0)) {
		cpus_in_use(&taken);
		if (t->observed)
			keep_off_detached(a);
		else if (CPU_COUNT(&one) == 1 && CPU_ISSET(c, &taken))
			dt_warn("tid %d is pinned to CPU %d, where a detached thread runs: "
				"they share it; NOTE: without --select first, a thread pinned to one CPU of -c is the "
				"one detached there", (int)tid, c);
		return false;
	}
	if (CPU_COUNT(&one) != 1 || !CPU_ISSET(c, &dt_cfg.cpus) || tid == dt_cfg.pid) {
		/* `pinned` chooses threads the program created, not its first
		 * thread (cyclictest pins that one too, to the same CPU) */
		if (t->observed)
			keep_off_detached(a);
		return false;
	}
	if ((cpu = claim_cpu(c)) < 0 && take_over(c))
		cpu = c;
	if (cpu < 0) {
		if (t->observed)
			keep_off_detached(a);
		return false;
	}
	if (tid == t->tid) {
		detach_thread(t, cpu);
		return true;
	}
	/* pinned by its creator: into the partition first, or the creator's
	 * call fails; the thread detaches itself at its next call */
	struct partition p;
	if (!partition_find(&p) && CPU_ISSET(cpu, &p.cpus))
		partition_add_thread(&p, tid);
	claim_for(tid, cpu);
	return false;
}

/* A call of a watched thread, before it runs: may choose a thread.  A
 * thread that chooses itself is detached here and now, so that the call
 * itself (the pinning) already runs as a detached thread's. */
void observe_call(struct dt_thread *t, long nr, const long a[6])
{
	int cpu;

	if (nr == SYS_prctl && a[0] == PR_SET_NAME && a[1]) {
		char name[16];
		snprintf(name, sizeof(name), "%s", (const char *)a[1]);
		if (name_chosen(name) && (cpu = claim_cpu(-1)) >= 0)
			detach_thread(t, cpu);
		return;
	}
	if (nr == SYS_sched_setaffinity)
		thread_pinning(t, (long *)a);
}

/* ---- threads and children -------------------------------------------------- */

void start_threads(void)
{
	struct dt_thread *t = thread_alloc();
	int cpu;

	dt_observing = strcmp(dt_cfg.select, "first") != 0;
	if (rule("first", NULL, 0, 0)) {
		cpu = claim_cpu(-1);
		detach_thread(t, cpu);
		return;
	}
	observe_thread(t);
}

/* A fork child of the detached thread: an ordinary process from here on.
 * Runs inside the trap handler of the child, whose Syscall User Dispatch
 * the kernel has already turned off. */
void dt_fork_child(void)
{
	dt_self = NULL;
	dt_cfg.active = false;
	dt_child_placement();
}

/* The parent of a vfork child is running again: the child exec'd or left. */
void dt_vfork_parent_resumed(void)
{
	if (dt_self)
		dt_self->vfork_child = 0;
}

/* The parent's half of the same, right after clone on a detached thread:
 * the child, born on the detached CPU, cannot run there before the next
 * scheduler tick (its parent never sleeps); moved now, it runs at once on a
 * housekeeping CPU.  Not for a watched parent: its child runs at once and
 * may have detached itself already.  Raw calls: we are inside the trap. */
void place_child(pid_t tid)
{
	placement_home(tid);
}

void dt_child_placement(void)
{
	/* A child sharing our TLS (vfork, posix_spawn) sees the parent's dt_self:
	 * it must not take itself for the detached thread (trampoline.S). */
	if (dt_self) {
		dt_self->vfork_child = 1;
		sched_inherit(dt_self, 0);      /* vfork: the parent waits */
	}
	placement_home(0);
	if (sys_call0(SYS_getpid) != dt_cfg.pid)
		cputime_child();        /* a new process */
	if (!dt_self && dt_observing && dt_cfg.active && !dt_is_proxy) {
		struct dt_thread *t = thread_alloc();
		int n = atomic_fetch_add(&created, 1) + 1;
		observe_thread(t);
		if (order_chosen(n))
			t->pending_cpu = claim_cpu(-1);
		else
			t->pending_cpu = claimed_cpu(t->tid);
	}
}

/* sched_setaffinity of a detached thread naming another thread: the
 * `pinned` rule may choose that one (a watched caller went through
 * observe_call already).  The affinity itself is sched.c's. */
long do_setaffinity(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	if (!t->observed && a[0] != 0 && a[0] != t->tid)
		thread_pinning(t, a);
	return do_affinity(t, nr, a, uc);
}
