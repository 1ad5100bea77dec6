/* Layer 4 (docs/architecture.md): the routing of a detached thread's
 * system calls: the table, and dt_dispatch (dispatch.c). */
#ifndef DETACH_RUNTIME_DISPATCH_H
#define DETACH_RUNTIME_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>

#include "runtime/thread.h"

/* One call of a detached thread, made at ip (the address after its
 * `syscall`, as the kernel reports it) by code whose rsp was sp; uc is its
 * signal context (NULL: from the trampoline). */
long dt_dispatch(struct dt_thread *t, long nr, long a[6], uintptr_t ip, ucontext_t *uc, uintptr_t sp) DT_HIDDEN;
/* The call's handling needs no vector register (trampoline.S skips xsave). */
bool dispatch_general_only(long nr) DT_HIDDEN;

#endif
