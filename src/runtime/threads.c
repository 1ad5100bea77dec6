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
#include "runtime/call.h"
#include "runtime/claims.h"
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
#include <sys/resource.h>
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
static const struct thread_rules *rules;  /* --select's (select.c, set by init.c) */

void threads_set_rules(const struct thread_rules *r)
{
	rules = r;
}

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

/* Raw mmap: this runs in clone children before libc is theirs.  NULL when
 * memory for it cannot be had. */
struct dt_thread *thread_alloc(void)
{
	struct dt_thread *t = (struct dt_thread *)sys_call6(SYS_mmap, 0, sizeof(*t), PROT_READ | PROT_WRITE,
							    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if ((long)t < 0 && (long)t > -4096)
		return NULL;
	t->pending_cpu = -1;
	t->stats = &t->own_stats;   /* until it is detached and gets a registry slot */
	if (stack_give(t)) {
		sys_call2(SYS_munmap, t, sizeof(*t));
		return NULL;
	}
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
 * free one), free in this process and system-wide (claims.c: no other
 * process has a detached thread there).  -EBUSY when none is left; then
 * *holder (when not NULL) is the pid of another process holding one the
 * request could have had, or 0.  Raw calls: safe in the trap. */
int claim_cpu_from(int want, pid_t *holder)
{
	int got = -EBUSY;
	pid_t other;

	if (holder)
		*holder = 0;
	lock(&cpu_lock);
	for (int i = 0; i < CPU_SETSIZE && got < 0; i++) {
		if (!CPU_ISSET(i, &dt_cfg.cpus) || CPU_ISSET(i, &cpus_taken) || (want >= 0 && want != i))
			continue;
		if (claims_take(i, &other)) {
			if (holder && !*holder)
				*holder = other;
			continue;
		}
		got = i;
	}
	if (got >= 0)
		CPU_SET(got, &cpus_taken);
	unlock(&cpu_lock);
	return got;
}

int claim_cpu(int want)
{
	return claim_cpu_from(want, NULL);
}

/* A detached thread exits or attaches again: its CPU is free for another. */
void release_cpu(int cpu)
{
	lock(&cpu_lock);
	CPU_CLR(cpu, &cpus_taken);
	claims_drop(cpu);
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

static int set_policy(pid_t tid)
{
	struct sched_param sp = { 0 };
	int policy = SCHED_OTHER;

	if (dt_cfg.policy[0] == 'f' || dt_cfg.policy[0] == 'r') {
		policy = dt_cfg.policy[0] == 'f' ? SCHED_FIFO : SCHED_RR;
		sp.sched_priority = atoi(dt_cfg.policy + 2);
	} else if (dt_cfg.keep_policy) {
		return 0;       /* the program's own policy, for real (sched.c) */
	}
	/* SCHED_RESET_ON_FORK: children and new threads start as SCHED_OTHER,
	 * never as a real-time task that would starve behind its parent. */
	if (sched_setscheduler(tid, policy | SCHED_RESET_ON_FORK, &sp)) {
		int err = -errno;
		dt_verbose("cannot set policy %s on tid %d: %s", dt_cfg.policy, (int)tid, strerror(errno));
		return err;
	}
	return 0;
}

/* Into the `detach isolate` partition, when the CPU belongs to one: only
 * then may the thread run there (the program starts among the
 * housekeeping tasks).  Remembers where the program came from. */
static int enter_partition(struct dt_thread *t)
{
	struct partition p;
	const char *home;
	int err;

	if (partition_find(&p) || !CPU_ISSET(t->cpu, &p.cpus))
		return 0;
	home = dt_cfg.home_cpuset[0] ? dt_cfg.home_cpuset : "/";
	snprintf(dt_cfg.home_tasks, sizeof(dt_cfg.home_tasks), "%s%s/%s", p.root,
		 strcmp(home, "/") ? home : "", p.kind == CG_V2 ? "cgroup.threads" : "tasks");
	if ((err = partition_add_thread(&p, t->tid))) {
		dt_verbose("cannot move tid %d into the partition %s: %s", (int)t->tid, p.dir, strerror(-err));
		return err;
	}
	dt_verbose("tid %d joined the partition %s", (int)t->tid, p.dir);
	return 0;
}

/* 0, or -errno with the thread where it was (CPUs, cpuset, policy). */
static int place_and_lock(struct dt_thread *t)
{
	cpu_set_t one;
	int err;

	if ((err = enter_partition(t)))
		return err;
	CPU_ZERO(&one);
	CPU_SET(t->cpu, &one);
	if (sched_setaffinity(t->tid, sizeof(one), &one)) {
		err = -errno;
		dt_verbose("cannot pin tid %d to CPU %d: %s", (int)t->tid, t->cpu, strerror(errno));
	} else if ((err = set_policy(t->tid))) {
		sys_call3(SYS_sched_setaffinity, 0, sizeof(t->app.affinity), &t->app.affinity);
	}
	if (err) {
		placement_home(0);      /* out of the partition again */
		sys_call3(SYS_sched_setaffinity, 0, sizeof(t->app.affinity), &t->app.affinity);
		return err;
	}
	memlock_thread(t);
	return 0;
}

static int arm(struct dt_thread *t)
{
	int err = sud_arm(t);

	if (err == -EINVAL)
		dt_warn("Syscall User Dispatch is not available (prctl: %s); "
			"it needs Linux 5.11 or later built with CONFIG_GENERIC_ENTRY", strerror(-err));
	else if (err)
		dt_warn("cannot arm Syscall User Dispatch: %s", strerror(-err));
	return err;
}

/* The kernel's figures of the calling thread (faults, switches).
 * getrusage(RUSAGE_THREAD) gives the four that /proc/self/task/TID/stat and
 * status show, without looking that directory up: a /proc/<tgid>/task/<tid>
 * looked up once leaves dentries that the thread's exit must remove, and
 * an exit starved there stalled its process (bench_evlat beside
 * stress-ng).  Raw: it may run inside the trap.  All 0 if refused. */
static void own_counters(struct kernel_counters *k)
{
	struct rusage ru;

	memset(k, 0, sizeof(*k));
	if (sys_call2(SYS_getrusage, RUSAGE_THREAD, &ru))
		return;
	k->minflt = (uint64_t)ru.ru_minflt;
	k->majflt = (uint64_t)ru.ru_majflt;
	k->vol_switches = (uint64_t)ru.ru_nvcsw;
	k->invol_switches = (uint64_t)ru.ru_nivcsw;
}

/* ---- what a proxy does for the services above it (proxy.h) -------------- */

static void proxy_retires(struct dt_thread *t)
{
	cputime_proxy_retires(t->stats);
}

/* on the proxy, as the thread exits or attaches again (its kernel figures
 * are its own: thread_end) */
static void proxy_counters(struct dt_thread *t)
{
	cputime_proxy_ends(t->stats);
	t->stats->ended = 1;
}

static const struct proxy_hooks thread_proxy_hooks = {
	.retires = proxy_retires,
	.counters = proxy_counters,
	.stats = stats_finish,
};

/* Makes the calling thread a detached thread on cpu (claimed already), from
 * a fresh struct (t NULL) or from a watched one.  Until the trap is armed
 * at the end it may use libc; a watched thread, armed already, lets its
 * own calls through meanwhile (selector ALLOW).  0, or -errno with nothing
 * half made: the proxy stopped, the slot, memory and CPU claim given back,
 * the thread as it was (watched again, or ordinary). */
int detach_thread(struct dt_thread *t, int cpu)
{
	struct dt_thread_stats *stats_was;
	bool fresh = !t, watched = t && t->observed;
	unsigned node = 0;
	int err;

	if (!t && !(t = thread_alloc())) {
		release_cpu(cpu);
		return -ENOMEM;
	}
	stats_was = t->stats;
	/* Set-up runs libc: its calls must run natively, not trap (selector
	 * ALLOW) nor enter the trampoline's detached path (dt_self NULL). */
	t->selector = 0;                        /* SYSCALL_DISPATCH_FILTER_ALLOW */
	dt_self = NULL;
	t->observed = false;
	t->pending_cpu = -1;
	t->tid = (pid_t)syscall(SYS_gettid);
	t->persona = (uint32_t)syscall(SYS_personality, 0xffffffff);
	t->cpu = cpu;
	t->stats = registry_slot(t->tid, cpu);
	if (!t->stats) {
		dt_verbose("no statistics slot for tid %d (%d detached threads at most)", (int)t->tid, DT_MAX_THREADS);
		err = -EBUSY;
		goto undo_slot;
	}
	sched_capture(t);               /* what the program sees from now on */
	/* The proxy first: born where the thread runs now, outside the
	 * detached CPU, it moves to the housekeeping CPUs at once.  Born after
	 * the pinning it would wait on the detached CPU, behind a thread that
	 * never sleeps, for the next scheduler tick. */
	proxy_hooks_set(&thread_proxy_hooks);
	if ((err = proxy_start(t))) {
		dt_verbose("cannot start a proxy thread: %s", strerror(-err));
		goto undo_proxy;
	}
	if ((err = place_and_lock(t)))
		goto undo_place;
	syscall(SYS_getcpu, NULL, &node, NULL);
	t->node = (int)node;
	t->stats->proxy_tid = t->proxy_tid;
	dt_verbose("tid %d detached on CPU %d (policy %s), proxy tid %d on CPUs %s (%s), mode %s",
		   (int)t->tid, cpu, dt_cfg.policy, (int)t->proxy_tid,
		   cpulist_format(&dt_cfg.housekeeping, (char[256]){ 0 }, 256),
		   contract_proxies[dt_cfg.proxy_wait], dt_cfg.mode);
	dt_self = t;
	own_counters(&t->stats->at_detach);
	t->stats->state = 1;
	if (!(err = arm(t)))                    /* selector BLOCK from here */
		return 0;
	dt_self = NULL;
	t->stats->state = 0;
	memlock_release(t);
	placement_home(0);
	sys_call3(SYS_sched_setaffinity, 0, sizeof(t->app.affinity), &t->app.affinity);
	sys_call3(SYS_sched_setattr, 0, &t->app.attr, 0);
undo_place:
	proxy_stop(t);
undo_proxy:
	registry_slot_free(t->stats);
undo_slot:
	t->stats = stats_was;
	release_cpu(cpu);
	if (fresh) {
		thread_free(t);
	} else if (watched) {
		t->observed = true;
		dt_self = t;
		t->selector = SUD_BLOCK;        /* its calls trap again, as before */
	}
	return err;
}

/* A watched thread: armed, its calls run on itself (dispatch.c). */
static void observe_thread(struct dt_thread *t)
{
	t->observed = true;
	t->tid = (pid_t)sys_call0(SYS_gettid);
	dt_self = t;
	arm(t);
}

/* The end of a detached or watched thread, every step in one order: its
 * figures and its proxy first (proxy_stop: the kernel's counters read
 * while it still runs there), the trap, the locked memory, the thread's
 * place (the affinity and policy the program set, or had when it was
 * detached, made real: sched.c keeps them), and its CPU given back last,
 * once it is off it.
 *   THREAD_EXIT     it exits (do_exit): the struct goes too; its exit is
 *                   the next thing it does
 *   THREAD_ATTACH   dt_attach(): an ordinary thread again, back on the
 *                   housekeeping CPUs and cpuset
 *   THREAD_EVICTED  another thread took its CPU (select.c, take_over):
 *                   at its next call, it is watched from now on (still
 *                   armed, its own dt_self), kept off the detached CPUs;
 *                   the CPU is the other's.  Not inside a handler on top
 *                   of a forwarded call: then at a later call.
 * Raw calls but for dt_verbose: it runs inside the trap. */
void thread_end(struct dt_thread *t, enum thread_end how)
{
	bool detached = !t->observed;
	const uint64_t quiet = no_proxy_blocked();
	uint64_t mask = 0;
	cpu_set_t mine, taken;
	int cpu = t->cpu;

	if (how == THREAD_EVICTED && t->depth > 0)
		return;
	if (detached) {
		/* From the proxy's reply to DT_CMD_QUIT until dt_self is NULL
		 * (or the thread is watched) the thread is detached without a
		 * proxy, and proxy_stop waits for the proxy's exit: a handler
		 * of the program's that ran there would wait for nobody with
		 * its first forwarded call.  Its signals wait, as in a renewal
		 * (call.c), until the end; for good on an exit, where the
		 * kernel hands a signal of the process pending on the thread to
		 * another (exit_signals), and one of the thread's own goes with
		 * it, as one that comes during its exit natively does.  But
		 * glibc's SIGSETXID and SIGCANCEL (no_proxy_blocked says why):
		 * their handlers' calls run on the thread (proxyless) from
		 * here on. */
		t->proxyless = true;
		sys_call4(SYS_rt_sigprocmask, SIG_BLOCK, &quiet, &mask, 8);
		/* An exit from a handler on top of a forwarded call: the
		 * proxy's commands would queue behind that call (a read that
		 * never returns: the exit hung); natively the thread's exit
		 * ends it */
		if (t->depth > 0)
			proxy_abandoned(t);
		own_counters(&t->stats->at_exit);
		proxy_stop(t);
		t->stats->state = 0;
	}
	if (how != THREAD_EVICTED) {
		sud_disarm(t);
		dt_self = NULL;
	}
	memlock_release(t);
	switch (how) {
	case THREAD_EXIT:
		thread_free(t);         /* nothing of it is used from here */
		break;
	case THREAD_ATTACH:
		placement_home(0);
		sys_call3(SYS_sched_setaffinity, 0, sizeof(t->app.affinity), &t->app.affinity);
		sys_call3(SYS_sched_setattr, 0, &t->app.attr, 0);
		dt_verbose("tid %d attached again", (int)t->tid);
		break;
	case THREAD_EVICTED:
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
		if (detached)
			sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &mask, NULL, 8);
		return;                 /* the CPU is the thread's that took it */
	}
	if (detached) {
		release_cpu(cpu);       /* for the next thread a rule chooses */
		if (how == THREAD_ATTACH)
			sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &mask, NULL, 8);
	}
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
	/* its own lock, that it lives (claims.c), before its registry file */
	claims_open();
	if ((err = env_adopt(contract, NULL)) || (err = registry_open())) {
		dt_warn("a forked child (pid %d) runs undetached: %s", (int)dt_cfg.pid, strerror(-err));
		return;
	}
	dt_cfg.active = true;
	pid_t holder;
	if ((cpu = claim_cpu_from(-1, &holder)) < 0) {
		char who[64] = "";
		if (holder)
			snprintf(who, sizeof(who), " (CPU %s: pid %d)",
				 cpulist_format(&dt_cfg.cpus, (char[256]){ 0 }, 256), (int)holder);
		dt_warn("a forked child (pid %d) runs undetached: every CPU of -c holds a detached thread%s",
			(int)dt_cfg.pid, who);
		return;
	}
	if ((err = detach_thread(NULL, cpu)))
		dt_warn("a forked child (pid %d) runs undetached: %s", (int)dt_cfg.pid, strerror(-err));
}

/* 0, or -errno (the first thread could not be detached: -EBUSY, every
 * CPU of -c holds another process's detached thread, that process in
 * *holder). */
int start_threads(pid_t *holder)
{
	struct dt_thread *t = thread_alloc();
	int cpu;

	*holder = 0;
	if (!t)
		return -ENOMEM;
	dt_observing = strcmp(dt_cfg.select, "first") != 0;
	if (rules->fork())
		pthread_atfork(NULL, NULL, forked_detach);
	if (rules->first()) {
		if ((cpu = claim_cpu_from(-1, holder)) < 0)
			return cpu;
		return detach_thread(t, cpu);
	}
	observe_thread(t);
	return 0;
}

/* A fork child of the detached thread: an ordinary process from here on.
 * Runs inside the trap handler of the child, whose Syscall User Dispatch
 * the kernel has already turned off. */
void dt_fork_child(const struct sandbox_filter *inherit)
{
	/* the `fork` rule; not a child the program's seccomp filters judge in
	 * the kernel (below): the runtime's own calls would be judged too */
	fork_chosen = dt_cfg.active && !inherit && rules->fork();
	if (fork_chosen)
		sched_carry_forked();
	dt_self = NULL;
	dt_cfg.active = false;
	CPU_ZERO(&cpus_taken);          /* the parent's, as are its locks */
	claims_fork_child();
	dt_child_placement(inherit);
}

/* The parent of a vfork child is running again: the child exec'd or left.
 * uc: the copy of the trap's frame it leaves through (stubs.S,
 * sys_clone_resume), not back through the end of a moved trap, which says
 * that no moved trap's work is in use any more (intercept.c): said here.
 * Left up, a handler's call on the program's alternate stack moved a
 * level lower than it needed to (stack.c), and nested ones ran the
 * runtime's work in place once the levels were used up, until main code
 * trapped again: in rewrite mode, maybe never.  NULL: a
 * vfork child on a stack of its own, the parent returns the usual way. */
void dt_vfork_parent_resumed(const void *uc)
{
	if (dt_self) {
		dt_self->vfork_child = 0;
		if (uc)
			stack_trap_leaves(dt_self, (uintptr_t)((const ucontext_t *)uc)->uc_mcontext.gregs[REG_RSP]);
	}
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
		rules->new_thread(t);
	} else if (filters) {
		/* a thread the runtime will not see (--select first), a fork or
		 * vfork child: the kernel judges it, as natively.  Last: every
		 * call from here on is the program's (but our return) */
		sandbox_to_kernel(filters, true);
	}
}

