# Description: unmodified programs behave the same with and without detach
# (same stdout, same exit status); each detached run shows forwarded calls.
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2

head -c 50000000 /dev/urandom > "$T_TMP/50M"
seq 100000 | shuf --random-source=<(yes) > "$T_TMP/lines"

# /proc's link count is the number of processes: it changes by itself.
T_FILTER='/ proc$/d' t_compare ls ls -la /
t_compare sha256sum sha256sum "$T_TMP/50M"
t_compare sort sort "$T_TMP/lines"
t_compare dd sh -c "dd if=$T_TMP/50M of=/dev/null bs=1M 2>/dev/null; echo dd \$?"

cat > "$T_TMP/script.sh" <<'SCRIPT'
set -e
seq 1 20 | grep 1 | sort -r | tr '\n' ' '; echo
( cd /; pwd; echo "sub $((6 * 7))" )
x=$(echo inner | sed s/inner/outer/); echo "$x"
cat <<HERE
here-doc $x
HERE
echo data > out.txt; cat < out.txt >> out2.txt; cat out2.txt 2>&1
{ echo a; echo b >&2; } 2>/dev/null
f() { local n=$1; [ "$n" -le 0 ] && return 3; f $((n - 1)); }
f 5 || echo "f returned $?"
SCRIPT
t_compare bash bash "$T_TMP/script.sh"

t_compare python python3 -c '
import os, subprocess, threading
with open("f.txt", "w") as f:
    f.write("x" * 100000)
total = []
def work(i):
    with open("f.txt") as f:
        total.append(len(f.read()) + i)
ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print(sorted(total))
print(subprocess.run(["sh", "-c", "echo child; exit 5"], capture_output=True))
'
t_compare exit42 sh -c 'exit 42'
T_NO_STATS=1 t_compare segv sh -c 'kill -SEGV $$'
T_NO_STATS=1 t_compare abort python3 -c 'import os; os.abort()'
t_done
