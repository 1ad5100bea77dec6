# Description: tests/compat/differ.py, the per-test comparison of the CPython
# and LTP harnesses, on small made-up results: differences, excluded
# differences with their reason, stale exclusions, absent tests, the
# closing line and the exit status.  And regrtest_outcomes.py on a made-up
# regrtest -v log: each kind of verbose line, the exit status, fatal markers.
. "$(dirname "$0")/helpers/lib.sh"
differ=$ROOT/tests/compat/differ.py
T=$T_TMP
tab=$'\t'

printf '%s\n' "a${tab}ok" "b${tab}ok" "c${tab}FAIL" "d${tab}exit=0 passed=3 failed=0" \
	"e${tab}ok" "grp.x${tab}ok" "grp.y${tab}ok" >"$T/native"
printf '%s\n' "a${tab}ok" "b${tab}ERROR" "c${tab}FAIL" "d${tab}exit=0 passed=3 failed=0" \
	"grp.x${tab}killed by SIGSEGV" "grp.y${tab}ok" "f${tab}ok" >"$T/detached"
cat >"$T/none" <<X
# nothing excluded
X
printf '%s\n' "# comment" "" "b${tab}sud,rewrite${tab}reads its own affinity from a child" \
	"grp.*${tab}*${tab}flaky natively" "e${tab}rewrite${tab}rewrite only" \
	"f${tab}sud${tab}new in detached runs" "gone${tab}*${tab}removed upstream" >"$T/excl"

# Nothing excluded: b, e (absent detached), grp.x and f (absent natively) differ.
"$PY" "$differ" --label "compat t sud" "$T/native" "$T/detached" "$T/none" >"$T/out1"; rc=$?
[ $rc = 1 ] || t_fail "differences not excluded: exit $rc, want 1"
grep -qx "DIFFERS${tab}b${tab}native: ok${tab}detached: ERROR" "$T/out1" || t_fail "b's difference not printed"
grep -qx "DIFFERS${tab}e${tab}native: ok${tab}detached: (absent)" "$T/out1" || t_fail "e absent detached not printed"
grep -qx "DIFFERS${tab}f${tab}native: (absent)${tab}detached: ok" "$T/out1" || t_fail "f absent natively not printed"
grep -qx "DIFFERS${tab}grp.x${tab}native: ok${tab}detached: killed by SIGSEGV" "$T/out1" || t_fail "grp.x not printed"
[ "$(tail -n 1 "$T/out1")" = "compat t sud: 4 same, 4 differ, 0 excluded" ] || t_fail "closing line: $(tail -n 1 "$T/out1")"
[ "$(grep -c '^DIFFERS' "$T/out1")" = 4 ] || t_fail "not exactly 4 differences: $(cat "$T/out1")"

# sud: b, grp.* and f excluded; e's rule is rewrite's; "gone" is stale.
"$PY" "$differ" --mode sud --label "compat t sud" "$T/native" "$T/detached" "$T/excl" >"$T/out2"; rc=$?
[ $rc = 1 ] || t_fail "e still differs in sud: exit $rc, want 1"
grep -qx "excluded${tab}b${tab}native: ok${tab}detached: ERROR${tab}(reads its own affinity from a child)" "$T/out2" ||
	t_fail "b's exclusion and reason not printed"
grep -q "^stale exclusion${tab}gone${tab}" "$T/out2" || t_fail "stale exclusion not printed"
grep -q "^stale exclusion${tab}e" "$T/out2" && t_fail "a rewrite-only rule printed in sud"
grep -q "^excluded${tab}grp.y" "$T/out2" && t_fail "an excluded test without difference printed"
[ "$(tail -n 1 "$T/out2")" = "compat t sud: 3 same, 1 differ, 4 excluded" ] || t_fail "closing line: $(tail -n 1 "$T/out2")"

# Everything differing excluded: exit 0.
printf '%s\n' "e${tab}sud${tab}x" >>"$T/excl"
"$PY" "$differ" --mode sud "$T/native" "$T/detached" "$T/excl" >"$T/out3"; rc=$?
[ $rc = 0 ] || t_fail "all differences excluded: exit $rc, want 0"
[ "$(tail -n 1 "$T/out3")" = "compat sud: 3 same, 0 differ, 5 excluded" ] || t_fail "closing line: $(tail -n 1 "$T/out3")"

# Duplicate ids join their outcomes; bad lines and reasonless exclusions are refused.
printf '%s\n' "a${tab}ok" "a${tab}FAIL" >"$T/dup"
"$PY" "$differ" "$T/native" "$T/dup" "$T/none" >"$T/out4"
grep -qx "DIFFERS${tab}a${tab}native: ok${tab}detached: ok + FAIL" "$T/out4" ||
	t_fail "duplicate outcomes not joined"
echo "no tab here" >"$T/bad"
"$PY" "$differ" "$T/bad" "$T/detached" "$T/none" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "bad:1" "$T/err" || t_fail "a bad result line: exit $rc, $(cat "$T/err")"
printf '%s\n' "a${tab}*${tab} " >"$T/noreason"
"$PY" "$differ" "$T/native" "$T/detached" "$T/noreason" >/dev/null 2>&1; rc=$?
[ $rc = 2 ] || t_fail "an exclusion without a reason: exit $rc, want 2"

# regrtest_outcomes.py: a status after the test's output, a docstring line,
# a subtest, a duration, a script's tests run by a test, a crash at exit.
cat >"$T/log" <<'X'
test_a (m.C.test_a) ... ok
test_b (m.C.test_b) ... some output
FAIL
test_c (m.C.test_c)
The docstring ... skipped 'no reason'
test_d (m.C.test_d) ...
  test_d (m.C.test_d) (i=1) ... ERROR
test_e (m.C.test_e) ... 0.25s ok
test_all (m.E.test_all) ...
test_x (__main__.S.test_x) ... ok
ok
test_f (m.C.test_f) ...
free(): invalid pointer
X
"$PY" "$ROOT/tests/compat/regrtest_outcomes.py" grp "$T/log" 134 >"$T/tsv" 2>"$T/fatal"
printf '%s\n' "m.C.test_a${tab}ok" "m.C.test_b${tab}FAIL" "m.C.test_c${tab}skipped" \
	"m.C.test_d (i=1)${tab}ERROR" "m.C.test_d${tab}subtests reported" "m.C.test_e${tab}ok" \
	"m.E.test_all/__main__.S.test_x${tab}ok" "m.E.test_all${tab}ok" "m.C.test_f${tab}no verdict" \
	"grp:exit${tab}killed by SIGABRT" "grp:fatal${tab}free(): invalid pointer" >"$T/want"
diff "$T/want" "$T/tsv" >&2 || t_fail "regrtest_outcomes.py: outcomes differ from the expected (above)"
grep -q "fatal marker: free(): invalid pointer" "$T/fatal" || t_fail "regrtest_outcomes.py: no fatal marker on stderr"
head -n 3 "$T/log" >"$T/log3"
"$PY" "$ROOT/tests/compat/regrtest_outcomes.py" grp "$T/log3" 2 >"$T/tsv3"
grep -qx "grp:exit${tab}as its tests say" "$T/tsv3" ||
	t_fail "regrtest_outcomes.py: exit 2 with a failing test is not 'as its tests say'"
t_done
