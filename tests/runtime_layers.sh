# Description: the includes point down and go round no circle: every file of
# src/runtime/ is in the layer table of docs/architecture.md and includes
# headers of its own layer or below only; no two modules (a .c with its .h)
# of src/runtime, src/rtl or bench/ include each other, directly or round a
# circle; src/rtl includes no runtime, bench/ none above layer 1; neither
# the command nor src/lib includes the runtime.
. "$(dirname "$0")/helpers/lib.sh"

doc=docs/architecture.md
[ -f "$doc" ] || t_fail "no $doc"
# A layer is a digit with an optional sub-layer letter (2a below 2b): its
# rank orders them.
declare -A layer rank
while IFS='|' read -r _ lay files _; do
	read -r name _ <<<"$lay"
	n=${name//[^0-9]/}
	sub=${name//[^a-z]/}
	r=$((n * 100))
	[ -n "$sub" ] && r=$((r + $(printf '%d' "'$sub") - 96))
	for f in $files; do
		layer[$f]=$name
		rank[$f]=$r
	done
done < <(grep -E '^\| [0-9][a-z]? ' "$doc")
[ ${#layer[@]} -gt 20 ] || t_fail "no layer table in $doc (found ${#layer[@]} files)"

# The include graph between modules: mod/x -> mod/y for every quoted
# include of y.h by x.c, x.h or x.S (the module's own header left out).
declare -A edges
add_edges() {   # dir prefix file: prefix is what the includes name (runtime/, rtl/, "")
	local dir=$1 prefix=$2 path=$3 f m inc
	f=$(basename "$path")
	m=$dir/${f%.*}
	while read -r inc; do
		[ "$dir/${inc%.h}" = "$m" ] || edges[$m]+=" $dir/${inc%.h}"
	done < <(sed -n "s|^#include \"${prefix}\\([^\"/]*\\.h\\)\".*|\\1|p" "$path")
	: "${edges[$m]:=}"
}

for path in src/runtime/*.[chS]; do
	f=$(basename "$path")
	add_edges runtime runtime/ "$path"
	if [ -z "${layer[$f]:-}" ]; then
		t_fail "src/runtime/$f is in no layer of $doc"
		continue
	fi
	while read -r inc; do
		h=${inc#runtime/}
		if [ -z "${layer[$h]:-}" ]; then
			t_fail "$f includes runtime/$h, which is in no layer"
		elif [ "${rank[$h]}" -gt "${rank[$f]}" ]; then
			t_fail "$f (layer ${layer[$f]}) includes runtime/$h (layer ${layer[$h]}): an upward include"
		fi
	done < <(sed -n 's/^#include "\(runtime\/[^"]*\)".*/\1/p' "$path")
done
for path in src/rtl/*.[chS]; do
	add_edges rtl rtl/ "$path"
	bad=$(grep -nE '^#include "(runtime|cli)/' "$path")
	[ -z "$bad" ] || t_fail "$path includes the runtime or the command: $bad"
done
for path in bench/*.[ch]; do
	add_edges bench "" "$path"
	grep -nE '^#include "cli/' "$path" && t_fail "$path includes the command"
	while read -r inc; do
		h=${inc#runtime/}
		[ -n "${rank[$h]:-}" ] && [ "${rank[$h]}" -le 100 ] ||
			t_fail "$path includes runtime/$h: bench/ may include layers 0 and 1 only"
	done < <(sed -n 's/^#include "\(runtime\/[^"]*\)".*/\1/p' "$path")
done

# Depth-first search: a module met again while still on the path closes a
# circle, printed from its first visit.
declare -A colour
path_stack=()
cycles=0
visit() {
	local m=$1 n i circle
	colour[$m]=grey
	path_stack+=("$m")
	for n in ${edges[$m]:-}; do
		if [ "${colour[$n]:-}" = grey ]; then
			circle=""
			for ((i = ${#path_stack[@]} - 1; i >= 0; i--)); do
				circle="${path_stack[$i]} -> $circle"
				[ "${path_stack[$i]}" = "$n" ] && break
			done
			t_fail "a circle of includes: ${circle}$n"
			cycles=$((cycles + 1))
		elif [ -z "${colour[$n]:-}" ]; then
			visit "$n"
		fi
	done
	unset 'path_stack[${#path_stack[@]}-1]'
	colour[$m]=black
}
for m in $(printf '%s\n' "${!edges[@]}" | sort); do
	[ -n "${colour[$m]:-}" ] || visit "$m"
done

up=$(grep -ln '#include "runtime/' src/cli/*.[ch] src/lib/*.[ch] 2>/dev/null)
[ -z "$up" ] || t_fail "the command or src/lib includes the runtime: $up"
[ "$cycles" -eq 0 ] && echo "${#layer[@]} files in their layers, ${#edges[@]} modules of src/runtime, src/rtl and bench/ without a circle"
t_done
