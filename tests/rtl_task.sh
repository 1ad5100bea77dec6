# Description: RTLinux programs as detached RT tasks (docs/rtl.md), with plain
# cat and echo on /dev/rtfN: examples/rtl/frank streams on rtf1 and rtf2,
# its handler on rtf3 stops and restarts a thread when Linux writes a
# command; an RT thread blocked in rtf_get_wait wakes on a Linux write; the
# task survives its reader being killed; and on the kernel's own counters the
# executive made no system call and no sleep through all of it.  init_module
# failing: a message and exit 1, without cleanup_module; SIGTERM and SIGINT
# run cleanup_module and exit 0; an unprovided RTLinux call fails the build.
# Timeout: 120
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
t_need_fuse
t_need_fuse
frank=$BUILD/examples/rtl/frank
echo_task=$BUILD/tests/rtl/echo_task
[ -x "$frank" ] && [ -x "$echo_task" ] || { t_fail "examples/rtl/frank or tests/rtl/echo_task not built"; t_done; }
dir=/dev
[ -w /dev ] || dir=/dev/shm/detach-rtf
unset DETACH_RTF_DIR

# task_start PROG LOG: starts the RT task, waits until its FIFO files are there
task_start() {
	"$1" >"$2" 2>&1 &
	task=$!
	for _ in $(seq 100); do
		exec_tid=$(grep -l '^rtl-exec$' /proc/$task/task/*/comm 2>/dev/null | cut -d/ -f5)
		# one thread: a proxy just cloned from the executive bears its
		# name until it names itself detach-proxy
		[ -n "$exec_tid" ] && [ "$(wc -l <<<"$exec_tid")" -eq 1 ] && [ -e "$dir/rtf$3" ] && return 0
		sleep 0.05
	done
	t_fail "$1 did not start: $(cat "$2")"
	kill -9 $task
	t_done
}
counters() {   # the executive's system calls that read or wrote, and its sleeps
	echo "$(awk '/^sysc[rw]/ { printf "%s ", $2 }' /proc/$task/task/$exec_tid/io)$(awk '/^voluntary/ { print $2 }' /proc/$task/task/$exec_tid/status)"
}

# --- frank: two periodic threads, a control handler --------------------------
task_start "$frank" "$T_TMP/frank.log" 3
aff=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/$task/task/$exec_tid/status)
echo "frank: pid $task, executive $exec_tid on CPU $aff, FIFOs in $dir"
timeout 1.2 cat $dir/rtf1 >"$T_TMP/r1" || true    # warm-up: the first lines
before=$(counters)
grep -q '^Frank 1$' "$T_TMP/r1" || t_fail "cat $dir/rtf1: '$(head -c 200 "$T_TMP/r1")', expected Frank 1, 2, ..."
echo "ok: cat $dir/rtf1: $(wc -l <"$T_TMP/r1") lines, $(head -1 "$T_TMP/r1") ..."

echo "stop 1" >$dir/rtf3
sleep 0.3
timeout 0.5 cat $dir/rtf1 >/dev/null
timeout 1.6 cat $dir/rtf1 >"$T_TMP/stopped"     # 3 periods of 500 ms
[ ! -s "$T_TMP/stopped" ] || t_fail "after 'stop 1' on rtf3, task 1 still wrote: $(head -2 "$T_TMP/stopped")"
echo "start 1 100" >$dir/rtf3
timeout 1.2 cat $dir/rtf1 >"$T_TMP/r1b"
last=$(tail -1 "$T_TMP/r1" | cut -d' ' -f2); next=$(head -1 "$T_TMP/r1b" | cut -d' ' -f2)
[ -n "$next" ] && [ "$next" -gt "$last" ] || t_fail "after 'start 1' task 1 did not go on: '$last' then '$next'"
echo "ok: echo stop/start > $dir/rtf3: the handler suspended task 1 (3 periods silent), then resumed it at $next"

# the reader killed: the RT side goes on, the next reader continues the stream
cat $dir/rtf2 >"$T_TMP/r2" &
reader=$!
sleep 1.2
kill -9 $reader; wait $reader 2>/dev/null
kill -0 $task 2>/dev/null || t_fail "the RT task died with its reader"
timeout 1.2 cat $dir/rtf2 >"$T_TMP/r2b"
a=$(tail -1 "$T_TMP/r2" | cut -d' ' -f2); b=$(head -1 "$T_TMP/r2b" | cut -d' ' -f2)
[ -n "$a" ] && [ -n "$b" ] && [ "$b" -gt "$a" ] || t_fail "after its reader was killed: '$a' then '$b'"
echo "ok: reader killed (SIGKILL) at Zappa $a; the task lives, the next reader starts at Zappa $b"

after=$(counters)
echo "executive: syscr syscw voluntary switches: before '$before', after '$after'"
[ -n "$before" ] && [ "$before" = "$after" ] || t_fail "the executive entered the kernel: '$before' -> '$after'"
kill -TERM $task; wait $task; rc=$?
[ $rc -eq 0 ] || t_fail "frank after SIGTERM: exit $rc: $(cat "$T_TMP/frank.log")"
[ ! -e $dir/rtf1 ] && [ ! -L $dir/rtf1 ] || t_fail "$dir/rtf1 is still there after the task ended"
grep -q "detach-rtl.$task" /proc/mounts && t_fail "the task's FUSE mount is still there"
echo "ok: SIGTERM: exit 0, FIFO links and mount removed"

# --- a thread blocked in rtf_get_wait; cleanup_module on SIGTERM / SIGINT ---
task_start "$echo_task" "$T_TMP/echo.log" 8
cat $dir/rtf8 >"$T_TMP/echoed" &
reader=$!
echo warm >$dir/rtf7
sleep 0.5
before=$(counters)
for i in $(seq 20); do echo "line $i" >$dir/rtf7; done
for _ in $(seq 50); do grep -q "LINE 20" "$T_TMP/echoed" && break; sleep 0.1; done
after=$(counters)
kill $reader; wait $reader 2>/dev/null
[ "$(grep -c '^LINE ' "$T_TMP/echoed")" = 20 ] || t_fail "rtf_get_wait: echoed '$(tr '\n' ' ' <"$T_TMP/echoed")'"
[ -n "$before" ] && [ "$before" = "$after" ] || t_fail "waking on Linux writes entered the kernel: '$before' -> '$after'"
echo "ok: 20 writes to $dir/rtf7 woke the RT thread in rtf_get_wait, echoed on rtf8; executive '$before' -> '$after'"
# poll and O_NONBLOCK on the files, as a Linux program uses them
python3 - "$dir" <<'PY' || t_fail "poll on $dir/rtf8 and rtf7"
import os, select, sys
d = sys.argv[1]
r = os.open(d + "/rtf8", os.O_RDONLY | os.O_NONBLOCK)
try:
    os.read(r, 100)
    sys.exit("rtf8 read data before any write")
except BlockingIOError:
    pass
p = select.poll(); p.register(r, select.POLLIN)
assert p.poll(100) == [], "rtf8 readable before any write"
w = os.open(d + "/rtf7", os.O_WRONLY)
pw = select.poll(); pw.register(w, select.POLLOUT)
assert pw.poll(0) == [(w, select.POLLOUT)], "rtf7 not writable"
os.write(w, b"poll\n")
assert p.poll(10000) == [(r, select.POLLIN)], "rtf8 not readable after the echo"
data = os.read(r, 100)
assert data == b"POLL\n", data
print("ok: O_NONBLOCK read of an empty rtf8: EAGAIN; poll: rtf7 writable, rtf8 readable once the RT thread echoed")
PY
kill -TERM $task; wait $task; rc=$?
[ $rc -eq 0 ] && grep -q "cleanup_module ran" "$T_TMP/echo.log" || t_fail "SIGTERM: exit $rc, $(cat "$T_TMP/echo.log")"
task_start "$echo_task" "$T_TMP/echo2.log" 8
kill -INT $task; wait $task; rc=$?
[ $rc -eq 0 ] && grep -q "cleanup_module ran" "$T_TMP/echo2.log" || t_fail "SIGINT: exit $rc, $(cat "$T_TMP/echo2.log")"
echo "ok: SIGTERM and SIGINT run cleanup_module, exit 0"

RTL_TEST_FAIL_INIT=5 "$echo_task" >"$T_TMP/fail.log" 2>&1; rc=$?
[ $rc -eq 1 ] || t_fail "init_module failing: exit $rc, expected 1"
grep -q "init_module() failed: -5" "$T_TMP/fail.log" || t_fail "init_module failing: no message: $(cat "$T_TMP/fail.log")"
grep -q "cleanup_module ran" "$T_TMP/fail.log" && t_fail "cleanup_module ran after init_module failed"
[ -e $dir/rtf7 ] && t_fail "$dir/rtf7 left after a failed init_module"
echo "ok: init_module failing: '$(head -1 "$T_TMP/fail.log")', exit 1"

# --- what RTLinux had and detach-rtl does not: the build fails ---------------
cat >"$T_TMP/irq.c" <<'EOF'
#include <detach/rtl.h>
static unsigned int h(unsigned int irq, struct rtl_frame *f) { (void)f; return irq; }
int init_module(void) { return rtl_request_irq(5, h); }
void cleanup_module(void) {}
EOF
if ${CC:-cc} -I"$DETACH_ROOT/include" -c -o "$T_TMP/irq.o" "$T_TMP/irq.c" 2>"$T_TMP/cc.log"; then
	t_fail "a program calling rtl_request_irq compiled"
else
	grep -q "rtl_request_irq (RT interrupt handlers) is not provided by detach-rtl" "$T_TMP/cc.log" ||
		t_fail "the build failed without the message: $(cat "$T_TMP/cc.log")"
	echo "ok: rtl_request_irq fails the build: $(grep -m1 -o "error: .*" "$T_TMP/cc.log")"
fi
t_done
