#!/usr/bin/env python3
"""Compares a peer test suite's results natively and detached, per test.

    differ.py [--mode MODE] [--label LABEL] NATIVE DETACHED EXCLUDE

NATIVE and DETACHED: lines "test_id<TAB>outcome", one a test.  The outcome
is a normalized string the harness chose ("ok", "FAIL", "skipped",
"exit=0 passed=3 failed=0", "killed by SIGSEGV", ...); two runs agree on a
test when the strings are equal.  A test present in one file only has the
outcome "(absent)" in the other.  A test id given twice in one file gets
its outcomes joined with " + ".

EXCLUDE: lines "test_id<TAB>modes<TAB>reason"; modes is a comma list of
modes (matched against --mode) or "*"; "#" starts a comment, blank lines
are ignored.  test_id may be a shell pattern (fnmatch: *, ?, [...]).  An
excluded test is counted as excluded whatever its outcomes; a difference
in one is printed with the reason.  An exclusion of this mode that matches
no test of either file is printed as stale.

Prints each difference, each excluded difference with its reason, each
stale exclusion, then one plain line "LABEL: N same, N differ, N excluded".
Exit 0 when every difference is excluded, 1 otherwise, 2 on bad input.
Stdlib only: the LTP and CPython harnesses share it.
"""
import argparse
import fnmatch
import sys

ABSENT = "(absent)"


def die(msg):
    print(f"differ.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def read_results(path):
    """{test_id: outcome}, in the order of the file."""
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            test, sep, outcome = line.partition("\t")
            if not sep or not test:
                die(f"{path}:{n}: not 'test_id<TAB>outcome': {line!r}")
            out[test] = f"{out[test]} + {outcome}" if test in out else outcome
    return out


def read_excludes(path, mode):
    """[(pattern, reason, line number)] of the exclusions that apply to MODE."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = line.split("\t", 2)
            if len(parts) != 3 or not parts[0] or not parts[2].strip():
                die(f"{path}:{n}: not 'test_id<TAB>modes<TAB>reason' (a reason is required): {line!r}")
            pattern, modes, reason = parts
            modes = [m.strip() for m in modes.split(",")]
            if "*" in modes or mode in modes:
                out.append((pattern, reason.strip(), n))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", default="sud", help="the detached run's mode, matched against EXCLUDE (default sud)")
    ap.add_argument("--label", default=None, help="the start of the closing line (default: compat MODE)")
    ap.add_argument("native")
    ap.add_argument("detached")
    ap.add_argument("exclude")
    a = ap.parse_args()
    label = a.label or f"compat {a.mode}"

    native = read_results(a.native)
    detached = read_results(a.detached)
    excludes = read_excludes(a.exclude, a.mode)
    tests = list(native) + [t for t in detached if t not in native]

    used = set()
    same = differ = excluded = 0
    for t in tests:
        n, d = native.get(t, ABSENT), detached.get(t, ABSENT)
        rules = [(p, r, ln) for p, r, ln in excludes if fnmatch.fnmatchcase(t, p)]
        used.update(ln for _, _, ln in rules)
        rule = rules[0] if rules else None
        if rule:
            excluded += 1
            if n != d:
                print(f"excluded\t{t}\tnative: {n}\tdetached: {d}\t({rule[1]})")
        elif n == d:
            same += 1
        else:
            differ += 1
            print(f"DIFFERS\t{t}\tnative: {n}\tdetached: {d}")
    for p, r, ln in excludes:
        if ln not in used:
            print(f"stale exclusion\t{p}\t({a.exclude}:{ln}: matches no test: {r})")
    print(f"{label}: {same} same, {differ} differ, {excluded} excluded")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
