# Description: seccomp strict mode, which a detached thread cannot keep (the
# runtime's own calls would kill the process), is refused at the call with
# EINVAL and one line on stderr, through prctl and through seccomp(2); the
# program goes on and exits normally.
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2

cat > "$T_TMP/strict.c" <<'C'
#define _GNU_SOURCE
#include <errno.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void)
{
	int r1 = prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0);
	int e1 = errno;
	int r2 = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_STRICT, 0, NULL);
	int e2 = errno;
	printf("prctl %d %s\nseccomp %d %s\nwent on\n", r1, r1 ? strerrorname_np(e1) : "-",
	       r2, r2 ? strerrorname_np(e2) : "-");
	return 0;
}
C
gcc -O1 -o "$T_TMP/strict" "$T_TMP/strict.c" || t_fail "cannot build"
out=$("$DETACH" run -c 1 --stats "$T_TMP/st.json" -- "$T_TMP/strict" 2>"$T_TMP/err"); rc=$?
echo "exit $rc: $out"
grep seccomp "$T_TMP/err"
[ $rc = 0 ] || t_fail "exit $rc, want 0"
[ "$out" = "$(printf 'prctl -1 EINVAL\nseccomp -1 EINVAL\nwent on')" ] || t_fail "output: $out"
[ "$(grep -c 'warning: the program asks for seccomp strict mode.*refused with EINVAL' "$T_TMP/err")" = 2 ] ||
	t_fail "not one stderr line per refused call: $(cat "$T_TMP/err")"
[ "$(t_stat "$T_TMP/st.json" cpu)" = 1 ] || t_fail "not detached on CPU 1"
t_done
