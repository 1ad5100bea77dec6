# Timeout: 480
# Description: `detach bench --quick` end to end: every load and
# configuration gives a result (or "unavailable: why" for detached), the
# summary has the paper's two tables and the ratios, plots are PNG files,
# every pinned cell carries the guest's trace, system state is restored and no load process is left; bad input gives one
# error and exit 2; Ctrl-C keeps partial results and restores state.
. "$(dirname "$0")/helpers/lib.sh"
[ "$(id -u)" -eq 0 ] || t_skip "needs root (chrt -f 10, RT throttling, partition)"
[ "$(nproc --all)" -ge 2 ] || t_skip "needs 2 CPUs"
[ -x "$BUILD/venv/bin/python" ] || { echo "no venv: run make deps"; exit 1; }
tmp=$T_TMP

t_check "unknown load" 2 "$DETACH" bench --load nosuch
t_check "unknown configuration" 2 "$DETACH" bench --config linux,nosuch
t_check "bad --samples" 2 "$DETACH" bench --samples 0
t_check "--help" 0 "$DETACH" bench --help
"$DETACH" bench --load nosuch 2>"$tmp/err" >/dev/null
[ "$(grep -c '^detach: error: unknown load' "$tmp/err")" -eq 1 ] && grep -q '^NOTE: choose from' "$tmp/err" &&
	[ "$(wc -l <"$tmp/err")" -eq 2 ] || t_fail "bad input: expected one error line and a NOTE, got: $(cat "$tmp/err")"

rt_before=$(cat /proc/sys/kernel/sched_rt_runtime_us)
state_before=$([ -e /run/detach/isolate.state ] && echo yes || echo no)

"$DETACH" bench --quick --out "$tmp/r" --no-print >"$tmp/log" 2>&1
rc=$?
[ $rc -eq 0 ] || { t_fail "quick run exit $rc"; tail -20 "$tmp/log"; }
t_validate bench-results "$tmp/r/results.json"
"$PY" - "$tmp/r" <<'PYEOF' || t_fail "results"
import json, os, sys
r = sys.argv[1]
d = json.load(open(f"{r}/results.json"))
bad = []
for k in ("cmdline", "version", "start_time", "end_time", "kernel", "cpu_model", "tsc_hz",
          "return_code", "system", "loads", "cells", "options"):
    if k not in d: bad.append(f"results.json: no {k}")
cells = {(c["load"], c["program"], c["config"]): c for c in d["cells"]}
for l in ("idle", "build", "io"):
    for p in ("fwq", "ctlloop", "fwq-mpi"):
        for c in ("linux", "linux-fifo", "linux-fifo-isolated", "detached", "floor"):
            if p == "fwq-mpi" and c == "linux-fifo-isolated":
                continue          # not a configuration of fwq-mpi
            x = cells.get((l, p, c))
            if not x: bad.append(f"no cell {l} {p} {c}"); continue
            if c == "detached" and x["status"] == "unavailable":
                if not x.get("reason"): bad.append("detached unavailable without a reason")
                continue
            if x["status"] != "ok": bad.append(f"{l} {p} {c}: {x['status']}: {x.get('reason')}"); continue
            if len(x["result"]["samples"]) != x["result"]["stats"]["n"]: bad.append(f"{l} {p} {c}: samples")
            t = x.get("trace") or {}
            if c != "linux" and p != "fwq-mpi" and not (t.get("traced") and len(t["guest_ns"]) == len(x["result"]["samples"])):
                bad.append(f"{l} {p} {c}: no trace of the cell: {t.get('why')}")
            nt = x.get("noise_trace")
            if not nt or not os.path.isfile(f"{r}/{nt['path']}"): bad.append(f"{l} {p} {c}: no noise trace")
            if c != "linux" and not x["config_check"]["ok"]:
                bad.append(f"{l} {p} {c}: not run as configured: {x['config_check']}")
for l in ("idle", "build", "io"):
    a = d["loads"][l]
    if not a["confined"] or a["leftover_processes"]: bad.append(f"load {l}: {a}")
sc = [x for x in d.get("scale", []) if "error" not in x]
if {x["config"] for x in sc} != {"linux-fifo", "detached", "floor"} or \
        any(x["slowdown"] < 1 or x["method"] != "closed form" for x in sc) or \
        not any(x.get("simgrid") for x in sc):
    bad.append(f"scale prediction: {d.get('scale')}")
s = d["system"]
for k in ("rt_throttling", "preemption", "partition", "detached", "measured_cpu", "housekeeping_cpus"):
    if k not in s: bad.append(f"system: no {k}")
md = open(f"{r}/summary.md").read()
for needle in ("Table 1", "Table 2", "434000 (10.2%)", "862000 (+14,7% / -14.1%)",
               "linux-fifo/detached", "detached/floor", "sched_rt_runtime_us", "preemption model",
               "Whose stalls", "Whose maxima", "fwq-mpi: noise as a 2-rank MPI job", "At scale: what this noise costs"):
    if needle not in md: bad.append(f"summary.md lacks {needle!r}")
pngs = [f for f in os.listdir(f"{r}/plots") if f.endswith(".png")]
for l in ("idle", "build", "io"):
    if f"cdf-{l}.png" not in pngs: bad.append(f"no cdf-{l}.png")
if len(pngs) < 20: bad.append(f"only {len(pngs)} plots")
for f in pngs:
    if open(f"{r}/plots/{f}", "rb").read(8) != b"\x89PNG\r\n\x1a\n": bad.append(f"{f} is not a PNG")
for b in bad: print(b)
sys.exit(1 if bad else 0)
PYEOF

[ "$(cat /proc/sys/kernel/sched_rt_runtime_us)" = "$rt_before" ] || t_fail "sched_rt_runtime_us not restored"
state_after=$([ -e /run/detach/isolate.state ] && echo yes || echo no)
[ "$state_after" = "$state_before" ] || t_fail "partition state not restored"

# Ctrl-C: SIGINT to the orchestration mid-run
"$DETACH" bench --quick --load io --out "$tmp/int" --no-print >"$tmp/log2" 2>&1 &
pid=$!
sleep 6
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] || t_fail "interrupted run: exit $rc, expected 130"
grep -q '"complete": false' "$tmp/int/results.json" 2>/dev/null || t_fail "interrupted run kept no partial results.json"
t_validate bench-results "$tmp/int/results.json"
[ "$(cat /proc/sys/kernel/sched_rt_runtime_us)" = "$rt_before" ] || t_fail "interrupt: sched_rt_runtime_us not restored"
sleep 1
left=$(pgrep -f "detach-bench-io-|iperf3 -s -B 127.0.0.1" | wc -l)
[ "$left" -eq 0 ] || t_fail "interrupt: $left load process(es) left"
t_done
