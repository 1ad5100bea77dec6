#!/usr/bin/env bash
# `make install` and `make uninstall` (docs/install.md).
#
#   tools/install-tree.sh install|uninstall
#
# Puts the whole tool under $DESTDIR$PREFIX: the command, the runtime with its
# soname, headers, detach.pc, libdetach-rtl.a with detach-rtl.pc, manual pages, bash completion, systemd units,
# docs, JSON schemas, and what an installed `detach bench` needs (the Python
# package detach_tools, the measurement programs, the quick build load's C
# tree).  Every file, symlink and directory it creates is recorded in
# share/detach/install-manifest; uninstall removes exactly those (a directory
# only when it is empty again) and then the manifest.  NO_MANIFEST=1 (the .deb,
# whose list dpkg keeps) writes none.  Environment, as the Makefile passes it:
# DESTDIR PREFIX VERSION SOVERSION BUILD NO_MANIFEST [SYSTEMD_UNIT_DIR].
set -eu
cd "$(dirname "$0")/.."
action=${1:-}
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
BUILD=${BUILD:-build}
: "${VERSION:?}" "${SOVERSION:?}"

bindir=$PREFIX/bin
libdir=$PREFIX/lib
pkglibdir=$PREFIX/lib/detach            # bench programs, Python package
datadir=$PREFIX/share/detach
docdir=$PREFIX/share/doc/detach
mandir=$PREFIX/share/man
compdir=$PREFIX/share/bash-completion/completions
unitdir=${SYSTEMD_UNIT_DIR:-$PREFIX/lib/systemd/system}
manifest=$datadir/install-manifest

die() { echo "install-tree: error: $1" >&2; [ -z "${2:-}" ] || echo "NOTE: $2" >&2; exit 1; }

# --- install -----------------------------------------------------------------
declare -A made=()      # directories this install (or an earlier one) created
record=()

mkdirs() {              # DIR (installed path): creates it, recording each new level
	local d=$1 up=()
	while [ "$d" != / ] && [ ! -d "$DESTDIR$d" ]; do up=("$d" "${up[@]}"); d=$(dirname "$d"); done
	for d in "${up[@]}"; do
		mkdir "$DESTDIR$d"
		made[$d]=1
		record+=("d $d")
	done
}

put() {                 # MODE SRC DEST (installed path)
	mkdirs "$(dirname "$3")"
	install -m "$1" "$2" "$DESTDIR$3"
	record+=("f $3")
}

link() {                # TARGET DEST
	mkdirs "$(dirname "$2")"
	ln -sfn "$1" "$DESTDIR$2"
	record+=("l $2")
}

subst() {               # MODE SRC DEST: a file with @PREFIX@, @BINDIR@, @VERSION@ ... filled in
	local tmp
	tmp=$(mktemp)
	sed -e "s|@PREFIX@|$PREFIX|g" -e "s|@BINDIR@|$bindir|g" -e "s|@LIBDIR@|$libdir|g" \
	    -e "s|@VERSION@|$VERSION|g" "$2" >"$tmp"
	put "$1" "$tmp" "$3"
	rm -f "$tmp"
}

tree() {                # SRCDIR DESTDIR PATTERN...: the matching files below SRCDIR
	local src=$1 dst=$2 f
	shift 2
	while IFS= read -r f; do
		put 644 "$src/$f" "$dst/$f"
	done < <(cd "$src" && for p in "$@"; do find . -name "$p" -type f; done | sed 's|^\./||' | sort)
}

do_install() {
	[ -x "$BUILD/detach" ] && [ -e "$BUILD/libdetach.so" ] || die "nothing built in $BUILD" "run 'make' first"
	[ -z "$DESTDIR" ] || mkdir -p "$DESTDIR"    # the staging root is the caller's, not recorded
	# An earlier install's directories stay ours: keep them in the new record.
	if [ -z "${NO_MANIFEST:-}" ] && [ -f "$DESTDIR$manifest" ]; then
		while read -r kind path; do
			[ "$kind" = d ] && [ -d "$DESTDIR$path" ] && { made[$path]=1; record+=("d $path"); }
		done <"$DESTDIR$manifest"
	fi

	put 755 "$BUILD/detach" "$bindir/detach"
	put 644 "$BUILD/libdetach.so" "$libdir/libdetach.so.$VERSION"
	link "libdetach.so.$VERSION" "$libdir/libdetach.so.$SOVERSION"
	link "libdetach.so.$SOVERSION" "$libdir/libdetach.so"
	for h in include/detach/*.h; do put 644 "$h" "$PREFIX/$h"; done
	subst 644 dist/detach.pc.in "$libdir/pkgconfig/detach.pc"
	put 644 "$BUILD/libdetach-rtl.a" "$libdir/libdetach-rtl.a"
	subst 644 dist/detach-rtl.pc.in "$libdir/pkgconfig/detach-rtl.pc"

	for p in "$BUILD"/bench/*; do
		[ -x "$p" ] && put 755 "$p" "$pkglibdir/bench/$(basename "$p")"
	done
	tree tools/detach_tools "$pkglibdir/python/detach_tools" '*.py'
	for d in src/lib src/cli bench include; do
		tree "$d" "$datadir/build-load/$d" '*.c' '*.h' '*.S'
	done

	subst 644 docs/man/detach.1 "$mandir/man1/detach.1"
	subst 644 docs/man/detach-isolate.8 "$mandir/man8/detach-isolate.8"

	for f in docs/schema/*.schema.json; do put 644 "$f" "$datadir/schema/$(basename "$f")"; done

	put 644 dist/bash-completion/detach "$compdir/detach"
	subst 644 dist/systemd/detach-isolate@.service "$unitdir/detach-isolate@.service"
	subst 644 dist/systemd/detach-app.service.example "$docdir/examples/detach-app.service"

	put 644 README.md "$docdir/README.md"
	for f in docs/*.md; do put 644 "$f" "$docdir/$(basename "$f")"; done

	if [ -z "${NO_MANIFEST:-}" ]; then
		mkdirs "$datadir"
		record+=("f $manifest")
		printf '%s\n' "${record[@]}" | awk '!seen[$0]++' >"$DESTDIR$manifest"
	fi
	echo "installed detach $VERSION under $DESTDIR$PREFIX"
}

# --- uninstall ---------------------------------------------------------------
do_uninstall() {
	[ -f "$DESTDIR$manifest" ] || die "no $DESTDIR$manifest: nothing installed there by 'make install'" \
		"give the same PREFIX (and DESTDIR) as the install"
	local kind path kept=0 entries
	mapfile -t entries <"$DESTDIR$manifest"
	for e in "${entries[@]}"; do
		read -r kind path <<<"$e"
		case $kind in f|l) rm -f "$DESTDIR$path" ;; esac
	done
	# the directories, deepest first
	while read -r path; do
		rmdir "$DESTDIR$path" 2>/dev/null || { echo "install-tree: kept $DESTDIR$path (not empty)"; kept=1; }
	done < <(printf '%s\n' "${entries[@]}" | awk '$1 == "d" { print $2 }' | sort -r)
	echo "removed detach from $DESTDIR$PREFIX"
	return $kept
}

case $action in
install) do_install ;;
uninstall) do_uninstall ;;
*) die "usage: tools/install-tree.sh install|uninstall" ;;
esac
