/* Helpers shared by the measurement programs in bench/. */
#include "lib/bench.h"
#include "lib/stats.h"

#include <getopt.h>

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int bench_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		return -errno;
	return 0;
}

int bench_mlock(void)
{
	return mlockall(MCL_CURRENT | MCL_FUTURE) ? -errno : 0;
}

static const char *policy_name(int p)
{
	switch (p) {
	case SCHED_OTHER: return "SCHED_OTHER";
	case SCHED_FIFO: return "SCHED_FIFO";
	case SCHED_RR: return "SCHED_RR";
	case SCHED_BATCH: return "SCHED_BATCH";
	case SCHED_IDLE: return "SCHED_IDLE";
	default: return "unknown";
	}
}

void bench_self_read(struct bench_self *me)
{
	struct sched_param sp = { 0 };
	cpu_set_t set;

	memset(me, 0, sizeof(*me));
	me->pid = getpid();
	snprintf(me->policy, sizeof(me->policy), "%s", policy_name(sched_getscheduler(0)));
	sched_getparam(0, &sp);
	me->priority = sp.sched_priority;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		cpulist_format(&set, me->cpus_allowed, sizeof(me->cpus_allowed));
	me->cpu_at_end = sched_getcpu();
}

void bench_json_self_of(struct json *j, const char *key, const struct bench_self *me)
{
	json_object_begin(j, key);
	json_int(j, "pid", me->pid);
	json_str(j, "policy", me->policy);
	json_int(j, "priority", me->priority);
	json_str(j, "cpus_allowed", me->cpus_allowed);
	json_int(j, "cpu_at_end", me->cpu_at_end);
	json_object_end(j);
}

void bench_json_self(struct json *j)
{
	struct bench_self me;

	bench_self_read(&me);
	bench_json_self_of(j, "self", &me);
}

/* The work: a dependent multiply-add chain the compiler can neither
 * vectorise nor remove (the empty asm makes x opaque); it runs from
 * registers, as LLNL's loop does. */
__attribute__((noinline)) uint64_t bench_work(uint64_t loops)
{
	uint64_t x = 1;

	for (uint64_t i = 0; i < loops; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

uint64_t bench_time_work(uint64_t loops)
{
	uint64_t t0 = rdtscp();
	bench_work(loops);
	return rdtscp() - t0;
}

/* The fastest of a few trial runs, since the fastest is the one nothing
 * disturbed. */
uint64_t bench_calibrate_loops(uint64_t quantum)
{
	uint64_t trial = 100000, best = UINT64_MAX, loops;

	for (int i = 0; i < 30; i++) {
		uint64_t t = bench_time_work(trial);
		if (t < best)
			best = t;
	}
	loops = (uint64_t)((double)quantum * (double)trial / (double)best);
	return loops ? loops : 1;
}

int bench_parse_count(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (*end == 'k' || *end == 'K') {
		x *= 1000;
		end++;
	} else if (*end == 'M') {
		x *= 1000000;
		end++;
	}
	if (*end)
		return -EINVAL;
	*v = x;
	return 0;
}

FILE *bench_open_out(const char *path)
{
	if (!strcmp(path, "-"))
		return stdout;
	return fopen(path, "w");
}

int bench_common_opt(const char *prog, int c, const char *arg, struct bench_common *o)
{
	uint64_t v;

	switch (c) {
	case 'c':
		if (bench_parse_count(arg, &v) || v >= CPU_SETSIZE) {
			fprintf(stderr, "%s: bad CPU '%s'\n", prog, arg);
			exit(2);
		}
		o->cpu = (int)v;
		return 1;
	case 's':
	case 'w':
		if (bench_parse_count(arg, &v) || (c == 's' && v == 0)) {
			fprintf(stderr, "%s: bad number '%s' for -%c\n", prog, arg, c);
			exit(2);
		}
		*(c == 's' ? &o->samples : &o->warmup) = v;
		return 1;
	case 'j':
		o->json = arg;
		return 1;
	case 'Q':
		o->quiet = true;
		return 1;
	case 'I':
		o->intervals = arg;
		return 1;
	}
	return 0;
}

void bench_common_done(const char *prog, int argc, char **argv, const struct bench_common *o)
{
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
		exit(2);
	}
	if (o->samples > 100000000ull) {
		fprintf(stderr, "%s: at most 100M samples\n", prog);
		exit(2);
	}
}

int bench_write_intervals(const char *path, const uint64_t *start, const uint64_t *end, uint64_t n)
{
	FILE *f = fopen(path, "we");
	int err = 0;

	if (!f)
		return -errno;
	for (uint64_t i = 0; i < n && !err; i++)
		if (fwrite(&start[i], 8, 1, f) != 1 || fwrite(&end[i], 8, 1, f) != 1)
			err = -EIO;
	if (fclose(f) && !err)
		err = -EIO;
	return err;
}

void bench_json_fwq_stats(struct json *j, const char *key, const struct fwq_stats *st)
{
	json_object_begin(j, key);
	json_uint(j, "n", st->n);
	json_uint(j, "min", st->min);
	json_uint(j, "max", st->max);
	json_uint(j, "median", st->median);
	json_double(j, "mean", st->mean);
	json_uint(j, "delta_max", st->d_max);
	json_uint(j, "delta_p999", st->d_p999);
	json_uint(j, "delta_p99", st->d_p99);
	json_uint(j, "delta_median", st->d_median);
	json_double(j, "delta_max_pct", st->d_max_pct);
	json_double(j, "delta_p999_pct", st->d_p999_pct);
	json_double(j, "delta_p99_pct", st->d_p99_pct);
	json_double(j, "delta_median_pct", st->d_median_pct);
	json_object_end(j);
}
