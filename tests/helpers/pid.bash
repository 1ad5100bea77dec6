# For the tests of `detach pid` and `detach ctl` (sourced after lib.sh): a
# native program that writes numbered lines, 5 ms apart ("writer N"), or
# reads one line from stdin ("writer reader"), built in T_TMP (static too,
# where the static libc is installed); the kernel's per-thread figures.
cat >"$T_TMP/writer.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
/* writer N: N numbered lines, 5 ms apart; reader: one line from stdin */
int main(int argc, char **argv)
{
	char b[256];
	if (!strcmp(argv[1], "reader")) {
		ssize_t n = read(0, b, sizeof(b) - 1);
		if (n < 0) { perror("read"); return 1; }
		b[n] = '\0';
		printf("read %zd: %s", n, b);
		return 0;
	}
	for (int i = 0, n = atoi(argv[1]); i < n; i++) {
		int l = snprintf(b, sizeof(b), "line %d\n", i);
		if (write(1, b, l) != l) return 1;
		struct timespec ts = { 0, 5000000 };
		nanosleep(&ts, NULL);
	}
	return 0;
}
EOF
cc -O2 -o "$T_TMP/writer" "$T_TMP/writer.c" || t_fail "cc"
cc -O2 -static -o "$T_TMP/static" "$T_TMP/writer.c" 2>/dev/null || rm -f "$T_TMP/static"

task_of() { grep -l "$2" /proc/$1/task/*/comm 2>/dev/null | head -1 | xargs -r dirname; }
syscw() { awk '/^syscw/ {print $2}' "$1/io"; }

policy() { awk '/^policy/ {print $3}' /proc/$1/task/$1/sched; }
