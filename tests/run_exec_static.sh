# Description: a static program reached through exec from the detached
# thread (sh -c 'exec ./static', env ./static) cannot take the runtime and
# runs undetached: detach says so on stderr, once, and the program's output
# and exit status are its own.  A dynamic one reached so says nothing.
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2

printf '#include <stdio.h>\nint main(void){puts("static ran");return 3;}\n' > "$T_TMP/s.c"
gcc -static -o "$T_TMP/static" "$T_TMP/s.c" 2>/dev/null || t_skip "cannot build a static program (libc6-dev)"
cd "$T_TMP"
for how in "sh -c 'exec ./static'" "env ./static"; do
	out=$(eval "\"$DETACH\" run -c 1 -- $how" 2>err); rc=$?
	echo "$how: exit $rc, stdout '$out', stderr: $(grep -v 'not isolated\|protection keys' err)"
	[ $rc = 3 ] || t_fail "$how: exit $rc, want 3"
	[ "$out" = "static ran" ] || t_fail "$how: stdout '$out'"
	[ "$(grep -c 'warning: ./static is statically linked.*runs undetached' err)" = 1 ] ||
		t_fail "$how: no (or more than one) warning that ./static runs undetached"
done
"$DETACH" run -c 1 -- sh -c 'exec /bin/true' 2>err || t_fail "exec /bin/true failed"
! grep -q "statically linked" err || t_fail "a dynamic program reached through exec was called static"
"$DETACH" run -c 1 -- sh -c 'exec ./no-such-static' 2>err
! grep -q "statically linked" err || t_fail "a failed exec was called static"
t_reap_registry   # the image before a static one keeps its registry file
t_done
