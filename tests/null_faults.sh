# Description: NULL reads keep faulting: a C program that reads *(int *)8
# dies with SIGSEGV natively and under `detach run` in the default mode
# (rewrite wherever it can run: its stubs leave page 0 unmapped) and in
# both named modes, detached on CPU 1 until then.
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
unset DETACH_MODE        # the default mode, whatever the runner's pass

cat > "$T_TMP/null.c" <<'C'
#include <stdio.h>
#include <string.h>
int main(void)
{
	char line[256];
	FILE *f = fopen("/proc/thread-self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "Cpus_allowed_list:", 18))
			fputs(line, stdout);
	fflush(stdout);
	printf("read %d\n", *(volatile int *)8);
	return 0;
}
C
gcc -O1 -o "$T_TMP/null" "$T_TMP/null.c" || t_fail "cannot build"

"$T_TMP/null" >/dev/null 2>&1; rc=$?
[ $rc = 139 ] || t_fail "natively: exit $rc, want 139 (SIGSEGV)"
out=$("$DETACH" run -c 1 -- "$T_TMP/null" 2>"$T_TMP/err"); rc=$?
echo "default mode: exit $rc, output: $out"
[ $rc = 139 ] || t_fail "default mode: exit $rc, want 139 (SIGSEGV): the NULL read did not fault"
t_reap_registry   # killed by SIGSEGV: its registry file stays
grep -qP '^Cpus_allowed_list:\t1$' <<<"$out" || t_fail "default mode: not detached on CPU 1: $out"

for mode in rewrite sud; do
	out=$("$DETACH" run -c 1 --mode $mode -- "$T_TMP/null" 2>"$T_TMP/err"); rc=$?
	echo "--mode $mode: exit $rc"
	[ $rc = 139 ] || t_fail "--mode $mode: exit $rc, want 139 (SIGSEGV): the NULL read did not fault"
	t_reap_registry
	! grep -q "rewrite mode cannot run" "$T_TMP/err" || t_fail "--mode $mode: $(cat "$T_TMP/err")"
done
t_done
