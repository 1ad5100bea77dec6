# Description: detach check --measure names a task pinned to the measured CPU
# that runs in 10 ms bursts as the cause of the probe's gaps (comm and pid, from
# sched_switch); the JSON validates against docs/schema/check.schema.json (tests/helpers/validate_json.py) and
# --trace-out holds the events as text.
# Timeout: 120
. "$(dirname "$0")/helpers/lib.sh"
cd "$ROOT"
[ "$(id -u)" -eq 0 ] || t_skip "needs root (tracefs)"
[ "$(nproc --all)" -ge 2 ] || t_skip "needs 2 CPUs"
[ ! -e $STATE ] || t_skip "the machine is isolated ($STATE): a task outside the partition cannot run on its CPU"
T=$T_TMP
BURST=
T_CLEANUP='[ -n "$BURST" ] && kill $BURST 2>/dev/null'

CPU=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')

# 10 ms of work, 30 ms asleep, on the measured CPU, under a name of its own.
taskset -c "$CPU" python3 -c '
import time
open("/proc/self/comm", "w").write("burst10ms")
while True:
    end = time.monotonic() + 0.010
    while time.monotonic() < end: pass
    time.sleep(0.030)' &
BURST=$!
sleep 0.3

"$DETACH" check -c "$CPU" --measure 2s --json="$T/j" --trace-out "$T/trace" >"$T/out" 2>"$T/err"
case $? in 0|3|4) ;; *) t_fail "check exit $?: $(cat "$T/err")" ;; esac
[ -s "$T/err" ] && t_fail "stderr: $(cat "$T/err")"
t_validate check "$T/j"
python3 - "$T/j" "$BURST" "$CPU" <<'PY' || t_fail "JSON"
import json, sys
d = json.load(open(sys.argv[1])); pid = int(sys.argv[2]); cpu = int(sys.argv[3])
m = d["measure"]
assert [x["cpu"] for x in m] == [cpu], m
m = m[0]
assert m["measured"] and m["traced"], m.get("why") or m.get("trace_error")
named = [c for g in m["gaps"] for c in g["causes"] if c["kind"] == "task" and c["pid"] == pid]
print("%d gaps, %d name the burst task" % (len(m["gaps"]), len(named)))
assert named, "no gap names task %d" % pid
assert all(c["comm"] == "burst10ms" for c in named), named[:3]
rows = [r for r in m["summary"] if r["cause"] == "task burst10ms[%d]" % pid]
assert rows and rows[0]["count"] == len(named), rows
PY
grep -q "sched_switch .*burst10ms\[$BURST\]" "$T/trace" || t_fail "--trace-out has no switch to the burst task"
grep -q "task burst10ms\[$BURST\]" "$T/out" || t_fail "the text summary does not name the burst task"
kill $BURST; BURST=

# Without root: one error line and a NOTE, then the gaps, unattributed.
if command -v setpriv >/dev/null; then
	chmod 777 "$T"
	setpriv --reuid=65534 --regid=65534 --clear-groups "$DETACH" check -c "$CPU" --measure 200ms \
		--json="$T/nobody.json" >/dev/null 2>"$T/nerr"
	[ "$(grep -c '^detach: error: cannot trace' "$T/nerr")" -eq 1 ] && grep -q 'NOTE: run detach check --measure as root' "$T/nerr" \
		|| t_fail "as nobody: expected one error line and a NOTE, got: $(cat "$T/nerr")"
	t_validate check "$T/nobody.json"
	python3 - "$T/nobody.json" <<'PY' || t_fail "JSON as nobody"
import json, sys
d = json.load(open(sys.argv[1]))
m = d["measure"][0]
assert m["measured"] and not m["traced"] and m["trace_error"], m
assert all(g["causes"] is None for g in m["gaps"]), "a gap attributed without a trace"
print("as nobody: %d gaps, unattributed" % len(m["gaps"]))
PY
fi
t_done "the burst task is named"
