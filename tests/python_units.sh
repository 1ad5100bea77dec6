#!/usr/bin/env bash
# Description: the unit tests of the Python tools' analysis
# (tools/tests/test_*.py, unittest): percentiles, parsers, summaries, tables
# and plots from the stored JSON of tools/tests/fixtures/, and the tools'
# messages in the command's format.  No CPU is measured.
. "$(dirname "$0")/helpers/lib.sh"
[ -x "$BUILD/venv/bin/python" ] || { echo "no venv: run make deps"; exit 1; }
cd "$ROOT/tools" || exit 1
"$BUILD/venv/bin/python" -m unittest discover -s tests -v 2>&1 || t_fail "unit tests of tools/detach_tools failed"
t_done "unit tests of tools/detach_tools passed"
