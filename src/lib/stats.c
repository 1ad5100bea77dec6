/* Benchmark statistics: see stats.h for the definitions. */
#include "lib/stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

void stats_sort_u64(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
}

void stats_sort_i64(int64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_i64);
}

/* 1-based rank ceil(p/100 * n), clamped to [1, n].  The small epsilon keeps
 * 99.9% of 10,000 at rank 9,990 despite 0.999 * 10000 = 9990.000000000002. */
static size_t rank(size_t n, double p)
{
	double r = ceil(p / 100.0 * (double)n - 1e-9);

	if (r < 1)
		return 1;
	if (r > (double)n)
		return n;
	return (size_t)r;
}

uint64_t stats_pct_sorted_u64(const uint64_t *sorted, size_t n, double p)
{
	return sorted[rank(n, p) - 1];
}

int64_t stats_pct_sorted_i64(const int64_t *sorted, size_t n, double p)
{
	return sorted[rank(n, p) - 1];
}

static double pct(double part, double whole)
{
	return whole ? 100.0 * part / whole : 0.0;
}

int fwq_stats_compute(const uint64_t *samples, size_t n, struct fwq_stats *s)
{
	uint64_t *v;
	double sum = 0;

	if (!n)
		return -EINVAL;
	v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	memcpy(v, samples, n * sizeof(*v));
	stats_sort_u64(v, n);
	for (size_t i = 0; i < n; i++)
		sum += (double)v[i];

	memset(s, 0, sizeof(*s));
	s->n = n;
	s->min = v[0];
	s->max = v[n - 1];
	s->median = stats_pct_sorted_u64(v, n, 50);
	s->mean = sum / (double)n;
	s->d_max = s->max - s->min;
	s->d_p999 = stats_pct_sorted_u64(v, n, 99.9) - s->min;
	s->d_p99 = stats_pct_sorted_u64(v, n, 99) - s->min;
	s->d_median = s->median - s->min;
	s->d_max_pct = pct((double)s->d_max, (double)s->min);
	s->d_p999_pct = pct((double)s->d_p999, (double)s->min);
	s->d_p99_pct = pct((double)s->d_p99, (double)s->min);
	s->d_median_pct = pct((double)s->d_median, (double)s->min);
	free(v);
	return 0;
}

int ctl_stats_compute(const uint64_t *deltas, size_t n, uint64_t period, struct ctl_stats *s)
{
	uint64_t *a;
	double sum = 0;

	if (!n || !period)
		return -EINVAL;
	a = malloc(n * sizeof(*a));
	if (!a)
		return -ENOMEM;

	memset(s, 0, sizeof(*s));
	s->n = n;
	s->period = period;
	s->max_pos = INT64_MIN;
	s->max_neg = INT64_MAX;
	for (size_t i = 0; i < n; i++) {
		int64_t d = (int64_t)(deltas[i] - period);   /* two's complement: signed */

		if (d > s->max_pos)
			s->max_pos = d;
		if (d < s->max_neg)
			s->max_neg = d;
		a[i] = d < 0 ? (uint64_t)-d : (uint64_t)d;
		sum += (double)d;
	}
	stats_sort_u64(a, n);
	s->p2p = s->max_pos - s->max_neg;
	s->max_pos_pct = pct((double)s->max_pos, (double)period);
	s->max_neg_pct = pct((double)s->max_neg, (double)period);
	s->p2p_pct = pct((double)s->p2p, (double)period);
	s->p999_abs = stats_pct_sorted_u64(a, n, 99.9);
	s->p99_abs = stats_pct_sorted_u64(a, n, 99);
	s->median_abs = stats_pct_sorted_u64(a, n, 50);
	s->p999_abs_pct = pct((double)s->p999_abs, (double)period);
	s->mean_dev = sum / (double)n;
	free(a);
	return 0;
}
