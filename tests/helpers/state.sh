# What a test may leave behind, read from the kernel's own files (sourced by
# tests/run.sh after every test, and by the isolate tests).  Every function
# prints one item a line, sorted, so that two snapshots compare with comm.
# Reads with bash builtins only: it runs twice per test.

REGISTRY_DIR=/dev/shm/detach          # src/lib/contract.h
ISOLATE_STATE=/run/detach/isolate.state   # src/lib/partition.h

# Proxy threads alive: "pid/tid starttime".
t_state_proxies() {
	local t c st
	for t in /proc/[0-9]*/task/[0-9]*; do
		{ c=$(<"$t/comm"); } 2>/dev/null || continue
		[ "$c" = detach-proxy ] || continue
		{ st=$(<"$t/stat"); } 2>/dev/null || continue
		st=${st##*) }                    # fields from 3 on; comm may hold spaces
		read -r -a st <<<"$st"
		t=${t#/proc/}
		echo "${t%%/*}/${t##*/} ${st[19]}"
	done | sort
}

# The locks of the runtimes in the locks file (src/lib/liveness.h), from
# the kernel's /proc/locks: "cpu N pid P" for a CPU that holds a detached
# thread of P, "alive P" for a process whose registry file is its own.  The
# kernel drops them when the process dies: what is listed lives.
LOCKS_FILE=$REGISTRY_DIR/locks        # src/lib/liveness.h
LOCK_PID_BASE=1024                    # CPU_SETSIZE
t_state_locks() {
	local key dev ino _i kind pid id start end b
	{ read -r dev ino < <(stat -c '%D %i' "$LOCKS_FILE"); } 2>/dev/null || return 0
	dev=$((16#$dev))
	printf -v key '%02x:%02x:%s' $(((dev >> 8) & 0xfff)) $(((dev & 0xff) | ((dev >> 12) & 0xfff00))) "$ino"
	while read -r _i kind _ _ pid id start end; do
		[ "$kind" = POSIX ] && [ "$id" = "$key" ] || continue
		[ "$end" = EOF ] && end=$start
		if [ "$start" -ge $LOCK_PID_BASE ]; then
			for ((b = start; b <= end && b < start + 64; b++)); do echo "alive $((b - LOCK_PID_BASE))"; done
		else
			for ((b = start; b <= end && b < LOCK_PID_BASE; b++)); do echo "cpu $b pid $pid"; done
		fi
	done </proc/locks | sort
}

# CPU claims held (one line each, "cpu N pid P").
t_state_claims() { t_state_locks | grep '^cpu ' || true; }

# Registry files of live programs: "pid".  A file whose owner is dead is
# no program's: every reader removes it (`detach ps`, the runner).
t_state_registry() {
	local f p live
	live=" $(t_state_locks | sed -n 's/^alive //p' | tr '\n' ' ') "
	for f in "$REGISTRY_DIR"/[0-9]*; do
		[ -e "$f" ] || continue
		p=${f##*/}
		case $live in *" $p "*) echo "$p" ;; esac
	done | sort
}

# Mount point of the cpuset hierarchy (v1 or v2), from mountinfo.
cpuset_root() {
	local r m
	r=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "-") break;
		   if ($(i+1) == "cgroup" && $(i+3) ~ /(^|,)cpuset(,|$)/) print $5 }' /proc/self/mountinfo | head -n1)
	if [ -z "$r" ]; then
		for m in $(awk '{ for (i = 1; i <= NF; i++) if ($i == "-") break; if ($(i+1) == "cgroup2") print $5 }' /proc/self/mountinfo); do
			grep -qw cpuset "$m/cgroup.controllers" 2>/dev/null && { r=$m; break; }
		done
	fi
	[ -n "$r" ] && echo "$r"
}

# What `detach isolate` changes outside the cgroup tree, "path=value".
isolation_files() {
	local f
	for f in /proc/irq/*/smp_affinity_list /proc/irq/default_smp_affinity \
		/sys/devices/virtual/workqueue/cpumask /sys/bus/workqueue/devices/*/cpumask \
		/proc/sys/kernel/watchdog_cpumask /proc/sys/kernel/sched_rt_runtime_us /proc/sys/vm/mmap_min_addr; do
		[ -e "$f" ] && { echo "$f=$(<"$f")"; } 2>/dev/null
	done
}

# The isolation state as `detach isolate` changes it: the partition's
# cpusets and the root's, IRQ affinities, workqueue and watchdog masks, RT
# throttling, mmap_min_addr, the state file.  Other cgroups come and go with
# the machine's services, so only detach's own and the root are read.
t_state_isolation() {
	local root f
	root=$(cpuset_root)
	{
		[ -e "$ISOLATE_STATE" ] && echo "state file $ISOLATE_STATE"
		if [ -n "$root" ]; then
			for f in "$root"/cpuset.cpus "$root"/cpuset.sched_load_balance "$root"/cgroup.subtree_control \
				"$root"/detach/cpuset.cpus "$root"/detach/cpuset.cpus.partition "$root"/detach-hk/cpuset.cpus; do
				[ -e "$f" ] && { echo "$f=$(<"$f")"; } 2>/dev/null
			done
		fi
		isolation_files
	} | sort
}
