# Description: CPU time reports what the program computed, not the time
# the runtime spent waiting for it: process_time, thread_time, getrusage
# (RUSAGE_SELF, RUSAGE_THREAD), times() and the process CPU clock advance
# less than 50 ms around a 100 ms sleep (served in user space) and a 100 ms
# select on a pipe (forwarded), as natively; `ulimit -t 1` does not stop a
# program that sleeps 3 s, still stops one that computes (as natively), and
# the program reads its own limit, also after execve.
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2

cat > "$T_TMP/cpu.py" <<'PY'
import os, resource, select, time
def now():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    rt = resource.getrusage(resource.RUSAGE_THREAD)
    tm = os.times()
    return [time.process_time(), time.thread_time(), ru.ru_utime + ru.ru_stime,
            rt.ru_utime + rt.ru_stime, tm.user + tm.system,
            time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID)]
names = ["process_time", "thread_time", "RUSAGE_SELF", "RUSAGE_THREAD", "times", "CLOCK_PROCESS_CPUTIME_ID"]
r, w = os.pipe()
bad = 0
for what, wait in (("sleep", lambda: time.sleep(0.1)), ("select", lambda: select.select([r], [], [], 0.1))):
    for i in range(3):
        a = now(); wait(); b = now()
        for n, x, y in zip(names, a, b):
            if not 0 <= y - x < 0.05:   # spinning counted would be 0.1 s; times() ticks are 10 ms
                bad += 1
                print(f"{n} advanced {y - x:.4f} s around a 100 ms {what}")
print("cpu time ok" if not bad else f"{bad} wrong")
PY
t_compare cputime python3 "$T_TMP/cpu.py"
cat "$T_TMP/cputime/detached.out"

# RLIMIT_CPU counts the program's computing, not the runtime's spinning
# (with CAP_SYS_RESOURCE or an unlimited hard limit the runtime keeps the
# limit by the program's own time; without, its timed waits sleep).
start=$(date +%s)
bash -c "ulimit -t 1; exec $DETACH run -c 1 -- sleep 3" 2>"$T_TMP/sleep.err"
rc=$?
echo "ulimit -t 1; detach run -- sleep 3: exit $rc after $(( $(date +%s) - start )) s"
cat "$T_TMP/sleep.err"
[ $rc -eq 0 ] || t_fail "a 3 s sleep under ulimit -t 1 exits $rc"
bash -c "ulimit -t 1; exec $DETACH run -c 1 -- sh -c 'exec sleep 2'" 2>/dev/null ||
	t_fail "a sleep after execve under ulimit -t 1 was stopped"
native=$(bash -c 'ulimit -t 1; exec python3 -c "while 1: pass"' 2>/dev/null; echo $?)
detached=$(bash -c "ulimit -t 1; exec $DETACH run -c 1 -- python3 -c 'while 1: pass'" 2>/dev/null; echo $?)
echo "ulimit -t 1, a program that computes: exit $native natively, $detached detached"
[ "$native" = "$detached" ] || t_fail "computing under ulimit -t 1: exit $detached, natively $native"
want=$(bash -c 'ulimit -St 5; ulimit -Ht 7; sh -c "ulimit -St; ulimit -Ht; exec sh -c \"ulimit -St; ulimit -Ht\""')
got=$(bash -c "ulimit -St 5; ulimit -Ht 7; $DETACH run -c 1 -- sh -c 'ulimit -St; ulimit -Ht; exec sh -c \"ulimit -St; ulimit -Ht\"'" 2>/dev/null)
echo "limits read by the program: natively" $want, detached $got
[ "$got" = "$want" ] || t_fail "the program reads its CPU limit as '$(echo $got)', natively '$(echo $want)'"
t_reap_registry   # programs killed by RLIMIT_CPU keep their registry files
t_done
