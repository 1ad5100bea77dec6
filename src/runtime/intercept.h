/* Layer 5 (entries, docs/architecture.md): the SIGSYS handler, the entry of
 * every trap (intercept.c). */
#ifndef DETACH_RUNTIME_INTERCEPT_H
#define DETACH_RUNTIME_INTERCEPT_H

#include <stdbool.h>

#include "runtime/sys.h"

int intercept_install(void) DT_HIDDEN;
/* Before a site is staged with int3 (rewrite.c): is SIGTRAP's action ours? */
bool intercept_own_sigtrap(void) DT_HIDDEN;

#endif
