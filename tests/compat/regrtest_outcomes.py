#!/usr/bin/env python3
"""The per-test outcomes of one `python3 -m test -v` run, as differ.py reads them.

    regrtest_outcomes.py GROUP LOG RC

LOG: the run's stdout and stderr together; RC: its exit status as the shell
gave it (128+N: killed by signal N).  Prints "test_id<TAB>outcome" lines:

  - one per test case and per subtest that reported, from unittest's verbose
    lines "test_x (mod.Class.test_x) ... ok" (the status may come lines
    later, after the test's own output; a docstring puts a line between):
    ok, FAIL, ERROR, skipped, expected failure, unexpected success; a test
    that started and never reported: "no verdict";
  - "GROUP:exit": "as its tests say" when RC is 0 with no failing test, or 2
    (regrtest's "tests failed") with at least one; otherwise "exit=RC" or
    "killed by SIGNAME", whose difference from native differ.py reports;
  - "GROUP:fatal": "none" or the first fatal marker of the log (a Fatal
    Python error, a glibc heap check, a segmentation fault).

Prints the fatal markers on stderr as well; the harness fails on any.
"""
import re
import signal
import sys

START = re.compile(r"^(\w+) \(([\w.]+)\)(?: \[[^\]]*\])?(?: \.\.\.(?: (.*))?)?$")
SUB = re.compile(r"^  (\w+) \(([\w.]+)\) (\(.*\)) \.\.\. (.*)$")
STATUS = re.compile(r"^(?:(ok|FAIL|ERROR|expected failure|unexpected success)|(skipped) .*)$")
DURATION = re.compile(r"^\d+\.\d+s ")     # test_concurrent_futures prints each test's
FATAL = re.compile(r"Fatal Python error|free\(\): |malloc\(\): |double free|corrupted (size|double-linked|top size)"
                   r"|malloc_consolidate|Segmentation fault|stack smashing detected")
FAILING = ("FAIL", "ERROR", "unexpected success")


def status_of(text):
    """The normalized status at the start of TEXT, or None."""
    m = STATUS.match(DURATION.sub("", text.strip()))
    return (m.group(1) or m.group(2)) if m else None


def parse(lines):
    """[(test_id, outcome)] in the order the tests started.  A test that
    starts while another waits for its status was started by that one (a
    script run in a child, as test_eintr's): its id gets the other's as a
    prefix, "outer/inner", and the next bare status is its own."""
    out = []
    pending = []       # the tests awaiting their status, outermost first
    for line in lines:
        m = SUB.match(line)
        if m:
            st = status_of(m.group(4))
            if st:
                test = "/".join(pending[:-1] + [m.group(2)]) if pending else m.group(2)
                out.append((f"{test} {m.group(3)}", st))
                if pending and pending[-1] == m.group(2):
                    pending[-1] += "\0subtests"   # its own status may not come
            continue
        m = START.match(line)
        if m:
            if pending and pending[-1].endswith("\0subtests"):
                out.append(_unfinished(pending))    # the next test: it is over
                pending.pop()
            pending.append(m.group(2))
            rest = m.group(3)
        elif pending:
            rest = line.rsplit(" ... ", 1)[1] if " ... " in line else line
        else:
            continue
        if rest is not None and pending:
            st = status_of(rest)
            if st:
                out.append(("/".join(p.split("\0")[0] for p in pending), st))
                pending.pop()
    while pending:
        out.append(_unfinished(pending))
        pending.pop()
    return out


def _unfinished(pending):
    test = "/".join(p.split("\0")[0] for p in pending)
    return (test, "subtests reported" if pending[-1].endswith("\0subtests") else "no verdict")


def exit_outcome(rc, results):
    failing = any(o in FAILING for _, o in results)
    if (rc == 0 and not failing) or (rc == 2 and failing):
        return "as its tests say"
    if rc > 128:
        try:
            return f"killed by {signal.Signals(rc - 128).name}"
        except ValueError:
            pass
    return f"exit={rc}"


def main():
    group, log, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(log, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    results = parse(lines)
    fatal = [ln.strip() for ln in lines if FATAL.search(ln)]
    for test, outcome in results:
        print(f"{test}\t{outcome}")
    print(f"{group}:exit\t{exit_outcome(rc, results)}")
    print(f"{group}:fatal\t{fatal[0][:120] if fatal else 'none'}")
    for ln in fatal[:5]:
        print(f"{group}: fatal marker: {ln}", file=sys.stderr)


if __name__ == "__main__":
    main()
