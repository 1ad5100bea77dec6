"""detach scale: the slowdown a measured noise trace predicts for a
bulk-synchronous MPI job of 10^3..10^6 ranks and beyond (docs/scale.md).

Every figure is the closed form of independent per-rank noise: an
iteration costs the interval, the collective's noiseless LogGP cost c(N)
and the expected maximum of N draws from the trace's exact distribution of
noise per interval (noise.WindowNoise), in well under a second per trace at
any N.  Up to --max-sim-ranks (1e4 by default) SimGrid validates it: the
job simulated by build/scale_sim (src/scale/scale_sim.cpp) with the trace
and without noise, and the time each loses per iteration compared."""
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


RANKS_MAX = 10**12


def parse_ranks(s: str) -> list[int]:
    """Rank counts, comma-separated, as integers or 1e3-style: sorted, each once."""
    out = []
    for x in s.split(","):
        x = x.strip()
        try:
            v = float(x)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a rank count: '{x}' in '{s}' (like 1e3,1e4,1e5,1e6 or 1000,65536)")
        if not (v.is_integer() and 1 <= v <= RANKS_MAX):
            raise argparse.ArgumentTypeError(f"not a rank count: '{x}' in '{s}' (a whole number from 1 to 1e12)")
        out.append(int(v))
    return sorted(set(out))


# The closed form's assumptions, printed under its table and in --help
# (docs/scale.md says why each matters).
ASSUMPTIONS = (
    "ranks independent: each rank meets its own offset into the trace (--cosched: all the same one)",
    "noise stationary: every interval of the job draws from the trace's distribution of noise per "
    "interval, the trace repeating (what it never saw, it cannot predict)",
    "one collective per interval, its noiseless cost c(N) = LogGP's 2 ceil(log2 N) (2o + L + kG), "
    "short against the detours: no rank's slack in the tree absorbs noise, and no noise meets "
    "the overheads o on the tree's critical path",
    "noise per interval of compute: each interval starts in the trace's free time, and a rank "
    "that waits for the others meets none meanwhile (SimGrid: noise in wall time, the trace "
    "runs on while a rank waits)",
)


def _count(s: str) -> int:
    """A whole number, 1e4-style allowed (--max-sim-ranks, --iterations)."""
    try:
        v = float(s)
    except ValueError:
        v = -1.0
    if not (v.is_integer() and 0 <= v <= RANKS_MAX):
        raise argparse.ArgumentTypeError(f"not a whole number: '{s}' (like 1e4 or 20)")
    return int(v)


def auto_iterations(n: int) -> int:
    """SimGrid's iterations per rank count: about 1e5 rank-iterations
    (its cost grows faster than the ranks; 10^4 ranks take 0.5 s an
    iteration here), at least 3, at most 200."""
    return max(3, min(200, int(1e5 / n)))


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


def closed_form(w: noise.WindowNoise, n: int, a: argparse.Namespace, p: dict[str, float]) -> JsonObj:
    """The slowdown of n ranks: (interval + c(N) + E[max of n draws]) /
    (interval + c(N)); co-scheduled, every rank draws the same (E[X])."""
    c = collective_ns(n, a.collective, p, a.bytes)
    lost = w.mean() if a.cosched else w.expected_max(n)
    return {"slowdown": round((a.interval + c + lost) / (a.interval + c), 6), "lost_ns": round(lost, 1),
            "collective_ns": round(c, 1)}


def run(a: argparse.Namespace, log: Callable[[str], None] = _log) -> list[JsonObj]:
    """[{trace, ranks, slowdown, method, ...}] for every trace and rank
    count: the closed form, with SimGrid's figures beside it (`simgrid`)
    where it ran."""
    traces = {}
    for t in a.trace:
        try:
            det, span = noise.read(t)
            traces[t] = noise.WindowNoise(det, span, a.interval)
        except (OSError, ValueError) as e:
            raise ToolError(f"cannot read trace {t}: {e}")
    p = {"L": a.L, "o": a.o, "g": a.g, "G": a.G}
    sim = os.environ.get("DETACH_SCALE_SIM") or os.path.join(paths.source_root() or ".", "build", "scale_sim")
    no_sim = None
    if any(n <= a.max_sim_ranks for n in a.ranks) and not os.access(sim, os.X_OK):
        no_sim = f"{sim} is missing"
        warn(f"no SimGrid validation: {no_sim}", "install libsimgrid-dev and run make (make deps does both)")
    results: list[JsonObj] = []
    for n in a.ranks:
        simulated = n <= a.max_sim_ranks and not no_sim
        it = a.iterations or auto_iterations(n)
        if simulated:
            log(f"scale: SimGrid, {n} ranks, {it} iterations: noiseless")
            base = simulate(sim, n, it, a)
        for t, w in traces.items():
            row: JsonObj = {"trace": t, "ranks": n, "collective": a.collective, "interval_ns": a.interval,
                            "cosched": a.cosched, "method": "closed form", **closed_form(w, n, a, p)}
            row["closed_form"] = row["slowdown"]
            if simulated:
                log(f"scale: SimGrid, {n} ranks, {it} iterations: {t}")
                s = simulate(sim, n, it, a, t, a.seed)
                lost = s["iteration_ns"] - base["iteration_ns"]
                row["simgrid"] = {
                    "slowdown": round(s["job_time_ns"] / base["job_time_ns"], 6), "lost_ns": round(lost, 1),
                    "collective_ns": round(base["iteration_ns"] - a.interval, 1), "iterations": it,
                    "wall_s": round(s["wall_s"] + base["wall_s"], 1),
                    "max_rss_kib": max(s["max_rss_kib"], base["max_rss_kib"])}
                # SimGrid's time lost against the closed form's, relative
                row["simgrid_vs_closed_form"] = (round((lost - row["lost_ns"]) / row["lost_ns"], 4)
                                                 if row["lost_ns"] > 0 else None)
            else:
                row["simgrid"] = None
                row["why_not_simgrid"] = no_sim or (
                    "not asked for (--max-sim-ranks 0)" if not a.max_sim_ranks else
                    f"more than --max-sim-ranks {a.max_sim_ranks:g} (SimGrid's time and memory, docs/scale.md)")
            results.append(row)
    return results


def _us(ns: float) -> str:
    return f"{ns / 1e3:.1f} us"


def table(results: list[JsonObj]) -> str:
    """The table, with the method of each figure in its column."""
    L = ["| trace | ranks | slowdown (closed form) | time lost per iteration (closed form) "
         "| SimGrid slowdown | SimGrid time lost | SimGrid vs closed form | SimGrid run |",
         "|---|---|---|---|---|---|---|---|"]
    for r in results:
        g = r.get("simgrid")
        if g:
            vs = r.get("simgrid_vs_closed_form")
            sim = (f"{g['slowdown']:.4f} | {_us(g['lost_ns'])} | "
                   f"{'-' if vs is None else f'{100 * vs:+.1f}%'} | {g['iterations']} iterations, {g['wall_s']} s")
        else:
            sim = "- | - | - | not run"
        L.append(f"| {r['trace']} | {r['ranks']:.0e} | {r['slowdown']:.4f} | {_us(r['lost_ns'])} | {sim} |")
    return "\n".join(L)


def explain(results: list[JsonObj], a: argparse.Namespace) -> str:
    """What each column is, the closed form's assumptions, why SimGrid did
    not run where it did not."""
    L = [f"Slowdown: a bulk-synchronous job that computes {_us(a.interval)} between "
         f"{a.collective}s, against the same job without noise.",
         "Closed form (every row): (interval + c(N) + E[max of N draws]) / (interval + c(N)), "
         "E[max] exact over the trace's distribution of noise per interval"
         + (" (--cosched: all ranks the same draw, E[X])." if a.cosched else "."),
         "Its assumptions:"]
    L += [f"  - {x}" for x in ASSUMPTIONS]
    L.append("SimGrid (validation): the job simulated with the trace and without noise. It parts "
             "from the closed form where the tree matters: a rank off the collective's critical path "
             "has slack that absorbs a detour shorter than it (SimGrid lower: few ranks hit per "
             "iteration, detours not long against c(N)); in wall time a rank may be in a detour when "
             "a message reaches it, which delays the tree and every rank below it (SimGrid higher: "
             "heavy noise, or many ranks). docs/scale.md gives the figures.")
    why = {r["why_not_simgrid"] for r in results if r.get("why_not_simgrid")}
    for w in sorted(why):
        L.append(f"SimGrid not run: {w}.")
    return "\n".join(L)


def plot(results: list[JsonObj], path: str) -> None:
    """Slowdown against ranks; plots.PlotsMissing without matplotlib."""
    plots.require()
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.5, 4), dpi=90)
    for t in dict.fromkeys(r["trace"] for r in results):
        rs = [r for r in results if r["trace"] == t]
        label = os.path.basename(os.path.dirname(t)) or os.path.basename(t)
        line, = ax.plot([r["ranks"] for r in rs], [r["slowdown"] for r in rs], "--", lw=1,
                        label=f"{label} (closed form)")
        sim = [r for r in rs if r.get("simgrid")]
        if sim:
            ax.plot([r["ranks"] for r in sim], [r["simgrid"]["slowdown"] for r in sim], "o",
                    color=line.get_color(), label=f"{label} (SimGrid)")
    ax.set_xscale("log")
    ax.set_xlabel("ranks")
    ax.set_ylabel("predicted slowdown vs noiseless")
    ax.grid(True, lw=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ranks", type=parse_ranks, default=parse_ranks("1e3,1e4,1e5,1e6"), metavar="LIST",
                   help="rank counts, comma-separated, whole numbers or 1e3-style, 1 to 1e12 "
                   "(default 1e3,1e4,1e5,1e6)")
    p.add_argument("--collective", choices=("allreduce", "barrier", "bcast"), default="allreduce")
    p.add_argument("--interval", type=parse_ns, default=1e6, help="compute between collectives (default 1ms)")
    p.add_argument("--cosched", action="store_true", help="every rank at the same offset into the trace")
    p.add_argument("--iterations", type=_count, help="SimGrid's iterations per simulation (default: 200 "
                   "down to 3 as the ranks grow, about 1e5 rank-iterations)")
    p.add_argument("--max-sim-ranks", type=_count, default=10000,
                   help="validate on SimGrid up to this many ranks (default 1e4; 0: none; 1e5 takes "
                   "minutes and 6 GB here)")
    p.add_argument("--seed", type=int, default=1, help="random offsets into the trace")
    p.add_argument("--L", type=parse_ns, default=LOGGP["L"], help="LogGP latency (default 5us)")
    p.add_argument("--o", type=parse_ns, default=LOGGP["o"], help="LogGP overhead (default 1500ns)")
    p.add_argument("--g", type=parse_ns, default=LOGGP["g"], help="LogGP gap per message (default 1000ns)")
    p.add_argument("--G", type=parse_ns, default=LOGGP["G"], help="LogGP gap per byte (default 0.667ns)")
    p.add_argument("--bytes", type=int, default=8, help="bytes per message (allreduce, bcast; default 8)")


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="detach scale", formatter_class=argparse.RawDescriptionHelpFormatter, description=(
        "Predicts the slowdown a noise trace (LogGOPSim format, as detach bench writes them)\n"
        "costs a bulk-synchronous MPI job of many ranks.  Every figure is the closed form of\n"
        "independent per-rank noise, (interval + c(N) + E[max of N draws]) / (interval + c(N)),\n"
        "E[max] exact over the trace's distribution of noise per interval: a second at any N.\n"
        "Up to --max-sim-ranks (1e4) SimGrid validates it, in columns of its own\n"
        "(docs/scale.md)."), epilog="the closed form assumes:\n" + "\n".join(f"  - {x}" for x in ASSUMPTIONS))
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
    print()
    print(explain(res, a))
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
