/* Layer 3 (docs/architecture.md): which threads the rules of --select
 * choose (select.c), beside threads.c. */
#ifndef DETACH_RUNTIME_SELECT_H
#define DETACH_RUNTIME_SELECT_H

#include "runtime/threads.h"

bool select_first(void) DT_HIDDEN;
bool select_fork(void) DT_HIDDEN;
void select_new_thread(struct dt_thread *t) DT_HIDDEN;
/* A call of a watched thread, before it runs: may choose a thread. */
void observe_call(struct dt_thread *t, long nr, const long a[6]) DT_HIDDEN;
/* sched_setaffinity: the `pinned` rule, then sched.c's do_affinity */
DT_HIDDEN call_fn do_setaffinity;

#endif
