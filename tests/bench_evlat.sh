# Description: `detach bench --program evlat --quick` end to end: every
# receiver (same, process, executive, futex, eventfd) answered events under
# every load (idle, flood, syscalls, build) (without /dev/fuse the executive's
# RT task cannot run: evlat.md says so), the JSON has the percentiles and
# every sample, evlat.md has the table and the ratios; the build load (quick:
# this repository's sources) compiled in its block, confined to the
# housekeeping CPUs, and left no process; perf stat's check of the flooding
# has counts for every load or says why not.  Figures are not judged, so
# no partition (--no-isolate): with it the test took 6 s, then 66 s, 104 s and
# once over 120 s on a busy machine (threads moved into a partition wait for
# RCU grace periods: the likely cause, not proven); without it 6 s.
# Timeout: 120
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
out=$T_TMP/evlat
# 100 s: the runner's limit is 120.  Beside `stress-ng --cpu 2` the bench
# sometimes does not end for minutes, not killable: its main thread spins
# in the kernel in waitpid of the executive's RT task (perf: release_task,
# proc_invalidate_siblings_dcache, shrink_dcache_parent, d_walk), while
# that task's last thread, preempted inside its exit, is not scheduled
# again for minutes although runnable (sched_switch/sched_wakeup on both
# CPUs).  Seen on the 6.18 kernel of the development VM (preempt=none);
# not understood further.  The report below shows it as stime growing with
# an empty kernel stack.
t_watched 100 "$DETACH" bench --program evlat --quick --no-isolate --no-plots --no-print --out "$out" >"$T_TMP/log" 2>&1; rc=$?
[ $rc -eq 0 ] || { tail -40 "$T_TMP/log"; t_fail "detach bench --program evlat --quick: exit $rc"; t_done; }
python3 - "$out/evlat.json" <<'PY' || t_fail "evlat.json incomplete"
import json, sys
d = json.load(open(sys.argv[1]))
bad = []
for load in ("idle", "flood", "syscalls", "build"):
    for r in ("same", "process", "executive", "futex", "eventfd"):
        if r == "executive" and r not in d["cells"][load] and d["not_measured"].get(r):
            print(f"{load}/{r}: not measured: {d['not_measured'][r]}")   # no /dev/fuse
            continue
        c = d["cells"][load][r]
        if c["events"] + c["missed"] != 15 or c["events"] < 10 or len(c["samples_ns"]) != c["events"] \
           or not (0 < c["p50"] <= c["p99"] <= c["p99.9"] <= c["max"]):
            bad.append(f"{load}/{r}: {c['events']} events, {c['missed']} missed")
        else:
            print(f"{load}/{r}: {c['events']} events, p50 {c['p50']} ns, max {c['max']} ns")
if not d["executive_switch_ns"] > 0 and not d["not_measured"].get("executive"):
    bad.append("no executive switch cost")
b = d["loads"]["build"]
if not (b["confined"] and b["block_checks"] and all(c["progressed"] and c["confined"] for c in b["block_checks"])
        and not b["leftover_processes"]):
    bad.append(f"build load: {b}")
else:
    print(f"build load: {b['compile_jobs']} compile jobs, confined, nothing left")
perf = d["perf"]
for load in ("idle", "flood", "syscalls", "build"):
    for blk in d["loads"][load]["perf"]:
        if perf["events"] and not blk.get("cpus"):
            bad.append(f"perf stat of {load}: {blk}")
if not perf["events"] and not perf["why"]:
    bad.append("no perf stat counts and no reason")
print("perf stat:", perf["events"] or perf["why"])
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
grep -q "process / same (address spaces)" "$out/evlat.md" || t_fail "evlat.md has no ratio table"
grep -Eq "^(Flooding not checked with perf stat: .+|perf stat on CPUs)" "$out/evlat.md" || t_fail "evlat.md says nothing of perf stat"
t_done
