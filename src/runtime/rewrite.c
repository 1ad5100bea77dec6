/* --mode rewrite: system call sites that never trap twice (lazypoline's
 * idea on zpoline's trampoline).
 *
 * The first time a site traps (Syscall User Dispatch reports its address),
 * its 2-byte `syscall` becomes `call *%rax`; rax holds the call number, so
 * the call lands in a nop sled at virtual address nr of page 0 and slides
 * into dt_trampoline_entry (trampoline.S), which calls
 * dt_trampoline_dispatch below.  From then on a call from that site reaches
 * the runtime without entering the kernel.
 *
 * The two bytes change under other threads that may be running them, so
 * they change as the kernel changes its own live text (text_poke_bp):
 * int3 on the first byte, serialize every CPU, the second byte, serialize,
 * the first byte.  Any thread fetches `syscall`, `int3`+tail or `call *%rax`,
 * never a mix, wherever the bytes sit (across a cache line, across a page).
 * A thread that meets the int3 is sent on as if the new instruction had run
 * (rewrite_int3, from the runtime's SIGTRAP handler in intercept.c).
 *
 * What is never rewritten (the site keeps trapping, which always works):
 *   - the vDSO, and a site whose code cannot be read (process_vm_readv);
 *   - without membarrier SYNC_CORE (Linux < 4.16), a site whose two bytes
 *     straddle a cache line: only the single 2-byte store is left, and it
 *     is atomic within a line only;
 *   - the red-zone policy: `call` pushes 8 bytes below rsp, where a leaf
 *     function may keep data across the syscall.  A site is left alone when
 *     the code within RZ_BEFORE bytes before it or RZ_AFTER bytes after it
 *     addresses memory below the stack pointer (a negative displacement
 *     from rsp).  Cheap, conservative, and it catches the only way such
 *     data is read back.
 */
#include "runtime/rewrite.h"
#include "runtime/uaccess.h"
#include "runtime/intercept.h"
#include "runtime/clock.h"
#include "runtime/config.h"
#include "runtime/dispatch.h"

#include <cpuid.h>
#include <elf.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/syscall.h>

#define SLED 512                 /* > every system call number */
#define RZ_BEFORE 48
#define RZ_AFTER 64
#define SITES 8192               /* open-addressing table, power of two */

_Static_assert(offsetof(struct dt_thread, vfork_child) == 192, "T_VFORK_CHILD in trampoline.S");

_Static_assert(DT_NR_SYSCALLS == 512, "NR_TABLE in trampoline.S");

uint64_t dt_xsave_size DT_HIDDEN;
/* trampoline.S: the calls whose dispatch uses general registers only */
uint8_t dt_general_only[DT_NR_SYSCALLS] DT_HIDDEN;
uint8_t dt_have_xsavec DT_HIDDEN;
__thread void *dt_clone_ret DT_HIDDEN;   /* trampoline.S: a clone's way back */

void dt_trampoline_entry(void) DT_HIDDEN;
extern const char dt_retrap_syscall[] DT_HIDDEN;

/* Rewritten sites, and sites refused: read without a lock; a rewritten site
 * is added under patch_lock before its bytes change. */
static volatile uintptr_t refused[SITES];
/* trampoline.S probes it too, for threads that are not detached; never
 * full, so that a probe always ends at an empty slot */
volatile uintptr_t dt_rewritten_sites[SITES] DT_HIDDEN;
#define rewritten dt_rewritten_sites
static unsigned rewritten_count;         /* under patch_lock */
static volatile int patch_lock;
static uintptr_t vdso_lo, vdso_hi;    /* never rewritten: the kernel's own code */
/* membarrier SYNC_CORE is registered: a patch is staged with int3 */
static bool can_serialize;
/* A sleep's end rehearses its site's return (clock_resume.S: dt_wait_end)
 * with a `ret` and a `call` of its own, which a shadow stack would fault:
 * not under one. */
static bool rehearse_returns;
#define ARCH_SHSTK_STATUS 0x5005        /* asm/prctl.h of Linux 6.6+ */
#define ARCH_SHSTK_SHSTK  1ul

static inline size_t slot_of(uintptr_t a)
{
	return (size_t)((a * 0x9E3779B97F4A7C15ull) >> 51) & (SITES - 1);
}

static bool table_has(volatile uintptr_t *tab, uintptr_t a)
{
	for (size_t i = slot_of(a), n = 0; n < SITES; i = (i + 1) & (SITES - 1), n++) {
		uintptr_t v = tab[i];
		if (v == a)
			return true;
		if (!v)
			return false;
	}
	return false;
}

static bool table_add(volatile uintptr_t *tab, uintptr_t a)
{
	for (size_t i = slot_of(a), n = 0; n < SITES; i = (i + 1) & (SITES - 1), n++) {
		uintptr_t v = tab[i];
		if (v == a)
			return true;
		/* compare-and-swap: refused sites are added without the lock
		 * (warm-up only: the steady state only reads the tables) */
		if (!v && __atomic_compare_exchange_n(&tab[i], &v, a, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return true;
		if (v == a)
			return true;
	}
	return false;      /* full: the site keeps trapping */
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
	char *page;

	/* xsave must exist and be enabled by the OS */
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)))
		return -ENOTSUP;
	__cpuid_count(0xd, 0, a, b, c, d);
	dt_xsave_size = (b + 63) & ~63u;       /* standard format, enabled features */
	__cpuid_count(0xd, 1, a, b, c, d);
	dt_have_xsavec = (a >> 1) & 1;

	page = (char *)sys_call6(SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if ((long)page < 0 && (long)page > -4096)
		return (int)(long)page;
	if (page != NULL) {
		sys_call2(SYS_munmap, page, 4096);
		return -EADDRNOTAVAIL;
	}
	/* natively no memory: the runtime's own reads of it fail (uaccess.h) */
	dt_user_floor = 4096;
	/* The compiler must not see a store through NULL. */
	__asm__("" : "+r"(page));
	for (int i = 0; i < 4096; i += 2) {      /* ud2 wherever no sled is */
		page[i] = 0x0f;
		page[i + 1] = 0x0b;
	}
	/* The sled: a call lands at any byte address nr and must slide to
	 * SLED.  Plain nops cost one instruction a byte (400 for getppid);
	 * blocks of 14 operand-size prefixes and a nop decode, from any byte
	 * on, as one nop to the block's end (at most 15 bytes, the longest
	 * instruction x86 allows; no immediate, so no length-changing-prefix
	 * stall): a fifteenth of the instructions. */
	for (int i = 0; i < SLED; i++)
		page[i] = (char)((SLED - 1 - i) % 15 == 0 ? 0x90 : 0x66);
	uint64_t entry = (uint64_t)dt_trampoline_entry;
	page[SLED] = 0x49;                        /* movabs $entry, %r11 */
	page[SLED + 1] = 0xbb;
	memcpy(page + SLED + 2, &entry, 8);
	page[SLED + 10] = 0x41;                   /* jmp *%r11 */
	page[SLED + 11] = 0xff;
	page[SLED + 12] = 0xe3;
	vdso_range();
	for (long nr = 0; nr < DT_NR_SYSCALLS; nr++)
		dt_general_only[nr] = dispatch_general_only(nr);
	/* Registered once per address space (an execve's new one too): from
	 * then on MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE makes every CPU
	 * that runs a thread of ours execute a core-serializing instruction. */
	can_serialize = sys_call3(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
	unsigned long shstk = 0;        /* EINVAL: a kernel without user shadow stacks */
	rehearse_returns = sys_call2(SYS_arch_prctl, ARCH_SHSTK_STATUS, &shstk) < 0 || !(shstk & ARCH_SHSTK_SHSTK);
	/* Execute-only where the CPU has protection keys; readable otherwise. */
	if (sys_call3(SYS_mprotect, 0, 4096, PROT_EXEC) < 0)
		return -EPERM;
	dt_rewrite_on = true;
	return 0;
}

/* ---- reading the code around a site (no libc, no /proc: we are in the trap) */

/* Copies [addr, addr+len) of our own memory into buf, as far as it is
 * readable: process_vm_readv checks the mapping's protection as a read by
 * the program would, and fails instead of faulting. */
static size_t read_own(void *buf, uintptr_t addr, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)addr, len };
	long n = sys_call6(SYS_process_vm_readv, dt_cfg.pid,
			   (long)&local, 1, (long)&remote, 1, 0);

	return n > 0 ? (size_t)n : 0;
}

/* Whether the page at addr is writable as it is: a write of its own bytes
 * back through process_vm_writev, which (without FOLL_FORCE) fails on a page
 * the program could not write. */
static bool writable_own(uintptr_t addr)
{
	uint8_t b;
	struct iovec local = { &b, 1 }, remote = { (void *)addr, 1 };

	return read_own(&b, addr, 1) == 1 &&
	       sys_call6(SYS_process_vm_writev, dt_cfg.pid, (long)&local, 1, (long)&remote, 1, 0) == 1;
}

/* The window the red-zone policy looks at, [site - RZ_BEFORE, site + 2 +
 * RZ_AFTER), clipped to what is readable: the pages before and after the
 * site's may be unmapped or guard pages.  *lo is the address of code[0]. */
static size_t read_window(uintptr_t site, uint8_t *code, uintptr_t *lo)
{
	uintptr_t page = site & ~4095ul, start = site - RZ_BEFORE, end = site + 2 + RZ_AFTER;
	size_t n = 0, got;

	if (start < page) {                         /* the page before */
		got = read_own(code, start, page - start);
		if (got == page - start)
			n = got;
		else
			start = page;
	}
	*lo = start;
	uintptr_t mid = end < page + 4096 ? end : page + 4096;
	got = read_own(code + n, start + n, mid - (start + n));
	if (got != mid - (start + n))
		return 0;                           /* the site's own page: unreadable */
	n += got;
	if (end > mid)                              /* the page after */
		n += read_own(code + n, mid, end - mid);
	return n;
}

/* The red-zone policy: memory addressed below rsp near the site. */
static bool touches_red_zone(const uint8_t *lo, const uint8_t *hi)
{
	for (const uint8_t *b = lo; b + 2 < hi; b++) {
		if ((b[1] & 0x3f) != 0x24)          /* SIB: base rsp, no index */
			continue;
		if ((b[0] & 0xc7) == 0x44 && (int8_t)b[2] < 0)                   /* disp8 */
			return true;
		if ((b[0] & 0xc7) == 0x84 && b + 5 < hi && (int8_t)b[5] < 0)     /* disp32 */
			return true;
	}
	return false;
}

/* Why a site cannot be rewritten, NULL if it can: decided from a snapshot
 * of the code around it, before any lock is taken. */
static const char *refusal(uintptr_t site)
{
	uint8_t code[RZ_BEFORE + 2 + RZ_AFTER];
	uintptr_t lo;
	size_t n, at;

	if (site >= vdso_lo && site < vdso_hi)
		return "vdso";
	if ((site & 63) == 63 && !can_serialize)
		return "crosses a cache line";
	n = read_window(site, code, &lo);
	at = site - lo;
	if (n < at + 2)
		return "unreadable";
	if (code[at] != 0x0f || code[at + 1] != 0x05)
		return "not a syscall instruction";
	if (touches_red_zone(code, code + n))
		return "red zone";
	return NULL;
}

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

/* The store itself, on a writable page.  Staged as text_poke_bp stages a
 * change of live kernel text, so that a thread running the site meanwhile
 * (another thread of the program, another detached thread) fetches one of
 *   0f 05  syscall     the old instruction: runs (or traps) as before;
 *   cc 05, cc d0       int3: SIGTRAP, and rewrite_int3 sends it on;
 *   ff d0  call *%rax  the new one: already in the site table,
 * never 0f d0 (#UD) or ff 05 (an increment of some memory).  The last
 * store needs no serialization after it: a CPU that still decodes the int3
 * is sent on by the handler, which stays valid for the site for good. */
static void store_call(struct dt_thread *t, volatile uint8_t *b)
{
	if (!can_serialize || ((uintptr_t)b & 63) != 63) {
		/* One atomic 2-byte store within a cache line (without
		 * serialization refusal() let no other site through): what
		 * zpoline and lazypoline do.  The int3 staging is kept for the
		 * sites that straddle a line: a thread of the program that
		 * blocks SIGTRAP and meets the int3 is killed by the kernel
		 * (force_sig), which cyclictest's threads showed. */
		__atomic_store_n((volatile uint16_t *)b, (uint16_t)0xd0ff, __ATOMIC_RELEASE);
		return;
	}
	__atomic_store_n(&b[0], (uint8_t)0xcc, __ATOMIC_RELEASE);
	serialize_all(t);
	__atomic_store_n(&b[1], (uint8_t)0xd0, __ATOMIC_RELEASE);
	serialize_all(t);
	__atomic_store_n(&b[0], (uint8_t)0xff, __ATOMIC_RELEASE);
}

/* The protection of the page at addr as it is now: readable (refusal read
 * it) and executable (the site ran); writable? */
static int page_prot(uintptr_t addr)
{
	return PROT_READ | PROT_EXEC | (writable_own(addr) ? PROT_WRITE : 0);
}

/* The two bytes of a site become `call *%rax`, under patch_lock.  Nothing
 * here waits, allocates or reads /proc, and no signal handler runs in the
 * middle (issue 12: a handler whose own calls trapped here used to spin on
 * the lock its interrupted thread held):
 *   - every signal is blocked while the lock is held and the page writable,
 *     so no handler (which may trap and rewrite, or siglongjmp away and
 *     leave the lock held) runs in between.  Our own calls never trap, so
 *     blocking SIGSYS here is safe.  The mask is put back as it was: in the
 *     trap handler that is the handler's, which its rt_sigreturn replaces
 *     by the frame's, as always;
 *   - the lock is only tried: a thread that finds another thread patching
 *     leaves its site trapping this time and rewrites it at a later trap.
 * The two bytes may lie on two pages (a site at offset 4095): each keeps
 * its own protection. */
enum patch { PATCHED, BUSY, FAILED };

static enum patch patch_site(struct dt_thread *t, uintptr_t site)
{
	uintptr_t page = site & ~4095ul, last = (site + 1) & ~4095ul;
	size_t len = last - page + 4096;
	uint64_t all = ~0ull, old;
	enum patch r = FAILED;
	int prot, prot_last;

	sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, 8);
	if (__atomic_exchange_n(&patch_lock, 1, __ATOMIC_ACQUIRE)) {
		sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
		return BUSY;
	}
	if (table_has(rewritten, site)) {
		r = PATCHED;              /* another thread's trap rewrote it meanwhile */
		goto out;
	}
	if (can_serialize && !intercept_own_sigtrap())
		goto out;
	prot = page_prot(site);
	prot_last = last == page ? prot : page_prot(last);
	/* Writable and still executable: other threads may be running it. */
	if (sys_call3(SYS_mprotect, page, len, PROT_READ | PROT_WRITE | PROT_EXEC) < 0)
		goto out;
	if (((volatile uint8_t *)site)[0] == 0x0f && ((volatile uint8_t *)site)[1] == 0x05 &&
	    rewritten_count < SITES / 2 && table_add(rewritten, site)) {
		/* Known before it changes: another thread may meet the int3
		 * or take the new call the moment it is stored. */
		rewritten_count++;
		store_call(t, (volatile uint8_t *)site);
		r = PATCHED;
	}
	/* exactly as it was */
	sys_call3(SYS_mprotect, page, 4096, prot);
	if (last != page)
		sys_call3(SYS_mprotect, last, 4096, prot_last);
out:
	__atomic_store_n(&patch_lock, 0, __ATOMIC_RELEASE);
	sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
	return r;
}

/* A SIGTRAP at rip: was it the int3 of a site being rewritten (rip is the
 * byte after it)?  Then the thread is sent on as if the new instruction,
 * `call *%rax`, had run (the kernel's int3_emulate_call): the return
 * address pushed, rip at page 0's sled.  The site passed the red-zone
 * policy, so the 8 bytes below rsp are free, as for the real call; the
 * trampoline then does for this thread whatever a rewritten site does
 * (detached: the runtime's call; any other thread: the system call). */
bool rewrite_int3(ucontext_t *uc)
{
	greg_t *g = uc->uc_mcontext.gregs;
	uintptr_t site = (uintptr_t)g[REG_RIP] - 1;

	if (!dt_rewrite_on || !table_has(rewritten, site))
		return false;
	g[REG_RSP] -= 8;
	*(uint64_t *)g[REG_RSP] = site + 2;
	g[REG_RIP] = g[REG_RAX];
	return true;
}

/* Called from the trap handler of a detached thread for the site that just
 * trapped; returns whether the site is rewritten now (false: it stays a
 * trapping site, for good or, when another patch was under way, until its
 * next trap). */
bool rewrite_site(struct dt_thread *t, uintptr_t site)
{
	const char *why;

	if (!dt_rewrite_on || table_has(refused, site))
		return false;
	if (table_has(rewritten, site))
		return true;
	why = refusal(site);
	if (!why) {
		switch (patch_site(t, site)) {
		case PATCHED:
			t->stats->sites_rewritten++;
			return true;
		case BUSY:
			return false;
		case FAILED:
			why = "mprotect, SIGTRAP not ours, or table full";
			break;
		}
	}
	table_add(refused, site);
	t->stats->sites_refused++;
	return false;
}

/* A jump into page 0 that came from no rewritten site: a NULL function
 * pointer call, most likely.  Natively that is a SIGSEGV: make it one, and
 * say what happened. */
__attribute__((noreturn)) void dt_stray_jump(uintptr_t ret) DT_HIDDEN;
__attribute__((noreturn)) void dt_stray_jump(uintptr_t ret)
{
	static const char msg1[] = "detach: error: a jump into page 0 (a NULL function pointer call?); "
				   "return address ";
	static const char msg2[] = " is no rewritten system call site: SIGSEGV\n";
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
			   bool *left_rest)
{
	struct wait_record *outer = t->wait_tail;   /* a handler's sleep nests */
	long r;

	if (tail) {
		tail->clk = -1;
		/* a site of ours (dt_trampoline_dispatch has checked), whose
		 * bytes are the `call *%rax` the rehearsal executes */
		tail->ret_to = rehearse_returns ? ret : 0;
	}
	t->wait_tail = tail;
	r = dt_dispatch(t, nr, args, ret, NULL);
	t->wait_tail = outer;
	*left_rest = tail && tail->clk >= 0;
	return r;
}

/* *retrap: 1, the call is re-issued to trap; 2, a sleep left its rest in
 * tail, for the trampoline to wait after the C calls have returned
 * (clock.c: timed_sleep).  tail: NULL when the trampoline saved the vector
 * state (the tail's way back restores none). */
long dt_trampoline_dispatch(long nr, long *a, long *retrap, uintptr_t ret, struct wait_record *tail) DT_HIDDEN;
long dt_trampoline_dispatch(long nr, long *a, long *retrap, uintptr_t ret, struct wait_record *tail)
{
	struct dt_thread *t = dt_self;
	long r;

	if (!table_has(rewritten, ret - 2))
		dt_stray_jump(ret);
	/* a copy: the dispatch may rewrite arguments, the slots behind a are
	 * what the program's registers are restored from */
	long args[6] = { a[0], a[1], a[2], a[3], a[4], a[5] };
	bool left_rest = false;
	if (__builtin_expect(nr == SYS_nanosleep || nr == SYS_clock_nanosleep, 0))
		r = dispatch_sleep(t, nr, args, ret, tail, &left_rest);
	else
		r = dt_dispatch(t, nr, args, ret, NULL);
	if (t->need_trap) {
		t->need_trap = false;
		*retrap = 1;
	} else if (left_rest) {
		*retrap = 2;
	}
	return r;
}

bool rewrite_is_retrap(uintptr_t call_addr)
{
	return call_addr == (uintptr_t)dt_retrap_syscall + 2;
}
