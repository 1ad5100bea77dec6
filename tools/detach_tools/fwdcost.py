"""Cost of a forwarded system call: native vs detached (spin and adaptive
proxy), interleaved in one run, repeated.  Reads bench/fwdcost JSON only.

    python3 -m detach_tools fwdcost [--repeat N] [--samples N] [--cpu CPU] [--mode MODE ...] [--out DIR]
"""
import argparse, json, os, subprocess, sys, tempfile, time

from . import paths


def pct(sorted_v, p):
    """nearest-rank percentile, as src/lib/stats.c"""
    k = max(0, min(len(sorted_v) - 1, int(-(-p * len(sorted_v) // 100)) - 1))
    return sorted_v[k]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="detach-fwdcost", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--samples", type=int, default=100000)
    ap.add_argument("--cpu", type=int, default=os.cpu_count() - 1)
    ap.add_argument("--mode", action="append", default=None,
                    help="detach --mode values to compare (default: sud)")
    ap.add_argument("--out", default=None, help="keep the raw JSON here")
    a = ap.parse_args(argv)
    if os.cpu_count() < 2:
        sys.exit("fwdcost: error: needs 2 CPUs")
    modes = a.mode or ["sud"]
    configs = [("native", None, None)]
    for m in modes:
        configs += [(f"{m}-spin", m, "spin"), (f"{m}-adaptive", m, "adaptive")]
    out = a.out or tempfile.mkdtemp(prefix="fwdcost.")
    os.makedirs(out, exist_ok=True)
    fw = paths.program("fwdcost")
    cycles = {c[0]: {"getppid": [], "write4k": []} for c in configs}
    hz = None
    for rep in range(a.repeat):
        for name, mode, proxy in configs:             # interleaved
            path = os.path.join(out, f"{name}.{rep}.json")
            cmd = [fw, "-n", str(a.samples), "--json", path]
            if mode is None:
                cmd[1:1] = ["-c", str(a.cpu)]
            else:
                cmd = [paths.detach_bin(), "run", "-c", str(a.cpu), "--mode", mode,
                       "--proxy", proxy, "--"] + cmd
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode:
                sys.exit(f"fwdcost: error: {' '.join(cmd)} failed: {r.stderr.strip()}")
            d = json.load(open(path))
            hz = d["tsc_hz"]
            for call in ("getppid", "write4k"):
                cycles[name][call] += d[call]["cycles"]
        print(f"repetition {rep + 1}/{a.repeat} done", file=sys.stderr)
    ns = lambda c: c * 1e9 / hz
    print(f"# forwarded-call cost, {a.repeat} interleaved repetitions x {a.samples} calls, CPU {a.cpu}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}, kernel {os.uname().release}, raw JSON in {out}")
    print("| call | configuration | p50 ns | p99 ns | p99.9 ns | max ns | p50 / native |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for call in ("getppid", "write4k"):
        base = None
        for name, _, _ in configs:
            v = sorted(cycles[name][call])
            row = [ns(pct(v, p)) for p in (50, 99, 99.9, 100)]
            base = base or row[0]
            print(f"| {call} | {name} | {row[0]:.0f} | {row[1]:.0f} | {row[2]:.0f} | {row[3]:.0f} | {row[0] / base:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
