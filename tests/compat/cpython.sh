#!/usr/bin/env bash
# CPython's own regression tests of the OS interface, natively and under
# `detach run -c 1 --mode MODE` in each mode, compared test by test.
#
#   tests/compat/cpython.sh [--full] [GROUP...]
#
# One process per group of modules (regrtest without -j: with -j the tests
# would run in ordinary worker children, not detached).  For each group and
# configuration: every test case's outcome from regrtest's -v lines, the
# exit status against what its tests say, and any fatal marker (Fatal
# Python error, a glibc heap check, a segmentation fault) -- see
# regrtest_outcomes.py.  differ.py compares each mode with native, against
# tests/compat/cpython.exclude (each exclusion has its reason).  Fails on a
# difference not excluded, on an exit status native did not have, and on
# any fatal marker.
#
# `make compat` runs the quick groups (47 modules; 199 s natively with other
# work beside it on a 2-CPU VM); `make compat-full` (--full) all of them
# (about 19 minutes natively there).  Logs and
# outcomes: build/compat/cpython/<configuration>/<group>.{log,tsv}.
# Needs Debian's libpython3.11-testsuite (tools/install-deps.sh); uses
# /usr/bin/python3, the interpreter the suite belongs to.
#   TEST_MODES="sud rewrite"  the detached configurations
#   COMPAT_LIMIT=SECONDS      per group and configuration (default 600)
source "$(dirname "$0")/../helpers/lib.sh"
t_need_cpus 2
here=$ROOT/tests/compat
py=/usr/bin/python3
exclude=$here/cpython.exclude
out=$BUILD/compat/cpython
limit=${COMPAT_LIMIT:-600}

# GROUP=modules.  The quick ones (make compat) are the OS interface; --full
# adds the slow modules.  test_sqlite3, test_tty and test_termios are not in Debian's
# 3.11 suite.
declare -A groups=(
	[posix]="test_posix test_os test_stat test_posixpath test_genericpath test_pwd test_grp test_errno test_platform test_getpass test_glob test_locale test_uuid test_syslog test_resource test_time"
	[process]="test_subprocess test_popen test_wait3 test_wait4 test_fork1 test_pipes"
	[threads]="test_threading test_thread test_threading_local test_queue test_sched test_threadsignals"
	[io]="test_fileio test_file test_file_eintr test_mmap test_fcntl test_ioctl test_pty test_openpty test_tempfile test_shutil"
	[net]="test_select test_selectors test_epoll test_poll test_socketserver test_timeout"
	[signal]="test_signal test_eintr"
	[unix_events]="test_asyncio.test_unix_events"
	[io_big]="test_io test_largefile"
	[socket]="test_socket"
	[files]="test_zipfile test_tarfile test_gzip test_bz2 test_lzma test_pathlib test_logging test_dbm_gnu test_mailbox"
	[faulthandler]="test_faulthandler test_concurrent_futures"
	[mp_fork]="test_multiprocessing_fork"
	[mp_spawn]="test_multiprocessing_spawn"
)
quick=(posix process threads io net signal unix_events)
full=("${quick[@]}" io_big socket files faulthandler mp_fork mp_spawn)

sel=("${quick[@]}")
[ "${1:-}" = --full ] && { sel=("${full[@]}"); shift; }
[ $# -gt 0 ] && sel=("$@")
for g in "${sel[@]}"; do [ -n "${groups[$g]:-}" ] || { echo "no group $g (${!groups[*]})" >&2; exit 1; }; done

$py -c 'import test.test_signal, test.test_posix' 2>/dev/null ||
	t_skip "CPython's test suite is not installed (apt-get install libpython3.11-testsuite)"

# Tests that never run in any configuration (mode "norun" in the exclude
# file: they hang or break the run natively), as regrtest --ignore patterns.
ignore=()
while IFS=$'\t' read -r id modes _; do
	[ "$modes" = norun ] && ignore+=(--ignore "$id")
done < <(grep -v '^#' "$exclude")

run_group() {   # CONFIG GROUP PREFIX...
	local cfg=$1 g=$2 rc t0=$SECONDS; shift 2
	mkdir -p "$out/$cfg" "$T_TMP/$cfg"
	(cd "$T_TMP/$cfg" && timeout -k 10 "$limit" "$@" $py -m test -v "${ignore[@]}" ${groups[$g]} \
		</dev/null >"$out/$cfg/$g.log" 2>&1)
	rc=$?
	[ $rc = 124 ] && echo "timed out after $limit s" >>"$out/$cfg/$g.log"
	$py "$here/regrtest_outcomes.py" "$g" "$out/$cfg/$g.log" "$rc" >"$out/$cfg/$g.tsv" 2>"$out/$cfg/$g.fatal"
	if [ -s "$out/$cfg/$g.fatal" ]; then
		t_fail "$cfg $g: a fatal error (exit $rc):"; sed 's/^/    /' "$out/$cfg/$g.fatal" >&2
	fi
	echo "$cfg $g: exit $rc, $(grep -c '' <"$out/$cfg/$g.tsv") outcomes, $((SECONDS - t0)) s"
}

configs=(native)
for mode in ${TEST_MODES:-sud rewrite}; do configs+=("$mode"); done
for cfg in "${configs[@]}"; do
	start=$SECONDS
	for g in "${sel[@]}"; do
		if [ "$cfg" = native ]; then run_group native "$g"
		else run_group "$cfg" "$g" "$DETACH" run -c 1 --mode "$cfg" --
		fi
	done
	echo "$cfg: ${sel[*]} in $((SECONDS - start)) s"
done
for cfg in "${configs[@]}"; do
	for g in "${sel[@]}"; do cat "$out/$cfg/$g.tsv"; done >"$out/$cfg.all.tsv"
done
for cfg in "${configs[@]:1}"; do
	"$PY" "$here/differ.py" --mode "$cfg" --label "compat cpython $cfg" \
		"$out/native.all.tsv" "$out/$cfg.all.tsv" "$exclude" >"$out/$cfg.differ" ||
		t_fail "$cfg: results differ from native (not excluded)"
	cat "$out/$cfg.differ"
done
t_done
