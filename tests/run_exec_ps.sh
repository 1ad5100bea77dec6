# Description: detached state survives execve (a wrapper script's exec is
# detached again, its children are not); the program's environment is its
# own; `detach ps` lists a running detached thread; SIGSTOP/SIGCONT work;
# no helper thread outlives the program.
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2

# 1. wrapper.sh execs a program: that program is the detached one.
cat > "$T_TMP/wrapper.sh" <<'SH'
#!/bin/sh
exec "$@"
SH
chmod +x "$T_TMP/wrapper.sh"
probe='
import os
me = os.getpid()
def field(tid, key):
    for l in open(f"/proc/{me}/task/{tid}/status"):
        if l.startswith(key + ":"):
            return l.split(":", 1)[1].strip()
names = {t: open(f"/proc/{me}/task/{t}/comm").read().strip() for t in os.listdir(f"/proc/{me}/task")}
print("proxy" if "detach-proxy" in names.values() else "no-proxy", field(me, "Cpus_allowed_list"))
print("env-clean" if not any(k in ("DETACH_PID", "DETACH_CPUS", "DETACH_PRELOAD_WAS", "LD_PRELOAD") for k in os.environ) else "env-leak")
'
out=$("$DETACH" run -c 1 --stats "$T_TMP/exec.json" -- "$T_TMP/wrapper.sh" python3 -c "$probe" 2>/dev/null)
echo "exec'd program: $out"
grep -q '^proxy 1$' <<<"$out" || t_fail "exec'd program is not detached on CPU 1: $out"
grep -q '^env-clean$' <<<"$out" || t_fail "the program sees detach's variables: $out"
[ "$(t_stat "$T_TMP/exec.json" forwarded)" -gt 0 ] || t_fail "no statistics from the exec'd image"
t_validate run-stats "$T_TMP/exec.json"

# 2. a child (not exec'd by the detached thread itself) is an ordinary process
out=$("$DETACH" run -c 1 -- sh -c "python3 -c '$probe'; true" 2>/dev/null)
echo "child: $out"
grep -q '^no-proxy' <<<"$out" || t_fail "a child process was detached: $out"
grep -q '^env-clean$' <<<"$out" || t_fail "a child sees detach's variables: $out"

# 3. detach ps lists the running program; SIGSTOP/SIGCONT stop and resume it
"$DETACH" run -c 1 -- sh -c 'sleep 3; echo finished' > "$T_TMP/stop.out" 2>/dev/null &
pid=$!
sleep 0.5
ps_out=$("$DETACH" ps)
echo "$ps_out"
grep -qE "^ *$pid +$pid +1 +(sud|rewrite)" <<<"$ps_out" || t_fail "detach ps does not list pid $pid on CPU 1"
"$DETACH" ps --json >"$T_TMP/ps.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert any(t['pid']==$pid for t in d['threads'])" \
	"$T_TMP/ps.json" || t_fail "detach ps --json does not list pid $pid"
t_validate ps "$T_TMP/ps.json"
kill -STOP $pid; sleep 0.3
state=$(awk '{print $3}' /proc/$pid/stat)
[ "$state" = T ] || t_fail "SIGSTOP: state $state"
for t in /proc/$pid/task/*; do
	s=$(awk '{print $3}' $t/stat); [ "$s" = T ] || t_fail "SIGSTOP: thread $(basename $t) in state $s"
done
kill -CONT $pid
wait $pid; rc=$?
[ $rc = 0 ] && grep -q finished "$T_TMP/stop.out" || t_fail "after SIGCONT: exit $rc"

# 4. killed programs leave no thread behind, and their registry entry goes
"$DETACH" run -c 1 -- sleep 30 &
pid=$!
sleep 0.5
kill -KILL $pid; wait $pid 2>/dev/null
sleep 0.2
[ ! -d /proc/$pid ] || t_fail "threads of $pid survive SIGKILL: $(ls /proc/$pid/task)"
"$DETACH" ps | grep -qE "^ *$pid " && t_fail "detach ps lists the killed $pid"
[ ! -e /dev/shm/detach/$pid ] || t_fail "registry entry of the killed $pid remains after detach ps"
t_done
