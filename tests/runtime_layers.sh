# Description: the runtime's includes point down: every file of src/runtime/
# is in the layer table of docs/architecture.md, and includes headers of its
# own layer or below only.  Neither the command nor src/lib
# includes the runtime.
. "$(dirname "$0")/helpers/lib.sh"

doc=docs/architecture.md
[ -f "$doc" ] || t_fail "no $doc"
declare -A layer
while IFS='|' read -r _ lay files _; do
	n=${lay//[^0-9]/}
	for f in $files; do layer[$f]=$n; done
done < <(grep -E '^\| [0-9] ' "$doc")
[ ${#layer[@]} -gt 20 ] || t_fail "no layer table in $doc (found ${#layer[@]} files)"

for path in src/runtime/*.[chS]; do
	f=$(basename "$path")
	if [ -z "${layer[$f]:-}" ]; then
		t_fail "src/runtime/$f is in no layer of $doc"
		continue
	fi
	while read -r inc; do
		h=${inc#runtime/}
		if [ -z "${layer[$h]:-}" ]; then
			t_fail "$f includes runtime/$h, which is in no layer"
		elif [ "${layer[$h]}" -gt "${layer[$f]}" ]; then
			t_fail "$f (layer ${layer[$f]}) includes runtime/$h (layer ${layer[$h]}): an upward include"
		fi
	done < <(sed -n 's/^#include "\(runtime\/[^"]*\)".*/\1/p' "$path")
done
up=$(grep -ln '#include "runtime/' src/cli/*.[ch] src/lib/*.[ch] 2>/dev/null)
[ -z "$up" ] || t_fail "the command or src/lib includes the runtime: $up"
echo "${#layer[@]} files in 6 layers checked"
t_done
