/* Layer 2 (services, docs/architecture.md): the proxy thread of a detached thread and the
 * mailbox hand-over (proxy.c). */
#ifndef DETACH_RUNTIME_PROXY_H
#define DETACH_RUNTIME_PROXY_H

#include <stdbool.h>
#include <ucontext.h>

#include "runtime/thread.h"

int proxy_start(struct dt_thread *t) DT_HIDDEN;
long proxy_forward(struct dt_thread *t, long nr, const long a[6]) DT_HIDDEN;
void proxy_stop(struct dt_thread *t) DT_HIDDEN;
long proxy_renewed_around(struct dt_thread *t, long nr, const long a[6]) DT_HIDDEN;
void proxy_abandoned(struct dt_thread *t) DT_HIDDEN;
void proxy_interrupt_taken(ucontext_t *uc) DT_HIDDEN;
extern __thread bool dt_is_proxy DT_HIDDEN;

#endif
