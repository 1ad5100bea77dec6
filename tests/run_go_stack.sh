# Description: a Go program (cgo, so dynamic and preloadable) whose
# goroutines recurse on their small stacks with getpid at the leaf runs
# detached as natively, 3 runs of 3: neither the trap's signal frame nor the
# trampoline's saved state may land on a goroutine's stack.
# Timeout: 600
. "$(dirname "$0")/helpers/lib.sh"
t_need_cpus 2
command -v go >/dev/null 2>&1 || t_skip "go is not installed (Debian: golang-go, tools/install-deps.sh)"

src=$(dirname "$0")/go/stackstress.go
bin=$T_TMP/stackstress
export GOCACHE=${BUILD:-$PWD/build}/go-cache GOFLAGS=-mod=mod GO111MODULE=off
if ! CGO_ENABLED=1 go build -o "$bin" "$src" >"$T_TMP/build.log" 2>&1; then
	cat "$T_TMP/build.log"
	t_skip "go build with cgo failed (see above): no C toolchain for cgo?"
fi
for i in 1 2 3; do
	t_compare "goroutines-$i" "$bin"
done
t_done
