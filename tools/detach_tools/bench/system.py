"""System state the benchmark records, and the few settings it changes
(each saved first and restored on every exit path, Ctrl-C included)."""
from __future__ import annotations

import gzip
import os
import platform
import subprocess
import tempfile
from collections.abc import Callable

from .. import runstats
from ..errors import warn
from ..files import JsonObj, read_text as read
from ..partition import PARTITION, cpuset_root

RT_RUNTIME = "/proc/sys/kernel/sched_rt_runtime_us"
RT_PERIOD = "/proc/sys/kernel/sched_rt_period_us"
DEBUGFS = "/sys/kernel/debug"
PREEMPT = DEBUGFS + "/sched/preempt"


class Restorer:
    """A stack of undo actions, run in reverse order exactly once."""

    def __init__(self) -> None:
        self.stack: list[tuple[str, Callable[[], object]]] = []

    def push(self, what: str, fn: Callable[[], object]) -> None:
        self.stack.append((what, fn))

    def restore(self) -> list[str]:
        done = []
        while self.stack:
            what, fn = self.stack.pop()
            try:
                fn()
                done.append(what)
            except Exception as e:  # keep restoring the rest
                warn(f"could not restore {what}: {e}")
        return done


def write(path: str, value: object) -> None:
    with open(path, "w") as f:
        f.write(str(value))


def kernel_config() -> dict[str, str]:
    """The running kernel's config as a dict, from /proc/config.gz or /boot."""
    text = None
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            text = f.read()
    except OSError:
        text = read(f"/boot/config-{platform.release()}")
    cfg = {}
    for line in (text or "").splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            k, v = line.split("=", 1)
            cfg[k] = v
    return cfg


def preemption(restorer: Restorer, want: str) -> JsonObj:
    """Records the preemption model; with PREEMPT_DYNAMIC and want != 'keep'
    switches it for the run (debugfs sched/preempt) and restores it after."""
    cfg = kernel_config()
    built = [m for m in ("PREEMPT_NONE", "PREEMPT_VOLUNTARY", "PREEMPT", "PREEMPT_LAZY",
                         "PREEMPT_RT") if cfg.get("CONFIG_" + m) == "y"]
    out: JsonObj = {"config": built, "dynamic": cfg.get("CONFIG_PREEMPT_DYNAMIC") == "y",
           "uname_v": platform.version(), "cmdline_preempt": None}
    for arg in read("/proc/cmdline", "").split():
        if arg.startswith("preempt="):
            out["cmdline_preempt"] = arg.split("=", 1)[1]
    if not os.path.exists(PREEMPT) and os.geteuid() == 0 and os.path.isdir(DEBUGFS):
        r = subprocess.run(["mount", "-t", "debugfs", "debugfs", DEBUGFS],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode == 0:
            restorer.push("debugfs mount", lambda: subprocess.run(
                ["umount", DEBUGFS], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        with open(PREEMPT) as f:
            line = f.read().strip()
    except OSError as e:
        # e.g. EPERM under kernel lockdown: neither readable nor settable.
        default = {"PREEMPT_NONE": "none", "PREEMPT_VOLUNTARY": "voluntary",
                   "PREEMPT": "full", "PREEMPT_LAZY": "lazy", "PREEMPT_RT": "rt"}
        base = out["cmdline_preempt"] or (default.get(built[0]) if len(built) == 1 else None)
        out["ran_with"] = f"{base} (boot default, not verifiable)" if base else "unknown"
        out["note"] = (f"{PREEMPT}: {e.strerror}: the model could not be read or changed "
                       f"at run time; a boot with preempt=full would match the paper")
        return out
    modes = line.split()
    cur = next((m.strip("()") for m in modes if m.startswith("(")), None)
    out["available"] = [m.strip("()") for m in modes]
    out["before"] = cur
    out["ran_with"] = cur
    if want != "keep" and want != cur:
        if want not in out["available"]:
            out["note"] = f"cannot switch to {want}: available {out['available']}"
        else:
            try:
                write(PREEMPT, want)
                restorer.push(f"preemption model {cur}", lambda: write(PREEMPT, cur))
                out["ran_with"] = want
                out["changed"] = True
            except OSError as e:
                out["note"] = f"cannot switch to {want}: {e}"
    return out


def rt_throttling(restorer: Restorer, want: str) -> JsonObj:
    """One RT-throttling setting for every configuration: by default none
    (-1, as tuned's realtime profile), so a FIFO measurement is never
    stopped for 50 ms every second; restored after."""
    before = read(RT_RUNTIME)
    out: JsonObj = {"sched_rt_runtime_us_before": before, "sched_rt_period_us": read(RT_PERIOD)}
    if want != "keep" and before is not None and before != str(want):
        try:
            write(RT_RUNTIME, want)
            was = before
            restorer.push(f"sched_rt_runtime_us={was}", lambda: write(RT_RUNTIME, was))
        except OSError as e:
            warn(f"cannot set {RT_RUNTIME} to {want}: {e}; keeping {before}")
    out["sched_rt_runtime_us"] = read(RT_RUNTIME)
    # Since 6.12 the fair deadline server also reserves time for SCHED_OTHER
    # tasks beside RT ones; record it (not changed).
    fs = {}
    base = DEBUGFS + "/sched/fair_server"
    if os.path.isdir(base):
        for cpu in sorted(os.listdir(base)):
            fs[cpu] = {k: read(f"{base}/{cpu}/{k}") for k in ("runtime", "period")}
    out["fair_server"] = fs or None
    return out


def detach_probe(detach: str, cpu: int) -> tuple[bool, str]:
    """(available, why): detached runs need a runtime that really detaches:
    `detach run -c CPU --stats F -- true` must exit 0 and F must show
    forwarded system calls."""
    if not os.access(detach, os.X_OK):
        return False, f"{detach} not built"
    fd, stats = tempfile.mkstemp(prefix="detach-probe-", suffix=".json")
    os.close(fd)
    os.unlink(stats)
    try:
        r = subprocess.run([detach, "run", "-c", str(cpu), "--stats", stats, "--", "true"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return False, f"'detach run -c {cpu} -- true' did not finish in 30 s"
    try:
        if r.returncode != 0:
            tail = r.stdout.strip().splitlines()[-1:] or [""]
            return False, f"'detach run -c {cpu} -- true' exited {r.returncode}: {tail[0]}"
        if not read(stats):
            return False, (f"'detach run -c {cpu} --stats F -- true' wrote no statistics: "
                           "the runtime does not detach yet")
        try:
            st = runstats.read(stats)
        except (OSError, ValueError):
            return False, "runtime statistics are not valid JSON"
        if not any("forwarded" in t for t in runstats.threads(st)):
            return False, "runtime statistics show no forwarded system calls"
        return True, "detach run works and forwards system calls"
    finally:
        if os.path.exists(stats):
            os.unlink(stats)




class Partition:
    """The isolated partition from `detach isolate`, when that verb
    exists; entered for the partition configurations only."""

    def __init__(self, detach: str, cpu: int, restorer: Restorer, use: bool) -> None:
        self.detach, self.cpu, self.restorer = detach, cpu, restorer
        self.active = False
        self.available = False
        self.why = "disabled with --no-isolate"
        if not use:
            return
        try:
            r = subprocess.run([detach, "isolate", "--help"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=10)
            self.available = r.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            self.available = False
        self.why = ("detach isolate" if self.available
                    else "'detach isolate' is not available: no partition")
        if self.available:
            restorer.push("detach isolate --undo", self.leave)

    def cgroup(self) -> tuple[str, str] | tuple[None, None]:
        """(kind, mount) of the cpuset hierarchy: ('v1', path) or ('v2', path)."""
        return cpuset_root()

    def preexec(self, where: str, cpus: set[int]) -> Callable[[], None] | None:
        """A Popen preexec_fn putting the child into the partition
        (where='partition') or the root cpuset (where='root', for `detach
        run`, whose proxies need the housekeeping CPUs beside the isolated
        one), then pinning it to cpus.  None when no partition is active."""
        if not self.active:
            return None
        kind, mnt = self.cgroup()
        if not os.path.isdir(f"{mnt}/{PARTITION}"):
            # someone undid the partition behind our back: make it again
            warn("the partition disappeared; running detach isolate again")
            self.active = False
            if not self.enter():
                return None

        def join() -> None:
            try:
                _join()
            except Exception as e:
                os.write(2, f"detach bench: cannot join the {where} cpuset: {e}\n".encode())
                raise

        def _join() -> None:
            pid = str(os.getpid())
            if kind == "v1":
                path = f"{mnt}/{PARTITION}/tasks" if where == "partition" else f"{mnt}/tasks"
                with open(path, "w") as f:
                    f.write(pid)
            elif kind == "v2":
                with open(f"{mnt}/cgroup.procs", "w") as f:
                    f.write(pid)
                if where == "partition":
                    with open(f"{mnt}/{PARTITION}/cgroup.threads", "w") as f:
                        f.write(pid)
            os.sched_setaffinity(0, cpus)
        return join

    def tasks_file(self) -> str:
        """Where a thread writes its tid to join the partition itself (its
        process in the root cpuset): v1 tasks, v2 cgroup.threads."""
        kind, mnt = self.cgroup()
        return f"{mnt}/{PARTITION}/" + ("tasks" if kind == "v1" else "cgroup.threads")

    def enter(self) -> bool:
        if not self.available or self.active:
            return self.active
        r = subprocess.run([self.detach, "isolate", "-c", str(self.cpu)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode:
            warn(f"detach isolate -c {self.cpu} failed ({r.stdout.strip()[-200:]}); "
                 "running without partition")
            self.available = False
            self.why = f"detach isolate -c {self.cpu} failed: {r.stdout.strip()[-200:]}"
            return False
        self.active = True
        return True

    def leave(self) -> None:
        if self.active:
            subprocess.run([self.detach, "isolate", "--undo"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            self.active = False
