# Description: the default mode keeps NULL reads faulting: a C program that
# reads *(int *)8 dies with SIGSEGV natively and under `detach run` (default
# mode), detached on CPU 1 until then.  `--mode rewrite` asked for on a CPU
# without protection keys (page 0 readable) runs with a warning naming the risk.
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

if grep -qw ospke /proc/cpuinfo; then
	echo "this CPU has protection keys: page 0 is execute-only in every mode"
	out=$("$DETACH" run -c 1 --mode rewrite -- "$T_TMP/null" 2>"$T_TMP/err"); rc=$?
	[ $rc = 139 ] || t_fail "rewrite mode with protection keys: exit $rc, want 139"
elif [ "$(id -u)" = 0 ]; then
	out=$("$DETACH" run -c 1 --mode rewrite -- "$T_TMP/null" 2>"$T_TMP/err"); rc=$?
	echo "--mode rewrite without protection keys: exit $rc, output: $out"
	grep -q "warning: --mode rewrite.*NULL reads no longer fault" "$T_TMP/err" ||
		t_fail "--mode rewrite: no warning naming the risk: $(cat "$T_TMP/err")"
	# the risk the warning names, for real: the read returned page 0's bytes
	[ $rc = 0 ] || t_fail "--mode rewrite: exit $rc (the warning says NULL reads no longer fault)"
fi
t_done
