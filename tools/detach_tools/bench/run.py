"""The evaluation: {fwq, ctlloop} x loads x configurations, interleaved
within each load, repeated; every cell's program JSON kept whole."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone

from . import loads as L
from . import mpi as M
from . import report, scaling, system
from .trace import CellTrace
from .. import JSON_FORMAT, paths
from ..cpus import format_cpulist, online_cpus
from ..errors import ToolError, warn
from ..files import JsonObj, load_json, read_text as read
from ..procs import descendants, runnable_on
from .util import fmt_dur

# One cell of the plan: load, repetition, program, configuration, untraced.
Cell = tuple[str, int, str, str, bool]

PROGRAMS = ("fwq", "ctlloop", M.PROGRAM)
CONFIGS = ("linux", "linux-fifo", "linux-fifo-isolated", "detached", "floor")
PARTITION_CONFIGS = ("linux-fifo-isolated", "detached", "floor")
FIFO = ["chrt", "-f", "10"]


def cpu_ticks(cpu: int) -> dict[str, int]:
    """/proc/stat fields of one CPU, in USER_HZ ticks.  By name, not
    psutil.cpu_times(percpu=True): that list skips offline CPUs, so its
    index is not the CPU's number."""
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    for line in read("/proc/stat", "").splitlines():
        if line.startswith(f"cpu{cpu} "):
            return dict(zip(names, map(int, line.split()[1:9])))
    return {}


def iso_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Bench:
    def __init__(self, args: argparse.Namespace, root: str) -> None:
        self.a = args
        self.root = root
        self.detach = paths.detach_bin()
        self.restorer = system.Restorer()
        self.cells: list[JsonObj] = []
        self.loads_out: dict[str, JsonObj] = {}
        self.t0 = time.monotonic()
        self.start_time = iso_now()
        self.interrupted = False
        self.tty = sys.stderr.isatty()
        # set by setup(), calibrate() and run()
        self.cpu = -1
        self.hk: set[int] = set()
        self.loops = 0
        self.tsc_hz = 0.0
        self.quantum_s = 0.0
        self.version: str | None = None
        self.cpu_model: str | None = None
        self.partition: system.Partition
        self.detach_ok = False
        self.detach_why = "not requested"
        self.state: JsonObj = {}

    # -- output ------------------------------------------------------------
    def log(self, msg: str) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")
        print(msg, file=sys.stderr, flush=True)

    def progress(self, i: int, total: int, label: str, remaining: float) -> None:
        line = (f"[{i}/{total}] {label}  elapsed {fmt_dur(time.monotonic() - self.t0)}"
                f"  estimate {fmt_dur(remaining)} left")
        if self.tty:
            sys.stderr.write("\r\033[K" + line)
            sys.stderr.flush()
        else:
            print(line, file=sys.stderr, flush=True)

    # -- planning ------------------------------------------------------------
    def cell_seconds(self, prog: str) -> float:
        n: int = self.a.samples_fwq if prog != "ctlloop" else self.a.samples_ctl
        if prog == M.PROGRAM:     # and mpirun's start, about a second
            return (n + 100) * self.quantum_s + 1.5
        if prog == "fwq":
            return (n + 100) * self.quantum_s + 0.3
        return (n + 10) * 1e-3 + 0.4

    def plan(self) -> list[Cell]:
        """[(load, rep, prog, config)], configurations interleaved within each
        load and repetition; partition configurations grouped so that the
        partition is entered once per group."""
        order: list[Cell] = []
        for load in self.a.loads:
            for rep in range(1, self.a.repeat + 1):
                for prog in self.a.programs:
                    cfgs = [c for c in CONFIGS if c in self.a.configs
                            and (prog != M.PROGRAM or c in M.CONFIGS)]
                    out = [c for c in cfgs if c not in PARTITION_CONFIGS]
                    inside = [c for c in cfgs if c in PARTITION_CONFIGS]
                    if rep % 2 == 0:       # alternate the order between repetitions
                        out.reverse()
                        inside.reverse()
                    for c in out + inside:
                        if self.a.trace_overhead:   # each cell traced and not, alternating
                            first = (rep + len(order)) % 2 == 0
                            order.append((load, rep, prog, c, not first))
                            order.append((load, rep, prog, c, first))
                        else:
                            order.append((load, rep, prog, c, self.a.no_trace))
        return order

    # -- one cell --------------------------------------------------------------
    def command(self, prog: str, cfg: str, out: str) -> list[str]:
        exe = paths.program(M.EXE if prog == M.PROGRAM else prog)
        n = self.a.samples_fwq if prog != "ctlloop" else self.a.samples_ctl
        cmd = [exe, "--samples", str(n), "--json", out, "--quiet"]
        if prog != "ctlloop":
            cmd += ["--loops", str(self.loops)]
        if prog == M.PROGRAM:
            return M.command(cfg, cmd, self.cpu, self.hk, self.detach,
                             self.partition.tasks_file() if self.partition.active else None,
                             self.a.mpi_transport)
        if prog == "ctlloop" and cfg == "floor":
            cmd.append("--spin")
        cpu = str(self.cpu)
        if cfg == "linux":
            return cmd
        if cfg in ("linux-fifo", "linux-fifo-isolated", "floor"):
            return FIFO + ["taskset", "-c", cpu] + cmd
        if cfg == "detached":
            return [self.detach, "run", "-c", cpu, "-H", format_cpulist(self.hk), "--"] + cmd
        raise ValueError(cfg)

    def verify_config(self, cfg: str, res: JsonObj, ev: JsonObj | None = None) -> tuple[bool, str]:
        """Did the configuration take effect?  From the program's own report;
        a detached MPI rank from the kernel's (ev: mpi.Evidence)."""
        me = res.get("self", {})
        if "ranks" in res:        # fwq-mpi: the rank on the measured CPU
            if cfg == "detached":
                return M.evidence_check(ev, res, self.cpu)
            me = (M.measured_rank(res, self.cpu) or {}).get("self", {})
        if cfg in ("linux-fifo", "linux-fifo-isolated", "floor"):
            ok: bool = me.get("policy") == "SCHED_FIFO" and me.get("priority") == 10 and \
                me.get("cpus_allowed") == str(self.cpu)
            return ok, f"{me.get('policy')}:{me.get('priority')} on CPUs {me.get('cpus_allowed')}"
        if cfg == "detached":
            # the affinity it reports is the program's own (the runtime keeps
            # it, sched.c); where it ran is sched_getcpu's answer, which glibc
            # reads from the kernel's rseq area or the vDSO, not the runtime
            on = me.get("cpu_at_end") == self.cpu
            return on, f"{me.get('policy')} on CPU {me.get('cpu_at_end')}"
        return True, f"{me.get('policy')} on CPUs {me.get('cpus_allowed')}"

    def reap_registry(self) -> None:
        """A detached program killed here cannot remove its registry file
        (/dev/shm/detach/PID): `detach ps` removes the files of dead ones."""
        subprocess.run([self.detach, "ps"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)

    def run_cell(self, load: L.Load, rep: int, prog: str, cfg: str, tmpdir: str,
                 trace_off: bool = False) -> JsonObj:
        cell: JsonObj = {"load": load.name, "rep": rep, "program": prog, "config": cfg,
                "in_partition": False, "status": "ok"}
        if trace_off and self.a.trace_overhead:
            # the untraced twin, which the tables leave out (report.cells_for);
            # with --no-trace every cell is untraced and every one counts
            cell["trace_off"] = True
        if cfg == "detached" and not self.detach_ok:
            cell.update(status="unavailable", reason=self.detach_why)
            return cell
        if cfg in PARTITION_CONFIGS:
            cell["in_partition"] = self.partition.enter()
        else:
            self.partition.leave()
        out = os.path.join(tmpdir, f"{load.name}-{prog}-{cfg}-{rep}.json")
        cmd = self.command(prog, cfg, out)
        tr = None
        if trace_off:
            if not self.a.trace_overhead:
                cell["trace"] = {"traced": False, "why": "--no-trace"}
        elif cfg == "linux":
            cell["trace"] = {"traced": False, "why": "not pinned to the measured CPU"}
        elif prog == M.PROGRAM:   # mpirun starts it: the pid is not the program's
            cell["trace"] = {"traced": False, "why": "an MPI job (fwq_mpi writes no intervals)"}
        else:
            tr = CellTrace(self.cpu, self.hk, tmpdir, os.path.basename(out)[:-5])
            cmd = cmd + ["--intervals", tr.intervals]
        cell["cmd"] = cmd
        before = load.check()
        ticks = cpu_ticks(self.cpu)
        t = time.monotonic()
        pre = None
        if cell["in_partition"]:
            if cfg == "detached" or prog == M.PROGRAM:   # fwq-mpi: mpirun places the ranks
                pre = self.partition.preexec("root", {self.cpu} | self.hk)
            else:
                pre = self.partition.preexec("partition", {self.cpu})
            cell["in_partition"] = pre is not None
        try:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, preexec_fn=pre)
        except (OSError, subprocess.SubprocessError) as e:
            cell.update(status="failed", reason=f"cannot start {cmd[0]}: {e} (joining the partition cpuset fails when another process undid the partition)")
            if tr:
                tr.finish(False)
            return cell
        if tr:
            tr.started(p.pid)
        # the kernel's evidence of the detached rank; detach ps runs on the
        # housekeeping CPUs, so only where it is needed, and done within ~2 s
        ev = M.Evidence(self.detach, p.pid) if prog == M.PROGRAM and cfg == "detached" else None
        seen: dict[str, int] = {}
        stop = threading.Event()

        def watch() -> None:
            # Who else is runnable on the measured CPU while the cell runs?
            # (e.g. a CPU-bound SCHED_OTHER task there gets 50 ms a second
            # from the fair server even against SCHED_FIFO.)
            n = 0
            while not stop.wait(0.25):
                n += 1
                for tgid, tid, comm in runnable_on(self.cpu, descendants(p.pid) | {os.getpid()}):
                    seen[comm] = seen.get(comm, 0) + 1
            seen["_samples"] = n
        th = threading.Thread(target=watch, daemon=True)
        th.start()
        try:
            so, _ = p.communicate(timeout=self.cell_seconds(prog) * 5 + 60)
        except subprocess.TimeoutExpired:
            stop.set()
            if ev:
                ev.result()
            p.kill()
            so, _ = p.communicate()
            self.reap_registry()
            cell.update(status="failed", reason="timed out")
            if tr:
                tr.finish(False)
            return cell
        except KeyboardInterrupt:
            stop.set()
            if ev:
                ev.result()
            p.kill()
            p.wait()
            self.reap_registry()
            if tr:
                tr.finish(False)
            raise
        cell["seconds"] = round(time.monotonic() - t, 2)
        if ev:
            cell["detach_evidence"] = ev.result()
        if tr:
            cell["trace"] = tr.finish(p.returncode == 0)
        stop.set()
        th.join()
        cell["others_runnable_on_cpu"] = seen
        # Time the hypervisor took from the measured CPU (steal) and the
        # kernel spent in interrupts there: the noise a VM adds, per cell.
        hz = os.sysconf("SC_CLK_TCK")
        after_ticks = cpu_ticks(self.cpu)
        cell["measured_cpu_ms"] = {k: round((after_ticks.get(k, 0) - v) * 1000 / hz)
                                   for k, v in ticks.items() if k in ("steal", "irq", "softirq")}
        after = load.check()
        cell["load_check"] = {"confined": not before["outside"] and not after["outside"],
                              "alive": not after["dead"],
                              "progressed": load.advanced(before["progress"], after["progress"]),
                              "progress_before": before["progress"],
                              "progress_after": after["progress"]}
        if after["dead"]:
            warn(f"{load.name} load: process ended: {after['dead']}")
        if p.returncode != 0:
            cell.update(status="failed", reason=f"exit {p.returncode}: {so.strip()[-300:]}")
            return cell
        try:
            res = load_json(out)
        except (OSError, ValueError) as e:
            cell.update(status="failed", reason=f"no JSON: {e}")
            return cell
        ok, what = self.verify_config(cfg, res, cell.get("detach_evidence"))
        cell["config_check"] = {"ok": ok, "ran_as": what}
        if not ok:
            warn(f"{prog} {cfg}: configuration did not take effect: {what}")
        cell["result"] = res
        scaling.write_cell_trace(cell, res, self.a.out, self.cpu)
        return cell

    # -- the whole run -----------------------------------------------------------
    def setup(self) -> None:
        for prog in self.a.programs:
            if prog == M.PROGRAM:
                ok, why = M.available()
                if not ok:
                    raise ToolError(why, "run 'make deps' and 'make', or --program fwq,ctlloop")
                continue
            exe = paths.program(prog)
            if not os.access(exe, os.X_OK):
                raise ToolError(f"{exe} is missing", "run 'make' first")
        need = ["chrt", "taskset"]
        for t in need:
            if not shutil.which(t):
                raise ToolError(f"{t} not found", "run 'make deps'")
        online = sorted(online_cpus())
        if len(online) < 2:
            raise ToolError(f"needs at least 2 CPUs, this machine has {len(online)}",
                             "one CPU to measure, the others for housekeeping and the load")
        self.cpu = self.a.cpu if self.a.cpu is not None else online[-1]
        if self.cpu not in online:
            raise ToolError(f"CPU {self.cpu} is not online (online: {format_cpulist(online)})",
                            "choose an online CPU with -c", 2)
        self.hk = set(self.a.housekeeping) if self.a.housekeeping else set(online) - {self.cpu}
        if self.cpu in self.hk or not self.hk or not self.hk <= set(online):
            raise ToolError(f"housekeeping CPUs {format_cpulist(self.hk)} must be online "
                             f"and exclude the measured CPU {self.cpu}")
        aff = os.sched_getaffinity(0)
        if not ({self.cpu} | self.hk) <= aff:
            active = os.path.exists("/run/detach/isolate.state")
            raise ToolError(f"CPUs {format_cpulist({self.cpu} | self.hk)} are not all in this "
                             f"process's affinity ({format_cpulist(aff)})",
                             "a detach partition is active: 'detach isolate --undo' ends it"
                             if active else "run from a shell allowed on every CPU (taskset -p $$)")
        if os.geteuid() != 0 and any(c != "linux" for c in self.a.configs):
            raise ToolError("FIFO configurations need root (chrt -f 10)",
                             "run as root, or --config linux")

    def calibrate(self) -> None:
        """The FWQ work loop count, once, so that every cell does the same work."""
        with tempfile.NamedTemporaryFile(suffix=".json") as t:
            cmd = [paths.program("fwq"), "-c", str(self.cpu), "--samples",
                   "20", "--warmup", "5", "--quantum", str(self.a.quantum), "--quiet",
                   "--json", t.name]
            if self.a.loops:
                cmd += ["--loops", str(self.a.loops)]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode:
                raise ToolError(f"fwq calibration on CPU {self.cpu} failed: {r.stdout.strip()}")
            res = load_json(t.name)
        self.loops = res["params"]["loops"]
        self.tsc_hz = res["tsc_hz"]
        self.quantum_s = res["stats"]["min"] / self.tsc_hz
        self.version = res.get("version")
        self.cpu_model = res.get("cpu_model")

    def run(self) -> int:
        self.setup()
        state: JsonObj = {}
        try:
            state["rt_throttling"] = system.rt_throttling(self.restorer, self.a.rt_runtime)
            state["preemption"] = system.preemption(self.restorer, self.a.preempt)
            self.partition = system.Partition(self.detach, self.cpu, self.restorer,
                                              not self.a.no_isolate)
            if "detached" in self.a.configs:
                self.detach_ok, self.detach_why = system.detach_probe(self.detach, self.cpu)
                if not self.detach_ok:
                    self.log(f"detached: unavailable: {self.detach_why}")
            self.calibrate()
            state.update(measured_cpu=self.cpu, housekeeping_cpus=format_cpulist(self.hk),
                         partition=self.partition.why, detached=self.detach_why,
                         detached_available=self.detach_ok, fwq_loops=self.loops,
                         cmdline=read("/proc/cmdline"))
            self.state = state
            self.evaluate()
        except KeyboardInterrupt:
            self.interrupted = True
            self.log("interrupted: stopping loads, restoring state, keeping results so far")
        finally:
            restored = self.restorer.restore()
            if restored:
                state["restored"] = restored
            self.state = state
        return self.finish()

    def evaluate(self) -> None:
        order = self.plan()
        total_s = sum(self.cell_seconds(p) for _, _, p, c, _ in order
                      if not (c == "detached" and not self.detach_ok))
        done_s = 0.0
        tmpdir = tempfile.mkdtemp(prefix="detach-bench-cells-")
        i = 0
        try:
            for name in self.a.loads:
                load = L.make_load(name, self.hk, self.a.quick, self.root)
                try:
                    self.log(f"load {load.describe()}")
                    load.prepare(self.log)
                    load.start()
                    time.sleep(self.a.settle)
                    first = load.check()
                    if not first["ok"]:
                        raise ToolError(f"{name} load did not start cleanly: {first}")
                    for (ln, rep, prog, cfg, off) in [o for o in order if o[0] == name]:
                        i += 1
                        # scale the nominal rest by how long cells really took so far
                        spent = time.monotonic() - self.t0
                        left = (total_s - done_s) * (spent / done_s if done_s > 0 else 1.0)
                        self.progress(i, len(order), f"{ln} {prog} {cfg} rep {rep}", left)
                        cell = self.run_cell(load, rep, prog, cfg, tmpdir, off)
                        self.cells.append(cell)
                        if cell["status"] != "unavailable":
                            done_s += self.cell_seconds(prog)
                        if cell["status"] == "failed":
                            self.log(f"{ln} {prog} {cfg} rep {rep}: failed: {cell['reason']}")
                    # one more try for cells that failed (e.g. another process
                    # changed the partition meanwhile), still under this load
                    for k, old in enumerate(self.cells):
                        if old["load"] == name and old["status"] == "failed":
                            self.log(f"retrying {name} {old['program']} {old['config']} rep {old['rep']}")
                            cell = self.run_cell(load, old["rep"], old["program"], old["config"], tmpdir,
                                                 old.get("trace_off", False))
                            cell["retry_of"] = old.get("reason")
                            self.cells[k] = cell
                finally:
                    self.partition.leave()
                    leftover = load.stop()
                    achieved = load.achieved()
                    achieved["leftover_processes"] = [f"{p} {c}" for p, c in leftover]
                    achieved["description"] = load.describe()
                    self.loads_out[name] = achieved
                    if leftover:
                        warn(f"{name} load left processes behind: {leftover}")
        finally:
            if self.tty:
                sys.stderr.write("\n")
            shutil.rmtree(tmpdir, ignore_errors=True)

    def finish(self) -> int:
        rc = 130 if self.interrupted else 0
        doc = {
            "format": JSON_FORMAT,
            "cmdline": self.a.cmdline, "version": self.version,
            "start_time": self.start_time, "end_time": iso_now(),
            "kernel": os.uname().release, "machine": os.uname().machine,
            "cpu_model": self.cpu_model, "tsc_hz": self.tsc_hz or 0,
            "return_code": rc,
            "program": "detach-bench", "complete": not self.interrupted,
            "options": {"loads": self.a.loads, "configs": self.a.configs,
                        "programs": self.a.programs, "repeat": self.a.repeat,
                        "samples_fwq": self.a.samples_fwq, "samples_ctlloop": self.a.samples_ctl,
                        "quick": self.a.quick, "trace": not self.a.no_trace,
                        "trace_overhead": self.a.trace_overhead,
                        "mpi_transport": self.a.mpi_transport},
            "system": self.state,
            "loads": self.loads_out,
            "cells": self.cells,
        }
        if not self.cells and not self.interrupted:
            return rc
        os.makedirs(self.a.out, exist_ok=True)
        if not self.interrupted and not self.a.no_scale:
            doc["scale"] = scaling.predict(doc, self.a.out, self.a.scale_ranks,
                                           self.a.scale_sim_ranks, self.log,
                                           20 if self.a.quick else None)   # --quick: seconds
        if M.PROGRAM in self.a.programs:
            doc["fwq_mpi"] = M.iteration_report(doc, report.cells_for)
        path = os.path.join(self.a.out, "results.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        report.write_all(doc, self.a.out, with_plots=not self.a.no_plots)
        self.log(f"results: {path}")
        self.log(f"summary: {os.path.join(self.a.out, 'summary.md')}")
        if not self.a.no_print:
            with open(os.path.join(self.a.out, "summary.md")) as f:
                print(f.read())
        return rc
