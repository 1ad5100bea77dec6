#!/usr/bin/env bash
# Description: `pip install ./tools` (docs/install.md) gives working
# commands: a copy of tools/ installed offline into a scratch venv (its own
# setuptools, no download; the system's psutil) holds every module of the
# package, detach_tools.latency among them, and each console script of
# tools/pyproject.toml answers --help from outside the checkout; without
# matplotlib, a plot asked for is one error line and a NOTE.
# Timeout: 240
. "$(dirname "$0")/helpers/lib.sh"
python3=/usr/bin/python3
"$python3" -c 'import ensurepip, psutil' 2>/dev/null ||
	{ echo "no python3-venv or python3-psutil: run make deps"; exit 1; }
cp -r "$ROOT/tools" "$T_TMP/src"
rm -rf "$T_TMP/src/build" "$T_TMP/src"/*.egg-info
venv=$T_TMP/venv
"$python3" -m venv --system-site-packages "$venv" || { t_fail "python3 -m venv"; t_done; }
"$venv/bin/pip" install -q --disable-pip-version-check --no-index --no-deps --no-build-isolation \
	"$T_TMP/src" >"$T_TMP/pip.log" 2>&1 || { cat "$T_TMP/pip.log"; t_fail "pip install ./tools"; t_done; }
echo "ok: pip install ./tools (offline)"
cd "$T_TMP" || exit 1
rm -rf "$T_TMP/src"   # nothing may come from the copy

# every module of the package, from the installed copy
"$venv/bin/python" - "$ROOT/tools/detach_tools" "$venv" <<'PY' || t_fail "modules of the installed package"
import importlib, os, sys
src, venv = sys.argv[1:]
want = sorted(os.path.relpath(os.path.join(d, f), os.path.dirname(src))[:-3].replace(os.sep, ".")
              .removesuffix(".__init__") for d, _, fs in os.walk(src) for f in fs if f.endswith(".py"))
bad = []
for name in want:
    try:
        mod = importlib.import_module(name)
    except Exception as e:
        bad.append(f"{name}: {e!r}"); continue
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(venv)):
        bad.append(f"{name} comes from {mod.__file__}, not the venv")
print("\n".join(bad) or f"ok: {len(want)} modules installed, detach_tools.latency among them")
sys.exit(1 if bad or "detach_tools.latency" not in want else 0)
PY

scripts=$(sed -n '/^\[project.scripts\]/,/^\[/s/^\(detach-[a-z]*\) *=.*/\1/p' "$ROOT/tools/pyproject.toml")
[ "$(wc -w <<<"$scripts")" -ge 5 ] || t_fail "console scripts of tools/pyproject.toml: '$scripts'"
for s in $scripts; do
	out=$("$venv/bin/$s" --help 2>&1); rc=$?
	if [ $rc -eq 0 ] && grep -q '^usage:' <<<"$out"; then echo "ok: $s --help"
	else t_fail "$s --help: exit $rc: $(head -3 <<<"$out")"; fi
done

# plots without matplotlib: the table and the JSON, then one error line and a NOTE
if "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
	echo "matplotlib is installed system-wide: the plot refusal is left to the unit tests"
else
	printf '# quiet\n0\t0\n1000000\t0\n' >quiet.trace
	mkdir -p bin && printf '#!/bin/sh\necho "{\\"job_time_ns\\": 1, \\"iteration_ns\\": 1, \\"max_rss_kib\\": 1}"\n' >bin/sim &&
		chmod +x bin/sim
	DETACH_SCALE_SIM=$PWD/bin/sim "$venv/bin/detach-scale" --trace quiet.trace --ranks 10 --json s.json \
		--png s.png >out 2>err; rc=$?
	# (stderr also has scale's progress lines)
	if [ $rc -eq 1 ] && [ -s s.json ] && grep -q '^| quiet.trace |' out && [ ! -e s.png ] &&
		[ "$(grep -c '^detach: ' err)" = 1 ] && grep -q '^detach: error: no plots: matplotlib is not installed' err &&
		[ "$(grep -A1 '^detach: error:' err | grep -c '^NOTE: install matplotlib')" = 1 ]; then
		echo "ok: detach-scale --png without matplotlib: the table, the JSON, then: $(grep '^detach:' err)"
	else
		t_fail "detach-scale --png without matplotlib: exit $rc, $(cat err)"
	fi
fi
t_done
