# Description: isolate CPU 1, isolate again (harmless), check finds nothing
# isolate could fix, undo; every file isolate wrote reads as it saved it, as
# an independent snapshot taken before says, and as undo's report says.
set -u
cd "$(dirname "$0")/.."
. tests/isolate_common.bash
need_root_2cpus
T=$(mktemp -d)
trap '"$D" isolate --undo >/dev/null 2>&1; rm -rf "$T"' EXIT
FAILED=0

snap_files >"$T/files.0"; snap_tasks >"$T/tasks.0"

"$D" isolate -c 1 >"$T/iso1" 2>&1 || { cat "$T/iso1"; fail "isolate -c 1 exited $?"; exit 1; }
grep -q '^set ' "$T/iso1" || fail "isolate printed no change"
[ -f $STATE ] || fail "no state file"
[ "$(stat -c %a $STATE)" = 600 ] || fail "state file mode $(stat -c %a $STATE), want 600"
[ "$(stat -c %U $STATE)" = root ] || fail "state file not owned by root"
cp $STATE "$T/state.1"
snap_files >"$T/files.1"
diff -q "$T/files.0" "$T/files.1" >/dev/null && fail "isolate changed no control file"

# Twice is harmless: exit 0, and the saved (original) values stay as they were.
"$D" isolate -c 1 >"$T/iso2" 2>&1 || fail "second isolate exited $?"
grep '^write ' $STATE >"$T/w2"; grep '^write ' "$T/state.1" >"$T/w1"
cmp -s "$T/w1" "$T/w2" || fail "second isolate changed the saved values"
# A different CPU list is refused while isolated.
"$D" isolate -c 0 >"$T/iso3" 2>&1 && fail "isolate -c 0 while CPU 1 is isolated succeeded"

# The partition exists and tasks are off CPU 1.
root=$(cpuset_root)
[ -d "$root/detach" ] || fail "no partition cgroup $root/detach"
self=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
grep -qw 1 <(cpus_of "$self") && fail "this test's own process may still run on CPU 1 ($self)"

# check: no finding that isolate can fix is left at warn or block.
"$D" check -c 1 --sample 0 --json >"$T/check.json"
rc=$?
python3 - "$T/check.json" "$rc" <<'PY' || fail "check after isolate"
import json, sys
d = json.load(open(sys.argv[1])); rc = int(sys.argv[2])
bad = [f for f in d["findings"] if f["fixed_by_isolate"] and f["severity"] in ("warn", "block")]
for f in bad: print("left:", f["id"], f["what"])
part = [f for f in d["findings"] if f["id"] == "partition"]
ok = not bad and part and all(f["severity"] == "ok" for f in part) and d["return_code"] == rc
sys.exit(0 if ok else 1)
PY

snap_tasks >"$T/tasks.1"
"$D" isolate --undo >"$T/undo" 2>&1; rc=$?
[ $rc -eq 0 ] || { fail "undo exited $rc"; cat "$T/undo"; }
grep -q ' 0 failure(s)' "$T/undo" || fail "undo reports failures: $(tail -n1 "$T/undo")"
[ ! -e $STATE ] || fail "state file left after undo"

# Independent comparison with the snapshot before isolate.
snap_files >"$T/files.2"; snap_tasks >"$T/tasks.2"
same_files "$T/files.0" "$T/files.2" "after undo"
ch=$(tasks_changed "$T/tasks.0" "$T/tasks.2")
[ -z "$ch" ] || { fail "threads whose affinity or cpuset differ after undo:"; echo "$ch" | head; }
# ... and with what isolate saved: every file it wrote reads as saved.
made=$(sed -n 's/^mkdir //p' "$T/state.1")
while IFS=$'\t' read -r path val; do
	path=${path#write }
	for m in $made; do case $path in "$m"/*) continue 2 ;; esac; done
	[ -e "$path" ] || { fail "$path vanished"; continue; }
	[ "$(cat "$path")" = "$(printf '%b' "$val")" ] || fail "$path reads '$(cat "$path")', saved '$val'"
done < <(grep '^write ' "$T/state.1")
[ -d "$root/detach" ] && fail "partition cgroup left behind"

[ $FAILED -eq 0 ] && echo "isolate/check/undo cycle restored everything"
exit $FAILED
