/* TSC calibration against CLOCK_MONOTONIC.
 * The TSC is read between two clock reads and the pair with the tightest
 * bracket is kept at each end of the window, so a preemption in the middle
 * of a pair costs accuracy only if every pair of the batch was hit. */
#include "lib/util.h"

#include <errno.h>

struct pair { uint64_t tsc, ns; };

static struct pair tight_pair(void)
{
	struct pair best = { 0, 0 };
	uint64_t best_width = UINT64_MAX;

	for (int i = 0; i < 64; i++) {
		uint64_t t0 = monotonic_ns();
		uint64_t tsc = rdtsc();
		uint64_t t1 = monotonic_ns();

		if (t1 - t0 < best_width) {
			best_width = t1 - t0;
			best.tsc = tsc;
			best.ns = t0 + (t1 - t0) / 2;
		}
	}
	return best;
}

static int calibrate(struct tsc_clock *c, uint64_t window_ns, bool busy)
{
	struct pair a, b;
	struct timespec ts;

	if (!window_ns)
		window_ns = 20000000;
	a = tight_pair();
	if (busy) {
		while (monotonic_ns() - a.ns < window_ns)
			cpu_relax();
	} else {
		ts.tv_sec = (time_t)(window_ns / 1000000000ull);
		ts.tv_nsec = (long)(window_ns % 1000000000ull);
		nanosleep(&ts, NULL);
	}
	b = tight_pair();
	if (b.tsc <= a.tsc || b.ns <= a.ns)
		return -EIO;
	c->hz = (uint64_t)((unsigned __int128)(b.tsc - a.tsc) * 1000000000ull / (b.ns - a.ns));
	if (!c->hz)
		return -EIO;
	/* mult/shift such that cycles * mult >> shift = ns, with 32 bits of
	 * fraction: exact to well below a nanosecond per second. */
	c->shift = 32;
	c->mult = (uint32_t)(((unsigned __int128)1000000000ull << c->shift) / c->hz);
	if (c->hz < 1000000000ull) {
		/* mult would overflow 32 bits below 1 GHz: trade precision. */
		c->shift = 24;
		c->mult = (uint32_t)(((unsigned __int128)1000000000ull << c->shift) / c->hz);
	}
	c->base_tsc = b.tsc;
	c->base_ns = b.ns;
	return 0;
}

int tsc_calibrate(struct tsc_clock *c, uint64_t window_ns)
{
	return calibrate(c, window_ns, false);
}

int tsc_calibrate_busy(struct tsc_clock *c, uint64_t window_ns)
{
	return calibrate(c, window_ns, true);
}

uint64_t ns_to_tsc_cycles(const struct tsc_clock *c, uint64_t ns)
{
	return (uint64_t)((unsigned __int128)ns * c->hz / 1000000000ull);
}

/* Back-to-back reads with a little work between them, of 0 to 31 steps:
 * on a TSC that counts every cycle their differences take every value
 * above the read's own cost; on one read through a grid (a hypervisor's
 * scaled TSC), only multiples of the grid's step. */
#define STEP_WORK  32
#define STEP_READS 2000
#define STEP_MAX   512

uint64_t tsc_step(void)
{
	uint32_t seen[STEP_MAX] = { 0 };
	volatile uint64_t x = 1;
	uint64_t total = 0, step = 0;

	for (int w = 0; w < STEP_WORK; w++)
		for (int i = 0; i < STEP_READS; i++) {
			uint64_t a = rdtsc();
			for (int k = 0; k < w; k++)
				x = x * 3 + 1;
			uint64_t d = rdtsc() - a;
			if (d < STEP_MAX) {
				seen[d]++;
				total++;
			}
		}
	/* Differences seen often (at least 1 in 1000; an interrupt makes the
	 * rest): the smallest above 1 (two reads within one step may differ
	 * by 1) is the step if every other one is a multiple of it, give or
	 * take 1. */
	for (uint64_t d = 2; d < STEP_MAX; d++) {
		if (seen[d] * 1000ull < total)
			continue;
		if (!step)
			step = d;
		else if (d % step > 1 && step - d % step > 1)
			return 1;
	}
	return step ? step : 1;
}
