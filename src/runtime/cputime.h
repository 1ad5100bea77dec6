/* Layer 2c (kept calls, docs/architecture.md): CPU-time clocks and limits as the program
 * would see them natively (cputime.c). */
#ifndef DETACH_RUNTIME_CPUTIME_H
#define DETACH_RUNTIME_CPUTIME_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "runtime/call.h"

int cputime_start(void) DT_HIDDEN;
void cputime_child(void) DT_HIDDEN;
void cputime_proxy_ends(struct dt_thread_stats *s) DT_HIDDEN;
void cputime_proxy_retires(struct dt_thread_stats *s) DT_HIDDEN;
void cputime_from_env(const char *v) DT_HIDDEN;
void cputime_to_env(struct dt_thread *t, char *buf) DT_HIDDEN;
long cputime_limited_sleep(clockid_t clk, uint64_t deadline_ns, uint64_t *now) DT_HIDDEN;
extern bool dt_cpu_limited DT_HIDDEN;
#define CPUTIME_ENV_MAX 192
DT_HIDDEN call_fn do_cpu_clock, do_getrusage, do_times, do_rlimit;

#endif
