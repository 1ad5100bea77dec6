/* Layer 2a (services, docs/architecture.md): memory a detached thread needs, locked
 * (memlock.c). */
#ifndef DETACH_RUNTIME_MEMLOCK_H
#define DETACH_RUNTIME_MEMLOCK_H

#include "runtime/thread.h"

void memlock_thread(struct dt_thread *t) DT_HIDDEN;
void memlock_release(struct dt_thread *t) DT_HIDDEN;

#endif
