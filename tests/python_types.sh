#!/usr/bin/env bash
# Description: tools/detach_tools and its unit tests are typed: mypy --strict
# (its settings: tools/pyproject.toml [tool.mypy]) finds nothing, with the
# venv's mypy, psutil's stubs and matplotlib (tools/install-deps.sh installs
# them: the dev and plots extras).
# Timeout: 300
. "$(dirname "$0")/helpers/lib.sh"
mypy=$BUILD/venv/bin/mypy
[ -x "$mypy" ] || { echo "no $mypy: run make deps (the venv's dev extra)"; exit 1; }
cd "$ROOT/tools" || exit 1
# its cache beside the venv's, not in the source tree
"$mypy" --strict --cache-dir "$BUILD/mypy-cache" 2>&1 || t_fail "mypy --strict"
t_done "mypy --strict: no issues"
