"""detach bench: reproduce the paper's evaluation (FWQ and the control loop
under idle, build and I/O load) on this machine.  Run through `detach bench`
or `make bench`; see docs/bench.md."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType

from . import loads as L
from . import mpi as M
from . import report, run
from .. import paths, scale
from ..cpus import online_cpus, parse_cpulist
from ..errors import EXIT_USAGE, ArgumentParser, ToolError, error
from ..files import JsonObj, load_json


def pick(kind: str, s: str, valid: Sequence[str]) -> list[str]:
    items = [x.strip() for x in s.split(",") if x.strip()]
    if "all" in items:
        return list(valid)
    bad = [x for x in items if x not in valid]
    if bad or not items:
        raise ToolError(f"unknown {kind} '{','.join(bad) or s}'",
                        f"choose from {', '.join(valid)} (comma-separated) or all", EXIT_USAGE)
    return [x for x in valid if x in items]   # canonical order


def positive(s: str) -> int:
    try:
        v = int(s.replace("k", "000"))
        if v <= 0:
            raise ValueError
        return v
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a positive number: '{s}'")


def parse(argv: list[str]) -> argparse.Namespace:
    p = ArgumentParser(
        prog="detach bench",
        description="Runs fwq, ctlloop and fwq-mpi under idle, build and io load in the configurations "
                    "linux, linux-fifo, linux-fifo-isolated, detached and floor; writes "
                    "results.json, summary.md (the paper's two tables beside ours) and plots.")
    p.add_argument("--load", default="all", help="idle,build,io (default all)")
    p.add_argument("--config", default="all",
                   help="linux,linux-fifo,linux-fifo-isolated,detached,floor (default all)")
    p.add_argument("--program", default="all",
                   help="fwq,ctlloop,fwq-mpi (default all; fwq-mpi: 2 MPI ranks, docs/mpi.md), or chan alone: channels between a detached "
                        "thread and Linux against a pipe, an eventfd and a cache line (docs/ipc.md), or evlat alone: "
                        "event-response latency of detached, RT-task, executive and Linux receivers under cache "
                        "flooding and syscall load (the L4RTL paper's experiment, docs/rtl.md)")
    p.add_argument("--mpi-transport", choices=sorted(M.TRANSPORTS), default="shm",
                   help="fwq-mpi: how the two ranks talk, Open MPI's shared memory (default) or TCP on "
                        "loopback (docs/mpi.md)")
    p.add_argument("--samples", type=positive, help="samples per cell for both programs "
                   "(default 10000; --quick: fwq 300, ctlloop 1000)")
    p.add_argument("--repeat", type=positive, help="repetitions (default 2; --quick: 1)")
    p.add_argument("--out", help="output directory (default results/<timestamp>)")
    p.add_argument("--quick", action="store_true",
                   help="about one minute: few samples, one repetition, a small C tree as build load")
    p.add_argument("-c", "--cpu", type=int, help="measured CPU (default: the last online CPU)")
    p.add_argument("-H", "--housekeeping", help="CPUs for the loads (default: all others)")
    p.add_argument("--quantum", type=positive, default=4300000,
                   help="FWQ work quantum target in cycles (default 4300000)")
    p.add_argument("--loops", type=positive, help="FWQ work loop count (skips calibration)")
    p.add_argument("--rt-runtime", default="-1",
                   help="sched_rt_runtime_us for the run, restored after; 'keep' leaves it (default -1)")
    p.add_argument("--preempt", default="full",
                   help="preemption model for the run if PREEMPT_DYNAMIC (restored after); "
                        "'keep' leaves it (default full, as the paper's PREEMPT baseline)")
    p.add_argument("--no-isolate", action="store_true", help="never use detach isolate")
    p.add_argument("--no-trace", action="store_true",
                   help="do not record the guest's trace of each cell (docs/trace.md)")
    p.add_argument("--trace-overhead", action="store_true",
                   help="run every cell twice, traced and not, interleaved: the cost of tracing")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--no-print", action="store_true", help="do not print summary.md at the end")
    p.add_argument("--settle", type=float, help="seconds between starting a load and measuring")
    p.add_argument("--check-loads", type=float, metavar="SECONDS",
                   help="only start each selected load, check it for SECONDS, stop it; print JSON")
    p.add_argument("--scale-ranks", type=scale.parse_ranks, default=scale.parse_ranks("1e3,1e4,1e5,1e6"),
                   help="rank counts of the closing prediction (default 1e3,1e4,1e5,1e6; docs/scale.md)")
    p.add_argument("--scale-sim-ranks", type=lambda s: int(float(s)),
                   help="simulate on SimGrid up to this many ranks, closed form above "
                        "(default 1e4; --quick: 1e3)")
    p.add_argument("--no-scale", action="store_true", help="no prediction at scale at the end")
    p.add_argument("--report", metavar="DIR", help="only rewrite summary.md and plots from DIR/results.json")
    a = p.parse_args(argv)
    a.cmdline = ["detach", "bench"] + argv
    a.loads = pick("load", a.load, L.LOADS)
    a.configs = pick("configuration", a.config, run.CONFIGS)
    a.programs = [a.program] if a.program in ("chan", "evlat") else pick("program", a.program, run.PROGRAMS)
    a.repeat_chan = a.repeat or (2 if a.quick else 5)
    a.repeat_evlat = a.repeat or (1 if a.quick else 3)
    a.samples_fwq = a.samples or (300 if a.quick else 10000)
    a.samples_ctl = a.samples or (1000 if a.quick else 10000)
    a.repeat = a.repeat or (1 if a.quick else 2)
    if a.scale_sim_ranks is None:
        a.scale_sim_ranks = 1000 if a.quick else 10000
    if a.settle is None:
        a.settle = 1.0 if a.quick else 5.0
    if a.rt_runtime != "keep":
        try:
            if int(a.rt_runtime) < -1:
                raise ValueError
        except ValueError:
            raise ToolError(f"bad --rt-runtime '{a.rt_runtime}'", "a number of us, -1, or keep", EXIT_USAGE)
    try:
        a.housekeeping = parse_cpulist(a.housekeeping) if a.housekeeping else None
    except ValueError:
        raise ToolError(f"malformed CPU list '{a.housekeeping}'", "a CPU list looks like 0 or 0-2,4", EXIT_USAGE)
    if not a.out:
        a.out = os.path.join(paths.results_base(), time.strftime("%Y%m%d-%H%M%S"))
    return a


def check_loads(a: argparse.Namespace, root: str) -> int:
    """Start, check and stop each load: what the tests exercise."""
    online = sorted(online_cpus())
    if len(online) < 2:
        raise ToolError(f"needs at least 2 CPUs, this machine has {len(online)}",
                        "one CPU to measure, the others for housekeeping and the load")
    cpu = a.cpu if a.cpu is not None else online[-1]
    hk = a.housekeeping or (set(online) - {cpu})
    out: dict[str, JsonObj] = {}
    for name in a.loads:
        load = L.make_load(name, hk, a.quick, root)
        res: JsonObj = {}
        try:
            load.prepare(lambda m: print(m, file=sys.stderr))
            load.start()
            time.sleep(a.settle)
            first = load.check()
            t_end = time.monotonic() + a.check_loads
            checks = [first]
            while time.monotonic() < t_end:
                time.sleep(min(1.0, max(0.05, t_end - time.monotonic())))
                checks.append(load.check())
            res = {"first": first, "last": checks[-1],
                   "progressed": load.advanced(first["progress"], checks[-1]["progress"]),
                   "confined": all(not c["outside"] for c in checks),
                   "alive": not checks[-1]["dead"], "pgids": load.pgids()}
        finally:
            left = load.stop()
            res["leftover"] = [f"{p} {c}" for p, c in left]
            res["achieved"] = load.achieved()
            out[name] = res
    print(json.dumps(out, indent=1))
    bad = [n for n, r in out.items() if r["leftover"] or not r.get("confined", False)
           or not r.get("alive", False) or (n != "idle" and not r.get("progressed"))]
    return 1 if bad else 0


def interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = paths.load_tree()   # what the build load compiles
    # Ctrl-C, TERM and HUP all stop the loads, restore state and keep the
    # results so far; SIGINT explicitly, since a background job inherits it
    # ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGHUP, interrupt)
    try:
        a = parse(argv)
        if a.report:
            doc = load_json(os.path.join(a.report, "results.json"))
            report.write_all(doc, a.report, with_plots=not a.no_plots)
            print(os.path.join(a.report, "summary.md"))
            return 0
        if a.check_loads is not None:
            return check_loads(a, root)
        if a.programs == ["chan"]:
            from . import chan
            return chan.run(a)
        if a.programs == ["evlat"]:
            from . import evlat
            return evlat.run(a)
        return run.Bench(a, root).run()
    except ToolError as e:
        error(str(e), e.note)
        return e.status
    except KeyboardInterrupt:
        error("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
