# Description: detach check --measure leaves tracefs as it found it, byte for
# byte (mounts, instances, the global settings and every event filter, a user's
# own instance with its trace running): after a normal run, after kill -9 of
# the check (its guard process undoes the journal) and after kill -9 of the
# check and its guard (the next run undoes the dead run's journal), with
# tracefs mounted and not.
# Timeout: 180
. "$(dirname "$0")/helpers/lib.sh"
cd "$ROOT"
[ "$(id -u)" -eq 0 ] || t_skip "needs root (tracefs)"
[ "$(nproc --all)" -ge 2 ] || t_skip "needs 2 CPUs"
T=$T_TMP
TF=/sys/kernel/tracing
WE_MOUNTED=
USER_INST=
cleanup() {
	[ -n "$USER_INST" ] && { echo 0 > "$USER_INST/tracing_on"; rmdir "$USER_INST"; }
	[ -n "$WE_MOUNTED" ] && umount "$TF"
}
T_CLEANUP=cleanup
CPU=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')

# Everything a session could touch, read without changing anything.
snapshot() {
	grep -w tracefs /proc/mounts | cut -d' ' -f2
	for m in $(grep -w tracefs /proc/mounts | cut -d' ' -f2); do
		ls "$m/instances"
		for d in "$m" "$m"/instances/*; do
			[ -d "$d" ] || continue
			for f in tracing_on trace_clock buffer_size_kb current_tracer set_event \
				 tracing_cpumask trace_options buffer_percent; do
				[ -r "$d/$f" ] && { echo "== $d/$f"; cat "$d/$f"; }
			done
			grep -H . "$d"/per_cpu/cpu*/buffer_size_kb
		done
		grep -r . "$m/events" --include=filter --include=enable
	done
}

same() {   # WHAT
	snapshot >"$T/after" 2>&1
	if cmp -s "$T/before" "$T/after"; then echo "same: $1"
	else t_fail "tracefs changed $1:"; diff "$T/before" "$T/after" | head -20; fi
}

instance_of() { echo "$TF/instances/detach-$1"; }

# Starts a check, waits until its instance exists; echoes its pid.
start_check() {
	setsid "$DETACH" check -c "$CPU" --measure 20s >/dev/null 2>&1 &
	local pid=$! i
	for i in $(seq 100); do
		[ -d "$(instance_of $pid)" ] && break
		sleep 0.1
	done
	[ -d "$(instance_of $pid)" ] || t_fail "no instance for check $pid"
	echo $pid
}

gone() {   # PID: waits for its instance and journal to go
	local i
	for i in $(seq 100); do
		[ ! -e "/run/detach/trace-$1" ] && ! grep -qw tracefs /proc/mounts && return 0
		[ ! -e "/run/detach/trace-$1" ] && [ ! -d "$(instance_of $1)" ] && return 0
		sleep 0.1
	done
	return 1
}

cycle() {   # a normal run, kill -9 of the check, kill -9 of check and guard
	local pid guard
	"$DETACH" check -c "$CPU" --measure 300ms >/dev/null 2>"$T/err" || true
	grep -v '^$' "$T/err" && t_fail "stderr of a normal run"
	same "after a normal run ($1)"

	pid=$(start_check)
	kill -9 "$pid"
	gone "$pid" || t_fail "the guard left instance or journal of $pid"
	same "after kill -9 of the check ($1)"

	pid=$(start_check)
	guard=$(ps -o pid= --ppid "$pid" | tr -d ' ')
	[ -n "$guard" ] || t_fail "no guard process of $pid"
	kill -9 $guard "$pid"
	sleep 0.2
	[ -e "/run/detach/trace-$pid" ] || t_fail "the journal of $pid is gone though nobody replayed it"
	"$DETACH" check -c "$CPU" --measure 100ms >/dev/null 2>&1
	[ -e "/run/detach/trace-$pid" ] && t_fail "the next run did not replay the journal of $pid"
	same "after kill -9 of check and guard, then a run ($1)"
}

if ! grep -qw tracefs /proc/mounts; then
	snapshot >"$T/before" 2>&1
	cycle "tracefs not mounted"
	mount -t tracefs nodev "$TF" || t_skip "cannot mount tracefs"
	WE_MOUNTED=1
fi
# A user's trace running in an instance of its own must be left alone.
USER_INST=$TF/instances/user-trace-test
mkdir "$USER_INST"
echo 1 > "$USER_INST/events/sched/sched_wakeup/enable"
echo global > "$USER_INST/trace_clock"
echo 1 > "$USER_INST/tracing_on"
snapshot >"$T/before" 2>&1
cycle "tracefs mounted, a user's trace running"
t_done "tracefs as found every time"
