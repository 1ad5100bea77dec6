"""The latency run's Markdown summary: per-round values, worst and median
across rounds, the ratios, their targets and the verdicts."""
from __future__ import annotations

import argparse
import statistics
import sys
from typing import Optional, Union

from ..files import JsonObj
from .run import CONFIGS, CYC_HIST, INTERVAL_US, OSLAT_BUCKETS, Runs

# A ratio: numerator and denominator configuration, the metric (or the
# numerator's and the denominator's), the comparison with the target and
# the target (None, None: reported only).
Ratio = tuple[str, str, Union[str, tuple[str, str]], Optional[str], Optional[float]]

RATIO_TARGETS: dict[str, Ratio] = {    # the project's targets
    "detached / floor, max": ("detached", "floor", "max", "<=", 1.5),
    "detached / floor, p99": ("detached", "floor", "p99", "<=", 1.5),
    "detached / floor, p99 (floor as a waiter)": ("detached", "floor", ("p99", "waiter_p99"), "<=", 1.5),
    "plain / detached, max": ("plain", "detached", "max", ">=", 10),
    "plain / detached, p99": ("plain", "detached", "p99", ">=", 50),
    "oslat-det / floor, max": ("oslat-det", "floor", "max", None, None),
    "oslat-det / floor, waiter_p99": ("oslat-det", "floor", "waiter_p99", None, None),
}


def fmt(v: float | str | None, nd: int = 2) -> str:
    if v is None:
        return "overflow"
    if isinstance(v, str):
        return v
    return f"{v:.{nd}f}" if v < 100 else f"{v:.0f}"


def aggregate(runs: Runs, cfg: str, metric: str,
              nrounds: int) -> tuple[list[float | str | None], float | None, float | None, str | None]:
    """(per-round values or reason strings, worst, median, why-no-number)."""
    cells: list[float | str | None] = []
    vals: list[float] = []
    bad: str | None = None
    for r in range(1, nrounds + 1):
        rec = runs.get((cfg, r))
        if rec is None:
            cells.append("not run")
            bad = bad or "not run in every round"
        elif "error" in rec:
            cells.append("error")
            bad = bad or f"round {r}: {rec['error']}"
        elif rec.get("detached") is False:
            cells.append("**not detached**")
            bad = bad or f"round {r}: not detached"
        else:
            v = rec["stats"].get(metric)
            cells.append(v)
            if v is None:
                bad = bad or f"round {r}: {metric} overflowed the histogram"
            else:
                vals.append(v)
    if bad:
        return cells, None, None, bad
    return cells, max(vals), statistics.median(vals), None


def summary(a: argparse.Namespace, runs: Runs, info_before: JsonObj, info_during: JsonObj,
            partition_note: str, started: str, finished: str) -> str:
    L: list[str] = []
    w = L.append
    w("# Wake-up latency: cyclictest and oslat, plain vs detached vs floor\n")
    w(f"- Command: `{' '.join(sys.argv)}`")
    w(f"- {started} to {finished}; {a.rounds} interleaved rounds on CPU {a.cpu} "
      f"(order rotated every round); raw JSON in `{a.out}`")
    w(f"- cyclictest: `-m -p 90 -a {a.cpu} -t 1 -i {INTERVAL_US} -l {a.loops} -q -N -h {CYC_HIST}` "
      f"({a.loops} wake-ups per run; latency in ns, 1-ns histogram up to 1 ms); "
      f"oslat: `-c {a.cpu} -C {info_before['hk']} -f 90 -D {a.seconds} -b {OSLAT_BUCKETS}` "
      f"(1-us buckets, plus a 1-s pre-heat)")
    w(f"- Kernel {info_before['kernel']}, `uname -v`: {info_before['uname_v']}; "
      f"preemption: debugfs sched/preempt {info_before['preempt_debugfs']!r}, "
      f"config {info_before['preempt_config'].get('CONFIG_PREEMPT_DYNAMIC') and 'PREEMPT_DYNAMIC ' or ''}"
      f"{' '.join(k[7:] for k, v in sorted(info_before['preempt_config'].items()) if v == 'y' and k.startswith('CONFIG_PREEMPT_') and k not in ('CONFIG_PREEMPT_DYNAMIC', 'CONFIG_PREEMPT_COUNT', 'CONFIG_PREEMPT_BUILD'))}"
      f", boot {' '.join(info_before['cmdline_preempt']) or 'no preempt=/nohz/isolcpus'}")
    w(f"- sched_rt_runtime_us: {info_before['sched_rt_runtime_us']} before, "
      f"{info_during['sched_rt_runtime_us']} during the run (one setting for every configuration)")
    w(f"- Partition: {partition_note}; {info_before['cpu_model']}, {info_before['ncpus']} CPUs; "
      f"{info_before['rt_tests']}")
    w("")
    # loud problems first
    problems = []
    for (cfg, r), rec in sorted(runs.items(), key=lambda x: (x[0][1], x[0][0])):
        if rec.get("detached") is False:
            problems.append(f"**NOT DETACHED: {cfg}, round {r}**: {rec['evidence']}")
        if "error" in rec:
            problems.append(f"**ERROR: {cfg}, round {r}**: {rec['error']}")
        if rec.get("contaminated"):
            problems.append(f"**CONTAMINATED: {cfg}, round {r}**: {rec['contaminated']}")
    if problems:
        w("## Problems\n")
        L.extend(f"- {p}" for p in problems)
        w("")
    w("## Latency per round (us)\n")
    w("cyclictest: wake-up lateness; oslat: the longest gap between two TSC reads "
      "of its spin loop (upper edge of its 1-us bucket).\n")
    head = " | ".join(f"r{r}" for r in range(1, a.rounds + 1))
    w(f"| configuration | metric | {head} | worst | median |")
    w("|---|---|" + "---:|" * (a.rounds + 2))
    agg: dict[tuple[str, str], tuple[float | None, float | None, str | None]] = {}
    for cfg in CONFIGS:
        extra = ("waiter_p99", "waiter_p50") if cfg in ("floor", "oslat-det") else ()
        for metric in ("max", "p99", "p50") + extra:
            cells, worst, med, bad = aggregate(runs, cfg, metric, a.rounds)
            agg[(cfg, metric)] = (worst, med, bad)
            tail = f"{fmt(worst)} | {fmt(med)}" if not bad else "-- | --"
            w(f"| {cfg} | {metric} | " + " | ".join(fmt(c) for c in cells) + f" | {tail} |")
    w("\nConfigurations: plain = cyclictest in the partition at SCHED_FIFO 90; detached = "
      "the same binary and arguments under `detach run --select pinned` (the measuring thread "
      "detached, its clock_nanosleep served in user space); floor = oslat at SCHED_FIFO 90 on the "
      "CPU (a bare TSC spin loop); oslat-det = the same oslat under `detach run --select order:2` "
      "(its test worker detached). waiter_p99/p50: the floor as a thread waking at random "
      "instants would see it (the rest of the gap an instant falls in), from the same buckets.\n")
    w("Detached, by the runtime's statistics (`detach run --stats`):\n")
    for (cfg, r), rec in sorted(runs.items(), key=lambda x: (x[0][1], x[0][0])):
        if "evidence" in rec:
            w(f"- {cfg}, round {r} ({rec.get('mode')} mode): "
              f"{'' if rec['detached'] else '**NOT DETACHED**: '}{rec['evidence']}")
    w("")
    w("## Ratios within this run\n")
    w("| ratio | on worst | on median | target | verdict |")
    w("|---|---:|---:|---|---|")
    verdicts: list[str] = []
    for name, (num, den, metrics, op, bound) in RATIO_TARGETS.items():
        nmetric, dmetric = metrics if isinstance(metrics, tuple) else (metrics, metrics)
        nw, nm, nb = agg[(num, nmetric)]
        dw, dm, db = agg[(den, dmetric)]
        if nb or db or nw is None or nm is None:
            w(f"| {name} | -- | -- | {op or ''} {bound or 'none (reported)'} | "
              f"no number: {nb or db} |")
            if bound:
                verdicts.append(f"{name}: no number ({nb or db})")
            continue
        rw = nw / dw if dw else float("inf")
        rm = nm / dm if dm else float("inf")
        if bound is None:
            w(f"| {name} | {rw:.2f} | {rm:.2f} | none (reported) | |")
            continue
        target = bound

        def good(x: float) -> bool:
            return x <= target if op == "<=" else x >= target
        if good(rw) and good(rm):
            v = "met"
        else:
            v = "**MISSED** (" + ", ".join(k for k, x in (("worst", rw), ("median", rm))
                                          if not good(x)) + ")"
            verdicts.append(f"{name} is {rw:.2f} on worst, {rm:.2f} on median; target {op} {bound}")
        w(f"| {name} | {rw:.2f} | {rm:.2f} | {op} {bound} | {v} |")
    w("")
    if verdicts:
        w("**Targets missed:**\n")
        L.extend(f"- {v}" for v in verdicts)
    else:
        w("All of the targets are met, on the worst and on the median round.")
    w("")
    w("Notes: ratios divide values measured in this one interleaved run only. oslat's values "
      "are whole microseconds (upper bucket edges), cyclictest's are ns shown in us. oslat's own "
      "p99 is over loop iterations (tens of ns each) and reads 1 (\"under 1 us\"); the waiter "
      "view is the floor comparable with a wake-up latency (docs/latency.md).")
    return "\n".join(L) + "\n"
