#!/usr/bin/env bash
# Description: detach scale's closed form against its SimGrid validation
# (docs/scale.md): where the model's assumptions hold (rare long detours, a
# collective short against them) the time each loses per iteration agrees
# within 5%; where they do not, the two part in the direction the tree
# explains: slack off the collective's critical path absorbs detours
# (SimGrid lower), detours met in wall time by the tree's overheads delay
# every rank below (SimGrid higher: heavy noise, or many ranks).  Synthetic
# traces, SimGrid only: no CPU is measured.
# Timeout: 240
. "$(dirname "$0")/helpers/lib.sh"
[ -x "$BUILD/scale_sim" ] || t_skip "build/scale_sim is missing (libsimgrid-dev: tools/install-deps.sh)"
[ -x "$BUILD/venv/bin/python" ] || t_skip "no Python venv (make deps)"
cd "$T_TMP"

# rare: a detour of 200 us, gaps of 150 to 250 ms (never two in one interval),
#       p = 1.2 ms / 200 ms = 0.006 per interval of 1 ms, 40 s
# heavy: detours of 60 us on average, 300 us apart on average (17% of the CPU), 10 s
python3 - <<'PY'
import random
rnd, span, t = random.Random(11), 40_000_000_000, 0.0
with open("rare.trace", "w") as f:
    while True:
        t += rnd.uniform(150e6, 250e6)
        if t > span - 300_000:
            break
        f.write(f"{t:.0f}\t200000\n")
        t += 200_000
    f.write(f"{span}\t0\n")
rnd, span, t = random.Random(4), 10_000_000_000, 0.0
with open("heavy.trace", "w") as f:
    while True:
        t += rnd.expovariate(1 / 300_000)
        d = rnd.expovariate(1 / 60_000)
        if t + d > span:
            break
        f.write(f"{t:.0f}\t{d:.0f}\n")
        t += d
    f.write(f"{span}\t0\n")
PY
FAST="--L 1us --o 100ns --g 100ns"     # c(1e3) = 24 us: short against 200 us
sc() { # name, then detach scale's options
	local name=$1
	shift
	"$DETACH" scale --seed=1 --json "$name.json" "$@" >"$name.out" 2>"$name.err" ||
		t_fail "detach scale $*: $(tail -3 "$name.err")"
}
sc holds --trace rare.trace --ranks 1e2,1e3 --iterations 1000 $FAST
sc slack --trace rare.trace --ranks 1e3
sc heavy --trace heavy.trace --ranks 1e3 $FAST
sc many --trace rare.trace --ranks 1e4 $FAST

python3 - <<'PY' || t_fail "the closed form and SimGrid do not agree, or part, as docs/scale.md says"
import json
ok = True
def check(name, n, want, why):
    global ok
    r = next(r for r in json.load(open(f"{name}.json")) if r["ranks"] == n)
    vs = r["simgrid_vs_closed_form"]
    good = want(vs)
    ok &= good
    print(f"{'ok' if good else 'WRONG'}: {name}, {n} ranks: time lost per iteration closed form "
          f"{r['lost_ns'] / 1e3:.1f} us, SimGrid {r['simgrid']['lost_ns'] / 1e3:.1f} us "
          f"({100 * vs:+.1f}%): {why}")
check("holds", 100, lambda v: abs(v) < 0.05, "rare long detours, short tree: within 5%")
check("holds", 1000, lambda v: abs(v) < 0.05, "rare long detours, short tree: within 5%")
check("slack", 1000, lambda v: v < -0.05,
      "SimGrid lower: the tree takes 150 us, a hit rank off its critical path absorbs part of the detour")
check("heavy", 1000, lambda v: v > 0.05,
      "SimGrid higher: 17% of each rank's time in detours, the tree's overheads meet them in wall time")
check("many", 10000, lambda v: v > 0.05,
      "SimGrid higher: among 10^4 ranks some sit in a detour when the broadcast reaches them, "
      "and every rank below starts late")
raise SystemExit(0 if ok else 1)
PY
t_done
