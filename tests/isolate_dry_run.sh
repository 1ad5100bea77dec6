# Description: isolate --dry-run prints the changes it would make and changes
# nothing: no control file, no task, no state file (as root and as nobody).
set -u
cd "$(dirname "$0")/.."
. tests/isolate_common.bash
need_root_2cpus
T=$(mktemp -d)
trap '"$D" isolate --undo >/dev/null 2>&1; rm -rf "$T"' EXIT
FAILED=0

snap_files >"$T/files.0"; snap_tasks >"$T/tasks.0"
"$D" isolate -c 1 --dry-run >"$T/out" 2>&1 || fail "dry run exited $?"
grep -q '^would ' "$T/out" || fail "dry run printed no planned change"
grep -q 'nothing was changed' "$T/out" || fail "dry run did not say nothing was changed"
[ ! -e $STATE ] || fail "dry run wrote $STATE"
if command -v setpriv >/dev/null; then
	setpriv --reuid=65534 --regid=65534 --clear-groups "$D" isolate -n -c 1 >"$T/out2" 2>&1 ||
		fail "dry run as nobody exited $?: $(head -n2 "$T/out2")"
fi
snap_files >"$T/files.1"; snap_tasks >"$T/tasks.1"
same_files "$T/files.0" "$T/files.1" "after --dry-run"
ch=$(tasks_changed "$T/tasks.0" "$T/tasks.1")
[ -z "$ch" ] || { fail "threads changed by --dry-run:"; echo "$ch" | head; }
[ $FAILED -eq 0 ] && echo "dry run changed nothing"
exit $FAILED
