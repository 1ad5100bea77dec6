#!/usr/bin/env bash
# The one test runner.  Every tests/<name>.c (built to build/tests/<name>) and
# every tests/<name>.sh is a test: exit 0 pass, 77 skip (its last output line
# says why), anything else fail.  Output of each test: build/test-logs/<name>.log
#
#   tests/run.sh [NAME...]        run all tests, or only those named
#   TEST_TIMEOUT=SECONDS          per-test limit (default 300)
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
export DETACH_ROOT=$ROOT
export DETACH_BIN=$ROOT/build/detach
export DETACH_LIB=$ROOT/build/libdetach.so
export BUILD=$ROOT/build
logs=$ROOT/build/test-logs
mkdir -p "$logs"
timeout_s=${TEST_TIMEOUT:-300}

tests=()
if [ $# -gt 0 ]; then
	tests=("$@")
else
	for f in tests/*.c tests/*.sh; do
		[ -e "$f" ] || continue
		n=$(basename "$f"); n=${n%.*}
		case $n in run|lib) continue ;; esac
		tests+=("$n")
	done
fi

pass=0 fail=0 skip=0 failed=()
for n in "${tests[@]}"; do
	if [ -x "build/tests/$n" ]; then cmd=("build/tests/$n")
	elif [ -f "tests/$n.sh" ]; then cmd=(bash "tests/$n.sh")
	else echo "FAIL $n (no such test)"; fail=$((fail + 1)); failed+=("$n"); continue
	fi
	start=$(date +%s.%N)
	timeout -k 10 "$timeout_s" "${cmd[@]}" </dev/null >"$logs/$n.log" 2>&1
	rc=$?
	secs=$(printf '%.1f' "$(echo "$(date +%s.%N) - $start" | bc)")
	case $rc in
	0) pass=$((pass + 1)); echo "PASS $n (${secs}s)" ;;
	77) skip=$((skip + 1)); echo "SKIP $n: $(tail -n 1 "$logs/$n.log")" ;;
	124|137) fail=$((fail + 1)); failed+=("$n"); echo "FAIL $n (timed out after ${timeout_s}s)" ;;
	*) fail=$((fail + 1)); failed+=("$n"); echo "FAIL $n (exit $rc)"
	   sed 's/^/    | /' "$logs/$n.log" | tail -n 25 ;;
	esac
done
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
