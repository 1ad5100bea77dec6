"""detach bench's tables and plots from a stored results.json, its noise
traces, and the closing table at scale."""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import unittest
from unittest import mock

from detach_tools import noise, plots, scale
from detach_tools.bench import report, trace
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

    def test_expected_max(self) -> None:
        v = sorted([0.0, 1.0, 2.0, 3.0])
        self.assertAlmostEqual(noise.expected_max(v, 1), sum(v) / len(v) + 0.0, delta=1.0)
        self.assertGreater(noise.expected_max(v, 100), noise.expected_max(v, 2))
        self.assertLessEqual(noise.expected_max(v, 10**6), 3.0)

    def test_window_noise(self) -> None:
        """A window as long as the trace meets all of its noise, stretched."""
        out = noise.window_noise([(100.0, 10.0)], 1000.0, 1000.0, samples=50)
        self.assertEqual(len(out), 50)
        self.assertTrue(all(x >= 10.0 for x in out))
        self.assertEqual(out, sorted(out))


class ScaleTable(unittest.TestCase):
    def test_table(self) -> None:
        rows: list[JsonObj] = [
            {"trace": "t", "ranks": 1000, "slowdown": 1.01234, "method": "simgrid", "closed_form": 1.02,
             "iterations": 200, "sim_wall_s": 3.5},
            {"trace": "t", "ranks": 1000000, "slowdown": 1.5, "method": "closed form", "closed_form": 1.5}]
        lines = scale.table(rows).splitlines()
        self.assertEqual(lines[2], "| t | 1e+03 | 1.0123 | simgrid | 1.0200 | 200 | 3.5 s |")
        self.assertEqual(lines[3], "| t | 1e+06 | 1.5000 | closed form | 1.5000 | - | - |")

    def test_percentile_of_noise(self) -> None:
        self.assertEqual(percentile([1.0, 2.0, 3.0, 4.0], 50), 2.0)


if __name__ == "__main__":
    unittest.main()
