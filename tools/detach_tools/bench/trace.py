"""The guest's trace of each cell (docs/trace.md): bench/tracecell records the
measured CPU's tracepoints while the cell runs and attributes every sample's
interval (fwq/ctlloop --intervals); here the guest's share of each cell's
max, p99.9 and p99 is computed from that, and reported.

A cell's "trace" object (results.json) is the one place for per-cell trace
data: tracecell's JSON as written (guest_ns per sample, causes of the longest
samples, a summary per cause), or {"traced": false, "why": ...}."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import paths
from ..cpus import format_cpulist
from ..files import JsonObj, load_json
from ..stats import percentile

if TYPE_CHECKING:
    from matplotlib.axes import Axes


class CellTrace:
    """tracecell running beside one cell; None-safe if it could not start."""

    def __init__(self, cpu: int, hk: set[int], tmpdir: str, name: str) -> None:
        self.intervals = os.path.join(tmpdir, name + ".intervals")
        self.out = os.path.join(tmpdir, name + ".trace.json")
        self.why: str | None = None
        self.p: subprocess.Popen[str] | None
        exe = paths.program("tracecell")
        # on the housekeeping CPUs: its reader must not run where it reads
        cmd = ["taskset", "-c", format_cpulist(hk), exe, "-c", str(cpu),
               "--intervals", self.intervals, "--json", self.out]
        try:
            self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
            assert self.p.stdout
            line = self.p.stdout.readline()
        except OSError as e:
            self.p, line = None, ""
            self.why = f"cannot start {exe}: {e}"
        if self.p and line.strip() != "ready":
            assert self.p.stdin and self.p.stderr
            self.p.stdin.close()
            err = self.p.stderr.read().strip()
            self.p.wait()
            self.p = None
            self.why = err or "tracecell did not start"

    def started(self, pid: int) -> None:
        """The measuring thread: the cell's process (chrt, taskset and detach
        run exec, so it keeps its pid)."""
        if self.p and self.p.stdin:
            self.p.stdin.write(f"pid {pid}\n")
            self.p.stdin.flush()

    def finish(self, ok: bool) -> JsonObj:
        """The cell's trace object."""
        if not self.p or not self.p.stdin or not self.p.stderr:
            return {"traced": False, "why": self.why}
        if not ok:
            self.p.kill()
            self.p.wait()
            return {"traced": False, "why": "the cell failed"}
        self.p.stdin.close()
        err = self.p.stderr.read().strip()
        if self.p.wait() != 0:
            return {"traced": False, "why": err or f"tracecell exit {self.p.returncode}"}
        try:
            doc: JsonObj = load_json(self.out)
            return doc
        except (OSError, ValueError) as e:
            return {"traced": False, "why": f"no trace JSON: {e}"}


# -- analysis: from results.json only ------------------------------------------

def excess(cell: JsonObj) -> list[int]:
    """Per sample, the cycles a stall added: fwq's delta to the fastest
    quantum, ctlloop's lateness (an early wake-up: 0)."""
    r = cell["result"]
    s: list[int] = r["samples"]
    if cell["program"] == "fwq":
        m = min(s)
        return [x - m for x in s]
    p: int = r["params"]["period_cycles"]
    return [max(0, x - p) for x in s]


def shares(cell: JsonObj, hz: float) -> JsonObj | None:
    """{"max": (share, causes), "p99.9": share, "p99": share} of one traced
    cell: the part of the excess guest activity covered (0..1)."""
    t = cell.get("trace") or {}
    if not t.get("traced") or cell.get("status") != "ok":
        return None
    ex = excess(cell)
    g = [ns * hz / 1e9 for ns in t["guest_ns"]]
    if len(g) != len(ex) or not ex:
        return None

    def tail(th: int) -> float | None:
        idx = [i for i, x in enumerate(ex) if x >= th and x > 0]
        tot = sum(ex[i] for i in idx)
        return sum(min(g[i], ex[i]) for i in idx) / tot if tot else None
    srt = sorted(ex)
    imax = max(range(len(ex)), key=lambda i: ex[i])
    top = next((x for x in t.get("top", []) if x["index"] == imax), None)
    causes = top["causes"] if top else []
    smax = min(1.0, g[imax] / ex[imax]) if ex[imax] else None
    return {"max": smax, "max_causes": causes, "max_excess": ex[imax],
            "p99.9": tail(percentile(srt, 99.9)), "p99": tail(percentile(srt, 99)),
            "tail_causes": t.get("summary_tail", [])}


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def owner(sh: JsonObj) -> str:
    """Whose was the max: the guest's main cause, or the host's."""
    if sh["max"] is None:
        return "no excess"
    if sh["max"] >= 0.5 and sh["max_causes"]:
        return f"guest: {sh['max_causes'][0]['label']}"
    return "host"


def summary_section(doc: JsonObj, w: Callable[[str], None], cells_for_report: list[JsonObj]) -> None:
    """The "Whose stalls" section of summary.md."""
    hz = doc.get("tsc_hz") or 0
    cells = [c for c in cells_for_report if c.get("status") == "ok"]
    if not hz or not any("trace" in c for c in cells):
        return
    w("## Whose stalls: the guest's trace of every cell\n")
    w("For each cell, the share of the stall behind its maximum, and of all samples at or "
      "above its p99.9 and p99, that the guest kernel's own tracepoints account for "
      "(IRQs, softirqs, the tick, IPIs, other tasks on the CPU; docs/trace.md); the rest "
      "is the host's (hypervisor or hardware: nothing the guest saw). FWQ: delta to the "
      "fastest quantum; control loop: lateness of the wake-up. Causes: of the maximum, "
      "and the three heaviest in the slowest 1% of samples.\n")
    w("| load | program | config | rep | max | max: guest share, causes | p99.9 guest | p99 guest | slowest 1%: causes |")
    w("|---|---|---|---|---|---|---|---|---|")
    owners: dict[str, list[tuple[JsonObj, str, JsonObj]]] = {"guest": [], "host": []}
    for c in cells:
        t = c.get("trace") or {}
        if not t.get("traced"):
            w(f"| {c['load']} | {c['program']} | {c['config']} | {c['rep']} | | "
              f"not traced: {t.get('why', 'no trace')} | | | |")
            continue
        sh = shares(c, hz)
        if not sh:
            continue
        mc = ", ".join(f"{x['label']} {x['ns'] / 1e3:.1f} us" for x in sh["max_causes"][:3])
        tc = ", ".join(f"{x['cause']} ({x['count']})" for x in sh["tail_causes"][:3])
        w(f"| {c['load']} | {c['program']} | {c['config']} | {c['rep']} | "
          f"{sh['max_excess']:.0f} | {pct(sh['max'])}{': ' + mc if mc else ''} | "
          f"{pct(sh['p99.9'])} | {pct(sh['p99'])} | {tc or '-'} |")
        o = owner(sh)
        if o != "no excess":
            owners["guest" if o.startswith("guest") else "host"].append((c, o, sh))
    w("")
    n = len(owners["guest"]) + len(owners["host"])
    if n:
        kinds: dict[str, int] = {}
        for c, o, sh in owners["guest"]:
            k = sh["max_causes"][0]["label"]
            kinds[k] = kinds.get(k, 0) + 1
        w(f"**Whose maxima:** of {n} traced cells, the maximum was mostly the guest's in "
          f"{len(owners['guest'])} (" +
          (", ".join(f"{k}: {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])) or "none") +
          f") and mostly the host's in {len(owners['host'])} (no guest activity covered at least "
          "half of it; the guest cannot remove those).\n")
    over = overhead(doc)
    if over:
        w("### Cost of tracing\n")
        w("The same cells with and without the trace, interleaved (`--trace-overhead`); "
          "mean over the repetitions, cycles, and the ratio traced/untraced.\n")
        w("| load | program | config | metric | traced | untraced | ratio |")
        w("|---|---|---|---|---|---|---|")
        for row in over:
            w("| " + " | ".join(str(x) for x in row) + " |")
        w("")


OVERHEAD_METRICS = {"fwq": ("delta_max", "delta_p999", "delta_p99", "delta_median"),
                    "ctlloop": ("p2p", "p999_abs", "p99_abs", "median_abs")}


def overhead(doc: JsonObj) -> list[tuple[str, ...]]:
    """(load, program, config, metric, traced, untraced, ratio): each the
    mean over the repetitions of --trace-overhead's twin cells."""
    rows: list[tuple[str, ...]] = []
    keys = sorted({(c["load"], c["program"], c["config"]) for c in doc["cells"]
                   if c.get("trace_off")})
    for load, prog, cfg in keys:
        for m in OVERHEAD_METRICS[prog]:
            def mean(off: bool, m: str = m) -> float | None:
                v = [c["result"]["stats"][m] for c in doc["cells"]
                     if c["status"] == "ok" and c["load"] == load and c["program"] == prog
                     and c["config"] == cfg and bool(c.get("trace_off")) == off]
                return sum(v) / len(v) if v else None
            on, off = mean(False), mean(True)
            if on is not None and off is not None:
                rows.append((load, prog, cfg, m, f"{on:.0f}", f"{off:.0f}",
                             f"{on / off:.3g}" if off else "-"))
    return rows


def mark_plot(ax: Axes, cell: JsonObj, hz: float) -> None:
    """Marks the samples whose stall the guest's trace covers (at least half
    of it, in the slowest 1%)."""
    sh = shares(cell, hz) if hz else None
    if not sh:
        return
    ex = excess(cell)
    g = [ns * hz / 1e9 for ns in cell["trace"]["guest_ns"]]
    th = percentile(sorted(ex), 99)
    idx = [i for i, x in enumerate(ex) if x >= th and x > 0 and g[i] >= 0.5 * x]
    host = [i for i, x in enumerate(ex) if x >= th and x > 0 and g[i] < 0.5 * x]
    s = cell["result"]["samples"]
    if idx:
        ax.plot(idx, [s[i] for i in idx], "x", ms=4, color="black", label="guest (trace)")
    if host:
        ax.plot(host, [s[i] for i in host], "o", ms=3, mfc="none", color="gray", label="host")
    if idx or host:
        ax.legend(fontsize=6, loc="upper right", title="slowest 1%", title_fontsize=6)
