/* Layer 5 (entries, docs/architecture.md): rewriting system call sites into
 * jumps to stubs that call the trampoline (rewrite.c, trampoline.S). */
#ifndef DETACH_RUNTIME_REWRITE_H
#define DETACH_RUNTIME_REWRITE_H

#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>
#include <asm/processor-flags.h>

#include "runtime/thread.h"

/* What became of a site that trapped */
enum site_kind {
	SITE_EXACT,             /* mov $nr,%eax moved into its stub */
	SITE_WINDOW,            /* another instruction moved: the number from rax */
	SITE_TRAPPING,          /* left trapping: no instruction to move, vDSO, ... */
	SITE_NO_STUB,           /* left trapping: no stub page within +-2 GiB */
};

/* The table of the stubs' return addresses (dt_rewritten_sites), open
 * addressing, a power of two; a slot is (a * REWRITE_HASH_MUL) >>
 * REWRITE_HASH_SHIFT.  trampoline.S probes it as rewrite.c does. */
#define REWRITE_SITES 8192
#define REWRITE_HASH_MUL 0x9E3779B97F4A7C15ull
#define REWRITE_HASH_SHIFT 51
/* A stub's `jmp site` (to the kept `syscall`), counted from its `ret`:
 * where trampoline.S sends the calls it cannot return from. */
#define RET_TO_SITE 20
/* The flags the trampoline's way back restores without popfq (sahf, and an
 * add for OF): the arithmetic ones, IF and the reserved bit 1, always set
 * in user mode.  Saved flags with any other bit set (DF, TF, AC, ID) take
 * popfq. */
#define FLAGS_ARITH_ONLY (X86_EFLAGS_CF | X86_EFLAGS_FIXED | X86_EFLAGS_PF | X86_EFLAGS_AF | \
			  X86_EFLAGS_ZF | X86_EFLAGS_SF | X86_EFLAGS_IF | X86_EFLAGS_OF)
/* The rel32 of the stub's `lea site+2(%rip),%rcx`, and the end of that
 * instruction, from its `ret`: where the program resumes (rewrite.c,
 * stub_site_end; trampoline.S's CFI computes it too) */
#define RET_RCX_DISP 11
#define RET_RCX_NEXT 15

int rewrite_init(void) DT_HIDDEN;
/* Before a site is staged with int3: is SIGTRAP's action ours?  (intercept.c's
 * intercept_own_sigtrap, above this file, set at start by init.c) */
extern bool (*rewrite_own_sigtrap)(void) DT_HIDDEN;
/* What a trap at a site found and did (rewrite_site) */
enum site_trap {
	TRAP_REWROTE,           /* the site is rewritten now, by this trap */
	TRAP_AT_REWRITTEN,      /* rewritten before this trap was handled: a call
				 * the trampoline sent back to the kept `syscall`,
				 * a thread between the moved instruction and the
				 * `syscall` when the jump was stored, or a trap
				 * whose site a nested trap (a signal handler's
				 * call) or another thread rewrote meanwhile */
	TRAP_LEFT_TRAPPING,     /* a refused site, another patch under way, or
				 * rewrite mode off */
};
enum site_trap rewrite_site(struct dt_thread *t, uintptr_t site, const greg_t *g) DT_HIDDEN;
/* The instruction pointer of a trapped call as a seccomp filter sees it:
 * rip, or, for a trap at a forward window's stub's own `syscall`, its
 * site's end (rewrite.c, stub_write_fwd) */
uintptr_t rewrite_trap_ip(uintptr_t rip) DT_HIDDEN;
/* A thread met the int3 of a site being patched: sent on (true), or not ours. */
bool rewrite_int3(ucontext_t *uc) DT_HIDDEN;
struct json;
/* "sites": what became of the sites met, by mapping (stats.c, at exit) */
void rewrite_write_coverage(struct json *j) DT_HIDDEN;

#endif
