/* Layer 2c (kept calls, docs/architecture.md): membarrier's registration
 * the runtime makes for itself, kept apart from the program's (membarrier.c). */
#ifndef DETACH_RUNTIME_MEMBARRIER_H
#define DETACH_RUNTIME_MEMBARRIER_H

#include <stdbool.h>

#include "runtime/call.h"

/* Registers the address space for MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE
 * on the runtime's behalf (rewrite mode serializes the CPUs after each
 * patch); false where the kernel refuses. */
bool membarrier_register_sync_core(void) DT_HIDDEN;

DT_HIDDEN call_fn do_membarrier;

#endif
