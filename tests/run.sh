#!/usr/bin/env bash
# The one test runner.  Every tests/<name>.c (built to build/tests/<name>) and
# every tests/<name>.sh is a test: exit 0 pass, 77 skip (its last output line
# says why), anything else fail.  Output of each test: build/test-logs/<name>.log
#
#   tests/run.sh [NAME...]        run all tests, or only those named
#   TEST_TIMEOUT=SECONDS          per-test limit (default 300; a test may ask
#                                 for more with a "Timeout: N" line)
#   TEST_MODES="sud rewrite"      the tests of `detach run` (run_*, cli_run)
#                                 run once per mode, with DETACH_MODE set
#   DETACH_BIN=PATH               the command to test (default build/detach;
#                                 `make check-asan` passes a sanitizer build)
#   DETACH_LIB=PATH               the runtime it preloads (default
#                                 build/libdetach.so); with DETACH_BIN, this
#                                 tree's tests run against another build
#
# After every test the runner checks what no test may leave behind, and fails
# the test that did, with a line naming the leak: a detach-proxy thread still
# running, a new registry file of a live program (/dev/shm/detach), a CPU
# claim still held (a detached thread's CPU, system-wide: src/lib/liveness.h),
# the isolation state (cpusets, IRQ affinities, workqueue masks, RT
# throttling) changed.  Registry files of dead programs (killed before they
# could remove them) are removed, as every reader removes them (`detach ps`).  tests/helpers/ holds the helper libraries (lib.sh, state.sh, t.h,
# t_detach.h).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export DETACH_ROOT=$ROOT
export DETACH_BIN=${DETACH_BIN:-$ROOT/build/detach}
export DETACH_LIB=${DETACH_LIB:-$ROOT/build/libdetach.so}
export BUILD=$ROOT/build
logs=$ROOT/build/test-logs
mkdir -p "$logs"
timeout_s=${TEST_TIMEOUT:-300}

tests=()
if [ $# -gt 0 ]; then
	tests=("$@")
else
	for f in tests/*.c tests/*.sh; do
		[ -e "$f" ] && ! [ "$f" -ef "$0" ] || continue
		n=$(basename "$f"); n=${n%.*}
		tests+=("$n")
	done
fi

. tests/helpers/state.sh

# leaks NAME: what the test left behind against the snapshots taken before
# it, one line each.  Exiting processes need a moment: asks again for 3 s.
leaks() {
	local i new
	for i in $(seq 30); do
		new=$( { comm -13 "$logs/.proxies" <(t_state_proxies) | sed 's/^/detach-proxy thread still running: /'
			 comm -13 "$logs/.registry" <(t_state_registry) | sed 's/^/registry file of a live program left: \/dev\/shm\/detach\//'
			 comm -13 "$logs/.claims" <(t_state_claims) | sed 's/^/CPU claim still held: /'
			 diff "$logs/.isolation" <(t_state_isolation) | sed -n 's/^> /isolation state changed: /p'; } )
		[ -z "$new" ] && return
		sleep 0.1
	done
	echo "$new"
}

pass=0 fail=0 skip=0 failed=()
run_one() {   # NAME MODE (MODE empty: as it comes)
	local n=$1 mode=$2 label=$1 log limit src
	if [ -x "build/tests/$n" ]; then cmd=("build/tests/$n"); src=tests/$n.c
	elif [ -f "tests/$n.sh" ]; then cmd=(bash "tests/$n.sh"); src=tests/$n.sh
	else echo "FAIL $n (no such test)"; fail=$((fail + 1)); failed+=("$n"); return
	fi
	limit=$(sed -n 's/.*Timeout: \([0-9][0-9]*\).*/\1/p' "$src" | head -n 1)
	limit=${limit:-$timeout_s}
	[ -n "$mode" ] && label="$n [$mode]"
	log=$logs/$n${mode:+.$mode}.log
	t_state_proxies >"$logs/.proxies"; t_state_registry >"$logs/.registry"; t_state_claims >"$logs/.claims"
	t_state_isolation >"$logs/.isolation"
	start=$(date +%s.%N)
	DETACH_MODE=$mode timeout -k 10 "$limit" "${cmd[@]}" </dev/null >"$log" 2>&1
	rc=$?
	"$DETACH_BIN" ps >/dev/null 2>&1       # a reader: dead programs' files go
	left=$(leaks)
	if [ -n "$left" ] && [ "$rc" != 124 ] && [ "$rc" != 137 ]; then
		echo "LEAK $label: $(echo "$left" | head -n 1)" >>"$log"
		echo "$left" | sed "s/^/LEAK $label: /" | head -n 5
		rc=1
	fi
	secs=$(printf '%.1f' "$(echo "$(date +%s.%N) - $start" | bc)")
	case $rc in
	0) pass=$((pass + 1)); echo "PASS $label (${secs}s)" ;;
	77) skip=$((skip + 1)); echo "SKIP $label: $(tail -n 1 "$log")" ;;
	124|137) fail=$((fail + 1)); failed+=("$label"); echo "FAIL $label (timed out after ${limit}s)" ;;
	*) fail=$((fail + 1)); failed+=("$label"); echo "FAIL $label (exit $rc)"
	   sed 's/^/    | /' "$log" | tail -n 25 ;;
	esac
}
for n in "${tests[@]}"; do
	case $n in
	run_*|cli_run) for m in ${TEST_MODES:-sud rewrite}; do run_one "$n" "$m"; done ;;
	*) run_one "$n" "" ;;
	esac
done
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
