/* CPU time as the program sees it.
 *
 * Whose clock: every encoding of "this thread's" CPU clock names the
 * detached thread, not the proxy that carries out its calls.  The kernel's
 * CPU-clock ids (include/linux/posix-timers_types.h) are negative: ~pid << 3
 * | PERTHREAD (4) | which (PROF 0, VIRT 1, SCHED 2), pid 0 meaning the
 * caller.  glibc passes CLOCK_THREAD_CPUTIME_ID (3) to clock_gettime but
 * MAKE_THREAD_CPUCLOCK(0, SCHED) (-2) to timer_create; pthread_getcpuclockid
 * gives MAKE_THREAD_CPUCLOCK(tid, SCHED).
 *
 * What it counts: a detached thread spins where the program would sleep
 * (timed waits, clock.c; forwarded calls, proxy.c), and its proxies spin or
 * poll beside it.  The kernel counts all of that as the program's CPU time.
 * The runtime counts the TSC cycles each detached thread waited (stats
 * `waited`), less the gaps in which it did not run at all (preempted on a
 * CPU it shares: the kernel did not count those, dt_cfg.off_cpu_cycles),
 * and takes them, and its proxies' own CPU time, out of what it
 * answers: the thread and process CPU clocks (clock_gettime), getrusage
 * (RUSAGE_SELF, RUSAGE_THREAD), times(), so clock() and every language's
 * process_time too.  These are read on the detached thread itself, so that
 * no wait of this call is in the kernel's figure.  Not translated: the
 * kernel's own CPU-time timers and itimers (timer_create on a CPU clock,
 * ITIMER_VIRTUAL, ITIMER_PROF), which count the waiting, and
 * /proc/<pid>/stat, /proc/thread-self/stat and schedstat.
 *
 * RLIMIT_CPU: the kernel would kill a program that waits long enough.
 * Where the runtime may raise the kernel's limit (root, CAP_SYS_RESOURCE, or
 * an unlimited hard limit), it lifts it, keeps the program's limit as the
 * program's own (getrlimit, setrlimit, prlimit of this process answer from
 * it), and a watchdog thread on the housekeeping CPUs sends SIGXCPU and
 * SIGKILL as the kernel would, by the program's CPU time.  Children get the
 * limit back for real (cputime_child).  The counts and the limit travel
 * across execve in ENV_CPUTIME. */
#include "runtime/cputime.h"
#include "runtime/uaccess.h"
#include "runtime/stats.h"
#include "runtime/config.h"
#include "runtime/env.h"
#include "lib/contract.h"

#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/times.h>

#define CPUCLOCK_PROF      0
#define CPUCLOCK_VIRT      1
#define CPUCLOCK_SCHED     2
#define CPUCLOCK_PERTHREAD 4
#define CPUCLOCK_WHICH(c)  ((c) & 3)
#define CPUCLOCK_PID(c)    ((pid_t)~((c) >> 3))
#define MAKE_PROCESS_CPUCLOCK(pid, which) ((clockid_t)((~(unsigned)(pid) << 3) | (unsigned)(which)))
#define MAKE_THREAD_CPUCLOCK(tid, which) MAKE_PROCESS_CPUCLOCK(tid, CPUCLOCK_PERTHREAD | (which))
#define USER_HZ 100                     /* times() ticks on x86-64 */
#define WATCH_NS 20000000l              /* the watchdog looks this often */

/* Carried over from the images before the last execve (ENV_CPUTIME). */
static struct {
	uint64_t thread_ns;             /* the exec'ing thread's waiting */
	uint64_t process_ns[3];         /* the runtime's process time, by which */
} carried;
/* The program's RLIMIT_CPU while the kernel's is lifted. */
static struct rlimit app_cpu_limit;
static volatile bool limit_kept;
/* A limit the runtime may not lift: timed waits sleep in the kernel. */
bool dt_cpu_limited;
#define LIMITED_SPIN_NS 100000          /* ... but for their last 100 us */

enum clock_kind { OTHER_CLOCK, THREAD_CLOCK, PROCESS_CLOCK };
/* What each answer last said (t->cpu_seen), by which or user/system. */
enum { SEEN_THREAD_CLOCK, SEEN_PROCESS_CLOCK, SEEN_RUSAGE_THREAD, SEEN_RUSAGE_SELF, SEEN_TIMES };

/* The waiting is measured as elapsed TSC cycles: on a CPU shared with other
 * work, a wait during which the thread was preempted takes out more than it
 * cost, and the parts of an answer are read one after another.  Whatever
 * the error, a CPU time the program reads never goes back. */
static uint64_t never_back(uint64_t *seen, uint64_t v)
{
	if (v < *seen)
		return *seen;
	return *seen = v;
}

/* What a clock id means for the caller t: whose clock, which kind, and
 * the id that names it from any thread of the process. */
static enum clock_kind classify(const struct dt_thread *t, clockid_t clk, pid_t *tid, int *which, clockid_t *id)
{
	*id = clk;
	*which = CPUCLOCK_SCHED;
	if (clk == CLOCK_PROCESS_CPUTIME_ID)
		return PROCESS_CLOCK;
	if (clk == CLOCK_THREAD_CPUTIME_ID) {
		*tid = t->tid;
		*id = MAKE_THREAD_CPUCLOCK(t->tid, CPUCLOCK_SCHED);
		return THREAD_CLOCK;
	}
	if (clk >= 0 || CPUCLOCK_WHICH(clk) == 3)
		return OTHER_CLOCK;             /* the kernel says what it is */
	*which = CPUCLOCK_WHICH(clk);
	if (clk & CPUCLOCK_PERTHREAD) {
		*tid = CPUCLOCK_PID(clk) ? CPUCLOCK_PID(clk) : t->tid;
		*id = MAKE_THREAD_CPUCLOCK(*tid, *which);
		return THREAD_CLOCK;
	}
	if (CPUCLOCK_PID(clk) == 0 || CPUCLOCK_PID(clk) == dt_cfg.pid)
		return PROCESS_CLOCK;
	return OTHER_CLOCK;
}

static uint64_t clock_read(clockid_t id)
{
	struct timespec ts;

	if (sys_call2(SYS_clock_gettime, id, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The TSC cycles tid waited for the runtime, in ns (every slot it had). */
static uint64_t thread_waited_ns(pid_t tid)
{
	uint64_t cycles = 0;

	for (int i = 0; dt_registry && i < dt_registry->nthreads; i++)
		if (dt_registry->threads[i].tid == tid)
			cycles += dt_registry->threads[i].waited;
	return tsc_cycles_to_ns(&dt_cfg.tsc, cycles) + (tid == dt_cfg.pid ? carried.thread_ns : 0);
}

/* The runtime's share of the process's CPU time, by which: every detached
 * thread's waiting, every proxy's time (a proxy that ended left its own). */
static void runtime_process_ns(uint64_t ns[3])
{
	uint64_t cycles = 0;

	memcpy(ns, carried.process_ns, sizeof(carried.process_ns));
	for (int i = 0; dt_registry && i < dt_registry->nthreads; i++) {
		struct dt_thread_stats *s = &dt_registry->threads[i];
		if (!s->tid)
			continue;
		cycles += s->waited;
		for (int w = 0; w < 3; w++)
			ns[w] += s->retired_proxy_cpu[w];
		for (int w = 0; w < 3 && s->proxy_tid; w++)
			ns[w] += s->ended ? s->proxy_cpu[w] : clock_read(MAKE_THREAD_CPUCLOCK(s->proxy_tid, w));
	}
	for (int w = 0; w < 3; w++)
		ns[w] += tsc_cycles_to_ns(&dt_cfg.tsc, cycles);
}

/* A proxy that a new one replaces (call.c: proxy_renewed_around): its
 * time stays the runtime's, not the program's. */
void cputime_proxy_retires(struct dt_thread_stats *s)
{
	for (int w = 0; w < 3; w++)
		s->retired_proxy_cpu[w] += clock_read(MAKE_THREAD_CPUCLOCK(0, w));
}

/* The proxy of a thread that exits or attaches again leaves its time. */
void cputime_proxy_ends(struct dt_thread_stats *s)
{
	for (int w = 0; w < 3; w++)
		s->proxy_cpu[w] = clock_read(MAKE_THREAD_CPUCLOCK(0, w));
}

static uint64_t less(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* clock_gettime, clock_getres, timer_create: the clock is a[0]. */
long do_cpu_clock(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	enum clock_kind kind;
	pid_t tid = 0;
	int which;
	clockid_t id;
	uint64_t v, rt[3];
	long b[6], ret;

	(void)uc;
	memcpy(b, a, sizeof(b));
	kind = classify(t, (clockid_t)a[0], &tid, &which, &id);
	b[0] = (long)id;
	if (nr != SYS_clock_gettime || kind == OTHER_CLOCK || !a[1])
		return forward(t, nr, b);
	/* here, not on the proxy: no wait of this call is in the figure */
	if ((ret = local_call(t, nr, b)) < 0)
		return ret;
	/* the kernel has just written it; read back through uaccess all the
	 * same (another thread may unmap it meanwhile) */
	struct timespec ts;
	if (copy_from_user(&ts, (const void *)a[1], sizeof(ts)))
		return -EFAULT;
	v = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (kind == THREAD_CLOCK) {
		v = less(v, thread_waited_ns(tid));
	} else {
		runtime_process_ns(rt);
		v = less(v, rt[which]);
	}
	if (kind == PROCESS_CLOCK)
		v = never_back(&t->cpu_seen[SEEN_PROCESS_CLOCK][which], v);
	else if (tid == t->tid)
		v = never_back(&t->cpu_seen[SEEN_THREAD_CLOCK][which], v);
	ts.tv_sec = (time_t)(v / 1000000000ull);
	ts.tv_nsec = (long)(v % 1000000000ull);
	return copy_to_user((void *)a[1], &ts, sizeof(ts));
}

static void tv_less(struct timeval *tv, uint64_t ns, uint64_t *seen)
{
	uint64_t v = less((uint64_t)tv->tv_sec * 1000000000ull + (uint64_t)tv->tv_usec * 1000ull, ns);

	v = never_back(seen, v);
	tv->tv_sec = (time_t)(v / 1000000000ull);
	tv->tv_usec = (suseconds_t)(v % 1000000000ull / 1000);
}

long do_getrusage(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	struct rusage ru;
	uint64_t rt[3];
	long ret;

	(void)uc;
	if (a[0] != RUSAGE_THREAD && a[0] != RUSAGE_SELF)
		return forward(t, nr, a);
	/* the kernel writes it (EFAULT); then corrected through uaccess */
	if ((ret = local_call(t, nr, a)) < 0)
		return ret;
	if (copy_from_user(&ru, (const void *)a[1], sizeof(ru)))
		return -EFAULT;
	if (a[0] == RUSAGE_THREAD) {
		tv_less(&ru.ru_utime, thread_waited_ns(t->tid), &t->cpu_seen[SEEN_RUSAGE_THREAD][0]);
	} else {
		runtime_process_ns(rt);          /* waiting is user time */
		tv_less(&ru.ru_utime, rt[CPUCLOCK_VIRT], &t->cpu_seen[SEEN_RUSAGE_SELF][0]);
		tv_less(&ru.ru_stime, less(rt[CPUCLOCK_PROF], rt[CPUCLOCK_VIRT]), &t->cpu_seen[SEEN_RUSAGE_SELF][1]);
	}
	return copy_to_user((void *)a[1], &ru, sizeof(ru)) ? -EFAULT : ret;
}

long do_times(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	struct tms *utm = (struct tms *)a[0], tm;
	const uint64_t tick = 1000000000ull / USER_HZ;
	uint64_t rt[3];
	long ret;

	(void)uc;
	if (!utm)
		return forward(t, nr, a);
	/* the kernel writes it (EFAULT); then corrected through uaccess */
	if ((ret = local_call(t, nr, a)) < 0 && ret > -4096)
		return ret;
	if (copy_from_user(&tm, utm, sizeof(tm)))
		return -EFAULT;
	runtime_process_ns(rt);
	tm.tms_utime = (clock_t)never_back(&t->cpu_seen[SEEN_TIMES][0],
					   less((uint64_t)tm.tms_utime, rt[CPUCLOCK_VIRT] / tick));
	tm.tms_stime = (clock_t)never_back(&t->cpu_seen[SEEN_TIMES][1],
					   less((uint64_t)tm.tms_stime, less(rt[CPUCLOCK_PROF], rt[CPUCLOCK_VIRT]) / tick));
	return copy_to_user(utm, &tm, sizeof(tm)) ? -EFAULT : ret;
}

/* ---- RLIMIT_CPU ---------------------------------------------------------- */

/* The program's CPU time as RLIMIT_CPU counts it (user + system), in ns. */
static uint64_t program_cpu_ns(void)
{
	uint64_t rt[3];

	runtime_process_ns(rt);
	return less(clock_read(MAKE_PROCESS_CPUCLOCK(0, CPUCLOCK_PROF)), rt[CPUCLOCK_PROF]);
}

/* As the kernel's check_process_timers: past the hard limit SIGKILL; past
 * the soft one SIGXCPU, and the soft limit moves on by a second. */
static void *watchdog(void *arg)
{
	struct timespec period = { 0, WATCH_NS };
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	sigdelset(&all, SIGTRAP);   /* glibc's sites may hold an int3 (proxy.c) */
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	sched_setaffinity(0, sizeof(dt_hk_mask), &dt_hk_mask);
	for (;; nanosleep(&period, NULL)) {
		struct rlimit l = app_cpu_limit;
		uint64_t s = program_cpu_ns() / 1000000000ull;
		if (!limit_kept)
			continue;
		if (l.rlim_max != RLIM_INFINITY && s >= l.rlim_max) {
			kill(dt_cfg.pid, SIGKILL);
		} else if (l.rlim_cur != RLIM_INFINITY && s >= l.rlim_cur) {
			kill(dt_cfg.pid, SIGXCPU);
			if (l.rlim_cur < l.rlim_max)
				app_cpu_limit.rlim_cur = l.rlim_cur + 1;
		}
	}
	return NULL;
}

/* At start: lift the kernel's RLIMIT_CPU when the program has one (or was
 * given one before the last execve), and watch the program's instead.
 * 0, or -errno with the kernel's limit the program's again. */
int cputime_start(void)
{
	struct rlimit now, none = { RLIM_INFINITY, RLIM_INFINITY };
	pthread_t th;
	int err;

	if (!limit_kept) {
		if (getrlimit(RLIMIT_CPU, &now) || now.rlim_cur == RLIM_INFINITY)
			return 0;
		if (setrlimit(RLIMIT_CPU, &none)) {
			/* Without CAP_SYS_RESOURCE the kernel counts whatever spins:
			 * spin as little as the limit needs. */
			dt_warn("the CPU-time limit (ulimit -t %llu) cannot be kept by the "
				"program's own time without CAP_SYS_RESOURCE: timed waits sleep in the kernel but for "
				"their last 100 us, proxies do not spin (--proxy spin becomes adaptive), and blocking calls forwarded to the proxy "
				"still count against it", (unsigned long long)now.rlim_cur);
			dt_cpu_limited = true;
			if (dt_cfg.proxy_wait == PROXY_SPIN)
				dt_cfg.proxy_wait = PROXY_ADAPTIVE;
			return 0;
		}
		app_cpu_limit = now;
		limit_kept = true;
	}
	if ((err = pthread_create(&th, NULL, watchdog, NULL))) {
		dt_verbose("cannot start the CPU-time limit's watchdog: %s", strerror(err));
		limit_kept = false;
		setrlimit(RLIMIT_CPU, &app_cpu_limit);
		return -err;
	}
	pthread_setname_np(th, "detach-watchdog");     /* the runtime's: not the program's (sandbox.c) */
	pthread_detach(th);
	return 0;
}

/* Under a CPU-time limit the runtime may not lift: the wait of clock.c
 * until deadline_ns sleeps in the kernel until LIMITED_SPIN_NS before it
 * (an absolute sleep: never late for it), *now updated.  -EINTR: a handler
 * ran, which ends the program's wait as it ends nanosleep. */
long cputime_limited_sleep(clockid_t clk, uint64_t deadline_ns, uint64_t *now)
{
	struct timespec ts;
	uint64_t until;
	long r;

	if (deadline_ns < *now + 2 * LIMITED_SPIN_NS)
		return 0;
	until = deadline_ns - LIMITED_SPIN_NS;
	ts.tv_sec = (time_t)(until / 1000000000ull);
	ts.tv_nsec = (long)(until % 1000000000ull);
	r = sys_call4(SYS_clock_nanosleep, clk, TIMER_ABSTIME, &ts, NULL);
	*now = clock_read(clk);
	return r == -EINTR ? r : 0;
}

/* A child process is an ordinary one: the program's limit, for real. */
void cputime_child(void)
{
	if (limit_kept)
		sys_call4(SYS_prlimit64, 0, RLIMIT_CPU, &app_cpu_limit, NULL);
}

/* getrlimit, setrlimit, prlimit64 of RLIMIT_CPU of this process, while
 * the runtime keeps it: the program's own, checked as the kernel would. */
long do_rlimit(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	int res = (int)(nr == SYS_prlimit64 ? a[1] : a[0]);
	const struct rlimit *uwant = NULL;
	struct rlimit *old = NULL, want, was = app_cpu_limit;

	(void)uc;
	if (!limit_kept || res != RLIMIT_CPU ||
	    (nr == SYS_prlimit64 && a[0] != 0 && a[0] != dt_cfg.pid && a[0] != t->tid))
		return forward(t, nr, a);
	count(t, nr, &t->stats->emulated);
	if (nr == SYS_prlimit64) {
		uwant = (const struct rlimit *)a[2];
		old = (struct rlimit *)a[3];
	} else if (nr == SYS_setrlimit) {
		uwant = (const struct rlimit *)a[1];
	} else {
		old = (struct rlimit *)a[1];
	}
	/* the kernel's order: the new limit read (EFAULT), checked (EINVAL,
	 * EPERM) and set, then the old one written (EFAULT, set all the same) */
	if (uwant && copy_from_user(&want, uwant, sizeof(want)))
		return -EFAULT;
	if (uwant && want.rlim_cur > want.rlim_max)
		return -EINVAL;
	if (uwant && want.rlim_max > app_cpu_limit.rlim_max && !thread_capable(CAP_SYS_RESOURCE))
		return -EPERM;
	if (uwant)
		app_cpu_limit = want;
	if (old && copy_to_user(old, &was, sizeof(was)))
		return -EFAULT;
	return 0;
}

/* ---- across execve --------------------------------------------------------- */

/* "thread,prof,virt,sched,limit_kept,cur,max" */
void cputime_from_env(const char *v)
{
	unsigned long long f[7];

	if (!v || sscanf(v, "%llu,%llu,%llu,%llu,%llu,%llu,%llu", &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6]) != 7)
		return;
	carried.thread_ns = f[0];
	for (int w = 0; w < 3; w++)
		carried.process_ns[w] = f[1 + w];
	limit_kept = f[4];
	app_cpu_limit.rlim_cur = f[5];
	app_cpu_limit.rlim_max = f[6];
}

/* The entry ENV_CPUTIME=... for t's execve, into buf (96 bytes or more):
 * raw calls and no allocation, this runs in the trap. */
void cputime_to_env(struct dt_thread *t, char *buf)
{
	uint64_t rt[3];
	char *p = stpcpy(buf, ENV_CPUTIME "=");

	runtime_process_ns(rt);
	p = env_put_u64(p, thread_waited_ns(t->tid), ',');
	for (int w = 0; w < 3; w++)
		p = env_put_u64(p, rt[w], ',');
	p = env_put_u64(p, limit_kept, ',');
	p = env_put_u64(p, app_cpu_limit.rlim_cur, ',');
	p = env_put_u64(p, app_cpu_limit.rlim_max, '\0');
}
