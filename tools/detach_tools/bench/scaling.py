"""Per-cell noise traces and the closing table of `detach bench`: what the
noise just measured would cost an MPI job of 10^3..10^6 ranks.

Every cell's data lives in <out>/cells/<load>-<program>-<config>-r<rep>/
(cell_dir): noise.trace here (LogGOPSim format, tools/detach_tools/noise.py),
beside whatever else a cell records there (tracefs attribution)."""
from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from .. import noise, scale
from ..errors import ToolError
from ..files import JsonObj
from . import mpi

TRACE_PROGRAMS = ("fwq", "ctlloop", mpi.PROGRAM)
SCALE_CONFIGS = ("linux-fifo", "detached", "floor")


def cell_name(load: str, prog: str, cfg: str, rep: int) -> str:
    return f"{load}-{prog}-{cfg}-r{rep}"


def cell_dir(out: str, load: str, prog: str, cfg: str, rep: int) -> str:
    """The directory of one cell's data, made on first use."""
    d = os.path.join(out, "cells", cell_name(load, prog, cfg, rep))
    os.makedirs(d, exist_ok=True)
    return d


def write_cell_trace(cell: JsonObj, res: JsonObj, out: str, measured_cpu: int) -> None:
    """The cell's noise trace from its raw samples; cell["noise_trace"]."""
    prog, hz = cell["program"], res.get("tsc_hz") or 0
    if prog not in TRACE_PROGRAMS or not hz:
        return
    if prog == "ctlloop":
        det, span = noise.ctlloop_detours(res["samples"], res["params"]["period_cycles"], hz)
        what = "control-loop wake-ups later than their deadline"
    else:
        samples = res["samples"]
        if prog == mpi.PROGRAM:
            me = mpi.measured_rank(res, measured_cpu)
            samples = me["samples"] if me else []
        det, span = noise.fwq_detours(samples, hz)
        what = "FWQ quanta longer than the fastest" + (" (the measured rank)" if prog == mpi.PROGRAM else "")
    d = cell_dir(out, cell["load"], prog, cell["config"], cell["rep"])
    path = os.path.join(d, "noise.trace")
    noise.write(path, det, span, f"{cell['load']} load, {prog}, {cell['config']}, rep {cell['rep']}: "
                f"{what}, above {noise.THRESHOLD_NS} ns")
    cell["noise_trace"] = {"path": os.path.relpath(path, out), "detours": len(det), "span_ns": span,
                           "threshold_ns": noise.THRESHOLD_NS}


def predict(doc: JsonObj, out: str, ranks: list[int], max_sim_ranks: int, log: Callable[[str], None],
            iterations: int | None = None) -> list[JsonObj]:
    """Slowdown at each rank count for the FWQ traces (fwq-mpi's measured
    rank when fwq did not run) of linux-fifo, detached and floor, the worst
    repetition of each, per load: rows as `detach scale --json` writes."""
    progs = doc["options"]["programs"]
    prog = "fwq" if "fwq" in progs else (mpi.PROGRAM if mpi.PROGRAM in progs else None)
    if not prog:
        return []
    a = argparse.Namespace(trace=[], ranks=ranks, collective="allreduce", interval=1e6, cosched=False,
                           iterations=iterations, max_sim_ranks=max_sim_ranks, seed=1, bytes=8,
                           **scale.LOGGP)
    rows: list[JsonObj] = []
    for load in doc["options"]["loads"]:
        for cfg in SCALE_CONFIGS:
            ok = [c for c in doc["cells"] if c["load"] == load and c["program"] == prog
                  and c["config"] == cfg and c["status"] == "ok" and c.get("noise_trace")]
            if not ok:
                continue
            w = max(ok, key=lambda c: c["result"]["stats"]["delta_max"])
            a.trace = [os.path.join(out, w["noise_trace"]["path"])]
            try:
                for r in scale.run(a, log):
                    r.update(load=load, config=cfg, program=prog, rep=w["rep"],
                             trace=w["noise_trace"]["path"])
                    rows.append(r)
            except ToolError as e:
                log(f"scale: {load} {cfg}: {e}")
                return rows + [{"error": str(e)}]
    return rows


def summary_lines(doc: JsonObj) -> list[str]:
    rows: list[JsonObj] = doc.get("scale") or []
    if not rows:
        return []
    L = ["## At scale: what this noise costs an MPI job (detach scale, docs/scale.md)\n"]
    err = [r["error"] for r in rows if "error" in r]
    rows = [r for r in rows if "error" not in r]
    if err:
        L.append(f"Not predicted: {err[0]}\n")
    if not rows:
        return L
    L.append(f"The {rows[0]['program']} trace of each configuration (worst repetition) disturbs every "
             "rank of a bulk-synchronous job, each at a random offset into it: compute 1 ms, then "
             "MPI_Allreduce (binomial trees, LogGP L 5 us, o 1.5 us, g 1 us, G 0.67 ns/B). Predicted "
             "slowdown against the same job without noise: the closed form of independent per-rank "
             "noise (E[max of N draws] from the trace's noise per interval) in every cell, SimGrid's "
             "simulation in brackets where it ran as its validation. The ratio compares the time lost "
             "(slowdown - 1) of linux-fifo with detached's. Host noise of this VM is in every trace, "
             "the floor's too.\n")
    ranks = sorted({r["ranks"] for r in rows})
    head = ["load", "config"] + [f"{n:.0e} ranks" for n in ranks]
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + "---|" * len(head))
    by = {(r["load"], r["config"], r["ranks"]): r for r in rows}
    for load in doc["options"]["loads"]:
        for cfg in SCALE_CONFIGS:
            if not any((load, cfg, n) in by for n in ranks):
                continue
            cells = []
            for n in ranks:
                r = by.get((load, cfg, n))
                g = r.get("simgrid") if r else None
                cells.append(f"{r['slowdown']:.4f}" + (f" (SimGrid {g['slowdown']:.4f})" if g else "")
                             if r else "-")
            L.append(f"| {load} | {cfg} | " + " | ".join(cells) + " |")
        fifo = [by[(load, "linux-fifo", n)] for n in ranks if (load, "linux-fifo", n) in by]
        det = [by[(load, "detached", n)] for n in ranks if (load, "detached", n) in by]
        if len(fifo) == len(det) == len(ranks):
            ratio = [f"{(f['slowdown'] - 1) / (d['slowdown'] - 1):.3g}" if d["slowdown"] > 1 else "inf"
                     for f, d in zip(fifo, det)]
            L.append(f"| {load} | linux-fifo / detached, time lost | " + " | ".join(ratio) + " |")
    L.append("")
    return L
