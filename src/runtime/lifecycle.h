/* Layer 4 (docs/architecture.md): exit, clone and execve of a detached
 * thread (lifecycle.c, clone.S). */
#ifndef DETACH_RUNTIME_LIFECYCLE_H
#define DETACH_RUNTIME_LIFECYCLE_H

#include "runtime/call.h"

DT_HIDDEN call_fn do_exit, do_exit_group, do_clone, do_execve;
/* the clone gate's hook after the call (trampoline.S) */
uint64_t dt_gate_done(long nr, long ret) DT_HIDDEN;

#endif
