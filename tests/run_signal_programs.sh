#!/usr/bin/env bash
# Description: real programs whose signals and identity detach must keep:
# `yes | head -1` and `seq inf | head -1` die of SIGPIPE as natively; a
# write past `ulimit -f` dies of SIGXFSZ; strace and gdb trace from a
# detached thread; setpriv changes credentials (with and without clearing
# groups) and the program after its execve still runs, detached.
# Timeout: 300
source "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
for p in strace gdb setpriv; do command -v $p >/dev/null || t_skip "$p is not installed (make deps)"; done

# A pipeline's first command: its exit status, natively and detached.
pipe_status() {   # CMD...
	local st
	"$@" | head -1 >/dev/null; st=${PIPESTATUS[0]}
	echo "$st"
}
for cmd in "yes" "seq inf"; do
	n=$(pipe_status $cmd)
	d=$(pipe_status "$DETACH" run -c 1 -- $cmd)
	echo "$cmd | head -1: natively $n, detached $d"
	[ "$n" = "$d" ] || t_fail "$cmd | head -1: exit status $d, natively $n"
done

# SIGXFSZ: the limit is set by the detached shell, whose next image dd
# writes one block (1 KiB) and is killed by the next write.
xfsz='ulimit -f 1; exec dd if=/dev/zero of="$0" bs=4096 count=4 2>/dev/null'
bash -c "$xfsz" "$T_TMP/native.f"; n="$? $(stat -c %s "$T_TMP/native.f")"
"$DETACH" run -c 1 -- bash -c "$xfsz" "$T_TMP/detached.f"; d="$? $(stat -c %s "$T_TMP/detached.f")"
echo "dd past ulimit -f (status, file size): natively $n, detached $d"
[ "$n" = "$d" ] || t_fail "dd past ulimit -f: $d, natively $n"

cat >"$T_TMP/hello.c" <<'EOF'
#include <stdio.h>
int main(void) { puts("hello"); return 3; }
EOF
cc -g -O0 -o "$T_TMP/hello" "$T_TMP/hello.c" || t_fail "cc"

t_compare strace strace -f -qq -e trace=write -o /dev/null "$T_TMP/hello"
T_FILTER='/^\[Inferior 1 (process [0-9]*) exited/s/process [0-9]*/process N/' \
	t_compare gdb gdb -nx -batch -ex run "$T_TMP/hello"
# Credentials: the image after the uid change cannot write root's files,
# so no statistics; it must still run, and run detached (its one thread on
# CPU 1 by the kernel's own status).
T_NO_STATS=1 t_compare setpriv-groups setpriv --reuid=65534 --regid=65534 --clear-groups id
T_NO_STATS=1 t_compare setpriv-uid setpriv --reuid=65534 id
cpus=$("$DETACH" run -c 1 -- setpriv --reuid=65534 --regid=65534 --clear-groups \
	grep Cpus_allowed_list /proc/self/status 2>"$T_TMP/setpriv.err")
echo "after setpriv and execve: $cpus"
[ "$(echo "$cpus" | awk '{print $2}')" = 1 ] || { t_fail "after setpriv: '$cpus', not detached on CPU 1"; cat "$T_TMP/setpriv.err" >&2; }
t_reap_registry   # programs killed by SIGPIPE and SIGXFSZ keep their registry files
t_done
