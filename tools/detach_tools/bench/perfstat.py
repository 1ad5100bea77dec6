"""perf stat over a stretch of a benchmark, per CPU: the kernel's hardware
counters of cache and TLB misses, where this machine has them (evlat checks
its flooding with it, as the L4RTL paper does in its section 4.1;
docs/rtl.md cites it).

A VM without a virtual PMU has none: perf then answers `<not supported>`
and the check says so (`why`) instead of inventing a figure."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time

from ..files import JsonObj

EVENTS = ("LLC-load-misses", "LLC-store-misses", "dTLB-load-misses", "cache-misses")


def parse(text: str, per_cpu: bool) -> dict[int | None, dict[str, int]]:
    """perf stat -x, output: {cpu or None: {event: count}}; unsupported
    events are left out."""
    out: dict[int | None, dict[str, int]] = {}
    for line in text.splitlines():
        f = line.split(",")
        if not line or line.startswith("#") or len(f) < 4:
            continue
        cpu: int | None = None
        if per_cpu:
            cpu, f = int(f[0][3:]), f[1:]
        try:
            count = int(f[0])
        except ValueError:             # <not supported>, <not counted>
            continue
        out.setdefault(cpu, {})[f[2]] = count
    return out


class PerfStat:
    """Counts EVENTS on the given CPUs between start() and stop().
    available is False with why when this machine cannot."""

    def __init__(self, cpus: set[int]) -> None:
        self.cpus = ",".join(str(c) for c in sorted(cpus))
        self.events: list[str] = []
        self.why: str | None = None
        self.proc: subprocess.Popen[str] | None = None
        self.out = ""
        self.t0 = 0.0
        if not shutil.which("perf"):
            self.why = "perf is not installed (Debian's linux-perf: make deps)"
            return
        r = subprocess.run(["perf", "stat", "-x,", "-e", ",".join(EVENTS), "true"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        got = parse(r.stderr, False).get(None, {})
        self.events = [e for e in EVENTS if e in got]
        if not self.events:
            pmu = os.path.isdir("/sys/bus/event_source/devices/cpu")
            self.why = (f"perf stat counts none of {', '.join(EVENTS)} (<not supported>): "
                        + ("the CPU's PMU is there but has not these events" if pmu else
                           "this kernel has no hardware PMU (no `cpu` under /sys/bus/event_source/devices; "
                           "a VM without a virtual PMU), so the flooding is not checked"))
        elif r.returncode:
            self.events, self.why = [], f"perf stat failed: {r.stderr.strip()[-200:]}"

    @property
    def available(self) -> bool:
        return bool(self.events)

    def start(self) -> None:
        if not self.available:
            return
        fd, self.out = tempfile.mkstemp(prefix="detach-perf-")
        os.close(fd)
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(["perf", "stat", "-x,", "-A", "-a", "-C", self.cpus,
                                      "-e", ",".join(self.events), "-o", self.out],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def stop(self) -> JsonObj:
        """{"seconds", "cpus": {cpu: {event: count}}} or {"why"}."""
        if not self.proc:
            return {"why": self.why}
        secs = time.monotonic() - self.t0
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate()
        self.proc = None
        with open(self.out) as f:
            counts = parse(f.read(), True)
        os.unlink(self.out)
        if not counts:
            return {"why": f"perf stat -a -C {self.cpus} counted nothing: {err.strip()[-200:]}"}
        return {"seconds": round(secs, 3), "cpus": {str(c): v for c, v in counts.items()}}
