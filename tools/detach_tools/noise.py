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
    """The noise a rank meets in one compute interval, over every offset
    into the (repeating) trace: the exact distribution the closed form of
    `detach scale` draws from (docs/scale.md).

    A window starts at a uniformly random offset t in [0, span) and computes
    for interval_ns; a detour it meets takes the CPU and stretches it (one
    under way at t, by its rest), as scale_sim's noisy_end does.  Detours
    that overlap are one (the CPU is taken once).  With W(x) the free
    (detour-less) time before x, the window ends at the first x with
    W(x) = W(t) + interval, and its noise is that end - t - interval.  That
    is piecewise linear in t: flat while t is in free time, slope -1 inside
    a detour, with jumps where the end reaches a detour's start.  So the
    distribution is a sum of point masses and uniform pieces, found from
    the pieces between breakpoints, and E[max of N draws] is its integral
    in closed form: no sampling, exact at any N."""

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
        busy = sum(e - s for s, e in merged)
        free = span_ns - busy
        if merged and free <= 0:
            raise ValueError("the trace is all detours: no free time to compute in")
        self.span, self.interval = span_ns, interval_ns
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
        self._masses: dict[float, float] = {}            # noise value -> offsets (ns)
        self._uniform: list[tuple[float, float, float]] = []  # (lo, hi, offsets)
        self._pieces()

    def _free_before(self, x: float) -> float:
        k = bisect.bisect_right(self._s, x) - 1
        if k < 0:
            return x
        return self._ws[k] if x < self._e[k] else x - self._bt[k + 1]

    def _end(self, w: float) -> float:
        """The first x with free time w before it: past every detour that
        starts with less free time before it, at a start with exactly w."""
        return w + self._bt[bisect.bisect_left(self._ws, w)]

    def at(self, t: float) -> float:
        """Noise of the window that starts at offset t, 0 <= t < span."""
        return self._end(self._free_before(t) + self.interval) - t - self.interval

    def _pieces(self) -> None:
        cuts = {0.0, self.span}
        for s, e, ws in zip(self._s, self._e, self._ws):
            for x in (s, e):
                if x < self.span:
                    cuts.add(x)
            w = ws - self.interval       # the window that ends at this start
            if 0 <= w:
                t = self._end(w)
                if t < self.span:
                    cuts.add(t)
        xs = sorted(cuts)
        for a, b in zip(xs, xs[1:]):
            if b <= a:
                continue
            m = (a + b) / 2
            v = self.at(m)
            k = bisect.bisect_right(self._s, m) - 1
            if k >= 0 and m < self._e[k]:            # inside a detour: slope -1
                h = (b - a) / 2
                self._uniform.append((max(0.0, v - h), v + h, b - a))
            else:
                self._masses[v] = self._masses.get(v, 0.0) + (b - a)
        self._segments = self._cdf()

    def _cdf(self) -> list[tuple[float, float, float]]:
        """[(length, F at its left, F at its right)]: F linear in between."""
        dens: dict[float, float] = {}
        for lo, hi, w in self._uniform:
            if hi <= lo:
                self._masses[lo] = self._masses.get(lo, 0.0) + w
                continue
            dens[lo] = dens.get(lo, 0.0) + w / (hi - lo)
            dens[hi] = dens.get(hi, 0.0) - w / (hi - lo)
        xs = sorted(set(dens) | set(self._masses) | {0.0})
        out: list[tuple[float, float, float]] = []
        f, d = 0.0, 0.0
        for x, nx in zip(xs, xs[1:] + [None]):
            f += self._masses.get(x, 0.0)
            d += dens.get(x, 0.0)
            if nx is None:
                break
            g = f + d * (nx - x)
            out.append((nx - x, min(1.0, f / self.span), min(1.0, g / self.span)))
            f = g
        return out

    def expected_max(self, n: int) -> float:
        """E[max of n independent windows] = integral of 1 - F(x)^n dx."""
        total = 0.0
        for dx, a, b in self._segments:
            if a >= 1.0:
                continue
            if b - a < 1e-12:
                mean_pow = a ** n
            elif a > 0.0 and (n + 1) * (b - a) < a:
                # mean of F^n over the segment, (b^(n+1) - a^(n+1)) / ((n+1)(b-a)),
                # without the cancellation of two close powers
                mean_pow = a ** (n + 1) * math.expm1((n + 1) * math.log1p((b - a) / a)) / ((n + 1) * (b - a))
            else:
                mean_pow = (b ** (n + 1) - a ** (n + 1)) / ((n + 1) * (b - a))
            total += dx * (1.0 - min(1.0, mean_pow))
        return total

    def mean(self) -> float:
        return self.expected_max(1)


def rare_detour_slowdown(p: float, d_ns: float, interval_ns: float, n: int,
                         collective_ns: float = 0.0) -> float:
    """Closed form for rare long detours: each rank is hit in an interval
    with probability p for d; an iteration takes interval + collective, plus
    d when any of the n ranks was hit: E = 1 - (1 - p)^n."""
    base = interval_ns + collective_ns
    return (base + d_ns * (1.0 - (1.0 - p) ** n)) / base
