# Description: start-up under limits the program would survive natively:
# under `ulimit -f` the runtime's statistics never kill the program
# (SIGXFSZ), they are left out with a warning; valgrind under detach is
# refused with one clear error, not killed by SIGSYS.
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2

out=$(ulimit -f 200; "$DETACH" run -c 1 -- echo hi 2>"$T_TMP/err"); rc=$?
echo "ulimit -f 200: exit $rc, '$out'"
[ $rc = 0 ] && [ "$out" = hi ] || t_fail "ulimit -f 200: exit $rc, '$out': $(cat "$T_TMP/err")"
# a statistics file larger than the limit (1 KiB): left out, the program unharmed
# (stderr through a pipe: a file would be cut at the limit too)
out=$( { (ulimit -f 1; "$DETACH" run -c 1 --stats "$T_TMP/st.json" -- python3 -c 'print("hi")' 2>&1 >&3 3>&-) |
	cat > "$T_TMP/err"; exit "${PIPESTATUS[0]}"; } 3>&1); rc=$?
echo "ulimit -f 1 --stats: exit $rc, '$out'; $(grep statistics "$T_TMP/err")"
[ $rc = 0 ] && [ "$out" = hi ] || t_fail "ulimit -f 1 --stats: exit $rc, '$out': $(cat "$T_TMP/err")"
grep -q "warning: statistics not written.*file size limit" "$T_TMP/err" ||
	t_fail "ulimit -f 1 --stats: no warning that the statistics were left out"
[ ! -s "$T_TMP/st.json" ] || [ "$(stat -c %s "$T_TMP/st.json")" -le 1024 ] || t_fail "a statistics file past the limit"

if command -v valgrind >/dev/null; then
	out=$("$DETACH" run -c 1 -- valgrind --tool=none /bin/echo vg 2>"$T_TMP/err"); rc=$?
	echo "valgrind: exit $rc: $(grep 'detach: error' "$T_TMP/err")"
	[ $rc = 1 ] || t_fail "valgrind under detach: exit $rc, want 1 (refused): $(tail -3 "$T_TMP/err")"
	grep -q "detach: error: the program runs under valgrind" "$T_TMP/err" ||
		t_fail "valgrind under detach: no error saying why: $(tail -3 "$T_TMP/err")"
	# the launcher's image had the runtime, valgrind's static tool has none:
	# its registry file stays until `detach ps` finds the process gone
	t_reap_registry
else
	echo "valgrind: not installed (tools/install-deps.sh installs it), not checked"
fi
t_done
