/* Layer 2c (kept calls, docs/architecture.md): calls that name the calling thread implicitly
 * (identity.c). */
#ifndef DETACH_RUNTIME_IDENTITY_H
#define DETACH_RUNTIME_IDENTITY_H

#include <stdbool.h>

#include "runtime/call.h"

DT_HIDDEN call_fn do_capset, do_futex, do_prctl, do_gettid, do_getcpu, do_sched_yield, do_keyctl;

#endif
