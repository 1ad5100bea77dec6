# Description: `detach run` refuses bad input with one error line and the
# documented exit status; the exit status of a program reaches the caller.
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2

printf 'int main(void){return 0;}\n' > "$T_TMP/s.c"
gcc -static -o "$T_TMP/static" "$T_TMP/s.c" 2>/dev/null || t_skip "cannot build a static program (libc6-dev)"
printf '#!/bin/sh\necho hi\n' > "$T_TMP/noexec.sh"; chmod 644 "$T_TMP/noexec.sh"

t_refused "unknown option"        2 "^detach: error:.*|unrecognized option" "$DETACH" run --bogus -- true
t_refused "malformed CPU list"    2 "malformed CPU list.*'1-x'" "$DETACH" run -c 1-x -- true
t_refused "offline CPU"           2 "CPU 9.* not online" "$DETACH" run -c 9 -- true
t_refused "no housekeeping CPU"   2 "no housekeeping CPU" "$DETACH" run -c 0-1 -- true
t_refused "overlap -c and -H"     2 "both detached" "$DETACH" run -c 1 -H 0-1 -- true
t_refused "missing command"       2 "no command given" "$DETACH" run -c 1
t_refused "command not found"     127 "command not found" "$DETACH" run -c 1 -- no-such-command-xyz
t_refused "not executable"        126 "permission denied" "$DETACH" run -c 1 -- "$T_TMP/noexec.sh"
t_refused "static program"        1 "statically linked" "$DETACH" run -c 1 -- "$T_TMP/static"
t_refused "bad policy"            2 "bad policy" "$DETACH" run -c 1 -P f:100 -- true
t_refused "bad mode"              2 "unknown mode" "$DETACH" run -c 1 --mode fast -- true
t_refused "bad --mlock"           2 "unknown --mlock" "$DETACH" run -c 1 --mlock some -- true
t_refused "bad proxy wait"        2 "unknown proxy wait" "$DETACH" run -c 1 --proxy nap -- true
t_refused "unknown verb"          2 "unknown verb" "$DETACH" frobnicate
t_refused "help"                  0 "" "$DETACH" run --help
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
t_reap_registry

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
