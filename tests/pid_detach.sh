#!/usr/bin/env bash
# Description: `detach pid` detaches the first thread of a program that is
# already running, without restarting it: the kernel's counters show its
# writes leave from the proxy, not from it, and its CPU is the one named;
# its output is exactly what it would have been; `--attach` puts it back
# (affinity and policy as before, the proxy thread gone from /proc/PID/task).
# A thread stopped in a blocking pipe read finishes that read with data
# written later.  A shell detached this way keeps the detached state
# across its exec of the program.  Refusals: no such process, a static
# program, a traced one, one already detached, another user's without
# CAP_SYS_PTRACE, kernel.yama.ptrace_scope 3.
# Timeout: 120
source "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
t_need_root
command -v setpriv >/dev/null || t_skip "setpriv is not installed (make deps)"

source "$(dirname "$0")/helpers/pid.bash"

# --- a running writer, detached and attached again ----------------------------
# SCHED_BATCH: detached it runs as SCHED_OTHER, attached again as before
chrt -b 0 "$T_TMP/writer" 400 >"$T_TMP/out" & p=$!
sleep 0.3
before=$(awk '/Cpus_allowed_list/ {print $2}' /proc/$p/status); policy_before=$(policy $p)
"$DETACH" pid -c 1 $p || t_fail "detach pid: exit $?"
proxy=$(task_of $p detach-proxy)
[ -n "$proxy" ] || t_fail "no proxy thread in process $p"
main_w1=$(syscw /proc/$p/task/$p); proxy_w1=$(syscw "$proxy")
sleep 0.4
main_w2=$(syscw /proc/$p/task/$p); proxy_w2=$(syscw "$proxy")
cpus=$(awk '/Cpus_allowed_list/ {print $2}' /proc/$p/status)
echo "detached: main thread syscw $main_w1 -> $main_w2, proxy $proxy_w1 -> $proxy_w2, CPUs $cpus (before $before)"
[ "$main_w1" = "$main_w2" ] || t_fail "the detached thread still writes itself: syscw $main_w1 -> $main_w2"
[ "$proxy_w2" -gt "$proxy_w1" ] || t_fail "the proxy did not write: syscw $proxy_w1 -> $proxy_w2"
[ "$cpus" = 1 ] || t_fail "detached thread allowed on '$cpus', not 1"
t_refused --note "a second detach pid" 1 "already detached" "$DETACH" pid -c 1 $p
"$DETACH" pid --attach $p || t_fail "detach pid --attach: exit $?"
after=$(awk '/Cpus_allowed_list/ {print $2}' /proc/$p/status); policy_after=$(policy $p)
echo "attached again: CPUs $after (before $before), policy $policy_after (before $policy_before), threads $(ls /proc/$p/task | wc -l)"
[ "$after" = "$before" ] || t_fail "affinity after --attach '$after', before '$before'"
[ "$policy_after" = "$policy_before" ] || t_fail "policy after --attach $policy_after, before $policy_before"
for i in $(seq 50); do [ -e "$proxy" ] || break; sleep 0.02; done   # the proxy's exit is its own
[ ! -e "$proxy" ] || t_fail "the proxy thread $proxy is still in /proc/$p/task after --attach"
main_w3=$(syscw /proc/$p/task/$p); sleep 0.2; main_w4=$(syscw /proc/$p/task/$p)
[ "$main_w4" -gt "$main_w3" ] || t_fail "attached again, the main thread does not write itself: syscw $main_w3 -> $main_w4"
wait $p; rc=$?
[ $rc = 0 ] || t_fail "writer exit $rc"
seq 0 399 | sed 's/^/line /' | cmp -s - "$T_TMP/out" || t_fail "output differs from the native lines 0..399 ($(wc -l <"$T_TMP/out") lines)"

# --- stopped in a blocking read ----------------------------------------------------
mkfifo "$T_TMP/fifo"
"$T_TMP/writer" reader <"$T_TMP/fifo" >"$T_TMP/read.out" & p=$!
exec 7>"$T_TMP/fifo"          # the reader's open returns; it blocks in read
sleep 0.3
"$DETACH" pid -c 1 $p || t_fail "detach pid of a blocked reader: exit $?"
sleep 0.2
echo "data after detach" >&7
exec 7>&-
wait $p; rc=$?
echo "blocked reader: exit $rc, $(cat "$T_TMP/read.out")"
[ $rc = 0 ] && grep -q "^read 18: data after detach" "$T_TMP/read.out" ||
	t_fail "the blocked read did not finish with the data: $(cat "$T_TMP/read.out")"

# --- the detached state survives the program's own execve --------------------------
mkfifo "$T_TMP/go"
sh -c 'read x <"$1"; exec "$2" 200' sh "$T_TMP/go" "$T_TMP/writer" >"$T_TMP/exec.out" & p=$!
sleep 0.3                     # the shell blocks opening the fifo
"$DETACH" pid -c 1 $p || t_fail "detach pid of a shell: exit $?"
echo go >"$T_TMP/go"
sleep 0.4
proxy=$(task_of $p detach-proxy)
main_w1=$(syscw /proc/$p/task/$p); proxy_w1=$(syscw "${proxy:-/nonexistent}" 2>/dev/null)
sleep 0.3
main_w2=$(syscw /proc/$p/task/$p); proxy_w2=$(syscw "${proxy:-/nonexistent}" 2>/dev/null)
echo "after exec: $(cat /proc/$p/comm), CPUs $(awk '/Cpus_allowed_list/ {print $2}' /proc/$p/status), main syscw $main_w1 -> $main_w2, proxy $proxy_w1 -> $proxy_w2"
[ "$(cat /proc/$p/comm)" = writer ] || t_fail "the shell did not exec the writer"
[ -n "$proxy" ] && [ "$main_w1" = "$main_w2" ] && [ "$proxy_w2" -gt "$proxy_w1" ] ||
	t_fail "after its execve the program is not detached: no proxy or the main thread writes itself"
[ "$(awk '/Cpus_allowed_list/ {print $2}' /proc/$p/status)" = 1 ] || t_fail "after its execve not on CPU 1"
wait $p; rc=$?
[ $rc = 0 ] && seq 0 199 | sed 's/^/line /' | cmp -s - "$T_TMP/exec.out" || t_fail "exec'd writer: exit $rc, output differs"

# --- refusals: one error line and a NOTE, exit 1 ----------------------------------
t_refused --note "no such process" 1 "no process" "$DETACH" pid 999999999
# options after the operand, as GNU tools take them; `--` ends them
t_refused --note "an option after the pid" 1 "no process" "$DETACH" pid 999999999 -c 1
t_refused --note "-- ends the options" 2 "unexpected argument '-c'" "$DETACH" pid 999999999 -- -c
if [ -x "$T_TMP/static" ]; then
	"$T_TMP/static" 300 >/dev/null & p=$!; sleep 0.1
	t_refused --note "static" 1 "not dynamically linked" "$DETACH" pid $p
	kill $p; wait $p 2>/dev/null
fi
if command -v strace >/dev/null; then
	strace -o /dev/null "$T_TMP/writer" 300 >/dev/null & s=$!; sleep 0.3
	p=$(pgrep -P $s writer || true)
	[ -z "$p" ] && p=$(pgrep -n -f "$T_TMP/writer 300")
	t_refused --note "traced" 1 "being traced" "$DETACH" pid $p
	kill $s 2>/dev/null; wait $s 2>/dev/null
fi
"$T_TMP/writer" 300 >/dev/null & p=$!; sleep 0.1
# kernel.yama.ptrace_scope 3 cannot be lowered again until a reboot (and
# Yama may not be built in): the refusal is shown in a mount namespace of
# its own whose /proc/sys/kernel holds ptrace_scope 3, the system's
# settings untouched
if command -v unshare >/dev/null; then
	t_refused --note "ptrace_scope 3" 1 "ptrace_scope is 3" unshare -m sh -c "mount -t tmpfs tmpfs /proc/sys/kernel &&
		mkdir /proc/sys/kernel/yama && echo 3 >/proc/sys/kernel/yama/ptrace_scope && exec '$DETACH' pid $p"
fi
pub=$(mktemp -d /tmp/detach-pub.XXXXXX); chmod 755 "$pub"; cp "$DETACH" "$pub/detach"
t_refused --note "another user's" 1 "CAP_SYS_PTRACE" setpriv --reuid=65534 --regid=65534 --clear-groups "$pub/detach" pid $p
rm -rf "$pub"
kill $p; wait $p 2>/dev/null
t_done
