# Description: the systemd units as installed pass `systemd-analyze verify`
# without a word (works where systemd is not PID 1), and `detach run` behaves
# as a service's main process: no terminal, SIGTERM (systemctl stop) ends the
# program as it would natively, with its exit status.
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)

if ! command -v systemd-analyze >/dev/null; then
	echo "skip: systemd-analyze missing (apt package systemd): units not verified"
else
	P=$T_TMP/prefix U=$T_TMP/units
	make -s -C "$ROOT" install PREFIX="$P" >"$T_TMP/install.log" 2>&1 || { cat "$T_TMP/install.log"; t_fail "make install"; }
	mkdir -p "$U"
	# an instance of the template as systemd would load it, beside the example that requires it
	cp "$P/lib/systemd/system/detach-isolate@.service" "$U/detach-isolate@3.service"
	cp "$P/share/doc/detach/examples/detach-app.service" "$U/detach-app.service"
	grep -q "^ExecStart=$P/bin/detach isolate -c %I$" "$U/detach-isolate@3.service" || t_fail "ExecStart not the installed detach"
	out=$(cd "$U" && MANPATH=$P/share/man systemd-analyze verify detach-isolate@3.service detach-app.service 2>&1); rc=$?
	[ $rc -eq 0 ] && [ -z "$out" ] || t_fail "systemd-analyze verify: exit $rc: $out"
	echo "ok: systemd-analyze verify: detach-isolate@3.service, detach-app.service"
fi

# service PID: waits until detach run's program runs detached (the kernel's
# affinity of its first thread is CPU 1), or fails
detached_pid() {
	local pid=$1 i
	for i in $(seq 50); do
		[ "$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/$pid/status 2>/dev/null)" = 1 ] && return 0
		sleep 0.1
	done
	return 1
}

# As systemd runs a service: its own session, no terminal, output to a file.
# In the background it is started with a plain `&` so that $! is the program.
O=$T_TMP/svc.out E=$T_TMP/svc.err

setsid "$DETACH" run -c 1 -- sh -c 'tty; echo out; exit 3' </dev/null >"$O" 2>"$E"; rc=$?
[ $rc -eq 3 ] || t_fail "no terminal: exit $rc, want 3: $(cat "$E")"
[ "$(cat "$O")" = "$(printf 'not a tty\nout')" ] || t_fail "no terminal: output $(cat "$O")"
echo "ok: without a terminal, exit status $rc"

# SIGTERM with no handler: killed by it, 128+15 as natively
for how in native detached; do
	if [ $how = native ]; then setsid sleep 30 </dev/null >"$O" 2>"$E" &
	else setsid "$DETACH" run -c 1 -- sleep 30 </dev/null >"$O" 2>"$E" &
	fi
	pid=$!
	if [ $how = detached ]; then detached_pid $pid || t_fail "sleep never ran detached"; else sleep 0.3; fi
	kill -TERM $pid; wait $pid; rc=$?
	[ $rc -eq 143 ] || t_fail "$how: SIGTERM: exit $rc, want 143"
	echo "ok: $how: SIGTERM ends it with exit status $rc"
done

# SIGTERM with a handler: the program's own clean exit
setsid "$DETACH" run -c 1 -- sh -c 'trap "echo stopping; exit 7" TERM; while :; do sleep 0.1; done' \
	</dev/null >"$O" 2>"$E" &
pid=$!
detached_pid $pid || t_fail "sh never ran detached"
kill -TERM $pid; wait $pid; rc=$?
[ $rc -eq 7 ] || t_fail "SIGTERM handler: exit $rc, want 7: $(cat "$E")"
grep -qx stopping "$O" || t_fail "SIGTERM handler did not run: $(cat "$O")"
echo "ok: SIGTERM runs the program's handler, exit status $rc"
t_reap_registry   # services stopped by SIGTERM keep their registry files
t_done
