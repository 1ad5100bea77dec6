#!/usr/bin/env bash
# CPython's own test_signal and test_posix, natively and under `detach run`
# in each mode: the totals (tests run, skipped, failed, errors) must be the
# same.  `make compat` runs it; CI runs `make compat` after `make test`.
# Needs Debian's libpython3.11-testsuite (tools/install-deps.sh --compat).
source "$(dirname "$0")/../helpers/lib.sh"
t_need_cpus 2
py=/usr/bin/python3
modules=(test_signal test_posix)
$py -c 'import test.test_signal, test.test_posix' 2>/dev/null ||
	t_skip "CPython's test suite is not installed (apt-get install libpython3.11-testsuite)"

# "Ran N tests" and the verdict line of each module, in order.
totals() {   # LOG
	grep -E '^Ran [0-9]+ tests? in|^(OK|FAILED)( \(.*\))?$' "$1" | sed 's/ in [0-9.]*s$//'
}
run() {   # NAME CMD...
	local name=$1; shift
	(cd "$T_TMP" && "$@" $py -m test -v "${modules[@]}" >"$T_TMP/$name.log" 2>&1)
	totals "$T_TMP/$name.log" >"$T_TMP/$name.totals"
	echo "$name: $(tr '\n' ' ' <"$T_TMP/$name.totals")"
}
run native
for mode in ${TEST_MODES:-sud rewrite}; do
	run "$mode" "$DETACH" run -c 1 --mode "$mode" --
	if ! cmp -s "$T_TMP/native.totals" "$T_TMP/$mode.totals"; then
		t_fail "$mode: totals differ from native"
		grep -E '^(FAIL|ERROR): ' "$T_TMP/$mode.log" | head -20 >&2
	fi
done
t_done
