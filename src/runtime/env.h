/* Layer 2 (services, docs/architecture.md): the environment: the program's own, the
 * contract of `detach run`, and what travels across execve (env.c). */
#ifndef DETACH_RUNTIME_ENV_H
#define DETACH_RUNTIME_ENV_H

#include <stdint.h>

#include "runtime/sys.h"

char *env_put_u64(char *p, uint64_t v, char end) DT_HIDDEN;
void env_scrub(void) DT_HIDDEN;
int env_adopt(const char *contract, const char *lib) DT_HIDDEN;
const char *env_get(const char *name) DT_HIDDEN;
long env_execve(long nr, long a[6]) DT_HIDDEN;

#endif
