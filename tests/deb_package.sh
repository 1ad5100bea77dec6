# Description: `make deb` builds three Debian packages, lintian and blhc
# clean: libdetach0 holds the runtime by its soname, libdetach-dev the .so
# link, the headers, detach.pc and libdetach-rtl.a, detach the command.
# Unpacked without the -dev package, the command runs a program detached
# (the kernel shows its thread on CPU 1) with the runtime of libdetach0; a
# program builds against the unpacked -dev files.  As root, `dpkg -i` of
# the three registers the library with ldconfig, the installed command runs
# (--version, manual pages, bench --help) and `dpkg --purge` removes every
# file they brought.
# Timeout: 400
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(sed -n 's/^VERSION *:= *//p' "$ROOT/Makefile")
SOVERSION=$(sed -n 's/^SOVERSION *:= *//p' "$ROOT/Makefile")
SONAME=libdetach.so.$SOVERSION
PKGS="detach libdetach0 libdetach-dev"

debs=$(make -s -C "$ROOT" deb 2>"$T_TMP/deb.err"); rc=$?
[ $rc -eq 0 ] || { cat "$T_TMP/deb.err"; t_fail "make deb: exit $rc"; t_done; }
declare -A deb
for p in $PKGS; do
	deb[$p]=$ROOT/$(grep "/${p}_${VERSION}_amd64.deb\$" <<<"$debs")
	[ -f "${deb[$p]}" ] || t_fail "make deb printed no $p package: $debs"
done
[ "$t_fails" -eq 0 ] || t_done
echo "ok: make deb: $(wc -l <<<"$debs") packages; $(grep clean "$T_TMP/deb.err")"

# each package's files and links, but its documents and lintian overrides
contents() { dpkg-deb -c "$1" | awk '$1 !~ /^d/ { print $6 }' | sed 's|^\./||' | grep -Ev '^usr/share/(doc|lintian)/'; }
[ "$(contents "${deb[libdetach0]}" | sort | tr '\n' ' ')" = "usr/lib/$SONAME usr/lib/libdetach.so.$VERSION " ] ||
	t_fail "libdetach0 holds: $(contents "${deb[libdetach0]}" | tr '\n' ' '), want the library and its soname"
want="usr/include/detach/detach.h usr/include/detach/rtl.h usr/lib/libdetach-rtl.a usr/lib/libdetach.so usr/lib/pkgconfig/detach-rtl.pc usr/lib/pkgconfig/detach.pc "
[ "$(contents "${deb[libdetach-dev]}" | sort | tr '\n' ' ')" = "$want" ] ||
	t_fail "libdetach-dev holds: $(contents "${deb[libdetach-dev]}" | tr '\n' ' '), want $want"
left=$(contents "${deb[detach]}" | grep -E '(^usr/include/|/lib[^/]*\.(so|a)($|\.))')
[ -z "$left" ] || t_fail "the detach package holds library files: $left"
contents "${deb[detach]}" | grep -qx usr/bin/detach || t_fail "the detach package has no usr/bin/detach"
dpkg-deb -f "${deb[detach]}" Depends | grep -q "libdetach0 (= $VERSION)" ||
	t_fail "detach does not depend on libdetach0 (= $VERSION): $(dpkg-deb -f "${deb[detach]}" Depends)"
dpkg-deb -I "${deb[libdetach0]}" triggers | grep -qx "activate-noawait ldconfig" || t_fail "libdetach0 has no ldconfig trigger"
dpkg-deb -I "${deb[libdetach0]}" symbols | grep -q "^$SONAME libdetach0 " || t_fail "libdetach0 has no symbols file"
echo "ok: the three packages hold what they should; detach depends on libdetach0 (= $VERSION)"

# Unpacked: the command and the runtime package alone.
R=$T_TMP/root
for p in detach libdetach0; do dpkg-deb -x "${deb[$p]}" "$R" || t_fail "dpkg-deb -x ${deb[$p]}"; done
so=$R/usr/lib/libdetach.so.$VERSION
[ "$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')" = "$SONAME" ] || t_fail "$so: its SONAME is not $SONAME"
[ "$(readlink "$R/usr/lib/$SONAME")" = "libdetach.so.$VERSION" ] || t_fail "no link $SONAME -> libdetach.so.$VERSION"
for f in "$so" "$R/usr/bin/detach"; do
	readelf -d "$f" | grep -q 'FLAGS.*BIND_NOW' && readelf -lW "$f" | grep -q GNU_RELRO ||
		t_fail "$f: not linked with -z relro -z now (LDFLAGS did not reach it)"
done
nm -D "$R/usr/bin/detach" | grep -q '__stack_chk_fail' && nm -D "$R/usr/bin/detach" | grep -q '__[a-z]*printf_chk' ||
	t_fail "usr/bin/detach: no stack protector or _FORTIFY_SOURCE (CFLAGS/CPPFLAGS did not reach it)"
v=$(env -i PATH=/usr/bin:/bin "$R/usr/bin/detach" --version) || t_fail "unpacked detach --version: exit $?"
[ "$v" = "detach $VERSION" ] || t_fail "unpacked --version says '$v', want detach $VERSION"
out=$(cd "$T_TMP" && env -i PATH=/usr/bin:/bin "$R/usr/bin/detach" run -c 1 -H 0 \
	--stats "$T_TMP/stats.json" -- grep Cpus_allowed_list /proc/self/status 2>"$T_TMP/run.err"); rc=$?
[ $rc -eq 0 ] || { cat "$T_TMP/run.err"; t_fail "unpacked detach run: exit $rc"; }
[ "$(cut -f2 <<<"$out")" = 1 ] || t_fail "unpacked detach run: the thread's affinity is '$out', expected CPU 1"
[ "$(t_stat "$T_TMP/stats.json" forwarded)" -gt 0 ] 2>/dev/null || t_fail "unpacked detach run forwarded no call"
echo "ok: $v unpacked without libdetach-dev: detach run: $out, $(t_stat "$T_TMP/stats.json" forwarded) calls forwarded"

# The packaged runtime has dpkg-buildflags' hardening but the stack protector
# (the Makefile says why, above RT_CFLAGS): a thread that points FS at a TLS
# block of its own, with a stack guard of its own, and makes a system call
# there runs detached as it runs natively.
cat >"$T_TMP/own_tls.c" <<'EOF_C'
#include <asm/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
static long raw(long nr, long a, long b)        /* no libc between the FS changes */
{
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b) : "rcx", "r11", "memory");
	return ret;
}
int main(void)
{
	enum { BELOW = 1024, ABOVE = 2560 };    /* static TLS below FS, glibc's TCB above */
	unsigned long fs;
	syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
	char *copy = malloc(BELOW + ABOVE);
	memcpy(copy, (char *)fs - BELOW, BELOW + ABOVE);
	unsigned long mine = (unsigned long)copy + BELOW;
	((unsigned long *)mine)[0] = ((unsigned long *)mine)[2] = mine;   /* tcb, self */
	((unsigned long *)mine)[5] ^= 0x5a5a5a5a;                          /* 0x28: the guard */
	long set = raw(SYS_arch_prctl, ARCH_SET_FS, mine);
	long pid = raw(SYS_getpid, 0, 0);
	long back = raw(SYS_arch_prctl, ARCH_SET_FS, fs);
	printf("set %ld, getpid %s, back %ld\n", set, pid == getpid() ? "right" : "wrong", back);
	return 0;
}
EOF_C
cc -O2 -o "$T_TMP/own_tls" "$T_TMP/own_tls.c" || t_fail "cc own_tls.c"
native=$("$T_TMP/own_tls" 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$native" = "set 0, getpid right, back 0" ] || t_fail "own_tls natively: exit $rc, '$native'"
for mode in sud rewrite; do
	out=$(cd "$T_TMP" && env -i PATH=/usr/bin:/bin "$R/usr/bin/detach" run -c 1 -H 0 \
		--mode $mode -- "$T_TMP/own_tls" 2>"$T_TMP/run.err"); rc=$?
	[ $rc -eq 0 ] && [ "$out" = "$native" ] ||
		t_fail "own_tls detached with the packaged runtime, --mode $mode: exit $rc, '$out' ($(grep -v warning "$T_TMP/run.err"))"
done
echo "ok: a thread with a TLS block and stack guard of its own: '$native' natively and detached (sud, rewrite)"

# A program of the public API builds against the unpacked -dev files.
dpkg-deb -x "${deb[libdetach-dev]}" "$R" || t_fail "dpkg-deb -x ${deb[libdetach-dev]}"
flags=$(PKG_CONFIG_PATH=$R/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$R pkg-config --cflags --libs detach) &&
	cc -o "$T_TMP/chan_pipeline" "$ROOT/examples/chan_pipeline.c" $flags 2>"$T_TMP/cc.log" ||
	t_fail "cc examples/chan_pipeline.c \$(pkg-config --cflags --libs detach): $(cat "$T_TMP/cc.log")"
readelf -d "$T_TMP/chan_pipeline" 2>/dev/null | grep -q "NEEDED.*\[$SONAME\]" ||
	t_fail "a program linked with -ldetach does not record $SONAME"
echo "ok: examples/chan_pipeline.c built with the packaged detach.pc ($flags), needs $SONAME"

if [ "$(id -u)" -ne 0 ]; then
	echo "not root: dpkg -i and dpkg --purge not tried"
	t_done
fi
for p in $PKGS; do
	if dpkg -s "$p" >/dev/null 2>&1; then
		echo "$p is installed on this machine already: not replaced by a test; dpkg -i not tried"
		t_done
	fi
done
# dpkg waits for no lock of its own: retry while another apt or dpkg runs
dpkg_do() {
	local i
	for i in $(seq 60); do
		dpkg "$@" >"$T_TMP/dpkg.out" 2>&1 && return 0
		grep -q "lock" "$T_TMP/dpkg.out" || { cat "$T_TMP/dpkg.out"; return 1; }
		sleep 2
	done
	return 1
}
echo "dpkg -i: $(date +%T)"
dpkg_do -i "${deb[@]}" || { t_fail "dpkg -i ${deb[*]}"; dpkg_do --purge $PKGS; t_done; }
echo "ok: dpkg -i"
# their files and links, not directories (/lib is a link to usr/lib on a merged /usr)
files=$(dpkg -L $PKGS | while read -r f; do { [ -f "$f" ] || [ -L "$f" ]; } && [ ! -d "$f" ] && echo "$f"; done)

# (/lib/$SONAME on a merged /usr)
ldconfig -p | grep -Eq "$SONAME .*=> (/usr)?/lib/$SONAME\$" || t_fail "ldconfig does not know /usr/lib/$SONAME"
v=$(env -i PATH=/usr/bin:/bin /usr/bin/detach --version) || t_fail "/usr/bin/detach --version: exit $?"
[ "$v" = "detach $VERSION" ] || t_fail "installed --version says '$v', want detach $VERSION"
[ "$(dpkg-query -W -f '${Version}' detach)" = "$VERSION" ] || t_fail "package version is not $VERSION"
man -w detach 2>/dev/null | grep -q '^/usr/share/man/man1/detach.1' || t_fail "man -w detach: $(man -w detach 2>&1)"
man -w 8 detach-isolate 2>/dev/null | grep -q 'detach-isolate.8' || t_fail "no detach-isolate(8)"
(cd / && env -i PATH=/usr/bin:/bin /usr/bin/detach bench --help >/dev/null 2>"$T_TMP/bench.err") ||
	t_fail "installed detach bench --help: $(cat "$T_TMP/bench.err")"
[ -f /lib/systemd/system/detach-isolate@.service ] || t_fail "no detach-isolate@.service"
echo "ok: $v; ldconfig knows $SONAME; manual pages; bench --help; the unit"

dpkg_do --purge $PKGS || t_fail "dpkg --purge $PKGS"
left=$(for f in $files; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done)
[ -z "$left" ] || t_fail "left after dpkg --purge: $left"
for p in $PKGS; do ! dpkg -s "$p" >/dev/null 2>&1 || t_fail "$p still known to dpkg after --purge"; done
ldconfig -p | grep -q "$SONAME " && t_fail "ldconfig still lists $SONAME after --purge"
echo "ok: dpkg --purge removed their $(wc -w <<<"$files") files"
t_done
