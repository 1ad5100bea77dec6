"""Cost of a forwarded system call: native, the bare mailbox (the floor of
any forwarding design: the same call handed to a thread on another CPU over
the runtime's mailbox layout, no interception), detached as a user runs it
(`default`: no --mode, no --proxy: rewrite mode's stubs where it can run)
and detached in each --mode (spin and adaptive proxy), interleaved in one
run, repeated.  Every configuration is
reported against native and against the mailbox.  Then the cost of reaching
the runtime: gettid (answered without the kernel under detach) less a plain
function call of the same shape, measured in the same process.  Reads
bench/fwdcost JSON only.

    python3 -m detach_tools fwdcost [--repeat N] [--samples N] [--cpu CPU] [--mode MODE ...]
                                    [--also NAME=DETACH_BIN ...] [--seccomp N] [--out DIR]

--also runs the same modes with another build of detach in the same
interleaved rounds (a before/after comparison): configurations NAME-default
and NAME-MODE-PROXY.
--seccomp N runs native and every detached configuration once more with an
allow-all seccomp filter of N instructions judging each call (the kernel's
natively, the runtime's detached): configurations NAME+bpfN.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from typing import Optional

from . import paths
from .cpus import need_two
from .errors import ArgumentParser, ToolError, guard
from .files import load_json
from .stats import percentile as pct

# name, detach --mode (None: not detached), --proxy, the detach command, seccomp filter length
Config = tuple[str, Optional[str], Optional[str], Optional[str], int]


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="detach-fwdcost", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--samples", type=int, default=100000)
    ap.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1)
    ap.add_argument("--mode", action="append", default=None,
                    help="detach --mode values to compare (default: sud)")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=DETACH_BIN",
                    help="also run the modes with this detach command (another build)")
    ap.add_argument("--seccomp", type=int, default=0, metavar="N",
                    help="also run with an allow-all seccomp filter of N instructions")
    ap.add_argument("--out", default=None, help="keep the raw JSON here")
    a = ap.parse_args(argv)
    return guard(lambda: run(a))


def run(a: argparse.Namespace) -> None:
    need_two("detach-fwdcost")
    modes = a.mode or ["sud"]
    # the mailbox's server: a CPU other than the measured one, where a proxy runs
    server = next(c for c in sorted(os.sched_getaffinity(0)) if c != a.cpu)
    configs: list[Config] = [("native", None, None, None, 0), ("mailbox", None, None, None, 0)]
    builds = [("", paths.detach_bin())]
    for spec in a.also:
        name, sep, path = spec.partition("=")
        if not sep or not os.access(path, os.X_OK):
            raise ToolError(f"--also wants NAME=DETACH_BIN with an executable, not '{spec}'",
                            "name another build's detach command, as --also old=/path/to/build/detach", 2)
        builds.append((name + "-", path))
    for prefix, binary in builds:
        configs.append((f"{prefix}default", "default", None, binary, 0))
        for m in modes:
            configs += [(f"{prefix}{m}-spin", m, "spin", binary, 0), (f"{prefix}{m}-adaptive", m, "adaptive", binary, 0)]
    if a.seccomp:
        configs += [(f"{c[0]}+bpf{a.seccomp}", c[1], c[2], c[3], a.seccomp) for c in configs if c[0] != "mailbox"]
    out = a.out or tempfile.mkdtemp(prefix="fwdcost.")
    os.makedirs(out, exist_ok=True)
    fw = paths.program("fwdcost")
    calls = ("getppid", "write4k", "gettid", "plaincall")
    cycles: dict[str, dict[str, list[float]]] = {c[0]: {call: [] for call in calls} for c in configs}
    hz = 1.0
    for rep in range(a.repeat):
        for name, mode, proxy, detach, filt in configs:     # interleaved
            path = os.path.join(out, f"{name}.{rep}.json")
            cmd = [fw, "-n", str(a.samples), "--json", path] + (["--seccomp", str(filt)] if filt else [])
            if name == "mailbox":
                cmd[1:1] = ["-c", str(a.cpu), "--mailbox", str(server)]
            elif mode is None:
                cmd[1:1] = ["-c", str(a.cpu)]
            elif mode == "default":
                assert detach
                cmd = [detach, "run", "-c", str(a.cpu), "--"] + cmd
            else:
                assert detach and proxy
                cmd = [detach, "run", "-c", str(a.cpu), "--mode", mode,
                       "--proxy", proxy, "--"] + cmd
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode:
                raise ToolError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
            d = load_json(path)
            hz = d["tsc_hz"]
            for call in calls:       # per call: a sample may time several
                per = d[call]["calls_per_sample"]
                cycles[name][call] += [c / per for c in d[call]["cycles"]]
        print(f"repetition {rep + 1}/{a.repeat} done", file=sys.stderr)

    def ns(c: float) -> float:
        return c * 1e9 / hz
    print(f"# forwarded-call cost, {a.repeat} interleaved repetitions x {a.samples} calls, CPU {a.cpu}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}, kernel {os.uname().release}, raw JSON in {out}")
    print("| call | configuration | p50 ns | p99 ns | p99.9 ns | max ns | p50 / native | p50 / mailbox | p99 / mailbox |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    rows_of: dict[str, dict[str, list[float]]] = {}
    for call in calls:
        rows = rows_of[call] = {}
        for name, *_ in configs:
            srt = sorted(cycles[name][call])
            rows[name] = [ns(pct(srt, p)) for p in (50, 99, 99.9, 100)]
        nat, mbx = rows["native"], rows["mailbox"]
        for name, *_ in configs:
            v = rows[name]
            print(f"| {call} | {name} | {v[0]:.1f} | {v[1]:.1f} | {v[2]:.1f} | {v[3]:.0f} | "
                  f"{v[0] / nat[0]:.2f} | {v[0] / mbx[0]:.2f} | {v[1] / mbx[1]:.2f} |")
    print()
    print("| configuration | gettid - plaincall, p50 ns | p99 ns | p99.9 ns |")
    print("|---|---:|---:|---:|")
    for name, *_ in configs:
        g, p = rows_of["gettid"][name], rows_of["plaincall"][name]
        print(f"| {name} | {g[0] - p[0]:.1f} | {g[1] - p[1]:.1f} | {g[2] - p[2]:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
