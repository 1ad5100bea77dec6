# Description: detach locks what the detached thread needs, not the
# program's memory: node -e runs (V8 madvises its heap), a 2 GiB
# MAP_NORESERVE reservation with 1 MiB touched leaves VmLck small, and a
# non-root user under an 8 MiB memlock limit grows a heap to 64 MiB, as
# natively.  --mlock all still locks everything (VmLck covers the 1 MiB).
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
chmod 755 "$T_TMP"

cat > "$T_TMP/mem.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
static long vm(const char *key)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)))
			v = atol(line + strlen(key) + 1);
	if (f)
		fclose(f);
	return v;
}
int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "heap")) {      /* 64 MiB in 1 MiB pieces */
		for (int i = 0; i < 64; i++) {
			char *p = malloc(1 << 20);
			if (!p) {
				printf("malloc failed after %d MiB\n", i);
				return 1;
			}
			memset(p, 1, 1 << 20);
		}
		printf("heap 64 MiB\n");
		return 0;
	}
	size_t size = (argc > 1 ? strtoul(argv[1], NULL, 10) : 2048) << 20;
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(p, 1, 1 << 20);
	printf("VmLck %ld\n", vm("VmLck:"));
	return 0;
}
C
gcc -O1 -o "$T_TMP/mem" "$T_TMP/mem.c" || t_fail "cannot build"

# the sparse reservation: VmLck natively 0; detached, the thread's own lock only
out=$("$DETACH" run -c 1 --stats "$T_TMP/st.json" -- "$T_TMP/mem" 2>/dev/null); rc=$?
lck=${out#VmLck }
echo "sparse reservation detached: exit $rc, VmLck $lck kB"
[ $rc = 0 ] || t_fail "sparse reservation: exit $rc"
[ "${lck:-99999999}" -lt 4096 ] 2>/dev/null || t_fail "sparse reservation: VmLck '$lck' kB, want < 4 MiB"
[ "$(t_stat "$T_TMP/st.json" cpu)" = 1 ] || t_fail "sparse reservation: not detached on CPU 1"
t_check_rewrite sparse "$T_TMP/st.json"
out=$("$DETACH" run -c 1 --mlock all -- "$T_TMP/mem" 64 2>/dev/null); rc=$?   # 64 MiB: quick
lck=${out#VmLck }
echo "--mlock all: exit $rc, VmLck $lck kB"
[ "${lck:-0}" -ge 1024 ] 2>/dev/null || t_fail "--mlock all: VmLck '$lck' kB: not everything locked"

# node: V8 madvise(MADV_DONTNEED)s its heap
if command -v node >/dev/null; then
	T_FILTER= t_compare node node -e 'let a = []; for (let i = 0; i < 200000; i++) a.push({i}); console.log(a.length, [1,2,3].map(x => x * 2).join())'
else
	echo "node: not installed (nodejs; tools/install-deps.sh installs it), not checked"
fi

# non-root under the default memlock limit: a 64 MiB heap, as natively
if [ "${DETACH_MODE:-sud}" != sud ]; then
	echo "non-root heap: checked in the sud pass (rewrite mode needs root)"
elif [ -d /sys/fs/cgroup/cpuset/detach ] || [ -d /sys/fs/cgroup/detach ]; then
	echo "non-root heap: not checked (a detach partition exists: CPU 1 is root's)"
elif [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	nobody() { (ulimit -l 8192; setpriv --reuid=65534 --regid=65534 --clear-groups "$@"); }
	out=$(nobody "$T_TMP/mem" heap 2>&1); rc=$?
	[ $rc = 0 ] || t_fail "non-root heap natively: exit $rc: $out"
	out=$(nobody "$DETACH" run -c 1 -- "$T_TMP/mem" heap 2>"$T_TMP/err"); rc=$?
	echo "non-root heap detached (memlock 8 MiB): exit $rc: $out"
	[ $rc = 0 ] && [ "$out" = "heap 64 MiB" ] || t_fail "non-root heap detached: exit $rc: $out $(cat "$T_TMP/err")"
else
	echo "non-root heap: not checked (needs root to become nobody, and setpriv)"
fi
t_done
