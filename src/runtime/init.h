/* Layer 5 (entries, docs/architecture.md): starting the runtime, from the
 * constructor or from dt_detach() (init.c). */
#ifndef DETACH_RUNTIME_INIT_H
#define DETACH_RUNTIME_INIT_H

#include "runtime/sys.h"

int runtime_start(void) DT_HIDDEN;

#endif
