"""detach bench --program evlat: event-response latency, seed 003 section 4
(L4RTL: what address spaces cost beside caches).  bench/evlat.c measures
every receiver under every load, interleaved in every round; this module
runs it, keeps its JSON and writes evlat.md (percentiles and the ratios
separate-process / same-process and Linux / detached, beside the paper's
conclusion) and, with matplotlib, densities on a log scale per load (the
paper's figures 3 and 4)."""
import json
import os
import subprocess

from .. import paths
from . import system
from .util import BenchError, measurement_program

RECEIVERS = ("same", "process", "executive", "futex", "eventfd")
WHAT = {"same": "detached thread, ringer's process",
        "process": "detached RT task, its own process",
        "executive": "RT thread under detach-rtl's executive",
        "futex": "SCHED_FIFO Linux thread, futex",
        "eventfd": "SCHED_FIFO Linux thread, eventfd"}
PCTS = ("p50", "p99", "p99.9", "max")


def command(a, out_json, cpu):
    cmd = [paths.program("evlat"), "-j", out_json, "-c", str(cpu),
           "-n", str(a.samples or (15 if a.quick else 200)), "-r", str(a.repeat_evlat)]
    if a.housekeeping:
        cmd += ["-H", str(min(a.housekeeping))]
    return cmd


def ratio(x, y):
    return f"{x / y:.2f}" if y else "-"


def summary(doc):
    cells = doc["cells"]
    lines = ["# detach bench --program evlat", "",
             f"Event-response latency (seed 003, section 4): a housekeeping thread rings at random "
             f"intervals of 2 to 30 ms and stamps the TSC; each receiver stamps it at its first "
             f"instruction after the wake-up. {doc['events_per_block']} events per receiver per load "
             f"per round, {doc['rounds']} rounds, receivers and loads interleaved in every round; "
             f"RT CPU {doc['cpu']} (partition: {doc.get('partition', '-')}). Under `flood` a flooder dirties {doc['flood_bytes'] >> 20} MiB on "
             f"every housekeeping CPU and the receiver floods it for 1.5 ms after each event.", "",
             "| load | receiver | events | missed | p50 ns | p99 ns | p99.9 ns | max ns |",
             "|---|---|---|---|---|---|---|---|"]
    for load, recv in cells.items():
        for r in RECEIVERS:
            c = recv[r]
            v = [f"{c[p]:,}" if p in c else "-" for p in PCTS]
            lines.append(f"| {load} | {r} ({WHAT[r]}) | {c['events']} | {c['missed']} | " + " | ".join(v) + " |")
    lines += ["", "Ratios (p50 / p99.9 / max):", "",
              "| load | process / same (address spaces) | executive / same | futex / same | eventfd / same "
              "| same under load / same idle (caches) |",
              "|---|---|---|---|---|---|"]
    idle = cells.get("idle", {}).get("same")
    for load, recv in cells.items():
        s = recv["same"]
        if "p50" not in s:
            continue
        row = [" / ".join(ratio(recv[r].get(p, 0), s[p]) for p in ("p50", "p99.9", "max"))
               for r in ("process", "executive", "futex", "eventfd")]
        cache = (" / ".join(ratio(s[p], idle[p]) for p in ("p50", "p99.9", "max"))
                 if idle and "p50" in idle else "-")
        lines.append(f"| {load} | " + " | ".join(row) + f" | {cache} |")
    lines += ["", f"The executive's switch between two RT threads: {doc['executive_switch_ns']:.0f} ns "
              f"({doc['executive_switch_cycles']:.0f} cycles), no kernel entry.", "",
              "Seed 003's conclusion: the delay and jitter that address spaces add to interrupt "
              "response are about those of caches, or smaller. Here: compare the column "
              "process / same (another address space) with same under load / same idle (caches).",
              "Not measured yet: the kernel-build load of `detach bench`, and perf stat's check of "
              "the flooding (cache misses, TLB misses).", ""]
    return "\n".join(lines)


def plots(doc, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    pd = os.path.join(outdir, "plots")
    os.makedirs(pd, exist_ok=True)
    for load, recv in doc["cells"].items():
        fig, ax = plt.subplots(figsize=(7, 3.5), dpi=90)
        for r in RECEIVERS:
            s = np.asarray(recv[r]["samples_ns"], dtype=np.float64)
            if len(s) == 0:
                continue
            bins = np.logspace(np.log10(max(s.min(), 1)), np.log10(s.max() + 1), 40)
            h, e = np.histogram(s, bins=bins, density=True)
            ax.step(e[:-1], h, where="post", label=r)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("event-response latency (ns)")
        ax.set_ylabel("density")
        ax.set_title(f"evlat, load {load}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(pd, f"evlat-{load}.png"))
        plt.close(fig)


def run(a):
    prog = measurement_program("evlat")
    os.makedirs(a.out, exist_ok=True)
    out_json = os.path.join(a.out, "evlat.json")
    cpu = a.cpu if a.cpu is not None else max(os.sched_getaffinity(0))
    # the RT CPU in `detach isolate`'s partition (restored after), unless
    # --no-isolate: other tasks would share it and dominate the figures
    restorer = system.Restorer()
    part = system.Partition(paths.detach_bin(), cpu, restorer, not a.no_isolate and os.geteuid() == 0)
    try:
        entered = part.enter()
        rc = subprocess.run(command(a, out_json, cpu)).returncode
    finally:
        restorer.restore()
    if rc != 0:
        raise BenchError(f"{prog} failed (exit {rc})")
    with open(out_json) as f:
        doc = json.load(f)
    doc["partition"] = f"detach isolate -c {cpu}" if entered else part.why
    md = summary(doc)
    if not a.no_plots:
        try:
            plots(doc, a.out)
            md += "\n`plots/evlat-<load>.png`: densities per receiver, log scale (the paper's figures 3 and 4).\n"
        except ImportError:
            md += "\nNo plots: matplotlib is missing.\n"
    with open(os.path.join(a.out, "evlat.md"), "w") as f:
        f.write(md)
    if not a.no_print:
        print(md)
    print(os.path.join(a.out, "evlat.md"))
    return 0
