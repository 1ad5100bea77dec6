"""Noise traces in LogGOPSim's format, from the raw samples of a bench cell.

A trace is one line per detour, `<start_ns>\\t<duration_ns>` (LogGOPSim's
--noise-trace: "line ::= <start-time>\\t<duration> - all times in
nanoseconds", '#' lines are comments).  LogGOPSim takes the last line's
start as the trace's length, so the last line here is a zero-length detour
at the end of the measurement: the trace keeps its quiet tail.

fwq: quanta run back to back; a quantum that took longer than the fastest
one was disturbed for the difference, counted from the quantum's start.
ctlloop: a wake-up later than its deadline was delayed for the lateness,
counted from the deadline (early wake-ups are not noise).  fwq-mpi: the
measured rank's quanta, as fwq.  Only detours above the threshold are kept
(default 1 us: below it the quantum's own jitter, cache and frequency,
dominates)."""
from __future__ import annotations

import bisect
import random
from collections.abc import Sequence

THRESHOLD_NS = 1000


def fwq_detours(samples: Sequence[int], tsc_hz: float,
                threshold_ns: float = THRESHOLD_NS) -> tuple[list[tuple[int, int]], int]:
    """([(start_ns, duration_ns)], span_ns) from FWQ quanta in TSC cycles."""
    if not samples:
        return [], 0
    base = min(samples)
    ns = 1e9 / tsc_hz
    t = 0.0
    out: list[tuple[int, int]] = []
    for s in samples:
        d = (s - base) * ns
        if d > threshold_ns:
            out.append((round(t), round(d)))
        t += s * ns
    return out, round(t)


def ctlloop_detours(samples: Sequence[int], period_cycles: int, tsc_hz: float,
                    threshold_ns: float = THRESHOLD_NS) -> tuple[list[tuple[int, int]], int]:
    """The same from control-loop wake-up deltas (cycles) and the period."""
    ns = 1e9 / tsc_hz
    late = 0.0
    out: list[tuple[int, int]] = []
    for i, s in enumerate(samples):
        late += (s - period_cycles) * ns          # lateness of wake-up i+1
        deadline = (i + 1) * period_cycles * ns
        if late > threshold_ns:
            out.append((round(deadline), round(late)))
    return out, round(len(samples) * period_cycles * ns)


def write(path: str, detours: Sequence[tuple[int, int]], span_ns: int, comment: str) -> None:
    with open(path, "w") as f:
        f.write(f"# detach noise trace, LogGOPSim format: <start_ns>\\t<duration_ns>; {comment}\n")
        f.write(f"# {len(detours)} detours in {span_ns} ns; the last line (zero length) marks the end\n")
        for s, d in detours:
            f.write(f"{s}\t{d}\n")
        f.write(f"{span_ns}\t0\n")


def read(path: str) -> tuple[list[tuple[float, float]], float]:
    """([(start_ns, duration_ns)] with duration > 0, span_ns)."""
    det: list[tuple[float, float]] = []
    span = 0.0
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            try:
                s, d = float(parts[0]), float(parts[1])
            except (IndexError, ValueError):
                raise ValueError(f"{path}:{n}: not <start_ns>\\t<duration_ns>: '{line}'")
            if s < 0 or d < 0:
                raise ValueError(f"{path}:{n}: negative time")
            span = max(span, s + d)
            if d > 0:
                det.append((s, d))
    det.sort()
    return det, span


def window_noise(detours: Sequence[tuple[float, float]], span_ns: float, interval_ns: float,
                 samples: int = 20000, seed: int = 1) -> list[float]:
    """Noise a rank sees in one compute interval: the detour time that falls
    into a window of interval_ns at a random offset into the (repeating)
    trace, the window stretched by it as a CPU would be.  A sorted list."""
    rnd = random.Random(seed)
    starts = [s for s, _ in detours]
    out = []
    for _ in range(samples):
        t = rnd.uniform(0, span_ns) if span_ns > 0 else 0.0
        end, noise = t + interval_ns, 0.0
        i = max(bisect.bisect_right(starts, t) - 1, 0)
        base = 0.0
        while detours:
            if i >= len(detours):
                i, base = 0, base + span_ns
            s, d = detours[i][0] + base, detours[i][1]
            if s >= end:
                break
            e = s + d
            if e > t:
                hit = e - max(s, t)
                noise += hit
                end += hit
            i += 1
        out.append(noise)
    out.sort()
    return out


def expected_max(sorted_noise: Sequence[float], n: int) -> float:
    """E[max of n independent draws] from an empirical sample:
    integral of 1 - F(x)^n over x, F the empirical CDF."""
    m = len(sorted_noise)
    total, prev = 0.0, 0.0
    for k, x in enumerate(sorted_noise):
        # F(x) = k/m on [prev, x)
        total += (x - prev) * (1.0 - (k / m) ** n)
        prev = x
    return total


def rare_detour_slowdown(p: float, d_ns: float, interval_ns: float, n: int,
                         collective_ns: float = 0.0) -> float:
    """Closed form for rare long detours: each rank is hit in an interval
    with probability p for d; an iteration takes interval + collective, plus
    d when any of the n ranks was hit: E = 1 - (1 - p)^n."""
    base = interval_ns + collective_ns
    return (base + d_ns * (1.0 - (1.0 - p) ** n)) / base
