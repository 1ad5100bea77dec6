"""Running the latency configurations: the partition, one run of one
configuration (its command line, where it starts, its limits), the system
state recorded beside."""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import signal
import subprocess
import sys
import time

from .. import paths
from ..cpus import parse_cpulist
from ..errors import ToolError
from ..files import JsonObj, read_text
from ..partition import PARTITION, PARTITION_HK, cpuset_root
from ..procs import matching
from .parse import detached_evidence, parse_cyclictest, parse_oslat

DETACH = paths.detach_bin()
RT_RUNTIME = "/proc/sys/kernel/sched_rt_runtime_us"
PREEMPT = "/sys/kernel/debug/sched/preempt"
INTERVAL_US = 1000               # cyclictest -i: the paper's 1 ms period
# cyclictest 2.x indexes its histogram by the latency in the unit it reports:
# with -N that is ns (docs/latency.md), and -h is clamped to 1,000,000 bins.
# So -h 1000000 with -N is 1-ns bins up to 1 ms; "max" is exact beyond that.
CYC_HIST = 1000000
OSLAT_BUCKETS = 1024             # oslat -b: 1-us buckets up to 1 ms (the maximum)

CONFIGS = ("plain", "detached", "floor", "oslat-det")

# Every run's record by (configuration, round).
Runs = dict[tuple[str, int], JsonObj]


class Abort(Exception):
    """SIGINT or SIGTERM: unwind through every finally."""


def say(msg: str) -> None:
    print(f"latency: {msg}", file=sys.stderr, flush=True)


def read(path: str, default: str = "unreadable") -> str:
    """A file's text, stripped, or default ("unreadable")."""
    return read_text(path, default)


def other_benchmarks() -> list[str]:
    """The pids of running benchmarks: `detach bench` runs `python -m
    detach_tools bench`, detach-bench is the console script."""
    return [str(p) for p in matching("detach_tools bench|detach-bench")]


def wait_for_quiet(max_s: int, poll_s: int = 30) -> None:
    """Another engineer's `make bench` uses the same CPU and partition."""
    t0 = time.monotonic()
    while other_benchmarks():
        if time.monotonic() - t0 > max_s:
            raise ToolError(f"detach bench is still running after {max_s // 60} minutes",
                            "wait for it to finish, or pass --no-wait at your own risk")
        say(f"detach bench is running (pid {' '.join(other_benchmarks())}); "
            f"waiting, polling every {poll_s} s")
        time.sleep(poll_s)


class Partition:
    """The `detach isolate` partition: used if it exists (and left), made and
    undone (on every exit path) if not."""

    def __init__(self, cpu: int) -> None:
        self.cpu, self.made = cpu, False
        self.kind, self.mnt = cpuset_root()[0], cpuset_root()[1]
        if self.kind != "v1":
            raise ToolError(f"the cpuset controller is {'on cgroup v2' if self.kind else 'not mounted'}; "
                "this script knows the cgroup v1 layout only (src/lib/partition.h)",
                "on v2, where the process is placed decides which CPUs its threads may pin to: "
                "see docs/latency.md")
        self.dir = f"{self.mnt}/{PARTITION}"

    def exists(self) -> bool:
        return os.path.isdir(self.dir)

    def cpus(self) -> set[int]:
        return parse_cpulist(read(f"{self.dir}/cpuset.cpus", ""))

    def enter(self) -> None:
        if self.exists():
            if self.cpu not in self.cpus():
                raise ToolError(f"a detach partition exists on CPUs {read(self.dir + '/cpuset.cpus')}, "
                    f"not on CPU {self.cpu}", "use --cpu with one of those, or 'detach isolate --undo'")
            say(f"using the existing partition {self.dir} (left as it is)")
            return
        say(f"detach isolate -c {self.cpu}")
        self.made = True          # before running it: a failure midway is undone too
        r = subprocess.run([DETACH, "isolate", "-c", str(self.cpu)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode:
            raise ToolError(f"detach isolate -c {self.cpu} failed: {r.stdout.strip()}",
                            "'detach isolate --undo' clears a half-made partition")

    def leave(self) -> None:
        if self.made:
            self.made = False
            say("detach isolate --undo")
            # in its own session, so that a second Ctrl-C cannot cut it short
            r = subprocess.run([DETACH, "isolate", "--undo"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
            if r.returncode:
                print(r.stdout, file=sys.stderr)
                say("WARNING: 'detach isolate --undo' failed; run it again by hand")

    def join(self, where: str) -> str:
        """Shell command that moves the shell ($$) into a cpuset before it
        execs the measurement: 'partition' (only the isolated CPUs),
        'hk' (detach-hk: the housekeeping CPUs) or 'root' (every CPU)."""
        path = {"partition": f"{self.dir}/tasks", "hk": f"{self.mnt}/{PARTITION_HK}/tasks",
                "root": f"{self.mnt}/tasks"}[where]
        return f"echo $$ > {path}"


def loc_interrupts(cpu: int) -> int | None:
    """Local timer interrupts on cpu so far (/proc/interrupts LOC)."""
    for line in read("/proc/interrupts", "").splitlines():
        f = line.split()
        if f and f[0] == "LOC:" and len(f) > cpu + 1:
            return int(f[cpu + 1])
    return None


class Runner:
    def __init__(self, a: argparse.Namespace, part: Partition, hk: int | None) -> None:
        self.a, self.part, self.hk = a, part, hk
        self.child: subprocess.Popen[bytes] | None = None

    def command(self, cfg: str, base: str) -> list[str]:
        cpu, a = str(self.a.cpu), self.a
        if cfg in ("plain", "detached"):
            prog = ["cyclictest", "-m", "-p", "90", "-a", cpu, "-t", "1", "-i", str(INTERVAL_US),
                    "-l", str(a.loops), "-q", "-N", "-h", str(CYC_HIST),
                    "--histfile=/dev/null", f"--json={base}.json"]
        else:
            prog = ["oslat", "-q", "-c", cpu, "-C", str(self.hk), "-D", str(a.seconds),
                    "-f", "90", "-b", str(OSLAT_BUCKETS), f"--json={base}.json"]
        if cfg in ("detached", "oslat-det"):
            # cyclictest's timer thread pins itself (-a): `pinned`.  oslat's
            # workers pin themselves too, but its pre-heat worker would take
            # the CPU and keep it after exiting (docs/latency.md): order:2 is
            # its test worker.
            rule = "pinned" if cfg == "detached" else "order:2"
            prog = [DETACH, "run", "-c", cpu, "--select", rule,
                    "--stats", f"{base}.stats.json", "--"] + prog
        # Where each starts (docs/latency.md): plain cyclictest in the
        # partition, main thread and all (-a pins it there).  Detached
        # cyclictest from the housekeeping cpuset, where a shell is after
        # `detach isolate`: cyclictest's main thread then cannot pin itself
        # next to the detached thread (it warns and stays on housekeeping).
        # oslat pins its main thread to each CPU of -c first, then to -C: it
        # needs a cpuset with both, the root one, from which a thread may
        # still pin itself to the isolated CPU (docs/isolate.md).
        where = {"plain": "partition", "detached": "hk"}.get(cfg, "root")
        q = " ".join(shlex.quote(x) for x in prog)
        return ["sh", "-c", f"{self.part.join(where)} && exec {q}"]

    def run(self, cfg: str, rnd: int) -> JsonObj:
        base = os.path.join(self.a.out, f"{cfg}.r{rnd}")
        cmd = self.command(cfg, base)
        limit = 60 + 3 * (self.a.loops * INTERVAL_US / 1e6 if cfg in ("plain", "detached")
                          else self.a.seconds + 2)
        rec: JsonObj = {"config": cfg, "round": rnd, "cmd": cmd[2], "raw": os.path.basename(base) + ".json"}
        if not self.part.exists():
            rec["error"] = "the partition disappeared (someone ran 'detach isolate --undo')"
            return rec
        loc0, t0 = loc_interrupts(self.a.cpu), time.monotonic()
        with open(base + ".log", "w") as log:
            self.child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True)
            try:
                rc = self.child.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                self.kill()
                rec["error"] = f"timed out after {limit:.0f} s"
                return rec
            finally:
                self.child = None
        loc1 = loc_interrupts(self.a.cpu)
        rec.update(rc=rc, seconds=round(time.monotonic() - t0, 2),
                   loc_interrupts=(loc1 - loc0) if loc0 is not None and loc1 is not None else None)
        others = other_benchmarks()
        if others:
            rec["contaminated"] = f"detach bench ran meanwhile (pid {' '.join(others)})"
        if rc != 0:
            rec["error"] = f"exit status {rc}: {read(base + '.log')[-400:]}"
            return rec
        try:
            if cfg in ("plain", "detached"):
                rec["stats"] = parse_cyclictest(base + ".json", self.a.loops)
            else:
                rec["stats"] = parse_oslat(base + ".json")
        except (OSError, ValueError, KeyError) as e:
            rec["error"] = f"cannot read {base}.json: {e!r}"
            return rec
        if "error" in rec["stats"]:
            rec["error"] = rec["stats"]["error"]
        if cfg in ("detached", "oslat-det"):
            ok, why, st = detached_evidence(base + ".stats.json", self.a.cpu,
                                            "cyclictest" if cfg == "detached" else "oslat",
                                            self.a.loops)
            rec["detached"], rec["evidence"] = ok, why
            rec["mode"] = st.get("mode") if st else None
            if not ok:
                say(f"NOT DETACHED: {cfg} round {rnd}: {why}")
        return rec

    def kill(self) -> None:
        p = self.child
        if p and p.poll() is None:
            for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 3)):
                try:
                    os.killpg(p.pid, sig)
                    p.wait(timeout=wait)
                    return
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass


def system_info(a: argparse.Namespace, phase: str) -> JsonObj:
    info: JsonObj = {"sched_rt_runtime_us": read(RT_RUNTIME), "sched_rt_period_us":
            read("/proc/sys/kernel/sched_rt_period_us")}
    if phase == "before":
        cfg: dict[str, str] = {}
        try:
            out = subprocess.run(["zcat", "/proc/config.gz"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True).stdout
            cfg = {k: v for k, _, v in (l.partition("=") for l in out.splitlines()
                                        if l.startswith("CONFIG_PREEMPT") or l.startswith("CONFIG_HZ")
                                        or l.startswith("CONFIG_NO_HZ"))}
        except OSError:
            pass
        cpu_model = next((l.split(":", 1)[1].strip() for l in read("/proc/cpuinfo", "").splitlines()
                          if l.startswith("model name")), "?")
        ver = subprocess.run(["cyclictest", "--help"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True).stdout.splitlines()[:1]
        info.update(kernel=platform.release(), uname_v=platform.version(),
                    preempt_debugfs=read(PREEMPT), preempt_config=cfg,
                    cmdline_preempt=[w for w in read("/proc/cmdline", "").split()
                                     if w.startswith(("preempt=", "nohz", "isolcpus"))],
                    cpu_model=cpu_model, ncpus=os.cpu_count(),
                    rt_tests=ver[0] if ver else "?")
    return info
