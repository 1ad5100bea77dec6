"""detach bench --program evlat: event-response latency, the experiment of
section 4 of the L4RTL paper (docs/rtl.md): what address spaces cost beside
caches.  bench/evlat.c measures
every receiver under every load, interleaved in every round; this module
runs it as its controller (evlat -C: the build load of loads.py, the main
bench's, and perf stat over every load), keeps its JSON and writes evlat.md
(percentiles and the ratios separate-process / same-process and Linux /
detached, beside the paper's conclusion) and, with matplotlib, densities on
a log scale per load (the paper's figures 3 and 4)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from .. import paths, plots
from ..cpus import format_cpulist
from ..errors import ToolError, warn
from ..files import JsonObj, load_json
from ..stats import log_density
from . import loads as L
from . import system
from .perfstat import PerfStat
from .util import measurement_program, publish_summary

RECEIVERS = ("same", "process", "executive", "futex", "eventfd")
WHAT = {"same": "detached thread, ringer's process",
        "process": "detached thread, its own process",
        "executive": "RT thread under detach-rtl's executive, an RT task of its own",
        "futex": "SCHED_FIFO Linux thread, futex",
        "eventfd": "SCHED_FIFO Linux thread, eventfd"}
PCTS = ("p50", "p99", "p99.9", "max")
LOADS = ("idle", "flood", "syscalls", "build")


def fuse_missing() -> str | None:
    """Why the executive receiver cannot run (an RT task serves /dev/rtfN
    over FUSE), or None."""
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
        return None
    except OSError as e:
        return (f"/dev/fuse does not open ({e.strerror}): an RT task serves /dev/rtfN over FUSE "
                "(modprobe fuse; in a container: --device /dev/fuse)")


def command(a: argparse.Namespace, out_json: str, cpu: int, receivers: list[str]) -> list[str]:
    cmd = [paths.program("evlat"), "-C", "-l", ",".join(LOADS), "-R", ",".join(receivers),
           "-j", out_json, "-c", str(cpu),
           "-n", str(a.samples or (15 if a.quick else 200)), "-r", str(a.repeat_evlat)]
    if a.housekeeping:
        cmd += ["-H", str(min(a.housekeeping))]
    return cmd


class Controller:
    """Answers evlat -C: "start LOAD" and "stop LOAD" on its stdout, "ok" on
    its stdin once done.  The build load is loads.Build (the kernel build of
    the main bench; --quick: this repository's sources), started at its
    first block, held (SIGSTOP) between its blocks and stopped at the end;
    each of its blocks must see it compile, confined to the housekeeping
    CPUs.  perf stat counts cache and TLB misses on every CPU over each
    load's blocks, where the machine has the counters."""

    def __init__(self, a: argparse.Namespace, cpu: int, hk: set[int]) -> None:
        self.a, self.cpu, self.hk = a, cpu, hk
        self.build: L.Load | None = None
        self.perf = PerfStat({cpu} | hk)
        self.loads: dict[str, JsonObj] = {}   # name -> what the load did, perf counts per block
        self.before: JsonObj = {}

    def log(self, msg: str) -> None:
        print(f"detach bench: evlat: {msg}", file=sys.stderr)

    def start(self, name: str) -> None:
        out = self.loads.setdefault(name, {"blocks": 0, "perf": []})
        out["blocks"] += 1
        if name == "build":
            if not self.build:
                self.build = L.make_load("build", self.hk, self.a.quick, paths.load_tree())
                self.log(f"load {self.build.describe()}")
                self.build.prepare(self.log)
                self.build.start()
            else:
                self.build.resume()
            self.before = self.build.check()
            # compiling, not still reading Makefiles, before the events start
            deadline = time.monotonic() + 120
            while True:
                now = self.build.check()
                if not now["ok"]:
                    raise ToolError(f"the build load did not run cleanly: {now}")
                if self.build.advanced(self.before["progress"], now["progress"]):
                    break
                if time.monotonic() > deadline:
                    raise ToolError("the build load compiled nothing in 120 s")
                time.sleep(0.2)
            self.before = now
        self.perf.start()

    def stop(self, name: str) -> None:
        out = self.loads[name]
        out["perf"].append(self.perf.stop())
        if name == "build" and self.build:
            after = self.build.check()
            out.setdefault("block_checks", []).append(
                {"confined": not self.before["outside"] and not after["outside"], "alive": not after["dead"],
                 "progressed": self.build.advanced(self.before["progress"], after["progress"])})
            self.build.pause()

    def serve(self, p: subprocess.Popen[str]) -> None:
        assert p.stdin and p.stdout
        try:
            for line in p.stdout:
                verb, name = line.split()
                (self.start if verb == "start" else self.stop)(name)
                p.stdin.write("ok\n")
                p.stdin.flush()
        except ToolError as e:
            p.stdin.write(f"{e}\n")   # evlat stops with it
            p.stdin.flush()
            p.wait()
            raise
        finally:
            if self.build:
                left = self.build.stop()
                out = self.loads["build"]
                out.update(self.build.achieved(), description=self.build.describe(),
                           leftover_processes=[f"{q} {c}" for q, c in left])

    def report(self) -> JsonObj:
        """What goes into the JSON: the loads, the perf counts or why none."""
        return {"loads": self.loads, "perf": {"events": self.perf.events, "why": self.perf.why,
                                              "rt_cpu": self.cpu, "cpus": format_cpulist({self.cpu} | self.hk)}}


def ratio(x: float, y: float) -> str:
    return f"{x / y:.2f}" if x and y else "-"


def ratios(a: JsonObj, b: JsonObj) -> str:
    """p50 / p99.9 / max of cell a over cell b."""
    return " / ".join(ratio(a.get(p, 0), b.get(p, 0)) for p in ("p50", "p99.9", "max"))


def summary(doc: JsonObj) -> str:
    cells: dict[str, dict[str, JsonObj]] = doc["cells"]
    lines = ["# detach bench --program evlat", "",
             f"Event-response latency (the L4RTL paper's experiment, docs/rtl.md): a housekeeping thread rings at random "
             f"intervals of 2 to 30 ms and stamps the TSC; each receiver stamps it at its first "
             f"instruction after the wake-up. {doc['events_per_block']} events per receiver per load "
             f"per round, {doc['rounds']} rounds, receivers and loads interleaved in every round; "
             f"RT CPU {doc['cpu']} (partition: {doc.get('partition', '-')}). Under `flood` a flooder dirties {doc['flood_bytes'] >> 20} MiB on "
             f"every housekeeping CPU and the receiver floods it for 1.5 ms after each event.", "",
             "| load | receiver | events | missed | p50 ns | p99 ns | p99.9 ns | max ns |",
             "|---|---|---|---|---|---|---|---|"]
    for load, recv in cells.items():
        for r in RECEIVERS:
            if r not in recv:
                lines.append(f"| {load} | {r} ({WHAT[r]}) | not measured: {doc['not_measured'].get(r)} |")
                continue
            c = recv[r]
            v = [f"{c[p]:,}" if p in c else "-" for p in PCTS]
            lines.append(f"| {load} | {r} ({WHAT[r]}) | {c['events']} | {c['missed']} | " + " | ".join(v) + " |")
    lines += ["", "Ratios (p50 / p99.9 / max):", "",
              "| load | process / same (address spaces) | executive / process (the executive) "
              "| futex / same | eventfd / same (Linux / detached) | same under load / same idle (caches) |",
              "|---|---|---|---|---|---|"]
    idle = cells.get("idle", {}).get("same", {})
    none: JsonObj = {}
    for load, recv in cells.items():
        s = recv["same"]
        row = [ratios(recv.get("process", none), s), ratios(recv.get("executive", none), recv.get("process", none)),
               ratios(recv.get("futex", none), s), ratios(recv.get("eventfd", none), s), ratios(s, idle)]
        lines.append(f"| {load} | " + " | ".join(row) + " |")
    sw = (f"{doc['executive_switch_ns']:.0f} ns ({doc['executive_switch_cycles']:.0f} cycles), no kernel entry"
          if doc["executive_switch_ns"] > 0 else "not measured")
    lines += ["", f"The executive's switch between two RT threads: {sw}.", "",
              "The L4RTL paper's conclusion: the delay and jitter that address spaces add to interrupt "
              "response are about those of caches, or smaller. Here: compare the column "
              "process / same (another address space) with same under load / same idle (caches).", ""]
    return "\n".join(lines + loads_summary(doc))


def loads_summary(doc: JsonObj) -> list[str]:
    """The build load as it ran, and perf stat's check of the flooding."""
    lines: list[str] = []
    b = doc.get("loads", {}).get("build")
    if b:
        checks = b.get("block_checks", [])
        lines += [f"Load `build`: {b.get('description')}; {b.get('compile_jobs', '?')} compile jobs in "
                  f"{b['blocks']} blocks ({b.get('seconds', '?')} s from its first to its last check; "
                  f"held with SIGSTOP between its blocks); compiled in "
                  f"{sum(c['progressed'] for c in checks)} of {len(checks)} blocks, "
                  f"{'confined to' if b.get('confined') else 'NOT confined to'} the housekeeping CPUs "
                  f"{b.get('housekeeping_cpus')}.", ""]
    perf = doc.get("perf", {})
    if not perf.get("events"):
        lines += [f"Flooding not checked with perf stat: {perf.get('why')}.", ""]
        return lines
    rt = str(perf["rt_cpu"])
    lines += [f"perf stat on CPUs {perf['cpus']} over each load's blocks (misses per ms; RT CPU {rt}, "
              f"and the housekeeping CPUs together):", "",
              "| load | " + " | ".join(f"{e} RT | {e} housekeeping" for e in perf["events"]) + " |",
              "|---|" + "---|---|" * len(perf["events"])]
    for load, out in doc.get("loads", {}).items():
        blocks = [x for x in out["perf"] if "cpus" in x]
        if not blocks:
            why = {x.get("why") for x in out["perf"]}
            lines.append(f"| {load} | " + "; ".join(map(str, why)) + " |")
            continue
        ms = sum(x["seconds"] for x in blocks) * 1e3
        row = []
        for e in perf["events"]:
            on_rt = sum(x["cpus"].get(rt, {}).get(e, 0) for x in blocks)
            on_hk = sum(v.get(e, 0) for x in blocks for c, v in x["cpus"].items() if c != rt)
            row += [f"{on_rt / ms:,.0f}", f"{on_hk / ms:,.0f}"]
        lines.append(f"| {load} | " + " | ".join(row) + " |")
    lines.append("")
    return lines


def make_plots(doc: JsonObj, outdir: str) -> None:
    """plots/evlat-LOAD.png; plots.PlotsMissing without matplotlib."""
    plots.require()
    import matplotlib.pyplot as plt

    pd = os.path.join(outdir, "plots")
    os.makedirs(pd, exist_ok=True)
    for load, recv in doc["cells"].items():
        fig, ax = plt.subplots(figsize=(7, 3.5), dpi=90)
        for r in RECEIVERS:
            if r not in recv:
                continue
            edges, h = log_density(recv[r]["samples_ns"])
            if edges:
                ax.step(edges, h, where="post", label=r)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("event-response latency (ns)")
        ax.set_ylabel("density")
        ax.set_title(f"evlat, load {load}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(pd, f"evlat-{load}.png"))
        plt.close(fig)


def run(a: argparse.Namespace) -> int:
    prog = measurement_program("evlat")
    os.makedirs(a.out, exist_ok=True)
    out_json = os.path.join(a.out, "evlat.json")
    cpu = a.cpu if a.cpu is not None else max(os.sched_getaffinity(0))
    # the RT CPU in `detach isolate`'s partition (restored after), unless
    # --no-isolate: other tasks would share it and dominate the figures
    restorer = system.Restorer()
    part = system.Partition(paths.detach_bin(), cpu, restorer, not a.no_isolate and os.geteuid() == 0)
    hk = set(a.housekeeping or (os.sched_getaffinity(0) - {cpu}))
    ctl = Controller(a, cpu, hk)
    no_fuse = fuse_missing()
    not_measured = {"executive": no_fuse} if no_fuse else {}
    receivers = [r for r in RECEIVERS if r not in not_measured]
    try:
        entered = part.enter()
        p = subprocess.Popen(command(a, out_json, cpu, receivers), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, bufsize=1)
        try:
            ctl.serve(p)
        finally:
            if p.stdin:
                p.stdin.close()
            rc = p.wait()
    finally:
        restorer.restore()
    if rc != 0:
        raise ToolError(f"{prog} failed (exit {rc})")
    doc: JsonObj = load_json(out_json)
    doc.update(ctl.report(), not_measured=not_measured)
    with open(out_json, "w") as f:
        json.dump(doc, f)
    doc["partition"] = f"detach isolate -c {cpu}" if entered else part.why
    md = summary(doc)
    if not a.no_plots:
        try:
            make_plots(doc, a.out)
            md += "\n`plots/evlat-<load>.png`: densities per receiver, log scale (the paper's figures 3 and 4).\n"
        except plots.PlotsMissing as e:
            warn(str(e), e.note)
            md += "\nNo plots: matplotlib is missing.\n"
    publish_summary(a.out, "evlat", md, not a.no_print)
    return 0
