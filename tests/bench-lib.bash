# Helpers for the bench_* shell tests (sourced; not a test itself).
ROOT=${DETACH_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
PY=$BUILD/venv/bin/python
[ -x "$PY" ] || PY=python3
fails=0
# validate SCHEMA FILE...: each FILE matches docs/schema/SCHEMA.schema.json
validate() { python3 "$ROOT/tests/validate_json.py" "$@" || fail "$2: not as docs/schema/$1.schema.json"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
skip() { echo "$*"; exit 77; }
# check WHAT EXPECTED-EXIT CMD...: runs CMD, compares its exit status
check() {
	local what=$1 want=$2; shift 2
	"$@" >/tmp/bench-test-out.$$ 2>&1
	local rc=$?
	if [ "$rc" != "$want" ]; then
		fail "$what: exit $rc, expected $want"; sed 's/^/    /' /tmp/bench-test-out.$$ | tail -5
	else
		echo "ok: $what"
	fi
	rm -f /tmp/bench-test-out.$$
}
done_tests() { [ $fails -eq 0 ] && echo "all checks passed" && exit 0; echo "$fails check(s) failed"; exit 1; }
