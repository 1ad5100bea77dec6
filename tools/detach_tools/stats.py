"""Percentiles as src/lib/stats.c computes them (nearest rank), so that
Python summaries and the C programs' JSON agree: the one place of the
Python side."""
from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")


def percentile(sorted_v: Sequence[T], p: float) -> T:
    """Nearest-rank percentile p (0-100) of an ascending list."""
    k = max(0, min(len(sorted_v) - 1, int(-(-p * len(sorted_v) // 100)) - 1))
    return sorted_v[k]


def hist_percentile(hist: Mapping[int, int], n: int, p: float) -> int | None:
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


def log_density(values: Sequence[float], nbins: int = 40) -> tuple[list[float], list[float]]:
    """A histogram of positive values on a log scale, as a density: the left
    edges of nbins - 1 bins spaced evenly in log10 from max(min, 1) to
    max + 1, and count / (n * width) of each (the last bin holds its right
    edge).  ([], []) when there is nothing to count."""
    if not values or nbins < 2:
        return [], []
    lo, hi = math.log10(max(min(values), 1)), math.log10(max(values) + 1)
    edges = [10 ** (lo + (hi - lo) * i / (nbins - 1)) for i in range(nbins)]
    counts = [0] * (nbins - 1)
    for v in values:
        if edges[0] <= v <= edges[-1]:
            counts[min(bisect.bisect_right(edges, v) - 1, nbins - 2)] += 1
    n = sum(counts)
    if not n or hi <= lo:
        return [], []
    return edges[:-1], [c / (n * (edges[i + 1] - edges[i])) for i, c in enumerate(counts)]
