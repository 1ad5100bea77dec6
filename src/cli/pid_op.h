/* Detaching a thread of a running program from outside, attaching it again,
 * moving it to another CPU (src/cli/pid_op.c): what `detach pid` and the
 * control files of `detach ctl` do.  The runtime is loaded into the program
 * and called there through ptrace (remote.h). */
#ifndef DETACH_CLI_PID_OP_H
#define DETACH_CLI_PID_OP_H

#include <sched.h>
#include <stdbool.h>
#include <sys/types.h>

enum pid_op_kind { PID_DETACH, PID_ATTACH, PID_MOVE };

struct pid_op {
	enum pid_op_kind kind;
	pid_t pid, tid;             /* tid 0: the first thread (pid) */
	int cpu;                    /* DETACH: -1 the first free of cpus; MOVE: where to */
	cpu_set_t cpus;             /* DETACH: the CPUs the process's detached threads
				     * may take; the others are its housekeeping CPUs */
	const char *mode, *stats;   /* DETACH: as `detach run --mode/--stats` (may be NULL) */
	/* Called once every thread is seized and interrupted, before their
	 * stops are waited for: `detach ctl` answers a request of the
	 * program itself here (a thread blocked in it cannot stop).  NULL: none. */
	void (*seized)(void *arg);
	void *arg;
	/* out, after an error (-errno): one line saying why, and the fix ("": none) */
	char why[320], note[256];
};

/* The refusals that /proc tells before anything is touched: 0, or -errno
 * with why and note (ESRCH no such process or thread, EPERM ptrace not
 * allowed or already traced, ENOEXEC not linked with glibc, EBUSY already
 * detached, EINVAL not detached for ATTACH and MOVE). */
int pid_op_check(struct pid_op *op);
/* The checks, then the operation: 0, or -errno with why and note. */
int pid_op_run(struct pid_op *op);

/* The CPU of a detached thread from the registry the runtime publishes, or
 * -1 when the thread is not detached. */
int pid_detached_cpu(pid_t pid, pid_t tid);
/* The CPUs detached threads take when none is named: those of the
 * `detach isolate` partition, or else every online CPU but the first. */
void pid_default_cpus(cpu_set_t *cpus);

#endif
