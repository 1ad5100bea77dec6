#!/usr/bin/env bash
# Installs what `make test` and `make bench` need on a fresh Debian machine.
# Quiet and quick when everything is already there.
set -eu
cd "$(dirname "$0")/.."

# command -> Debian package, one a line (helpers add lines, not edit them)
need=(
	gcc:gcc
	make:make
	bc:bc
	python3:python3
	timeout:coreutils
	cyclictest:rt-tests
	oslat:rt-tests
	stress-ng:stress-ng
	fio:fio
	iperf3:iperf3
	chrt:util-linux
	taskset:util-linux
	setpriv:util-linux
	mpirun.openmpi:openmpi-bin
	mpicc.openmpi:libopenmpi-dev
	mpirun.mpich:mpich
	mpicc.mpich:libmpich-dev
	strace:strace
	gdb:gdb
	java:default-jre-headless
	groff:groff-base
	lintian:lintian
	blhc:blhc
	dh:debhelper
	dpkg-buildpackage:dpkg-dev
	fakeroot:fakeroot
	g++:g++
	go:golang-go
	node:nodejs
	valgrind:valgrind
	perf:linux-perf
	autoconf:autoconf
	automake:automake
	mkfs.ext4:e2fsprogs
	losetup:mount
	pgrep:procps
)
missing=()
for pair in "${need[@]}"; do
	command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
dpkg -s python3-venv >/dev/null 2>&1 || missing+=(python3-venv)
# make compat: CPython's own test suite; LTP's is built from ../shared/ltp
# (autoconf, automake; mkfs.ext4 and losetup for its tests of devices: above)
dpkg -s libpython3.11-testsuite >/dev/null 2>&1 || missing+=(libpython3.11-testsuite)
dpkg -s libsimgrid-dev >/dev/null 2>&1 || missing+=(libsimgrid-dev)   # detach scale
# src/lib/trace.c reads the kernel's trace through these libraries.
for pkg in libtracefs-dev libtraceevent-dev pkg-config; do
	dpkg -s $pkg >/dev/null 2>&1 || missing+=($pkg)
done
# FUSE (libfuse3, fusermount3): detach ctl's control files, and detach-rtl's
# /dev/rtfN (docs/rtl.md)
for pkg in libfuse3-dev fuse3; do
	dpkg -s $pkg >/dev/null 2>&1 || missing+=($pkg)
done
# tests: JSON outputs against docs/schema, bash completion loads; psutil:
# the Python tools' one dependency, for the installed tree (docs/install.md),
# which runs the system's python3
for pkg in python3-jsonschema bash-completion python3-psutil; do
	dpkg -s $pkg >/dev/null 2>&1 || missing+=($pkg)
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-deps: missing packages: ${missing[*]}" >&2
		echo "NOTE: run 'sudo apt-get install ${missing[*]}' or 'make deps' as root" >&2
		exit 1
	fi
	echo "install-deps: apt-get install ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
	# iperf3 asks whether to start a daemon: answer no.
	echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections 2>/dev/null || true
	apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
fi

# The Python side (bench orchestration, tables, plots) lives in a venv under
# build/: tools/detach_tools installed editable with its extras, plots
# (matplotlib) and dev (mypy, for tests/python_types.sh) (the venv runs this
# tree's code; its console scripts detach-bench, detach-latency, ... land in
# build/venv/bin).
venv=build/venv
venv_stamp() { cat tools/pyproject.toml; }
if [ ! -x $venv/bin/python ] || ! venv_stamp | cmp -s - $venv/installed.stamp; then
	echo "install-deps: python venv in $venv"
	/usr/bin/python3 -m venv $venv
	$venv/bin/pip install -q --disable-pip-version-check -e 'tools[plots,dev]'
	venv_stamp > $venv/installed.stamp
fi
