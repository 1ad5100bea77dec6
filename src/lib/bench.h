/* Helpers shared by the measurement programs in bench/. */
#ifndef DETACH_LIB_BENCH_H
#define DETACH_LIB_BENCH_H

#include "lib/util.h"

/* Pins the calling thread to cpu (>= 0) and locks memory; -errno. */
int bench_pin(int cpu);
/* Best effort mlockall(MCL_CURRENT | MCL_FUTURE); -errno. */
int bench_mlock(void);
/* Writes "self": {pid, policy, priority, cpus_allowed, cpu_at_end} into the
 * open object: what the program really ran with, so that the orchestration
 * can check that a configuration (chrt, taskset, detach run) took effect. */
void bench_json_self(struct json *j);
/* Parses a non-negative integer with an optional k/M suffix (10k = 10000). */
int bench_parse_count(const char *s, uint64_t *v);
/* Opens path for writing ("-" is stdout); NULL with errno on failure. */
FILE *bench_open_out(const char *path);

#endif
