/* Layer 2a (services, docs/architecture.md): the environment: the program's own, the
 * contract of `detach run`, and what travels across execve (env.c). */
#ifndef DETACH_RUNTIME_ENV_H
#define DETACH_RUNTIME_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/sys.h"

char *env_put_u64(char *p, uint64_t v, char end) DT_HIDDEN;
void env_scrub(void) DT_HIDDEN;
int env_adopt(const char *contract, const char *lib) DT_HIDDEN;
const char *env_get(const char *name) DT_HIDDEN;
/* A detached thread's execve (lifecycle.c): the new image's environment */
bool env_exec_readable(char *const *envp) DT_HIDDEN;
bool env_exec_bare(long nr, const long a[6]) DT_HIDDEN;
size_t env_exec_program(char **envp, char **out, const char **app_preload) DT_HIDDEN;
size_t env_exec_preload(char **out, char *preload, char *was, const char *app_preload) DT_HIDDEN;

#endif
