"""Wake-up latency of unmodified cyclictest and oslat (rt-tests), plain and
detached, against the floor of the isolated CPU, with the project's
targets for their ratios.

    python3 -m detach_tools latency [--quick] [--rounds N] [--loops N] [--seconds S] [--cpu CPU] [--out DIR]

Runs, interleaved in one run and in the `detach isolate` partition, ROUNDS
rounds of four configurations on the measured CPU:
  plain      cyclictest -m -p 90 -a CPU -t 1 -i 1000 -l LOOPS -q -N, in the partition
  detached   the same under `detach run -c CPU --select pinned`, started from
             the housekeeping cpuset (as from a shell after `detach isolate`)
  floor      oslat -c CPU -C HK -f 90: a bare TSC spin loop on CPU at SCHED_FIFO 90
  oslat-det  the same oslat under `detach run -c CPU --select order:2`
and writes every raw JSON, results.json and summary.md (max, p99, p50 per
round, worst and median across rounds, the ratios and their targets) into
--out.  Root only.  docs/latency.md says how to read it.  The standard
library and psutil only.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from types import FrameType

from .. import paths
from ..errors import ArgumentParser, ToolError, report
from .run import (CONFIGS, CYC_HIST, DETACH, OSLAT_BUCKETS, Abort, Partition, Runner, Runs, say,
                  system_info, wait_for_quiet)
from .summary import fmt, summary


def main(argv: list[str] | None = None) -> int:
    try:
        return run(argv)
    except ToolError as e:
        return report(e)


def run(argv: list[str] | None) -> int:
    ncpus = os.cpu_count() or 1
    ap = ArgumentParser(prog="detach-latency", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5; --quick 2)")
    ap.add_argument("--loops", type=int, default=None,
                    help="cyclictest wake-ups per run, 1 ms apart (default 10000; --quick 2000)")
    ap.add_argument("--seconds", type=int, default=None,
                    help="oslat test duration per run (default 10; --quick 2)")
    ap.add_argument("--cpu", type=int, default=ncpus - 1, help="measured CPU (default: the last)")
    ap.add_argument("--out", default=None, help="output directory (default results/latency-<time>)")
    ap.add_argument("--quick", action="store_true", help="a ~30-second smoke run")
    ap.add_argument("--no-wait", action="store_true",
                    help="do not wait for a running detach bench (it shares CPU and partition)")
    a = ap.parse_args(argv)
    a.rounds = a.rounds or (2 if a.quick else 5)
    a.loops = a.loops or (2000 if a.quick else 10000)
    a.seconds = a.seconds or (2 if a.quick else 10)
    if a.rounds < 1 or a.loops < 100 or a.seconds < 1:
        raise ToolError("--rounds, --loops or --seconds too small",
                        "--rounds >= 1, --loops >= 100 and --seconds >= 1, please", 2)
    if os.geteuid() != 0:
        raise ToolError("detach-latency needs root (detach isolate, SCHED_FIFO 90, the cpuset tasks files)",
                        "run it as root")
    if ncpus < 2 or not 0 <= a.cpu < ncpus:
        raise ToolError(f"CPU {a.cpu} is not a CPU of this {ncpus}-CPU machine, or there is no other",
                        "--cpu names the measured CPU; another one must stay for housekeeping", 2)
    for tool in ("cyclictest", "oslat", "sh"):
        if not shutil.which(tool):
            raise ToolError(f"{tool} not found", "tools/install-deps.sh (apt package rt-tests)")
    if not os.access(DETACH, os.X_OK):
        raise ToolError(f"{DETACH} not found", "run make first")
    a.out = os.path.abspath(a.out or os.path.join(paths.results_base(), "latency-" + time.strftime("%Y%m%d-%H%M%S")))
    os.makedirs(a.out, exist_ok=True)
    if not a.no_wait:
        wait_for_quiet(40 * 60)

    def on_signal(sig: int, _frame: FrameType | None) -> None:
        raise Abort(signal.Signals(sig).name)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    part = Partition(a.cpu)
    info_before = system_info(a, "before")
    runner = Runner(a, part, None)
    runs: Runs = {}
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    t0 = time.monotonic()
    try:
        part.enter()
        partition_note = (f"{part.dir} made by this run (`detach isolate -c {a.cpu}`, undone at the end)"
                          if part.made else f"{part.dir}, existing (used as found, left)")
        info_during = system_info(a, "during")
        # oslat's main thread (-C): the first CPU outside the partition
        runner.hk = info_before["hk"] = min(set(range(ncpus)) - part.cpus())
        for rnd in range(1, a.rounds + 1):
            k = (rnd - 1) % len(CONFIGS)
            for cfg in CONFIGS[k:] + CONFIGS[:k]:                 # interleaved, rotated
                rec = runner.run(cfg, rnd)
                runs[(cfg, rnd)] = rec
                s = rec.get("stats", {})
                say(f"round {rnd}/{a.rounds} {cfg:9s} " + (
                    f"max {fmt(s.get('max'))} us  p99 {fmt(s.get('p99'))} us  p50 {fmt(s.get('p50'))} us"
                    if "error" not in rec else f"ERROR {rec['error']}") +
                    ("  NOT DETACHED" if rec.get("detached") is False else ""))
    except Abort as e:
        say(f"interrupted by {e}; restoring and stopping")
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)      # the undo must not be cut short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        runner.kill()
        part.leave()
    finished = time.strftime("%Y-%m-%d %H:%M:%S")
    text = summary(a, runs, info_before, info_during, partition_note, started, finished)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"argv": sys.argv, "started": started, "finished": finished,
                   "elapsed_s": round(time.monotonic() - t0, 1),
                   "params": {"rounds": a.rounds, "loops": a.loops, "seconds": a.seconds,
                              "cpu": a.cpu, "hk": runner.hk, "cyclictest_hist": CYC_HIST,
                              "oslat_buckets": OSLAT_BUCKETS},
                   "system_before": info_before, "system_during": info_during,
                   "partition": partition_note,
                   "runs": [runs[k] for k in sorted(runs, key=lambda k: (k[1], k[0]))]}, f, indent=1)
    print(text)
    say(f"{time.monotonic() - t0:.0f} s; summary in {a.out}/summary.md")
    bad = any("error" in r or r.get("detached") is False for r in runs.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
