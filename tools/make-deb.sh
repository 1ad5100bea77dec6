#!/usr/bin/env bash
# make deb: builds the Debian package (debian/) from a copy of this tree's
# files (committed or not, as git sees them) in build/deb, so the checkout's
# build/ is neither cleaned nor reused, and checks it with lintian at the
# error level.  Prints the .deb's path.
set -eu
cd "$(dirname "$0")/.."
: "${VERSION:?}"
die() { echo "make-deb: error: $1" >&2; [ -z "${2:-}" ] || echo "NOTE: $2" >&2; exit 1; }
for t in dpkg-buildpackage dh lintian git; do
	command -v $t >/dev/null || die "$t not found" "run 'make deps' (dpkg-dev, debhelper, lintian)"
done
changelog=$(dpkg-parsechangelog -S Version)
[ "$changelog" = "$VERSION" ] ||
	die "debian/changelog says $changelog, the Makefile $VERSION" "add a debian/changelog entry (dch -v $VERSION)"

out=build/deb
src=$out/detach-$VERSION
rm -rf "$out"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} sh -c '[ -e "{}" ] && echo "{}"' |
	tar -cf - -T - | tar -xf - -C "$src"
(cd "$src" && dpkg-buildpackage -b -us -uc -j"$(nproc)") >"$out/build.log" 2>&1 ||
	{ tail -30 "$out/build.log" >&2; die "dpkg-buildpackage failed (all of it: $out/build.log)"; }
deb=$out/detach_${VERSION}_amd64.deb
[ -f "$deb" ] || die "no $deb after the build"
lintian --fail-on error --suppress-tags-from-file /dev/null "$deb" >"$out/lintian.log" 2>&1 ||
	{ cat "$out/lintian.log" >&2; die "lintian finds errors in $deb"; }
grep -c '^W:' "$out/lintian.log" | xargs -I{} echo "make-deb: lintian: no error, {} warning(s) ($out/lintian.log)"
echo "$deb"
