# The helper library of the shell tests (sourced).  Exit 0 pass, 1 fail, 77
# skip with the reason as the last line.  Verbs:
#   t_fail MSG           a failed check (the test goes on; t_done counts)
#   t_skip WHY           skip the test now
#   t_done [MSG]         the end: exit 0 (printing MSG) or 1
#   t_need_cpus N, t_need_root, t_need_fuse (/dev/fuse opens: detach ctl's
#                        files, detach-rtl's /dev/rtfN),
#                        t_need_isolation (root, CPU 1, cpusets, the
#                        isolate tests' lock, the machine not isolated; and
#                        `detach isolate --undo` at exit)
#   t_check WHAT WANT CMD...          CMD exits WANT
#   t_watched SECS CMD...  CMD's exit status, or 124 after SECS with a hang
#                        report of its processes (state, wait channel, call)
#   t_refused [--note] WHAT WANT PATTERN CMD...
#                        CMD exits WANT with one "detach: error:" line on
#                        stderr matching PATTERN (and a NOTE line)
#   t_compare NAME CMD...             same output and exit natively and detached
#   t_validate SCHEMA FILE...         JSON as docs/schema/SCHEMA.schema.json says
#   t_stat, t_check_rewrite           a --stats file's figures
#   t_reap_registry      after killing a detached program: its registry file
#   t_snap_files, t_snap_tasks, t_same_files, t_tasks_changed: snapshots of
#                        what `detach isolate` changes, independent of its journal
# Variables: DETACH (the command), T_TMP (removed at exit, after the command
# in T_CLEANUP), ROOT, BUILD, PY (the venv's python), STATE (isolate's file).
set -u
ROOT=${DETACH_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
DETACH=$(realpath "${DETACH_BIN:-$BUILD/detach}")
PY=$BUILD/venv/bin/python
[ -x "$PY" ] || PY=python3
T_TMP=$(mktemp -d /tmp/detach-test.XXXXXX)
T_CLEANUP=
trap 'eval "$T_CLEANUP"; rm -rf "$T_TMP"' EXIT
t_fails=0
. "$(dirname "${BASH_SOURCE[0]}")/state.sh"
STATE=$ISOLATE_STATE

t_fail() { echo "FAIL: $*" >&2; t_fails=$((t_fails + 1)); }
# A skip after a failed check is a failure: the failure must not be hidden.
t_skip() {
	if [ $t_fails -gt 0 ]; then echo "$t_fails check(s) failed, then: $*" >&2; exit 1; fi
	echo "$*"; exit 77
}
t_done() {
	if [ $t_fails -eq 0 ]; then echo "${1:-all checks passed}"; exit 0; fi
	echo "$t_fails check(s) failed" >&2; exit 1
}
t_need_cpus() { [ "$(nproc --all)" -ge "$1" ] || t_skip "needs $1 CPUs"; }
t_need_root() { [ "$(id -u)" -eq 0 ] || t_skip "needs root"; }
t_need_fuse() {
	{ : <>/dev/fuse; } 2>/dev/null ||
		t_skip "no usable /dev/fuse (modprobe fuse; in a container: --device /dev/fuse)"
}

# t_watched SECS CMD...: runs CMD; past SECS, prints what each thread of
# CMD's processes is doing (/proc: state, wait channel, the system call it
# is in, its user and system CPU time in ticks, its kernel stack) and
# `detach ps`, kills them, and returns 124.  A test whose command hangs says
# where, instead of vanishing in the runner's time limit.  The system call
# is read with a limit: for a thread that runs on in the kernel, reading
# /proc/TID/syscall waits until it stops running (wait_task_inactive), and
# the report itself hung.
t_watched() {
	local secs=$1 pid i tids t state utime stime; shift
	setsid "$@" & pid=$!
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || { wait "$pid"; return; }
		sleep 0.1
	done
	echo "hang report: $* still running after ${secs}s"
	for p in $(ps -o pid= -s "$pid"); do
		for t in /proc/"$p"/task/*; do
			tids=${t##*/}
			# state, utime, stime: one read of stat
			read -r state utime stime < <(awk '{ print $3, $14, $15 }' "$t/stat" 2>/dev/null)
			printf '  %s/%s %s state=%s wchan=%s syscall=%s utime=%s stime=%s\n' "$p" "$tids" \
				"$(cat "$t/comm" 2>/dev/null)" "${state-}" "$(cat "$t/wchan" 2>/dev/null)" \
				"$(timeout 1 cut -d' ' -f1 "$t/syscall" 2>/dev/null || echo '?')" "${utime-}" "${stime-}"
			sed 's/^/      /' "$t/stack" 2>/dev/null
		done
	done
	"$DETACH" ps 2>&1 | sed 's/^/  /'
	kill -KILL -- -"$pid" 2>/dev/null
	wait "$pid"
	return 124
}

# t_check WHAT WANT CMD...: CMD's exit status is WANT (its output shown if not).
t_check() {
	local what=$1 want=$2 rc; shift 2
	"$@" >"$T_TMP/check.out" 2>&1; rc=$?
	if [ "$rc" != "$want" ]; then
		t_fail "$what: exit $rc, want $want"; sed 's/^/    /' "$T_TMP/check.out" | tail -5
	else
		echo "ok: $what"
	fi
}

# t_refused [--note] WHAT WANT PATTERN CMD...: CMD exits WANT; unless WANT
# is 0, stderr holds exactly one "detach: error:" line, a line matching the
# extended regex PATTERN (if not empty) and, with --note, a "NOTE:" line.
t_refused() {
	local note=0 what want pattern rc err
	[ "$1" = --note ] && { note=1; shift; }
	what=$1 want=$2 pattern=$3; shift 3
	err=$("$@" 2>&1 >/dev/null); rc=$?
	if [ "$rc" != "$want" ]; then t_fail "$what: exit $rc, want $want ($err)"; return; fi
	if [ "$want" != 0 ]; then
		[ "$(grep -c '^detach: error:' <<<"$err")" = 1 ] || t_fail "$what: not exactly one error line: $err"
		[ $note = 0 ] || grep -q '^NOTE: ' <<<"$err" || t_fail "$what: no NOTE line: $err"
		[ -z "$pattern" ] || grep -qE "$pattern" <<<"$err" || t_fail "$what: no line matching '$pattern' in: $err"
	fi
	echo "ok: $what (exit $rc)"
}

# t_validate SCHEMA FILE...: each FILE matches docs/schema/SCHEMA.schema.json.
t_validate() {
	python3 "$(dirname "${BASH_SOURCE[0]}")/validate_json.py" "$@" >"$T_TMP/validate.out" 2>&1 ||
		t_fail "$(cat "$T_TMP/validate.out")"
}

# ---- runs under detach -------------------------------------------------------

# A value from a --stats JSON file: t_stat FILE KEY (first thread).
t_stat() {
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["threads"][0][sys.argv[2]])' "$1" "$2"
}

# In rewrite mode (DETACH_MODE=rewrite, the runner's second pass) a run must
# have rewritten sites and taken no more traps than sites, but at sites it
# refused: a runtime that silently fell back to sud fails here.
t_check_rewrite() {
	[ "${DETACH_MODE:-}" = rewrite ] || return 0
	python3 - "$1" "$2" <<'PY' || t_fail "$1: rewrite mode not in effect"
import json, sys
d = json.load(open(sys.argv[2]))
t = d["threads"][0]
ok = d["mode"] == "rewrite" and t["sites_rewritten"] > 0 and \
     t["traps"] - t["traps_refused"] <= t["sites_rewritten"] + t["sites_refused"]
print(f"{sys.argv[1]}: mode {d['mode']}, {t['sites_rewritten']} sites rewritten, "
      f"{t['sites_refused']} refused, {t['traps']} traps ({t['traps_refused']} at refused sites)")
sys.exit(0 if ok else 1)
PY
}

# t_compare NAME CMD...: runs CMD natively and under `detach run -c 1`, from
# the same directory and input; stdout and exit status must match, and the
# detached run must show forwarded calls on CPU 1.  T_FILTER: a sed script
# for both outputs, for lines that differ between any two runs.
t_compare() {
	local name=$1; shift
	local dir=$T_TMP/$name
	mkdir -p "$dir/native" "$dir/detached"
	(cd "$dir/native" && "$@" <"${T_STDIN:-/dev/null}" >../native.out 2>../native.err); local rc_native=$?
	(cd "$dir/detached" && "$DETACH" run -c 1 --stats "$dir/stats.json" -- "$@" <"${T_STDIN:-/dev/null}" \
		>../detached.out 2>../detached.err); local rc_detached=$?
	[ $rc_detached -ne 2 ] || cat "$dir/detached.err" >&2
	if [ -n "${T_FILTER:-}" ]; then     # a line that differs between any two runs
		sed -i "$T_FILTER" "$dir/native.out" "$dir/detached.out"
	fi
	if ! cmp -s "$dir/native.out" "$dir/detached.out"; then
		t_fail "$name: output differs"; diff "$dir/native.out" "$dir/detached.out" | head -5 >&2
	fi
	[ $rc_native -eq $rc_detached ] || t_fail "$name: exit status $rc_detached, natively $rc_native"
	if [ "${T_NO_STATS:-0}" = 1 ]; then
		t_reap_registry   # killed by a signal: no statistics, the registry file stays
	elif [ ! -s "$dir/stats.json" ]; then
		t_fail "$name: no statistics written"
	else
		local fwd cpu
		fwd=$(t_stat "$dir/stats.json" forwarded) cpu=$(t_stat "$dir/stats.json" cpu)
		[ "$fwd" -gt 0 ] || t_fail "$name: no forwarded calls"
		[ "$cpu" = 1 ] || t_fail "$name: detached on CPU $cpu, not 1"
		t_check_rewrite "$name" "$dir/stats.json"
		t_validate run-stats "$dir/stats.json"
		echo "$name: exit $rc_detached, $fwd forwarded on CPU $cpu"
	fi
}

# A program killed by a signal cannot remove its registry file in
# /dev/shm/detach; `detach ps` removes the files of dead programs, as it does
# for any user.  A test that kills a detached program calls this after.
t_reap_registry() { "$DETACH" ps >/dev/null 2>&1; }

# ---- isolation ---------------------------------------------------------------

# Isolation is machine-wide: tests that change it or compare snapshots take
# turns (a second test run on the machine would otherwise see their changes).
t_isolate_lock() {
	exec 9>/run/detach-isolate-tests.lock
	flock -w 600 9 || t_skip "another isolate test held /run/detach-isolate-tests.lock for 10 minutes"
}

t_need_isolation() {
	[ "$(id -u)" -eq 0 ] || t_skip "needs root (isolate changes system settings)"
	t_need_cpus 2
	grep -qw 1 <(t_cpus_of "$(cat /sys/devices/system/cpu/online)") || t_skip "CPU 1 is offline"
	cpuset_root >/dev/null || t_skip "no cpuset controller mounted"
	t_isolate_lock
	[ ! -e "$STATE" ] || t_skip "the machine is isolated already ($STATE exists): not touching it"
	T_CLEANUP='"$DETACH" isolate --undo >/dev/null 2>&1'   # whatever happens
}

# The CPUs of a list, one a line (the tools' parser, tools/detach_tools/cpus.py).
t_cpus_of() { PYTHONPATH=$ROOT/tools python3 -c '
import sys
from detach_tools.cpus import parse_cpulist
print(*sorted(parse_cpulist(sys.argv[1])), sep="\n")' "$1"; }

# Every control file isolate may write, "path=value", sorted; plus the list
# of cgroup directories.
t_snap_files() {
	local root f
	root=$(cpuset_root)
	{
		find "$root" -type d | sed 's/^/dir /'
		find "$root" \( -name cpuset.cpus -o -name cpuset.mems -o -name cpuset.sched_load_balance \
			-o -name cpuset.cpu_exclusive -o -name cgroup.subtree_control -o -name cpuset.cpus.partition \) |
		while read -r f; do echo "$f=$(cat "$f" 2>/dev/null)"; done
		isolation_files
	} | sort
}

# "tid:starttime affinity cpuset" for every thread; a thread is the same
# thread in two snapshots only if tid and start time agree.
t_snap_tasks() {
	local t st aff cs
	for t in /proc/[0-9]*/task/[0-9]*; do
		st=$(cut -d' ' -f22 "$t/stat" 2>/dev/null) || continue
		aff=$(awk '/^Cpus_allowed_list/ {print $2}' "$t/status" 2>/dev/null)
		cs=$(cat "$t/cpuset" 2>/dev/null)
		# A thread that exits between these reads leaves one of them empty:
		# it is gone, not changed.
		[ -n "$st" ] && [ -n "$aff" ] && [ -n "$cs" ] || continue
		echo "${t##*/}:$st $aff $cs"
	done | sort
}

# Threads present in both snapshots whose affinity or cpuset differ.
t_tasks_changed() { join "$1" "$2" | awk '$2 != $4 || $3 != $5'; }

# t_same_files BEFORE AFTER WHEN: the two snapshots agree; names the differences.
t_same_files() {
	if ! diff "$1" "$2" >/dev/null; then
		t_fail "$3: control files differ:"
		diff "$1" "$2" | head -n 20
		return 1
	fi
}
