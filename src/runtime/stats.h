/* Layer 2a (services, docs/architecture.md): the registry of live statistics that `detach ps`
 * reads (lib/registry.h), and the statistics file at exit (stats.c). */
#ifndef DETACH_RUNTIME_STATS_H
#define DETACH_RUNTIME_STATS_H

#include <sys/types.h>

#include "lib/registry.h"
#include "runtime/sys.h"

extern struct dt_registry *dt_registry DT_HIDDEN;
int registry_open(void) DT_HIDDEN;
struct dt_thread_stats *registry_slot(pid_t tid, int cpu) DT_HIDDEN;
void registry_slot_free(struct dt_thread_stats *s) DT_HIDDEN;
void stats_finish(void) DT_HIDDEN;
/* Writes the process-wide part of the statistics file beyond the threads
 * (rewrite.c: the sites by mapping); set by the runtime's start, so that
 * this layer names nothing above it.  NULL: none. */
struct json;
extern void (*stats_on_write)(struct json *j) DT_HIDDEN;
extern int dt_exit_code DT_HIDDEN;      /* exit_group's status; -1: not known */

#endif
