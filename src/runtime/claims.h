/* Layer 2a (services, docs/architecture.md): the process's locks in the
 * locks file (lib/liveness.h): that it lives (its registry file is its own)
 * and which CPUs hold its detached threads, system-wide (claims.c). */
#ifndef DETACH_RUNTIME_CLAIMS_H
#define DETACH_RUNTIME_CLAIMS_H

#include <sched.h>
#include <stdbool.h>
#include <sys/types.h>

#include "runtime/sys.h"

/* Before env_scrub: the descriptor an execve passed on (ENV_CLAIMS). */
void claims_from_env(const char *v) DT_HIDDEN;
/* At start: the locks file opened (or taken over), the pid's byte taken.
 * 0, or -errno: then claims stay within the process and the registry in
 * private memory (said once). */
int claims_open(void) DT_HIDDEN;
/* The pid's byte is held: a registry file may be published. */
bool claims_alive(void) DT_HIDDEN;
/* The CPU for a detached thread of ours, system-wide: 0, or -EBUSY when
 * another process holds it (its pid in *holder when not NULL).  Raw calls:
 * safe in the trap. */
int claims_take(int cpu, pid_t *holder) DT_HIDDEN;
void claims_drop(int cpu) DT_HIDDEN;
/* After an execve: the CPUs of the image before that are not in mine are
 * given up (its other detached threads are gone). */
void claims_keep(const cpu_set_t *mine) DT_HIDDEN;
/* A fork child: it holds no lock (POSIX locks are not inherited) and is
 * not the process whose registry it sees. */
void claims_fork_child(void) DT_HIDDEN;
/* execve of a detached thread: the descriptor, left open across it for the
 * new image (ENV_CLAIMS, env.c), or -1 when there is none.
 * claims_exec_failed(fd) closes it on exec again.  Raw calls. */
long claims_pass_on(void) DT_HIDDEN;
void claims_exec_failed(long fd) DT_HIDDEN;
/* The runtime's descriptor is fd; the one in [lo, hi], or -1 (signals.c:
 * a program's close and close_range leave it open). */
bool claims_fd_is(long fd) DT_HIDDEN;
long claims_fd_in(unsigned lo, unsigned hi) DT_HIDDEN;
/* dup2/dup3 onto the runtime's descriptor (signals.c): moved away first
 * (false: newfd is not ours), the locks taken again after the call, which
 * did (done) or did not replace the old number. */
bool claims_step_aside(long newfd) DT_HIDDEN;
void claims_stepped_aside(bool done) DT_HIDDEN;
#define CLAIMS_ENV_MAX 40     /* "DETACH_CLAIMS=N" */

#endif
