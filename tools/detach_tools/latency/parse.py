"""Pure parsers of what the latency run leaves: cyclictest's and oslat's
JSON, `detach run --stats`.  No side effects: testable on stored files."""
from __future__ import annotations

from collections.abc import Mapping

from .. import runstats
from ..files import JsonObj, load_json
from ..stats import hist_percentile


def parse_cyclictest(path: str, loops: int) -> JsonObj:
    """The latency figures (us) of a cyclictest --json file, an "error"
    when it ran fewer than loops wake-ups."""
    d = load_json(path)
    t = d["thread"]["0"]
    unit_ns = d.get("resolution_in_ns", 0) == 1
    scale = 1e-3 if unit_ns else 1.0                     # to us
    hist = {int(k): v for k, v in t.get("histogram", {}).items()}
    n = t["cycles"]
    r: JsonObj = {"samples": n, "binned": sum(hist.values()),
         "max": t["max"] * scale, "min": t["min"] * scale, "avg": t["avg"] * scale}
    for p in (50, 99):
        v = hist_percentile(hist, n, p)
        r[f"p{p}"] = v * scale if v is not None else None
    if n < loops:
        r["error"] = f"{n} of {loops} loops"
    return r


def waiter_percentile(hist: Mapping[int, int], duration_us: float, p: float) -> float | None:
    """The floor as a waiter sees it: the lateness of a wake-up due at a
    random instant of the spin loop's run.  An instant inside a gap of length
    g is late by the rest of the gap, so P(late > x) = sum over gaps g > x of
    (g - x) / duration.  Gaps in bucket k are taken as k - 0.5 us; bucket 1
    (gaps under 1 us) is left out, so an answer under 1 us is reported as 1
    ("under 1 us"), as oslat's own buckets would."""
    gaps = [(k - 0.5, c) for k, c in hist.items() if k > 1]
    if duration_us <= 0:
        return None

    def tail(x: float) -> float:
        return sum(c * (g - x) for g, c in gaps if g > x) / duration_us
    lo, hi = 0.0, max([g for g, _ in gaps] + [1.0])
    if tail(1.0) <= (100 - p) / 100:
        return 1.0
    for _ in range(50):                       # tail() falls as x grows
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail(mid) > (100 - p) / 100 else (lo, mid)
    return hi


def parse_oslat(path: str) -> JsonObj:
    """The figures (us) of an oslat --json file, the waiter's view beside."""
    d = load_json(path)
    t = d["thread"]["0"]
    # bucket "k" counts gaps in [k-1, k) us; the last one also every longer gap
    hist = {int(k): v for k, v in t["histogram"].items()}
    n = sum(hist.values())
    r: JsonObj = {"samples": n, "max": float(t["max"]), "min": float(t["min"]), "avg": float(t["avg"]),
         "duration_s": t.get("duration"), "cpu_mhz": t.get("freq"),
         "last_bucket": hist.get(max(hist), 0) if hist else 0}
    for p in (50, 99):
        v = hist_percentile(hist, n, p)
        r[f"p{p}"] = float(v) if v is not None else None
        r[f"waiter_p{p}"] = waiter_percentile(hist, (t.get("duration") or 0) * 1e6, p)
    return r


def _switches(t: JsonObj) -> str:
    return (f"{t.get('forwarded')} forwarded, {t.get('voluntary_ctxt_switches')} voluntary / "
            f"{t.get('nonvoluntary_ctxt_switches')} involuntary switches")


def detached_evidence(stats_path: str, cpu: int, kind: str,
                      loops: int) -> tuple[bool, str, JsonObj | None]:
    """Was the measuring thread really detached?  From `detach run --stats`:
    (True, why, statistics) or (False, why, statistics or None)."""
    try:
        st = runstats.read(stats_path)
    except (OSError, ValueError) as e:
        return False, f"no statistics from detach run ({e})", None
    on = runstats.threads_on(st, cpu)
    if kind == "cyclictest":
        ok = [t for t in on if t.get("syscalls", {}).get("clock_nanosleep", 0) >= loops
              and t.get("emulated", 0) >= loops]
        if not ok:
            seen = [(t.get("tid"), t.get("emulated"), t.get("syscalls", {}).get("clock_nanosleep"))
                    for t in on]
            return False, (f"no thread on CPU {cpu} with >= {loops} emulated clock_nanosleep "
                           f"(threads on CPU {cpu}: (tid, emulated, clock_nanosleep) {seen})"), st
        t = ok[0]
        return True, (f"tid {t['tid']} on CPU {cpu}: {t['syscalls']['clock_nanosleep']} "
                      f"clock_nanosleep, {t['emulated']} emulated, {_switches(t)}"), st
    # oslat makes one worker for its 1-s pre-heat and a second for the test;
    # --select order:2 detaches the second only: one thread on cpu, which ran
    # to its end (exit) and spun without sleeping in the kernel
    if len(on) != 1 or "exit" not in on[0].get("syscalls", {}):
        return False, (f"{len(on)} thread(s) on CPU {cpu} "
                       f"{[(t.get('tid'), t.get('syscalls')) for t in on]}; expected oslat's "
                       f"test worker alone, to its exit"), st
    t = on[0]
    return True, (f"test worker tid {t['tid']} (pid {st.get('pid')}) on CPU {cpu}: "
                  f"{t.get('emulated')} emulated, {_switches(t)}"), st
