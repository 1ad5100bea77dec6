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
import math
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


class WindowNoise:
    """The noise a rank meets in one compute interval, over every start in
    the (repeating) trace: the exact distribution the closed form of
    `detach scale` draws from (docs/scale.md).

    A window starts at a uniformly random point of the trace's free time
    and computes for interval_ns; every detour that begins before it is
    done takes the CPU and stretches it, as scale_sim's noisy_end does
    (overlapping detours are one: the CPU is taken once).  Free time, not
    any offset: a rank starts computing when the collective hands it the
    result, and it was not computing through a detour then (the previous
    window was stretched past it); starting at any offset would count a
    detour's rest again for the windows that start inside it, 9% too much
    at 200 us detours 200 ms apart.  With W(x) the free time before x, the
    window from t ends at the first x with W(x) = W(t) + interval, so its
    noise is the detours whose start has between W(t) and W(t) + interval
    of free time before it: a step function of the start, a point mass per
    step.  E[max of N draws] is then a sum over the steps: no sampling,
    exact at any N."""

    def __init__(self, detours: Sequence[tuple[float, float]], span_ns: float, interval_ns: float):
        merged: list[list[float]] = []
        for s, d in sorted(detours):
            if d <= 0:
                continue
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], s + d)
            else:
                merged.append([s, s + d])
        if merged and span_ns < merged[-1][1]:
            span_ns = merged[-1][1]
        free = span_ns - sum(e - s for s, e in merged)
        if merged and free <= 0:
            raise ValueError("the trace is all detours: no free time to compute in")
        self.span, self.free, self.interval = span_ns, free, interval_ns
        # (start, end) of every detour over enough repetitions of the trace
        # that a window starting in the first one ends inside them
        reps = 2 + (math.ceil(interval_ns / free) if merged else 0)
        self._s = [s + k * span_ns for k in range(reps) for s, _ in merged]
        self._e = [e + k * span_ns for k in range(reps) for _, e in merged]
        self._ws: list[float] = []       # free time before each detour's start
        self._bt = [0.0]                 # busy time of the first k detours
        for s, e in zip(self._s, self._e):
            self._ws.append(s - self._bt[-1])
            self._bt.append(self._bt[-1] + e - s)
        self._segments = self._cdf(self._masses())

    def _free_before(self, x: float) -> float:
        k = bisect.bisect_right(self._s, x) - 1
        if k < 0:
            return x
        return self._ws[k] if x < self._e[k] else x - self._bt[k + 1]

    def _noise_from(self, w: float) -> float:
        """Noise of the window that starts with free time w before it: the
        detours that start with free time in [w, w + interval) before them."""
        return self._bt[bisect.bisect_left(self._ws, w + self.interval)] - self._bt[bisect.bisect_left(self._ws, w)]

    def at(self, t: float) -> float:
        """Noise of the window that starts at offset t of the trace, 0 <= t
        < span (inside a detour: as from the detour's start)."""
        return self._noise_from(self._free_before(t))

    def _masses(self) -> dict[float, float]:
        """{noise: free time of the starts that meet it} over one span."""
        cuts = {0.0, self.free}
        for ws in self._ws:
            for w in (ws, ws - self.interval):
                if 0 <= w < self.free:
                    cuts.add(w)
        xs = sorted(cuts)
        masses: dict[float, float] = {}
        for a, b in zip(xs, xs[1:]):
            if b > a:
                v = self._noise_from((a + b) / 2)
                masses[v] = masses.get(v, 0.0) + (b - a)
        return masses

    def _cdf(self, masses: dict[float, float]) -> list[tuple[float, float]]:
        """[(length, F)]: F constant from one noise value to the next."""
        total = sum(masses.values())
        out: list[tuple[float, float]] = []
        f = 0.0
        xs = sorted(set(masses) | {0.0})
        for x, nx in zip(xs, xs[1:]):
            f += masses.get(x, 0.0)
            out.append((nx - x, min(1.0, f / total)))
        return out

    def expected_max(self, n: int) -> float:
        """E[max of n independent windows] = integral of 1 - F(x)^n dx."""
        return sum(dx * (1.0 - f ** n) for dx, f in self._segments)

    def mean(self) -> float:
        return self.expected_max(1)


def rare_detour_slowdown(p: float, d_ns: float, interval_ns: float, n: int,
                         collective_ns: float = 0.0) -> float:
    """Closed form for rare long detours: each rank is hit in an interval
    with probability p for d; an iteration takes interval + collective, plus
    d when any of the n ranks was hit: E = 1 - (1 - p)^n."""
    base = interval_ns + collective_ns
    return (base + d_ns * (1.0 - (1.0 - p) ** n)) / base
