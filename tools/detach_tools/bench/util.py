"""Small helpers: /proc scanning, errors."""
import os
import sys

from .. import paths
from ..cpus import format_cpulist, online_cpus, parse_cpulist  # noqa: F401 (the bench's names)
from ..partition import read  # noqa: F401


class BenchError(Exception):
    """A failure the user can fix: one error line plus an optional NOTE."""

    def __init__(self, msg, note=None):
        super().__init__(msg)
        self.note = note


def measurement_program(name):
    """bench/NAME.c as built (paths.program); BenchError when it is not."""
    prog = paths.program(name)
    if not os.access(prog, os.X_OK):
        raise BenchError(f"the measurement program {prog} is missing", "run 'make' first")
    return prog


def publish_summary(out_dir, name, md, show):
    """Writes md to OUT_DIR/NAME.md, prints it when show, then its path
    (the last line: where the summary is)."""
    path = os.path.join(out_dir, f"{name}.md")
    with open(path, "w") as f:
        f.write(md)
    if show:
        print(md)
    print(path)


def err(msg, note=None):
    print(f"detach bench: {msg}", file=sys.stderr)
    if note:
        print(f"  NOTE: {note}", file=sys.stderr)


def warn(msg):
    print(f"detach bench: warning: {msg}", file=sys.stderr)


def proc_table():
    """{pid: (ppid, pgid, comm)} for every live process."""
    table = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        # comm may contain spaces and parentheses: split at the last ')'
        r = st.rfind(")")
        comm = st[st.find("(") + 1:r]
        fields = st[r + 2:].split()
        if fields[0] == "Z":
            continue
        table[int(d)] = (int(fields[1]), int(fields[2]), comm)
    return table


def procs_in_groups(pgids):
    """[(pid, comm)] of live processes whose process group is in pgids, or
    that descend from one of the leaders pgids (fio's workers leave the
    group with setsid)."""
    pgids = set(pgids)
    table = proc_table()
    mine = {pid for pid, (_, g, _) in table.items() if g in pgids} | (pgids & set(table))
    grew = True
    while grew:
        grew = False
        for pid, (pp, _, _) in table.items():
            if pid not in mine and pp in mine:
                mine.add(pid)
                grew = True
    return [(pid, table[pid][2]) for pid in sorted(mine)]


def cpus_allowed(pid):
    s = read(f"/proc/{pid}/status", "")
    for line in s.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return parse_cpulist(line.split(":", 1)[1])
    return None


def proc_io(pid):
    """{rchar, wchar, write_bytes, ...} from /proc/PID/io, or {}."""
    out = {}
    for line in read(f"/proc/{pid}/io", "").splitlines():
        k, _, v = line.partition(":")
        try:
            out[k.strip()] = int(v)
        except ValueError:
            pass
    return out


def fmt_dur(s):
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def runnable_on(cpu, exclude_tgids=()):
    """[(tgid, tid, comm)] of threads runnable (R) whose last CPU is cpu,
    outside exclude_tgids: what competes with a measurement there."""
    out = []
    ex = set(exclude_tgids)
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in ex:
            continue
        try:
            tids = os.listdir(f"/proc/{d}/task")
        except OSError:
            continue
        for t in tids:
            try:
                with open(f"/proc/{d}/task/{t}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            r = st.rfind(")")
            fields = st[r + 2:].split()
            if fields[0] == "R" and len(fields) > 36 and fields[36] == str(cpu):
                out.append((int(d), int(t), st[st.find("(") + 1:r]))
    return out


def descendants(pid):
    """pid and every live process below it."""
    table = proc_table()
    mine = {pid}
    grew = True
    while grew:
        grew = False
        for p, (pp, _, _) in table.items():
            if p not in mine and pp in mine:
                mine.add(p)
                grew = True
    return mine
