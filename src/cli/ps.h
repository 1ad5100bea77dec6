/* The registry walk of `detach ps` (ps.c), shared with `detach ctl`. */
#ifndef DETACH_CLI_PS_H
#define DETACH_CLI_PS_H

#include "lib/registry.h"
#include "lib/util.h"

#include <stdbool.h>
#include <sys/types.h>

/* fn for the registry of every running program (only: that one; 0 all);
 * the files of programs that died are removed.  How many were visited. */
int ps_each(pid_t only, void (*fn)(const struct dt_registry *r, void *arg), void *arg);
/* One thread as an object of the "threads" array of `detach ps --json`. */
void ps_thread_json(struct json *j, const struct dt_registry *r, const struct dt_thread_stats *s);

#endif
