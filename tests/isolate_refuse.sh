# Description: bad CPU lists, bad options and non-root are refused with one
# error line and a NOTE, a non-zero exit, and nothing changed.
. "$(dirname "$0")/helpers/lib.sh"
cd "$ROOT"
[ "$(nproc --all)" -ge 2 ] || t_skip "needs 2 CPUs"
T=$T_TMP
ALL=$(cat /sys/devices/system/cpu/online)
AS_NOBODY=()
if [ "$(id -u)" -eq 0 ]; then
	t_isolate_lock
	[ ! -e $STATE ] || t_skip "the machine is isolated ($STATE exists): not touching it"
	command -v setpriv >/dev/null && AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi

[ "$(id -u)" -eq 0 ] && { t_snap_files >"$T/files.0"; t_snap_tasks >"$T/tasks.0"; }
t_refused --note "no -c"                 2 "" "$DETACH" isolate
t_refused --note "malformed list"        2 "" "$DETACH" isolate -c abc
t_refused --note "reversed range"        2 "" "$DETACH" isolate -c 1-0
t_refused --note "trailing comma"        2 "" "$DETACH" isolate -c 1,
t_refused --note "offline CPU"           2 "" "$DETACH" isolate -c 4095
t_refused --note "no housekeeping CPU"   2 "" "$DETACH" isolate -c "$ALL"
t_refused --note "no housekeeping (dry)" 2 "" "$DETACH" isolate -n -c "$ALL"
t_refused --note "--undo with -c"        2 "" "$DETACH" isolate --undo -c 1
t_refused --note "unknown option"        2 "" "$DETACH" isolate --bogus
t_refused --note "stray argument"        2 "" "$DETACH" isolate -c 1 extra
t_refused --note "check: malformed list" 2 "" "$DETACH" check -c 1-x
t_refused --note "check: offline CPU"    2 "" "$DETACH" check -c 4095
t_refused --note "check: bad --sample"   2 "" "$DETACH" check --sample soon
t_refused --note "isolate --help"        0 "" "$DETACH" isolate --help
t_refused --note "check --help"          0 "" "$DETACH" check --help
if [ "$(id -u)" -ne 0 ]; then
	t_refused --note "not root"        1 "" "$DETACH" isolate -c 1
	t_refused --note "undo, not root"  1 "" "$DETACH" isolate --undo
elif [ ${#AS_NOBODY[@]} -gt 0 ]; then
	t_refused --note "not root"        1 "" "${AS_NOBODY[@]}" "$DETACH" isolate -c 1
	t_refused --note "undo, not root"  1 "" "${AS_NOBODY[@]}" "$DETACH" isolate --undo
fi
if [ "$(id -u)" -eq 0 ]; then
	[ ! -e $STATE ] || t_fail "a refused command left $STATE"
	t_snap_files >"$T/files.1"; t_snap_tasks >"$T/tasks.1"
	t_same_files "$T/files.0" "$T/files.1" "after refused commands"
	ch=$(t_tasks_changed "$T/tasks.0" "$T/tasks.1")
	[ -z "$ch" ] || { t_fail "threads changed by refused commands:"; echo "$ch" | head; }
fi
t_done "every bad request was refused and nothing changed"
