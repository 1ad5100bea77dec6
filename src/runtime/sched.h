/* Layer 2c (kept calls, docs/architecture.md): a detached thread's scheduling settings as the
 * program made them (sched.c). */
#ifndef DETACH_RUNTIME_SCHED_H
#define DETACH_RUNTIME_SCHED_H

#include <sched.h>
#include <sys/types.h>

#include "runtime/call.h"

void sched_start(void) DT_HIDDEN;
void sched_capture(struct dt_thread *t) DT_HIDDEN;
/* A fork child the `fork` rule chose: its settings now, for its
 * sched_capture once detached. */
void sched_carry_forked(void) DT_HIDDEN;
void sched_inherit(const struct dt_thread *t, pid_t tid) DT_HIDDEN;
void sched_from_env(const char *v) DT_HIDDEN;
void sched_to_env(struct dt_thread *t, char *buf) DT_HIDDEN;
#define SCHED_ENV_MAX (32 + 30 * (9 + CPU_SETSIZE / 64))
/* do_affinity: the thread's own affinity; another thread's is forwarded
 * (threads.c's do_setaffinity sees it first, for the `pinned` rule). */
DT_HIDDEN call_fn do_sched_set, do_sched_get, do_affinity, do_priority;

#endif
