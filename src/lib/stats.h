/* Statistics for the benchmarks (bench/fwq.c, bench/ctlloop.c), in one place
 * so that tests/bench_stats.c can check them on known samples.
 *
 * Percentiles are nearest-rank: the smallest sample such that at least p
 * percent of the samples are <= it (p = 100 gives the maximum, p = 50 of
 * {1,2,3,4} gives 2).  A nearest-rank percentile is always a sample that was
 * measured, which is what a "p99.9 of 10,000 samples" should mean. */
#ifndef DETACH_LIB_STATS_H
#define DETACH_LIB_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Sorts v in place, ascending. */
void stats_sort_u64(uint64_t *v, size_t n);
void stats_sort_i64(int64_t *v, size_t n);
/* Nearest-rank percentile of an ascending array; n must be > 0, 0 < p <= 100. */
uint64_t stats_pct_sorted_u64(const uint64_t *sorted, size_t n, double p);
int64_t stats_pct_sorted_i64(const int64_t *sorted, size_t n, double p);

/* FWQ: durations of a fixed work quantum; every figure is a delta to the
 * minimum (the undisturbed quantum), also as percent of the minimum. */
struct fwq_stats {
	size_t n;
	uint64_t min, max, median;
	double mean;
	uint64_t d_max, d_p999, d_p99, d_median;   /* deltas to min, cycles */
	double d_max_pct, d_p999_pct, d_p99_pct, d_median_pct;
};
/* Returns 0, or -EINVAL for n == 0 / -ENOMEM. samples is not modified. */
int fwq_stats_compute(const uint64_t *samples, size_t n, struct fwq_stats *s);

/* Control loop: each sample is the TSC delta between consecutive wake-ups;
 * its deviation from the target period (signed, cycles) is what counts.
 * max_pos is the largest deviation (late), max_neg the smallest (early,
 * usually negative); peak-to-peak = max_pos - max_neg, which is the paper's
 * "maximum deviation" (+440,000 / -422,000 -> 862,000). */
struct ctl_stats {
	size_t n;
	uint64_t period;                  /* target, cycles */
	int64_t max_pos, max_neg, p2p;
	double max_pos_pct, max_neg_pct, p2p_pct;   /* percent of the period */
	uint64_t p999_abs, p99_abs, median_abs;     /* of |deviation| */
	double p999_abs_pct;
	double mean_dev;                  /* average deviation (clock offset) */
};
int ctl_stats_compute(const uint64_t *deltas, size_t n, uint64_t period, struct ctl_stats *s);

#endif
