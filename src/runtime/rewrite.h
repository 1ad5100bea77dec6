/* Layer 5 (entries, docs/architecture.md): rewriting `syscall` sites into
 * calls of the trampoline (rewrite.c, trampoline.S). */
#ifndef DETACH_RUNTIME_REWRITE_H
#define DETACH_RUNTIME_REWRITE_H

#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>

#include "runtime/thread.h"

int rewrite_init(void) DT_HIDDEN;
bool rewrite_site(struct dt_thread *t, uintptr_t site) DT_HIDDEN;
bool rewrite_is_retrap(uintptr_t call_addr) DT_HIDDEN;
/* A thread met the int3 of a site being patched: sent on (true), or not ours. */
bool rewrite_int3(ucontext_t *uc) DT_HIDDEN;

#endif
