# Description: examples/rtl/mbuff_rt.c and mbuff_peer.c: an RT task and a
# Linux process that mbuff_alloc the same name share one region: the peer's
# gain reaches the 1 kHz RT thread, whose samples (value = gain * period)
# the peer reads consistent; the last mbuff_free removes the name.  A peer
# killed with SIGKILL while it maps the region is not counted: the kernel
# dropped its lock (/proc/locks), and the RT task's mbuff_free, the last live
# user's, still removes the region.
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
t_need_fuse
t_need_fuse
rt=$BUILD/examples/rtl/mbuff_rt peer=$BUILD/examples/rtl/mbuff_peer
[ -x "$rt" ] && [ -x "$peer" ] || { t_fail "examples/rtl/mbuff_rt or mbuff_peer not built"; t_done; }
shm=/dev/shm/detach/ipc/mbuff.rtl_demo.shm
DETACH_RTF_DIR=$T_TMP "$rt" >"$T_TMP/rt.log" 2>&1 &
task=$!
for _ in $(seq 100); do [ -e $shm ] && break; sleep 0.05; done
[ -e $shm ] || t_fail "mbuff_rt made no region $shm: $(cat "$T_TMP/rt.log")"
for gain in 3 7; do
	out=$(timeout 20 "$peer" $gain 200); rc=$?
	echo "$out"
	[ $rc -eq 0 ] && grep -q "gain $gain: value = gain \* period in all" <<<"$out" || t_fail "peer gain $gain: exit $rc"
done
# users by the kernel: shared OFD locks on the region's file (/proc/locks)
locks() { awk -v ino=":$(stat -c %i $shm)" '$2 == "OFDLCK" && $4 == "READ" && substr($6, length($6) - length(ino) + 1) == ino { n++ } END { print n + 0 }' /proc/locks; }
before=$(locks)
"$peer" 5 1000000 >/dev/null &
victim=$!
for _ in $(seq 100); do [ "$(locks)" -gt "$before" ] && break; sleep 0.05; done
during=$(locks)
kill -KILL $victim; wait $victim 2>/dev/null
for _ in $(seq 100); do [ "$(locks)" -eq "$before" ] && break; sleep 0.05; done
after=$(locks)
echo "users in /proc/locks: $before, with a second peer $during, after its SIGKILL $after"
[ "$before" -ge 1 ] && [ "$during" -eq $((before + 1)) ] && [ "$after" -eq "$before" ] ||
	t_fail "mbuff users in /proc/locks: $before, $during, $after (expected N, N+1, N)"
kill -TERM $task; wait $task; rc=$?
[ $rc -eq 0 ] || t_fail "mbuff_rt after SIGTERM: exit $rc: $(cat "$T_TMP/rt.log")"
if [ -e $shm ]; then
	t_fail "$shm left after the last live user's mbuff_free (a killed peer counted)"
	rm -f $shm
else
	echo "ok: the region is gone with its last live user, the killed peer not counted"
fi
t_done
