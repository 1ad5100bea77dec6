# Description: the bench loads (idle, build with --quick's small C tree, io:
# fio + iperf3 over 127.0.0.1) start confined to the housekeeping CPUs, are
# seen making progress while they run, and stop leaving no process behind.
. "$(dirname "$0")/helpers/lib.sh"
[ "$(nproc --all)" -ge 2 ] || t_skip "needs 2 CPUs"
for t in fio iperf3 taskset gcc make; do
	command -v $t >/dev/null || { echo "$t missing: run make deps"; exit 1; }
done
bench_py() { PYTHONPATH="$ROOT/tools" "$PY" -m detach_tools bench "$@"; }
out=$T_TMP/out
tmpdirs() { ls -d /tmp/detach-bench-build-* /var/tmp/detach-bench-io-* 2>/dev/null | sort; }
before=$(tmpdirs)

bench_py --quick --load idle,build,io --check-loads 3 >"$out" 2>&1
rc=$?
[ $rc -eq 0 ] || { t_fail "check-loads exit $rc"; tail -20 "$out"; }
"$PY" - "$out" <<'PYEOF' || t_fail "load report"
import json, os, sys
text = open(sys.argv[1]).read()
d = json.loads(text[text.index("{"):])
bad = []
for name in ("idle", "build", "io"):
    r = d.get(name)
    if not r:
        bad.append(f"{name}: missing"); continue
    if not r["confined"]: bad.append(f"{name}: a process ran outside the housekeeping CPUs: {r['achieved']['violations']}")
    if not r["alive"]: bad.append(f"{name}: a load process died: {r['last']['dead']}")
    if r["leftover"]: bad.append(f"{name}: left processes behind: {r['leftover']}")
    if name != "idle":
        if not r["progressed"]: bad.append(f"{name}: no progress: {r['first']['progress']} -> {r['last']['progress']}")
        if r["first"]["procs"] < 1: bad.append(f"{name}: no process seen")
    # nothing of the load's process groups may be alive now
    for g in r["pgids"]:
        try:
            os.kill(g, 0); bad.append(f"{name}: process {g} still alive")
        except ProcessLookupError:
            pass
a = d["build"]["achieved"]
if not a.get("compile_jobs", 0) > 0: bad.append(f"build: no compile jobs counted: {a}")
a = d["io"]["achieved"]
if not (a.get("disk_MBps", 0) > 0 and a.get("net_Mbitps", 0) > 0): bad.append(f"io: no throughput: {a}")
for b in bad: print(b)
print("loads:", {k: {x: v["achieved"].get(x) for x in ("compile_jobs", "disk_MBps", "net_Mbitps")} for k, v in d.items()})
sys.exit(1 if bad else 0)
PYEOF
# temporary trees are removed
left=$(comm -13 <(echo "$before") <(tmpdirs))
[ -z "$left" ] || t_fail "temporary load directories left: $left"
t_check "unknown load is refused" 2 bench_py --load nosuch --check-loads 1
t_done
