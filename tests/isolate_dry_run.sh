# Description: isolate --dry-run prints the changes it would make and changes
# nothing: no control file, no task, no state file (as root and as nobody).
. "$(dirname "$0")/helpers/lib.sh"
cd "$ROOT"
t_need_isolation
T=$T_TMP

t_snap_files >"$T/files.0"; t_snap_tasks >"$T/tasks.0"
"$DETACH" isolate -c 1 --dry-run >"$T/out" 2>&1 || t_fail "dry run exited $?"
grep -q '^would ' "$T/out" || t_fail "dry run printed no planned change"
grep -q 'nothing was changed' "$T/out" || t_fail "dry run did not say nothing was changed"
[ ! -e $STATE ] || t_fail "dry run wrote $STATE"
if command -v setpriv >/dev/null; then
	setpriv --reuid=65534 --regid=65534 --clear-groups "$DETACH" isolate -n -c 1 >"$T/out2" 2>&1 ||
		t_fail "dry run as nobody exited $?: $(head -n2 "$T/out2")"
fi
t_snap_files >"$T/files.1"; t_snap_tasks >"$T/tasks.1"
t_same_files "$T/files.0" "$T/files.1" "after --dry-run"
ch=$(t_tasks_changed "$T/tasks.0" "$T/tasks.1")
[ -z "$ch" ] || { t_fail "threads changed by --dry-run:"; echo "$ch" | head; }
t_done "dry run changed nothing"
