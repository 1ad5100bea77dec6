# Helpers for shell tests (sourced).  Exit 0 pass, 1 fail, 77 skip.
set -u
DETACH=$(realpath "${DETACH_BIN:-$(dirname "${BASH_SOURCE[0]}")/../build/detach}")
T_TMP=$(mktemp -d /tmp/detach-test.XXXXXX)
trap 'rm -rf "$T_TMP"' EXIT
t_fails=0

t_fail() { echo "FAIL: $*" >&2; t_fails=$((t_fails + 1)); }
t_skip() { echo "$*"; exit 77; }
t_done() { [ $t_fails -eq 0 ] && { echo "all checks passed"; exit 0; }; echo "$t_fails check(s) failed" >&2; exit 1; }
t_need_cpus() { [ "$(nproc --all)" -ge "$1" ] || t_skip "needs $1 CPUs"; }
t_need_root() { [ "$(id -u)" -eq 0 ] || t_skip "needs root"; }

# t_validate SCHEMA FILE...: each FILE matches docs/schema/SCHEMA.schema.json.
t_validate() {
	python3 "$(dirname "${BASH_SOURCE[0]}")/validate_json.py" "$@" >"$T_TMP/validate.out" 2>&1 ||
		t_fail "$(cat "$T_TMP/validate.out")"
}

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
		:   # killed by a signal: no statistics are written
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
