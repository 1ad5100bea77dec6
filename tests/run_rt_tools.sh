# Description: the measuring thread of a real-time tool is the one detached
# by default: under `detach run -c 1`, cyclictest -a1 and oslat -c 1 pin a
# thread of their own to CPU 1, which takes the CPU over from the first
# thread.  Judged by the kernel's counters while they run: the measuring
# thread alone is allowed on CPU 1 (Cpus_allowed_list), the first thread
# left it and the measuring thread's sleeps no longer enter the kernel
# (voluntary switches flat; its preemptions are printed, not judged: on a
# loaded machine other tasks share CPU 1 unless `detach isolate` keeps them
# away); `--select first`
# keeps the first thread there and is warned about.  rt-tests from Debian.
# Timeout: 120
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
command -v cyclictest >/dev/null && command -v oslat >/dev/null || t_skip "needs cyclictest and oslat (rt-tests)"

status_of() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/task/$3/status" 2>/dev/null; }

# The thread of process $1 that is neither the first thread nor a proxy.
measuring_thread() {
	local t
	for t in /proc/$1/task/*; do
		t=${t##*/}
		[ "$t" = "$1" ] && continue
		[ "$(cat "/proc/$1/task/$t/comm" 2>/dev/null)" = detach-proxy ] && continue
		echo "$t"
		return
	done
}

# check NAME CMD...: run CMD detached on CPU 1 in the background, look at
# its measuring thread over 0.5 s.
check() {
	local name=$1 pid w v0 v1 n0 n1 cpus main_cpus i
	shift
	"$DETACH" run -c 1 --stats "$T_TMP/$name.json" -- "$@" >"$T_TMP/$name.out" 2>"$T_TMP/$name.err" &
	pid=$!
	for i in $(seq 50); do     # the tool starts its thread and pins it
		w=$(measuring_thread $pid)
		[ -n "$w" ] && [ "$(status_of $pid Cpus_allowed_list "$w")" = 1 ] && break
		sleep 0.1
	done
	sleep 0.2
	v0=$(status_of $pid voluntary_ctxt_switches "$w"); n0=$(status_of $pid nonvoluntary_ctxt_switches "$w")
	sleep 0.5
	v1=$(status_of $pid voluntary_ctxt_switches "$w"); n1=$(status_of $pid nonvoluntary_ctxt_switches "$w")
	cpus=$(status_of $pid Cpus_allowed_list "$w"); main_cpus=$(status_of $pid Cpus_allowed_list $pid)
	wait $pid; local rc=$?
	echo "$name: measuring tid $w on CPUs '$cpus' (first thread: '$main_cpus'), in 0.5 s" \
		"$((v1 - v0)) voluntary and $((n1 - n0)) involuntary switches; exit $rc"
	[ $rc -eq 0 ] || { t_fail "$name: exit $rc"; cat "$T_TMP/$name.err" >&2; return; }
	[ "$cpus" = 1 ] || t_fail "$name: the measuring thread is allowed on '$cpus', not CPU 1 alone"
	[ "$main_cpus" != 1 ] || t_fail "$name: the first thread is still on CPU 1"
	[ $((v1 - v0)) -eq 0 ] || t_fail "$name: the measuring thread slept in the kernel $((v1 - v0)) times"
	python3 - "$T_TMP/$name.json" "$w" <<'PY' || t_fail "$name: statistics do not show tid $w detached on CPU 1"
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if any(t["tid"] == int(sys.argv[2]) and t["cpu"] == 1 for t in d["threads"]) else 1)
PY
	t_check_rewrite "$name" "$T_TMP/$name.json"
}

check cyclictest cyclictest -t1 -a1 -i1000 -l1500 -q -m
check oslat oslat -c 1 -D 2 -q

# --select first: the first thread keeps CPU 1, the measuring thread shares it
"$DETACH" run -c 1 --select first -- cyclictest -t1 -a1 -i1000 -l1000 -q -m >/dev/null 2>"$T_TMP/first.err" ||
	t_fail "--select first: cyclictest failed"
grep -q "was shared" "$T_TMP/first.err" || t_fail "--select first: the shared CPU is not warned about"
grep "warning" "$T_TMP/first.err"
t_reap_registry   # programs stopped by a signal keep their registry files
t_done
