/* Layer 5 (entries, docs/architecture.md): the SIGSYS handler, the entry of
 * every trap (intercept.c). */
#ifndef DETACH_RUNTIME_INTERCEPT_H
#define DETACH_RUNTIME_INTERCEPT_H

#include <stdbool.h>

#include "runtime/sys.h"

int intercept_install(void) DT_HIDDEN;

/* The top of the signal half of the runtime's stack that a trap from code
 * on no alternate stack keeps for its frame's copy (intercept_entry.S,
 * sigsys_moved): the largest frame, with AMX state, is 12 KB. */
#define TRAP_COPY_ROOM 16384
/* Before a site is staged with int3 (rewrite.c): is SIGTRAP's action ours? */
bool intercept_own_sigtrap(void) DT_HIDDEN;

#endif
