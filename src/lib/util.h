/* Helpers shared by the runtime, the command, the benchmarks and the tests.
 * Internal: nothing here is part of the public API (include/detach/).
 * Functions return 0 or -errno; none of them prints. */
#ifndef DETACH_LIB_UTIL_H
#define DETACH_LIB_UTIL_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* ---- CPU lists: "2-5,8", "0", "1-3,7-9" -------------------------------- */
int cpulist_parse(const char *s, cpu_set_t *set);
/* Formats set as a compact list into buf; returns buf ("" when empty). */
char *cpulist_format(const cpu_set_t *set, char *buf, size_t len);
/* The n-th CPU (0-based) of set in ascending order, or -1. */
int cpuset_nth(const cpu_set_t *set, int n);
/* Online CPUs per /sys/devices/system/cpu/online. */
int cpus_online(cpu_set_t *set);

/* ---- durations: "30s", "20m", "2h", "500ms", "100us", "10ns"; a bare
 * number is seconds. --------------------------------------------------- */
int duration_parse(const char *s, uint64_t *ns);

/* ---- time-stamp counter ------------------------------------------------- */
static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

/* rdtscp waits for earlier instructions to finish: use it to end a
 * measured interval. */
static inline uint64_t rdtscp(void)
{
	uint32_t lo, hi, aux;
	__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
	return ((uint64_t)hi << 32) | lo;
}

static inline void cpu_relax(void)
{
	__asm__ volatile("pause" ::: "memory");
}

/* TSC <-> CLOCK_MONOTONIC.  ns = base_ns + (tsc - base_tsc) * mult >> shift */
struct tsc_clock {
	uint64_t hz;        /* measured TSC frequency */
	uint64_t base_tsc;
	uint64_t base_ns;   /* CLOCK_MONOTONIC at base_tsc */
	uint32_t mult;
	uint32_t shift;
};
/* Calibrates against CLOCK_MONOTONIC over about window_ns (0: 20 ms). */
int tsc_calibrate(struct tsc_clock *c, uint64_t window_ns);
/* The same without sleeping: spins on the vDSO's clock (no system call,
 * for a detached thread). */
int tsc_calibrate_busy(struct tsc_clock *c, uint64_t window_ns);
static inline uint64_t tsc_to_ns(const struct tsc_clock *c, uint64_t tsc)
{
	return c->base_ns + (uint64_t)(((unsigned __int128)(tsc - c->base_tsc) * c->mult) >> c->shift);
}
static inline uint64_t tsc_cycles_to_ns(const struct tsc_clock *c, uint64_t cycles)
{
	return (uint64_t)(((unsigned __int128)cycles * c->mult) >> c->shift);
}
uint64_t ns_to_tsc_cycles(const struct tsc_clock *c, uint64_t ns);
/* The step in which the TSC's readout advances on this CPU, in cycles: 1
 * where it counts every cycle; more on a VM whose TSC is read through a
 * grid, where no two measured times can differ by less than it.  Takes
 * about 2 ms. */
uint64_t tsc_step(void);

/* Marsaglia's xorshift64: a fast reproducible sequence (never 0 from a
 * state that is not 0), for benchmarks' and tests' random choices. */
static inline uint64_t xorshift64(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

static inline uint64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- system facts for headers ------------------------------------------- */
/* "AMD EPYC ..." from /proc/cpuinfo, or "unknown". */
void cpu_model(char *buf, size_t len);
/* Reads a small text file into buf, newline stripped; -errno on failure. */
int read_text_file(const char *path, char *buf, size_t len);
/* Writes a string to a (sysfs/proc) file; -errno on failure. */
int write_text_file(const char *path, const char *s);
/* Integer sysctl-like read of a file holding one number. */
int read_long_file(const char *path, long *v);
/* Time the hypervisor took from cpu so far (steal of /proc/stat, in ticks
 * of USER_HZ, so 10 ms steps), or -1. */
long long cpu_steal_ns(int cpu);

/* ---- JSON writer ---------------------------------------------------------
 * A tiny streaming writer: it tracks nesting and commas, escapes strings.
 *   struct json j; json_init(&j, f);
 *   json_object_begin(&j, NULL); json_int(&j, "n", 3); json_object_end(&j);
 * key is NULL inside arrays and at the top level. */
#define JSON_MAX_DEPTH 32
struct json {
	FILE *f;
	int depth;
	bool need_comma[JSON_MAX_DEPTH];
	bool pretty;
};
void json_init(struct json *j, FILE *f);
void json_object_begin(struct json *j, const char *key);
void json_object_end(struct json *j);
void json_array_begin(struct json *j, const char *key);
void json_array_end(struct json *j);
void json_str(struct json *j, const char *key, const char *v);
void json_int(struct json *j, const char *key, long long v);
void json_uint(struct json *j, const char *key, unsigned long long v);
void json_double(struct json *j, const char *key, double v);
void json_bool(struct json *j, const char *key, bool v);
void json_null(struct json *j, const char *key);

/* The common header every JSON output carries (rt-tests' rt_write_json):
 * the layout's format number, the command line as given (save argv before
 * getopt reorders it), version, start and end time, kernel release, CPU
 * model, TSC frequency, return code.  Writes keys into the current (open)
 * object.  docs/schema/ describes every output; DETACH_JSON_FORMAT grows
 * when a field changes meaning or goes away (adding one keeps it). */
#define DETACH_JSON_FORMAT 1
struct run_header {
	int argc;
	char **argv;          /* a copy made by run_header_init */
	struct timespec start;
	struct timespec end;
	uint64_t tsc_hz;      /* 0: not calibrated */
};
void run_header_init(struct run_header *h, int argc, char **argv);
void run_header_free(struct run_header *h);
void json_common_header(struct json *j, const struct run_header *h, int return_code);

#endif
