# Description: isolate CPU 1, isolate again (harmless), check finds nothing
# isolate could fix, undo; every file isolate wrote reads as it saved it, as
# an independent snapshot taken before says, and as undo's report says.
. "$(dirname "$0")/helpers/lib.sh"
cd "$ROOT"
t_need_isolation
T=$T_TMP

t_snap_files >"$T/files.0"; t_snap_tasks >"$T/tasks.0"

"$DETACH" isolate -c 1 >"$T/iso1" 2>&1 || { cat "$T/iso1"; t_fail "isolate -c 1 exited $?"; exit 1; }
grep -q '^set ' "$T/iso1" || t_fail "isolate printed no change"
[ -f $STATE ] || t_fail "no state file"
[ "$(stat -c %a $STATE)" = 600 ] || t_fail "state file mode $(stat -c %a $STATE), want 600"
[ "$(stat -c %U $STATE)" = root ] || t_fail "state file not owned by root"
cp $STATE "$T/state.1"
t_snap_files >"$T/files.1"
diff -q "$T/files.0" "$T/files.1" >/dev/null && t_fail "isolate changed no control file"

# Twice is harmless: exit 0, and the saved (original) values stay as they were.
"$DETACH" isolate -c 1 >"$T/iso2" 2>&1 || t_fail "second isolate exited $?"
grep '^write ' $STATE >"$T/w2"; grep '^write ' "$T/state.1" >"$T/w1"
cmp -s "$T/w1" "$T/w2" || t_fail "second isolate changed the saved values"
# A different CPU list is refused while isolated.
"$DETACH" isolate -c 0 >"$T/iso3" 2>&1 && t_fail "isolate -c 0 while CPU 1 is isolated succeeded"

# The partition exists and tasks are off CPU 1.
root=$(cpuset_root)
[ -d "$root/detach" ] || t_fail "no partition cgroup $root/detach"
self=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
grep -qw 1 <(t_cpus_of "$self") && t_fail "this test's own process may still run on CPU 1 ($self)"

# check: no finding that isolate can fix is left at warn or block.
"$DETACH" check -c 1 --sample 0 --json >"$T/check.json"
rc=$?
python3 - "$T/check.json" "$rc" <<'PY' || t_fail "check after isolate"
import json, sys
d = json.load(open(sys.argv[1])); rc = int(sys.argv[2])
bad = [f for f in d["findings"] if f["fixed_by_isolate"] and f["severity"] in ("warn", "block")]
for f in bad: print("left:", f["id"], f["what"])
part = [f for f in d["findings"] if f["id"] == "partition"]
ok = not bad and part and all(f["severity"] == "ok" for f in part) and d["return_code"] == rc
sys.exit(0 if ok else 1)
PY

t_snap_tasks >"$T/tasks.1"
"$DETACH" isolate --undo >"$T/undo" 2>&1; rc=$?
[ $rc -eq 0 ] || { t_fail "undo exited $rc"; cat "$T/undo"; }
grep -q ' 0 failure(s)' "$T/undo" || t_fail "undo reports failures: $(tail -n1 "$T/undo")"
[ ! -e $STATE ] || t_fail "state file left after undo"

# Independent comparison with the snapshot before isolate.
t_snap_files >"$T/files.2"; t_snap_tasks >"$T/tasks.2"
t_same_files "$T/files.0" "$T/files.2" "after undo"
ch=$(t_tasks_changed "$T/tasks.0" "$T/tasks.2")
[ -z "$ch" ] || { t_fail "threads whose affinity or cpuset differ after undo:"; echo "$ch" | head; }
# ... and with what isolate saved: every file it wrote reads as saved.
made=$(sed -n 's/^mkdir //p' "$T/state.1")
while IFS=$'\t' read -r path val; do
	path=${path#write }
	for m in $made; do case $path in "$m"/*) continue 2 ;; esac; done
	[ -e "$path" ] || { t_fail "$path vanished"; continue; }
	[ "$(cat "$path")" = "$(printf '%b' "$val")" ] || t_fail "$path reads '$(cat "$path")', saved '$val'"
done < <(grep '^write ' "$T/state.1")
[ -d "$root/detach" ] && t_fail "partition cgroup left behind"

t_done "isolate/check/undo cycle restored everything"
