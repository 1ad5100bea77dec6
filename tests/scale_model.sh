#!/usr/bin/env bash
# Description: detach scale's model where the answer is known (docs/scale.md):
# a noiseless trace gives slowdown 1.0 at every scale; one rank with a fixed
# detour per period gives that detour; rare long detours (probability p per
# interval, length d) follow 1 - (1 - p)^N against the closed form; bad
# input (a trace, a rank count) is one error line.  SimGrid runs here, no CPU is measured.
# Timeout: 240
. "$(dirname "$0")/helpers/lib.sh"
[ -x "$BUILD/scale_sim" ] || t_skip "build/scale_sim is missing (libsimgrid-dev: tools/install-deps.sh)"
[ -x "$BUILD/venv/bin/python" ] || t_skip "no Python venv (make deps)"
TOOLS=$(cd "$(dirname "$0")/.." && pwd)/tools
cd "$T_TMP"

# 1. noiseless: only the end marker, 10 s of nothing
printf '# nothing\n10000000000\t0\n' > quiet.trace
for coll in allreduce barrier bcast; do
	"$DETACH" scale --trace quiet.trace --ranks 1,7,64,1000 --collective $coll --iterations 20 \
		--json quiet-$coll.json >/dev/null 2>&1 || t_fail "noiseless $coll run failed"
done
python3 - <<'PY' || t_fail "noiseless slowdown is not 1.0"
import json
for c in ("allreduce", "barrier", "bcast"):
    for r in json.load(open(f"quiet-{c}.json")):
        print(f"noiseless {c} {r['ranks']} ranks: {r['slowdown']}")
        assert r["simgrid"]["slowdown"] == 1.0 and r["slowdown"] == 1.0, r
PY

# 2. one rank, one detour of 200 us in every 1.2 ms: each 1 ms of work takes
#    1.2 ms, so the slowdown is the detour: 1.2, less at most the part of one
#    detour the rank's random offset starts in (0.2 ms over 200 iterations)
printf '0\t200000\n1200000\t0\n' > fixed.trace
for seed in 1 2 3; do
	"$DETACH" scale --trace fixed.trace --ranks 1 --iterations 200 --interval 1ms --seed $seed \
		--json fixed-$seed.json >/dev/null 2>&1 || t_fail "fixed-detour run failed"
done
python3 -c '
import json
for seed in (1, 2, 3):
    r = json.load(open(f"fixed-{seed}.json"))[0]; s = r["simgrid"]["slowdown"]
    print("fixed detour, seed", seed, ": SimGrid", s, "closed form", r["slowdown"])
    assert 1.2 - 0.2 / 200 - 1e-9 <= s <= 1.2 + 1e-9, r
    # the closed form: a window that starts anywhere in free time meets
    # the one detour
    assert abs(r["slowdown"] - 1.2) < 1e-6, r' ||
	t_fail "one rank with a fixed detour does not give the detour"

# 3. rare long detours: p = 0.005 per 1 ms interval, d = 300 us, at random
#    times over 40 s; the slowdown against 1 + d (1 - (1 - p)^N) / (interval + c)
python3 - <<'PY'
import random
rnd = random.Random(7)
span, n = 40_000_000_000, 200          # 40,000 intervals x p 0.005
starts = sorted(rnd.uniform(0, span - 300_000) for _ in range(n))
with open("rare.trace", "w") as f:
    for s in starts:
        f.write(f"{s:.0f}\t300000\n")
    f.write(f"{span}\t0\n")
PY
for spec in 1:3000 10:800 100:300 1000:60; do
	"$DETACH" scale --trace rare.trace --ranks ${spec%%:*} --iterations ${spec#*:} --json rare-${spec%%:*}.json \
		>/dev/null 2>&1 || t_fail "rare-detour run at ${spec%%:*} ranks failed"
done
PYTHONPATH=$TOOLS python3 - <<'PY' || t_fail "rare detours do not follow 1 - (1 - p)^N"
import json
from detach_tools import noise
ok = True
for n in (1, 10, 100, 1000):
    r = json.load(open(f"rare-{n}.json"))[0]
    g = r["simgrid"]
    cf = noise.rare_detour_slowdown(0.005, 300_000, 1_000_000, n, g["collective_ns"])
    err = abs((g["slowdown"] - 1) - (cf - 1)) / (cf - 1)
    print(f"rare detours, {n} ranks: SimGrid {g['slowdown']:.5f}, 1-(1-p)^N {cf:.5f}, "
          f"trace closed form {r['closed_form']:.5f}, excess off by {100 * err:.0f}%")
    ok &= err < 0.35
raise SystemExit(0 if ok else 1)
PY

# 4. bad input: one error line (and a NOTE where there is a fix)
"$DETACH" scale --trace /nonexistent --ranks 10 >out 2>err; rc=$?
[ $rc -ne 0 ] && [ "$(grep -c '^detach: error:' err)" = 1 ] || t_fail "a missing trace: exit $rc, $(cat err)"
printf 'x y\n' > bad.trace
"$DETACH" scale --trace bad.trace --ranks 10 >out 2>err; rc=$?
[ $rc -ne 0 ] && grep -q '^detach: error:.*bad.trace:1' err || t_fail "a malformed trace: exit $rc, $(cat err)"
"$DETACH" scale --trace quiet.trace --ranks 0 >out 2>err; rc=$?
[ $rc -eq 2 ] || t_fail "--ranks 0 accepted (exit $rc)"
for bad in 1e3x 1.5 1e3,,1e4 -5; do
	"$DETACH" scale --trace quiet.trace --ranks=$bad >out 2>err; rc=$?
	[ $rc -eq 2 ] && [ "$(grep -c '^detach: error:.*rank count' err)" = 1 ] && grep -q '^NOTE:' err ||
		t_fail "--ranks $bad: exit $rc, $(cat err)"
done
"$DETACH" scale --trace quiet.trace --ranks 1e3,1e6 --max-sim-ranks 0 >out 2>err ||
	t_fail "1e3-style counts, closed form only: $(cat err)"
grep -q '| quiet.trace | 1e+06 | 1.0000 |' out || t_fail "no closed-form row for 1e6 ranks: $(cat out)"
t_done
