# Sourced by tests/isolate_*.sh and tests/check_*.sh (not a test itself: the
# runner only runs *.sh and *.c).  Snapshots of every control file `detach
# isolate` may write, taken independently of detach's own state file.
D=${DETACH_BIN:-build/detach}
STATE=/run/detach/isolate.state

skip() { echo "$*"; exit 77; }
fail() { echo "FAIL: $*"; FAILED=1; }

# Isolation is machine-wide: tests that change it or compare snapshots take
# turns (a second test run on the machine would otherwise see their changes).
take_test_lock() {
	exec 9>/run/detach-isolate-tests.lock
	flock -w 600 9 || skip "another isolate test held /run/detach-isolate-tests.lock for 10 minutes"
}

need_root_2cpus() {
	[ "$(id -u)" -eq 0 ] || skip "needs root (isolate changes system settings)"
	[ "$(nproc --all)" -ge 2 ] || skip "needs 2 CPUs"
	grep -qw 1 <(cpus_of "$(cat /sys/devices/system/cpu/online)") || skip "CPU 1 is offline"
	cpuset_root >/dev/null || skip "no cpuset controller mounted"
	take_test_lock
	[ ! -e $STATE ] || skip "the machine is isolated already ($STATE exists): not touching it"
}

cpus_of() { python3 -c '
import sys
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    for c in range(int(a), int(b or a) + 1): print(c)' "$1"; }

# Mount point of the cpuset hierarchy (v1 or v2), from mountinfo.
cpuset_root() {
	local r
	r=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "-") break;
		   if ($(i+1) == "cgroup" && $(i+3) ~ /(^|,)cpuset(,|$)/) print $5 }' /proc/self/mountinfo | head -n1)
	if [ -z "$r" ]; then
		for m in $(awk '{ for (i = 1; i <= NF; i++) if ($i == "-") break; if ($(i+1) == "cgroup2") print $5 }' /proc/self/mountinfo); do
			grep -qw cpuset "$m/cgroup.controllers" 2>/dev/null && { r=$m; break; }
		done
	fi
	[ -n "$r" ] && echo "$r"
}

# Every control file isolate may write, "path=value", sorted; plus the list
# of cgroup directories.
snap_files() {
	local root f
	root=$(cpuset_root)
	{
		find "$root" -type d | sed 's/^/dir /'
		find "$root" \( -name cpuset.cpus -o -name cpuset.mems -o -name cpuset.sched_load_balance \
			-o -name cpuset.cpu_exclusive -o -name cgroup.subtree_control -o -name cpuset.cpus.partition \) |
		while read -r f; do echo "$f=$(cat "$f" 2>/dev/null)"; done
		for f in /proc/irq/*/smp_affinity_list /proc/irq/default_smp_affinity \
			/sys/devices/virtual/workqueue/cpumask /sys/bus/workqueue/devices/*/cpumask \
			/proc/sys/kernel/watchdog_cpumask /proc/sys/kernel/sched_rt_runtime_us /proc/sys/vm/mmap_min_addr; do
			[ -e "$f" ] && echo "$f=$(cat "$f" 2>/dev/null)"
		done
	} | sort
}

# "tid:starttime affinity cpuset" for every thread; a thread is the same
# thread in two snapshots only if tid and start time agree.
snap_tasks() {
	local t st
	for t in /proc/[0-9]*/task/[0-9]*; do
		st=$(cut -d' ' -f22 "$t/stat" 2>/dev/null) || continue
		[ -n "$st" ] || continue
		echo "${t##*/}:$st $(awk '/^Cpus_allowed_list/ {print $2}' "$t/status" 2>/dev/null) $(cat "$t/cpuset" 2>/dev/null)"
	done | sort
}

# Threads present in both snapshots whose affinity or cpuset differ.
tasks_changed() { join "$1" "$2" | awk '$2 != $4 || $3 != $5'; }

# Compares a snapshot pair; names the differences.
same_files() {
	if ! diff "$1" "$2" >/dev/null; then
		fail "$3: control files differ:"
		diff "$1" "$2" | head -n 20
		return 1
	fi
}
