# Description: fwq and ctlloop: command line (help, bad input) and the JSON
# they write (common header, self, params, stats consistent with the raw
# samples).  Behaviour only: no timing threshold.
. "$(dirname "$0")/helpers/lib.sh"
FWQ=$BUILD/bench/fwq CTL=$BUILD/bench/ctlloop
[ -x "$FWQ" ] && [ -x "$CTL" ] || { echo "build/bench programs missing: run make"; exit 1; }
tmp=$T_TMP

t_check "fwq --help" 0 "$FWQ" --help
t_check "ctlloop --help" 0 "$CTL" --help
t_check "fwq --samples 0" 2 "$FWQ" --samples 0
t_check "fwq --samples abc" 2 "$FWQ" --samples abc
t_check "fwq unknown option" 2 "$FWQ" --bogus
t_check "fwq stray argument" 2 "$FWQ" extra
t_check "ctlloop --period 1ns" 2 "$CTL" --period 1ns
t_check "ctlloop --cpu x" 2 "$CTL" --cpu x
t_check "fwq unwritable --json" 1 "$FWQ" -s 5 -l 1000 --json /nonexistent/dir/x.json
t_check "fwq small run" 0 "$FWQ" -c 0 -s 200 -w 3 -l 20000 --json "$tmp/fwq.json"
t_check "fwq calibrated run" 0 "$FWQ" -s 5 -w 1 -q 200000 --json "$tmp/fwq2.json"
t_check "ctlloop sleep" 0 "$CTL" -c 0 -s 100 -w 2 -p 200us --json "$tmp/ctl.json"
t_check "ctlloop spin" 0 "$CTL" -s 100 -w 2 -p 200us --spin --json "$tmp/spin.json"
t_check "ctlloop spin-clock" 0 "$CTL" -s 100 -w 2 -p 200us --spin-clock --json "$tmp/spin-clock.json"
t_check "ctlloop spin-framed" 0 "$CTL" -s 100 -w 2 -p 200us --spin-framed --json "$tmp/spin-framed.json"
t_check "fwdcost small run" 0 "$BUILD/bench/fwdcost" -c 0 -n 200 --json "$tmp/fwdcost.json"
t_validate measurement "$tmp/fwq.json" "$tmp/fwq2.json" "$tmp/ctl.json" "$tmp/spin.json" "$tmp/spin-clock.json" "$tmp/spin-framed.json"
t_validate fwdcost "$tmp/fwdcost.json"

"$PY" - "$tmp" <<'PYEOF' || t_fail "JSON schema"
import json, sys
tmp = sys.argv[1]
HEADER = ("cmdline", "version", "start_time", "end_time", "kernel", "machine",
          "cpu_model", "tsc_hz", "return_code")
bad = []
def need(cond, what):
    if not cond:
        bad.append(what)
def common(d, prog, n):
    for k in HEADER:
        need(k in d, f"{prog}: header key {k}")
    need(d["program"] == prog, f"{prog}: program")
    need(d["return_code"] == 0 and d["tsc_hz"] > 0, f"{prog}: rc/tsc_hz")
    need(isinstance(d["cmdline"], list) and d["cmdline"][0].endswith(prog.split("-")[0]), f"{prog}: cmdline")
    for k in ("pid", "policy", "priority", "cpus_allowed", "cpu_at_end"):
        need(k in d["self"], f"{prog}: self.{k}")
    need(d["stats"]["n"] == n == len(d["samples"]), f"{prog}: n and samples")
    need(all(isinstance(x, int) and x > 0 for x in d["samples"]), f"{prog}: samples positive ints")

f = json.load(open(f"{tmp}/fwq.json"))
common(f, "fwq", 200)
s, st = f["samples"], f["stats"]
need(f["params"]["loops"] == 20000 and f["params"]["cpu"] == 0, "fwq params")
need(f["self"]["cpus_allowed"] == "0", "fwq pinned by -c 0")
need(st["min"] == min(s) and st["max"] == max(s), "fwq min/max from samples")
need(st["delta_max"] == max(s) - min(s), "fwq delta_max = max - min")
srt = sorted(s)
need(st["delta_p999"] == srt[199] - min(s), "fwq p99.9 nearest rank")   # ceil(.999*200)=200
need(st["delta_p99"] == srt[197] - min(s), "fwq p99 nearest rank")      # ceil(.99*200)=198
need(st["delta_median"] == srt[99] - min(s), "fwq median")
need(abs(st["delta_max_pct"] - 100.0 * st["delta_max"] / st["min"]) < 1e-6, "fwq pct")
need(0 <= st["delta_median"] <= st["delta_p99"] <= st["delta_p999"] <= st["delta_max"], "fwq order")
f2 = json.load(open(f"{tmp}/fwq2.json"))
need(f2["params"]["quantum_target"] == 200000 and f2["params"]["loops"] > 0, "fwq calibration")

for name, wait in (("ctl", "clock_nanosleep"), ("spin", "spin"), ("spin-clock", "spin-clock"), ("spin-framed", "spin-framed")):
    c = json.load(open(f"{tmp}/{name}.json"))
    common(c, "ctlloop", 100)
    p, st, s = c["params"], c["stats"], c["samples"]
    need(p["wait"] == wait and p["period_ns"] == 200000, f"{name}: params")
    need(st["period"] == p["period_cycles"] > 0, f"{name}: period")
    # a TSC read in steps: the spin's wake-up-to-wake-up deltas are whole
    # numbers of steps, give or take the 1 two reads within a step may
    # differ by (a vCPU that halts, as a sleeper's, may resume on a host
    # core whose grid is shifted: not the others)
    k = p["tsc_step"]
    need(k >= 1, f"{name}: tsc_step {k}")
    if wait == "spin":
        need(sum(min(x % k, k - x % k) <= 1 for x in s) >= 0.9 * len(s), f"{name}: deltas on the tsc_step {k} grid")
    dev = [x - p["period_cycles"] for x in s]
    need(st["max_pos"] == max(dev) and st["max_neg"] == min(dev), f"{name}: max+/max-")
    need(st["p2p"] == max(dev) - min(dev), f"{name}: peak to peak")
    a = sorted(abs(x) for x in dev)
    need(st["p999_abs"] == a[99] and st["p99_abs"] == a[98], f"{name}: |dev| percentiles")
    need(abs(st["p2p_pct"] - 100.0 * st["p2p"] / st["period"]) < 1e-6, f"{name}: pct")
c = json.load(open(f"{tmp}/ctl.json"))
need(c["self"]["cpus_allowed"] == "0", "ctlloop pinned by -c 0")
for b in bad:
    print("schema:", b)
sys.exit(1 if bad else 0)
PYEOF
t_done
