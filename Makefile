# detach: top-level build.  `make`, `make test`, `make bench`, `make install PREFIX=...`
# Objects go to build/; quiet by default, V=1 prints full commands.

VERSION  := 0.1.0
CC       ?= gcc
PREFIX   ?= /usr/local
BUILD    := build
.DEFAULT_GOAL := all

# CPPFLAGS, CFLAGS and LDFLAGS are the builder's (make's command line, the
# environment; debian/rules passes dpkg-buildflags' hardening) and reach every
# compile and link, the runtime's but for what RT_CFLAGS turns off.  The
# project's own flags are DT_CPPFLAGS and DT_CFLAGS, put around them in
# ALL_CFLAGS, so that a CFLAGS given on the command line (which replaces the
# variable) loses none of them.
# snprintf truncation is checked where it matters; the warning cannot tell.
WARN     := -Wall -Wextra -Werror -Wno-format-truncation
CFLAGS   ?= -O2 -g
DT_CPPFLAGS := -D_GNU_SOURCE -Iinclude -Isrc -DDETACH_VERSION='"$(VERSION)"'
DT_CFLAGS   := $(WARN) -std=gnu11 -fPIC -MMD -MP
ALL_CFLAGS   = $(DT_CPPFLAGS) $(CPPFLAGS) $(CFLAGS) $(DT_CFLAGS)
DT_LDFLAGS  :=
ALL_LDFLAGS  = $(DT_LDFLAGS) $(LDFLAGS)
LDLIBS   += -lm -lpthread
# libtracefs/libtraceevent (src/lib/trace.c): for the command, benchmarks and
# tests, never for the preloaded runtime.
TRACE_CFLAGS := $(shell pkg-config --cflags libtracefs 2>/dev/null)
TRACE_LIBS   := $(shell pkg-config --libs libtracefs 2>/dev/null || echo -ltracefs -ltraceevent)
# libfuse3 (src/cli/ctl_fs.c): the control files of `detach ctl`.
FUSE_CFLAGS  := $(shell pkg-config --cflags fuse3 2>/dev/null || echo -I/usr/include/fuse3)
FUSE_LIBS    := $(shell pkg-config --libs fuse3 2>/dev/null || echo -lfuse3)

# SANITIZE=1: the command and src/lib with AddressSanitizer and UBSan, in
# build/asan (`make check-asan` runs the command's tests with it).  The
# preloaded runtime is left out: it cannot bring a sanitizer into every program.
ifeq ($(SANITIZE),1)
BUILD    := build/asan
SAN      := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
DT_CFLAGS += $(SAN)
DT_LDFLAGS += $(SAN)
.DEFAULT_GOAL := $(BUILD)/detach
endif

ifeq ($(V),1)
Q :=
msg = @true
else
Q := @
msg = @printf '  %-7s %s\n' $(1) $(2)
endif

# --- the shared helper library (src/lib), linked into every program ---------
LIB_SRC  := $(wildcard src/lib/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIBUTIL  := $(BUILD)/libdtutil.a
DT_CPPFLAGS += -I$(BUILD)

# System call names, from the kernel headers the program is built against.
UNISTD   := $(firstword $(wildcard /usr/include/x86_64-linux-gnu/asm/unistd_64.h /usr/include/asm/unistd_64.h))
$(BUILD)/gen/syscall_names.inc: $(UNISTD)
	@mkdir -p $(dir $@)
	$(Q)sed -n 's/^#define __NR_\([a-z0-9_]*\) \([0-9]*\)$$/[\2] = "\1",/p' $< > $@
$(BUILD)/src/lib/syscall_names.o: $(BUILD)/gen/syscall_names.inc

# --- the preloaded runtime -------------------------------------------------
RT_SRC   := $(filter-out src/runtime/asm_offsets.c,$(wildcard src/runtime/*.c)) $(wildcard src/runtime/*.S)
RT_OBJ   := $(patsubst %,$(BUILD)/%.o,$(basename $(RT_SRC)))
# The contract between the runtime's C and its assembly (the kernel's
# asm-offsets): src/runtime/asm_offsets.c, compiled to assembly only, leaves
# `.ascii "->NAME VALUE"` lines; they become the #defines of ASM_OFFSETS,
# which every .S of the runtime includes.  The compile's dependency file
# names the headers it read, so a struct changed there regenerates the
# header and reassembles the .S files.
ASM_OFFSETS := $(BUILD)/gen/runtime/asm_offsets.h
RT_SO    := $(BUILD)/libdetach.so
# The interception path must not touch SIMD registers behind the program's back
# and must not be split into cold sections (the wait loop is found by address).
# The builder's hardening reaches the runtime (after ALL_CFLAGS, these win)
# but for the stack protector: its guard is read from %fs:0x28 at a
# function's entry and again at its exit, and a program's
# arch_prctl(ARCH_SET_FS), carried out on the detached thread (dispatch.c),
# changes %fs between the two in every frame below it (sigsys_handler or the
# trampoline's, dt_dispatch, ...).  A program that gives a thread a TLS block
# of its own, with a guard of its own, would die of "stack smashing detected"
# instead of running as it does natively.  _FORTIFY_SOURCE only turns libc
# calls into their checking twins (snprintf into __snprintf_chk: no libc call
# where there was none), -fcf-protection adds endbr64 (the .S files carry no
# CET note, so the library is never marked for IBT or shadow stacks),
# -fstack-clash-protection probes the stack it takes, -z relro and -z now
# leave nothing writable that the runtime writes after it is loaded: they stay.
# The src/lib objects linked in keep every flag: they sit below the runtime,
# and no frame of theirs lives across a call the runtime carries out.
RT_CFLAGS := -mgeneral-regs-only -fno-reorder-blocks-and-partition \
             -fno-stack-protector -fvisibility=hidden -ftls-model=initial-exec

# --- detach-rtl: the RTLinux API (include/detach/rtl.h, docs/rtl.md) ----------
# A static library: its main() is linked only into programs that have none
# (RTLinux modules), not into Linux peers that use it for mbuff_alloc.
RTL_SRC  := $(wildcard src/rtl/*.c) $(wildcard src/rtl/*.S)
RTL_OBJ  := $(patsubst %,$(BUILD)/%.o,$(basename $(RTL_SRC)))
RTL_LIB  := $(BUILD)/libdetach-rtl.a
FUSE_CFLAGS := $(shell pkg-config --cflags fuse3 2>/dev/null)
FUSE_LIBS   := $(shell pkg-config --libs fuse3 2>/dev/null || echo -lfuse3)
RTL_LIBS := $(RTL_LIB) -L$(BUILD) -ldetach $(FUSE_LIBS)
RTL_EXAMPLES := $(patsubst examples/rtl/%.c,$(BUILD)/examples/rtl/%,$(wildcard examples/rtl/*.c)) \
                $(patsubst tests/rtl/%.c,$(BUILD)/tests/rtl/%,$(wildcard tests/rtl/*.c))

# --- the command -------------------------------------------------------------
CLI_SRC  := $(wildcard src/cli/*.c)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
CLI      := $(BUILD)/detach

# --- the scale simulator (SimGrid, C++): built where libsimgrid-dev is ---------
CXX      ?= g++
CXXFLAGS ?= -O2 -g
SCALE_SIM := $(BUILD)/scale_sim
ifneq ($(wildcard /usr/include/simgrid/s4u.hpp),)
EXTRA    += $(SCALE_SIM)
endif
$(SCALE_SIM): src/scale/scale_sim.cpp
	$(call msg,CXX,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CXX) $(CPPFLAGS) $(CXXFLAGS) -std=c++17 -Wall -Wextra -Werror $(LDFLAGS) -o $@ $< -lsimgrid

# --- benchmarks, tests, examples: one program per .c file ---------------------
BENCH    := $(patsubst bench/%.c,$(BUILD)/bench/%,$(filter-out bench/fwq_mpi.c,$(wildcard bench/*.c)))
# fwq_mpi is an MPI program: built with Open MPI's mpicc when it is there
# (tools/install-deps.sh installs it), left out otherwise.
MPICC    ?= $(shell command -v mpicc.openmpi 2>/dev/null)
ifneq ($(MPICC),)
BENCH    += $(BUILD)/bench/fwq_mpi
endif
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/*.c))
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))

all: $(CLI) $(RT_SO) $(RTL_LIB) $(BENCH) $(TESTS) $(EXAMPLES) $(RTL_EXAMPLES) $(EXTRA)

$(BUILD)/%.o: %.c
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/src/lib/trace.o: DT_CFLAGS += $(TRACE_CFLAGS)
$(BUILD)/src/cli/ctl_fs.o: DT_CFLAGS += $(FUSE_CFLAGS)

$(BUILD)/src/runtime/%.o: src/runtime/%.c
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(RT_CFLAGS) -c -o $@ $<

$(BUILD)/src/runtime/%.o: src/runtime/%.S $(ASM_OFFSETS)
	$(call msg,AS,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

# -fno-lto: the values must be in the assembly, not in LTO's bytecode.
$(BUILD)/src/runtime/asm_offsets.s: src/runtime/asm_offsets.c
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(RT_CFLAGS) -fno-lto -S -o $@ $<
$(ASM_OFFSETS): $(BUILD)/src/runtime/asm_offsets.s
	$(call msg,GEN,$@)
	@mkdir -p $(dir $@)
	$(Q){ echo '/* Generated from src/runtime/asm_offsets.c by the Makefile: do not edit. */'; \
	  sed -n 's/^[[:space:]]*\.ascii[[:space:]]*"->\([A-Za-z0-9_]*\) [$$]*\(-*[0-9][0-9]*\)".*/#define \1 \2/p' $<; \
	} > $@.tmp
	$(Q)[ "$$(grep -c '^#define' $@.tmp)" -eq "$$(grep -c '"->' $<)" ] || \
	  { echo "$@: a line of $< is not NAME VALUE" >&2; rm -f $@.tmp; exit 1; }
	$(Q)mv $@.tmp $@

$(BUILD)/src/rtl/%.o: src/rtl/%.c
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(FUSE_CFLAGS) -c -o $@ $<

$(BUILD)/src/rtl/%.o: src/rtl/%.S
	$(call msg,AS,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(RTL_LIB): $(RTL_OBJ)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIBUTIL): $(LIB_OBJ)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# SOVERSION changes when the public ABI (include/detach, libdetach.map) breaks.
# build/libdetach.so.N is the name programs linked here record (examples, api tests).
SOVERSION := 0
SONAME   := libdetach.so.$(SOVERSION)
# An installed command preloads the runtime by its soname (libdetach0 has it;
# libdetach.so is libdetach-dev's).
$(BUILD)/src/cli/run.o: DT_CPPFLAGS += -DDETACH_SONAME='"$(SONAME)"'
$(RT_SO): $(RT_OBJ) $(LIBUTIL) src/runtime/libdetach.map
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -shared -o $@ $(RT_OBJ) $(LIBUTIL) -Wl,--version-script=src/runtime/libdetach.map \
		-Wl,-soname,$(SONAME) -Wl,-z,defs -Wl,-z,now $(LDLIBS)
	$(Q)ln -sf libdetach.so $(BUILD)/$(SONAME)

$(CLI): $(CLI_OBJ) $(LIBUTIL)
	$(call msg,LD,$@)
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $(CLI_OBJ) $(LIBUTIL) $(TRACE_LIBS) $(FUSE_LIBS) $(LDLIBS)

$(BUILD)/bench/% $(BUILD)/tests/% $(BUILD)/examples/%: $(LIBUTIL)
$(BUILD)/bench/%: bench/%.c $(LIBUTIL)
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIBUTIL) $(TRACE_LIBS) $(LDLIBS)
$(BUILD)/bench/fwq_mpi: bench/fwq_mpi.c $(LIBUTIL)
	$(call msg,MPICC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(MPICC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIBUTIL) $(LDLIBS)
$(BUILD)/tests/%: tests/%.c $(LIBUTIL) $(wildcard tests/helpers/*.h)
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIBUTIL) $(TRACE_LIBS) $(LDLIBS)
# Examples use the public API only, linked against the runtime as a user's
# program would be (found beside them through the rpath).
# tests/api_*.c exercise the public API, linked like an example.
$(BUILD)/tests/api_%: tests/api_%.c $(RT_SO) $(LIBUTIL) include/detach/detach.h $(wildcard tests/helpers/*.h)
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIBUTIL) -L$(BUILD) -ldetach -Wl,-rpath,'$$ORIGIN/..' $(LDLIBS)
# bench/chan.c measures the channels of the public API, linked like an example.
$(BUILD)/bench/chan: bench/chan.c $(RT_SO) $(LIBUTIL) include/detach/detach.h
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIBUTIL) -L$(BUILD) -ldetach -Wl,-rpath,'$$ORIGIN/..' $(LDLIBS)
$(BUILD)/examples/%: examples/%.c $(RT_SO) include/detach/detach.h
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< -L$(BUILD) -ldetach -Wl,-rpath,'$$ORIGIN/..' $(LDLIBS)

# RTLinux programs (examples/rtl, tests/rtl/ for the shell tests,
# tests/rtl_*.c): modules without main(), linked as
# `cc prog.c $(pkg-config --libs detach-rtl)` links them.
RTL_DEPS := $(RTL_LIB) $(RT_SO) include/detach/rtl.h
$(BUILD)/examples/rtl/%: examples/rtl/%.c $(RTL_DEPS) $(wildcard examples/rtl/*.h)
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(RTL_LIBS) -Wl,-rpath,'$$ORIGIN/../..' $(LDLIBS)
$(BUILD)/tests/rtl/%: tests/rtl/%.c $(RTL_DEPS)
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(RTL_LIBS) -Wl,-rpath,'$$ORIGIN/../..' $(LDLIBS)
$(BUILD)/tests/rtl_%: tests/rtl_%.c $(RTL_DEPS) $(wildcard tests/helpers/*.h)
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(RTL_LIBS) -Wl,-rpath,'$$ORIGIN/..' $(LDLIBS)

# bench/evlat.c measures event response on the public API; its executive
# receiver bench/evlat_rt.c is an RTLinux program, linked as one.
$(BUILD)/bench/evlat: bench/evlat.c bench/evlat.h $(RT_SO) $(LIBUTIL) include/detach/detach.h
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIBUTIL) -L$(BUILD) -ldetach -Wl,-rpath,'$$ORIGIN/..' $(LDLIBS)
$(BUILD)/bench/evlat_rt: bench/evlat_rt.c bench/evlat.h $(RTL_DEPS)
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(RTL_LIBS) -Wl,-rpath,'$$ORIGIN/..' $(LDLIBS)

# Installs what the tests and benchmarks need on a fresh Debian machine, once.
deps:
	$(Q)tools/install-deps.sh

# deps may install what decides the build (Open MPI, SimGrid: see above), so
# the build is a second make that reads the Makefile after it.
test: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)tests/run.sh

# CPython's regression tests of the OS interface (tests/compat/cpython.sh)
# and LTP's system call tests (tests/compat/ltp.sh: a fixed subset,
# tests/compat/ltp-subset.txt), natively and detached in each mode,
# compared test by test (CI runs it); compat-full adds CPython's slow
# modules and all of LTP's.  A suite that is absent is skipped (exit 77).
compat: deps all
	$(Q)DETACH_BIN=$(CURDIR)/$(CLI) tests/compat/cpython.sh || [ $$? -eq 77 ]
	$(Q)DETACH_BIN=$(CURDIR)/$(CLI) tests/compat/ltp.sh || [ $$? -eq 77 ]

compat-full: deps all
	$(Q)DETACH_BIN=$(CURDIR)/$(CLI) tests/compat/cpython.sh --full || [ $$? -eq 77 ]
	$(Q)DETACH_BIN=$(CURDIR)/$(CLI) tests/compat/ltp.sh --full || [ $$? -eq 77 ]

# The tests of the command, run with the SANITIZE=1 build of it (the runtime
# and the test programs are the usual ones).
ASAN_TESTS := cli_run check_json isolate_refuse isolate_dry_run isolate_cycle isolate_kill \
              run_exec_ps bench_json
check-asan: all
	$(Q)$(MAKE) --no-print-directory SANITIZE=1
	$(Q)DETACH_BIN=$(CURDIR)/build/asan/detach TEST_MODES=sud tests/run.sh $(ASAN_TESTS)

bench: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(CLI) bench

# The whole tool (docs/install.md); uninstall removes what install recorded.
# `programs` is what it ships: no tests, no examples.
INSTALL_VARS = DESTDIR='$(DESTDIR)' PREFIX='$(PREFIX)' VERSION='$(VERSION)' \
               SOVERSION='$(SOVERSION)' BUILD='$(BUILD)' NO_MANIFEST='$(NO_MANIFEST)' \
               SYSTEMD_UNIT_DIR='$(SYSTEMD_UNIT_DIR)'
programs: $(CLI) $(RT_SO) $(RTL_LIB) $(BENCH)

install: programs
	$(Q)$(INSTALL_VARS) tools/install-tree.sh install

uninstall:
	$(Q)$(INSTALL_VARS) tools/install-tree.sh uninstall

# A Debian package, built from a copy of this tree in build/deb and checked
# with lintian: build/deb/detach_$(VERSION)_amd64.deb.
deb:
	$(Q)VERSION='$(VERSION)' tools/make-deb.sh

clean:
	rm -rf $(BUILD)

.PHONY: all deps test compat compat-full check-asan bench programs install uninstall deb clean
.SECONDARY:
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
