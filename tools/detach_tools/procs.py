"""The processes and threads of this machine, through psutil: who belongs to
a load, what else is runnable on the measured CPU, whether a benchmark is
running.  psutil reads /proc; the one thing it has not, a thread's state and
last CPU, is read from /proc/PID/task/TID/stat here (runnable_on)."""
from __future__ import annotations

import os
import re
from collections.abc import Iterable

import psutil


def _alive() -> dict[int, tuple[int, int, str]]:
    """{pid: (ppid, pgid, name)} of every process that is not a zombie."""
    table = {}
    for p in psutil.process_iter(["ppid", "name", "status"]):
        info = p.info
        if info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            pgid = os.getpgid(p.pid)
        except ProcessLookupError:
            continue
        table[p.pid] = (info["ppid"], pgid, info["name"] or "?")
    return table


def _below(table: dict[int, tuple[int, int, str]], roots: set[int]) -> set[int]:
    """roots and every process of table that descends from one of them."""
    mine = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _, _) in table.items():
            if pid not in mine and ppid in mine:
                mine.add(pid)
                grew = True
    return mine


def procs_in_groups(pgids: Iterable[int]) -> list[tuple[int, str]]:
    """[(pid, name)] of live processes whose process group is in pgids, or
    that descend from one of the leaders pgids (fio's workers leave the
    group with setsid)."""
    groups = set(pgids)
    table = _alive()
    roots = {pid for pid, (_, g, _) in table.items() if g in groups} | (groups & set(table))
    return [(pid, table[pid][2]) for pid in sorted(_below(table, roots))]


def descendants(pid: int) -> set[int]:
    """pid and every process below it."""
    try:
        return {pid} | {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return {pid}


def cpus_allowed(pid: int) -> set[int] | None:
    """The CPUs pid may run on; None once it is gone."""
    try:
        return set(psutil.Process(pid).cpu_affinity() or [])
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def io_chars(pid: int) -> tuple[int, int]:
    """(bytes read through read-like calls, bytes written to storage) of pid
    (/proc/PID/io rchar and write_bytes); (0, 0) once it is gone."""
    try:
        io = psutil.Process(pid).io_counters()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0, 0
    return io.read_chars, io.write_bytes


def runnable_on(cpu: int, exclude_tgids: Iterable[int] = ()) -> list[tuple[int, int, str]]:
    """[(tgid, tid, comm)] of threads runnable (R) whose last CPU is cpu,
    outside exclude_tgids: what competes with a measurement there.  Per
    thread, which psutil does not give: /proc/PID/task/TID/stat's state
    (field 3) and processor (field 39)."""
    out = []
    ex = set(exclude_tgids)
    for pid in psutil.pids():
        if pid in ex:
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for t in tids:
            try:
                with open(f"/proc/{pid}/task/{t}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            # comm may hold spaces and parentheses: split at the last ')'
            r = st.rfind(")")
            fields = st[r + 2:].split()
            if fields[0] == "R" and len(fields) > 36 and fields[36] == str(cpu):
                out.append((pid, int(t), st[st.find("(") + 1:r]))
    return out


def tcp_listening(port: int) -> bool:
    """Is a socket in LISTEN state on 127.0.0.1:port?"""
    try:
        conns = psutil.net_connections(kind="tcp4")
    except psutil.AccessDenied:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and tuple(c.laddr) == ("127.0.0.1", port)
               for c in conns)


def matching(pattern: str) -> list[int]:
    """The pids, this process's apart, whose command line matches the
    regular expression pattern (as `pgrep -f`)."""
    rx = re.compile(pattern)
    me = os.getpid()
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if p.pid != me and rx.search(cmd):
            out.append(p.pid)
    return out
