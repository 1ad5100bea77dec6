"""detach bench's tables and plots from a stored results.json, its noise
traces, and the closing table at scale."""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import shutil
import tempfile
import unittest
from unittest import mock

from detach_tools import noise, plots, scale
from detach_tools.bench import mpi, report, scaling, trace
from detach_tools.files import JsonObj
from detach_tools.stats import percentile
from helpers import load


def cell(doc: JsonObj, prog: str, cfg: str) -> JsonObj:
    c: JsonObj = next(x for x in doc["cells"] if x["program"] == prog and x["config"] == cfg)
    return c


class Summary(unittest.TestCase):
    def setUp(self) -> None:
        self.doc = load("bench-results.json")
        self.md = report.summary(self.doc)

    def row(self, start: str, section: str = "") -> str:
        text = self.md[self.md.index(section):]
        return next(l for l in text.splitlines() if l.startswith(start))

    def test_tables(self) -> None:
        """Table 1 and 2 show each configuration's worst repetition as its
        program computed it, beside the paper's figures."""
        for cfg in report.CONFIGS:
            st = cell(self.doc, "fwq", cfg)["result"]["stats"]
            self.assertIn(f"{st['delta_max']} ({st['delta_max_pct']:.3g}%)", self.row("| Idle | 434000 (10.2%)"))
            st = cell(self.doc, "ctlloop", cfg)["result"]["stats"]
            self.assertIn(f"| {st['p2p']} ({st['max_pos']:+d} / {st['max_neg']:+d};",
                          self.row("| Idle | 862000 (+14,7% / -14.1%)"))

    def test_ratios(self) -> None:
        """The ratios of the maxima and their verdicts against the targets."""
        for prog, metric in (("fwq", "delta_max"), ("ctlloop", "p2p")):
            m = {c: cell(self.doc, prog, c)["result"]["stats"][metric] for c in ("linux-fifo", "detached", "floor")}
            df = m["detached"] / m["floor"]
            fd = m["linux-fifo"] / m["detached"]
            row = self.row(f"| idle | {prog} |", "## Ratios")
            self.assertIn(f"| {report.fr(fd)} | {report.fr(df)} |", row)
            if df > report.TARGET_FLOOR:
                self.assertIn(f"SHORT: detached/floor {df:.3g} > {report.TARGET_FLOOR}", row)
            else:
                self.assertTrue(row.endswith("| met |"), row)
        self.assertEqual(report.ratio(self.doc, "io", "fwq", "detached", "floor"), None, "io did not run")

    def test_no_internal_numbers(self) -> None:
        self.assertNotIn("issue", self.md)
        self.assertNotIn("seed", self.md)


class Trace(unittest.TestCase):
    def test_shares(self) -> None:
        """The guest's share of the longest sample: its traced guest time
        over the sample's excess, both in cycles."""
        doc = load("bench-results.json")
        hz = doc["tsc_hz"]
        c = cell(doc, "fwq", "detached")
        sh = trace.shares(c, hz)
        assert sh is not None
        s = c["result"]["samples"]
        i = max(range(len(s)), key=lambda k: s[k])
        excess = s[i] - min(s)
        guest = c["trace"]["guest_ns"][i] * hz / 1e9
        self.assertEqual(sh["max_excess"], excess)
        self.assertAlmostEqual(sh["max"], min(1.0, guest / excess))
        self.assertIsNone(trace.shares(cell(doc, "fwq", "linux"), hz), "linux is not traced")
        self.assertEqual(trace.pct(None), "-")
        self.assertEqual(trace.pct(0.456), "46%")


class Plots(unittest.TestCase):
    def setUp(self) -> None:
        self.out = tempfile.mkdtemp(prefix="detach-tools-test-")

    def tearDown(self) -> None:
        shutil.rmtree(self.out)

    def test_without_matplotlib(self) -> None:
        """Everything but the plots is written; one warning and its NOTE."""
        err = io.StringIO()
        missing = plots.PlotsMissing("no plots: matplotlib is not installed", plots.INSTALL)
        with mock.patch.object(plots, "require", side_effect=missing), contextlib.redirect_stderr(err):
            report.write_all(load("bench-results.json"), self.out)
        lines = err.getvalue().splitlines()
        self.assertEqual(lines, ["detach: warning: no plots: matplotlib is not installed", "NOTE: " + plots.INSTALL])
        self.assertTrue(os.path.isfile(os.path.join(self.out, "summary.md")))
        self.assertFalse(os.path.exists(os.path.join(self.out, "plots")))

    def test_with_matplotlib(self) -> None:
        try:
            plots.require()
        except plots.PlotsMissing as e:
            self.skipTest(str(e))
        doc = load("bench-results.json")
        report.write_all(doc, self.out)
        pngs = sorted(os.listdir(os.path.join(self.out, "plots")))
        self.assertIn("cdf-idle.png", pngs)
        self.assertIn("idle-fwq-detached-r1.png", pngs)
        self.assertEqual(len(pngs), 1 + len(doc["cells"]))
        for f in pngs:
            with open(os.path.join(self.out, "plots", f), "rb") as fh:
                self.assertEqual(fh.read(8), b"\x89PNG\r\n\x1a\n", f)


class Noise(unittest.TestCase):
    def test_fwq_detours(self) -> None:
        """A quantum longer than the fastest is a detour of the difference,
        from the quantum's start; at 1 GHz a cycle is a nanosecond."""
        det, span = noise.fwq_detours([1000, 1000, 4000, 1000, 1500], 1e9, threshold_ns=100)
        self.assertEqual(det, [(2000, 3000), (7000, 500)])
        self.assertEqual(span, 8500)

    def test_ctlloop_detours(self) -> None:
        # period 1000 cycles; the second wake-up 300 late, the third back on time
        det, span = noise.ctlloop_detours([1000, 1300, 700, 1000], 1000, 1e9, threshold_ns=100)
        self.assertEqual(det, [(2000, 300)])
        self.assertEqual(span, 4000)

    def test_trace_round_trip(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "noise.trace")
            noise.write(path, [(10, 5), (100, 20)], 1000, "test")
            self.assertEqual(noise.read(path), ([(10.0, 5.0), (100.0, 20.0)], 1000.0))

    def test_window_noise_at(self) -> None:
        """A window's noise from a start in free time, against stepping
        through the repeating trace detour by detour (overlapping detours
        are one)."""
        rnd = random.Random(5)
        for _ in range(20):
            span = rnd.uniform(1e4, 1e6)
            interval = rnd.choice([1e3, 1e4, 5e4])
            det = [(rnd.uniform(0, span * 0.9), rnd.expovariate(1 / rnd.choice([50, 500, 5000])))
                   for _ in range(rnd.randint(1, 40))]
            span = max([span] + [s + d for s, d in det])
            if sum(d for _, d in det) > 0.7 * span:
                continue
            w = noise.WindowNoise(det, span, interval)
            for _ in range(100):
                t = rnd.uniform(0, span)
                if not _in_detour(det, t):
                    self.assertAlmostEqual(w.at(t), _stepped_noise(det, span, interval, t), delta=1e-6 * span)

    def test_expected_max(self) -> None:
        """E[max of N] from the exact distribution: the mean at N = 1 and
        the largest window at large N, both against the starts in free time
        of a fine grid; growing with N."""
        det, span, interval = [(100.0, 10.0), (500.0, 200.0), (560.0, 30.0), (900.0, 5.0)], 1000.0, 150.0
        w = noise.WindowNoise(det, span, interval)
        # windows start in free time: the offsets of a fine grid outside every detour
        grid = [_stepped_noise(det, span, interval, t) for t in (i * span / 100000 for i in range(100000))
                if not _in_detour(det, t)]
        self.assertAlmostEqual(w.mean(), sum(grid) / len(grid), delta=0.05)
        self.assertAlmostEqual(w.expected_max(10**9), max(grid), delta=0.05)
        e = [w.expected_max(n) for n in (1, 2, 10, 100, 10**6)]
        self.assertEqual(e, sorted(e))
        # three draws: E[max] = integral of 1 - F^3, F from the grid
        g = sorted(grid)
        mc = sum(x * ((i + 1) ** 3 - i ** 3) for i, x in enumerate(g)) / len(g) ** 3
        self.assertAlmostEqual(w.expected_max(3), mc, delta=0.1)

    def test_window_noise_edges(self) -> None:
        self.assertEqual(noise.WindowNoise([], 1000.0, 100.0).expected_max(10**6), 0.0)
        with self.assertRaises(ValueError):
            noise.WindowNoise([(0.0, 1000.0)], 1000.0, 100.0)
        # a window longer than the trace's free time meets several repetitions
        w = noise.WindowNoise([(0.0, 500.0)], 1000.0, 1200.0)
        self.assertAlmostEqual(w.at(600.0), _stepped_noise([(0.0, 500.0)], 1000.0, 1200.0, 600.0))


def _in_detour(det: list[tuple[float, float]], t: float) -> bool:
    return any(s <= t < s + d for s, d in det)


def _stepped_noise(det: list[tuple[float, float]], span: float, interval: float, t: float) -> float:
    merged: list[list[float]] = []
    for s, d in sorted(det):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], s + d)
        else:
            merged.append([s, s + d])
    cur, rem, base, i = t, interval, 0.0, 0
    while True:
        if i >= len(merged):
            i, base = 0, base + span
        s, e = merged[i][0] + base, merged[i][1] + base
        if s >= cur + rem:
            return cur + rem - t - interval
        if e > cur:
            if s > cur:
                rem -= s - cur
            cur = e
        i += 1


def mpi_doc() -> JsonObj:
    """Two fwq-mpi cells by hand: rank 1 (pid 11) the measured one, detached
    in the second; rank 0 (pid 10) late in two iterations of each."""
    def res(q0: list[int], q1: list[int], iters: list[int]) -> JsonObj:
        return {"samples": iters, "ranks": [
            {"rank": 0, "samples": q0, "self": {"pid": 10, "cpus_allowed": "0", "cpu_at_end": 0}},
            {"rank": 1, "samples": q1, "self": {"pid": 11, "cpus_allowed": "0-1", "cpu_at_end": 1}}]}
    ev = {"seen": True, "detached": [{"pid": 11, "tid": 11, "cpu": 1, "proxy_tid": 12,
                                      "thread": {"cpus_allowed": "1"}, "proxy": {"cpus_allowed": "0"},
                                      "thread_voluntary_ctxt_switches_per_s": 0,
                                      "proxy_voluntary_ctxt_switches_per_s": 1300}]}
    return {"tsc_hz": 1e6, "options": {"loads": ["idle"]}, "system": {"measured_cpu": 1}, "cells": [
        {"load": "idle", "program": "fwq-mpi", "config": "linux", "status": "ok", "rep": 1,
         "result": res([100, 150, 100, 130], [110, 100, 100, 100], [0, 160, 110, 140])},
        {"load": "idle", "program": "fwq-mpi", "config": "detached", "status": "ok", "rep": 1,
         "detach_evidence": ev,
         "result": res([200, 100, 300, 100], [100, 120, 100, 100], [0, 130, 310, 110])}]}


class MpiIterations(unittest.TestCase):
    def test_report(self) -> None:
        rep = mpi.iteration_report(mpi_doc(), report.cells_for)["idle"]
        lin, det = rep["linux"], rep["detached"]
        # completion to completion, the first iteration left out; 1 MHz TSC: cycles are us
        self.assertEqual(lin["iteration"], {"n": 3, "p50": 140, "p99": 160, "max": 160,
                                            "p50_us": 140.0, "p99_us": 160.0, "max_us": 160.0})
        self.assertEqual(det["iteration"]["p50"], 130)
        r0, r1 = lin["ranks"]
        # rank 0 last in iterations 1, 3 (by 50, 30), a tie goes to the first rank
        self.assertEqual((r0["last_in"], r0["late_by"]["max"], r0["late_by"]["p50"]), (3, 50, 30))
        self.assertEqual((r1["last_in"], r1["late_by"]["max"]), (1, 10))
        self.assertEqual(r1["role"], "measured rank, linux")
        d0, d1 = det["ranks"]
        self.assertEqual(d1["role"], "measured rank, detached (detached: detach ps)")
        self.assertEqual(d0["role"], "rank on the housekeeping CPUs")
        self.assertEqual((d0["last_in"], d0["late_by"]["max"]), (3, 200))
        self.assertEqual(d0["quantum_p50_over_min_pct"], 0.0)
        md = "\n".join(mpi.iteration_lines({"idle": rep}))
        self.assertIn("| idle | detached | 1 | 3 | 130.0 | 310.0 | 310.0 | 0.929 | 1.938 |", md)

    def test_evidence(self) -> None:
        doc = mpi_doc()
        c = doc["cells"][1]
        ok, why = mpi.evidence_check(c["detach_evidence"], c["result"], 1)
        self.assertTrue(ok, why)
        self.assertIn("1300 wake-ups/s", why)
        # the measured rank undetached: the evidence names another pid
        c["detach_evidence"]["detached"][0]["pid"] = 10
        self.assertFalse(mpi.evidence_check(c["detach_evidence"], c["result"], 1)[0])
        # detached but sleeping, or nothing seen: no proof
        c["detach_evidence"]["detached"][0].update(pid=11, thread_voluntary_ctxt_switches_per_s=5)
        self.assertFalse(mpi.evidence_check(c["detach_evidence"], c["result"], 1)[0])
        self.assertFalse(mpi.evidence_check({"seen": False}, c["result"], 1)[0])
        # one look (a short job): where the threads were is the proof, no rates
        thread: JsonObj = {"cpus_allowed": "1"}
        one: JsonObj = {"seen": True, "detached": [{"pid": 11, "tid": 11, "cpu": 1, "proxy_tid": 12,
                                                    "thread": thread, "proxy": {"cpus_allowed": "0"}}]}
        ok, why = mpi.evidence_check(one, c["result"], 1)
        self.assertTrue(ok, why)
        self.assertIn("one look", why)
        thread["cpus_allowed"] = "0-1"
        self.assertFalse(mpi.evidence_check(one, c["result"], 1)[0])

    def test_transport(self) -> None:
        # every configuration of a cell talks over the transport chosen,
        # and the measured rank keeps its place in the command line
        for cfg in mpi.CONFIGS:
            shm = mpi.command(cfg, ["fwq_mpi"], 1, [0], "detach", None)
            tcp = mpi.command(cfg, ["fwq_mpi"], 1, [0], "detach", None, "tcp")
            self.assertIn("self,vader", shm)
            self.assertNotIn("self,tcp", shm)
            i = tcp.index("btl")
            self.assertEqual(tcp[i - 1:i + 2], ["--mca", "btl", "self,tcp"])
            self.assertIn("ob1", tcp)
            self.assertEqual(shm[-1], "fwq_mpi")
            self.assertEqual(tcp[len(tcp) - len(shm) + shm.index("-np"):], shm[shm.index("-np"):])
        with self.assertRaises(KeyError):
            mpi.command("linux", ["fwq_mpi"], 1, [0], "detach", None, "udp")


class ScaleTable(unittest.TestCase):
    def test_table(self) -> None:
        rows: list[JsonObj] = [
            {"trace": "t", "ranks": 1000, "slowdown": 1.02, "lost_ns": 23000.0, "method": "closed form",
             "simgrid": {"slowdown": 1.01234, "lost_ns": 14000.0, "iterations": 200, "wall_s": 3.5},
             "simgrid_vs_closed_form": -0.3913},
            {"trace": "t", "ranks": 1000000, "slowdown": 1.5, "lost_ns": 600000.0, "method": "closed form",
             "simgrid": None}]
        lines = scale.table(rows).splitlines()
        self.assertEqual(lines[2], "| t | 1e+03 | 1.0200 | 23.0 us | 1.0123 | 14.0 us | -39.1% | "
                         "200 iterations, 3.5 s |")
        self.assertEqual(lines[3], "| t | 1e+06 | 1.5000 | 600.0 us | - | - | - | not run |")

    def test_bench_table(self) -> None:
        """detach bench's closing table: the closed form in every cell,
        SimGrid's figure in brackets where it ran, the ratio of time lost."""
        rows: list[JsonObj] = []
        for cfg, cf, sim in (("linux-fifo", 1.2, 1.18), ("detached", 1.05, None), ("floor", 1.04, None)):
            for n in (1000, 10**6):
                g = {"slowdown": sim} if sim and n == 1000 else None
                rows.append({"load": "idle", "config": cfg, "ranks": n, "program": "fwq", "slowdown": cf,
                             "simgrid": g})
        md = "\n".join(scaling.summary_lines({"options": {"loads": ["idle"]}, "scale": rows}))
        self.assertIn("| idle | linux-fifo | 1.2000 (SimGrid 1.1800) | 1.2000 |", md)
        self.assertIn("| idle | detached | 1.0500 | 1.0500 |", md)
        self.assertIn("| idle | linux-fifo / detached, time lost | 4 | 4 |", md)

    def test_parse_ranks(self) -> None:
        self.assertEqual(scale.parse_ranks("1e6,1e3,1000,65536"), [1000, 65536, 10**6])
        for bad in ("", "1e3,,1e4", "1.5", "0", "1e3x", "-5", "1e13"):
            with self.assertRaises(argparse.ArgumentTypeError, msg=bad):
                scale.parse_ranks(bad)

    def test_percentile_of_noise(self) -> None:
        self.assertEqual(percentile([1.0, 2.0, 3.0, 4.0], 50), 2.0)


if __name__ == "__main__":
    unittest.main()
