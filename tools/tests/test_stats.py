"""Percentiles as src/lib/stats.c computes them, a CPU list's round trip,
the log-scale density of the plots."""
from __future__ import annotations

import random
import unittest

from detach_tools.cpus import format_cpulist, parse_cpulist
from detach_tools.stats import hist_percentile, log_density, percentile
from helpers import expand, load, nearest_rank


class Percentiles(unittest.TestCase):
    def test_nearest_rank(self) -> None:
        rnd = random.Random(7)
        for n in (1, 2, 3, 10, 99, 100, 101, 1000):
            v = sorted(rnd.randrange(1000) for _ in range(n))
            for p in (0.1, 1, 50, 90, 99, 99.9, 100):
                self.assertEqual(percentile(v, p), nearest_rank(v, p), f"n={n} p={p}")

    def test_fwq_stats_agree_with_c(self) -> None:
        """The C program's own p99 and median (its JSON) are the Python
        percentile of its raw samples."""
        doc = load("bench-results.json")
        cells = [c for c in doc["cells"] if c["program"] == "fwq" and c["status"] == "ok"]
        self.assertTrue(cells)
        for c in cells:
            s = sorted(c["result"]["samples"])
            st = c["result"]["stats"]
            self.assertEqual(st["delta_p99"], percentile(s, 99) - s[0], c["config"])
            self.assertEqual(st["delta_median"], percentile(s, 50) - s[0], c["config"])

    def test_hist_percentile(self) -> None:
        hist = {int(k): v for k, v in load("cyclictest.json")["thread"]["0"]["histogram"].items()}
        samples = expand(hist)
        for p in (1, 50, 99):
            self.assertEqual(hist_percentile(hist, len(samples), p), nearest_rank(samples, p))
        # two of 300 wake-ups overflowed the histogram: the maximum is among them
        self.assertIsNone(hist_percentile(hist, len(samples) + 2, 100))
        self.assertIsNone(hist_percentile(hist, 0, 50))

    def test_log_density(self) -> None:
        rnd = random.Random(3)
        values = [rnd.lognormvariate(8, 1.5) for _ in range(2000)] + [0.5]   # 0.5: below the first edge
        edges, dens = log_density(values, 40)
        self.assertEqual(len(edges), 39)
        self.assertEqual(len(dens), 39)
        self.assertEqual(edges[0], 1.0)
        self.assertTrue(all(b > a for a, b in zip(edges, edges[1:])))
        # a density: its integral over the bins is 1
        widths = [b - a for a, b in zip(edges, edges[1:])] + [(max(values) + 1) - edges[-1]]
        self.assertAlmostEqual(sum(d * w for d, w in zip(dens, widths)), 1.0, places=9)
        self.assertEqual(log_density([]), ([], []))


class CpuLists(unittest.TestCase):
    def test_round_trip(self) -> None:
        for text, cpus in (("0", {0}), ("0-3,8", {0, 1, 2, 3, 8}), ("1,3,5-6", {1, 3, 5, 6}), ("", set())):
            self.assertEqual(parse_cpulist(text), cpus)
            self.assertEqual(format_cpulist(cpus), text)
        self.assertEqual(parse_cpulist(" 2-2 \n"), {2})

    def test_malformed(self) -> None:
        for bad in ("3-1", "a", "1-", "1,,2", "-1-2"):
            with self.assertRaises(ValueError, msg=bad):
                parse_cpulist(bad)


if __name__ == "__main__":
    unittest.main()
