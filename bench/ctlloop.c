/* ctlloop: the paper's control loop.  Blocks until an absolute time with
 * clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), advances the deadline by
 * the period, and reads the TSC at every wake-up; the deviation of each
 * wake-up-to-wake-up delta from the period is the timing error.
 *
 *   next = now() + period;
 *   for (;;) { wait_for_time(next); tsc[i++] = rdtsc(); next += period; }
 *
 * Under `detach run` the same unmodified binary gets its waits served by
 * the runtime.  --spin waits by polling the TSC instead: no timer, no
 * sleep, the machine's own noise floor for this measurement.  --spin-clock
 * is the floor of any correct timed wait in user space: it spins on the
 * TSC toward the deadline and ends when CLOCK_MONOTONIC, read through the
 * vDSO, says it has passed (the runtime's way, clock.c, inline in the
 * loop: no call, no return).  --spin-framed is the same wait behind two
 * calls made before it, as a program's clock_nanosleep is (its own call,
 * libc's wrapper): the floor of a timed wait that a function call serves,
 * since an interrupt during the wait (the tick) leaves the return-address
 * predictor and the caches cold for those returns (docs/runtime.md). */
#include "lib/bench.h"
#include "lib/stats.h"
#include "lib/util.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SAMPLES 10000
#define DEFAULT_WARMUP  10
#define DEFAULT_PERIOD  1000000ull   /* ns */
#define CHECK_NS        20000        /* --spin-clock: the clock read at least this often */

enum wait_kind { WAIT_SLEEP, WAIT_SPIN, WAIT_SPIN_CLOCK, WAIT_SPIN_FRAMED };
static const char *const wait_name[] = { "clock_nanosleep", "spin", "spin-clock", "spin-framed" };

struct ctl_opts {
	BENCH_COMMON;            /* cpu (-1: do not pin), samples, warmup, json, quiet */
	uint64_t period_ns;
	enum wait_kind wait;
};

static int usage(int status)
{
	FILE *f = status ? stderr : stdout;

	fprintf(f,
"usage: ctlloop [OPTIONS]\n"
"\n"
"A periodic control loop: sleeps until an absolute deadline with\n"
"clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), reads the TSC at each\n"
"wake-up and reports how far each period deviated from the target, in TSC\n"
"cycles: max+, max-, and the peak-to-peak \"maximum deviation\".\n"
"\n"
"  -c, --cpu CPU        pin to CPU (default: wherever it is started)\n"
"  -s, --samples N      measured periods (default %d)\n"
"  -w, --warmup N       periods run and discarded first (default %d)\n"
"  -p, --period DUR     period, e.g. 1000us, 1ms (default 1000us)\n"
"      --spin           wait by spinning on the TSC instead of sleeping\n"
"      --spin-clock     spin on the TSC toward the deadline, end when\n"
"                       CLOCK_MONOTONIC has passed it (a user-space wait's floor)\n"
"      --spin-framed    the same wait behind two function calls, as a program's\n"
"                       clock_nanosleep is (the floor of a wait a call serves)\n"
"  -j, --json FILE      write header, statistics and raw samples as JSON\n"
"      --intervals FILE for each period the TSC span of its lateness (wake-up\n"
"                       minus deviation to wake-up), for bench/tracecell\n"
"      --quiet          no summary on stdout\n"
"  -h, --help           this text\n",
		DEFAULT_SAMPLES, DEFAULT_WARMUP);
	exit(status);
}

static void parse(int argc, char **argv, struct ctl_opts *o)
{
	static const struct option lo[] = {
		BENCH_COMMON_LONGOPTS,
		{ "period", required_argument, NULL, 'p' },
		{ "spin", no_argument, NULL, 'S' },
		{ "spin-clock", no_argument, NULL, 'C' },
		{ "spin-framed", no_argument, NULL, 'F' },
		{ NULL, 0, NULL, 0 },
	};
	int c;
	uint64_t v;

	while ((c = getopt_long(argc, argv, BENCH_COMMON_SHORTOPTS "p:", lo, NULL)) != -1) {
		if (bench_common_opt("ctlloop", c, optarg, &o->common))
			continue;
		switch (c) {
		case 'p':
			if (duration_parse(optarg, &v) || v < 10000 || v > 10000000000ull) {
				fprintf(stderr, "ctlloop: bad period '%s' (10us to 10s, e.g. 1000us)\n", optarg);
				exit(2);
			}
			o->period_ns = v;
			break;
		case 'S': o->wait = WAIT_SPIN; break;
		case 'C': o->wait = WAIT_SPIN_CLOCK; break;
		case 'F': o->wait = WAIT_SPIN_FRAMED; break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	bench_common_done("ctlloop", argc, argv, &o->common);
}

static void ts_add(struct timespec *t, uint64_t ns)
{
	t->tv_nsec += (long)(ns % 1000000000ull);
	t->tv_sec += (time_t)(ns / 1000000000ull);
	if (t->tv_nsec >= 1000000000L) {
		t->tv_nsec -= 1000000000L;
		t->tv_sec++;
	}
}

/* tsc[0..n]: n + 1 wake-ups give n deltas. */
static int run_sleep(uint64_t *tsc, uint64_t n, uint64_t period_ns)
{
	struct timespec next;

	clock_gettime(CLOCK_MONOTONIC, &next);
	ts_add(&next, period_ns);
	for (uint64_t i = 0; i <= n; i++) {
		int err;

		do
			err = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		while (err == EINTR);
		if (err)
			return -err;
		tsc[i] = rdtsc();
		ts_add(&next, period_ns);
	}
	return 0;
}

static void run_spin(uint64_t *tsc, uint64_t n, uint64_t period_cyc)
{
	uint64_t next = rdtsc() + period_cyc;

	for (uint64_t i = 0; i <= n; i++) {
		uint64_t t;

		while ((t = rdtsc()) < next)
			cpu_relax();
		tsc[i] = t;
		next += period_cyc;
	}
}

/* As the runtime waits (clock.c): toward a TSC target from the last clock
 * read, the clock read again at the target (or every CHECK_NS), done when
 * it has passed the deadline. */
static inline __attribute__((always_inline)) void wait_clock(uint64_t deadline, uint64_t check,
							      const struct tsc_clock *clk)
{
	uint64_t now;

	while ((now = monotonic_ns()) < deadline) {
		uint64_t c = rdtsc(), left = ns_to_tsc_cycles(clk, deadline - now);
		uint64_t target = c + (left < check ? left : check);

		while (rdtsc() < target)
			cpu_relax();
	}
}

/* --spin-framed: the wait two calls deep; the empty asm keeps each call a
 * call and not a jump */
static __attribute__((noinline)) void wait_inner(uint64_t deadline, uint64_t check, const struct tsc_clock *clk)
{
	wait_clock(deadline, check, clk);
	__asm__ volatile("");
}

static __attribute__((noinline)) void wait_outer(uint64_t deadline, uint64_t check, const struct tsc_clock *clk)
{
	wait_inner(deadline, check, clk);
	__asm__ volatile("");
}

static void run_spin_clock(uint64_t *tsc, uint64_t n, uint64_t period_ns, const struct tsc_clock *clk,
			   bool framed)
{
	uint64_t next = monotonic_ns() + period_ns, check = ns_to_tsc_cycles(clk, CHECK_NS);

	for (uint64_t i = 0; i <= n; i++) {
		if (framed)
			wait_outer(next, check, clk);
		else
			wait_clock(next, check, clk);
		tsc[i] = rdtsc();
		next += period_ns;
	}
}

int main(int argc, char **argv)
{
	struct ctl_opts o = { .cpu = -1, .samples = DEFAULT_SAMPLES,
			      .warmup = DEFAULT_WARMUP, .period_ns = DEFAULT_PERIOD };
	struct run_header h;
	struct tsc_clock clk;
	struct ctl_stats st;
	uint64_t *tsc, *d, n, period;
	int err;

	run_header_init(&h, argc, argv);
	parse(argc, argv, &o);

	if (o.cpu >= 0 && (err = bench_pin(o.cpu))) {
		fprintf(stderr, "ctlloop: cannot pin to CPU %d: %s\n", o.cpu, strerror(-err));
		return 1;
	}
	bench_mlock();
	/* The period in TSC cycles is the target of every delta; calibrate
	 * against CLOCK_MONOTONIC (the clock the timer follows) over 200 ms so
	 * that the error is a few cycles per period. */
	if ((err = tsc_calibrate(&clk, 200000000))) {
		fprintf(stderr, "ctlloop: TSC calibration failed: %s\n", strerror(-err));
		return 1;
	}
	h.tsc_hz = clk.hz;
	/* the resolution of every delta below: on a VM whose TSC reads in
	 * steps, the floor's median deviation is under one step */
	uint64_t step = tsc_step();
	period = ns_to_tsc_cycles(&clk, o.period_ns);
	n = o.warmup + o.samples;
	tsc = calloc(n + 1, sizeof(*tsc));
	d = calloc(o.samples, sizeof(*d));
	if (!tsc || !d) {
		fprintf(stderr, "ctlloop: out of memory\n");
		return 1;
	}
	if (o.wait == WAIT_SPIN) {
		run_spin(tsc, n, period);
	} else if (o.wait == WAIT_SPIN_CLOCK || o.wait == WAIT_SPIN_FRAMED) {
		run_spin_clock(tsc, n, o.period_ns, &clk, o.wait == WAIT_SPIN_FRAMED);
	} else if ((err = run_sleep(tsc, n, o.period_ns))) {
		fprintf(stderr, "ctlloop: clock_nanosleep: %s\n", strerror(-err));
		return 1;
	}
	clock_gettime(CLOCK_REALTIME, &h.end);
	for (uint64_t i = 0; i < o.samples; i++)
		d[i] = tsc[o.warmup + i + 1] - tsc[o.warmup + i];
	ctl_stats_compute(d, o.samples, period, &st);
	if (o.intervals) {
		/* a late wake-up was held up in [due, woke]; an early one was not */
		uint64_t *due = calloc(o.samples, sizeof(*due));
		for (uint64_t i = 0; due && i < o.samples; i++)
			due[i] = tsc[o.warmup + i + 1] - (d[i] > period ? d[i] - period : 0);
		err = due ? bench_write_intervals(o.intervals, due, tsc + o.warmup + 1, o.samples) : -ENOMEM;
		free(due);
		if (err) {
			fprintf(stderr, "ctlloop: cannot write %s: %s\n", o.intervals, strerror(-err));
			return 1;
		}
	}

	if (!o.quiet) {
		printf("ctlloop: %llu periods of %llu us (%llu cycles at %.3f GHz, read in steps of %llu), %s\n",
		       (unsigned long long)st.n, (unsigned long long)(o.period_ns / 1000),
		       (unsigned long long)period, (double)clk.hz / 1e9, (unsigned long long)step,
		       wait_name[o.wait]);
		printf("max deviation %lld cycles (%.3f%%): %+lld / %+lld (%+.3f%% / %+.3f%%), p99.9 |dev| %llu (%.4f%%)\n",
		       (long long)st.p2p, st.p2p_pct, (long long)st.max_pos, (long long)st.max_neg,
		       st.max_pos_pct, st.max_neg_pct, (unsigned long long)st.p999_abs, st.p999_abs_pct);
	}
	if (o.json) {
		FILE *f = bench_open_out(o.json);
		struct json j;

		if (!f) {
			fprintf(stderr, "ctlloop: cannot write %s: %s\n", o.json, strerror(errno));
			return 1;
		}
		json_init(&j, f);
		json_object_begin(&j, NULL);
		json_common_header(&j, &h, 0);
		json_str(&j, "program", "ctlloop");
		bench_json_self(&j);
		json_object_begin(&j, "params");
		json_int(&j, "cpu", o.cpu);
		json_uint(&j, "samples", o.samples);
		json_uint(&j, "warmup", o.warmup);
		json_uint(&j, "period_ns", o.period_ns);
		json_uint(&j, "period_cycles", period);
		json_uint(&j, "tsc_step", step);
		json_str(&j, "wait", wait_name[o.wait]);
		json_object_end(&j);
		json_object_begin(&j, "stats");
		json_uint(&j, "n", st.n);
		json_uint(&j, "period", st.period);
		json_int(&j, "max_pos", st.max_pos);
		json_int(&j, "max_neg", st.max_neg);
		json_int(&j, "p2p", st.p2p);
		json_double(&j, "max_pos_pct", st.max_pos_pct);
		json_double(&j, "max_neg_pct", st.max_neg_pct);
		json_double(&j, "p2p_pct", st.p2p_pct);
		json_uint(&j, "p999_abs", st.p999_abs);
		json_uint(&j, "p99_abs", st.p99_abs);
		json_uint(&j, "median_abs", st.median_abs);
		json_double(&j, "p999_abs_pct", st.p999_abs_pct);
		json_double(&j, "mean_dev", st.mean_dev);
		json_object_end(&j);
		/* Raw TSC deltas between consecutive wake-ups; deviation is
		 * sample - params.period_cycles. */
		json_array_begin(&j, "samples");
		for (uint64_t i = 0; i < o.samples; i++)
			json_uint(&j, NULL, d[i]);
		json_array_end(&j);
		json_object_end(&j);
		fputc('\n', f);
		if ((f != stdout && fclose(f)) || (f == stdout && fflush(f))) {
			fprintf(stderr, "ctlloop: writing %s failed\n", o.json);
			return 1;
		}
	}
	free(tsc);
	free(d);
	return 0;
}
