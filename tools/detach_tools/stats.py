"""Percentiles as src/lib/stats.c computes them (nearest rank), so that
Python summaries and the C programs' JSON agree."""


def percentile(sorted_v, p):
    """Nearest-rank percentile p (0-100) of an ascending list."""
    k = max(0, min(len(sorted_v) - 1, int(-(-p * len(sorted_v) // 100)) - 1))
    return sorted_v[k]


def hist_percentile(hist, n, p):
    """Nearest-rank percentile of n samples of which those in hist
    ({value: count}) were binned; None if it lies among the unbinned
    (overflowed) ones."""
    if n <= 0:
        return None
    rank = max(1, -(-p * n // 100))
    acc = 0
    for v in sorted(hist):
        acc += hist[v]
        if acc >= rank:
            return v
    return None
