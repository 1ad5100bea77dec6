/* Layer 3 (docs/architecture.md): which threads are detached or watched;
 * it makes a detached thread and ends it, and owns their mutable state
 * (threads.c). */
#ifndef DETACH_RUNTIME_THREADS_H
#define DETACH_RUNTIME_THREADS_H

#include <stdbool.h>
#include <sys/types.h>

#include "runtime/call.h"

/* The rules of --select (select.c, beside threads.c and above it), given
 * by init.c before the first thread is detached or watched. */
struct thread_rules {
	bool (*first)(void);                    /* the first thread is detached */
	bool (*fork)(void);                     /* so is a forked child's */
	void (*new_thread)(struct dt_thread *t); /* a watched thread the program made */
};
void threads_set_rules(const struct thread_rules *r) DT_HIDDEN;
int start_threads(pid_t *holder) DT_HIDDEN;
int detach_thread(struct dt_thread *t, int cpu) DT_HIDDEN;
enum thread_end { THREAD_EXIT, THREAD_ATTACH, THREAD_EVICTED };
void thread_end(struct dt_thread *t, enum thread_end how) DT_HIDDEN;
struct dt_thread *thread_alloc(void) DT_HIDDEN;
void thread_free(struct dt_thread *t) DT_HIDDEN;
int claim_cpu(int want) DT_HIDDEN;
int claim_cpu_from(int want, pid_t *holder) DT_HIDDEN;
void release_cpu(int cpu) DT_HIDDEN;
/* A new child of a detached or watched thread, first thing: inherit, the
 * parent's seccomp filters (sandbox.c). */
void dt_fork_child(const struct sandbox_filter *inherit) DT_HIDDEN;
void dt_child_placement(const void *inherit) DT_HIDDEN;
void place_child(pid_t tid) DT_HIDDEN;
void dt_vfork_parent_resumed(const void *uc) DT_HIDDEN;
struct dt_thread *thread_find(bool (*want)(const struct dt_thread *t, long key), long key) DT_HIDDEN;
void cpus_claimed(cpu_set_t *out) DT_HIDDEN;

#endif
