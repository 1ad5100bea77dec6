#!/usr/bin/env bash
# LTP's system call tests (the Linux Test Project, runtest/syscalls), each
# natively and with its test body detached (`detach run --select fork`: LTP
# forks the test body from its harness, lib/tst_test.c fork_testrun), in
# each mode; per test the exit status, the Summary counts and any crash
# marker must be the same.  differ.py compares; ltp-exclude.txt names the
# tests whose difference is known, each with its reason.
#
#   tests/compat/ltp.sh           the tests of ltp-subset.txt (make compat)
#   tests/compat/ltp.sh --full    every new-API test of runtest/syscalls
#                                 that builds here (make compat-full)
#   tests/compat/ltp.sh TAG...    those tests of runtest/syscalls
#
#   LTP_MODES="sud rewrite"   the detached runs (default: both)
#   LTP_TIMEOUT=SECONDS       per run (default 120): killed after it
#   LTP_RUNTIME_MUL=X         LTP's own scale of the runtime of looping tests
#                             (default 0.1)
#   LTP_PREBUILT=DIR          an LTP tree already built (make -C lib, make -C
#                             testcases/kernel/syscalls): installed from, not built
#   LTP_OUT=DIR               results (default build/compat/ltp)
#   LTP_CPU_LOCK=FILE         taken (flock) around the detached runs, in
#                             batches of about 100 s (default /tmp/detach-cpu1.lock)
#
# LTP is built from ../shared/ltp/ltp-*.tar.gz into build/ltp (skipped, exit
# 77, where the tarball is absent) and installed into build/ltp/root, its
# LTPROOT.  Each run starts as root in a scratch directory of its own, with
# TMPDIR inside it.  Results in LTP_OUT: MODE.tsv (test, outcome), MODE/TAG.log
# for every run, MODE.diff (differ.py's report).  An outcome is
# "exit=N passed=N failed=N broken=N skipped=N warnings=N" and the crash
# markers seen: killed by a signal, a segmentation fault, LTP's "Test killed
# by"/"timeouted", a C library abort, the runtime's own error, a run killed
# at LTP_TIMEOUT.
source "$(dirname "$0")/../helpers/lib.sh"
t_need_root
t_need_cpus 2
here=$ROOT/tests/compat
tarball=$(ls "$ROOT"/../shared/ltp/ltp-*.tar.gz 2>/dev/null | head -1)
ltp=$BUILD/ltp
ltproot=$ltp/root/opt/ltp
out=${LTP_OUT:-$BUILD/compat/ltp}
timeout_s=${LTP_TIMEOUT:-120}
runtime_mul=${LTP_RUNTIME_MUL:-0.1}
modes=${LTP_MODES:-sud rewrite}
lock=${LTP_CPU_LOCK:-/tmp/detach-cpu1.lock}   # flock: the runs of whoever shares CPU 1 here

full=false
tags=()
for a in "$@"; do
	case $a in
	--full) full=true ;;
	*) tags+=("$a") ;;
	esac
done
if ! $full && [ ${#tags[@]} -eq 0 ]; then
	mapfile -t tags < <(grep -v '^#' "$here/ltp-subset.txt" | cut -f1 | grep .)
fi

# ---- LTP, built and installed -----------------------------------------------

src=${LTP_PREBUILT:-$ltp/src/ltp}
runtest=$src/runtest/syscalls
if [ ! -f "$runtest" ]; then
	[ -n "${LTP_PREBUILT:-}" ] && t_skip "LTP_PREBUILT=$LTP_PREBUILT holds no LTP tree"
	[ -n "$tarball" ] || t_skip "LTP's source is not in ../shared/ltp (ltp-*.tar.gz): nothing to run"
	echo "ltp: unpacking $(basename "$tarball") into $ltp/src"
	rm -rf "$ltp/src" && mkdir -p "$ltp/src" && tar xzf "$tarball" -C "$ltp/src" ||
		t_skip "cannot unpack $tarball"
	(cd "$src" && make autotools && ./configure) >"$ltp/configure.log" 2>&1 ||
		{ tail -5 "$ltp/configure.log"; t_fail "LTP does not configure ($ltp/configure.log)"; t_done; }
	make -C "$src/lib" -j"$(nproc)" >"$ltp/lib.log" 2>&1 ||
		{ tail -5 "$ltp/lib.log"; t_fail "LTP's library does not build ($ltp/lib.log)"; t_done; }
fi

# The command of each runtest line (tag, then the command and its arguments).
declare -A cmdline
while read -r tag rest; do
	[ -n "$tag" ] && [ "${tag:0:1}" != "#" ] && [ -n "$rest" ] && cmdline[$tag]=$rest
done <"$runtest"
$full && mapfile -t tags < <(grep -v '^#' "$runtest" | awk 'NF >= 2 { print $1 }')

# The source directory of a test's program (fcntl01_64 is built from fcntl01.c).
test_dir() {   # PROGRAM
	local f
	for f in "$src"/testcases/kernel/syscalls/*/"$1".c "$src"/testcases/kernel/syscalls/*/"${1%_64}".c \
		 "$src"/testcases/kernel/syscalls/*/"${1%_16}".c; do
		[ -f "$f" ] && { dirname "$f"; return; }
	done
}

# Builds (unless prebuilt) and installs the directories of the tests asked for.
dirs=()
declare -A seen_dir
for tag in "${tags[@]}"; do
	prog=${cmdline[$tag]%% *}
	[ -n "$prog" ] && [ ! -x "$ltproot/testcases/bin/$prog" ] || continue
	d=$(test_dir "$prog")
	[ -n "$d" ] && [ -z "${seen_dir[$d]:-}" ] && { seen_dir[$d]=1; dirs+=("$d"); }
done
if [ ${#dirs[@]} -gt 0 ]; then
	mkdir -p "$ltp"
	echo "ltp: building and installing ${#dirs[@]} test directories into $ltp/root"
	# a directory a CPU (most hold a few programs); -k: a few need headers
	# this Debian lacks
	[ -n "${LTP_PREBUILT:-}" ] ||
		printf '%s\n' "${dirs[@]}" | xargs -P "$(nproc)" -I{} make -C {} -k >>"$ltp/build.log" 2>&1
	printf '%s\n' "${dirs[@]}" | xargs -P "$(nproc)" -I{} make -C {} -k install DESTDIR="$ltp/root" \
		>>"$ltp/build.log" 2>&1
fi
[ -d "$ltproot/testcases/bin" ] || t_skip "no LTP test was built (see $ltp/build.log)"

# ---- runs ------------------------------------------------------------------------

# The outcome of one run: the exit status, the Summary counts, the crash markers.
outcome() {   # LOG STATUS
	local log=$1 st=$2 counts marks=""
	counts=$(awk '/^Summary:/ { s = 1; next }
		s && $1 ~ /^(passed|failed|broken|skipped|warnings)$/ { printf " %s=%s", $1, $2 }' "$log")
	[ -n "$counts" ] || counts=" no-summary"
	[ "$st" -eq 124 ] && marks+=" killed-at-${timeout_s}s"
	[ "$st" -gt 128 ] && [ "$st" -ne 124 ] && marks+=" killed-by-$(kill -l $((st - 128)) 2>/dev/null || echo $((st - 128)))"
	grep -q "Segmentation fault" "$log" && marks+=" segfault"
	grep -q "Test killed by" "$log" && marks+=" test-killed-by-$(grep -o 'Test killed by [A-Z0-9]*' "$log" | head -1 | awk '{ print $4 }')"
	grep -qE "Test timeouted|Test killed! \(timeout\?\)" "$log" && marks+=" test-timed-out"
	grep -qE "^(free|malloc|realloc|double free|corrupted)[^:]*\(\)?:|Fatal glibc error" "$log" && marks+=" libc-abort"
	grep -q "^detach: error:" "$log" && marks+=" detach-error"
	echo "exit=$st$counts$marks"
}

# One run of TAG: native, or detached in MODE (the caller holds the CPU-1
# lock).  The harness stays watched, every process it forks (the test body)
# runs detached.
run() {   # MODE TAG
	local mode=$1 tag=$2 scratch st log=$out/$1/$2.log
	scratch=$(mktemp -d "$BUILD/ltp/scratch.XXXXXX")
	mkdir -p "$scratch/tmp"
	# shellcheck disable=SC2086  # the runtest line's arguments, split as runltp splits them
	(
		cd "$scratch" || exit 1
		export LTPROOT=$ltproot TMPDIR=$scratch/tmp PATH=$ltproot/testcases/bin:$PATH
		# one file system for .all_filesystems tests, runtimes scaled down
		# (the fuzzy-sync races' loops): the same for every run of a test
		export LTP_COLORIZE_OUTPUT=n LTP_SINGLE_FS_TYPE=ext4 LTP_RUNTIME_MUL=$runtime_mul
		if [ "$mode" = native ]; then
			exec timeout -k 10 "$timeout_s" ${cmdline[$tag]}
		else
			exec timeout -k 10 "$timeout_s" "$DETACH" run -c 1 --mode "$mode" --select fork -- \
				${cmdline[$tag]}
		fi
	) </dev/null >"$log" 2>&1 {lock_fd}>&-
	st=$?
	printf '%s\t%s\n' "$tag" "$(outcome "$log" $st)" >>"$out/$mode.tsv"
	rm -rf "$scratch"
}

# Only tests written against LTP's current library (they print a Summary),
# and that may end within LTP_TIMEOUT (a race reproducer runs for its
# min_runtime whatever LTP_RUNTIME_MUL says).  The others, with the reason,
# in not-run.txt.
rm -rf "$out" && mkdir -p "$out/native" "$BUILD/ltp"
runnable=()
for tag in "${tags[@]}"; do
	prog=${cmdline[$tag]%% *}
	d=$(test_dir "$prog")
	min=$(grep -ho 'min_runtime = [0-9]*' "$d/$prog.c" "$d/${prog%_64}.c" 2>/dev/null | head -1 | awk '{ print $3 }')
	why=
	if [ -z "$prog" ]; then
		t_fail "$tag is not in runtest/syscalls"
		continue
	elif [ ! -x "$ltproot/testcases/bin/$prog" ]; then
		why="$prog did not build here"
	elif ! grep -q tst_run_tcases "$ltproot/testcases/bin/$prog"; then
		why="$prog is an old-API test (no Summary)"
	elif [ -n "$min" ] && [ $((min + 30)) -gt "$timeout_s" ]; then
		why="its min_runtime of ${min}s does not end within LTP_TIMEOUT=${timeout_s}s"
	else
		runnable+=("$tag")
		continue
	fi
	printf '%s\t%s\n' "$tag" "$why" | tee -a "$out/not-run.txt" | sed 's/^/ltp: not run: /'
done
for m in $modes; do mkdir -p "$out/$m"; done
echo "ltp: ${#runnable[@]} tests, natively and detached ($modes), each run at most ${timeout_s}s; results in $out"
# The detached runs of the tests run natively so far, holding CPU 1 (the
# lock every user of it takes) for batches of about 100 s, not for the
# whole suite: others interleave.
exec {lock_fd}>>"$lock"
pending=()
# Seconds of CLOCK_BOOTTIME: LTP's clock tests set the wall clock, which
# bash's SECONDS follows.
now() {
	local up
	read -r up _ </proc/uptime
	echo "${up%.*}"
}
detached_runs() {
	local t0
	while [ ${#pending[@]} -gt 0 ]; do
		flock "$lock_fd"
		t0=$(now)
		while [ ${#pending[@]} -gt 0 ] && [ $(($(now) - t0)) -lt 100 ]; do
			for m in $modes; do
				run "$m" "${pending[0]}"
			done
			pending=("${pending[@]:1}")
		done
		flock -u "$lock_fd"
	done
}
start=$(now)
for i in "${!runnable[@]}"; do
	run native "${runnable[$i]}"
	pending+=("${runnable[$i]}")
	[ ${#pending[@]} -ge 20 ] && detached_runs
	[ $(((i + 1) % 50)) -eq 0 ] && echo "ltp: $((i + 1)) of ${#runnable[@]} tests, $(($(now) - start))s"
done
detached_runs
echo "ltp: ${#runnable[@]} tests in $(($(now) - start))s"

for m in $modes; do
	python3 "$here/differ.py" --mode "$m" --label "ltp $m" "$out/native.tsv" "$out/$m.tsv" \
		"$here/ltp-exclude.txt" >"$out/$m.diff"
	rc=$?
	cat "$out/$m.diff"
	[ $rc -eq 0 ] || t_fail "ltp $m: tests differ natively and detached (outputs in $out/native and $out/$m)"
done
t_done
