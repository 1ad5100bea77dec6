/* Which threads a program's rules choose (`detach run --select RULES`,
 * DETACH_SELECT; threads.c makes the chosen ones detached):
 *   first       the first thread
 *   order:N     the N-th thread the program creates (1 = the first created)
 *   name:GLOB   a thread that names itself so (prctl PR_SET_NAME; * and ?)
 *   pinned      a thread pinned to exactly one CPU of -c (sched_setaffinity
 *               by itself, or by its creator, as pthread attributes do)
 *   fork        the thread of each process the program forks (threads.c,
 *               forked_detach: LTP's harness forks its test body)
 * Layer 3 (docs/architecture.md), beside threads.c. */
#include "runtime/select.h"
#include "runtime/config.h"
#include "runtime/placement.h"
#include "runtime/sched.h"
#include "runtime/uaccess.h"
#include "lib/partition.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

static atomic_int created;            /* threads the program created, in order */

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

static bool observed_as(const struct dt_thread *t, long tid)
{
	return t->observed && t->tid == tid;
}

static struct dt_thread *find_observed(pid_t tid)
{
	return thread_find(observed_as, tid);
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

	CPU_ZERO(&kept_off);
	if (copy_from_user(&kept_off, (const void *)a[2], size))
		return;                 /* the kernel says EFAULT */
	cpus_claimed(&taken);
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
 * and becomes a watched thread at its next call (threads.c, thread_end). */
static bool first_detached_on(const struct dt_thread *t, long c)
{
	return !t->observed && !t->evicted && t->cpu == c && t->tid == dt_cfg.pid && t->stats->state == 1;
}

static bool take_over(int c)
{
	struct dt_thread *first = NULL;
	cpu_set_t to;
	int other;

	if (!(first = thread_find(first_detached_on, c)))
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
	if (copy_from_user(&one, (const void *)a[2], (size_t)a[1] < sizeof(one) ? (size_t)a[1] : sizeof(one)))
		return false;           /* the kernel says EFAULT */
	int c = cpuset_nth(&one, 0);
	pid_t tid = (pid_t)a[0] ? (pid_t)a[0] : t->tid;
	/* No thread at all (pid -1): the kernel fails the call, nothing changes
	 * here.  Only a thread of this program can be chosen (tgkill with
	 * signal 0 finds it in this thread group); another process is only
	 * kept off the detached CPUs. */
	if (tid <= 0)
		return false;
	if (tid != t->tid && sys_call3(SYS_tgkill, dt_cfg.pid, tid, 0) != 0) {
		if (t->observed)
			keep_off_detached(a);
		return false;
	}
	if (!rule("pinned", NULL, 0, 0)) {
		cpus_claimed(&taken);
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
	if (tid == t->tid)
		return detach_thread(t, cpu) == 0;
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
		if (strncpy_from_user(name, (const char *)a[1], sizeof(name) - 1) < 0)
			return;         /* the kernel says EFAULT */
		name[sizeof(name) - 1] = '\0';
		if (name_chosen(name) && (cpu = claim_cpu(-1)) >= 0)
			detach_thread(t, cpu);
		return;
	}
	if (nr == SYS_sched_setaffinity)
		thread_pinning(t, (long *)a);
}

bool select_first(void)
{
	return rule("first", NULL, 0, 0);
}

bool select_fork(void)
{
	return rule("fork", NULL, 0, 0);
}

/* A thread the program just created, watched (t): chosen by its creation
 * order, or claimed by its creator before it ran (pthread attributes). */
void select_new_thread(struct dt_thread *t)
{
	int n = atomic_fetch_add(&created, 1) + 1;

	if (order_chosen(n))
		t->pending_cpu = claim_cpu(-1);
	else
		t->pending_cpu = claimed_cpu(t->tid);
}

/* sched_setaffinity of a detached thread naming another thread: the
 * `pinned` rule may choose that one (a watched caller went through
 * observe_call already).  The affinity itself is sched.c's. */
long do_setaffinity(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	if (!t->observed && (pid_t)a[0] != 0 && (pid_t)a[0] != t->tid)
		thread_pinning(t, a);
	return do_affinity(t, nr, a, uc);
}
