# Description: examples/chan_pipeline.c: a detached 1 kHz loop sends a
# sample per period to a Linux logger process that a supervisor kills and
# restarts; every logger continues with the sample after the last one its
# predecessor took (none skipped, none twice), and `detach ps` lists the
# channel with its counters while it runs.
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
ex=$BUILD/examples/chan_pipeline
[ -x "$ex" ] || { t_fail "examples/chan_pipeline was not built"; t_done; }
"$ex" supervise -c 1 -n 3000 -k 700 >"$T_TMP/out" 2>&1 &
sup=$!
sleep 1
"$DETACH" ps --json >"$T_TMP/ps.json"
wait $sup
rc=$?
cat "$T_TMP/out"
[ $rc = 0 ] || t_fail "supervise: exit $rc"
grep -q "loop: 3000 periods of 1000 us" "$T_TMP/out" || t_fail "the loop did not finish"
restarts=$(sed -n 's/^supervisor: \([0-9]*\) restarts/\1/p' "$T_TMP/out")
[ "${restarts:-0}" -ge 2 ] || t_fail "the logger was restarted ${restarts:-0} times"
grep -q "was due" "$T_TMP/out" && t_fail "a logger saw a gap or a repeat"
# every logger starts where its predecessor stopped
python3 - "$T_TMP/out" <<'PY' || t_fail "the samples did not arrive whole"
import re, sys
ranges = {}
for line in open(sys.argv[1]):
    m = re.match(r"logger (\d+): samples (\d+)\.\.(\d+)", line)
    if m:
        pid, a, b = m.group(1), int(m.group(2)), int(m.group(3))
        lo, hi = ranges.get(pid, (a, b))
        ranges[pid] = (min(lo, a), max(hi, b))
spans = sorted(ranges.values())
sent = int(re.search(r"(\d+) samples sent", open(sys.argv[1]).read()).group(1))
print("loggers' spans:", spans, "sent:", sent)
# a logger's last printed sample is a multiple of 1000 minus 1 or its first:
# the next one must start no later than one past the last it printed plus 1000
ok = spans[0][0] == 0 and all(b[0] <= a[1] + 1000 and b[0] > a[0] for a, b in zip(spans, spans[1:]))
sys.exit(0 if ok else 1)
PY
python3 - "$T_TMP/ps.json" <<'PY' || t_fail "detach ps did not list the channel"
import json, sys
d = json.load(open(sys.argv[1]))
ch = [c for c in d.get("channels", []) if c["name"] == "chan_pipeline"]
print("detach ps:", ch)
sys.exit(0 if ch and ch[0]["producer_pid"] > 0 and ch[0]["puts"] > 0 else 1)
PY
t_done
