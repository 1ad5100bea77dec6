#!/usr/bin/env bash
# Description: `detach ctl` serves the paper's control files with FUSE.  The
# paper's wrapper script (the detached-threads paper, section III-B-4), unchanged but for SYSFS_PATH,
# runs a program detached on the CPU it named: the shell writes its own pid,
# then the CPU, then execs; the program's first thread is on that CPU
# (/proc), its writes leave from the proxy (the kernel's syscw), the
# forwarded calls are counted in PID/stats, its output is exactly native.
# Another process's pid written to `detach` is detached, `PID/cpu` moves it
# (with one CPU in the partition: anew on the same CPU, a new proxy),
# `PID/attach` puts it back (affinity as before, proxy gone).  Bad writes
# get a sysfs file's errno (EINVAL, ESRCH, ENOEXEC, EPERM, EBUSY) and the
# reason in the log.  The mount and the directories it made are undone on
# SIGTERM, SIGINT, SIGHUP, by --unmount, and after the daemon was killed by
# --unmount or the next --mount (/proc/mounts checked).
# Timeout: 120
source "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
t_need_root
t_need_fuse
command -v setpriv >/dev/null || t_skip "setpriv is not installed (make deps)"
source "$(dirname "$0")/helpers/pid.bash"

mnt=$T_TMP/ctl/files             # neither directory exists: both are made
T_CLEANUP='"$DETACH" ctl --unmount "$mnt" >/dev/null 2>&1'
in_mounts() { awk -v m="$mnt" '$2 == m' /proc/mounts | grep -q .; }
state() { awk -v m="$mnt" '$2 == m {print $1, $3}' /proc/mounts; ls -d "$T_TMP/ctl" 2>/dev/null; }
log_file() { echo "/run/detach/ctl-$(echo "$mnt" | tr / %).log"; }

before_state=$(state)
"$DETACH" ctl --mount "$mnt" || { t_fail "ctl --mount: exit $?"; t_done; }
in_mounts || t_fail "$mnt is not in /proc/mounts"
"$DETACH" ctl --mount "$mnt" 2>"$T_TMP/twice.err" && t_fail "a second mount at the same path was not refused"
grep -q "^NOTE:" "$T_TMP/twice.err" || t_fail "second mount: no NOTE: $(cat "$T_TMP/twice.err")"

# --- the paper's wrapper script ---------------------------------------------------
cpu=$(($(nproc --all) - 1))      # in the default partition: every CPU but the first
# the script as printed in the paper (the detached-threads paper, section III-B-4)
cat >"$T_TMP/paper.sh" <<'EOF'
#! /bin/sh
SYSFS_PATH=/sys/kernel/l4/detach
echo $$ > $SYSFS_PATH/detach
echo $HOST_CORE_ID > $SYSFS_PATH/$$/cpu
exec "$@"
EOF
sed "s|^SYSFS_PATH=.*|SYSFS_PATH=$mnt|" "$T_TMP/paper.sh" >"$T_TMP/wrapper.sh"
chmod +x "$T_TMP/wrapper.sh"
[ "$(diff "$T_TMP/paper.sh" "$T_TMP/wrapper.sh" | grep -c '^[<>]')" = 2 ] || t_fail "the wrapper differs in more than SYSFS_PATH"

HOST_CORE_ID=$cpu "$T_TMP/wrapper.sh" "$T_TMP/writer" 300 >"$T_TMP/out" 2>"$T_TMP/wrapper.err" & p=$!
sleep 0.4
comm=$(cat /proc/$p/comm)
proxy=$(task_of $p detach-proxy)
on=$(awk '{print $39}' /proc/$p/task/$p/stat)
allowed=$(awk '/Cpus_allowed_list/ {print $2}' /proc/$p/task/$p/status)
listed=$(grep -c "^$p\$" "$mnt/detach")
main_w1=$(syscw /proc/$p/task/$p); proxy_w1=$(syscw "${proxy:-/nonexistent}" 2>/dev/null)
sleep 0.4
main_w2=$(syscw /proc/$p/task/$p); proxy_w2=$(syscw "${proxy:-/nonexistent}" 2>/dev/null)
forwarded=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["threads"][0]; print(t["forwarded"] if t["tid"] == int(sys.argv[2]) and t["detached"] else -1)' "$mnt/$p/stats" $p)
echo "wrapper: pid $p ($comm) listed $listed, cpu file $(cat "$mnt/$p/cpu"), on CPU $on, allowed $allowed; main syscw $main_w1 -> $main_w2, proxy ${proxy##*/} $proxy_w1 -> $proxy_w2; forwarded $forwarded"
[ "$comm" = writer ] || t_fail "the wrapper did not exec the program: comm $comm"
[ "$listed" = 1 ] || t_fail "pid $p not listed in $mnt/detach"
[ -n "$proxy" ] || t_fail "no proxy thread in process $p"
[ "$on" = $cpu ] && [ "$allowed" = $cpu ] || t_fail "first thread on CPU $on, allowed $allowed, not $cpu"
[ "$(cat "$mnt/$p/cpu")" = $cpu ] || t_fail "$p/cpu says $(cat "$mnt/$p/cpu"), not $cpu"
[ "$main_w1" = "$main_w2" ] || t_fail "the detached thread still writes itself: syscw $main_w1 -> $main_w2"
[ -n "$proxy_w2" ] && [ "$proxy_w2" -gt "${proxy_w1:-0}" ] || t_fail "the proxy did not write: syscw $proxy_w1 -> $proxy_w2"
[ "$forwarded" -gt 0 ] || t_fail "no forwarded calls in $p/stats"
# errors while it runs: a CPU outside the partition (the first is housekeeping)
echo 0 2>"$T_TMP/e" >"$mnt/$p/cpu"; grep -q "Invalid argument" "$T_TMP/e" || t_fail "cpu 0: $(cat "$T_TMP/e")"
echo 2 2>"$T_TMP/e" >"$mnt/$p/attach"; grep -q "Invalid argument" "$T_TMP/e" || t_fail "attach 2: $(cat "$T_TMP/e")"
wait $p; rc=$?
[ $rc = 0 ] || t_fail "program exit $rc: $(cat "$T_TMP/wrapper.err")"
seq 0 299 | sed 's/^/line /' | cmp -s - "$T_TMP/out" || t_fail "output differs from the native lines 0..299 ($(wc -l <"$T_TMP/out") lines)"
[ -e "$mnt/$p" ] && t_fail "$mnt/$p still there after the program ended"

# --- another process, detached and attached through the files -------------------
# long enough (20 s) for every step below on a loaded machine: killed at the end
"$T_TMP/writer" 4000 >/dev/null & w=$!
sleep 0.2
before=$(awk '/Cpus_allowed_list/ {print $2}' /proc/$w/status)
echo $w >"$mnt/detach" || t_fail "echo $w > detach: exit $?"
proxy=$(task_of $w detach-proxy)
first=$(cat "$mnt/$w/cpu" 2>/dev/null)
[ -n "$first" ] && [ "$first" -ge 1 ] && [ -n "$proxy" ] || t_fail "pid $w not detached by the detach file"
if [ "$first" != $cpu ]; then
	# three CPUs or more: a move within the partition, seen in /proc
	echo $cpu >"$mnt/$w/cpu" || t_fail "echo $cpu > $w/cpu: exit $?"
	sleep 0.1
	moved=$(awk '/Cpus_allowed_list/ {print $2}' /proc/$w/task/$w/status)
	echo "moved from CPU $first to $(cat "$mnt/$w/cpu"): allowed $moved, on $(awk '{print $39}' /proc/$w/task/$w/stat)"
	[ "$moved" = $cpu ] && [ "$(cat "$mnt/$w/cpu")" = $cpu ] || t_fail "move to CPU $cpu: allowed $moved"
	proxy=$(task_of $w detach-proxy)
else
	# the partition has one CPU: a "move" to it detaches the thread anew
	# there, through the same attach and detach, with a new proxy
	echo $cpu >"$mnt/$w/cpu" || t_fail "echo $cpu > $w/cpu: exit $?"
	for i in $(seq 50); do [ -e "$proxy" ] || break; sleep 0.02; done
	new=$(task_of $w detach-proxy)
	w1=$(syscw /proc/$w/task/$w); n1=$(syscw "${new:-/nonexistent}" 2>/dev/null); sleep 0.3
	w2=$(syscw /proc/$w/task/$w); n2=$(syscw "${new:-/nonexistent}" 2>/dev/null)
	echo "detached anew on CPU $cpu: proxy ${proxy##*/} -> ${new##*/}, main syscw $w1 -> $w2, new proxy $n1 -> $n2, allowed $(awk '/Cpus_allowed_list/ {print $2}' /proc/$w/task/$w/status)"
	[ ! -e "$proxy" ] && [ -n "$new" ] || t_fail "no new proxy after the write of CPU $cpu"
	[ "$w1" = "$w2" ] && [ -n "$n2" ] && [ "$n2" -gt "${n1:-0}" ] || t_fail "after the move the new proxy does not carry the writes"
	proxy=$new
fi
echo 1 >"$mnt/$w/attach" || t_fail "echo 1 > $w/attach: exit $?"
for i in $(seq 50); do [ -e "${proxy:-/nonexistent}" ] || break; sleep 0.02; done
after=$(awk '/Cpus_allowed_list/ {print $2}' /proc/$w/status)
echo "another process: detached with proxy ${proxy##*/}, attached again: CPUs $after (before $before), proxy $([ -e "$proxy" ] && echo alive || echo gone)"
[ "$after" = "$before" ] || t_fail "affinity after attach '$after', before '$before'"
[ ! -e "$proxy" ] || t_fail "the proxy $proxy is still in /proc/$w/task after attach"
[ -e "$mnt/$w" ] && t_fail "$mnt/$w still listed after attach"

# --- refusals, as a sysfs file gives them ------------------------------------------------
refused() {   # WHAT ERRNO-TEXT VALUE FILE [setpriv ...]
	local what=$1 text=$2 value=$3 file=$4; shift 4
	"$@" bash -c "echo $value > $file" 2>"$T_TMP/e" && { t_fail "$what: accepted"; return; }
	grep -q "$text" "$T_TMP/e" && echo "$what: refused: $(cat "$T_TMP/e")" || t_fail "$what: $(cat "$T_TMP/e")"
}
refused "not a number" "Invalid argument" abc "$mnt/detach"
refused "no such process" "No such process" 999999999 "$mnt/detach"
if [ -x "$T_TMP/static" ]; then
	"$T_TMP/static" 300 >/dev/null & s=$!; sleep 0.1
	refused "static program" "Exec format error" $s "$mnt/detach"
	kill $s; wait $s 2>/dev/null
fi
refused "not root" "Permission denied" $w "$mnt/detach" setpriv --reuid=65534 --regid=65534 --clear-groups
echo $w >"$mnt/detach" || t_fail "detach $w again: exit $?"
refused "already detached" "Device or resource busy" $w "$mnt/detach"
if command -v strace >/dev/null; then
	strace -o /dev/null "$T_TMP/writer" 300 >/dev/null & s=$!
	# the traced writer, once strace has started it (beside a loaded
	# machine 0.3 s was once not enough: empty, the arguments shifted):
	# strace's own child only (a match by command line alone found the
	# wrapper's writer, also "writer 300" and detached: EBUSY, not EPERM)
	t=
	for i in $(seq 100); do
		t=$(pgrep -P $s -f "$T_TMP/writer 300\$") && break
		sleep 0.05
	done
	[ -n "$t" ] || t_fail "traced: strace did not start $T_TMP/writer within 5 s"
	refused "traced" "Operation not permitted" "${t:-0}" "$mnt/detach"
	kill $s 2>/dev/null; wait $s 2>/dev/null
fi
kill $w 2>/dev/null; wait $w 2>/dev/null
t_reap_registry
for why in "is not a number" "no process 999999999" "not dynamically linked" "already detached"; do
	grep -q "$why" "$(log_file)" || t_fail "the log does not say '$why'"
done

# --- every way out undoes the mount ----------------------------------------------------------
for sig in TERM INT HUP; do
	[ $sig = TERM ] || "$DETACH" ctl --mount "$mnt" >/dev/null || t_fail "mount again: exit $?"
	daemon=$(awk '/^pid/ {print $2}' "/run/detach/ctl-$(echo "$mnt" | tr / %).state")
	kill -$sig "$daemon"
	for i in $(seq 100); do [ "$(state)" = "$before_state" ] && break; sleep 0.05; done
	echo "after SIG$sig: '$(state)' (before: '$before_state')"
	[ "$(state)" = "$before_state" ] || t_fail "SIG$sig left '$(state)', before '$before_state'"
done
kill9() {
	"$DETACH" ctl --mount "$mnt" >/dev/null 2>"$T_TMP/mount.err" || t_fail "mount again: exit $?: $(cat "$T_TMP/mount.err")"
	kill -KILL "$(awk '/^pid/ {print $2}' "/run/detach/ctl-$(echo "$mnt" | tr / %).state")"; sleep 0.2
	in_mounts || t_fail "kill -9 took the mount with it: nothing to clean up (the test proves nothing)"
}
kill9      # then --mount over what the dead daemon left, and --unmount of a live one
"$DETACH" ctl --mount "$mnt" >/dev/null 2>"$T_TMP/mount.err" || t_fail "mount over a dead daemon's: exit $?"
grep -q "died" "$T_TMP/mount.err" || t_fail "mount over a dead daemon's: no warning: $(cat "$T_TMP/mount.err")"
"$DETACH" ctl --unmount "$mnt" >/dev/null || t_fail "ctl --unmount: exit $?"
echo "after kill -9, --mount and --unmount: '$(state)' (before: '$before_state')"
[ "$(state)" = "$before_state" ] || t_fail "--unmount left '$(state)', before '$before_state'"
kill9      # then --unmount of a dead daemon's
"$DETACH" ctl --unmount "$mnt" || t_fail "ctl --unmount after kill -9: exit $?"
echo "after kill -9 and --unmount: '$(state)' (before: '$before_state')"
[ "$(state)" = "$before_state" ] || t_fail "--unmount after a crash left '$(state)'"
[ -e "/run/detach/ctl-$(echo "$mnt" | tr / %).state" ] && t_fail "the record is left"
"$DETACH" ctl --unmount "$mnt" 2>"$T_TMP/e" && t_fail "unmount of nothing was not refused"
grep -q "^NOTE:" "$T_TMP/e" || t_fail "unmount of nothing: no NOTE"
t_done
