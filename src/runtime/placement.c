/* Where a thread that must not run on a detached CPU goes: the
 * housekeeping CPUs, and the cpuset the program came from when detached
 * threads moved into the `detach isolate` partition.  Layer 2
 * (docs/architecture.md). */
#include "runtime/placement.h"
#include "runtime/config.h"
#include "runtime/env.h"

#include <fcntl.h>
#include <sys/syscall.h>

/* A thread or child process created by a detached or watched thread starts
 * on its CPU, in its cpuset: it moves itself to the housekeeping CPUs
 * before it runs any code of the program.  Raw calls only: this runs in the
 * child of a clone, on a borrowed stack, before any libc state is its own.
 * (threads.c: a new thread of a watched program is watched too, and may be
 * chosen by its creation order.) */
void placement_home(pid_t tid)
{
	if (dt_cfg.home_tasks[0]) {
		long fd = sys_call3(SYS_open, dt_cfg.home_tasks, O_WRONLY | O_CLOEXEC, 0);
		if (fd >= 0) {
			char num[16], *end = env_put_u64(num, (uint64_t)tid, '\0');
			sys_call3(SYS_write, fd, num, end - num - 1);
			sys_call1(SYS_close, fd);
		}
	}
	sys_call3(SYS_sched_setaffinity, tid, sizeof(dt_hk_mask), &dt_hk_mask);
}
