/* Layer 2c (kept calls, docs/architecture.md): sleeps and masked waits (waits.c). */
#ifndef DETACH_RUNTIME_WAITS_H
#define DETACH_RUNTIME_WAITS_H

#include "runtime/call.h"

DT_HIDDEN call_fn do_sleep, do_masked_wait, do_fd_wait;

#endif
