"""Where `detach isolate` puts its partition (src/lib/partition.h and
partition.c): the cpuset hierarchy and the partition's name."""
from __future__ import annotations

from .files import read_text

PARTITION = "detach"          # src/lib/partition.h PARTITION_NAME
PARTITION_HK = "detach-hk"    # PARTITION_HK_NAME (cgroup v1 only)


def cpuset_root() -> tuple[str, str] | tuple[None, None]:
    """(kind, mount) of the cpuset hierarchy, as src/lib/partition.c finds it:
    ('v1', path), ('v2', path) or (None, None)."""
    v2 = None
    for line in read_text("/proc/mounts", "").splitlines():
        f = line.split()
        if len(f) > 3 and f[2] == "cgroup" and "cpuset" in f[3].split(","):
            return "v1", f[1]
        if len(f) > 2 and f[2] == "cgroup2":
            v2 = f[1]
    return ("v2", v2) if v2 else (None, None)
