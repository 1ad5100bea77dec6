"""CPU lists as the kernel writes them ("0-3,8"): the one parser of the
Python side (tools and tests; the C side's is src/lib/cpulist.c)."""
from __future__ import annotations

import os
from collections.abc import Iterable

from .errors import ToolError


def parse_cpulist(s: str) -> set[int]:
    """The CPUs of a list; ValueError when it is malformed."""
    cpus: set[int] = set()
    s = s.strip()
    if not s:
        return cpus
    for part in s.split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            a, b = int(lo), int(hi)
            if b < a:
                raise ValueError(f"bad CPU range '{part}'")
            cpus.update(range(a, b + 1))
        else:
            cpus.add(int(part))
    return cpus


def format_cpulist(cpu_set: Iterable[int]) -> str:
    """The shortest list of cpu_set: ranges where CPUs follow each other."""
    cpus = sorted(cpu_set)
    out: list[str] = []
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


def need_two(tool: str) -> None:
    """ToolError unless this machine has a CPU to measure and another."""
    if (os.cpu_count() or 1) < 2:
        raise ToolError(f"{tool} needs 2 CPUs", "run it on a machine with two CPUs or more")


def online_cpus() -> set[int]:
    with open("/sys/devices/system/cpu/online") as f:
        return parse_cpulist(f.read())
