/* Layer 2c (kept calls, docs/architecture.md): seccomp filters of a detached thread
 * (seccomp.c). */
#ifndef DETACH_RUNTIME_SECCOMP_H
#define DETACH_RUNTIME_SECCOMP_H

#include "runtime/call.h"

DT_HIDDEN call_fn do_seccomp;
long seccomp_refuse_strict(struct dt_thread *t, long nr) DT_HIDDEN;
/* prctl(PR_SET_SECCOMP) and prctl(PR_GET_SECCOMP) (identity.c's do_prctl) */
long seccomp_prctl(struct dt_thread *t, long nr, long *a) DT_HIDDEN;

#endif
