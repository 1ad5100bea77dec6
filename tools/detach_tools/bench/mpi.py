"""fwq-mpi cells of `detach bench` (bench/fwq_mpi.c, docs/mpi.md): the
command line per configuration and the summary section.

Two ranks under Open MPI: rank 0 runs on the housekeeping CPUs as an
ordinary process in every configuration; the other rank is the measured one
and runs as the configuration says on the measured CPU.  On a machine with
more CPUs the same holds: one rank per measured CPU would need one
measured CPU each, which the bench has one of."""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable

from .. import paths
from ..cpus import format_cpulist
from ..files import JsonObj

PROGRAM = "fwq-mpi"
EXE = "fwq_mpi"
# linux-fifo-isolated adds nothing here that floor does not show.
CONFIGS = ("linux", "linux-fifo", "detached", "floor")
MPIRUN = "mpirun.openmpi"       # fwq_mpi is built with Open MPI's mpicc (Makefile)
FIFO = ["chrt", "-f", "10"]


def mpirun() -> list[str]:
    # --oversubscribe: Open MPI counts one slot per core and refuses 2 ranks
    # on a 2-CPU VM otherwise; --bind-to none: each rank is placed below.
    cmd = [MPIRUN, "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def command(cfg: str, args: list[str], cpu: int, hk: Iterable[int], detach: str,
            partition_tasks: str | None) -> list[str]:
    """The mpirun command line of one cell.  args: fwq_mpi and its options;
    partition_tasks: the file a thread writes its tid to to join the
    partition (None: no partition), for the floor's measured rank."""
    c, h = str(cpu), format_cpulist(hk)
    if cfg == "detached":
        # detach run places the ranks itself (src/cli/mpi_rank.c): the one
        # with CPU cpu is detached, the other runs undetached on hk.
        return mpirun() + ["-np", "2", detach, "run", "-c", c, "-H", h,
                           "--oversubscribe", "--"] + args
    other = ["taskset", "-c", h] + args
    if cfg == "linux":
        measured = args
    elif cfg == "linux-fifo":
        measured = FIFO + ["taskset", "-c", c] + args
    elif cfg == "floor":
        measured = FIFO + ["taskset", "-c", c] + args
        if partition_tasks:
            # mpirun stays in the root cpuset (rank 0 needs hk); the
            # measured rank moves itself into the partition before exec.
            measured = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', partition_tasks] + measured
    else:
        raise ValueError(cfg)
    return mpirun() + ["-np", "1"] + other + [":", "-np", "1"] + measured


def measured_rank(res: JsonObj, cpu: int | None) -> JsonObj | None:
    """The rank pinned to the measured CPU; else the one that ran there (a
    detached rank reports the program's own affinity, which the runtime
    keeps, sched.c); else the last, as command() starts it."""
    ranks: list[JsonObj] = res.get("ranks") or []
    want: tuple[tuple[str, object], ...] = (("cpus_allowed", str(cpu)), ("cpu_at_end", cpu))
    for key, value in want:
        for r in ranks:
            if r["self"].get(key) == value:
                return r
    return ranks[-1] if ranks else None


def summary_lines(doc: JsonObj, loads: list[str], cfgs: list[str],
                  cells_for: Callable[[JsonObj, str, str, str], list[JsonObj]]) -> list[str]:
    """The fwq-mpi section of summary.md."""
    L = ["## fwq-mpi: noise as a 2-rank MPI job sees it\n",
         "Each iteration: the FWQ quantum on every rank, then MPI_Allreduce. The measured "
         "rank runs on the measured CPU as configured, rank 0 as an ordinary process on the "
         "housekeeping CPUs. Rank noise: the measured rank's quantum deltas to its minimum. "
         "Job: iteration time (collective completion to completion), excess over the ideal "
         "(the fastest iteration); slowdown = mean iteration / ideal. Worst repetition.\n",
         "| load | config | measured rank: max delta | p99 | job: ideal (cycles) | "
         "excess max | p99 | median | slowdown |",
         "|---|---|---|---|---|---|---|---|---|"]
    cpu = doc.get("system", {}).get("measured_cpu")
    for load in loads:
        for cfg in cfgs:
            ok = [c for c in cells_for(doc, load, PROGRAM, cfg) if c["status"] == "ok"]
            if not ok:
                continue
            w = max(ok, key=lambda c: c["result"]["stats"]["delta_max"])
            r = w["result"]
            st, job, me = r["stats"], r["job"], measured_rank(r, cpu)
            ms = me["stats"] if me else {}
            L.append(f"| {load} | {cfg} | {ms.get('delta_max')} ({ms.get('delta_max_pct', 0):.3g}%) | "
                     f"{ms.get('delta_p99')} ({ms.get('delta_p99_pct', 0):.3g}%) | {job['ideal']} | "
                     f"{st['delta_max']} ({st['delta_max_pct']:.3g}%) | "
                     f"{st['delta_p99']} ({st['delta_p99_pct']:.3g}%) | "
                     f"{st['delta_median']} ({st['delta_median_pct']:.3g}%) | "
                     f"{job['slowdown_mean']:.4f} |")
    L.append("")
    return L


def available() -> tuple[bool, str]:
    """(ok, why): fwq_mpi built and Open MPI's mpirun present."""
    exe = paths.program(EXE)
    if not os.access(exe, os.X_OK):
        return False, f"{exe} is missing (built only where Open MPI's mpicc is: make deps)"
    if not shutil.which(MPIRUN):
        return False, f"{MPIRUN} not found (make deps installs openmpi-bin)"
    return True, "fwq_mpi and Open MPI present"
