#!/usr/bin/env bash
# make deb: builds the Debian packages (debian/) from a copy of this tree's
# files (committed or not, as git sees them) in build/deb, so the checkout's
# build/ is neither cleaned nor reused: detach (the command and its tools),
# libdetach0 (the runtime) and libdetach-dev (headers, pkg-config, the RTLinux
# layer).  Checks them with lintian (errors and warnings; an overridden tag
# says why in debian/*.lintian-overrides) and the build log with blhc (every
# compile and link has the hardening flags, but for what debian/rules says).
# Prints the three .debs' paths, one a line.
set -eu
cd "$(dirname "$0")/.."
: "${VERSION:?}"
die() { echo "make-deb: error: $1" >&2; [ -z "${2:-}" ] || echo "NOTE: $2" >&2; exit 1; }
for t in dpkg-buildpackage dh lintian blhc git; do
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
# Not the calling make's flags: `make -s deb` would hide the compile lines
# that blhc reads.
(cd "$src" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL dpkg-buildpackage -b -us -uc -j"$(nproc)") >"$out/build.log" 2>&1 ||
	{ tail -30 "$out/build.log" >&2; die "dpkg-buildpackage failed (all of it: $out/build.log)"; }
debs=()
for p in detach libdetach0 libdetach-dev; do
	deb=$out/${p}_${VERSION}_amd64.deb
	[ -f "$deb" ] || die "no $deb after the build"
	debs+=("$deb")
done
lintian --fail-on error,warning --suppress-tags-from-file /dev/null "${debs[@]}" >"$out/lintian.log" 2>&1 ||
	{ cat "$out/lintian.log" >&2; die "lintian finds errors or warnings in ${debs[*]}"; }
blhc --debian --all "$out/build.log" >"$out/blhc.log" 2>&1 ||
	{ cat "$out/blhc.log" >&2; die "blhc: flags missing in the build log ($out/build.log)"; }
grep -c '^[IP]:' "$out/lintian.log" | xargs -I{} echo "make-deb: lintian and blhc: clean ({} info tags in $out/lintian.log)" >&2
printf '%s\n' "${debs[@]}"
