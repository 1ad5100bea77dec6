# Description: isolate killed with SIGKILL midway (after 1, 3, 20 and 60
# changes, and once more while resuming an interrupted run) leaves a state
# file from which --undo restores every control file and task.
# DETACH_TEST_PAUSE_AFTER=N is a test-only hook: isolate stops after N changes.
set -u
cd "$(dirname "$0")/.."
. tests/isolate_common.bash
need_root_2cpus
T=$(mktemp -d)
trap '"$D" isolate --undo >/dev/null 2>&1; rm -rf "$T"' EXIT
FAILED=0

# Starts isolate paused after $1 changes, waits for the pause, SIGKILLs it.
# Returns 1 if isolate finished before reaching the pause (fewer changes).
kill_after() {
	DETACH_TEST_PAUSE_AFTER=$1 "$D" isolate -c 1 >"$T/out.$1" 2>"$T/err.$1" &
	local pid=$! i
	for i in $(seq 1 200); do
		grep -q 'paused after' "$T/err.$1" && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q 'paused after' "$T/err.$1"; then
		wait $pid
		return 1
	fi
	kill -KILL $pid; wait $pid 2>/dev/null
	return 0
}

snap_files >"$T/files.0"; snap_tasks >"$T/tasks.0"
for n in 1 3 20 60; do
	if ! kill_after $n; then
		echo "isolate finished in fewer than $n changes"
	fi
	[ -e $STATE ] || fail "no state file after SIGKILL at $n changes"
	if [ $n -eq 20 ]; then
		snap_files >"$T/files.k"
		cmp -s "$T/files.0" "$T/files.k" && fail "nothing had changed after 20 changes"
	fi
	"$D" isolate --undo >"$T/undo.$n" 2>&1 || { fail "undo after kill at $n exited $?"; tail -n3 "$T/undo.$n"; }
	[ ! -e $STATE ] || fail "state file left after undo (kill at $n)"
	snap_files >"$T/files.$n"; snap_tasks >"$T/tasks.$n"
	same_files "$T/files.0" "$T/files.$n" "kill at $n changes, then undo"
	ch=$(tasks_changed "$T/tasks.0" "$T/tasks.$n")
	[ -z "$ch" ] || { fail "threads differ after kill at $n and undo:"; echo "$ch" | head -n5; }
done

# Killed, resumed (killed again later), then undone: the originals survive.
kill_after 10 || true
kill_after 40 || true
"$D" isolate -c 1 >"$T/resume" 2>&1 || fail "isolate resuming an interrupted run exited $?"
"$D" isolate --undo >"$T/undo.r" 2>&1 || fail "undo after resume exited $?"
snap_files >"$T/files.r"; snap_tasks >"$T/tasks.r"
same_files "$T/files.0" "$T/files.r" "kill, resume, undo"
ch=$(tasks_changed "$T/tasks.0" "$T/tasks.r")
[ -z "$ch" ] || { fail "threads differ after kill, resume and undo:"; echo "$ch" | head -n5; }
[ $FAILED -eq 0 ] && echo "every interrupted isolate was undone exactly"
exit $FAILED
