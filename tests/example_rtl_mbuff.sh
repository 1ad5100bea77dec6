# Description: examples/rtl/mbuff_rt.c and mbuff_peer.c: an RT task and a
# Linux process that mbuff_alloc the same name share one region: the peer's
# gain reaches the 1 kHz RT thread, whose samples (value = gain * period)
# the peer reads consistent; the last mbuff_free removes the name.
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
kill -TERM $task; wait $task; rc=$?
[ $rc -eq 0 ] || t_fail "mbuff_rt after SIGTERM: exit $rc: $(cat "$T_TMP/rt.log")"
[ -e $shm ] && t_fail "$shm left after the last mbuff_free"
echo "ok: the region is gone with its last user"
t_done
