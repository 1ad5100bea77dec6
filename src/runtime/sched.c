/* A detached thread's scheduling settings, as the program made them.
 *
 * In the paper the detached thread is scheduled by the microkernel, not by
 * Linux.  Here the kernel keeps the thread where detach put it (alone on its
 * CPU, at the policy of -P), and the thread's own requests about itself
 * (sched_setscheduler, sched_setparam, sched_setattr, setpriority/nice,
 * sched_setaffinity, with pid 0 or its own tid) are kept by the runtime:
 * checked as the kernel checks them (EINVAL, EPERM, EACCES, E2BIG) and
 * reported back exactly as set by the matching get calls.  So a spinning
 * detached thread that makes itself SCHED_FIFO is not throttled, and the
 * program never sees the runtime's SCHED_RESET_ON_FORK or CPU.  The settings
 * start as the thread had them when it was detached and travel across
 * execve (ENV_SCHED).  Other processes, and requests naming other threads,
 * see and change the kernel's.  `detach run --keep-policy` (ENV_KEEP_POLICY)
 * applies the requests for real instead. */
#include "runtime/sched.h"
#include "runtime/config.h"
#include "runtime/env.h"
#include "runtime/uaccess.h"
#include "lib/contract.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#define SCHED_FLAG_RESET_ON_FORK  0x01      /* include/uapi/linux/sched.h */
#define SCHED_FLAG_KEEP_POLICY    0x08
#define SCHED_FLAG_KEEP_PARAMS    0x10
#define SCHED_FLAG_UTIL_CLAMP_MIN 0x20
#define SCHED_FLAG_UTIL_CLAMP_MAX 0x40
#define SCHED_FLAG_ALL_K          0x7f      /* the kernel's SCHED_FLAG_ALL */
#define SCHED_ATTR_SIZE_VER0      48
#define SETPARAM_POLICY           (-1)
#define DL_PERIOD_MIN_NS          100000ull        /* sched_deadline_period_min_us */
#define DL_PERIOD_MAX_NS          4194304000000ull /* sched_deadline_period_max_us */
#define UCLAMP_MAX_VALUE          1024u
#define PAGE_SIZE_K               4096

static cpu_set_t online;             /* where sched_setaffinity may point */
static long kmask_size;              /* the kernel's cpumask_size() */
static int nr_cpu_ids;
static struct app_sched carried;     /* the exec'ing thread's, from ENV_SCHED */
static bool have_carried;

static bool is_rt(uint32_t p) { return p == SCHED_FIFO || p == SCHED_RR; }
static bool is_fair(uint32_t p) { return p == SCHED_OTHER || p == SCHED_BATCH || p == SCHED_IDLE; }
static bool is_valid(uint32_t p) { return is_fair(p) || is_rt(p) || p == SCHED_DEADLINE; }

static bool names_self(const struct dt_thread *t, long pid)
{
	pid_t p = (pid_t)pid;   /* an int argument: the register's upper half is not the program's */

	return !dt_cfg.keep_policy && !t->observed && (p == 0 || p == t->tid);
}

/* ---- the kernel's checks (kernel/sched/syscalls.c) ------------------------ */

static uint64_t rlimit_cur(int res)
{
	struct rlimit rl;

	if (sys_call4(SYS_prlimit64, 0, res, NULL, &rl))
		return 0;
	return rl.rlim_cur;
}

/* can_nice(): RLIMIT_NICE is 20 - nice */
static bool can_nice(int nice)
{
	return (uint64_t)(20 - nice) <= rlimit_cur(RLIMIT_NICE) || thread_capable(CAP_SYS_NICE);
}

static bool dl_params_ok(const struct kernel_sched_attr *a)
{
	uint64_t period = a->sched_period ? a->sched_period : a->sched_deadline;

	if (!a->sched_deadline || a->sched_runtime < (1ull << 10) ||
	    (a->sched_deadline | a->sched_period) & (1ull << 63))
		return false;
	if (period < a->sched_deadline || a->sched_deadline < a->sched_runtime)
		return false;
	return period >= DL_PERIOD_MIN_NS && period <= DL_PERIOD_MAX_NS;
}

/* __sched_setscheduler's checks and effect on the kept settings. */
static long set_attr(struct dt_thread *t, struct kernel_sched_attr *a)
{
	struct app_sched *s = &t->app;
	uint32_t policy = a->sched_policy;
	bool reset = a->sched_flags & SCHED_FLAG_RESET_ON_FORK;

	if ((int)policy == SETPARAM_POLICY) {
		policy = s->attr.sched_policy;
		reset = s->attr.sched_flags & SCHED_FLAG_RESET_ON_FORK;
	} else if (!is_valid(policy)) {
		return -EINVAL;
	}
	if (a->sched_flags & ~(uint64_t)SCHED_FLAG_ALL_K)
		return -EINVAL;
	if (a->sched_flags & (SCHED_FLAG_UTIL_CLAMP_MIN | SCHED_FLAG_UTIL_CLAMP_MAX)) {
		uint32_t lo = a->sched_flags & SCHED_FLAG_UTIL_CLAMP_MIN ? a->sched_util_min : s->attr.sched_util_min;
		uint32_t hi = a->sched_flags & SCHED_FLAG_UTIL_CLAMP_MAX ? a->sched_util_max : s->attr.sched_util_max;
		if ((lo > UCLAMP_MAX_VALUE && lo != (uint32_t)-1) || (hi > UCLAMP_MAX_VALUE && hi != (uint32_t)-1) ||
		    (lo != (uint32_t)-1 && hi != (uint32_t)-1 && lo > hi))
			return -EINVAL;
	}
	if (a->sched_priority > 99)
		return -EINVAL;
	if ((policy == SCHED_DEADLINE && !dl_params_ok(a)) || is_rt(policy) != (a->sched_priority != 0))
		return -EINVAL;
	if (!thread_capable(CAP_SYS_NICE)) {
		if (is_fair(policy) && a->sched_nice < s->attr.sched_nice && !can_nice(a->sched_nice))
			return -EPERM;
		if (is_rt(policy)) {
			uint64_t rtprio = rlimit_cur(RLIMIT_RTPRIO);
			if (policy != s->attr.sched_policy && !rtprio)
				return -EPERM;
			if (a->sched_priority > s->attr.sched_priority && a->sched_priority > rtprio)
				return -EPERM;
		}
		if (policy == SCHED_DEADLINE)
			return -EPERM;
		if (s->attr.sched_policy == SCHED_IDLE && policy != SCHED_IDLE && !can_nice(s->attr.sched_nice))
			return -EPERM;
		if ((s->attr.sched_flags & SCHED_FLAG_RESET_ON_FORK) && !reset)
			return -EPERM;
	}
	s->attr.sched_flags = (s->attr.sched_flags & ~(uint64_t)SCHED_FLAG_RESET_ON_FORK) |
			      (reset ? SCHED_FLAG_RESET_ON_FORK : 0);
	if (a->sched_flags & SCHED_FLAG_UTIL_CLAMP_MIN)
		s->attr.sched_util_min = a->sched_util_min == (uint32_t)-1 ? 0 : a->sched_util_min;
	if (a->sched_flags & SCHED_FLAG_UTIL_CLAMP_MAX)
		s->attr.sched_util_max = a->sched_util_max == (uint32_t)-1 ? UCLAMP_MAX_VALUE : a->sched_util_max;
	if (a->sched_flags & SCHED_FLAG_KEEP_PARAMS)
		return 0;
	s->attr.sched_policy = policy;
	s->attr.sched_priority = a->sched_priority;
	if (is_fair(policy))
		s->attr.sched_nice = a->sched_nice;
	if (policy == SCHED_DEADLINE) {
		s->attr.sched_runtime = a->sched_runtime;
		s->attr.sched_deadline = a->sched_deadline;
		s->attr.sched_period = a->sched_period ? a->sched_period : a->sched_deadline;
	} else {
		s->attr.sched_runtime = s->attr.sched_deadline = s->attr.sched_period = 0;
	}
	return 0;
}

/* ---- the calls ------------------------------------------------------------ */

/* The program makes its detached thread real-time itself under
 * --keep-policy: it spins, so with RT throttling on it loses up to 50 ms of
 * every second.  Said once, as `detach run -P` would have. */
static void warn_rt(struct dt_thread *t, long pid, int policy)
{
	static bool said;

	if ((pid == 0 || pid == t->tid) && is_rt((uint32_t)(policy & ~SCHED_RESET_ON_FORK)) &&
	    dt_cfg.rt_throttled && !said && !t->observed) {
		said = true;
		dt_warn("the program gives its detached thread a real-time policy while RT throttling is on: "
			"it spins, so it loses up to 50 ms of every second when other tasks want its CPU "
			"(detach isolate turns throttling off)");
	}
}

static long forward_tid(struct dt_thread *t, long nr, const long *a, int i)
{
	long b[6];

	memcpy(b, a, sizeof(b));
	if (b[i] == 0)
		b[i] = t->tid;
	return forward(t, nr, b);
}

/* sched_setscheduler, sched_setparam, sched_setattr */
long do_sched_set(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	struct kernel_sched_attr k;
	const struct sched_param *sp = (const struct sched_param *)(nr == SYS_sched_setparam ? a[1] : a[2]);
	struct sched_param p;

	(void)uc;
	if (!names_self(t, a[0])) {
		if (nr == SYS_sched_setscheduler)
			warn_rt(t, a[0], (int)a[1]);
		if (nr == SYS_sched_setattr && a[1] &&
		    !copy_from_user(&k, (const void *)a[1], offsetof(struct kernel_sched_attr, sched_flags)))
			warn_rt(t, a[0], (int)k.sched_policy);
		return forward_tid(t, nr, a, 0);
	}
	count(t, nr, &t->stats->emulated);
	memset(&k, 0, sizeof(k));
	if (nr == SYS_sched_setattr) {
		/* sched_copy_attr, as the kernel reads it: size (EFAULT), then the
		 * whole of it (EFAULT), a tail past ours zero (E2BIG) */
		struct kernel_sched_attr *u = (struct kernel_sched_attr *)a[1];
		char buf[PAGE_SIZE_K];
		uint32_t size;
		if (!u || a[2])
			return -EINVAL;
		if (copy_from_user(&size, &u->size, sizeof(size)))
			return -EFAULT;
		size = size ? size : SCHED_ATTR_SIZE_VER0;
		if (size < SCHED_ATTR_SIZE_VER0 || size > PAGE_SIZE_K) {
			uint32_t ours = sizeof(k);
			(void)copy_to_user(&u->size, &ours, sizeof(ours));   /* unchecked, as put_user there */
			return -E2BIG;
		}
		if (copy_from_user(buf, u, size))
			return -EFAULT;
		for (uint32_t i = sizeof(k); i < size; i++)
			if (buf[i])
				return -E2BIG;
		memcpy(&k, buf, size < sizeof(k) ? size : sizeof(k));
		if ((k.sched_flags & (SCHED_FLAG_UTIL_CLAMP_MIN | SCHED_FLAG_UTIL_CLAMP_MAX)) && size < sizeof(k))
			return -EINVAL;
		k.sched_nice = k.sched_nice < -20 ? -20 : k.sched_nice > 19 ? 19 : k.sched_nice;
		if ((int)k.sched_policy < 0)
			return -EINVAL;
		if (k.sched_flags & SCHED_FLAG_KEEP_POLICY)
			k.sched_policy = (uint32_t)SETPARAM_POLICY;
		return set_attr(t, &k);
	}
	if (!sp || (nr == SYS_sched_setscheduler && (int)a[1] < 0))
		return -EINVAL;
	if (copy_from_user(&p, sp, sizeof(p)))
		return -EFAULT;
	k.sched_priority = (uint32_t)p.sched_priority;
	k.sched_nice = t->app.attr.sched_nice;
	if (nr == SYS_sched_setparam) {
		k.sched_policy = (uint32_t)SETPARAM_POLICY;
	} else {
		if ((int)a[1] < 0)
			return -EINVAL;
		k.sched_policy = (uint32_t)a[1] & ~(uint32_t)SCHED_RESET_ON_FORK;
		k.sched_flags = a[1] & SCHED_RESET_ON_FORK ? SCHED_FLAG_RESET_ON_FORK : 0;
	}
	return set_attr(t, &k);
}

/* sched_getscheduler, sched_getparam, sched_getattr */
long do_sched_get(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	const struct kernel_sched_attr *s = &t->app.attr;

	(void)uc;
	if (!names_self(t, a[0]))
		return forward_tid(t, nr, a, 0);
	count(t, nr, &t->stats->emulated);
	if (nr == SYS_sched_getscheduler)
		return (long)s->sched_policy | (s->sched_flags & SCHED_FLAG_RESET_ON_FORK ? SCHED_RESET_ON_FORK : 0);
	if (nr == SYS_sched_getparam) {
		struct sched_param p = { .sched_priority = is_rt(s->sched_policy) ? (int)s->sched_priority : 0 };
		if (!a[1])
			return -EINVAL;
		return copy_to_user((void *)a[1], &p, sizeof(p));
	}
	uint32_t size = (uint32_t)a[2];
	if (!a[1] || size > PAGE_SIZE_K || size < SCHED_ATTR_SIZE_VER0 || a[3])
		return -EINVAL;
	struct kernel_sched_attr k = *s;
	if (!is_fair(k.sched_policy))
		k.sched_nice = 0;                /* get_params reports one or the other */
	if (!is_rt(k.sched_policy))
		k.sched_priority = 0;
	/* sched_attr_copy_to_user: what fits of ours, the rest left as it was */
	k.size = size < sizeof(k) ? size : sizeof(k);
	return copy_to_user((void *)a[1], &k, k.size);
}

/* sched_setaffinity, sched_getaffinity */
long do_affinity(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	size_t len = (size_t)a[1];
	cpu_set_t want;

	(void)uc;
	if (!names_self(t, a[0]))
		return forward_tid(t, nr, a, 0);
	count(t, nr, &t->stats->emulated);
	if (nr == SYS_sched_getaffinity) {
		if (len * 8 < (size_t)nr_cpu_ids || (len & (sizeof(long) - 1)))
			return -EINVAL;
		len = len < (size_t)kmask_size ? len : (size_t)kmask_size;
		CPU_AND(&want, &t->app.affinity, &online);
		if (copy_to_user((void *)a[2], &want, len))
			return -EFAULT;
		return (long)len;
	}
	CPU_ZERO(&want);
	if (len > (size_t)kmask_size)
		len = (size_t)kmask_size;
	if (copy_from_user(&want, (const void *)a[2], len))
		return -EFAULT;
	CPU_AND(&want, &want, &online);
	if (!CPU_COUNT(&want))
		return -EINVAL;
	t->app.affinity = want;
	return 0;
}

/* getpriority, setpriority (PRIO_PROCESS of this thread: its nice) and
 * ioprio_get/ioprio_set, whose pid 0 is the calling thread. */
long do_priority(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	/* PRIO_PROCESS is 0, IOPRIO_WHO_PROCESS is 1 */
	int who_process = (nr == SYS_getpriority || nr == SYS_setpriority) ? PRIO_PROCESS : 1;
	/* which and the nice value are ints: a register's upper half may hold
	 * anything (glibc's nice(-1) passes 0xffffffff), as the kernel ignores */
	int which = (int)a[0], value = (int)a[2];

	(void)uc;
	if (which != who_process || !names_self(t, a[1]) || (nr != SYS_getpriority && nr != SYS_setpriority))
		return which == who_process ? forward_tid(t, nr, a, 1) : forward(t, nr, a);
	count(t, nr, &t->stats->emulated);
	if (nr == SYS_getpriority)
		return 20 - t->app.attr.sched_nice;     /* the raw call's 40..1 */
	int nice = value < -20 ? -20 : value > 19 ? 19 : value;
	if (nice < t->app.attr.sched_nice && !can_nice(nice))
		return -EACCES;
	t->app.attr.sched_nice = nice;
	return 0;
}

/* ---- children ---------------------------------------------------------------- */

/* A child of the detached thread t (tid; 0: the caller, a vfork child)
 * inherits the settings t believes in, as it would natively, with the
 * kernel's SCHED_RESET_ON_FORK rules: the kernel gave it detach's policy,
 * reset on fork.  Affinity is the child placement's (threads.c). */
void sched_inherit(const struct dt_thread *t, pid_t tid)
{
	struct kernel_sched_attr a = t->app.attr;

	if (dt_cfg.keep_policy || t->observed)
		return;
	if (a.sched_flags & SCHED_FLAG_RESET_ON_FORK) {
		if (!is_fair(a.sched_policy)) {
			a.sched_policy = SCHED_OTHER;
			a.sched_priority = 0;
			a.sched_runtime = a.sched_deadline = a.sched_period = 0;
		}
		if (a.sched_nice < 0)
			a.sched_nice = 0;
	}
	a.sched_flags &= ~(uint64_t)(SCHED_FLAG_RESET_ON_FORK | SCHED_FLAG_KEEP_POLICY | SCHED_FLAG_KEEP_PARAMS);
	if (a.sched_policy == SCHED_OTHER && a.sched_nice == 0 && a.sched_util_min == 0 &&
	    a.sched_util_max == UCLAMP_MAX_VALUE)
		return;                 /* what the kernel gave it */
	a.size = sizeof(a);
	sys_call3(SYS_sched_setattr, tid, &a, 0);
}

/* ---- set-up and exec -------------------------------------------------------- */

void sched_start(void)
{
	char buf[256];
	cpu_set_t any, possible;
	int err;

	if (read_text_file("/sys/devices/system/cpu/online", buf, sizeof(buf)) || cpulist_parse(buf, &online))
		sched_getaffinity(0, sizeof(online), &online);
	/* the kernel's nr_cpu_ids: one past the last possible CPU; past what a
	 * cpu_set_t holds (-ERANGE), a mask of that size is too small */
	nr_cpu_ids = 1;
	if (!read_text_file("/sys/devices/system/cpu/possible", buf, sizeof(buf))) {
		if ((err = cpulist_parse(buf, &possible)) == -ERANGE)
			nr_cpu_ids = CPU_SETSIZE + 1;
		for (int c = 0; !err && c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &possible))
				nr_cpu_ids = c + 1;
	}
	kmask_size = sys_call3(SYS_sched_getaffinity, 0, sizeof(any), &any);
	if (kmask_size <= 0)
		kmask_size = sizeof(any);
}

/* The thread's settings as it had them, before detach changes the
 * kernel's: the exec'ing thread's from before its execve. */
static void settings_read(pid_t tid, struct app_sched *app)
{
	memset(app, 0, sizeof(*app));
	if (sys_call4(SYS_sched_getattr, tid, &app->attr, sizeof(app->attr), 0)) {
		app->attr.sched_nice = 20 - (int)sys_call2(SYS_getpriority, PRIO_PROCESS, tid);
		app->attr.sched_util_max = UCLAMP_MAX_VALUE;
	}
	app->attr.size = sizeof(app->attr);
	if (sys_call3(SYS_sched_getaffinity, tid, sizeof(app->affinity), &app->affinity) < 0)
		app->affinity = online;
}

void sched_capture(struct dt_thread *t)
{
	if (have_carried && t->tid == dt_cfg.pid) {
		t->app = carried;
		have_carried = false;
		return;
	}
	settings_read(t->tid, &t->app);
}

/* A fork child that the `fork` rule detaches later (threads.c), right
 * after fork, before the runtime moves it: what it inherited from its
 * parent is what it believes in once detached.  Raw calls: in the trap. */
void sched_carry_forked(void)
{
	settings_read(0, &carried);
	have_carried = true;
}

/* "policy,flags,nice+20,priority,runtime,deadline,period,util_min,util_max,
 * then the affinity's 64-bit words" */
void sched_from_env(const char *v)
{
	uint64_t f[9 + CPU_SETSIZE / 64] = { 0 };
	int n = 0;
	char *end;

	if (!v)
		return;
	for (; *v && n < (int)(sizeof(f) / sizeof(f[0])); n++, v = *end ? end + 1 : end) {
		f[n] = strtoull(v, &end, 10);
		if (end == v)
			return;
	}
	if (n < 10)
		return;
	carried.attr.size = sizeof(carried.attr);
	carried.attr.sched_policy = (uint32_t)f[0];
	carried.attr.sched_flags = f[1];
	carried.attr.sched_nice = (int)f[2] - 20;
	carried.attr.sched_priority = (uint32_t)f[3];
	carried.attr.sched_runtime = f[4];
	carried.attr.sched_deadline = f[5];
	carried.attr.sched_period = f[6];
	carried.attr.sched_util_min = (uint32_t)f[7];
	carried.attr.sched_util_max = (uint32_t)f[8];
	memcpy(&carried.affinity, f + 9, (size_t)(n - 9) * 8);
	have_carried = true;
}

/* ENV_SCHED=... for t's execve into buf (SCHED_ENV_MAX bytes): no
 * allocation, no libc call that enters the kernel (this runs in the trap). */
void sched_to_env(struct dt_thread *t, char *buf)
{
	const struct kernel_sched_attr *s = &t->app.attr;
	const uint64_t *w = (const uint64_t *)&t->app.affinity;
	int words = CPU_SETSIZE / 64;
	char *p = stpcpy(buf, ENV_SCHED "=");

	while (words > 1 && !w[words - 1])
		words--;
	p = env_put_u64(p, s->sched_policy, ',');
	p = env_put_u64(p, s->sched_flags, ',');
	p = env_put_u64(p, (uint64_t)(s->sched_nice + 20), ',');
	p = env_put_u64(p, s->sched_priority, ',');
	p = env_put_u64(p, s->sched_runtime, ',');
	p = env_put_u64(p, s->sched_deadline, ',');
	p = env_put_u64(p, s->sched_period, ',');
	p = env_put_u64(p, s->sched_util_min, ',');
	p = env_put_u64(p, s->sched_util_max, ',');
	for (int i = 0; i < words; i++)
		p = env_put_u64(p, w[i], i + 1 < words ? ',' : '\0');
}
