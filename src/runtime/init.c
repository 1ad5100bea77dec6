/* libdetach.so: the constructor, a table of contents of the runtime.
 *
 *   dt_init()
 *     read_contract()      is this process the one `detach run` meant?
 *     env_scrub()          the program sees its own environment (env.c)
 *     choose_mode()        rewrite (stubs near the code, rewrite.c) or sud
 *     intercept_install()  the SIGSYS handler (intercept.c)
 *     claims_open()        the locks that say the process lives and which
 *                          CPUs it holds, system-wide (claims.c)
 *     registry_open()      live statistics for `detach ps` (stats.c)
 *     start_threads()      detach the first thread, or watch for the chosen
 *                          ones (threads.c): proxy, pinning, the trap armed
 *
 * From then on every system call of a detached thread arrives in
 * intercept.c (or, rewritten, in trampoline.S) and is routed by the table in
 * dispatch.c (the exceptions in lifecycle.c, signals.c, waits.c, identity.c).
 */
#include "runtime/init.h"
#include "runtime/claims.h"
#include "runtime/clock.h"
#include "runtime/config.h"
#include "runtime/cputime.h"
#include "runtime/env.h"
#include "runtime/intercept.h"
#include "runtime/rewrite.h"
#include "runtime/sandbox.h"
#include "runtime/sched.h"
#include "runtime/select.h"
#include "runtime/stats.h"
#include "runtime/threads.h"
#include "lib/contract.h"
#include "lib/liveness.h"
#include "lib/partition.h"

#include <fcntl.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *contract_var(const char *name, void *ctx)
{
	(void)ctx;
	return env_get(name);
}

/* `detach run`'s contract, for this process (a child that inherited the
 * environment has none: its pid differs). */
static bool read_contract(void)
{
	struct run_contract c;
	const char *bad;
	int err = contract_decode(&c, getpid(), contract_var, NULL, &bad);

	if (err == -ENOENT)
		return false;
	if (err)
		dt_die("%s is missing or malformed: start programs with 'detach run'", bad);
	config_apply(&c);
	cputime_from_env(env_get(ENV_CPUTIME));
	sched_from_env(env_get(ENV_SCHED));
	return true;
}

/* rewrite wherever it can run (rewrite.c: xsave, membarrier SYNC_CORE);
 * its stubs need no privilege and leave page 0 alone.  Otherwise sud, with
 * a warning when rewrite was asked for by name. */
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
		dt_warn("rewrite mode cannot run here (%s): every system call traps (sud mode)", strerror(-err));
	else
		dt_verbose("sud mode: rewrite mode cannot run here (%s)", strerror(-err));
	snprintf(dt_cfg.mode, sizeof(dt_cfg.mode), "sud");
}

/* Valgrind's RUNNING_ON_VALGRIND client request: a sequence of rotations of
 * rdi by 128 bits in all (a no-op natively, rdx keeps 0) that valgrind's
 * JIT recognizes and answers in rdx.  Request 0x1001, no arguments. */
static bool under_valgrind(void)
{
	volatile unsigned long req[6] = { 0x1001, 0, 0, 0, 0, 0 };
	unsigned long answer = 0;

	__asm__ volatile("rolq $3, %%rdi; rolq $13, %%rdi\n\t"
			 "rolq $61, %%rdi; rolq $51, %%rdi\n\t"
			 "xchgq %%rbx, %%rbx"
			 : "=d"(answer) : "a"(&req[0]), "0"(answer) : "cc", "memory");
	return answer != 0;
}

__attribute__((constructor)) static void dt_init(void)
{
	bool mine = read_contract();
	/* the filters of the image before execve judge this one's calls */
	const struct sandbox_filter *carried = mine ? sandbox_from_env(env_get(ENV_SECCOMP)) : NULL;
	cpu_set_t held;
	pid_t holder;
	int err;

	if (mine)
		claims_from_env(env_get(ENV_CLAIMS));
	env_scrub();
	if (!mine)
		return;
	/* valgrind runs the program on its own threads, making its own system
	 * calls there: a trap armed on such a thread catches valgrind's calls
	 * too (SIGSYS kills it), and page 0 is not ours to map. */
	if (under_valgrind())
		dt_die("the program runs under valgrind, which makes its own system calls on the program's "
		       "threads: they cannot be detached; NOTE: run valgrind without detach run");
	if ((err = runtime_start()))
		dt_die("cannot start: %s", strerror(-err));
	if ((err = start_threads(&holder)) == -EBUSY && holder) {
		/* `detach run` looked before the exec; another came meanwhile */
		char who[64];
		dt_die("CPU %s holds a detached thread of %s; NOTE: wait for it to end, or choose "
		       "another CPU with -c", cpulist_format(&dt_cfg.cpus, (char[256]){ 0 }, 256),
		       pid_describe(holder, who, sizeof(who)));
	} else if (err) {
		dt_die("cannot detach the first thread: %s", strerror(-err));
	}
	/* after an execve: CPUs of the image before that hold nothing now */
	cpus_claimed(&held);
	claims_keep(&held);
	if (dt_self)
		dt_self->filters = carried;
}

/* `detach pid` and `detach ctl` (src/cli/pid_op.c): loaded by dlopen into a
 * running program, called on the thread to detach with the contract
 * `detach run` would have put in the environment, as "NAME=value" lines,
 * and the runtime's own path (for execve); cpu is one of the contract's
 * CPUs, or -1 for the first free one.  Called again (after dt_attach) to
 * move the thread, with the variables that change for its execve (or
 * NULL).  Returns 0 or -errno; never exits the program. */
__attribute__((visibility("default"))) int __dt_pid_start(const char *contract, const char *lib, int cpu)
{
	int err;

	if (dt_self && !dt_self->observed)
		return -EALREADY;
	if (contract && (err = env_adopt(contract, lib)))
		return err;
	if (!dt_cfg.active) {
		if (!read_contract())
			return -EINVAL;
		if ((err = runtime_start()))
			return err;
	}
	if (cpu >= CPU_SETSIZE || (cpu >= 0 && !CPU_ISSET(cpu, &dt_cfg.cpus)))
		return -EINVAL;
	if ((cpu = claim_cpu(cpu)) < 0)
		return cpu;
	return detach_thread(dt_self, cpu);
}

/* Process-wide set-up, once: by the constructor, or by dt_detach() in a
 * program that was not started by `detach run` (api.c).  0, or -errno and
 * the runtime not active (a later call tries again). */
static const struct thread_rules select_rules = {
	.first = select_first,
	.fork = select_fork,
	.new_thread = select_new_thread,
};

int runtime_start(void)
{
	int err;

	clock_gettime(CLOCK_REALTIME, &dt_cfg.start);
	long rt = -1;
	dt_cfg.rt_throttled = read_long_file("/proc/sys/kernel/sched_rt_runtime_us", &rt) == 0 && rt >= 0;
	/* 2 ms, not the default 20 (most of a short program's start-up): the
	 * TSC only steers timed waits, whose end the clock itself decides
	 * (clock.c); dt_now_ns() calibrates its own clock at full length. */
	tsc_calibrate(&dt_cfg.tsc, 2000000);
	clock_init();                   /* before choose_mode: rewrite.c asks it */
	if ((err = cputime_start()))     /* may change how proxies wait */
		return err;
	choose_mode();
	sys_on_clone_child = dt_child_placement;
	sys_on_vfork_parent = dt_vfork_parent_resumed;
	threads_set_rules(&select_rules);
	rewrite_own_sigtrap = intercept_own_sigtrap;
	if (dt_rewrite_on)
		stats_on_write = rewrite_write_coverage;
	if ((err = intercept_install())) {
		dt_verbose("cannot install the SIGSYS handler: %s", strerror(-err));
		return err;
	}
	claims_open();                  /* without: claims within the process (said) */
	if ((err = registry_open()))
		return err;
	sched_start();
	dt_cfg.active = true;
	return 0;
}

/* exit() on a thread that is not detached: statistics out before the
 * process goes (exit status not known here: -1).  On a detached thread the
 * exit_group that follows is ours and writes them with the status. */
__attribute__((destructor)) static void dt_fini(void)
{
	/* A thread that carries seccomp filters in the kernel (the program's,
	 * given to a thread the runtime does not intercept: sandbox.c) must not
	 * make calls of ours that they would judge: the statistics stay
	 * unwritten.  The question itself comes from our stubs, which the
	 * filters we installed let through. */
	if (dt_cfg.active && !dt_self && sys_call2(SYS_prctl, PR_GET_SECCOMP, 0) != SECCOMP_MODE_FILTER)
		stats_finish();
}
