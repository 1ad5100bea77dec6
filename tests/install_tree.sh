# Description: `make install` into a temporary DESTDIR gives a tool that works
# with the repository out of reach (hidden under an empty tmpfs in a mount
# namespace of its own, environment emptied): `detach --version`, a `detach
# run` whose thread the kernel shows pinned to the detached CPU, and `detach
# bench --quick --no-plots`; an RTLinux example builds with the installed
# pkg-config detach-rtl; as root, `detach pid` detaches a running program
# and attaches it again; `make uninstall` then leaves nothing behind.
# Timeout: 400
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(sed -n 's/^VERSION *:= *//p' "$ROOT/Makefile")
DEST=$T_TMP/dest
WORK=$T_TMP/work
mkdir -p "$WORK"

make -s -C "$ROOT" install DESTDIR="$DEST" PREFIX=/usr >"$T_TMP/install.log" 2>&1 ||
	{ cat "$T_TMP/install.log"; t_fail "make install: exit $?"; t_done; }
echo "ok: make install DESTDIR=$DEST PREFIX=/usr"
for f in usr/bin/detach usr/lib/libdetach.so.$VERSION usr/include/detach/detach.h usr/lib/pkgconfig/detach.pc \
	 usr/share/man/man1/detach.1 usr/share/man/man8/detach-isolate.8 usr/lib/detach/bench/fwq \
	 usr/lib/detach/python/detach_tools/__main__.py; do
	[ -e "$DEST/$f" ] || t_fail "not installed: /$f"
done
# An RTLinux program builds against the installed tree, as docs/rtl.md says.
for f in usr/lib/libdetach-rtl.a usr/include/detach/rtl.h usr/lib/pkgconfig/detach-rtl.pc; do
	[ -e "$DEST/$f" ] || t_fail "not installed: /$f"
done
cp "$ROOT/examples/rtl/frank.c" "$WORK/"
rtl_flags=$(PKG_CONFIG_PATH=$DEST/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$DEST pkg-config --cflags --libs detach-rtl) &&
	cc -o "$WORK/frank" "$WORK/frank.c" $rtl_flags 2>"$T_TMP/cc.log" ||
	t_fail "cc frank.c \$(pkg-config --cflags --libs detach-rtl): $(cat "$T_TMP/cc.log")"
[ -x "$WORK/frank" ] && echo "ok: examples/rtl/frank.c built with the installed pkg-config detach-rtl: $rtl_flags"
rm -f "$WORK/frank" "$WORK/frank.c"
soname=$(readelf -d "$DEST/usr/lib/libdetach.so.$VERSION" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$(readlink "$DEST/usr/lib/$soname")" = "libdetach.so.$VERSION" ] ||
	t_fail "soname $soname: no symlink to libdetach.so.$VERSION"
[ "$(readlink "$DEST/usr/lib/libdetach.so")" = "$soname" ] || t_fail "libdetach.so does not point to $soname"

# installed CMD...: CMD with the repository hidden, an empty environment, in $WORK
installed() {
	local hide=""
	[ "$(id -u)" -eq 0 ] && hide="mount -t tmpfs -o size=1m detach-test-hidden '$ROOT' &&"
	(cd "$WORK" && env -i PATH=/usr/bin:/bin HOME="$WORK" LC_ALL=C.UTF-8 \
		${hide:+unshare -m --propagation private} sh -c "$hide exec \"\$@\"" sh "$@")
}
if [ "$(id -u)" -eq 0 ]; then
	installed test -e "$ROOT/Makefile" && t_fail "the repository is still visible to the installed tool"
	echo "ok: the repository is hidden from the installed tool"
else
	echo "not root: the repository stays visible (only the environment is emptied)"
fi

v=$(installed "$DEST/usr/bin/detach" --version) || t_fail "--version: exit $?"
[ "$v" = "detach $VERSION" ] || t_fail "--version says '$v', the Makefile $VERSION"
echo "ok: $v"

# The kernel's word: the detached thread's affinity is CPU 1 only, natively 0-1.
out=$(installed "$DEST/usr/bin/detach" run -c 1 -H 0 --stats "$WORK/stats.json" -- \
	grep Cpus_allowed_list /proc/self/status 2>"$T_TMP/run.err"); rc=$?
[ $rc -eq 0 ] || { cat "$T_TMP/run.err"; t_fail "installed detach run: exit $rc"; }
[ "$(cut -f2 <<<"$out")" = 1 ] || t_fail "installed detach run: the thread's affinity is '$out', expected CPU 1"
[ "$(t_stat "$WORK/stats.json" forwarded)" -gt 0 ] 2>/dev/null || t_fail "installed detach run forwarded no call"
echo "ok: installed detach run: $out, $(t_stat "$WORK/stats.json" forwarded) calls forwarded"
t_validate run-stats "$WORK/stats.json"

# detach pid finds the runtime it loaded in /proc/PID/maps by the installed
# file's own name (libdetach.so.VERSION, behind the soname link).
if [ "$(id -u)" -eq 0 ]; then
	# short sleeps: dt_attach waits for the thread to leave a call
	printf '#include <unistd.h>\nint main(void) { for (int i = 0; i < 600; i++) usleep(100000); }\n' >"$WORK/naps.c"
	cc -o "$WORK/naps" "$WORK/naps.c" || t_fail "cc naps.c"
	"$WORK/naps" & p=$!
	installed "$DEST/usr/bin/detach" pid -c 1 $p >"$T_TMP/pid.log" 2>&1 || t_fail "installed detach pid: $(cat "$T_TMP/pid.log")"
	[ "$(awk '/Cpus_allowed_list/ {print $2}' /proc/$p/status)" = 1 ] || t_fail "installed detach pid: not on CPU 1"
	installed "$DEST/usr/bin/detach" pid --attach $p >"$T_TMP/pid.log" 2>&1 ||
		t_fail "installed detach pid --attach: $(cat "$T_TMP/pid.log")"
	kill $p; wait $p 2>/dev/null
	rm -f "$WORK/naps" "$WORK/naps.c"
	echo "ok: installed detach pid -c 1 and --attach"
fi

if [ "$(id -u)" -eq 0 ]; then
	installed "$DEST/usr/bin/detach" bench --quick --no-plots --no-print --out "$WORK/bench" \
		>"$T_TMP/bench.log" 2>&1 || { tail -20 "$T_TMP/bench.log"; t_fail "installed detach bench: exit $?"; }
	python3 - "$WORK/bench/results.json" <<'PY' || t_fail "installed detach bench: results"
import json, sys
d = json.load(open(sys.argv[1]))
bad = [f"{c['load']} {c['program']} {c['config']}: {c['status']} {c.get('reason', '')}"
       for c in d["cells"] if c["status"] != "ok" and not (c["config"] == "detached" and c.get("reason"))]
print("\n".join(bad) or f"ok: installed detach bench: {len(d['cells'])} cells, complete={d.get('complete')}")
sys.exit(1 if bad or not d.get("complete") or len(d["cells"]) < 30 else 0)
PY
	t_validate bench-results "$WORK/bench/results.json"
else
	echo "not root: installed detach bench not run (it needs chrt -f and the partition)"
fi
left=$(find "$DEST" -name __pycache__)
[ -z "$left" ] || t_fail "running the installed tools wrote into the installed tree: $left"

make -s -C "$ROOT" uninstall DESTDIR="$DEST" PREFIX=/usr >"$T_TMP/uninstall.log" 2>&1 ||
	{ cat "$T_TMP/uninstall.log"; t_fail "make uninstall: exit $?"; }
left=$(cd "$DEST" && find . -mindepth 1)
[ -z "$left" ] || t_fail "make uninstall left: $(head -5 <<<"$left")"
echo "ok: make uninstall removed everything install wrote"
t_done
