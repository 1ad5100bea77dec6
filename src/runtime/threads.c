/* The detached and watched threads: making a thread detached, placing
 * it, ending it.  Layer 3 (docs/architecture.md).
 *
 * By default the program's first thread is detached, as in the paper.
 * `detach run --select RULES` (DETACH_SELECT) chooses others, for programs
 * that measure or control in threads they create (cyclictest, oslat; the
 * rules are select.c's).  With rules other than `first`, every thread is watched ("observed"): its
 * system calls trap too, and run on the thread itself, except that clone
 * passes the watch on to the new thread and the calls above may choose it.
 * A chosen thread is detached at its next system call, on its own CPU with
 * its own proxy.  dt_detach() and dt_attach() (api.c) do the same on demand.
 */
#include "runtime/threads.h"
#include "runtime/select.h"
#include "runtime/config.h"
#include "runtime/cputime.h"
#include "runtime/env.h"
#include "runtime/memlock.h"
#include "runtime/placement.h"
#include "runtime/sandbox.h"
#include "runtime/sched.h"
#include "runtime/stack.h"
#include "runtime/stats.h"
#include "runtime/sud.h"
#include "lib/contract.h"
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
static volatile int cpu_lock;
static cpu_set_t cpus_taken;
static bool dt_observing;            /* rules other than `first` */
static bool fork_chosen;             /* a fork child the `fork` rule chose (forked_detach) */

static void lock(volatile int *l)
{
	while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
		cpu_relax();
}

static void unlock(volatile int *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

/* The first detached or watched thread for which want(t, key) holds. */
struct dt_thread *thread_find(bool (*want)(const struct dt_thread *t, long key), long key)
{
	struct dt_thread *found = NULL;

	lock(&list_lock);
	for (struct dt_thread *t = all_threads; t && !found; t = t->next)
		if (want(t, key))
			found = t;
	unlock(&list_lock);
	return found;
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
void cpus_claimed(cpu_set_t *out)
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
	cpus_claimed(&taken);
	CPU_AND(&mine, &t->app.affinity, &taken);
	CPU_XOR(&mine, &t->app.affinity, &mine);
	if (!CPU_COUNT(&mine))
		mine = dt_hk_mask;
	sys_call3(SYS_sched_setaffinity, 0, sizeof(mine), &mine);
	sys_call3(SYS_sched_setattr, 0, &t->app.attr, 0);
}

/* ---- threads and children -------------------------------------------------- */

/* The `fork` rule: a process the program forks runs its thread detached,
 * as a new detached program of its own (LTP's harness forks the test body,
 * lib/tst_test.c fork_testrun).  Chosen in the trap of the fork
 * (dt_fork_child), detached here, in the C library's fork handlers of the
 * child: only once fork() has made the child whole (its thread list, its
 * locks) may a proxy thread be created.  So a child of fork() only; one
 * of a raw clone, vfork or posix_spawn runs undetached.  The child becomes
 * a program of its own: its pid in the contract (an execve of it keeps it
 * detached), its registry entry, its statistics in FILE.PID, and `first`
 * its only rule (its own children are ordinary, as a detached thread's
 * are). */
static void forked_detach(void)
{
	char contract[sizeof(dt_cfg.stats_path) + 96];
	size_t len = sizeof(dt_cfg.stats_path);
	int cpu, err, n;

	if (!fork_chosen)
		return;
	fork_chosen = false;
	dt_cfg.pid = getpid();
	snprintf(dt_cfg.select, sizeof(dt_cfg.select), "first");
	dt_observing = false;
	clock_gettime(CLOCK_REALTIME, &dt_cfg.start);
	n = snprintf(contract, sizeof(contract), ENV_PID "=%d\n" ENV_SELECT "=first\n", (int)dt_cfg.pid);
	if (dt_cfg.stats_path[0]) {
		size_t at = strlen(dt_cfg.stats_path);
		if (snprintf(dt_cfg.stats_path + at, len - at, ".%d", (int)dt_cfg.pid) >= (int)(len - at))
			dt_cfg.stats_path[at] = '\0';  /* no room: the file of the process it forked from */
		snprintf(contract + n, sizeof(contract) - (size_t)n, ENV_STATS "=%s\n", dt_cfg.stats_path);
	}
	if ((err = env_adopt(contract, NULL)) || (err = registry_open())) {
		dt_warn("a forked child (pid %d) runs undetached: %s", (int)dt_cfg.pid, strerror(-err));
		return;
	}
	dt_cfg.active = true;
	if ((cpu = claim_cpu(-1)) < 0) {
		dt_warn("a forked child (pid %d) runs undetached: every CPU of -c holds a detached thread",
			(int)dt_cfg.pid);
		return;
	}
	detach_thread(NULL, cpu);
}

void start_threads(void)
{
	struct dt_thread *t = thread_alloc();
	int cpu;

	dt_observing = strcmp(dt_cfg.select, "first") != 0;
	if (select_fork())
		pthread_atfork(NULL, NULL, forked_detach);
	if (select_first()) {
		cpu = claim_cpu(-1);
		detach_thread(t, cpu);
		return;
	}
	observe_thread(t);
}

/* A fork child of the detached thread: an ordinary process from here on.
 * Runs inside the trap handler of the child, whose Syscall User Dispatch
 * the kernel has already turned off. */
void dt_fork_child(const struct sandbox_filter *inherit)
{
	/* the `fork` rule; not a child the program's seccomp filters judge in
	 * the kernel (below): the runtime's own calls would be judged too */
	fork_chosen = dt_cfg.active && !inherit && select_fork();
	if (fork_chosen)
		sched_carry_forked();
	dt_self = NULL;
	dt_cfg.active = false;
	dt_child_placement(inherit);
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

void dt_child_placement(const void *inherit)
{
	const struct sandbox_filter *filters = inherit;

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
		t->filters = filters;   /* judged as its parent's calls were */
		observe_thread(t);
		select_new_thread(t);
	} else if (filters) {
		/* a thread the runtime will not see (--select first), a fork or
		 * vfork child: the kernel judges it, as natively.  Last: every
		 * call from here on is the program's (but our return) */
		sandbox_to_kernel(filters, true);
	}
}

