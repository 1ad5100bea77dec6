# Description: `detach run` refuses bad input with one error line and the
# documented exit status; the exit status of a program reaches the caller.
. "$(dirname "$0")/lib.sh"
t_need_cpus 2

# check WHAT EXPECTED-EXIT PATTERN -- ARGS...: exit status and a stderr line
check() {
	local what=$1 want=$2 pattern=$3; shift 4
	local out rc
	out=$("$DETACH" "$@" 2>&1 >/dev/null); rc=$?
	[ "$rc" = "$want" ] || t_fail "$what: exit $rc, want $want ($out)"
	if [ -n "$pattern" ] && ! grep -qE "$pattern" <<<"$out"; then
		t_fail "$what: no line matching '$pattern' in: $out"
	fi
	echo "ok: $what (exit $rc)"
}

printf 'int main(void){return 0;}\n' > "$T_TMP/s.c"
gcc -static -o "$T_TMP/static" "$T_TMP/s.c" 2>/dev/null || t_skip "cannot build a static program (libc6-dev)"
printf '#!/bin/sh\necho hi\n' > "$T_TMP/noexec.sh"; chmod 644 "$T_TMP/noexec.sh"

check "unknown option"        2 "^detach: error:.*|unrecognized option" -- run --bogus -- true
check "malformed CPU list"    2 "malformed CPU list.*'1-x'" -- run -c 1-x -- true
check "offline CPU"           2 "CPU 9.* not online" -- run -c 9 -- true
check "no housekeeping CPU"   2 "no housekeeping CPU" -- run -c 0-1 -- true
check "overlap -c and -H"     2 "both detached" -- run -c 1 -H 0-1 -- true
check "missing command"       2 "no command given" -- run -c 1
check "command not found"     127 "command not found" -- run -c 1 -- no-such-command-xyz
check "not executable"        126 "permission denied" -- run -c 1 -- "$T_TMP/noexec.sh"
check "static program"        1 "statically linked" -- run -c 1 -- "$T_TMP/static"
check "bad policy"            2 "bad policy" -- run -c 1 -P f:100 -- true
check "bad mode"              2 "unknown mode" -- run -c 1 --mode fast -- true
check "bad --mlock"           2 "unknown --mlock" -- run -c 1 --mlock some -- true
check "bad proxy wait"        2 "unknown proxy wait" -- run -c 1 --proxy sleep -- true
check "unknown verb"          2 "unknown verb" -- frobnicate
check "help"                  0 "" -- run --help
out=$(taskset -c 0 "$DETACH" run -c 1 -- true 2>&1); rc=$?
if [ -d /sys/fs/cgroup/cpuset/detach ] || [ -d /sys/fs/cgroup/detach ]; then
	echo "skip: outside-affinity check (a detach partition exists)"
else
	[ $rc = 2 ] && grep -q "outside this process's affinity" <<<"$out" || t_fail "CPU outside affinity: exit $rc: $out"
fi
# every error is one line plus at most a NOTE line
out=$("$DETACH" run -c 1-x -- true 2>&1 >/dev/null)
[ "$(grep -vc '^NOTE: ' <<<"$out")" = 1 ] || t_fail "more than one error line: $out"

# exit status and terminating signal reach the caller as a shell reports them
"$DETACH" run -c 1 -- sh -c 'exit 42'; [ $? = 42 ] || t_fail "exit 42 not passed on"
"$DETACH" run -c 1 -- sh -c 'kill -TERM $$'; [ $? = 143 ] || t_fail "SIGTERM not passed on"

# without root: the program runs; --mlock all says what the memlock limit costs
if [ -d /sys/fs/cgroup/cpuset/detach ] || [ -d /sys/fs/cgroup/detach ]; then
	echo "skip: non-root checks (a detach partition exists: CPU 1 is root's)"
elif [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	nobody() { env -u DETACH_MODE setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	out=$(nobody "$DETACH" run -c 1 -- /bin/echo ran 2>&1); rc=$?
	[ $rc = 0 ] && grep -q '^ran$' <<<"$out" || t_fail "non-root run: exit $rc: $out"
	! grep -q "warning: not root" <<<"$out" || t_fail "non-root run: a memlock warning by default: $out"
	out=$(nobody "$DETACH" run -c 1 --mlock all -- /bin/echo ran 2>&1); rc=$?
	[ $rc = 0 ] && grep -q "warning: not root: --mlock all" <<<"$out" ||
		t_fail "non-root --mlock all: exit $rc, no warning about the limit: $out"
	out=$(nobody "$DETACH" run -c 1 -P f:10 -- true 2>&1); rc=$?
	[ $rc = 1 ] && grep -q "needs root" <<<"$out" || t_fail "non-root -P f:10: exit $rc: $out"
fi
t_done
