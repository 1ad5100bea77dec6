# Description: the manual pages render without a warning (groff -ww, as
# `man -l` would), and they agree with the command: every verb `detach --help`
# lists has its section (isolate: detach-isolate(8)), and each section names
# exactly the options of `detach VERB --help`.
. "$(dirname "$0")/helpers/lib.sh"
MAN=$(dirname "$0")/../docs/man
command -v groff >/dev/null || t_skip "groff missing: run make deps (apt package groff-base)"
# the verbs written in Python (bench, check, scale, ...) answer --help from the venv
[ -x "$PY" ] || { echo "no venv: run make deps"; exit 1; }

for page in "$MAN"/detach.1 "$MAN"/detach-isolate.8; do
	out=$(groff -ww -z -man -Tutf8 "$page" 2>&1); rc=$?
	[ $rc -eq 0 ] && [ -z "$out" ] || t_fail "$(basename "$page"): groff -ww: exit $rc: $out"
	echo "ok: $(basename "$page") renders without warnings"
done

# help VERB: the --help text of a verb (or of the command, with no VERB)
verbs=$("$DETACH" --help | awk '/^verbs:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
[ -n "$verbs" ] || t_fail "no verbs in detach --help"
for v in $verbs; do "$DETACH" "$v" --help >"$T_TMP/help.$v" 2>&1 || t_fail "detach $v --help: exit $?"; done
"$DETACH" --help >"$T_TMP/help.detach"

python3 - "$MAN" "$T_TMP" $verbs <<'PY' || t_fail "manual pages and --help disagree"
import os, re, sys
man, tmp, verbs = sys.argv[1], sys.argv[2], sys.argv[3:]
OPT = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")

def help_options(text):
    """Options of a --help text: the first column of lines that start with one."""
    opts = set()
    for line in text.splitlines():
        m = re.match(r"^ {1,8}(-.*)", line)
        if m:
            opts |= set(OPT.findall(re.split(r"\s{2,}", m.group(1))[0]))
    return opts

def man_sections(path):
    """{section title: [lines]} of a man page, .SH and .SS alike."""
    secs, cur = {}, None
    for line in open(path):
        m = re.match(r'^\.S[HS]\s+"?([^"\n]*)"?', line)
        if m:
            cur = m.group(1).replace("\\-", "-")
            secs[cur] = []
        elif cur is not None:
            secs[cur].append(line.rstrip("\n"))
    return secs

def man_options(lines):
    """Options of a man section: the tag line after each .TP."""
    opts = set()
    for i, line in enumerate(lines[:-1]):
        if line.startswith(".TP"):
            tag = re.sub(r"\\f[BIRP]", "", lines[i + 1]).replace("\\-", "-")
            opts |= set(OPT.findall(tag))
    return opts

page1 = man_sections(os.path.join(man, "detach.1"))
page8 = man_sections(os.path.join(man, "detach-isolate.8"))
bad = 0
for v in verbs + ["detach"]:
    text = open(os.path.join(tmp, "help." + v)).read()
    if v == "detach":
        where, lines = "detach(1) OPTIONS", page1.get("OPTIONS", [])
        lines = lines[:next((i for i, l in enumerate(lines) if l.startswith(".SS")), len(lines))]
        want = {"-h", "--help", "-V", "--version"}     # main.c takes them; its --help lists verbs
    elif v == "isolate":
        where, lines, want = "detach-isolate(8) OPTIONS", page8.get("OPTIONS", []), help_options(text)
    else:
        title = next((t for t in page1 if t.startswith(f"detach {v}")), None)
        if title is None:
            print(f"detach {v}: no section in docs/man/detach.1 "
                  f"(add '.SS \"detach {v} ...\"' under OPTIONS with its options)")
            bad += 1
            continue
        where, lines, want = f"detach(1) '{title}'", page1[title], help_options(text)
    have = man_options(lines)
    if not want:
        print(f"detach {v} --help lists no options"); bad += 1
    if have != want:
        print(f"detach {v}: {where} and --help differ: "
              f"only in --help {sorted(want - have)}, only in the page {sorted(have - want)}")
        bad += 1
    else:
        print(f"ok: detach {v}: {len(want)} options agree with {where}")
if "isolate" in verbs and not any("isolate" in l for l in page1.get("DESCRIPTION", [])):
    print("detach(1) does not mention isolate"); bad += 1
sys.exit(1 if bad else 0)
PY
t_done
