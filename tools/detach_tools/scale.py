"""detach scale: the slowdown a measured noise trace predicts for a
bulk-synchronous MPI job of 10^3..10^6 ranks (docs/scale.md).

For every rank count the job is simulated on SimGrid by build/scale_sim
(src/scale/scale_sim.cpp) twice, with the trace and without noise, with the
same iterations; slowdown = noisy / noiseless job time.  Beside it the
closed form of independent per-rank noise (noise.expected_max), which is
also what stands where SimGrid is not run (above --max-sim-ranks)."""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable

from . import noise, paths, plots
from .errors import ArgumentParser, ToolError, report, warn
from .files import JsonObj

# LogGP defaults (docs/scale.md): L and G from Sandia/Cray Red Storm
# (Brightwell et al., "Portals 3.3 on the Sandia/Cray Red Storm System",
# IPDPS 2005: one-way MPI latency at most 5 us between the furthest nodes,
# 1.5 GB/s per direction into a node); o and g, which that paper does not
# give, are LogGOPSim's defaults (spcl/LogGOPSim simulator.ggo).
LOGGP = {"L": 5000.0, "o": 1500.0, "g": 1000.0, "G": 1 / 1.5}   # ns, ns per byte


def parse_ns(s: str) -> float:
    units = (("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9))
    for u, f in units:
        if s.endswith(u):
            try:
                v = float(s[:-len(u)]) * f
            except ValueError:
                break
            if v >= 0:
                return v
            break
    raise argparse.ArgumentTypeError(f"not a duration: '{s}' (like 1ms, 500us, 5000ns)")


def parse_ranks(s: str) -> list[int]:
    try:
        out = [int(float(x)) for x in s.split(",") if x]
    except ValueError:
        out = []
    if not out or any(n < 1 or n > 10**7 for n in out):
        raise argparse.ArgumentTypeError(f"not a list of rank counts: '{s}' (like 1e3,1e4)")
    return out


def auto_iterations(n: int) -> int:
    """Iterations per rank count: about 3e5 rank-iterations (SimGrid's cost
    grows faster than the ranks), at least 3, at most 200."""
    return max(3, min(200, int(3e5 / n)))


def collective_ns(n: int, collective: str, p: dict[str, float], nbytes: int) -> float:
    """LogGP cost of the binomial collective without noise, for the closed
    form where SimGrid did not run: each tree level costs o + L + kG + o."""
    depth = math.ceil(math.log2(n)) if n > 1 else 0
    k = 0 if collective == "barrier" else nbytes
    hop = 2 * p["o"] + p["L"] + k * p["G"]
    return depth * hop * (1 if collective == "bcast" else 2)


def simulate(sim: str, n: int, iterations: int, a: argparse.Namespace, trace: str | None = None,
             seed: int = 1) -> JsonObj:
    cmd = [sim, "--ranks", str(n), "--iterations", str(iterations), "--interval-ns", f"{a.interval:.0f}",
           "--collective", a.collective, "--seed", str(seed), "--L-ns", str(a.L), "--o-ns", str(a.o),
           "--g-ns", str(a.g), "--G-ns-per-byte", str(a.G), "--bytes", str(a.bytes)]
    if trace:
        cmd += ["--trace", trace]
        if a.cosched:
            cmd.append("--cosched")
    t = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        raise ToolError(f"scale_sim failed for {n} ranks (exit {r.returncode}): "
                         f"{(r.stderr or r.stdout).strip()[-300:]}",
                         "a rank count too large for this machine's memory? lower --max-sim-ranks")
    out: JsonObj = json.loads(r.stdout.strip().splitlines()[-1])
    out["wall_s"] = round(time.monotonic() - t, 2)
    return out


def _log(m: str) -> None:
    print(m, file=sys.stderr, flush=True)


def run(a: argparse.Namespace, log: Callable[[str], None] = _log) -> list[JsonObj]:
    """[{trace, ranks, slowdown, ...}] for every trace and rank count."""
    sim = os.environ.get("DETACH_SCALE_SIM") or os.path.join(paths.source_root() or ".", "build", "scale_sim")
    if not os.access(sim, os.X_OK):
        raise ToolError(f"{sim} is missing", "install libsimgrid-dev and run make (make deps does both)")
    traces = {}
    for t in a.trace:
        try:
            traces[t] = noise.read(t)
        except (OSError, ValueError) as e:
            raise ToolError(f"cannot read trace {t}: {e}")
    p = {"L": a.L, "o": a.o, "g": a.g, "G": a.G}
    results: list[JsonObj] = []
    base: dict[int, JsonObj] = {}
    for n in a.ranks:
        it = a.iterations or auto_iterations(n)
        simulated = n <= a.max_sim_ranks
        if simulated:
            log(f"scale: {n} ranks, {it} iterations: noiseless")
            base[n] = simulate(sim, n, it, a)
        for t, (det, span) in traces.items():
            c = (base[n]["iteration_ns"] - a.interval) if simulated else collective_ns(n, a.collective, p, a.bytes)
            wn = noise.window_noise(det, span, a.interval, seed=a.seed)
            cf = (a.interval + c + noise.expected_max(wn, n)) / (a.interval + c)
            row: JsonObj = {"trace": t, "ranks": n, "collective": a.collective, "interval_ns": a.interval,
                   "cosched": a.cosched, "closed_form": round(cf, 6), "collective_ns": round(c, 1)}
            if simulated:
                log(f"scale: {n} ranks, {it} iterations: {t}")
                s = simulate(sim, n, it, a, t, a.seed)
                row.update(slowdown=round(s["job_time_ns"] / base[n]["job_time_ns"], 6), method="simgrid",
                           iterations=it, sim_wall_s=round(s["wall_s"] + base[n]["wall_s"], 1),
                           max_rss_kib=max(s["max_rss_kib"], base[n]["max_rss_kib"]))
            else:
                row.update(slowdown=round(cf, 6), method="closed form",
                           why=f"not simulated: more than --max-sim-ranks {a.max_sim_ranks} "
                               "(SimGrid's time and memory on this machine, docs/scale.md)")
            results.append(row)
    return results


def table(results: list[JsonObj]) -> str:
    L = ["| trace | ranks | slowdown | method | closed form | iterations | SimGrid time |",
         "|---|---|---|---|---|---|---|"]
    for r in results:
        L.append(f"| {r['trace']} | {r['ranks']:.0e} | {r['slowdown']:.4f} | {r['method']} | "
                 f"{r['closed_form']:.4f} | {r.get('iterations', '-')} | "
                 f"{str(r['sim_wall_s']) + ' s' if 'sim_wall_s' in r else '-'} |")
    return "\n".join(L)


def plot(results: list[JsonObj], path: str) -> None:
    """Slowdown against ranks; plots.PlotsMissing without matplotlib."""
    plots.require()
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=90)
    for t in dict.fromkeys(r["trace"] for r in results):
        rs = [r for r in results if r["trace"] == t]
        label = os.path.basename(os.path.dirname(t)) or os.path.basename(t)
        line, = ax.plot([r["ranks"] for r in rs], [r["closed_form"] for r in rs], "--", lw=1)
        sim = [r for r in rs if r["method"] == "simgrid"]
        ax.plot([r["ranks"] for r in sim], [r["slowdown"] for r in sim], "o", color=line.get_color(),
                label=f"{label} (SimGrid; dashed: closed form)")
    ax.set_xscale("log")
    ax.set_xlabel("ranks")
    ax.set_ylabel("predicted slowdown vs noiseless")
    ax.grid(True, lw=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ranks", type=parse_ranks, default=parse_ranks("1e3,1e4,1e5,1e6"),
                   help="rank counts (default 1e3,1e4,1e5,1e6)")
    p.add_argument("--collective", choices=("allreduce", "barrier", "bcast"), default="allreduce")
    p.add_argument("--interval", type=parse_ns, default=1e6, help="compute between collectives (default 1ms)")
    p.add_argument("--cosched", action="store_true", help="every rank at the same offset into the trace")
    p.add_argument("--iterations", type=int, help="iterations per simulation (default: 200 down to 3 "
                   "as the ranks grow, about 3e5 rank-iterations)")
    p.add_argument("--max-sim-ranks", type=lambda s: int(float(s)), default=100000,
                   help="simulate up to this many ranks; above, the closed form only (default 1e5)")
    p.add_argument("--seed", type=int, default=1, help="random offsets into the trace")
    p.add_argument("--L", type=parse_ns, default=LOGGP["L"], help="LogGP latency (default 5us)")
    p.add_argument("--o", type=parse_ns, default=LOGGP["o"], help="LogGP overhead (default 1500ns)")
    p.add_argument("--g", type=parse_ns, default=LOGGP["g"], help="LogGP gap per message (default 1000ns)")
    p.add_argument("--G", type=parse_ns, default=LOGGP["G"], help="LogGP gap per byte (default 0.667ns)")
    p.add_argument("--bytes", type=int, default=8, help="bytes per message (allreduce, bcast; default 8)")


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="detach scale", description=(
        "Predicts the slowdown a noise trace (LogGOPSim format, as detach bench writes them) "
        "costs a bulk-synchronous MPI job of many ranks: SimGrid simulation against a "
        "noiseless run, beside the closed form of independent noise (docs/scale.md)."))
    p.add_argument("--trace", action="append", required=True, metavar="FILE", help="noise trace (repeatable)")
    add_model_args(p)
    p.add_argument("--json", metavar="FILE", help="one object per trace and rank count")
    p.add_argument("--png", metavar="FILE", help="slowdown against ranks (default: beside --json)")
    try:
        a = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        res = run(a)
    except ToolError as e:
        return report(e)
    print(table(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    png = a.png or (os.path.splitext(a.json)[0] + ".png" if a.json else None)
    if png:
        try:
            plot(res, png)
        except plots.PlotsMissing as e:
            if a.png:                  # asked for: an error, after the table and the JSON
                return report(e)
            warn(str(e), e.note)
    return 0
