# Description: examples/control_loop.c, the paper's loop through the API,
# runs linked on its own and under `detach run`, detached on CPU 1, with its
# waits served without the kernel (no forwarded or trapping sleep).
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
ex=$BUILD/examples/control_loop
[ -x "$ex" ] || { t_fail "examples/control_loop was not built"; t_done; }
for how in linked detached; do
	if [ $how = linked ]; then out=$("$ex" -c 1 -p 1000 -n 300 2>&1); rc=$?
	else out=$("$DETACH" run -c 1 -- "$ex" -p 1000 -n 300 2>&1); rc=$?; fi
	echo "$how: $out"
	[ $rc = 0 ] || t_fail "$how: exit $rc"
	grep -q "300 periods of 1000 us on CPU 1" <<<"$out" || t_fail "$how: not run on CPU 1"
	# 300 waits, none of them a system call
	grep -qE "system calls: [0-9]+ forwarded, [0-9]+ local, 0 emulated" <<<"$out" || t_fail "$how: waits were emulated calls"
	fwd=$(sed -n 's/.*system calls: \([0-9]*\) forwarded.*/\1/p' <<<"$out")
	[ "${fwd:-999}" -lt 50 ] || t_fail "$how: $fwd forwarded calls for 300 waits"
done
t_done
