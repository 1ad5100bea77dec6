# Description: bad CPU lists, bad options and non-root are refused with one
# error line and a NOTE, a non-zero exit, and nothing changed.
set -u
cd "$(dirname "$0")/.."
. tests/isolate_common.bash
[ "$(nproc --all)" -ge 2 ] || skip "needs 2 CPUs"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
FAILED=0
ALL=$(cat /sys/devices/system/cpu/online)
AS_NOBODY=()
if [ "$(id -u)" -eq 0 ]; then
	take_test_lock
	[ ! -e $STATE ] || skip "the machine is isolated ($STATE exists): not touching it"
	command -v setpriv >/dev/null && AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi

# check "what" expected-exit args...: exit status, one error line, a NOTE.
check() {
	local what=$1 want=$2; shift 2
	"$@" >"$T/out" 2>"$T/err"
	local rc=$?
	if [ $rc -ne "$want" ]; then fail "$what: exit $rc, want $want"; cat "$T/err"; return; fi
	[ "$want" -eq 0 ] && return
	[ "$(grep -c '^detach: error:' "$T/err")" -eq 1 ] || { fail "$what: not exactly one error line"; cat "$T/err"; }
	grep -q '^NOTE: ' "$T/err" || fail "$what: no NOTE line"
}

[ "$(id -u)" -eq 0 ] && { snap_files >"$T/files.0"; snap_tasks >"$T/tasks.0"; }
check "no -c"                 2 "$D" isolate
check "malformed list"        2 "$D" isolate -c abc
check "reversed range"        2 "$D" isolate -c 1-0
check "trailing comma"        2 "$D" isolate -c 1,
check "offline CPU"           2 "$D" isolate -c 4095
check "no housekeeping CPU"   2 "$D" isolate -c "$ALL"
check "no housekeeping (dry)" 2 "$D" isolate -n -c "$ALL"
check "--undo with -c"        2 "$D" isolate --undo -c 1
check "unknown option"        2 "$D" isolate --bogus
check "stray argument"        2 "$D" isolate -c 1 extra
check "check: malformed list" 2 "$D" check -c 1-x
check "check: offline CPU"    2 "$D" check -c 4095
check "check: bad --sample"   2 "$D" check --sample soon
check "isolate --help"        0 "$D" isolate --help
check "check --help"          0 "$D" check --help
if [ "$(id -u)" -ne 0 ]; then
	check "not root"        1 "$D" isolate -c 1
	check "undo, not root"  1 "$D" isolate --undo
elif [ ${#AS_NOBODY[@]} -gt 0 ]; then
	check "not root"        1 "${AS_NOBODY[@]}" "$D" isolate -c 1
	check "undo, not root"  1 "${AS_NOBODY[@]}" "$D" isolate --undo
fi
if [ "$(id -u)" -eq 0 ]; then
	[ ! -e $STATE ] || fail "a refused command left $STATE"
	snap_files >"$T/files.1"; snap_tasks >"$T/tasks.1"
	same_files "$T/files.0" "$T/files.1" "after refused commands"
	ch=$(tasks_changed "$T/tasks.0" "$T/tasks.1")
	[ -z "$ch" ] || { fail "threads changed by refused commands:"; echo "$ch" | head; }
fi
[ $FAILED -eq 0 ] && echo "every bad request was refused and nothing changed"
exit $FAILED
