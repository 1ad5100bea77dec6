# Description: the bash completion loads in bash (plain, and beside the
# bash-completion package when it is there) and completes verbs, each verb's
# options as its --help lists them, CPU lists of this machine, the command
# after `--`, and the PIDs of programs running detached.
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
COMP=$(cd "$(dirname "$0")/.." && pwd)/dist/bash-completion/detach
BIN=$(dirname "$DETACH")

# complete [BASHCOMP] WORDS...: what completing the last word offers, one a line
complete_words() {
	local pre=""
	[ "$1" = with-bash-completion ] && { pre=". /usr/share/bash-completion/bash_completion;"; shift; }
	PATH=$BIN:$PATH bash --norc --noprofile -c "$pre"'
		. "$0" || exit 3
		complete -p detach >/dev/null || exit 4
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
		_detach; printf "%s\n" "${COMPREPLY[@]}"' "$COMP" "$@"
}
want() {   # WHAT EXPECTED-WORD WORDS...
	local what=$1 word=$2 got; shift 2
	got=$(complete_words "$@") || { t_fail "$what: bash exit $?"; return; }
	grep -qxF -- "$word" <<<"$got" || t_fail "$what: '$word' not offered for '$*': $(echo $got)"
}

want "verb" run detach r
want "verb list" isolate detach ""
want "--version" --version detach --ver
want "run option" --stats detach run --st
want "run option after others" --select detach run -c 1 --s
want "check option" --sample detach check --sa
want "bench option (Python's --help)" --no-plots detach bench --no-p
want "isolate option" --undo detach isolate --u
online=$(cat /sys/devices/system/cpu/online)
want "CPU list" "$online" detach run -c ""
want "one CPU" 1 detach isolate --cpu ""
want "command after --" sleep detach run -c 1 -- slee
n=$(complete_words detach run --st | wc -l)
[ "$n" -eq 1 ] || t_fail "run --st: $n candidates"
echo "ok: verbs, options, CPUs, the command after --"

if [ -r /usr/share/bash-completion/bash_completion ]; then
	want "with bash-completion: run option" --proxy with-bash-completion detach run --pro
	want "with bash-completion: command after --" sleep with-bash-completion detach run -c 1 -- slee
	echo "ok: loads beside bash-completion"
else
	echo "bash-completion not installed: checked without it"
fi

# PIDs of detached programs
"$DETACH" run -c 1 -- sleep 5 >/dev/null 2>&1 &
pid=$!
for i in $(seq 50); do [ -e /dev/shm/detach/$pid ] && break; sleep 0.1; done
got=$(PATH=$BIN:$PATH bash --norc -c '. "$0"; _detach_pids' "$COMP")
grep -qx "$pid" <<<"$got" || t_fail "detached pid $pid not among: $(echo $got)"
if "$DETACH" --help | grep -q '^  pid '; then
	want "detach pid --attach: detached PIDs" "$pid" detach pid --attach ""
	want "detach pid: any PID" 1 detach pid ""
fi
kill $pid; wait $pid 2>/dev/null
t_reap_registry   # killed: its registry file stays
echo "ok: PIDs of detached programs"
t_done
