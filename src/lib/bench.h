/* Helpers shared by the measurement programs in bench/. */
#ifndef DETACH_LIB_BENCH_H
#define DETACH_LIB_BENCH_H

#include "lib/util.h"

#include <getopt.h>
#include <stdbool.h>

/* Pins the calling thread to cpu (>= 0) and locks memory; -errno. */
int bench_pin(int cpu);
/* Best effort mlockall(MCL_CURRENT | MCL_FUTURE); -errno. */
int bench_mlock(void);
/* Writes "self": {pid, policy, priority, cpus_allowed, cpu_at_end} into the
 * open object: what the program really ran with, so that the orchestration
 * can check that a configuration (chrt, taskset, detach run) took effect. */
void bench_json_self(struct json *j);
/* The same, read into a struct (to send elsewhere, as fwq_mpi's ranks do)
 * and written under key. */
struct bench_self { int pid; char policy[16]; int priority; char cpus_allowed[128]; int cpu_at_end; };
void bench_self_read(struct bench_self *me);
void bench_json_self_of(struct json *j, const char *key, const struct bench_self *me);
/* FWQ's fixed work: loops of a dependent multiply-add chain, from
 * registers; bench_time_work() times one quantum in TSC cycles;
 * bench_calibrate_loops() gives the loop count for about quantum cycles. */
uint64_t bench_work(uint64_t loops);
uint64_t bench_time_work(uint64_t loops);
uint64_t bench_calibrate_loops(uint64_t quantum);
/* FWQ statistics (src/lib/stats.h) as the JSON object key. */
struct fwq_stats;
void bench_json_fwq_stats(struct json *j, const char *key, const struct fwq_stats *st);
/* Parses a non-negative integer with an optional k/M suffix (10k = 10000). */
int bench_parse_count(const char *s, uint64_t *v);
/* Opens path for writing ("-" is stdout); NULL with errno on failure. */
FILE *bench_open_out(const char *path);

/* The options every measurement program takes: -c/--cpu, -s/--samples,
 * -w/--warmup, -j/--json, --quiet.  A program's options struct holds them
 * as BENCH_COMMON (an anonymous union: o.cpu and o.common alike). */
#define BENCH_COMMON_FIELDS int cpu; uint64_t samples, warmup; const char *json, *intervals; bool quiet
struct bench_common { BENCH_COMMON_FIELDS; };
#define BENCH_COMMON union { struct bench_common common; struct { BENCH_COMMON_FIELDS; }; }
#define BENCH_COMMON_LONGOPTS                                          \
	{ "cpu", required_argument, NULL, 'c' },                       \
	{ "samples", required_argument, NULL, 's' },                   \
	{ "warmup", required_argument, NULL, 'w' },                    \
	{ "json", required_argument, NULL, 'j' },                      \
	{ "quiet", no_argument, NULL, 'Q' },                           \
	{ "intervals", required_argument, NULL, 'I' },                 \
	{ "help", no_argument, NULL, 'h' }
#define BENCH_COMMON_SHORTOPTS "c:s:w:j:h"
/* Takes option c if it is a common one: 1; 0 if it is the program's own.
 * A bad value: one error line naming prog, exit 2. */
int bench_common_opt(const char *prog, int c, const char *arg, struct bench_common *o);
/* --intervals FILE: for each measured sample the TSC span in which a stall
 * would have made it worse, as pairs of native-endian u64 (start, end), for
 * bench/tracecell to attribute.  0 or -errno. */
int bench_write_intervals(const char *path, const uint64_t *start, const uint64_t *end, uint64_t n);
/* After getopt: no operands, a sane sample count; exit 2 otherwise. */
void bench_common_done(const char *prog, int argc, char **argv, const struct bench_common *o);

#endif
