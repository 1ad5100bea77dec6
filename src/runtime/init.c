/* libdetach.so: the constructor, a table of contents of the runtime.
 *
 *   dt_init()
 *     read_contract()      is this process the one `detach run` meant?
 *     env_scrub()          the program sees its own environment (env.c)
 *     place_and_lock()     pin the first thread, its policy, mlock, prefault
 *     intercept_install()  the SIGSYS handler (intercept.c)
 *     registry_open()      live statistics for `detach ps` (stats.c)
 *     detach_thread()      start its proxy (proxy.c), arm the trap
 *
 * From then on every system call of the first thread arrives in
 * intercept.c and is routed by the table in syscalls.c.
 */
#include "runtime/runtime.h"
#include "lib/contract.h"
#include "lib/partition.h"

#include <fcntl.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

struct dt_config dt_cfg;
cpu_set_t dt_hk_mask;
__thread struct dt_thread *dt_self;
static struct dt_thread threads[DT_MAX_THREADS];
static int nthreads;

void dt_die(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof(buf), "detach: error: ");
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	sys_call3(SYS_write, 2, buf, n);
	sys_call1(SYS_exit_group, 1);
	__builtin_unreachable();
}

static void verbose(const char *fmt, ...)
{
	va_list ap;

	if (!dt_cfg.verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "detach: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static bool read_contract(void)
{
	const char *pid = getenv(ENV_PID), *v;

	if (!pid || atoi(pid) != getpid())
		return false;
	dt_cfg.pid = getpid();
	if (!(v = getenv(ENV_CPUS)) || cpulist_parse(v, &dt_cfg.cpus))
		dt_die("%s is missing or malformed: start programs with 'detach run'", ENV_CPUS);
	if (!(v = getenv(ENV_HOUSEKEEPING)) || cpulist_parse(v, &dt_cfg.housekeeping))
		dt_die("%s is missing or malformed: start programs with 'detach run'", ENV_HOUSEKEEPING);
	dt_hk_mask = dt_cfg.housekeeping;
	snprintf(dt_cfg.policy, sizeof(dt_cfg.policy), "%s", (v = getenv(ENV_POLICY)) ? v : "o");
	dt_cfg.mlock = !(v = getenv(ENV_MLOCK)) || strcmp(v, "0");
	dt_cfg.verbose = (v = getenv(ENV_VERBOSE)) && !strcmp(v, "1");
	snprintf(dt_cfg.mode, sizeof(dt_cfg.mode), "%s", (v = getenv(ENV_MODE)) ? v : "auto");
	if (strcmp(dt_cfg.mode, "sud") && strcmp(dt_cfg.mode, "rewrite") && strcmp(dt_cfg.mode, "auto"))
		dt_die("unknown mode '%s' in %s", dt_cfg.mode, ENV_MODE);
	if ((v = getenv(ENV_HOME_CPUSET)))
		snprintf(dt_cfg.home_cpuset, sizeof(dt_cfg.home_cpuset), "%s", v);
	if ((v = getenv(ENV_STATS)))
		snprintf(dt_cfg.stats_path, sizeof(dt_cfg.stats_path), "%s", v);
	/* A spinning proxy on the only housekeeping CPU would leave nothing of
	 * it to the rest of the program and the system. */
	v = getenv(ENV_PROXY);
	if (v)
		dt_cfg.proxy_wait = strcmp(v, "spin") ? PROXY_ADAPTIVE : PROXY_SPIN;
	else
		dt_cfg.proxy_wait = CPU_COUNT(&dt_cfg.housekeeping) >= 2 ? PROXY_SPIN : PROXY_ADAPTIVE;
	return true;
}

/* Touches the stack below us so that the detached thread takes no fault on
 * its first deep call (mlockall's MCL_FUTURE covers later growth). */
__attribute__((noinline)) static void prefault_stack(void)
{
	volatile char area[256 * 1024];

	for (size_t i = 0; i < sizeof(area); i += 4096)
		area[i] = 0;
}

static void set_policy(pid_t tid)
{
	struct sched_param sp = { 0 };
	int policy = SCHED_OTHER;

	if (dt_cfg.policy[0] == 'f' || dt_cfg.policy[0] == 'r') {
		policy = dt_cfg.policy[0] == 'f' ? SCHED_FIFO : SCHED_RR;
		sp.sched_priority = atoi(dt_cfg.policy + 2);
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
	verbose("tid %d joined the partition %s", (int)t->tid, p.dir);
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
	if (dt_cfg.mlock) {
		if (mlockall(MCL_CURRENT | MCL_FUTURE))
			fprintf(stderr, "detach: warning: mlockall failed (%s): page faults on the "
				"detached CPU remain possible and are counted\n", strerror(errno));
		prefault_stack();
	}
}

/* Makes the calling thread a detached thread on cpu.  Until the prctl at
 * the end it may use libc; after it, every call of its own traps. */
static struct dt_thread *detach_thread(int cpu)
{
	struct dt_thread *t;
	unsigned node = 0;
	int err;

	if (nthreads >= DT_MAX_THREADS)
		dt_die("more than %d detached threads", DT_MAX_THREADS);
	t = &threads[nthreads++];
	t->tid = (pid_t)syscall(SYS_gettid);
	t->cpu = cpu;
	t->stats = registry_slot(t->tid, cpu);
	if (!t->stats)
		dt_die("no statistics slot for tid %d", (int)t->tid);
	place_and_lock(t);
	if ((err = proxy_start(t)))
		dt_die("cannot start a proxy thread: %s", strerror(-err));
	syscall(SYS_getcpu, NULL, &node, NULL);
	t->node = (int)node;
	t->stats->proxy_tid = t->proxy_tid;
	verbose("tid %d detached on CPU %d (policy %s), proxy tid %d on CPUs %s (%s), mode %s",
		(int)t->tid, cpu, dt_cfg.policy, (int)t->proxy_tid,
		cpulist_format(&dt_cfg.housekeeping, (char[256]){ 0 }, 256),
		dt_cfg.proxy_wait == PROXY_SPIN ? "spin" : "adaptive", dt_cfg.mode);
	dt_self = t;
	kernel_counters_read(t->tid, &t->stats->at_detach);
	if ((err = intercept_arm(t))) {
		if (err == -EINVAL)
			dt_die("Syscall User Dispatch is not available (prctl: %s); "
			       "it needs Linux 5.11 or later built with CONFIG_GENERIC_ENTRY", strerror(-err));
		dt_die("cannot arm Syscall User Dispatch: %s", strerror(-err));
	}
	return t;
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

/* A thread or child process created by a detached thread starts on its
 * CPU, in its cpuset: it moves itself to the housekeeping CPUs before it
 * runs any code of the program.  Raw calls only: this runs in the child
 * of a clone, on a borrowed stack, before any libc state is its own. */
void dt_child_placement(void)
{
	/* A child sharing our TLS (vfork, posix_spawn) sees the parent's dt_self:
	 * it must not take itself for the detached thread (trampoline.S). */
	if (dt_self)
		dt_self->vfork_child = 1;
	if (dt_cfg.home_tasks[0]) {
		long fd = sys_call3(SYS_open, dt_cfg.home_tasks, O_WRONLY | O_CLOEXEC, 0);
		if (fd >= 0) {
			sys_call3(SYS_write, fd, "0", 1);
			sys_call1(SYS_close, fd);
		}
	}
	sys_call3(SYS_sched_setaffinity, 0, sizeof(dt_hk_mask), &dt_hk_mask);
}

/* rewrite needs page 0 for its trampoline; auto settles for sud without. */
static void choose_mode(void)
{
	int err;

	if (!strcmp(dt_cfg.mode, "sud"))
		return;
	err = rewrite_init();
	if (!err) {
		snprintf(dt_cfg.mode, sizeof(dt_cfg.mode), "rewrite");
		return;
	}
	if (!strcmp(dt_cfg.mode, "rewrite"))
		dt_die("--mode rewrite: cannot map the trampoline at address 0: %s; "
		       "NOTE: run as root or set vm.mmap_min_addr=0", strerror(-err));
	fprintf(stderr, "detach: warning: cannot map the trampoline at address 0 (%s): every system call "
		"traps (sud mode); root or vm.mmap_min_addr=0 allows rewrite mode\n", strerror(-err));
	snprintf(dt_cfg.mode, sizeof(dt_cfg.mode), "sud");
}

__attribute__((constructor)) static void dt_init(void)
{
	bool mine = read_contract();
	int err;

	env_scrub();
	if (!mine)
		return;
	dt_cfg.active = true;
	tsc_calibrate(&dt_cfg.tsc, 0);
	choose_mode();
	if ((err = intercept_install()))
		dt_die("cannot install the SIGSYS handler: %s", strerror(-err));
	if ((err = registry_open()))
		dt_die("cannot publish statistics in %s: %s", REGISTRY_DIR, strerror(-err));
	detach_thread(cpuset_nth(&dt_cfg.cpus, 0));
}

/* exit() on a thread that is not detached: statistics out before the
 * process goes (exit status not known here: -1).  On a detached thread the
 * exit_group that follows is ours and writes them with the status. */
__attribute__((destructor)) static void dt_fini(void)
{
	if (dt_cfg.active && !dt_self)
		stats_finish();
}
