"""summary.md and PNG plots from results.json (reads JSON only; every
statistic comes from the measurement programs' own "stats")."""
from __future__ import annotations

import os
import statistics
from collections.abc import Callable

from .. import plots
from ..errors import warn
from ..files import JsonObj
from . import mpi, scaling, trace

# The paper's published figures, copied exactly from the OSPERT 2016 slides
# ("Combining Predictable Execution with Full-Featured Commodity Systems",
# Lackorzynski, Weinhold, Härtig): table "FWQ Numbers" (deltas to minimum in CPU cycles; Linux-4.6
# PREEMPT at chrt -f 10, and the detached thread in L4Linux) and table
# "Control Loop Execution" (maximum deviation in CPU cycles).  Intel Core
# i7-4770 at 2993 MHz.  The slides' decimal commas are kept as printed.
PAPER_FWQ = {
    "idle": ("434000 (10.2%)", "21 (0.0005%)"),
    "build": ("520000 (12.2%)", "6528 (0.15%)"),
    "io": ("773000 (18.2%)", "1152 (0.027%)"),
}
PAPER_CTL = {
    "idle": ("862000 (+14,7% / -14.1%)", "1809 (+0,03% / -0.02%)"),
    "build": ("2599000 (+/- 43,4)", "9633 (+0,14% / -0.18%)"),
    "io": ("903000 (+/- 15,1%)", "3339 (+0,06% / -0.053%)"),
}
LOAD_TITLE = {"idle": "Idle", "build": "Build Load", "io": "I/O Load"}
CONFIGS = ("linux", "linux-fifo", "linux-fifo-isolated", "detached", "floor")
METRIC = {"fwq": "delta_max", "ctlloop": "p2p", "fwq-mpi": "delta_max"}

# Targets the project is judged by.
TARGET_FLOOR = 1.5       # detached/floor, both programs, every load
TARGET_FIFO = 10.0       # linux-fifo/detached, ctlloop, build and io


def cells_for(doc: JsonObj, load: str, prog: str, cfg: str) -> list[JsonObj]:
    """The cells of the tables: the untraced twins of --trace-overhead apart."""
    return [c for c in doc["cells"] if c["load"] == load and c["program"] == prog
            and c["config"] == cfg and not c.get("trace_off")]


def median_vs_floor(doc: JsonObj, loads: list[str], cfgs: list[str], w: Callable[[str], None]) -> None:
    """The control loop's median |deviation| in each repetition and its ratio
    to the floor's in the same repetition (configurations run interleaved
    within one), then the median over the repetitions: how far a timed wait
    stays from a bare TSC spin."""
    rows = []
    for l in loads:
        floor = {c["rep"]: c["result"]["stats"]["median_abs"] for c in cells_for(doc, l, "ctlloop", "floor")
                 if c["status"] == "ok"}
        for cfg in cfgs:
            per = sorted((c["rep"], c["result"]["stats"]["median_abs"]) for c in cells_for(doc, l, "ctlloop", cfg)
                         if c["status"] == "ok")
            if not per:
                continue
            ratios = [m / floor[r] for r, m in per if floor.get(r)]
            rows.append(f"| {l} | {cfg} | {' / '.join(str(m) for _, m in per)} | "
                        f"{statistics.median(m for _, m in per):g} | "
                        f"{' / '.join(f'{x:.3g}' for x in ratios) or '-'} | "
                        f"{f'{statistics.median(ratios):.3g}' if ratios else '-'} |")
    if rows:
        w("Control loop, median |deviation| per repetition (cycles) and its ratio to the floor's "
          "in the same repetition; the median over the repetitions\n")
        w("| load | config | median abs per repetition | median | / floor per repetition | median / floor |")
        w("|---|---|---|---|---|---|")
        for r in rows:
            w(r)
        w("")


def steal_pct(doc: JsonObj, load: str, prog: str, cfg: str) -> str:
    """Steal time on the measured CPU during these cells, percent of their time."""
    ms = secs = 0
    for c in cells_for(doc, load, prog, cfg):
        if c["status"] == "ok" and "measured_cpu_ms" in c:
            ms += c["measured_cpu_ms"].get("steal", 0)
            secs += c.get("seconds", 0)
    return f"{ms / 10 / secs:.1f}%" if secs else "-"


def worst(doc: JsonObj, load: str, prog: str, cfg: str) -> tuple[JsonObj | None, int, str | None]:
    """(stats of the worst repetition, n ok, unavailable reason or None)."""
    cs = cells_for(doc, load, prog, cfg)
    ok = [c for c in cs if c["status"] == "ok"]
    if not ok:
        why = next((c.get("reason") for c in cs if c["status"] != "ok"), None)
        return None, 0, why if cs else None
    w = max(ok, key=lambda c: c["result"]["stats"][METRIC[prog]])
    st: JsonObj = w["result"]["stats"]
    return st, len(ok), None


def fmt_fwq(st: JsonObj) -> str:
    return f"{st['delta_max']} ({st['delta_max_pct']:.3g}%)"


def fmt_ctl(st: JsonObj) -> str:
    return (f"{st['p2p']} ({st['max_pos']:+d} / {st['max_neg']:+d}; "
            f"{st['max_pos_pct']:+.3g}% / {st['max_neg_pct']:+.3g}%)")


def cell_text(doc: JsonObj, load: str, prog: str, cfg: str, fmt: Callable[[JsonObj], str]) -> str:
    st, n, why = worst(doc, load, prog, cfg)
    if st:
        return fmt(st)
    if why:
        return "unavailable" if "unavailable" in str(why) or cfg == "detached" else "failed"
    return "not run"


def ratio(doc: JsonObj, load: str, prog: str, num: str, den: str) -> float | None:
    a, _, _ = worst(doc, load, prog, num)
    b, _, _ = worst(doc, load, prog, den)
    if not a or not b:
        return None
    x: float = a[METRIC[prog]]
    y: float = b[METRIC[prog]]
    return x / y if y else float("inf")


def fr(x: float | None) -> str:
    if x is None:
        return "unavailable"
    return f"{x:.3g}" if x < 1000 else f"{x:.0f}"


def summary(doc: JsonObj) -> str:
    o, sysd = doc["options"], doc.get("system", {})
    loads = [l for l in o["loads"]]
    cfgs = [c for c in CONFIGS if c in o["configs"]]
    reps = o["repeat"]
    L: list[str] = []
    w = L.append
    w("# detach bench summary\n")
    if not doc.get("complete", True):
        w("**Interrupted: partial results.**\n")
    pre = sysd.get("preemption", {})
    rt = sysd.get("rt_throttling", {})
    w(f"- Machine: {doc.get('cpu_model')}, TSC {doc.get('tsc_hz', 0) / 1e9:.3f} GHz, "
      f"kernel {doc.get('kernel')}; {doc['start_time']} to {doc['end_time']}")
    w(f"- Measured CPU {sysd.get('measured_cpu')}, housekeeping CPUs "
      f"{sysd.get('housekeeping_cpus')} (loads confined there)")
    pm = f"ran with preemption model `{pre.get('ran_with')}`"
    if pre.get("changed"):
        pm += f" (switched from `{pre.get('before')}` via debugfs sched/preempt, restored after)"
    elif pre.get("dynamic") and pre.get("available"):
        pm += f" (PREEMPT_DYNAMIC; available: {', '.join(pre.get('available', []))})"
    if pre.get("note"):
        pm += f"; {pre['note']}"
    w(f"- Kernel: {pm}; built with {', '.join(pre.get('config', []))}"
      f"{' + PREEMPT_DYNAMIC' if pre.get('dynamic') else ''}. "
      f"The paper's baseline ran Linux-4.6 with CONFIG_PREEMPT=y.")
    w(f"- RT throttling (one setting for all configurations): sched_rt_runtime_us = "
      f"{rt.get('sched_rt_runtime_us')} (was {rt.get('sched_rt_runtime_us_before')}), "
      f"period {rt.get('sched_rt_period_us')} us")
    inside = sorted({c["config"] for c in doc["cells"] if c.get("in_partition")})
    w(f"- Partition: {sysd.get('partition')}; configurations run inside it: "
      f"{', '.join(inside) if inside else 'none'}")
    w(f"- detached: {'available' if sysd.get('detached_available') else 'unavailable: ' + str(sysd.get('detached'))}")
    w(f"- Samples: fwq {o['samples_fwq']} (work {sysd.get('fwq_loops')} loops), ctlloop "
      f"{o['samples_ctlloop']} periods of 1000 us; {reps} repetition(s), configurations "
      f"interleaved within each load; tables show the worst repetition"
      f"{' (--quick)' if o.get('quick') else ''}")
    bad = [c for c in doc["cells"] if c.get("config_check") and not c["config_check"]["ok"]]
    if bad:
        w(f"- WARNING: {len(bad)} cell(s) did not run as configured: " +
          "; ".join(f"{c['load']} {c['program']} {c['config']}: {c['config_check']['ran_as']}"
                    for c in bad[:5]))
    w("")

    w("## Loads achieved\n")
    w("| load | what | achieved | confined to housekeeping | leftover processes |")
    w("|---|---|---|---|---|")
    for l in loads:
        a = doc["loads"].get(l)
        if not a:
            continue
        if l == "build":
            ach = (f"{a.get('compile_jobs', 0)} compile jobs in {a.get('seconds', 0)} s "
                   f"({a.get('compile_jobs_per_min')}/min)")
        elif l == "io":
            ach = f"disk {a.get('disk_MBps')} MB/s, loopback {a.get('net_Mbitps')} Mbit/s"
        else:
            ach = "-"
        conf = f"{'yes' if a.get('confined') else 'NO'} ({a.get('checks')} checks)"
        w(f"| {l} | {a.get('description')} | {ach} | {conf} | "
          f"{', '.join(a.get('leftover_processes', [])) or 'none'} |")
    stalled = [c for c in doc["cells"] if c.get("load_check") and c["load"] != "idle"
               and not c["load_check"]["progressed"]]
    if stalled:
        w(f"\n{len(stalled)} cell(s) saw no load progress while they ran "
          "(e.g. during `make clean`).")
    w("")

    def table(prog: str, title: str, source: str, paper: dict[str, tuple[str, str]],
              fmt: Callable[[JsonObj], str], paper_cols: list[str]) -> None:
        w(f"## {title}\n")
        w(source + "\n")
        head = ["load"] + paper_cols + cfgs
        w("| " + " | ".join(head) + " |")
        w("|" + "---|" * len(head))
        for l in loads:
            row = [LOAD_TITLE.get(l, l)] + list(paper.get(l, ("", "")))
            row += [cell_text(doc, l, prog, c, fmt) for c in cfgs]
            w("| " + " | ".join(row) + " |")
        w("")

    if "fwq" in o["programs"]:
        table("fwq", "Table 1: FWQ, maximum delta to minimum in CPU cycles (percent of minimum)",
              "Paper columns: the OSPERT 2016 slides, table \"FWQ Numbers\", Intel i7-4770 at "
              "2993 MHz, quantum about 4.3 M cycles. Ours: worst of the repetitions.",
              PAPER_FWQ, fmt_fwq, ["paper: Linux PREEMPT", "paper: detached (L4Linux)"])
        w("FWQ detail (worst repetition): deltas to minimum, cycles (percent)\n")
        w("| load | config | min quantum | max | p99.9 | p99 | median | steal |")
        w("|---|---|---|---|---|---|---|---|")
        for l in loads:
            for c in cfgs:
                st, n, _ = worst(doc, l, "fwq", c)
                if st:
                    w(f"| {l} | {c} | {st['min']} | {st['delta_max']} ({st['delta_max_pct']:.3g}%) | "
                      f"{st['delta_p999']} ({st['delta_p999_pct']:.3g}%) | "
                      f"{st['delta_p99']} ({st['delta_p99_pct']:.3g}%) | "
                      f"{st['delta_median']} ({st['delta_median_pct']:.3g}%) | "
                      f"{steal_pct(doc, l, 'fwq', c)} |")
        w("")
    if "ctlloop" in o["programs"]:
        table("ctlloop", "Table 2: control loop, maximum deviation (peak to peak) in CPU cycles "
              "(max+ / max-; percent of the period)",
              "Paper columns: the OSPERT 2016 slides, table \"Control Loop Execution\" (Linux at "
              "chrt -f 10 pinned; detached thread in L4Linux), target 2,993,000 cycles. "
              "Ours: period 1000 us; floor waits by TSC spin (--spin).",
              PAPER_CTL, fmt_ctl, ["paper: Linux", "paper: detached (L4Linux)"])
        w("Control-loop detail (worst repetition), cycles\n")
        w("| load | config | max+ | max- | max deviation | % of period | p99.9 abs | p99 abs | median abs | steal |")
        w("|---|---|---|---|---|---|---|---|---|---|")
        for l in loads:
            for c in cfgs:
                st, n, _ = worst(doc, l, "ctlloop", c)
                if st:
                    w(f"| {l} | {c} | {st['max_pos']:+d} | {st['max_neg']:+d} | {st['p2p']} | "
                      f"{st['p2p_pct']:.3g}% | {st['p999_abs']} | {st['p99_abs']} | {st['median_abs']} | "
                      f"{steal_pct(doc, l, 'ctlloop', c)} |")
        w("")
        median_vs_floor(doc, loads, cfgs, w)
        steps = sorted({c["result"]["params"]["tsc_step"] for c in doc["cells"]
                        if c["program"] == "ctlloop" and c["status"] == "ok"
                        and c["result"]["params"].get("tsc_step")})
        if steps and steps != [1]:
            w(f"The TSC of the measured CPU reads in steps of {' / '.join(map(str, steps))} cycles "
              "(ctlloop's `tsc_step`): deviations smaller than a step cannot be told apart, and "
              "a median below one step is the grid's, not the wait's.\n")

    if "fwq-mpi" in o["programs"]:
        L.extend(mpi.summary_lines(doc, loads, cfgs, cells_for))
    w("steal: time the hypervisor took from the measured CPU during the cells (/proc/stat), "
      "percent of their run time: on a shared VM the floor cannot be below it.\n")
    # interference: other runnable threads seen on the measured CPU
    rows = []
    for c in doc["cells"]:
        oth = dict(c.get("others_runnable_on_cpu") or {})
        n = oth.pop("_samples", 0)
        if oth and n:
            top = sorted(oth.items(), key=lambda kv: -kv[1])[:4]
            rows.append(f"| {c['load']} | {c['program']} | {c['config']} | {c['rep']} | "
                        + ", ".join(f"{k} ({100 * v / n:.0f}%)" for k, v in top) + " |")
    KERNEL = ("kworker/", "ksoftirqd/", "rcu_", "migration/", "kdamond", "cpuhp/", "idle_inject/")
    foreign = []
    for c in doc["cells"]:
        oth = dict(c.get("others_runnable_on_cpu") or {})
        oth.pop("_samples", None)
        names = sorted(k for k in oth if not k.startswith(KERNEL))
        if c.get("in_partition") and names:
            foreign.append(f"{c['load']} {c['program']} {c['config']} rep {c['rep']} ({', '.join(names[:3])})")
    if foreign:
        w(f"**Contaminated: in {len(foreign)} partition cell(s) other user programs were runnable "
          "on the isolated CPU** (other programs joining the partition, e.g. concurrent "
          "`detach run` tests): those cells measure that interference, not the configuration. "
          + "; ".join(foreign[:8]) + ("; ..." if len(foreign) > 8 else "") + "\n")
    if rows:
        w("Other threads seen runnable on the measured CPU during a cell (sampled every "
          "0.25 s; percent of samples), most frequent first:\n")
        w("| load | program | config | rep | threads |")
        w("|---|---|---|---|---|")
        L.extend(rows[:40])
        if len(rows) > 40:
            w(f"| ... | {len(rows) - 40} more cells | | | |")
        w("")
    w("## Ratios (FWQ: max delta; control loop: maximum deviation)\n")
    w("Targets: detached/floor at most 1.5 for both programs under every load; "
      "linux-fifo/detached at least 10 for the control loop under build and I/O load.\n")
    w("| load | program | linux-fifo/detached | detached/floor | linux-fifo/floor | verdict |")
    w("|---|---|---|---|---|---|")
    for l in loads:
        for p in o["programs"]:
            fd = ratio(doc, l, p, "linux-fifo", "detached")
            df = ratio(doc, l, p, "detached", "floor")
            ff = ratio(doc, l, p, "linux-fifo", "floor")
            missing = [c for c in ("linux-fifo", "detached", "floor")
                       if not worst(doc, l, p, c)[0]]
            if df is None:
                verdict = "not measured: no result for " + ", ".join(missing)
            else:
                short = []
                if df > TARGET_FLOOR:
                    short.append(f"detached/floor {df:.3g} > {TARGET_FLOOR}")
                if p == "ctlloop" and l in ("build", "io") and fd is not None and fd < TARGET_FIFO:
                    short.append(f"linux-fifo/detached {fd:.3g} < {TARGET_FIFO:g}")
                verdict = "SHORT: " + "; ".join(short) if short else "met"
            w(f"| {l} | {p} | {fr(fd)} | {fr(df)} | {fr(ff)} | {verdict} |")
    w("")
    if not sysd.get("detached_available"):
        w(f"detached: unavailable: {sysd.get('detached')}\n")
    trace.summary_section(doc, w, [c for c in doc["cells"] if not c.get("trace_off")])
    L.extend(scaling.summary_lines(doc))
    plots = "plots/" if doc.get("_plots") else None
    if plots:
        w("## Plots\n")
        w("`plots/<load>-<program>-<config>-r<rep>.png`: sample index against cycles, one per "
          "cell (as the paper's figures; in the slowest 1%, x: the guest's trace covers the "
          "stall, o: the host's); `plots/cdf-<load>.png`: distribution per configuration, "
          "log scale.\n")
    return "\n".join(L) + "\n"


def make_plots(doc: JsonObj, outdir: str) -> None:
    """plots/: one per cell, sample index against cycles, and one 1 - CDF
    per load; plots.PlotsMissing without matplotlib."""
    plots.require()
    import matplotlib.pyplot as plt

    pd = os.path.join(outdir, "plots")
    os.makedirs(pd, exist_ok=True)
    colors = dict(zip(CONFIGS, ("tab:red", "tab:orange", "tab:purple", "tab:green", "tab:blue")))
    for c in doc["cells"]:
        if c["status"] != "ok":
            continue
        r = c["result"]
        s: list[int] = r["samples"]
        fig, ax = plt.subplots(figsize=(7, 3.2), dpi=90)
        ax.plot(range(len(s)), s, ".", ms=1.5, color=colors.get(c["config"], "k"))
        if c["program"] == "ctlloop":
            ax.axhline(r["params"]["period_cycles"], color="gray", lw=0.6, ls="--")
            st = r["stats"]
            sub = f"max deviation {st['p2p']} cycles ({st['max_pos']:+d} / {st['max_neg']:+d})"
            ax.set_ylabel("TSC delta per period (cycles)")
        else:
            st = r["stats"]
            sub = f"max delta to min {st['delta_max']} cycles ({st['delta_max_pct']:.3g}%)"
            ax.set_ylabel("cycles per quantum")
        trace.mark_plot(ax, c, doc.get("tsc_hz") or 0)
        ax.set_xlabel("sample")
        ax.set_title(f"{c['program']} {c['config']}, {c['load']} load, rep {c['rep']}: {sub}",
                     fontsize=8)
        ax.ticklabel_format(axis="y", style="plain", useOffset=False)
        fig.tight_layout()
        fig.savefig(os.path.join(pd, f"{c['load']}-{c['program']}-{c['config']}-r{c['rep']}.png"))
        plt.close(fig)

    for load in doc["options"]["loads"]:
        progs = doc["options"]["programs"]
        fig, axes = plt.subplots(1, len(progs), figsize=(6 * len(progs), 4), dpi=90, squeeze=False)
        any_data = False
        for ax, prog in zip(axes[0], progs):
            for cfg in CONFIGS:
                xs: list[float] = []
                for c in cells_for(doc, load, prog, cfg):
                    if c["status"] != "ok":
                        continue
                    r = c["result"]
                    s = r["samples"]
                    if prog != "ctlloop":
                        m = min(s)
                        xs += [v - m for v in s]
                    else:
                        period = r["params"]["period_cycles"]
                        xs += [abs(v - period) for v in s]
                if not xs:
                    continue
                x = sorted(v + 1.0 for v in xs)
                y = [1.0 - i / len(x) for i in range(len(x))]    # fraction of samples >= x
                ax.step(x, y, where="post", label=cfg, color=colors[cfg], lw=1)
                any_data = True
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("delta to minimum + 1 (cycles)" if prog != "ctlloop"
                          else "|deviation from period| + 1 (cycles)")
            ax.set_ylabel("fraction of samples >= x (1 - CDF)")
            ax.set_title(f"{prog}, {load} load")
            ax.grid(True, which="major", lw=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        fig.tight_layout()
        if any_data:
            fig.savefig(os.path.join(pd, f"cdf-{load}.png"))
        plt.close(fig)


def write_all(doc: JsonObj, outdir: str, with_plots: bool = True) -> None:
    """summary.md and, with_plots, the plots (a warning and its NOTE
    without matplotlib: everything else is written)."""
    if with_plots:
        try:
            make_plots(doc, outdir)
            doc["_plots"] = True
        except plots.PlotsMissing as e:
            warn(str(e), e.note)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(summary(doc))
