#!/usr/bin/env bash
# Description: one detached thread per CPU, system-wide, and failures that
# return: while a program detached by `detach run` holds CPU 1, a second
# `detach run -c 1` and `detach pid -c 1` are refused with one error line
# naming the holder (pid and command) and a NOTE, and the program `detach
# pid` was asked to detach runs on untouched; the holder killed with SIGKILL
# frees the CPU at once and `detach ps` removes its registry file.  A
# failure inside the runtime (the thread cannot be pinned: its cpuset lacks
# the CPU) returns: dt_detach through a dlopened libdetach.so gives -EINVAL
# and the program goes on, and `detach pid` reports it and leaves the
# program running, undetached, its output complete.
# Timeout: 120
source "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
t_need_root
source "$(dirname "$0")/helpers/pid.bash"

# --- a held CPU ------------------------------------------------------------------
"$DETACH" run -c 1 -- sleep 30 2>/dev/null & h=$!
for i in $(seq 100); do t_state_claims | grep -q "^cpu 1 pid $h\$" && break; sleep 0.05; done
echo "claims: $(t_state_claims | tr '\n' ' ')"
t_state_claims | grep -q "^cpu 1 pid $h\$" || t_fail "CPU 1 is not claimed by the detached sleep $h"
t_refused --note "detach run on a held CPU" 1 "CPU 1 already holds a detached thread of pid $h \(sleep\)" \
	"$DETACH" run -c 1 -- true
"$T_TMP/writer" 200 >"$T_TMP/w.out" & w=$!
sleep 0.1
t_refused --note "detach pid on a held CPU" 1 "CPU 1 already holds a detached thread of pid $h \(sleep\)" \
	"$DETACH" pid -c 1 $w
[ -n "$(task_of $w detach-proxy)" ] && t_fail "the refused detach pid left a proxy in $w"
kill -9 $h
for i in $(seq 100); do [ -d /proc/$h ] || break; sleep 0.05; done
echo "holder $h killed: claims now '$(t_state_claims | tr '\n' ' ')'"
t_state_claims | grep -q "pid $h\$" && t_fail "the killed $h still holds a CPU"
"$DETACH" ps >/dev/null
[ -e /dev/shm/detach/$h ] && t_fail "/dev/shm/detach/$h is left after detach ps"
t_check "detach run on the CPU its killed holder held" 0 "$DETACH" run -c 1 -- true
wait $w; rc=$?
[ $rc = 0 ] && [ "$(wc -l <"$T_TMP/w.out")" = 200 ] || t_fail "the writer asked of: exit $rc, $(wc -l <"$T_TMP/w.out") lines"

# --- failures inside the runtime return ------------------------------------------
lib=$BUILD/libdetach.so
cat >"$T_TMP/dl.py" <<EOF
import ctypes, os, sys
lib = ctypes.CDLL("$lib")
print("dt_detach(%s) = %d" % (sys.argv[1], lib.dt_detach(int(sys.argv[1]))))
print("went on, detached %d" % lib.dt_is_detached())
EOF
bad=$(( $(nproc --all) + 3 ))
out=$(python3 "$T_TMP/dl.py" $bad 2>&1); rc=$?
echo "dlopened: $(tr '\n' ' ' <<<"$out")(exit $rc)"
[ $rc = 0 ] && grep -q "dt_detach($bad) = -22" <<<"$out" && grep -q 'went on, detached 0' <<<"$out" ||
	t_fail "dlopened dt_detach($bad): $out"

# a cpuset without CPU 1: pinning there fails inside the runtime
root=$(cpuset_root)
cg=$root/detach-test-claims.$$
if [ -n "$root" ] && [ -e "$root/cpuset.mems" ] && mkdir "$cg" 2>/dev/null; then
	T_CLEANUP="for p in \$(cat '$cg/tasks' 2>/dev/null); do echo \$p >'$root/tasks'; done; rmdir '$cg'"
	echo 0 >"$cg/cpuset.cpus"; cat "$root/cpuset.mems" >"$cg/cpuset.mems"
	out=$(bash -c "echo \$\$ >'$cg/tasks' && exec python3 '$T_TMP/dl.py' 1" 2>&1); rc=$?
	echo "in a cpuset of CPU 0: $(tr '\n' ' ' <<<"$out")(exit $rc)"
	[ $rc = 0 ] && grep -q 'dt_detach(1) = -22' <<<"$out" && grep -q 'went on, detached 0' <<<"$out" ||
		t_fail "dt_detach(1) where the cpuset forbids CPU 1: $out"
	bash -c "echo \$\$ >'$cg/tasks' && exec '$T_TMP/writer' 300" >"$T_TMP/w2.out" & w=$!
	sleep 0.2
	"$DETACH" pid -c 1 $w >"$T_TMP/pid.out" 2>&1; rc=$?
	echo "detach pid in that cpuset: exit $rc: $(grep '^detach: error' "$T_TMP/pid.out")"
	[ $rc != 0 ] && grep -q '^detach: error:.*refused' "$T_TMP/pid.out" || t_fail "detach pid did not report the runtime's refusal"
	[ -d /proc/$w ] || t_fail "the program detach pid was asked of is gone"
	[ -n "$(task_of $w detach-proxy)" ] && t_fail "the failed detach pid left a proxy in $w"
	wait $w; rc=$?
	[ $rc = 0 ] && [ "$(wc -l <"$T_TMP/w2.out")" = 300 ] || t_fail "after the failed detach pid: exit $rc, $(wc -l <"$T_TMP/w2.out") lines"
	"$DETACH" ps >/dev/null
else
	echo "no cpuset v1 hierarchy to make a cpuset in: the pinning failure is not tried"
fi
t_done
