"""fwq-mpi cells of `detach bench` (bench/fwq_mpi.c, docs/mpi.md): the
command line per configuration, the kernel's evidence of the detached rank,
the job's iteration times and the summary section.

Two ranks under Open MPI: one is the measured one and runs as the
configuration says on the measured CPU, the other runs as an ordinary
process on the housekeeping CPUs.  Which is which: in the detached cell
`detach run` places the ranks (src/cli/mpi_rank.c), so it is found from
the ranks' own reports (measured_rank) and proven by detach ps and
/proc (Evidence).  One rank per measured CPU would need one measured CPU
each, which the bench has one of."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable

from .. import paths
from ..cpus import format_cpulist
from ..files import JsonObj, read_text
from ..procs import descendants
from ..stats import percentile

PROGRAM = "fwq-mpi"
EXE = "fwq_mpi"
# linux-fifo-isolated adds nothing here that floor does not show.
CONFIGS = ("linux", "linux-fifo", "detached", "floor")
MPIRUN = "mpirun.openmpi"       # fwq_mpi is built with Open MPI's mpicc (Makefile)
FIFO = ["chrt", "-f", "10"]
# Open MPI's progress engine calls libevent (a poll() on its fds) every few
# ms by default while a rank waits in a collective.  On a detached rank
# each is a forwarded call, and each keeps an adaptive proxy in its 50 us
# polling phase for 10 ms: it woke ~7,700 times a second on the
# housekeeping CPU and preempted the rank there as often (/proc/PID/task/TID/status; with
# this setting ~230/s, the 100 ms of polls after each once-a-second poll: an
# adaptive proxy idle for 100 ms sleeps until called, docs/runtime.md).
# Shared memory needs no event loop, TCP's BTL polls its sockets in every
# progress call anyway: once a second is enough.  The same in every
# configuration, so that they differ only in how the measured rank runs
# (docs/mpi.md).
OMPI_SETTINGS = ["--mca", "mpi_event_tick_rate", "1000000"]
# --mpi-transport: Open MPI's byte transfer layers between the two ranks
# (self: a rank to itself).  shm: vader, the shared memory Open MPI picks
# on one node anyway; tcp: sockets on loopback, as between nodes, where a
# rank waiting in the collective polls its sockets (docs/mpi.md); pml ob1:
# the layer that drives the BTLs (Debian's Open MPI may pick UCX's instead).
TRANSPORTS = {"shm": ["--mca", "btl", "self,vader"],
              "tcp": ["--mca", "btl", "self,tcp", "--mca", "pml", "ob1"]}


def mpirun(transport: str = "shm") -> list[str]:
    # --oversubscribe: Open MPI counts one slot per core and refuses 2 ranks
    # on a 2-CPU VM otherwise; --bind-to none: each rank is placed below.
    cmd = [MPIRUN, "--oversubscribe", "--bind-to", "none"] + OMPI_SETTINGS + TRANSPORTS[transport]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def command(cfg: str, args: list[str], cpu: int, hk: Iterable[int], detach: str,
            partition_tasks: str | None, transport: str = "shm") -> list[str]:
    """The mpirun command line of one cell.  args: fwq_mpi and its options;
    partition_tasks: the file a thread writes its tid to to join the
    partition (None: no partition), for the floor's measured rank."""
    c, h = str(cpu), format_cpulist(hk)
    if cfg == "detached":
        # detach run places the ranks itself (src/cli/mpi_rank.c): the one
        # with CPU cpu is detached, the other runs undetached on hk.
        return mpirun(transport) + ["-np", "2", detach, "run", "-c", c, "-H", h,
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
    return mpirun(transport) + ["-np", "1"] + other + [":", "-np", "1"] + measured


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


def _status(pid: int, tid: int) -> JsonObj:
    """The kernel's view of one thread: where it may run, how often it slept
    (voluntary) and was preempted (nonvoluntary), its last CPU."""
    out: JsonObj = {"tid": tid}
    for line in read_text(f"/proc/{pid}/task/{tid}/status", "").splitlines():
        k, _, v = line.partition(":")
        if k == "Cpus_allowed_list":
            out["cpus_allowed"] = v.strip()
        elif k in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
            out[k] = int(v)
    stat = read_text(f"/proc/{pid}/task/{tid}/stat", "")
    if ")" in stat:   # the fields after the command name; processor is field 39
        f = stat.rsplit(")", 1)[1].split()
        out["last_cpu"] = int(f[36])
    return out


class Evidence:
    """While an fwq-mpi cell runs: which of the job's processes detach
    ps lists as detached, and for each detached thread and its proxy the
    kernel's /proc status twice, `window` seconds apart.  Proof that the
    rank the bench calls detached is (a thread pinned to the measured CPU
    that never sleeps, its calls served by a proxy elsewhere), and the
    proxy's wake-ups per second, which the rank beside it pays for.  A job
    that ends before the second look (--quick: 300 iterations) keeps the
    first: where the threads were, no rates."""

    def __init__(self, detach: str, root_pid: int, window: float = 1.0) -> None:
        self.detach, self.root, self.window = detach, root_pid, window
        self.out: JsonObj = {"seen": False}
        self.stop = threading.Event()
        self.th = threading.Thread(target=self._run, daemon=True)
        self.th.start()

    def _ps(self) -> list[JsonObj]:
        r = subprocess.run([self.detach, "ps", "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, check=False)
        try:
            threads: list[JsonObj] = json.loads(r.stdout).get("threads", [])
        except ValueError:
            return []
        mine = descendants(self.root)
        return [t for t in threads if t.get("pid") in mine and t.get("alive", True)]

    @staticmethod
    def _placed(t: JsonObj, thread: JsonObj, proxy: JsonObj) -> JsonObj:
        return {"pid": t["pid"], "tid": t["tid"], "cpu": t["cpu"], "proxy_tid": t["proxy_tid"],
                "thread": thread, "proxy": proxy}

    def _run(self) -> None:
        # wait for MPI_Init (its calls are the first forwarded), look at
        # once where the threads are, then twice over a window for rates
        while not self.stop.wait(0.1):
            ts = self._ps()
            if ts and all(t.get("forwarded", 0) > 0 for t in ts):
                break
        else:
            return
        self.out = {"seen": True, "detached": [
            self._placed(t, _status(t["pid"], t["tid"]), _status(t["pid"], t["proxy_tid"])) for t in ts]}
        # the first iterations past MPI_Init, then the window
        if self.stop.wait(0.5):
            return
        ts = self._ps()
        first = {t["tid"]: (_status(t["pid"], t["tid"]), _status(t["pid"], t["proxy_tid"])) for t in ts}
        if self.stop.wait(self.window):
            return
        rows = []
        for t in self._ps():
            if t["tid"] not in first:
                continue
            a, pa = first[t["tid"]]
            b, pb = _status(t["pid"], t["tid"]), _status(t["pid"], t["proxy_tid"])
            if "voluntary_ctxt_switches" not in b or "voluntary_ctxt_switches" not in pb:
                continue        # ended meanwhile
            rows.append({**self._placed(t, b, pb), "window_s": self.window,
                         **{f"{who}_{k}_per_s": round((y[k] - x[k]) / self.window)
                            for who, x, y in (("thread", a, b), ("proxy", pa, pb))
                            for k in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")}})
        if rows:
            self.out = {"seen": True, "detached": rows}

    def result(self) -> JsonObj:
        self.stop.set()
        self.th.join()
        return self.out


def evidence_check(ev: JsonObj | None, res: JsonObj, cpu: int) -> tuple[bool, str]:
    """Is the measured rank the detached one, by the kernel's word?"""
    me = measured_rank(res, cpu)
    if not ev or not ev.get("seen") or not ev.get("detached"):
        return False, "no detached thread of the job seen while it ran (detach ps)"
    pid = me["self"]["pid"] if me else None
    row = next((r for r in ev["detached"] if r["pid"] == pid), None)
    if not row:
        return False, f"the measured rank (pid {pid}) is not among the detached ({[r['pid'] for r in ev['detached']]})"
    th = row["thread"]
    rated = "thread_voluntary_ctxt_switches_per_s" in row
    ok = (row["cpu"] == cpu and th.get("cpus_allowed") == str(cpu)
          and (not rated or row["thread_voluntary_ctxt_switches_per_s"] == 0)
          and row["proxy"].get("cpus_allowed") != str(cpu))
    placed = (f"rank pid {pid} tid {row['tid']} detached on CPU {row['cpu']} (kernel: Cpus_allowed "
              f"{th.get('cpus_allowed')}")
    proxy = f"proxy {row['proxy_tid']} on CPUs {row['proxy'].get('cpus_allowed')}"
    if not rated:
        return ok, f"{placed}); {proxy}; one look: the job ended before a second, no rates"
    return ok, (f"{placed}, {row['thread_voluntary_ctxt_switches_per_s']} sleeps/s); {proxy}, "
                f"{row['proxy_voluntary_ctxt_switches_per_s']} wake-ups/s")


def _pcts(v: list[int], hz: float) -> JsonObj:
    s = sorted(v)
    if not s:
        return {"n": 0}
    us = (lambda x: round(x * 1e6 / hz, 1)) if hz else (lambda x: None)
    return {"n": len(s), "p50": percentile(s, 50), "p99": percentile(s, 99), "max": s[-1],
            "p50_us": us(percentile(s, 50)), "p99_us": us(percentile(s, 99)), "max_us": us(s[-1])}


def iteration_report(doc: JsonObj, cells_for: Callable[[JsonObj, str, str, str], list[JsonObj]]) -> JsonObj:
    """Per load and configuration, over every repetition: the job's
    iteration time (collective completion to completion on rank 0), p50,
    p99, max; and per rank who made the job wait: in how many iterations it
    was the last to reach the collective and by how much it trailed the
    next rank there (its quantum minus the longest other quantum)."""
    hz = float(doc.get("tsc_hz") or 0)
    cpu = doc.get("system", {}).get("measured_cpu")
    out: JsonObj = {}
    for load in doc["options"]["loads"]:
        for cfg in CONFIGS:
            ok = [c for c in cells_for(doc, load, PROGRAM, cfg) if c["status"] == "ok"]
            if not ok:
                continue
            iters: list[int] = []
            per: dict[int, JsonObj] = {}
            for c in ok:
                res = c["result"]
                iters += res["samples"][1:]      # the first has no predecessor
                me = measured_rank(res, cpu)
                ranks = res["ranks"]
                qs = [r["samples"] for r in ranks]
                detached = {d["pid"] for d in (c.get("detach_evidence") or {}).get("detached", [])}
                for r in ranks:
                    p = per.setdefault(r["rank"], {"rank": r["rank"], "last": 0, "iterations": 0,
                                                   "late_by": [], "quanta": []})
                    p["role"] = ("measured rank, " + cfg if me is not None and r["rank"] == me["rank"]
                                 else "rank on the housekeeping CPUs")
                    if r["self"]["pid"] in detached:
                        p["role"] += " (detached: detach ps)"
                    p["quanta"] += r["samples"]
                for i in range(len(qs[0])):
                    col = [q[i] for q in qs]
                    last = max(range(len(col)), key=col.__getitem__)
                    others = max((x for k, x in enumerate(col) if k != last), default=col[last])
                    per[ranks[last]["rank"]]["last"] += 1
                    per[ranks[last]["rank"]]["late_by"].append(col[last] - others)
                    for r in ranks:
                        per[r["rank"]]["iterations"] += 1
            qmin = min(min(p["quanta"]) for p in per.values())
            rows = []
            for rk in sorted(per):
                p = per[rk]
                qp50 = percentile(sorted(p["quanta"]), 50)
                rows.append({"rank": rk, "role": p["role"], "last_in": p["last"],
                             "last_in_pct": round(100 * p["last"] / max(1, p["iterations"]), 1),
                             "late_by": _pcts(p["late_by"], hz), "quantum_p50": qp50,
                             "quantum_p50_over_min_pct": round(100 * (qp50 - qmin) / qmin, 2)})
            out.setdefault(load, {})[cfg] = {"repetitions": len(ok), "iteration": _pcts(iters, hz),
                                             "quantum_min": qmin, "ranks": rows}
    return out


def iteration_lines(rep: JsonObj) -> list[str]:
    """The iteration-time tables of summary.md, from iteration_report()."""
    L = ["### fwq-mpi: the job's iteration time (completion to completion), all repetitions\n",
         "| load | config | reps | iterations | p50 (us) | p99 (us) | max (us) | p50 / linux | p99 / linux |",
         "|---|---|---|---|---|---|---|---|---|"]
    for load, cfgs in rep.items():
        base = cfgs.get("linux", {}).get("iteration", {})
        for cfg, r in cfgs.items():
            it = r["iteration"]
            rel = [f"{it[k] / base[k]:.3f}" if base.get(k) else "-" for k in ("p50", "p99")]
            L.append(f"| {load} | {cfg} | {r['repetitions']} | {it['n']} | {it.get('p50_us')} | "
                     f"{it.get('p99_us')} | {it.get('max_us')} | {rel[0]} | {rel[1]} |")
    L += ["", "### fwq-mpi: which rank made the job wait\n",
          "last in: iterations in which the rank reached the collective last; late by: how far "
          "its quantum trailed the longest other rank's then; quantum p50 over min: how much "
          "slower its work ran throughout (a rank sharing its CPU, e.g. with a proxy, shows here).\n",
          "| load | config | rank | role | last in | late by p50 / p99 / max (us) | quantum p50 over min |",
          "|---|---|---|---|---|---|---|"]
    for load, cfgs in rep.items():
        for cfg, r in cfgs.items():
            for k in r["ranks"]:
                lb = k["late_by"]
                L.append(f"| {load} | {cfg} | {k['rank']} | {k['role']} | {k['last_in']} "
                         f"({k['last_in_pct']}%) | {lb.get('p50_us')} / {lb.get('p99_us')} / "
                         f"{lb.get('max_us')} | {k['quantum_p50_over_min_pct']}% |")
    L.append("")
    return L


def summary_lines(doc: JsonObj, loads: list[str], cfgs: list[str],
                  cells_for: Callable[[JsonObj, str, str, str], list[JsonObj]]) -> list[str]:
    """The fwq-mpi section of summary.md."""
    transport = doc.get("options", {}).get("mpi_transport", "shm")
    L = [f"## fwq-mpi: noise as a 2-rank MPI job sees it (Open MPI over {transport})\n",
         "Each iteration: the FWQ quantum on every rank, then MPI_Allreduce. The measured "
         "rank runs on the measured CPU as configured, the other as an ordinary process on the "
         "housekeeping CPUs (the detached one is proven by detach ps and /proc, config_check). Rank noise: the measured rank's quantum deltas to its minimum. "
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
    if doc.get("fwq_mpi"):
        L += iteration_lines(doc["fwq_mpi"])
    return L


def available() -> tuple[bool, str]:
    """(ok, why): fwq_mpi built and Open MPI's mpirun present."""
    exe = paths.program(EXE)
    if not os.access(exe, os.X_OK):
        return False, f"{exe} is missing (built only where Open MPI's mpicc is: make deps)"
    if not shutil.which(MPIRUN):
        return False, f"{MPIRUN} not found (make deps installs openmpi-bin)"
    return True, "fwq_mpi and Open MPI present"
