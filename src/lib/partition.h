/* The detach partition: the cpuset that `detach isolate` makes for detached
 * threads.  `detach run`, the runtime and the benchmarks ask here whether a
 * CPU is isolated and put a thread into the partition.
 *
 * cgroup v1 (cpuset controller mounted on its own hierarchy):
 *   <mount>/detach      cpuset.cpus = the isolated CPUs, cpu_exclusive=1,
 *                       sched_load_balance=0; write a TID to its "tasks"
 *   <mount>/detach-hk   the housekeeping CPUs; every movable task lives here
 * cgroup v2 (cpuset on the unified hierarchy):
 *   <mount>/detach      cpuset.cpus.partition = isolated, cgroup.type =
 *                       threaded; a thread joins through cgroup.threads
 *
 * Functions return 0 or -errno and never print. */
#ifndef DETACH_LIB_PARTITION_H
#define DETACH_LIB_PARTITION_H

#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/types.h>

#define PARTITION_NAME    "detach"
#define PARTITION_HK_NAME "detach-hk"     /* v1 only */
/* Root-only journal of every value `detach isolate` changed (docs/isolate.md).
 * On tmpfs on purpose: a reboot undoes the isolation and the record with it. */
#define ISOLATE_STATE_DIR  "/run/detach"
#define ISOLATE_STATE_FILE "/run/detach/isolate.state"

enum cg_kind { CG_NONE = 0, CG_V1 = 1, CG_V2 = 2 };

struct partition {
	enum cg_kind kind;
	char root[PATH_MAX / 4];    /* mount point of the cpuset hierarchy */
	char dir[PATH_MAX / 4];     /* the partition's cgroup directory */
	char tasks[PATH_MAX / 4];   /* write a TID here: v1 tasks, v2 cgroup.threads */
	cpu_set_t cpus;             /* effective CPUs of the partition */
	bool valid;                 /* v2: the kernel accepted the partition */
};

/* Where the cpuset controller is mounted: fills kind and root.  -ENOENT if
 * it is mounted nowhere. */
int cpuset_hierarchy(struct partition *p);

/* Finds the partition made by `detach isolate`: 0 and *p filled, or -ENOENT
 * when there is none (kind and root are still filled when a cpuset
 * hierarchy exists). */
int partition_find(struct partition *p);

/* 1 when cpu belongs to the detach partition, 0 when not (or there is no
 * partition), -errno on error. */
int partition_cpu_isolated(int cpu);

/* Moves thread tid (0: the caller) into the partition.  Afterwards the thread
 * may be pinned to any CPU of p->cpus with sched_setaffinity.  v2: the thread's
 * process must be in the root cgroup (the partition's threaded domain). */
int partition_add_thread(const struct partition *p, pid_t tid);

#endif
