/* Layer 2a (services, docs/architecture.md): where a thread that must not run on a
 * detached CPU goes: the housekeeping CPUs and the program's home cpuset
 * (placement.c). */
#ifndef DETACH_RUNTIME_PLACEMENT_H
#define DETACH_RUNTIME_PLACEMENT_H

#include <sys/types.h>

#include "runtime/sys.h"

/* Moves tid (0: the caller) home.  Raw calls only: it runs in clone
 * children before any libc state is theirs, and inside traps. */
void placement_home(pid_t tid) DT_HIDDEN;

#endif
