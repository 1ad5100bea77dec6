"""Cost of creating children and of starting up: native vs detached,
interleaved in one run, repeated.  Reads bench/spawncost JSON for
fork+_exit+waitpid and pthread_create+join (one TSC sample per round), and
times `/bin/true` plain and under `detach run` (wall clock of the whole
command, from this process).

    python3 -m detach_tools spawncost [--repeat N] [--rounds N] [--cpu CPU] [--mode MODE ...] [--out DIR]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from . import paths
from .cpus import need_two
from .errors import ArgumentParser, ToolError, guard
from .files import load_json
from .stats import percentile as pct


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(prog="detach-spawncost", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1)
    ap.add_argument("--mode", action="append", default=None,
                    help="detach --mode values to compare (default: sud)")
    ap.add_argument("--out", default=None, help="keep the raw JSON here")
    a = ap.parse_args(argv)
    return guard(lambda: run(a))


def run(a: argparse.Namespace) -> None:
    need_two("detach-spawncost")
    configs: list[tuple[str, str | None]] = [("native", None)] + [(m, m) for m in (a.mode or ["sud"])]
    out = a.out or tempfile.mkdtemp(prefix="spawncost.")
    os.makedirs(out, exist_ok=True)
    prog = paths.program("spawncost")
    kinds = ("fork_exit", "pthread_create_join", "start_bin_true")
    samples: dict[str, dict[str, list[float]]] = {c[0]: {k: [] for k in kinds} for c in configs}
    for rep in range(a.repeat):
        for name, mode in configs:                  # interleaved
            pre = [] if mode is None else [paths.detach_bin(), "run", "-c", str(a.cpu), "--mode", mode, "--"]
            path = os.path.join(out, f"{name}.{rep}.json")
            r = subprocess.run(pre + [prog, "-n", str(a.rounds), "--json", path],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode:
                raise ToolError(f"spawncost {name} failed: {r.stderr.strip()}")
            d = load_json(path)
            hz = d["tsc_hz"]
            for k in kinds[:2]:
                samples[name][k] += [c * 1e9 / hz for c in d[k]]
            for _ in range(20):
                t0 = time.perf_counter()
                rc = subprocess.run(pre + ["/bin/true"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL).returncode
                samples[name]["start_bin_true"].append((time.perf_counter() - t0) * 1e9)
                if rc:
                    raise ToolError(f"{name}: /bin/true failed")
        print(f"repetition {rep + 1}/{a.repeat} done", file=sys.stderr)
    print(f"# spawn and start-up cost, {a.repeat} interleaved repetitions x {a.rounds} rounds "
          f"(20 starts), detached on CPU {a.cpu}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}, kernel {os.uname().release}, raw JSON in {out}")
    print("| what | configuration | p50 us | p99 us | p99.9 us | max us | p50 / native |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for k in kinds:
        base = 0.0
        for name, _ in configs:
            v = sorted(samples[name][k])
            row = [pct(v, p) / 1000 for p in (50, 99, 99.9, 100)]
            base = base or row[0]
            print(f"| {k} | {name} | {row[0]:.0f} | {row[1]:.0f} | {row[2]:.0f} | {row[3]:.0f} | {row[0] / base:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
