/* Description: benchmark statistics (src/lib/stats.c) on known samples:
 * nearest-rank percentiles, FWQ deltas to the minimum, control-loop
 * deviations, max+/max- and the peak-to-peak "maximum deviation". */
#include "lib/stats.h"
#include "helpers/t.h"

#include <math.h>
#include <stdlib.h>

static int near(double a, double b)
{
	return fabs(a - b) < 1e-9 * (fabs(a) + fabs(b) + 1);
}

static void percentiles(void)
{
	uint64_t v[4] = { 1, 2, 3, 4 };
	uint64_t big[10000];
	int64_t iv[5] = { 3, -7, 0, 12, -1 };

	t_check(stats_pct_sorted_u64(v, 4, 50) == 2, "p50 of 1..4");
	t_check(stats_pct_sorted_u64(v, 4, 25) == 1, "p25 of 1..4");
	t_check(stats_pct_sorted_u64(v, 4, 75) == 3, "p75 of 1..4");
	t_check(stats_pct_sorted_u64(v, 4, 100) == 4, "p100 is the max");
	t_check(stats_pct_sorted_u64(v, 4, 0.001) == 1, "tiny p is the min");
	/* 1..10000: p99.9 is the 9990th smallest, p99 the 9900th */
	for (int i = 0; i < 10000; i++)
		big[i] = (uint64_t)(10000 - i);
	stats_sort_u64(big, 10000);
	t_check(big[0] == 1 && big[9999] == 10000, "sorted");
	t_check(stats_pct_sorted_u64(big, 10000, 99.9) == 9990, "p99.9 = %llu",
		(unsigned long long)stats_pct_sorted_u64(big, 10000, 99.9));
	t_check(stats_pct_sorted_u64(big, 10000, 99) == 9900, "p99");
	t_check(stats_pct_sorted_u64(big, 10000, 50) == 5000, "p50");
	stats_sort_i64(iv, 5);
	t_check(iv[0] == -7 && iv[4] == 12, "signed sort");
	t_check(stats_pct_sorted_i64(iv, 5, 50) == 0, "signed median");
}

static void fwq(void)
{
	/* min 1000; one outlier of +500 (50%), the rest +0..+9 */
	uint64_t s[1000];
	struct fwq_stats st;

	for (int i = 0; i < 1000; i++)
		s[i] = 1000 + (uint64_t)(i % 10);
	s[437] = 1500;
	t_check(fwq_stats_compute(s, 1000, &st) == 0, "compute");
	t_check(st.n == 1000, "n");
	t_check(st.min == 1000 && st.max == 1500, "min %llu max %llu",
		(unsigned long long)st.min, (unsigned long long)st.max);
	t_check(st.d_max == 500 && near(st.d_max_pct, 50.0), "delta max %llu %f",
		(unsigned long long)st.d_max, st.d_max_pct);
	/* sorted: 100 each of 1000..1009 except one 1007 became 1500;
	 * rank 999 (p99.9) is 1009, rank 990 (p99) is 1009, rank 500 is 1004 */
	t_check(st.d_p999 == 9, "p99.9 delta %llu", (unsigned long long)st.d_p999);
	t_check(st.d_p99 == 9, "p99 delta %llu", (unsigned long long)st.d_p99);
	t_check(st.d_median == 4, "median delta %llu", (unsigned long long)st.d_median);
	t_check(near(st.d_median_pct, 0.4), "median pct %f", st.d_median_pct);
	t_check(s[437] == 1500, "input left unsorted");
	t_check(fwq_stats_compute(s, 0, &st) != 0, "n = 0 refused");
}

static void ctl(void)
{
	/* period 1000: deltas 1000, 1440, 578 (-422), 1001, 999 */
	uint64_t d[5] = { 1000, 1440, 578, 1001, 999 };
	uint64_t big[2000];
	struct ctl_stats st;

	t_check(ctl_stats_compute(d, 5, 1000, &st) == 0, "compute");
	t_check(st.max_pos == 440, "max+ %lld", (long long)st.max_pos);
	t_check(st.max_neg == -422, "max- %lld", (long long)st.max_neg);
	t_check(st.p2p == 862, "peak to peak %lld (the slides' 862,000 = +440,000/-422,000)",
		(long long)st.p2p);
	t_check(near(st.p2p_pct, 86.2), "p2p pct %f", st.p2p_pct);
	t_check(near(st.max_pos_pct, 44.0) && near(st.max_neg_pct, -42.2), "pcts");
	t_check(st.p999_abs == 440, "p99.9 |dev| of 5 samples is the largest");
	t_check(st.median_abs == 1, "median |dev| %llu", (unsigned long long)st.median_abs);
	t_check(near(st.mean_dev, (0 + 440 - 422 + 1 - 1) / 5.0), "mean dev %f", st.mean_dev);

	/* all late: max- is still the smallest deviation, here positive */
	uint64_t late[3] = { 1010, 1020, 1005 };
	t_check(ctl_stats_compute(late, 3, 1000, &st) == 0, "compute late");
	t_check(st.max_pos == 20 && st.max_neg == 5 && st.p2p == 15, "all late %lld %lld %lld",
		(long long)st.max_pos, (long long)st.max_neg, (long long)st.p2p);

	/* 2000 samples: |dev| = i % 100 except ten spikes of 5000 */
	for (int i = 0; i < 2000; i++)
		big[i] = 100000 + (uint64_t)(i % 100);
	for (int i = 0; i < 10; i++)
		big[i * 150] = 105000;
	ctl_stats_compute(big, 2000, 100000, &st);
	/* 10 of 2000 are 5000: rank 1998 (p99.9) is 5000; rank 1980 (p99) is 99 */
	t_check(st.p999_abs == 5000, "p99.9 |dev| %llu", (unsigned long long)st.p999_abs);
	t_check(st.p99_abs == 99, "p99 |dev| %llu", (unsigned long long)st.p99_abs);
	t_check(ctl_stats_compute(big, 0, 100000, &st) != 0, "n = 0 refused");
	t_check(ctl_stats_compute(big, 10, 0, &st) != 0, "period 0 refused");
}

int main(void)
{
	percentiles();
	fwq();
	ctl();
	return t_done();
}
