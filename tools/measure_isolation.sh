#!/usr/bin/env bash
# Measures what `detach isolate` buys: oslat (rt-tests) busy loop on CPU 1
# with a compile loop pinned to CPU 0, isolated versus not, alternated.
#   tools/measure_isolation.sh [ROUNDS [SECONDS]]     (root; default 3 20)
# Prints one line per run: max and p99.9 gap (us, from oslat's 1-us
# histogram) and local timer interrupts (LOC) on CPU 1 during the run.
# Leaves the machine as it found it (--undo on every exit path).
set -eu
cd "$(dirname "$0")/.."
ROUNDS=${1:-3} SECS=${2:-20}
D=$PWD/build/detach
CPUSET=/sys/fs/cgroup/cpuset
[ "$(id -u)" -eq 0 ] || { echo "measure_isolation: run as root" >&2; exit 1; }
command -v oslat >/dev/null || { echo "NOTE: apt-get install rt-tests" >&2; exit 1; }
[ ! -e /run/detach/isolate.state ] || { echo "measure_isolation: already isolated; undo first" >&2; exit 1; }
T=$(mktemp -d)
load_pid=
cleanup() { [ -n "$load_pid" ] && kill -- -"$load_pid" 2>/dev/null; "$D" isolate --undo >/dev/null 2>&1; rm -rf "$T"; }
trap cleanup EXIT

# Build load on CPU 0: compile the tree's C files again and again (-j1).
cp -r src include "$T/"
setsid taskset -c 0 bash -c 'cd "$1"; while :; do for f in src/lib/*.c src/cli/*.c; do
	gcc -O2 -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc -DDETACH_VERSION=\"x\" -c "$f" -o /dev/null 2>/dev/null; done; done' _ "$T" &
load_pid=$!

loc() { awk '$1 == "LOC:" { print $3 }' /proc/interrupts; }   # column of CPU 1

run() {   # $1: isolated | plain
	local j=$T/oslat.json l0 l1
	l0=$(loc)
	# From the root cpuset, a thread may be pinned to CPU 1 whether or not
	# CPU 1 is isolated (the detach cpusets are children of the root).
	[ -d $CPUSET ] && echo $BASHPID > $CPUSET/tasks 2>/dev/null || true
	oslat -q -c 1 -C 0 -D "$SECS" -b 1024 --json="$j" >/dev/null
	l1=$(loc)
	python3 - "$j" "$1" $((l1 - l0)) "$SECS" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = list(d["thread"].values())[0]
h = {int(k): v for k, v in t["histogram"].items()}
n = sum(h.values()); acc = 0; p999 = None
for us in sorted(h):
    acc += h[us]
    if p999 is None and acc >= n * 0.999: p999 = us
print("%-9s max %6s us  p99.9 %4s us  LOC on CPU1 %5s  (%s s)" % (sys.argv[2], t["max"], p999, sys.argv[3], sys.argv[4]))
PY
}

echo "oslat -c 1 -D $SECS, compile loop on CPU 0; $(uname -r)"
for r in $(seq 1 "$ROUNDS"); do
	run plain
	"$D" isolate -c 1 >/dev/null
	( run isolated )
	"$D" isolate --undo >/dev/null
done
