/* --mode rewrite: system call sites that trap once (lazypoline's idea, with
 * the jump to a stub near the code of gVisor's Systrap and of the kernel's
 * optimized uprobes).
 *
 * The first time a site traps (Syscall User Dispatch reports its address),
 * the one instruction before its `syscall` (0f 05) moves into a stub near
 * the code, and its place becomes a jump there; the `syscall` stays:
 *
 *   start: b8 nr32   mov $nr,%eax       ->  e9 rel32  jmp stub
 *   site:  0f 05     syscall                0f 05     syscall (kept)
 *
 *   stub:  mov $nr,%eax                     the moved instruction
 *          lea -128(%rsp),%rsp              below the program's red zone
 *          movabs $dt_trampoline_entry,%r11
 *          call *%r11                       (trampoline.S)
 *   ret:   lea 128(%rsp),%rsp
 *          lea site+2(%rip),%rcx            rcx as `syscall` leaves it
 *          jmp site+2                       r11: the flags (the trampoline's)
 *   ret+20: jmp site                        the kept `syscall` (see below)
 *
 * From then on a call from that site reaches the runtime without entering
 * the kernel, and no page 0, privilege or setting is needed.  The moved
 * instruction is `mov $nr,%eax` at 83% of glibc 2.36's sites (the exact
 * pattern); elsewhere, the shortest run of instructions of a short
 * whitelist, 5 to 15 bytes, that ends at the `syscall` (a window:
 * find_window), or a function entry's `xor %eax,%eax` with the nop before
 * the entry (a hop: find_hop); the number is then rax's at run time.  A
 * site with neither whose trapping call is exit or exit_group (glibc's
 * _exit, a thread's exit in start_thread) moves its `syscall` itself with
 * the instructions after it, up to an unconditional jmp (a forward window:
 * find_forward, whose comment gives the rule and why; stub_write_fwd: its
 * stub has a `syscall` of its own).  Elsewhere the
 * `syscall` is kept, so a thread stopped between the moved instructions
 * and it (preempted, in a signal handler, in the kernel restarting a call)
 * still finds a real syscall that traps or runs as before.  A window of two
 * or more instructions has boundaries inside the jump, where a thread that
 * ran its first instructions may resume: each holds an int3 for good (in
 * the filler after the jump, or in its rel32, the stub placed so that the
 * byte is 0xcc: inner_bounds), which sends the thread to the same offset
 * in the stub.
 *
 * The trampoline sends the calls it cannot return from to ret+20, that is
 * to the kept `syscall` with the program's own rsp: rt_sigreturn (its frame
 * is at rsp), the clone family on a thread not detached (a child on
 * another stack would resume at `ret` with a wrong rsp), and on a detached
 * thread every call that needs a signal frame (a clone the gate does not
 * make).  Sites whose number is known to be rt_sigreturn are not patched
 * at all.  A detached thread's vfork, fork (fork, or clone without shared
 * memory, stack or TLS: glibc's _Fork) and clone3 of a thread or of a
 * vfork child on its own stack (pthread_create, posix_spawn) run in the
 * trampoline's clone gate (trampoline.S), whose children and parent all
 * return through the stub.
 *
 * Five bytes change under other threads that may be running them, so they
 * change as the kernel changes its own live text (text_poke_bp): int3 on
 * the first byte and on every inner boundary, serialize every CPU, the
 * other bytes, serialize, the first byte.  A thread fetches the old
 * instruction, the int3 or the jump, never a mix, at whichever instruction
 * boundary of the window it stands, wherever the bytes sit (across a cache
 * line, across a page).  A thread that meets an int3 is sent to the stub,
 * which does the moved instructions itself (rewrite_int3, from the
 * runtime's SIGTRAP handler in intercept.c).
 *
 * What is never rewritten (the site keeps trapping, which always works, and
 * is counted): the vDSO; a site whose code cannot be read; a site with no
 * window, hop nor forward window; a site whose stub cannot be mapped
 * within +-2 GiB of it; rt_sigreturn; and everything
 * on a kernel without membarrier SYNC_CORE (Linux < 4.16), where five bytes
 * cannot change safely under other threads.
 */
#include "runtime/rewrite.h"
#include "runtime/call.h"
#include "runtime/stack.h"
#include "runtime/clock.h"
#include "runtime/config.h"
#include "runtime/dispatch.h"
#include "runtime/membarrier.h"
#include "runtime/stats.h"
#include "lib/util.h"

#include <cpuid.h>
#include <elf.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/syscall.h>

bool (*rewrite_own_sigtrap)(void);

#define WIN_MAX 15               /* the longest window moved */
#define STUB_SLOT 64             /* bytes per stub: one cache line */
#define STUB_PAGES 512           /* 32768 slots, more than the tables hold */
#define NEAR (2048ul << 20)      /* rel32's reach */
/* The stub's layout past its moved instruction (see above): offsets from
 * `ret` in rewrite.h (RET_RCX_DISP, RET_RCX_NEXT, RET_TO_SITE), known to
 * stub_site_end and to trampoline.S. */

uint64_t dt_xsave_size DT_HIDDEN;
/* trampoline.S: the calls whose dispatch uses general registers only */
uint8_t dt_general_only[DT_NR_SYSCALLS] DT_HIDDEN;
uint8_t dt_have_xsavec DT_HIDDEN;

void dt_trampoline_entry(void) DT_HIDDEN;

/* The tables: read without a lock; a site is added under patch_lock before
 * its bytes change, a refused one by compare-and-swap.
 *   dt_rewritten_sites  the stubs' `ret` addresses: the only return
 *                       addresses dt_trampoline_entry accepts (trampoline.S
 *                       probes it, the same probe as table_has); never
 *                       full, so that a probe always ends at an empty slot
 *   patched             the `syscall` addresses of patched sites
 *   starts, start_stub  a patch's first byte -> its stub (rewrite_int3)
 *   refused             sites left trapping */
volatile uintptr_t dt_rewritten_sites[REWRITE_SITES] DT_HIDDEN;
static volatile uintptr_t patched[REWRITE_SITES], starts[REWRITE_SITES], refused[REWRITE_SITES];
/* each refused site's entry in the registry's sites (coverage), + 1; 0: none */
static uint16_t refused_log[REWRITE_SITES];
static uintptr_t start_stub[REWRITE_SITES];
/* a start's window's inner boundaries (bit b: offset b), published with it:
 * an int3 there sends a thread to the same offset in the stub */
static uint16_t start_bounds[REWRITE_SITES];
/* a patched site's window start (its jump, or a hop's entry), and its
 * entry in the registry's sites + 1 (0: none) */
static uintptr_t patched_start[REWRITE_SITES];
static uint16_t patched_log[REWRITE_SITES];
/* A forward window's stub holds a `syscall` of its own (stub_write_fwd):
 * its address -> the site whose call it makes (under patch_lock, before
 * the site's bytes change; never forgotten: stub slots are never reused,
 * so a trap there is always the site's retrap, never a site to rewrite) */
static volatile uintptr_t fwd_sys[REWRITE_SITES];
static uintptr_t fwd_site[REWRITE_SITES];
/* A key no longer valid (the code it was about is gone: stale_site): probes
 * go on past it, nothing matches it.  No site or start is at address 1. */
#define TOMB 1ul
/* The window (and a hop's pad) whose bytes patch_site is changing, 0: none
 * (written under patch_lock, read by rewrite_int3 without it) */
static volatile uintptr_t patching_start, patching_pad;
static unsigned patched_count;          /* under patch_lock */
static volatile int patch_lock;
static uintptr_t vdso_lo, vdso_hi;    /* never rewritten: the kernel's own code */
/* membarrier SYNC_CORE is registered: a patch can be staged with int3 */
static bool can_serialize;
/* A sleep's end rehearses its site's return (clock_resume.S: dt_wait_end)
 * with a `ret` and a `call` of its own, which a shadow stack would fault:
 * not under one. */
static bool rehearse_returns;
#define ARCH_SHSTK_STATUS 0x5005        /* asm/prctl.h of Linux 6.6+ */
#define ARCH_SHSTK_SHSTK  1ul

/* The pages the stubs live in, a bit per slot in use (under patch_lock) */
static struct { uintptr_t base; uint64_t used; } stub_pages[STUB_PAGES];
static unsigned stub_page_count;

/* Every site met, for the coverage by mapping: appended once per site to
 * the registry's sites (lib/registry.h; `detach ps --sites` reads them
 * live), without a lock (an index taken atomically); why each was left
 * trapping, here (the registry is read by other processes) */
static const char *site_why[DT_SITES];
_Static_assert((int)SITE_EXACT == (int)DT_SITE_EXACT && (int)SITE_WINDOW == (int)DT_SITE_WINDOW &&
	       (int)SITE_TRAPPING == (int)DT_SITE_TRAPPING && (int)SITE_NO_STUB == (int)DT_SITE_NO_STUB,
	       "rewrite.h's kinds are the registry's");

static inline size_t slot_of(uintptr_t a)
{
	return (size_t)((a * REWRITE_HASH_MUL) >> REWRITE_HASH_SHIFT) & (REWRITE_SITES - 1);
}

/* The slot of a in tab, or -1 */
static long table_find(volatile uintptr_t *tab, uintptr_t a)
{
	for (size_t i = slot_of(a), n = 0; n < REWRITE_SITES; i = (i + 1) & (REWRITE_SITES - 1), n++) {
		uintptr_t v = __atomic_load_n(&tab[i], __ATOMIC_ACQUIRE);
		if (v == a)
			return (long)i;
		if (!v)
			return -1;
	}
	return -1;
}

static bool table_has(volatile uintptr_t *tab, uintptr_t a)
{
	return table_find(tab, a) >= 0;
}

/* Adds a (with val in vals[slot] and val2 in vals2[slot], published with
 * it, when given); the slot, or -1 when full (the site keeps trapping). */
static long table_add2(volatile uintptr_t *tab, uintptr_t *vals, uintptr_t a, uintptr_t val, uint16_t *vals2,
		       uint16_t val2)
{
	for (size_t i = slot_of(a), n = 0; n < REWRITE_SITES; i = (i + 1) & (REWRITE_SITES - 1), n++) {
		uintptr_t v = tab[i];
		if (v == a)
			return (long)i;
		if (vals && !v)
			vals[i] = val;   /* the adders hold patch_lock: nobody else writes it */
		if (vals2 && !v)
			vals2[i] = val2;
		/* compare-and-swap: refused sites are added without the lock
		 * (warm-up only: the steady state only reads the tables) */
		if (!v && __atomic_compare_exchange_n(&tab[i], &v, a, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return (long)i;
		if (v == a)
			return (long)i;
	}
	return -1;
}

static long table_add(volatile uintptr_t *tab, uintptr_t *vals, uintptr_t a, uintptr_t val)
{
	return table_add2(tab, vals, a, val, NULL, 0);
}

/* Makes the key a of tab a tombstone (under patch_lock) */
static void table_forget(volatile uintptr_t *tab, uintptr_t a)
{
	long i = table_find(tab, a);

	if (i >= 0)
		__atomic_store_n(&tab[i], TOMB, __ATOMIC_RELEASE);
}

/* The site's index in the registry's sites, or -1 (full, or no registry) */
static long log_site(uintptr_t site, uint8_t kind, const char *why)
{
	struct dt_registry *r = dt_registry;

	if (!r)
		return -1;
	unsigned i = __atomic_fetch_add(&r->nsites, 1, __ATOMIC_RELAXED);
	if (i >= DT_SITES)
		return -1;
	r->sites[i].kind = kind;
	site_why[i] = why;
	__atomic_store_n(&r->sites[i].addr, site, __ATOMIC_RELEASE);
	return i;
}

/* log_site, or, for a site logged before (i >= 0: its code was replaced,
 * stale_site), its entry made over: a site counts once */
static long log_again(long i, uintptr_t site, uint8_t kind, const char *why)
{
	if (i < 0 || i >= DT_SITES || !dt_registry)
		return log_site(site, kind, why);
	dt_registry->sites[i].kind = kind;
	dt_registry->sites[i].traps = 0;
	site_why[i] = why;
	return i;
}

/* The vDSO's code, from its ELF headers (its loadable segments start at
 * its base), so that the trap path needs no /proc/self/maps. */
static void vdso_range(void)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)getauxval(AT_SYSINFO_EHDR);
	uintptr_t size = 0;

	if (!eh)
		return;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)eh + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr + ph[i].p_memsz > size)
			size = ph[i].p_vaddr + ph[i].p_memsz;
	vdso_lo = (uintptr_t)eh;
	vdso_hi = vdso_lo + ((size + 4095) & ~4095ul);
}

int rewrite_init(void)
{
	unsigned a, b, c, d;

	/* xsave must exist and be enabled by the OS */
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)))
		return -ENOTSUP;
	/* lahf/sahf in 64-bit mode (trampoline.S's way back): every x86-64
	 * CPU but the first Pentium 4s and Athlon 64s */
	if (!__get_cpuid(0x80000001, &a, &b, &c, &d) || !(c & 1u))
		return -ENOTSUP;
	__cpuid_count(0xd, 0, a, b, c, d);
	dt_xsave_size = (b + 63) & ~63u;       /* standard format, enabled features */
	__cpuid_count(0xd, 1, a, b, c, d);
	dt_have_xsavec = (a >> 1) & 1;
	/* Registered once per address space (an execve's new one too): from
	 * then on MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE makes every CPU
	 * that runs a thread of ours execute a core-serializing instruction.
	 * Without it no five bytes can change under other threads. */
	can_serialize = membarrier_register_sync_core();
	if (!can_serialize)
		return -ENOSYS;
	vdso_range();
	for (long nr = 0; nr < DT_NR_SYSCALLS; nr++)
		dt_general_only[nr] = dispatch_general_only(nr);
	/* The clone gate lies on the trampoline's vector-saving path only,
	 * and do_clone has blocked every signal when it asks for it: the
	 * clone family never takes the other (where a request for the gate
	 * would become a trap with SIGSYS blocked).  dispatch_general_only
	 * says no for them already; this makes it the gate's rule too. */
	dt_general_only[SYS_vfork] = dt_general_only[SYS_fork] = 0;
	dt_general_only[SYS_clone] = dt_general_only[SYS_clone3] = 0;
	unsigned long shstk = 0;        /* EINVAL: a kernel without user shadow stacks */
	rehearse_returns = sys_call2(SYS_arch_prctl, ARCH_SHSTK_STATUS, &shstk) < 0 || !(shstk & ARCH_SHSTK_SHSTK);
	dt_rewrite_on = true;
	return 0;
}

/* ---- reading the code around a site (no libc, no /proc: we are in the trap) */

/* process_vm_readv or process_vm_writev (nr) of one range of our own
 * memory.  By the process's pid, which names its first thread: once that
 * thread has ended while others run on (a main thread's pthread_exit, or a
 * detached first thread's exit), its task keeps the pid without an mm and
 * the call fails with ESRCH; then by the calling thread's own tid, which
 * names the same memory.  (Not the tid first: a thread not detached, say a
 * SIGTRAP handler's in rewrite_int3, has no record of it, and the pid
 * serves every other case with one kernel entry.) */
static long own_vm(long nr, struct iovec *local, struct iovec *remote)
{
	long n = sys_call6(nr, dt_cfg.pid, (long)local, 1, (long)remote, 1, 0);

	if (n == -ESRCH)
		n = sys_call6(nr, sys_call0(SYS_gettid), (long)local, 1, (long)remote, 1, 0);
	return n;
}

/* Copies [addr, addr+len) of our own memory into buf, as far as it is
 * readable: process_vm_readv checks the mapping's protection as a read by
 * the program would, and fails instead of faulting. */
static size_t read_own(void *buf, uintptr_t addr, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)addr, len };
	long n = own_vm(SYS_process_vm_readv, &local, &remote);

	return n > 0 ? (size_t)n : 0;
}

/* Whether the page at addr is writable as it is: a write of its own bytes
 * back through process_vm_writev, which (without FOLL_FORCE) fails on a page
 * the program could not write. */
static bool writable_own(uintptr_t addr)
{
	uint8_t b;
	struct iovec local = { &b, 1 }, remote = { (void *)addr, 1 };

	return read_own(&b, addr, 1) == 1 && own_vm(SYS_process_vm_writev, &local, &remote) == 1;
}

/* ---- the instruction before a site */

/* A window: the instructions [start, site) that move into the stub. */
struct window {
	uintptr_t start;
	unsigned len, ninsn;
	long nr;                        /* rax at the syscall when the window sets it to a constant; else -1 */
	uint8_t bytes[WIN_MAX];
	uint8_t bound[WIN_MAX];         /* the offsets of its inner instruction boundaries */
	/* the registers it leaves holding a constant, and those constants */
	uint16_t known;
	uint64_t val[16];
	/* rip-relative operands: the offsets of their disp32 in bytes, fixed
	 * up in the stub (stub_write); rip_disp: insn_len's, from the start of
	 * the instruction it last read, 0 for none */
	uint8_t rip_at[WIN_MAX], nrip, rip_disp;
	/* A hop (find_hop): the window is the 2-byte instruction at a
	 * function's entry, which becomes `jmp pad+2`; the padding before the
	 * entry, pad_len bytes of one nop, becomes `jmp entry; jmp stub`. */
	uintptr_t pad;
	unsigned pad_len;
	uint8_t pad_bytes[16];
	/* A forward window (find_forward): the `syscall` itself and the
	 * instructions after it; see there.  sys: the `syscall`'s offset in
	 * the window (0, or the length of the instructions moved from before
	 * it); jmp_at: the offset of an unconditional jmp that ends it (0:
	 * none), jmp_to the absolute address it goes to. */
	bool fwd;
	uint8_t sys, jmp_at;
	uintptr_t jmp_to;
};

/* The length of a ModRM operand (ModRM, SIB, displacement) at m; *rip:
 * whether it addresses memory relative to rip (its disp32 right after the
 * ModRM byte), which the stub fixes up. */
static unsigned modrm_len(const uint8_t *m, bool *rip)
{
	*rip = false;
	unsigned mod = m[0] >> 6, rm = m[0] & 7, n = 1;

	if (mod == 3)
		return 1;
	if (rm == 4) {                  /* SIB */
		n++;
		if (mod == 0 && (m[1] & 7) == 5)
			return n + 4;   /* no base: disp32, absolute (%fs:0x18) */
	} else if (mod == 0 && rm == 5) {
		*rip = true;
		return n + 4;
	}
	return n + (mod == 1 ? 1 : mod == 2 ? 4 : 0);
}

/* The length of the instruction at p (at most room bytes) if it is one of
 * the whitelist, else 0; its effect on the registers goes into w:
 *   [REX] b8+r imm32            mov $imm32, %r32 (REX.W's imm64: refused)
 *   REX.W c7 /0 (reg) imm32     mov $simm32, %r64
 *   [64|65] [REX] 8b|89|8d m    mov between registers, or between a
 *                               register and memory, lea (the memory moves
 *                               nowhere: the stub runs it with the
 *                               program's rsp, and a rip-relative address
 *                               is fixed up: __libc_signal_block_all's
 *                               lea of its mask)
 *   [REX] 31|33 (reg, reg)      xor
 *   [REX] 80|83 /n ib, 81 /n id arithmetic of a register and an immediate
 *   (reg)                       (glibc's futex wake: xor $0x80,%sil)
 * None branches, none reads rip but as an address; xor and the arithmetic set the flags,
 * which the stub then carries into the trampoline as the `syscall` would
 * have found them. */
static unsigned insn_len(const uint8_t *p, unsigned room, struct window *w)
{
	unsigned n = 0, rex = 0, m, dst;
	bool rip;

	w->rip_disp = 0;
	if (room && (p[n] == 0x64 || p[n] == 0x65))
		n++;
	if (n < room && (p[n] & 0xf0) == 0x40)
		rex = p[n++];
	if (n + 1 > room)
		return 0;
	uint8_t op = p[n];
	/* After a `syscall` only (find_forward), where decoding starts at a
	 * boundary the CPU itself ran: glibc's error test of the result,
	 * `[REX.W] 3d id` cmp $imm32,%eax/%rax and `[REX] 85 (reg, reg)`
	 * test.  They write no register but the flags. */
	if (w->fwd && op == 0x3d && n + 5 <= room)
		return n + 5;
	if (w->fwd && op == 0x85 && n + 2 <= room && (p[n + 1] >> 6) == 3)
		return n + 2;
	if ((op & 0xf8) == 0xb8 && !(rex & 8) && !(n - (rex ? 1 : 0))) {
		if (n + 5 > room)
			return 0;
		dst = (op & 7) | (rex & 1 ? 8 : 0);
		w->known |= (uint16_t)(1u << dst);
		w->val[dst] = (uint32_t)p[n + 1] | (uint32_t)p[n + 2] << 8 | (uint32_t)p[n + 3] << 16 |
			      (uint32_t)p[n + 4] << 24;
		return n + 5;
	}
	if (op == 0xc7 && (rex & 8) && n == 1 && n + 6 <= room && (p[n + 1] & 0xf8) == 0xc0) {
		dst = (p[n + 1] & 7) | (rex & 1 ? 8 : 0);
		w->known |= (uint16_t)(1u << dst);
		w->val[dst] = (uint64_t)(int64_t)(int32_t)((uint32_t)p[n + 2] | (uint32_t)p[n + 3] << 8 |
							    (uint32_t)p[n + 4] << 16 | (uint32_t)p[n + 5] << 24);
		return n + 6;
	}
	if ((op == 0x80 || op == 0x81 || op == 0x83) && n + 2 <= room && (p[n + 1] >> 6) == 3) {
		unsigned len = n + 2 + (op == 0x81 ? 4 : 1);
		if (len > room)
			return 0;
		dst = (p[n + 1] & 7) | (rex & 1 ? 8 : 0);
		if (((p[n + 1] >> 3) & 7) != 7)         /* cmp writes no register */
			w->known &= (uint16_t)~(1u << dst);
		return len;
	}
	if ((op == 0x8b || op == 0x89 || op == 0x8d || op == 0x31 || op == 0x33) && n + 2 <= room) {
		uint8_t mr = p[n + 1];
		unsigned reg = ((mr >> 3) & 7) | (rex & 4 ? 8 : 0), rm = (mr & 7) | (rex & 1 ? 8 : 0);
		bool regs = (mr >> 6) == 3;
		if (n + 1 + (m = modrm_len(p + n + 1, &rip)) > room)
			return 0;
		if ((op == 0x31 || op == 0x33) && !regs)
			return 0;       /* xor with memory: a read-modify-write, not ours */
		if (op == 0x8d && regs)
			return 0;
		dst = op == 0x89 || op == 0x31 ? (regs ? rm : 16) : reg;
		if (rip)
			w->rip_disp = (uint8_t)(n + 2);
		if (dst < 16) {
			if ((op == 0x31 || op == 0x33) && reg == rm) {
				w->known |= (uint16_t)(1u << dst);
				w->val[dst] = 0;
			} else {
				w->known &= (uint16_t)~(1u << dst);
			}
		}
		return n + 1 + m;
	}
	return 0;
}

/* Whether a direct branch near site (rel8 or rel32: jmp, jcc, call) may
 * target one of the window's inner boundaries, that is land in the middle
 * of the jump.  Every byte of the readable code within SCAN of the site is
 * taken for the start of a branch: conservative (bytes that are no branch
 * only refuse more), cheap, and warm-up only. */
#define SCAN 1024
static bool branch_into(const struct window *w, uintptr_t site)
{
	uint8_t code[2 * SCAN + 8];
	uintptr_t lo = site - SCAN, page;

	if (w->ninsn < 2 && !w->pad_len)
		return false;
	/* page by page: a neighbouring page may be unreadable */
	memset(code, 0, sizeof(code));
	for (page = lo & ~4095ul; page < site + SCAN; page += 4096) {
		uintptr_t a = page < lo ? lo : page, e = page + 4096 < site + SCAN ? page + 4096 : site + SCAN;
		read_own(code + (a - lo), a, e - a);
	}
	for (size_t i = 0; i < 2 * SCAN; i++) {
		const uint8_t *c = code + i;
		uintptr_t at = lo + i, to[2];
		int n = 0;
		int32_t r32;
		if (c[0] == 0xeb || (c[0] & 0xf0) == 0x70)
			to[n++] = at + 2 + (uintptr_t)(intptr_t)(int8_t)c[1];
		if (c[0] == 0xe8 || c[0] == 0xe9) {
			memcpy(&r32, c + 1, 4);
			to[n++] = at + 5 + (uintptr_t)(intptr_t)r32;
		}
		if (c[0] == 0x0f && (c[1] & 0xf0) == 0x80) {
			memcpy(&r32, c + 2, 4);
			to[n++] = at + 6 + (uintptr_t)(intptr_t)r32;
		}
		for (int k = 0; k < n; k++) {
			for (unsigned b = 0; b + 1 < w->ninsn; b++)
				if (to[k] == w->start + w->bound[b])
					return true;
			if (to[k] > w->pad && to[k] < w->pad + w->pad_len)
				return true;
		}
	}
	return false;
}

/* The window before site in code (code[at] is the site's first byte): the
 * shortest run of whitelisted instructions, 5 to WIN_MAX bytes, that ends
 * exactly at the site.  The bytes before a site can be read more than one
 * way; a candidate is refused where the byte before it could be a prefix
 * of a longer instruction (REX, operand size, segment), and where a
 * register it sets to a constant does not hold it at the trap
 * (window_agrees). */
/* Whether the len bytes before code[at] read as whitelisted instructions
 * that end exactly there (into w, which the caller zeroed), and the byte
 * before them cannot be a prefix of the first. */
/* Records in w the instruction of l bytes that insn_len just read at
 * offset off of the window (an inner boundary unless it is the first, where
 * its rip-relative displacement lies); returns the offset after it. */
static unsigned window_add(struct window *w, unsigned off, unsigned l)
{
	if (off)
		w->bound[w->ninsn - 1] = (uint8_t)off;
	if (w->rip_disp)
		w->rip_at[w->nrip++] = (uint8_t)(off + w->rip_disp);
	w->ninsn++;
	return off + l;
}

static bool decode_before(const uint8_t *code, size_t at, unsigned len, struct window *w)
{
	const uint8_t *p = code + at - len;
	unsigned off = 0, l;

	while (off < len && (l = insn_len(p + off, len - off, w)))
		off = window_add(w, off, l);
	if (off != len)
		return false;
	if (len < at) {
		/* a byte that would change how the first instruction
		 * reads were it its prefix (0x26 0x2e 0x36 0x3e are no-ops
		 * in 64-bit mode; f2 f3 67 64 65 change no mov $imm) */
		uint8_t before = p[-1];
		bool imm = (p[0] & 0xf8) == 0xb8;
		if ((before & 0xf0) == 0x40 || before == 0x66 ||
		    (!imm && (before == 0x67 || before == 0xf2 || before == 0xf3 || before == 0x64 ||
			      before == 0x65)))
			return false;   /* perhaps part of a longer window */
	}
	return true;
}

static bool find_window(const uint8_t *code, size_t at, uintptr_t site, struct window *w)
{
	for (unsigned len = 5; len <= WIN_MAX && len <= at; len++) {
		const uint8_t *p = code + at - len;
		memset(w, 0, sizeof(*w));
		if (!decode_before(code, at, len, w))
			continue;
		w->start = site - len;
		w->len = len;
		w->nr = w->known & 1 ? (long)(uint32_t)w->val[0] : -1;
		memcpy(w->bytes, p, len);
		return true;
	}
	return false;
}

/* A site whose only instruction before it is 2 bytes long at a function's
 * entry (glibc's __read_nocancel, ld.so's: `xor %eax,%eax; syscall`): the
 * bytes before the entry belong to another function, so no window ends at
 * the site.  But gcc aligns functions to 16 bytes with one nop, and where
 * that nop is 7 to 15 bytes long it can carry the jump (E9Patch's
 * trampoline hopping):
 *
 *   pad:   nop (7..15)            ->  eb N-2     jmp entry (a fall-through
 *                                                 into the padding goes on
 *                                                 as before)
 *                                     e9 rel32   jmp stub
 *   entry: 31 c0  xor %eax,%eax       eb XX      jmp pad+2
 *   site:  0f 05  syscall             0f 05      (kept)
 *
 * The padding is recognized exactly: one of the assembler's long nops
 * (0f 1f 80 00*4, or [66...][2e] 0f 1f 84 00*5) ending at a 16-byte
 * aligned entry, with no prefix byte before it; no branch may land inside
 * it (branch_into).  Both instructions change as a window does (int3 first,
 * see store_hop), so a thread at either sees the old one, int3 or the new. */
static bool find_hop(const uint8_t *code, size_t at, uintptr_t site, struct window *w)
{
	uintptr_t entry = site - 2;
	const uint8_t *e = code + at - 2;
	unsigned n;

	if (at < 2 + 8 || (entry & 15) || !((e[0] == 0x31 || e[0] == 0x33) && e[1] == 0xc0))
		return false;
	if (!memcmp(e - 8, "\x0f\x1f\x84\x00\x00\x00\x00\x00", 8)) {
		n = 8;
		while (n < 15 && n + 2 < at && (e[-(int)n - 1] == 0x66 || e[-(int)n - 1] == 0x2e))
			n++;
	} else if (!memcmp(e - 7, "\x0f\x1f\x80\x00\x00\x00\x00", 7)) {
		n = 7;
	} else {
		return false;
	}
	if (n + 2 >= at)
		return false;           /* the byte before the nop is not known */
	uint8_t before = e[-(int)n - 1];
	if ((before & 0xf0) == 0x40 || before == 0x26 || before == 0x2e || before == 0x36 || before == 0x3e ||
	    before == 0x64 || before == 0x65 || before == 0x66 || before == 0x67 || before == 0xf0 ||
	    before == 0xf2 || before == 0xf3)
		return false;
	memset(w, 0, sizeof(*w));
	w->start = entry;
	w->len = 2;
	w->ninsn = 1;
	memcpy(w->bytes, e, 2);
	w->known = 1;                   /* rax = 0: read */
	w->nr = 0;
	w->pad = entry - n;
	w->pad_len = n;
	memcpy(w->pad_bytes, e - n, n);
	return true;
}

/* A forward window: for a site with no window before it (glibc's _exit:
 * both its calls follow a branch target), the `syscall` itself and the
 * whitelisted instructions right after it, 5 to FWD_MAX bytes in all,
 * move into the stub, and their place becomes `jmp stub` and int3s:
 *
 *   site:  0f 05        syscall           ->  e9 rel32   jmp stub (its second
 *   +2:    48 3d id     cmp $-4096,%rax                  byte 0xcc: see below)
 *   +8:    77 ..        ja ...                cc         int3 (filler)
 *                                             77 ..      (unchanged)
 *
 * Decoding starts at the `syscall`, an instruction boundary the CPU itself
 * ran, so the bytes read one way only (no prefix question, no register
 * check).  No moved instruction branches (insn_len's whitelist, and cmp and
 * test here) but an unconditional jmp that ends the window (and, if that
 * leaves it short of 5 bytes, instructions before the `syscall` move too:
 * see below), and, as for a backward window, no direct branch within SCAN
 * may land on an inner boundary (branch_into).  The `syscall` is gone from
 * the site, so the stub keeps one of its own for the calls the trampoline
 * sends to the trap path (stub_write_fwd).
 *
 * What makes moving the `syscall` itself safe is who may stand at
 * syscall+2, inside the new jump, when it is stored: a thread that was in
 * the kernel in this very call then (or in a SIGSYS handler of its trap
 * there) returns to it.  The rule, both halves required:
 *   - only a site whose trapping call was exit or exit_group gets one
 *     (rewrite_site): those never return, so on a site that only makes
 *     them (glibc's _exit, which sets the number in a register before
 *     the branch target) no thread can come back to syscall+2;
 *   - and, because the number comes from rax and the same site might
 *     make a returning call on another thread (a generic site that
 *     happened to trap with exit first), syscall+2 is an inner boundary
 *     like any other: its byte (the rel32's second) is an int3, the stub
 *     chosen so (inner_bounds; a forward window gets no stub that cannot
 *     hold it), which sends a thread returning there to the same offset in
 *     the stub, where the moved instructions after the `syscall` sit
 *     (rewrite_int3).  So are the boundaries after it (rel32 or filler).
 * The window's start is the `syscall` itself: a thread stopped before it
 * (preempted, a handler, a restart that set rip back by two) takes the jump
 * and enters the trampoline with rax, as the `syscall` would have. */
#define FWD_MAX 14              /* stub_write_fwd's room in a slot */
static bool find_forward(const uint8_t *c, size_t at, const uint8_t *code, size_t avail, uintptr_t site,
			 struct window *w)
{
	unsigned off = 2, l, k, room = (unsigned)(avail < FWD_MAX ? avail : FWD_MAX);
	struct window b;

	memset(w, 0, sizeof(*w));
	w->fwd = true;
	if (avail < 2 || code[0] != 0x0f || code[1] != 0x05)
		return false;
	w->ninsn = 1;
	while (off < 5) {
		if (off + 2 <= room && (code[off] == 0xeb || code[off] == 0xe9)) {
			/* An unconditional jmp (glibc 2.36's start_thread:
			 * `syscall; jmp` back to its loop): the last moved
			 * instruction, nothing after it is (the bytes there
			 * are another path's).  The stub holds it as a jmp
			 * rel32 to the same address, in place of its jump back
			 * (stub_write_fwd).  Its target may be anywhere but
			 * strictly inside the window: there the stub's jump
			 * would land in the middle of the site's new jump. */
			unsigned jl = code[off] == 0xeb ? 2 : 5;
			int32_t r;
			if (off + jl > room)
				return false;
			if (jl == 2) {
				r = (int8_t)code[off + 1];
			} else {
				memcpy(&r, code + off + 1, 4);
			}
			w->bound[w->ninsn - 1] = (uint8_t)off;
			w->ninsn++;
			w->jmp_at = (uint8_t)off;
			off += jl;
			w->jmp_to = site + off + (uintptr_t)(intptr_t)r;
			break;
		}
		if (!(l = insn_len(code + off, room - off, w)))
			return false;
		off = window_add(w, off, l);
	}
	w->start = site;
	w->len = off;
	w->known = 0;                   /* set after the trap: nothing to agree with */
	w->nr = -1;
	memcpy(w->bytes, code, off);
	if (off < 5) {
		/* Ended by a jmp before the 5 bytes of a jump (start_thread:
		 * 4): the shortest run of whitelisted instructions before the
		 * `syscall` (its `mov %edx,%eax`) moves too, read as a
		 * backward window's (decode_before: the prefix question;
		 * window_agrees: its constants hold at the trap).  The
		 * `syscall` is then an inner boundary like syscall+2, each
		 * guarded by an int3 in the rel32 (at offsets 2 and 4 for
		 * start_thread's: a stub about 860 MiB below). */
		for (k = 5 - off; k + off <= FWD_MAX && k <= at; k++) {
			memset(&b, 0, sizeof(b));
			if (decode_before(c, at, k, &b))
				break;
		}
		if (k + off > FWD_MAX || k > at)
			return false;
		struct window f = *w;
		*w = b;
		w->fwd = true;
		w->bound[w->ninsn - 1] = (uint8_t)k;    /* the `syscall` */
		for (unsigned i = 0; i + 1 < f.ninsn; i++)
			w->bound[w->ninsn + i] = (uint8_t)(k + f.bound[i]);
		w->ninsn += f.ninsn;
		for (unsigned i = 0; i < f.nrip; i++)
			w->rip_at[w->nrip++] = (uint8_t)(k + f.rip_at[i]);
		w->sys = (uint8_t)k;
		w->jmp_at = (uint8_t)(k + f.jmp_at);
		w->jmp_to = f.jmp_to;
		w->start = site - k;
		w->len = k + off;
		w->nr = w->known & 1 ? (long)(uint32_t)w->val[0] : -1;
		memcpy(w->bytes, c + at - k, k);
		memcpy(w->bytes + k, code, off);
	}
	if (w->jmp_at && w->jmp_to > w->start && w->jmp_to < w->start + w->len)
		return false;
	return true;
}

/* Does the trap's register file agree with the window having just run?  A
 * register it sets to a constant holds it (rcx and r11 excepted: the trap's
 * syscall overwrote them); a misread of the bytes before the site almost
 * never agrees. */
static bool window_agrees(const struct window *w, const greg_t *g)
{
	static const int regs[16] = { REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
				      REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15 };

	if (!g)
		return true;
	for (int r = 0; r < 16; r++)
		if ((w->known >> r & 1) && r != 1 && r != 11 && (uint64_t)g[regs[r]] != w->val[r] &&
		    (r || (uint32_t)g[regs[r]] != (uint32_t)w->val[r]))
			return false;
	return true;
}

/* The calls the trampoline cannot return from (see above).  The clone
 * family is not: the trampoline runs a vfork, a fork or a clone3 of a
 * thread in its clone gate (trampoline.S), and sends any other clone to
 * the trap path. */
static bool never_patched(long nr)
{
	return nr == SYS_rt_sigreturn;
}

/* Why a site cannot be rewritten, NULL if it can (w: its window): decided
 * from a snapshot of the code before it, before any lock is taken. */
static const char *refusal(uintptr_t site, const greg_t *g, struct window *w, uint8_t *kind)
{
	enum { BEFORE = 32 };           /* a window, or a hop's nop and the byte before it */
	uint8_t code[BEFORE + 2];
	size_t at = BEFORE, got;
	uintptr_t lo = site - at, page = site & ~4095ul;

	*kind = SITE_TRAPPING;
	if (site >= vdso_lo && site < vdso_hi)
		return "vdso";
	if (site < 4096 + at)
		return "unreadable";
	if (lo < page && read_own(code, lo, page - lo) != page - lo) {
		/* the page before is not readable: the window is what this one holds */
		at = site - page;
		lo = page;
	}
	got = read_own(code + (BEFORE - at), lo, at + 2);
	if (got != at + 2)
		return "unreadable";
	const uint8_t *c = code + (BEFORE - at);
	if (c[at] != 0x0f || c[at + 1] != 0x05)
		return "not a syscall instruction";
	if (!find_window(c, at, site, w) && !find_hop(c, at, site, w)) {
		/* forward: the trap's own call never returns (find_forward) */
		uint8_t after[FWD_MAX];
		size_t n = read_own(after, site, FWD_MAX);
		if (!n)         /* the rest of a page ends it: what it holds */
			n = read_own(after, site, 4096 - (site & 4095));
		if (!g || ((uint32_t)g[REG_RAX] != SYS_exit && (uint32_t)g[REG_RAX] != SYS_exit_group) ||
		    !find_forward(c, at, after, n, site, w))
			return "no instruction to move";
	}
	if (!window_agrees(w, g))       /* a forward window: what it moved from before the site */
		return "the bytes before it read as no instruction of ours";
	if (branch_into(w, site))
		return "a branch may land inside the window";
	if (w->nr >= 0 && never_patched(w->nr))
		return "rt_sigreturn";
	*kind = w->ninsn == 1 && w->len == 5 && w->bytes[0] == 0xb8 ? SITE_EXACT : SITE_WINDOW;
	return NULL;
}

/* ---- the stubs */

/* The rel32 of a window's jump (e9 rel32 at start) and its inner
 * boundaries.  A thread stopped at an inner boundary when the jump is
 * stored resumes there: inside the jump's rel32 (offsets 1-4) or in the
 * int3 filler after it (5 and on).  Each such byte must be an int3 that
 * rewrite_int3 knows, which sends the thread to the same offset in the
 * stub (the window's instructions sit there at the same offsets).  In the
 * filler it is one already; inside the rel32 the stub's address is chosen
 * so that the byte is 0xcc: the bytes of (uint32_t)rel32 under *mask must
 * equal *val.  Offset 1 never is a boundary (the shortest instruction of
 * the whitelist has 2 bytes), so the rel32's low byte is free and a slot
 * stays 64-byte aligned. */
static uint16_t inner_bounds(const struct window *w, uint32_t *mask, uint32_t *val)
{
	uint16_t bounds = 0;

	*mask = *val = 0;
	for (unsigned i = 0; i + 1 < w->ninsn; i++) {
		unsigned b = w->bound[i];
		bounds |= (uint16_t)(1u << b);
		if (b >= 2 && b <= 4) {
			*mask |= 0xffu << (8 * (b - 1));
			*val |= 0xccu << (8 * (b - 1));
		}
	}
	return bounds;
}

/* The least u >= from (unsigned, up to 2^32) with (u & m) == v; above
 * 0xffffffff: none. */
static uint64_t next_match(uint64_t u, uint32_t m, uint32_t v)
{
	while (u <= 0xffffffffull) {
		uint32_t diff = ((uint32_t)u ^ v) & m;
		if (!diff)
			return u;
		int p = 31 - __builtin_clz(diff);
		uint64_t above = u >> (p + 1) << (p + 1);
		if (v >> p & 1)         /* u has 0 there: set it, the least below */
			u = above | (1ull << p) | (v & m & ((1u << p) - 1));
		else                    /* u has 1 there: carry into the bits above */
			u = above + (1ull << (p + 1));
	}
	return u;
}

/* Whether a stub at slot is in reach of a jump at start and has the rel32
 * bytes (mask, val) asks for */
static bool slot_fits(uintptr_t slot, uintptr_t start, uint32_t mask, uint32_t val)
{
	int64_t rel = (int64_t)(slot - (start + 5));

	return rel > -(int64_t)(NEAR - 2 * 4096) && rel < (int64_t)(NEAR - 2 * 4096) &&
	       ((uint32_t)rel & mask) == val;
}

/* The least 64-byte aligned slot in [lo, hi) that fits (slot_fits), or 0 */
static uintptr_t slot_in(uintptr_t lo, uintptr_t hi, uintptr_t start, uint32_t mask, uint32_t val)
{
	uintptr_t s = lo + (-lo & (STUB_SLOT - 1));
	int64_t rel = (int64_t)(s - (start + 5));

	if (rel <= -(int64_t)NEAR || rel >= (int64_t)NEAR)
		return 0;
	if (mask) {
		/* in the order of signed values: the sign bit flipped */
		uint64_t u = next_match((uint32_t)(int32_t)rel ^ 0x80000000u, mask, val ^ (mask & 0x80000000u));
		if (u > 0xffffffffull)
			return 0;
		s = start + 5 + (uintptr_t)(intptr_t)(int32_t)((uint32_t)u ^ 0x80000000u);
		s += -s & (STUB_SLOT - 1);      /* the low byte is free: no carry */
	}
	return s + STUB_SLOT <= hi && slot_fits(s, start, mask, val) ? s : 0;
}

/* A slot for a stub within reach of [start, site + 2), whose rel32 from
 * the jump at start has the bytes (mask, val) asks for (inner_bounds; 0:
 * any): in a stub page already mapped, or in a new one mapped near the
 * code (below it first: above an executable lies its heap, which must
 * stay free to grow).  Under patch_lock.  0: none. */
static uintptr_t stub_slot(uintptr_t start, uint32_t mask, uint32_t val)
{
	for (unsigned i = 0; i < stub_page_count; i++) {
		uintptr_t b = stub_pages[i].base;
		for (unsigned k = 0; k < 4096 / STUB_SLOT; k++) {
			if (stub_pages[i].used >> k & 1)
				continue;
			if (!slot_fits(b + STUB_SLOT * k, start, mask, val))
				continue;
			stub_pages[i].used |= 1ull << k;
			return b + STUB_SLOT * k;
		}
	}
	if (stub_page_count == STUB_PAGES)
		return 0;
	/* 2 MiB steps, down then up, up to 1 GiB away; never below
	 * mmap_min_addr (the kernel refuses those).  With a mask, the least
	 * slot of each step that fits, or of the next few pages that fit
	 * there when that one is taken (a 2 MiB step holds a fitting slot for
	 * a mask of the rel32's second byte; one step in eight for the
	 * third; the fourth only about 860 MiB below the code) */
	for (int k = 1; k <= 1024; k++) {
		long step = (k & 1 ? -1 : 1) * (long)((k + 1) / 2) * (2l << 20);
		uintptr_t region = ((start & ~((2ul << 20) - 1)) + (uintptr_t)step), from = region;
		for (int tries = 0; tries < (mask ? 4 : 1); tries++) {
			uintptr_t slot = slot_in(from, region + (2ul << 20), start, mask, val);
			if (!slot)
				break;
			uintptr_t hint = slot & ~4095ul;
			from = hint + 4096;
			if ((long)hint < (1l << 20) || hint >= (1ul << 47) - 4096)
				break;
			long p = sys_call6(SYS_mmap, (long)hint, 4096, PROT_READ | PROT_EXEC,
					   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (p < 0 && p > -4096)
				continue;
			if ((uintptr_t)p != hint) {     /* a kernel older than 4.17 took it as a hint */
				sys_call2(SYS_munmap, p, 4096);
				break;
			}
			/* named in /proc/PID/maps where the kernel can (5.17+) */
			sys_call6(SYS_prctl, PR_SET_VMA, PR_SET_VMA_ANON_NAME, p, 4096, (long)"detach stubs", 0);
			/* the runtime's code, locked as memlock.c locks the rest of
			 * it (--mlock all: MCL_FUTURE has); a stub swapped out would
			 * fault on the detached CPU.  Refused (RLIMIT_MEMLOCK): it
			 * still runs, as the program's own code does */
			if (dt_cfg.mlock == MLOCK_THREAD)
				sys_call2(SYS_mlock, p, 4096);
			stub_pages[stub_page_count].base = (uintptr_t)p;
			stub_pages[stub_page_count].used = 1ull << ((slot - hint) / STUB_SLOT);
			/* published after its base: in_stub_page reads without the lock */
			__atomic_store_n(&stub_page_count, stub_page_count + 1, __ATOMIC_RELEASE);
			return slot;
		}
	}
	return 0;
}

static void put_rel32(uint8_t *at, uintptr_t next, uintptr_t target)
{
	int32_t rel = (int32_t)(target - next);

	memcpy(at, &rel, 4);
}

/* A stub slot's code: int3s, and the window's instructions at their
 * offsets in the window.  Each keeps its rip-relative target as far from it
 * as before, moved by start - slot; false if one is then out of reach. */
static bool stub_copy_window(uint8_t *code, uintptr_t slot, const struct window *w)
{
	memset(code, 0xcc, STUB_SLOT);
	memcpy(code, w->bytes, w->len);
	for (unsigned i = 0; i < w->nrip; i++) {
		int32_t d;
		memcpy(&d, code + w->rip_at[i], 4);
		int64_t nd = (int64_t)d + (int64_t)(w->start - slot);
		if (nd != (int32_t)nd)
			return false;
		d = (int32_t)nd;
		memcpy(code + w->rip_at[i], &d, 4);
	}
	return true;
}

/* Every stub's call of the trampoline at code[n], below the red zone;
 * returns the offset of its return address, the stub's `ret` */
static unsigned stub_call_entry(uint8_t *code, unsigned n)
{
	uint64_t entry = (uint64_t)dt_trampoline_entry;

	memcpy(code + n, "\x48\x8d\x64\x24", 4); n += 4;                /* lea -RED_ZONE(%rsp),%rsp */
	code[n++] = (uint8_t)-RED_ZONE;                                  /* (disp8) */
	code[n++] = 0x49; code[n++] = 0xbb;                              /* movabs $entry,%r11 */
	memcpy(code + n, &entry, 8); n += 8;
	memcpy(code + n, "\x41\xff\xd3", 3); n += 3;                     /* call *%r11 */
	_Static_assert(RED_ZONE <= 128, "lea -RED_ZONE(%rsp) takes a disp8");
	return n;
}

/* Every stub's way back at its `ret` (code[ret]): rsp above the red zone
 * again, rcx as the site's `syscall` leaves it, and a jump to then (past
 * the site, or the moved instructions after a forward window's
 * `syscall`); returns ret + RET_TO_SITE */
static unsigned stub_way_back(uint8_t *code, unsigned ret, uintptr_t slot, uintptr_t site, uintptr_t then)
{
	unsigned n = ret;

	memcpy(code + n, "\x48\x8d\xa4\x24", 4); n += 4;                /* lea RED_ZONE(%rsp),%rsp */
	memcpy(code + n, &(int32_t){ RED_ZONE }, 4); n += 4;             /* (disp32) */
	memcpy(code + n, "\x48\x8d\x0d", 3); n += 3;                     /* lea site+2(%rip),%rcx */
	put_rel32(code + n, slot + n + 4, site + 2); n += 4;
	code[n++] = 0xe9;                                                /* jmp then */
	put_rel32(code + n, slot + n + 4, then); n += 4;
	_Static_assert(RET_RCX_DISP == 8 + 3 && RET_RCX_NEXT == 8 + 7 && RET_TO_SITE == 8 + 7 + 5,
		       "the stub's layout");
	return n;
}

/* The stub of w at slot, as laid out above; the address of its `ret`, or
 * 0 when a rip-relative operand of the window cannot reach its target
 * from there. */
static uintptr_t stub_write(uint8_t *code, uintptr_t slot, const struct window *w, uintptr_t site)
{
	unsigned n, ret;

	if (!stub_copy_window(code, slot, w))
		return 0;
	ret = stub_call_entry(code, w->len);
	n = stub_way_back(code, ret, slot, site, site + 2);
	code[n++] = 0xe9;                                                /* ret+20: jmp site */
	put_rel32(code + n, slot + n + 4, site);
	return slot + ret;
}

/* The stub of a forward window w (find_forward) at slot: the moved
 * instructions stay at their offsets in the window, so that an int3 at an
 * inner boundary (syscall+2 and on, the `syscall` and before it for a
 * window that starts before it) goes on at the same offset here
 * (rewrite_int3); the `syscall`'s offset (sys: 0, or the length moved from
 * before it) jumps to the entry:
 *
 *   +0:     the instructions before the `syscall`, as moved (if any)
 *   +sys:   eb ..        jmp entry            (the window's `syscall`)
 *   +sys+2: the instructions after the `syscall`, as moved
 *           jmp start+len                     back past the window; or, for
 *                                             a window ended by a jmp, that
 *                                             jmp as a jmp rel32 to its own
 *                                             target, at its offset
 *   entry:  lea -128(%rsp),%rsp; movabs $dt_trampoline_entry,%r11; call *%r11
 *   ret:    lea 128(%rsp),%rsp
 *           lea site+2(%rip),%rcx             rcx as the `syscall` leaves it
 *           jmp +sys+2                        the instructions after it
 *   ret+20: syscall                           the stub's own (see below)
 *           jmp +sys+2
 *
 * ret+RET_RCX_DISP and ret+RET_TO_SITE are where they are in every stub
 * (trampoline.S, stub_site_end).  The site's own `syscall` is gone, so the
 * calls the trampoline sends to the trap path (DT_NEED_TRAP: a seccomp
 * filter's SECCOMP_RET_TRAP, the program's alternate stack) reach this
 * `syscall`, with the program's rsp and registers: it traps there, and
 * rewrite_site counts the trap as a retrap of the site (fwd_sys), never as
 * a site of its own.  After that fallback rcx holds this `syscall`'s
 * return address, not the site's (2 + 12 bytes more would not fit a slot);
 * glibc's code after a `syscall` reads only rax.  Before the entry: len + 5
 * bytes at most (a jmp rel8 that ends the window grows by 3, but takes the
 * place of the jump back); 45 after it: len <= FWD_MAX. */
static uintptr_t stub_write_fwd(uint8_t *code, uintptr_t slot, const struct window *w, uintptr_t site)
{
	unsigned k = w->sys, n, ret, e;

	_Static_assert(2 + (FWD_MAX - 2) + 5 + 18 + 20 + 7 <= STUB_SLOT, "a forward stub fits its slot");
	if (!stub_copy_window(code, slot, w))
		return 0;
	n = w->jmp_at ? w->jmp_at : w->len;
	code[n++] = 0xe9;                                                /* jmp start+len, or the jmp's target */
	uintptr_t to = w->jmp_at ? w->jmp_to : w->start + w->len;
	int64_t rel = (int64_t)(to - (slot + n + 4));
	if (rel != (int32_t)rel)
		return 0;       /* a jmp rel32's target out of the stub's reach */
	put_rel32(code + n, slot + n + 4, to); n += 4;
	e = n;
	code[k] = 0xeb;                                                  /* +sys: jmp entry */
	code[k + 1] = (uint8_t)(e - (k + 2));
	ret = stub_call_entry(code, n);
	n = stub_way_back(code, ret, slot, site, slot + k + 2);          /* to +sys+2 */
	code[n++] = 0x0f; code[n++] = 0x05;                              /* ret+20: syscall */
	code[n++] = 0xe9;                                                /* jmp +sys+2 */
	put_rel32(code + n, slot + n + 4, slot + k + 2);
	return slot + ret;
}

/* Where the program resumes after the call of the stub whose `ret` is ret:
 * the address after its site's `syscall` (the instruction pointer a
 * seccomp filter sees, the rip of a signal frame made there). */
static uintptr_t stub_site_end(uintptr_t ret)
{
	int32_t rel;

	memcpy(&rel, (const void *)(ret + RET_RCX_DISP), 4);
	return ret + RET_RCX_NEXT + (uintptr_t)(intptr_t)rel;
}

/* ---- the patch */

/* Every CPU that runs a thread of this process executes a serializing
 * instruction before this returns: none still decodes the bytes it fetched
 * before our last store.  It interrupts (IPI) every such CPU, the detached
 * CPUs of other detached threads included: only while sites are rewritten
 * (warm-up), never in the steady state; counted in the statistics. */
static void serialize_all(struct dt_thread *t)
{
	sys_call3(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
	t->stats->sync_cores++;
}

/* The stores themselves, on a writable page.  Staged as text_poke_bp
 * stages a change of live kernel text, so that a thread running the
 * window meanwhile (another thread of the program, another detached thread)
 * fetches one of
 *   the moved instruction   runs as before, then the kept syscall;
 *   int3 + its tail         SIGTRAP, and rewrite_int3 sends it to the stub;
 *   jmp stub                the new one: the stub is written and known.
 * The stub's bytes were written before the first serialization, so no CPU
 * runs a stale copy of them.  The last store needs no serialization after
 * it: a CPU that still decodes the int3 is sent on by the handler, which
 * stays valid for the site for good. */
static void store_jump(struct dt_thread *t, volatile uint8_t *b, const struct window *w, uintptr_t stub,
		       uint16_t bounds)
{
	uint8_t jmp[WIN_MAX];

	memset(jmp, 0xcc, sizeof(jmp));   /* past the jump (a longer window): int3, for good */
	jmp[0] = 0xe9;
	put_rel32(jmp + 1, w->start + 5, stub);
	/* the first byte and every inner boundary (an int3 in the final
	 * bytes too: inner_bounds chose the stub so) */
	__atomic_store_n(&b[0], (uint8_t)0xcc, __ATOMIC_RELEASE);
	for (unsigned i = 1; i < w->len; i++)
		if (bounds >> i & 1)
			__atomic_store_n(&b[i], (uint8_t)0xcc, __ATOMIC_RELEASE);
	serialize_all(t);
	for (unsigned i = 1; i < w->len; i++)
		if (!(bounds >> i & 1))
			__atomic_store_n(&b[i], jmp[i], __ATOMIC_RELAXED);
	serialize_all(t);
	__atomic_store_n(&b[0], (uint8_t)0xe9, __ATOMIC_RELEASE);
}

/* A hop's stores (find_hop), staged as store_jump's: both first bytes
 * become int3 together, then both tails, then both first bytes, so the
 * two changes cost the two serializations of one.  A thread that meets
 * the int3 at pad goes on at the entry (the nop did nothing); at the
 * entry, to the stub (rewrite_int3: both are in starts). */
static void store_hop(struct dt_thread *t, const struct window *w, uintptr_t stub)
{
	volatile uint8_t *pad = (volatile uint8_t *)w->pad, *entry = (volatile uint8_t *)w->start;
	uint8_t p[16];

	memset(p, 0xcc, sizeof(p));      /* past the second jump: never run */
	p[0] = 0xeb;
	p[1] = (uint8_t)(w->pad_len - 2);
	p[2] = 0xe9;
	put_rel32(p + 3, w->pad + 7, stub);
	__atomic_store_n(&pad[0], (uint8_t)0xcc, __ATOMIC_RELEASE);
	__atomic_store_n(&entry[0], (uint8_t)0xcc, __ATOMIC_RELEASE);
	serialize_all(t);
	for (unsigned i = 1; i < w->pad_len; i++)
		__atomic_store_n(&pad[i], p[i], __ATOMIC_RELAXED);
	__atomic_store_n(&entry[1], (uint8_t)-(int)w->pad_len, __ATOMIC_RELAXED);   /* jmp pad+2 */
	serialize_all(t);
	__atomic_store_n(&pad[0], (uint8_t)0xeb, __ATOMIC_RELEASE);
	__atomic_store_n(&entry[0], (uint8_t)0xeb, __ATOMIC_RELEASE);
}

/* Makes [lo, hi) writable and executable, page by page, remembering each
 * page's protection (readable and executable, as the code ran; writable as
 * process_vm_writev finds it) in prot; false if mprotect refused.  (Not
 * covered: a program that changes the protection of the page itself while
 * the patch runs, a W^X JIT's mprotect: reprotect puts back what was found
 * before.) */
static bool unprotect(uintptr_t lo, uintptr_t hi, int prot[2])
{
	uintptr_t first = lo & ~4095ul, last = (hi - 1) & ~4095ul;

	/* Probed at bytes of the site's own ([lo, hi)), which the patch is
	 * about to change anyway: probed at the page's first byte, the write
	 * back could undo a write of another thread there (a JIT writing its
	 * next function on the same writable page). */
	prot[0] = PROT_READ | PROT_EXEC | (writable_own(lo) ? PROT_WRITE : 0);
	prot[1] = last == first ? prot[0] : PROT_READ | PROT_EXEC | (writable_own(last) ? PROT_WRITE : 0);
	/* Writable and still executable: other threads may be running it. */
	return sys_call3(SYS_mprotect, first, last - first + 4096, PROT_READ | PROT_WRITE | PROT_EXEC) == 0;
}

static void reprotect(uintptr_t lo, uintptr_t hi, const int prot[2])
{
	uintptr_t first = lo & ~4095ul, last = (hi - 1) & ~4095ul;

	sys_call3(SYS_mprotect, first, 4096, prot[0]);
	if (last != first)
		sys_call3(SYS_mprotect, last, 4096, prot[1]);
}

/* The window of a site becomes a jump to a new stub, under patch_lock.
 * Nothing here waits, allocates or reads /proc, and no signal handler runs
 * in the middle (once, a handler whose own calls trapped here used to
 * spin on the lock its interrupted thread held):
 *   - every signal is blocked while the lock is held and a page writable,
 *     so no handler (which may trap and rewrite, or siglongjmp away and
 *     leave the lock held) runs in between.  Our own calls never trap, so
 *     blocking SIGSYS here is safe.  The mask is put back as it was: in the
 *     trap handler that is the handler's, which its rt_sigreturn replaces
 *     by the frame's, as always;
 *   - the lock is only tried: a thread that finds another thread patching
 *     leaves its site trapping this time and rewrites it at a later trap.
 * Each page keeps its own protection, exactly. */
enum patch { PATCHED, BUSY, FAILED, NO_STUB, NO_GUARD };

static enum patch patch_site(struct dt_thread *t, uintptr_t site, const struct window *w)
{
	uint64_t all = ~0ull, old;
	enum patch r = FAILED;
	int prot[2];
	uint8_t stub[STUB_SLOT];

	sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, 8);
	if (__atomic_exchange_n(&patch_lock, 1, __ATOMIC_ACQUIRE)) {
		sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
		return BUSY;
	}
	if (table_has(patched, site)) {
		r = PATCHED;              /* another thread's trap rewrote it meanwhile */
		goto out;
	}
	if (patched_count >= REWRITE_SITES / 2 || !rewrite_own_sigtrap())
		goto out;
	uint32_t mask, val;
	uint16_t bounds = w->pad_len ? 0 : inner_bounds(w, &mask, &val);
	if (w->pad_len)
		mask = val = 0;
	uintptr_t slot = stub_slot(w->start, mask, val);
	if (!slot && w->fwd) {
		/* no unguarded syscall+2 (find_forward): the site keeps trapping */
		r = NO_GUARD;
		goto out;
	}
	if (!slot && mask) {
		/* No stub where the rel32 can hold the int3s (a boundary at
		 * offset 4 wants one about 860 MiB below the code: none below a
		 * non-PIE executable at 4 MiB).  Placed as any other, and those
		 * boundaries left as they were before (docs/runtime.md); the
		 * filler's still guarded. */
		slot = stub_slot(w->start, 0, 0);
		bounds &= (uint16_t)~0x1eu;
	}
	if (!slot) {
		r = NO_STUB;
		goto out;
	}
	uintptr_t ret = w->fwd ? stub_write_fwd(stub, slot, w, site) : stub_write(stub, slot, w, site);
	if (!ret) {
		r = NO_STUB;
		goto out;
	}
	if (sys_call3(SYS_mprotect, slot & ~4095ul, 4096, PROT_READ | PROT_WRITE | PROT_EXEC) < 0)
		goto out;
	memcpy((void *)slot, stub, STUB_SLOT);   /* a slot no thread runs yet */
	sys_call3(SYS_mprotect, slot & ~4095ul, 4096, PROT_READ | PROT_EXEC);
	uintptr_t lo = w->pad_len ? w->pad : w->start, hi = w->fwd ? w->start + w->len : site + 2;
	if (!unprotect(lo, hi, prot))
		goto out;
	if (!memcmp((const void *)w->start, w->bytes, w->len) &&
	    ((volatile uint8_t *)site)[0] == 0x0f && ((volatile uint8_t *)site)[1] == 0x05 &&
	    (!w->pad_len || !memcmp((const void *)w->pad, w->pad_bytes, w->pad_len))) {
		/* A start (or pad) already known belongs to code that is gone
		 * (the site at its end is not patched: checked above): its
		 * entry would send an int3 here to the old stub. */
		table_forget(starts, w->start);
		if (w->pad_len)
			table_forget(starts, w->pad);
		/* Known before the bytes change: another thread may meet the
		 * int3 or take the jump the moment it is stored. */
		long s = table_add2(starts, start_stub, w->start, slot, start_bounds, bounds);
		if (s >= 0 && (!w->pad_len || table_add(starts, start_stub, w->pad, w->start) >= 0) &&
		    table_add(dt_rewritten_sites, NULL, ret, 0) >= 0 &&
		    (!w->fwd || table_add(fwd_sys, fwd_site, ret + RET_TO_SITE, site) >= 0) &&
		    table_add(patched, patched_start, site, w->start) >= 0) {
			patched_count++;
			/* Set before the first int3 is stored, cleared after the
			 * last byte (release stores, seen in program order on
			 * x86): a thread's SIGTRAP handler (rewrite_int3) that
			 * met one of these int3s sees the window as under way
			 * here, or, once cleared, finds its jump standing. */
			__atomic_store_n(&patching_start, w->start, __ATOMIC_RELEASE);
			__atomic_store_n(&patching_pad, w->pad_len ? w->pad : 0, __ATOMIC_RELEASE);
			if (w->pad_len)
				store_hop(t, w, slot);
			else
				store_jump(t, (volatile uint8_t *)w->start, w, slot, bounds);
			__atomic_store_n(&patching_start, 0, __ATOMIC_RELEASE);
			__atomic_store_n(&patching_pad, 0, __ATOMIC_RELEASE);
			r = PATCHED;
		}
	}
	reprotect(lo, hi, prot);
out:
	__atomic_store_n(&patch_lock, 0, __ATOMIC_RELEASE);
	sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
	return r;
}

/* Do the bytes at start still hold the jump patch_site stored there, to
 * stub (starts[s])?  A jump (e9 rel32 to the stub), a hop's entry (eb to
 * the pad, whose e9 goes to the stub) or a hop's pad (eb to the entry,
 * which is its start_stub).  No: the code was unmapped, or replaced (a
 * JIT, a library loaded again at the same address). */
static bool jump_stands(uintptr_t start, long s)
{
	uint8_t b[5];
	int32_t rel;

	if (read_own(b, start, 2) != 2)
		return false;
	if (b[0] == 0xeb) {
		uintptr_t to = start + 2 + (uintptr_t)(intptr_t)(int8_t)b[1];
		if (to == start_stub[s])
			return true;            /* a pad: to its entry */
		start = to;
		if (read_own(b, start, 5) != 5)
			return false;
	} else if (read_own(b, start, 5) != 5) {
		return false;
	}
	memcpy(&rel, b + 1, 4);
	return b[0] == 0xe9 && start + 5 + (uintptr_t)(intptr_t)rel == start_stub[s];
}

/* A trap at a site the tables say is patched (slot p of patched): is the
 * patch still there?  If not, the site's entries are forgotten and it is
 * taken for a new one: true, and *relog its entry in the registry's sites
 * (or -1).  Warm-up only (a trap, a read of 5 bytes); under patch_lock,
 * tried: busy, the site stays as it is this time. */
static bool stale_site(uintptr_t site, long p, long *relog)
{
	uintptr_t start = patched_start[p];
	long s = table_find(starts, start);
	uint64_t all = ~0ull, old;
	bool stale = false;

	if (s >= 0 && jump_stands(start, s))
		return false;
	sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, 8);
	if (!__atomic_exchange_n(&patch_lock, 1, __ATOMIC_ACQUIRE)) {
		/* again, under the lock: a patch of the site may have been
		 * under way at the first look */
		s = table_find(starts, start);
		if ((p = table_find(patched, site)) >= 0 && !(s >= 0 && jump_stands(start, s))) {
			*relog = (long)patched_log[p] - 1;
			table_forget(patched, site);
			table_forget(starts, start);
			stale = true;
		}
		__atomic_store_n(&patch_lock, 0, __ATOMIC_RELEASE);
	}
	sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
	return stale;
}

/* A SIGTRAP at rip: was it the int3 of a site being rewritten (rip is the
 * byte after it)?  At a window's first byte, the thread is sent on as if
 * the jump had run: to the stub, which does the moved instructions itself.
 * At an inner boundary of a window (store_jump leaves an int3 there for
 * good), the thread had run the instructions before it when the jump was
 * stored: it goes on at the same offset in the stub, which holds them at
 * the same offsets.  The trampoline then does for this thread whatever a
 * rewritten site does (detached: the runtime's call; any other thread: the
 * system call). */
bool rewrite_int3(ucontext_t *uc)
{
	greg_t *g = uc->uc_mcontext.gregs;
	uintptr_t at = (uintptr_t)g[REG_RIP] - 1;
	long s;

	if (!dt_rewrite_on)
		return false;
	/* At a start: ours while its patch is under way (the int3 staged, the
	 * tail old or new) or stands; else the program's own int3 in code
	 * that replaced a patched one (a JIT's), or an inner boundary of a
	 * window of the new code, below. */
	if ((s = table_find(starts, at)) >= 0 &&
	    (at == __atomic_load_n(&patching_start, __ATOMIC_ACQUIRE) ||
	     at == __atomic_load_n(&patching_pad, __ATOMIC_ACQUIRE) || jump_stands(at, s))) {
		g[REG_RIP] = (greg_t)start_stub[s];
		return true;
	}
	/* An inner boundary's int3 is ours while its window's patch is under
	 * way or stands: no other code can have put one there.  A window
	 * whose jump is gone (stale: its code was replaced) does not decide:
	 * the new code may hold another window around the same byte. */
	for (unsigned b = 2; b < WIN_MAX; b++) {
		uintptr_t start = at - b;
		if ((s = table_find(starts, start)) < 0 || !(start_bounds[s] >> b & 1))
			continue;
		if (start != __atomic_load_n(&patching_start, __ATOMIC_ACQUIRE) && !jump_stands(start, s))
			continue;
		g[REG_RIP] = (greg_t)(start_stub[s] + b);
		return true;
	}
	return false;
}

/* Is a in a stub page?  Read without patch_lock: a page is published by
 * stub_page_count after its base is written (x86 keeps stores in order;
 * the release/acquire pair says so to the compiler), and never goes. */
static bool in_stub_page(uintptr_t a)
{
	unsigned n = __atomic_load_n(&stub_page_count, __ATOMIC_ACQUIRE);

	for (unsigned i = 0; i < n; i++)
		if (a - stub_pages[i].base < 4096)
			return true;
	return false;
}

/* The instruction pointer a call that trapped with rip shows a seccomp
 * filter: the site's end for a trap at a forward window's stub's own
 * `syscall` (stub_write_fwd), as at the trampoline (stub_site_end); rip
 * otherwise.  Trap path: one probe of a table, nothing else. */
uintptr_t rewrite_trap_ip(uintptr_t rip)
{
	long i;

	if (!dt_rewrite_on || (i = table_find(fwd_sys, rip - 2)) < 0)
		return rip;
	return fwd_site[i] + 2;
}

/* One more trap at the refused site of slot r (its first included) */
static void count_refused_trap(long r)
{
	unsigned i = __atomic_load_n(&refused_log[r], __ATOMIC_ACQUIRE);

	if (i && dt_registry)
		__atomic_fetch_add(&dt_registry->sites[i - 1].traps, 1, __ATOMIC_RELAXED);
}

/* Called from the trap handler of a detached thread for the site that just
 * trapped, with the trap's registers; says whether this trap rewrote the
 * site, found it rewritten, or leaves it trapping (for good or, when another
 * patch was under way, until its next trap).  The trap handler runs with
 * signals open: between the trap and this call a signal handler may call
 * the same site, trap there and rewrite it; this trap then finds it
 * rewritten, so each site counts one trap that rewrote it. */
enum site_trap rewrite_site(struct dt_thread *t, uintptr_t site, const greg_t *g)
{
	struct window w;
	uint8_t kind;
	const char *why;
	long r, relog = -1;

	if (!dt_rewrite_on)
		return TRAP_LEFT_TRAPPING;
	/* A forward window's stub's own `syscall` (stub_write_fwd): a call
	 * the trampoline sent to the trap path, a retrap of its site.  Never a
	 * site to rewrite, as no `syscall` in a stub page is (none is there
	 * but those; their page is published before their jump is stored). */
	if (in_stub_page(site))
		return TRAP_AT_REWRITTEN;
	if ((r = table_find(patched, site)) >= 0 && !stale_site(site, r, &relog))
		return TRAP_AT_REWRITTEN;
	if ((r = table_find(refused, site)) >= 0) {
		count_refused_trap(r);
		return TRAP_LEFT_TRAPPING;
	}
	if (!(why = refusal(site, g, &w, &kind))) {
		switch (patch_site(t, site, &w)) {
		case PATCHED:
			t->stats->sites_rewritten++;
			if (kind == SITE_WINDOW)
				t->stats->sites_window++;
			if ((relog = log_again(relog, site, kind, NULL)) >= 0 && (r = table_find(patched, site)) >= 0)
				__atomic_store_n(&patched_log[r], (uint16_t)(relog + 1), __ATOMIC_RELAXED);
			return TRAP_REWROTE;
		case BUSY:
			return TRAP_LEFT_TRAPPING;
		case NO_STUB:
			kind = SITE_NO_STUB;
			why = "no stub page within +-2 GiB";
			break;
		case NO_GUARD:
			kind = SITE_TRAPPING;
			why = "no stub whose jump holds an int3 at syscall+2 (a forward window)";
			break;
		case FAILED:
			kind = SITE_TRAPPING;
			why = "mprotect refused, SIGTRAP not the runtime's, or a table full";
			break;
		}
	}
	/* Another thread that trapped at the same site may have rewritten it
	 * since our first look: it adds the site to patched before it changes
	 * a byte, so a snapshot that read its int3 or jump (and found "no
	 * instruction to move") finds it there now.  Such a site is rewritten,
	 * not refused: counted once, as the trap of a rewritten site. */
	if (table_has(patched, site))
		return TRAP_AT_REWRITTEN;
	if ((r = table_add(refused, NULL, site, 0)) >= 0) {
		long i = log_again(relog, site, kind, why);
		if (i >= 0)
			__atomic_store_n(&refused_log[r], (uint16_t)(i + 1), __ATOMIC_RELEASE);
		count_refused_trap(r);
	}
	t->stats->sites_refused++;
	return TRAP_LEFT_TRAPPING;
}

static const char *why_left(unsigned i)
{
	return i < DT_SITES && site_why[i] ? site_why[i] : "";
}

/* What became of the sites met, by the mapping they lie in: written into
 * the statistics file at exit, where libc and /proc may be used
 * (lib/registry.c, as `detach ps --sites` shows it live, with our reasons
 * for the sites left trapping). */
void rewrite_write_coverage(struct json *j)
{
	if (dt_registry)
		registry_sites_json(j, dt_registry, 0, why_left);
}

/* A call of dt_trampoline_entry whose return address is no stub's: a jump
 * into the runtime from nowhere it expects (a wild function pointer).
 * Natively that would not have been a system call: make it a SIGSEGV, and
 * say what happened. */
__attribute__((noreturn)) void dt_stray_jump(uintptr_t ret) DT_HIDDEN;
__attribute__((noreturn)) void dt_stray_jump(uintptr_t ret)
{
	static const char msg1[] = "detach: error: a jump into the runtime's system call entry "
				   "(a wild function pointer?); return address ";
	static const char msg2[] = " is no rewritten system call site's: SIGSEGV\n";
	char num[19] = "0x";
	struct ksigaction dfl = { .handler = SIG_DFL };

	for (int i = 0; i < 16; i++)
		num[2 + i] = "0123456789abcdef"[(ret >> (60 - 4 * i)) & 15];
	num[18] = '\0';
	sys_call3(SYS_write, 2, msg1, sizeof(msg1) - 1);
	sys_call3(SYS_write, 2, num, 18);
	sys_call3(SYS_write, 2, msg2, sizeof(msg2) - 1);
	sys_call4(SYS_rt_sigaction, SIGSEGV, &dfl, NULL, 8);
	sys_call3(SYS_tgkill, sys_call0(SYS_getpid), sys_call0(SYS_gettid), SIGSEGV);
	sys_call1(SYS_exit_group, 128 + SIGSEGV);
	__builtin_unreachable();
}

/* A sleep: it may leave its rest in tail (see below); out of line, so that
 * other calls pay one comparison and no register for it. */
__attribute__((noinline))
static long dispatch_sleep(struct dt_thread *t, long nr, long *args, uintptr_t ret, struct wait_record *tail,
			   bool *left_rest, uintptr_t sp)
{
	struct wait_record *outer = t->wait_tail;   /* a handler's sleep nests */
	long r;

	if (tail) {
		tail->clk = -1;
		/* a stub's `ret` (the trampoline has checked), after the
		 * `call *%r11` the rehearsal executes */
		tail->ret_to = rehearse_returns ? ret : 0;
		tail->rip = stub_site_end(ret);    /* whose code dt_wait_end touches */
	}
	t->wait_tail = tail;
	r = dt_dispatch(t, nr, args, stub_site_end(ret), NULL, sp);
	t->wait_tail = outer;
	*left_rest = tail && tail->clk >= 0;
	return r;
}

/* *retrap: 1, the call goes to the site's kept `syscall` to trap there;
 * 2, a sleep left its rest in tail, for the trampoline to wait after the C
 * calls have returned (clock.c: timed_sleep); 3, a clone for the
 * trampoline's clone gate (lifecycle.c, do_clone: DT_CLONE_GATE).  ret:
 * the stub's `ret`, checked by the trampoline.  tail: NULL when the trampoline saved the
 * vector state (the tail's way back restores none). */
long dt_trampoline_dispatch(long nr, long *a, long *retrap, uintptr_t ret, struct wait_record *tail) DT_HIDDEN;
long dt_trampoline_dispatch(long nr, long *a, long *retrap, uintptr_t ret, struct wait_record *tail)
{
	struct dt_thread *t = dt_self;
	long r;

	/* a copy: the dispatch may rewrite arguments, the slots behind a are
	 * what the program's registers are restored from */
	long args[6] = { a[0], a[1], a[2], a[3], a[4], a[5] };
	/* the program's rsp at the trampoline's entry (trampoline.S: F, at
	 * 8(%rbp), the arguments at -48(%rbp)): what the call is judged by
	 * when a forwarded call is in flight (dt_dispatch) */
	uintptr_t sp = (uintptr_t)a[7];
	bool left_rest = false;
	/* A handler's call on the program's alternate stack takes the trap
	 * path: it runs the runtime's work on the runtime's stack, and its
	 * return keeps the stack armed as the program set it, for a handler
	 * that leaves by siglongjmp (stack.c, stack_trap_move and
	 * stack_on_return). */
	if (stack_on_program_altstack(t)) {
		*retrap = 1;
		return 0;
	}
	/* So does a clone-family call from a handler that runs on the
	 * runtime's own stack (on top of a forwarded call's wait): the
	 * trampoline's frame then lies right below F, and the clone gate's
	 * vfork child would write there (its mask at F-64, its pushes) and
	 * run the program over the parent's frame.  Decided here, before
	 * do_clone blocks every signal for the gate: a trap with SIGSYS
	 * blocked would kill the process. */
	if (__builtin_expect(stack_of(t, sp) == 1, 0) &&
	    (nr == SYS_vfork || nr == SYS_fork || nr == SYS_clone || nr == SYS_clone3)) {
		*retrap = 1;
		return 0;
	}
	if (__builtin_expect(nr == SYS_nanosleep || nr == SYS_clock_nanosleep, 0))
		r = dispatch_sleep(t, nr, args, ret, tail, &left_rest, sp);
	else
		r = dt_dispatch(t, nr, args, stub_site_end(ret), NULL, sp);
	/* The request for the trap path is this call's own result (call.h,
	 * DT_NEED_TRAP), not state of the thread: a handler's call made in
	 * any window of this one, or abandoned there by a second handler's
	 * siglongjmp, can neither take it nor leave its own (with a flag in
	 * the thread, saved and put back around the dispatch, an abandoned
	 * call's leftover reached the call it interrupted: a fork that
	 * returned 0 in the parent, or a call run twice). */
	if (__builtin_expect(r == DT_NEED_TRAP, 0)) {
		*retrap = 1;
		r = 0;
	} else if (__builtin_expect(r == DT_CLONE_GATE, 0)) {
		*retrap = 3;            /* the trampoline runs the clone itself */
		r = 0;
	} else if (left_rest) {
		*retrap = 2;
	}
	return r;
}
