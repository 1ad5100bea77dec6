"""The latency run's analysis on stored cyclictest, oslat and `detach run
--stats` output: parsing, the evidence of a detached thread, the summary."""
from __future__ import annotations

import argparse
import unittest

from detach_tools.files import JsonObj
from detach_tools.latency.parse import (detached_evidence, parse_cyclictest, parse_oslat,
                                        waiter_percentile)
from detach_tools.latency.run import Runs
from detach_tools.latency.summary import aggregate, summary
from helpers import expand, fixture, load, nearest_rank


class Parse(unittest.TestCase):
    def test_cyclictest(self) -> None:
        raw = load("cyclictest.json")["thread"]["0"]
        r = parse_cyclictest(fixture("cyclictest.json"), 300)
        self.assertNotIn("error", r)
        self.assertEqual(r["samples"], 300)
        self.assertEqual(r["binned"], 298)            # two wake-ups beyond the 1-ms histogram
        self.assertAlmostEqual(r["max"], raw["max"] / 1000)   # ns (-N) to us
        # the two beyond the histogram are the longest: they count in the ranks
        samples = expand({int(k): v for k, v in raw["histogram"].items()}) + [10**9] * 2
        for p in (50, 99):
            self.assertAlmostEqual(r[f"p{p}"], nearest_rank(samples, p) / 1000)
        self.assertIn("error", parse_cyclictest(fixture("cyclictest.json"), 301))

    def test_oslat(self) -> None:
        raw = load("oslat.json")["thread"]["0"]
        r = parse_oslat(fixture("oslat.json"))
        hist = {int(k): v for k, v in raw["histogram"].items()}
        self.assertEqual(r["samples"], sum(hist.values()))
        self.assertEqual(r["max"], float(raw["max"]))
        self.assertEqual(r["p50"], 1.0)
        self.assertEqual(r["waiter_p50"], 1.0, "half of a spin loop's instants wait under 1 us")
        assert r["waiter_p99"] is not None
        self.assertGreaterEqual(r["waiter_p99"], r["waiter_p50"])

    def test_waiter_percentile(self) -> None:
        # one second of loop: a single 101-us gap (bucket 102) and 1-us gaps
        hist = {1: 999_000, 102: 1}
        # an instant falls in the long gap with probability 101e-6: p99.99 of
        # the lateness lies within it, p99 not
        self.assertEqual(waiter_percentile(hist, 1e6, 99), 1.0)
        w = waiter_percentile(hist, 1e6, 99.995)
        assert w is not None
        self.assertAlmostEqual(w, 101.5 - 50, delta=0.1)   # (g - x) / 1e6 = 5e-5
        self.assertIsNone(waiter_percentile(hist, 0, 99))

    def test_detached_evidence(self) -> None:
        path = fixture("run-stats-cyclictest.json")
        ok, why, st = detached_evidence(path, 1, "cyclictest", 300)
        self.assertTrue(ok, why)
        self.assertIn("300 clock_nanosleep", why)
        assert st is not None
        self.assertEqual(st["mode"], "sud")
        ok, why, _ = detached_evidence(path, 1, "cyclictest", 301)
        self.assertFalse(ok)
        ok, why, _ = detached_evidence(path, 0, "cyclictest", 300)
        self.assertFalse(ok, "no thread was detached on CPU 0")
        ok, why, st = detached_evidence(fixture("missing.json"), 1, "cyclictest", 300)
        self.assertFalse(ok)
        self.assertIsNone(st)
        ok, why, _ = detached_evidence(fixture("oslat.json"), 1, "cyclictest", 300)
        self.assertFalse(ok, "not the statistics of detach run")


def runs_of(rounds: int) -> Runs:
    """Every configuration's record in every round, from the fixtures."""
    plain = parse_cyclictest(fixture("cyclictest.json"), 300)
    det = parse_cyclictest(fixture("cyclictest-detached.json"), 300)
    floor = parse_oslat(fixture("oslat.json"))
    runs: Runs = {}
    for r in range(1, rounds + 1):
        ok, why, _ = detached_evidence(fixture("run-stats-cyclictest.json"), 1, "cyclictest", 300)
        runs[("plain", r)] = {"config": "plain", "round": r, "stats": dict(plain)}
        runs[("detached", r)] = {"config": "detached", "round": r, "stats": det, "detached": ok,
                                 "evidence": why, "mode": "sud"}
        runs[("floor", r)] = {"config": "floor", "round": r, "stats": floor}
        runs[("oslat-det", r)] = {"config": "oslat-det", "round": r, "stats": floor, "detached": True,
                                  "evidence": "by hand", "mode": "sud"}
    return runs


class Summary(unittest.TestCase):
    def test_aggregate(self) -> None:
        runs = runs_of(2)
        cells, worst, med, bad = aggregate(runs, "detached", "max", 2)
        self.assertIsNone(bad)
        self.assertEqual(worst, runs[("detached", 1)]["stats"]["max"])
        self.assertEqual(cells, [worst, worst])
        self.assertEqual(med, worst)
        runs[("plain", 1)]["stats"]["p99"] = None
        _, worst, _, bad = aggregate(runs, "plain", "p99", 2)
        self.assertIsNone(worst)
        self.assertEqual(bad, "round 1: p99 overflowed the histogram")
        del runs[("floor", 2)]
        _, _, _, bad = aggregate(runs, "floor", "max", 2)
        self.assertEqual(bad, "not run in every round")
        runs[("detached", 1)]["detached"] = False
        cells, _, _, bad = aggregate(runs, "detached", "max", 2)
        self.assertEqual(cells[0], "**not detached**")
        self.assertEqual(bad, "round 1: not detached")

    def test_summary(self) -> None:
        runs = runs_of(2)
        a = argparse.Namespace(rounds=2, cpu=1, loops=300, seconds=1, out="/tmp/x")
        info: JsonObj = {"hk": 0, "kernel": "k", "uname_v": "v", "preempt_debugfs": "full",
                         "preempt_config": {"CONFIG_PREEMPT": "y"}, "cmdline_preempt": [],
                         "sched_rt_runtime_us": "-1", "cpu_model": "cpu", "ncpus": 2, "rt_tests": "2.5"}
        md = summary(a, runs, info, info, "partition", "start", "end")
        det, floor = runs[("detached", 1)]["stats"], runs[("floor", 1)]["stats"]
        # the max ratio is the detached worst over the floor's worst, with its target
        ratio = det["max"] / floor["max"]
        row = next(l for l in md.splitlines() if l.startswith("| detached / floor, max |"))
        self.assertIn(f"| {ratio:.2f} | {ratio:.2f} | <= 1.5 |", row)
        self.assertIn("met" if ratio <= 1.5 else "**MISSED**", row)
        plain = runs[("plain", 1)]["stats"]
        ratio = plain["max"] / det["max"]
        row = next(l for l in md.splitlines() if l.startswith("| plain / detached, max |"))
        self.assertIn(f"| {ratio:.2f} | {ratio:.2f} | >= 10 |", row)
        # the detached run's p99 overflowed the histogram (this VM): no number, said why
        self.assertIsNone(det["p99"])
        row = next(l for l in md.splitlines() if l.startswith("| plain / detached, p99 |"))
        self.assertIn("no number: round 1: p99 overflowed the histogram", row)
        self.assertIn("**Targets missed:**", md)
        self.assertNotIn("issue", md)


if __name__ == "__main__":
    unittest.main()
