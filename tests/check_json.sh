# Description: detach check --json: common header, findings with severity
# and fix, verdict and exit status agree, one measured sample per listed CPU;
# the text output ends in the same verdict.
. "$(dirname "$0")/helpers/lib.sh"
cd "$ROOT"
[ "$(nproc --all)" -ge 2 ] || t_skip "needs 2 CPUs"
T=$T_TMP

"$DETACH" check -c 1 --sample 200ms --json >"$T/j" 2>"$T/e"; rc=$?
python3 - "$T/j" $rc <<'PY' || t_fail "JSON content"
import json, sys
d = json.load(open(sys.argv[1])); rc = int(sys.argv[2])
err = []
for k in ("cmdline", "version", "start_time", "end_time", "kernel", "cpu_model", "return_code",
          "cpus", "verdict", "findings", "samples"):
    if k not in d: err.append("missing " + k)
if d.get("return_code") != rc: err.append("return_code %r, exit %d" % (d.get("return_code"), rc))
sev = [f["severity"] for f in d["findings"]]
if any(s not in ("ok", "info", "warn", "block") for s in sev): err.append("bad severity")
want = 4 if "block" in sev else 3 if "warn" in sev else 0
if rc != want: err.append("exit %d, findings say %d" % (rc, want))
if {0: "ready", 3: "warnings", 4: "blocked"}[want] != d["verdict"]: err.append("verdict " + d["verdict"])
for f in d["findings"]:
    if f["severity"] in ("warn", "block") and not f["fix"]: err.append("no fix for " + f["id"])
ids = {f["id"] for f in d["findings"]}
for k in ("sud", "preempt", "nohz_full", "clocksource", "tsc", "rt_throttling", "smt", "partition",
          "tasks", "thp", "mmap_min_addr", "swap", "idle", "cpufreq", "rcu_nocbs", "isolcpus"):
    if k not in ids: err.append("no finding " + k)
if [s["cpu"] for s in d["samples"]] != [1]: err.append("samples %r" % d["samples"])
s = d["samples"][0]
if s["measured"] and not (s["max_gap_ns"] > 0 and s["local_timer_interrupts"] >= 0): err.append("sample %r" % s)
print("\n".join(err)); sys.exit(1 if err else 0)
PY
[ -s "$T/e" ] && { t_fail "stderr not empty"; cat "$T/e"; }
t_validate check "$T/j"

# --json=FILE: text on stdout, JSON in the file, same exit.
"$DETACH" check -c 1 --sample 0 --json="$T/f" >"$T/text"; rc2=$?
[ $rc2 -eq $rc ] || echo "note: exit $rc2 vs $rc (the machine changed between runs?)"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["samples"]==[]' "$T/f" || t_fail "--json=FILE"
t_validate check "$T/f"
grep -q "^verdict: .*exit status $rc2" "$T/text" || t_fail "text verdict line"
# check needs no root.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
	setpriv --reuid=65534 --regid=65534 --clear-groups "$DETACH" check -c 1 --sample 0 >/dev/null 2>"$T/e2"
	case $? in 0|3|4) ;; *) t_fail "check as nobody: $(cat "$T/e2")" ;; esac
fi
t_done "check output consistent"
