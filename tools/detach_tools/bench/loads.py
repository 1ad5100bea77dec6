"""Background loads, confined to the housekeeping CPUs and checked while
they run: every process of a load must be allowed only housekeeping CPUs
(/proc/PID/status Cpus_allowed_list), and the load must make progress
(compile jobs for build, bytes written and received for io).

Each load's processes are started in sessions of their own (so a Ctrl-C at
the terminal reaches the orchestration, which stops them in order) and are
found again by process group."""
from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..cpus import format_cpulist
from ..errors import ToolError
from ..files import JsonObj
from ..procs import cpus_allowed, io_chars, procs_in_groups, tcp_listening

# A load's progress: monotonic counters of work done, e.g. {"jobs": 123}.
Progress = dict[str, int]

CACHE = os.environ.get("DETACH_BENCH_CACHE", "/var/cache/detach-bench")
LOADS = ("idle", "build", "io")


class Load:
    name = "?"

    def __init__(self, hk: Iterable[int], quick: bool, root: str) -> None:
        self.hk = set(hk)
        self.quick = quick
        self.root = root
        self.procs: list[subprocess.Popen[Any]] = []   # each a session leader
        self.commands: list[list[str]] = []             # what each of them runs
        self.samples: list[tuple[float, Progress]] = []  # (time, progress) at each check
        self.violations: list[JsonObj] = []   # processes found outside the housekeeping CPUs
        self.checks = 0
        self.tmp: str | None = None
        self.started: float | None = None

    # -- lifecycle ---------------------------------------------------------
    def prepare(self, log: Callable[[str], None]) -> None:
        """One-time, possibly slow setup (cached across runs)."""

    def start(self) -> None:
        self.started = time.monotonic()

    def spawn(self, cmd: list[str], **kw: Any) -> subprocess.Popen[Any]:
        hk = format_cpulist(self.hk)
        p = subprocess.Popen(["taskset", "-c", hk] + cmd, start_new_session=True,
                             stdin=subprocess.DEVNULL, **kw)
        # taskset confines it only once it runs: until then the child has
        # this process's CPUs, and a check right after the start would find
        # it outside.  Confined here, it is so before spawn returns.
        try:
            os.sched_setaffinity(p.pid, self.hk)
        except ProcessLookupError:
            pass
        self.procs.append(p)
        self.commands.append(cmd)
        return p

    def pgids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def signal_all(self, sig: signal.Signals) -> None:
        """sig to every process of the load, in its groups or not."""
        members = procs_in_groups(self.pgids())
        for p in self.procs:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        for pid, _ in members:     # those that left the group
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def pause(self) -> None:
        """Holds every process where it is (SIGSTOP), for a benchmark that
        interleaves loads (evlat); resume() lets them go on."""
        self.signal_all(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal_all(signal.SIGCONT)

    def stop(self) -> list[tuple[int, str]]:
        """Stops every process of the load; returns the leftovers (should be [])."""
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            self.signal_all(sig)
            self.signal_all(signal.SIGCONT)   # a paused process takes SIGTERM when it runs
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                for p in self.procs:
                    p.poll()
                if not procs_in_groups(self.pgids()):
                    break
                time.sleep(0.05)
            if not procs_in_groups(self.pgids()):
                break
        for p in self.procs:
            try:
                p.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        left = procs_in_groups(self.pgids())
        self.cleanup()
        return left

    def cleanup(self) -> None:
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    # -- checking ------------------------------------------------------------
    def progress(self) -> Progress:
        """Monotonic counters of work done, e.g. {"jobs": 123}."""
        return {}

    def check(self) -> JsonObj:
        """Confinement and liveness now; returns {ok, procs, outside, progress}."""
        self.checks += 1
        procs = procs_in_groups(self.pgids())
        outside = []
        for pid, comm in procs:
            allowed = cpus_allowed(pid)
            if allowed is not None and not allowed <= self.hk:
                outside.append({"pid": pid, "comm": comm,
                                "cpus_allowed": format_cpulist(allowed)})
        self.violations.extend(outside)
        prog = self.progress()
        self.samples.append((time.monotonic(), prog))
        dead = [" ".join(c) for p, c in zip(self.procs, self.commands) if p.poll() is not None]
        return {"procs": len(procs), "outside": outside, "progress": prog, "dead": dead,
                "ok": not outside and not dead}

    def advanced(self, before: Progress, after: Progress) -> bool:
        """True when every counter grew between two progress dicts."""
        return all(after.get(k, 0) > v for k, v in before.items())

    def achieved(self) -> JsonObj:
        """What the load did, from the first to the last check."""
        out: JsonObj = {"checks": self.checks, "violations": self.violations[:20],
               "confined": not self.violations,
               "housekeeping_cpus": format_cpulist(self.hk)}
        if len(self.samples) >= 2:
            (t0, p0), (t1, p1) = self.samples[0], self.samples[-1]
            out["seconds"] = round(t1 - t0, 1)
            out.update(self.rates(p0, p1, t1 - t0))
        return out

    def rates(self, p0: Progress, p1: Progress, secs: float) -> JsonObj:
        return {}

    def describe(self) -> str:
        return self.name


class Idle(Load):
    name = "idle"

    def describe(self) -> str:
        return "idle: nothing started"


class Build(Load):
    """Compile a real C tree in a loop: the Linux kernel (Debian's
    linux-source, defconfig, `make clean` between rounds), or with quick
    this repository's own sources (so that tests never download a kernel)."""
    name = "build"
    JOB = re.compile(rb"^\s+(CC|AS|HOSTCC|CC \[M\]|CXX)\s", re.M)

    def __init__(self, hk: Iterable[int], quick: bool, root: str) -> None:
        super().__init__(hk, quick, root)
        self.tree = ""
        self.log = ""
        self._off = 0
        self._jobs = 0
        self.source = ("this repository's sources (quick)" if quick
                       else "Debian linux-source, defconfig (cached in " + CACHE + ")")

    def jobs_n(self) -> int:
        return max(2, 2 * len(self.hk))

    def prepare(self, log: Callable[[str], None]) -> None:
        if self.quick:
            self.tmp = tempfile.mkdtemp(prefix="detach-bench-build-")
            self.tree = os.path.join(self.tmp, "tree")
            for d in ("src/lib", "src/cli", "bench", "include"):
                src = os.path.join(self.root, d)
                if os.path.isdir(src):
                    shutil.copytree(src, os.path.join(self.tree, d))
            with open(os.path.join(self.tree, "Makefile"), "w") as f:
                f.write(QUICK_MAKEFILE)
            self.source = "this repository's src/lib, src/cli, bench (quick)"
            return
        tree = os.path.join(CACHE, "linux")
        ready = os.path.join(tree, ".detach-ready")
        if not os.path.exists(ready):
            self.prepare_kernel(tree, log)
        self.tree = tree
        with open(ready) as f:
            self.source = f.read().strip()
        self.tmp = tempfile.mkdtemp(prefix="detach-bench-build-")

    def prepare_kernel(self, tree: str, log: Callable[[str], None]) -> None:
        tars = sorted(glob.glob("/usr/src/linux-source-*.tar.xz"))
        tools = ("flex", "bison", "bc", "make", "gcc")
        need_pkgs = not tars or not all(shutil.which(t) for t in tools) or \
            not os.path.exists("/usr/include/libelf.h") or \
            not os.path.exists("/usr/include/openssl/ssl.h")
        if need_pkgs:
            if os.geteuid() != 0:
                raise ToolError("the build load needs Debian's linux-source and kernel build tools",
                                 "run as root, or: apt-get install linux-source flex bison "
                                 "libelf-dev libssl-dev bc; or use --load idle,io")
            log("build load: apt-get install linux-source and kernel build tools (once)")
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                                "linux-source", "flex", "bison", "libelf-dev", "libssl-dev",
                                "bc", "xz-utils"], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
            if r.returncode:
                raise ToolError(f"apt-get install linux-source failed: {r.stderr.strip()[-300:]}",
                                 "check network access to the Debian mirror, or use --load idle,io")
            tars = sorted(glob.glob("/usr/src/linux-source-*.tar.xz"))
            if not tars:
                raise ToolError("linux-source installed no /usr/src/linux-source-*.tar.xz")
        tar = tars[-1]
        log(f"build load: extracting {tar} into {CACHE} (once)")
        os.makedirs(CACHE, exist_ok=True)
        shutil.rmtree(tree, ignore_errors=True)
        staging = tempfile.mkdtemp(dir=CACHE)
        r = subprocess.run(["tar", "-xf", tar, "-C", staging], stderr=subprocess.PIPE, text=True)
        if r.returncode:
            shutil.rmtree(staging, ignore_errors=True)
            raise ToolError(f"extracting {tar} failed: {r.stderr.strip()[-300:]}")
        top = os.listdir(staging)
        os.rename(os.path.join(staging, top[0]), tree)
        shutil.rmtree(staging, ignore_errors=True)
        log("build load: make defconfig (once)")
        r = subprocess.run(["make", "-s", "defconfig"], cwd=tree, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode:
            raise ToolError(f"make defconfig failed: {r.stderr.strip()[-300:]}")
        with open(os.path.join(tree, ".detach-ready"), "w") as f:
            f.write(f"Linux {os.path.basename(tar)[len('linux-source-'):-len('.tar.xz')]} "
                    f"from {tar}, make defconfig\n")

    def start(self) -> None:
        super().start()
        assert self.tmp
        self.log = os.path.join(self.tmp, "build.log")
        n = self.jobs_n()
        loop = (f"trap 'exit 0' TERM; while :; do make -j{n} all; make clean >/dev/null 2>&1; "
                f"echo DETACH-ROUND; done")
        with open(self.log, "wb") as out:
            self.spawn(["bash", "-c", loop], cwd=self.tree, stdout=out, stderr=subprocess.STDOUT)

    def progress(self) -> Progress:
        try:
            with open(self.log, "rb") as f:
                f.seek(self._off)
                data = f.read()
        except OSError:
            return {"jobs": self._jobs}
        # count only complete lines
        cut = data.rfind(b"\n") + 1
        self._off += cut
        self._jobs += len(self.JOB.findall(data[:cut]))
        return {"jobs": self._jobs}

    def rates(self, p0: Progress, p1: Progress, secs: float) -> JsonObj:
        return {"compile_jobs": p1["jobs"] - p0["jobs"],
                "compile_jobs_per_min": round((p1["jobs"] - p0["jobs"]) * 60 / secs, 1) if secs else None,
                "make_jobs": self.jobs_n(), "source": self.source}

    def describe(self) -> str:
        return f"build: make -j{self.jobs_n()} of {self.source}, make clean between rounds"


QUICK_MAKEFILE = r"""# generated by detach bench: compiles a real C tree, quickly
SRCS := $(wildcard src/lib/*.c src/cli/*.c bench/*.c)
OBJS := $(SRCS:%.c=obj/%.o)
all: $(OBJS)
obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@gcc -O2 -g -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc -DDETACH_VERSION='"bench"' -c -o $@ $<
clean:
	@rm -rf obj
.PHONY: all clean
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Io(Load):
    """fio writing to disk with fsync, plus iperf3 over loopback (127.0.0.1)."""
    name = "io"

    def __init__(self, hk: Iterable[int], quick: bool, root: str) -> None:
        super().__init__(hk, quick, root)
        self.port = 0
        self.fio: subprocess.Popen[Any] | None = None
        self.server: subprocess.Popen[Any] | None = None
        self.client: subprocess.Popen[Any] | None = None

    def prepare(self, log: Callable[[str], None]) -> None:
        for tool in ("fio", "iperf3", "taskset"):
            if not shutil.which(tool):
                raise ToolError(f"the io load needs {tool}", "run 'make deps'")
        # on disk, not tmpfs: /var/tmp
        self.tmp = tempfile.mkdtemp(prefix="detach-bench-io-", dir="/var/tmp")
        self.port = free_port()

    def start(self) -> None:
        super().start()
        assert self.tmp
        size = "32M" if self.quick else "256M"
        self.fio = self.spawn(
            ["fio", "--name=detach-io", f"--directory={self.tmp}", "--rw=write", "--bs=64k",
             f"--size={size}", "--fsync=16", "--ioengine=psync", "--time_based",
             "--runtime=86400", "--output-format=terse", "--output=" + os.path.join(self.tmp, "fio.out")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.server = self.spawn(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(self.port)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # the client dies if it comes before the server listens: on a loaded
        # housekeeping CPU that takes longer than any fixed pause
        deadline = time.monotonic() + 10
        while not tcp_listening(self.port) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.client = self.spawn(["iperf3", "-c", "127.0.0.1", "-p", str(self.port), "-t", "0",
                                  "-i", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def progress(self) -> Progress:
        assert self.fio and self.server
        disk = sum(io_chars(pid)[1] for pid, _ in procs_in_groups([self.fio.pid]))
        net = io_chars(self.server.pid)[0]
        # fio's workers exit and restart rarely; keep counters monotonic
        last = self.samples[-1][1] if self.samples else {"disk_bytes": 0, "net_bytes": 0}
        return {"disk_bytes": max(disk, last["disk_bytes"]), "net_bytes": max(net, last["net_bytes"])}

    def rates(self, p0: Progress, p1: Progress, secs: float) -> JsonObj:
        if not secs:
            return {}
        return {"disk_MBps": round((p1["disk_bytes"] - p0["disk_bytes"]) / secs / 1e6, 1),
                "net_Mbitps": round((p1["net_bytes"] - p0["net_bytes"]) * 8 / secs / 1e6, 1),
                "disk": "fio sequential write 64k, fsync every 16 writes, under /var/tmp",
                "net": "iperf3 TCP over 127.0.0.1"}

    def describe(self) -> str:
        return "io: fio write+fsync to disk, iperf3 over 127.0.0.1"


def make_load(name: str, hk: Iterable[int], quick: bool, root: str) -> Load:
    load: type[Load] = {"idle": Idle, "build": Build, "io": Io}[name]
    return load(hk, quick, root)
