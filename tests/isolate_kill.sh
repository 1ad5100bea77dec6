# Description: isolate killed with SIGKILL midway (after 1, 3, 20 and 60
# changes, and once more while resuming an interrupted run) leaves a state
# file from which --undo restores every control file and task.
# DETACH_TEST_PAUSE_AFTER=N is a test-only hook: isolate stops after N changes.
. "$(dirname "$0")/helpers/lib.sh"
cd "$ROOT"
t_need_isolation
T=$T_TMP

# Starts isolate paused after $1 changes, waits for the pause, SIGKILLs it.
# Returns 1 if isolate finished before reaching the pause (fewer changes).
kill_after() {
	DETACH_TEST_PAUSE_AFTER=$1 "$DETACH" isolate -c 1 >"$T/out.$1" 2>"$T/err.$1" &
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

t_snap_files >"$T/files.0"; t_snap_tasks >"$T/tasks.0"
for n in 1 3 20 60; do
	if ! kill_after $n; then
		echo "isolate finished in fewer than $n changes"
	fi
	[ -e $STATE ] || t_fail "no state file after SIGKILL at $n changes"
	if [ $n -eq 20 ]; then
		t_snap_files >"$T/files.k"
		cmp -s "$T/files.0" "$T/files.k" && t_fail "nothing had changed after 20 changes"
	fi
	"$DETACH" isolate --undo >"$T/undo.$n" 2>&1 || { t_fail "undo after kill at $n exited $?"; tail -n3 "$T/undo.$n"; }
	[ ! -e $STATE ] || t_fail "state file left after undo (kill at $n)"
	t_snap_files >"$T/files.$n"; t_snap_tasks >"$T/tasks.$n"
	t_same_files "$T/files.0" "$T/files.$n" "kill at $n changes, then undo"
	ch=$(t_tasks_changed "$T/tasks.0" "$T/tasks.$n")
	[ -z "$ch" ] || { t_fail "threads differ after kill at $n and undo:"; echo "$ch" | head -n5; }
done

# Killed, resumed (killed again later), then undone: the originals survive.
kill_after 10 || true
kill_after 40 || true
"$DETACH" isolate -c 1 >"$T/resume" 2>&1 || t_fail "isolate resuming an interrupted run exited $?"
"$DETACH" isolate --undo >"$T/undo.r" 2>&1 || t_fail "undo after resume exited $?"
t_snap_files >"$T/files.r"; t_snap_tasks >"$T/tasks.r"
t_same_files "$T/files.0" "$T/files.r" "kill, resume, undo"
ch=$(t_tasks_changed "$T/tasks.0" "$T/tasks.r")
[ -z "$ch" ] || { t_fail "threads differ after kill, resume and undo:"; echo "$ch" | head -n5; }
t_done "every interrupted isolate was undone exactly"
