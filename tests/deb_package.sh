# Description: `make deb` builds a Debian package that lintian passes at the
# error level, `dpkg -i` installs it (its dependencies met), the installed
# /usr/bin/detach runs (--version, the manual page, bench --help from the
# system's python3), and `dpkg --purge` removes every file it brought.
# Timeout: 400
. "$(dirname "$0")/helpers/lib.sh"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" -eq 0 ] || t_skip "needs root (dpkg -i, dpkg --purge): the package is built and checked in CI"
VERSION=$(sed -n 's/^VERSION *:= *//p' "$ROOT/Makefile")
if dpkg -s detach >/dev/null 2>&1; then
	t_skip "a detach package is installed on this machine already: not replaced by a test"
fi

deb=$(make -s -C "$ROOT" deb 2>"$T_TMP/deb.err" | tail -n 1); rc=$?
[ $rc -eq 0 ] && [ -f "$ROOT/$deb" ] || { cat "$T_TMP/deb.err"; t_fail "make deb: exit $rc"; t_done; }
echo "ok: make deb: $deb, lintian: $(grep -c '^E:' "$ROOT/build/deb/lintian.log") errors"
deb=$ROOT/$deb

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
dpkg_do -i "$deb" || { t_fail "dpkg -i $deb"; dpkg_do --purge detach; t_done; }
echo "ok: dpkg -i"
# its files and links, not directories (/lib is a link to usr/lib on a merged /usr)
files=$(dpkg -L detach | while read -r f; do { [ -f "$f" ] || [ -L "$f" ]; } && [ ! -d "$f" ] && echo "$f"; done)

v=$(env -i PATH=/usr/bin:/bin /usr/bin/detach --version) || t_fail "/usr/bin/detach --version: exit $?"
[ "$v" = "detach $VERSION" ] || t_fail "installed --version says '$v', want detach $VERSION"
[ "$(dpkg-query -W -f '${Version}' detach)" = "$VERSION" ] || t_fail "package version is not $VERSION"
man -w detach 2>/dev/null | grep -q '^/usr/share/man/man1/detach.1' || t_fail "man -w detach: $(man -w detach 2>&1)"
man -w 8 detach-isolate 2>/dev/null | grep -q 'detach-isolate.8' || t_fail "no detach-isolate(8)"
(cd / && env -i PATH=/usr/bin:/bin /usr/bin/detach bench --help >/dev/null 2>"$T_TMP/bench.err") ||
	t_fail "installed detach bench --help: $(cat "$T_TMP/bench.err")"
[ -f /lib/systemd/system/detach-isolate@.service ] || t_fail "no detach-isolate@.service"
echo "ok: $v; manual pages; bench --help; the unit"

dpkg_do --purge detach || t_fail "dpkg --purge detach"
left=$(for f in $files; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done)
[ -z "$left" ] || t_fail "left after dpkg --purge: $left"
! dpkg -s detach >/dev/null 2>&1 || t_fail "still known to dpkg after --purge"
echo "ok: dpkg --purge removed its $(wc -w <<<"$files") files"
t_done
