/* fwq: Fixed Work Quantum (LLNL FWQ): the same loop of work, timed with the
 * TSC, many times over.  An undisturbed machine takes the same time for
 * every quantum; what the OS and the hardware take away shows as deltas to
 * the minimum.  Reports max, p99.9, p99 and median deltas in cycles and in
 * percent of the minimum; --json keeps every raw sample. */
#include "lib/bench.h"
#include "lib/stats.h"
#include "lib/util.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SAMPLES 10000
#define DEFAULT_WARMUP  100
#define DEFAULT_QUANTUM 4300000ull   /* cycles: the paper's quantum */

struct fwq_opts {
	BENCH_COMMON;            /* cpu (-1: do not pin), samples, warmup, json, quiet */
	uint64_t loops;          /* 0: calibrate to quantum */
	uint64_t quantum;
};

static int usage(int status)
{
	FILE *f = status ? stderr : stdout;

	fprintf(f,
"usage: fwq [OPTIONS]\n"
"\n"
"Fixed Work Quantum: times the same loop of work SAMPLES times with the TSC\n"
"and reports the deltas to the fastest quantum (the noise).\n"
"\n"
"  -c, --cpu CPU        pin to CPU (default: wherever it is started)\n"
"  -s, --samples N      measured quanta (default %d; 10k and 1M accepted)\n"
"  -w, --warmup N       quanta run and discarded first (default %d)\n"
"  -q, --quantum CYC    calibrate the work to about CYC TSC cycles (default %llu)\n"
"  -l, --loops N        use exactly N loop iterations per quantum (no calibration)\n"
"  -j, --json FILE      write header, statistics and raw samples as JSON\n"
"      --intervals FILE each quantum's TSC start and end, for bench/tracecell\n"
"      --quiet          no summary on stdout\n"
"  -h, --help           this text\n",
		DEFAULT_SAMPLES, DEFAULT_WARMUP, DEFAULT_QUANTUM);
	exit(status);
}

static void parse(int argc, char **argv, struct fwq_opts *o)
{
	static const struct option lo[] = {
		BENCH_COMMON_LONGOPTS,
		{ "quantum", required_argument, NULL, 'q' },
		{ "loops", required_argument, NULL, 'l' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	uint64_t v;

	while ((c = getopt_long(argc, argv, BENCH_COMMON_SHORTOPTS "q:l:", lo, NULL)) != -1) {
		if (bench_common_opt("fwq", c, optarg, &o->common))
			continue;
		switch (c) {
		case 'q': case 'l':
			if (bench_parse_count(optarg, &v) || v == 0) {
				fprintf(stderr, "fwq: bad number '%s' for -%c\n", optarg, c);
				exit(2);
			}
			*(c == 'q' ? &o->quantum : &o->loops) = v;
			break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	bench_common_done("fwq", argc, argv, &o->common);
}

int main(int argc, char **argv)
{
	struct fwq_opts o = { .cpu = -1, .samples = DEFAULT_SAMPLES,
			      .warmup = DEFAULT_WARMUP, .quantum = DEFAULT_QUANTUM };
	struct run_header h;
	struct tsc_clock clk;
	struct fwq_stats st;
	uint64_t *s, *at;
	int err;

	run_header_init(&h, argc, argv);
	parse(argc, argv, &o);

	if (o.cpu >= 0 && (err = bench_pin(o.cpu))) {
		fprintf(stderr, "fwq: cannot pin to CPU %d: %s\n", o.cpu, strerror(-err));
		return 1;
	}
	bench_mlock();   /* best effort: without it a page fault is noise too */
	if ((err = tsc_calibrate(&clk, 50000000))) {
		fprintf(stderr, "fwq: TSC calibration failed: %s\n", strerror(-err));
		return 1;
	}
	h.tsc_hz = clk.hz;
	/* with --intervals: start times, and room for the ends after s */
	s = calloc(o.intervals ? 2 * o.samples : o.samples, sizeof(*s));
	at = o.intervals ? calloc(o.samples, sizeof(*at)) : NULL;
	if (!s || (o.intervals && !at)) {
		fprintf(stderr, "fwq: out of memory for %llu samples\n", (unsigned long long)o.samples);
		return 1;
	}
	if (!o.loops)
		o.loops = bench_calibrate_loops(o.quantum);

	for (uint64_t i = 0; i < o.warmup; i++)
		bench_time_work(o.loops);
	for (uint64_t i = 0; i < o.samples; i++) {
		if (at)
			at[i] = rdtsc();
		s[i] = bench_time_work(o.loops);
	}
	clock_gettime(CLOCK_REALTIME, &h.end);
	if (at) {
		/* a quantum spans [start, start + its time]: what ran inside it */
		for (uint64_t i = 0; i < o.samples; i++)
			s[o.samples + i] = at[i] + s[i];
		if ((err = bench_write_intervals(o.intervals, at, s + o.samples, o.samples))) {
			fprintf(stderr, "fwq: cannot write %s: %s\n", o.intervals, strerror(-err));
			return 1;
		}
	}

	fwq_stats_compute(s, o.samples, &st);

	if (!o.quiet) {
		printf("fwq: %llu samples of %llu loops, min %llu cycles (%.3f ms at %.3f GHz)\n",
		       (unsigned long long)st.n, (unsigned long long)o.loops,
		       (unsigned long long)st.min, (double)st.min * 1e3 / (double)clk.hz,
		       (double)clk.hz / 1e9);
		printf("deltas to min: max %llu (%.4f%%)  p99.9 %llu (%.4f%%)  p99 %llu (%.4f%%)  median %llu (%.4f%%)\n",
		       (unsigned long long)st.d_max, st.d_max_pct,
		       (unsigned long long)st.d_p999, st.d_p999_pct,
		       (unsigned long long)st.d_p99, st.d_p99_pct,
		       (unsigned long long)st.d_median, st.d_median_pct);
	}

	if (o.json) {
		FILE *f = bench_open_out(o.json);
		struct json j;

		if (!f) {
			fprintf(stderr, "fwq: cannot write %s: %s\n", o.json, strerror(errno));
			return 1;
		}
		json_init(&j, f);
		json_object_begin(&j, NULL);
		json_common_header(&j, &h, 0);
		json_str(&j, "program", "fwq");
		bench_json_self(&j);
		json_object_begin(&j, "params");
		json_int(&j, "cpu", o.cpu);
		json_uint(&j, "samples", o.samples);
		json_uint(&j, "warmup", o.warmup);
		json_uint(&j, "loops", o.loops);
		json_uint(&j, "quantum_target", o.quantum);
		json_object_end(&j);
		bench_json_fwq_stats(&j, "stats", &st);
		json_array_begin(&j, "samples");
		for (uint64_t i = 0; i < o.samples; i++)
			json_uint(&j, NULL, s[i]);
		json_array_end(&j);
		json_object_end(&j);
		fputc('\n', f);
		if ((f != stdout && fclose(f)) || (f == stdout && fflush(f))) {
			fprintf(stderr, "fwq: writing %s failed\n", o.json);
			return 1;
		}
	}
	free(s);
	return 0;
}
