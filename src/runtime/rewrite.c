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
 * What is never rewritten (the site keeps trapping, which always works):
 *   - the vDSO, and anything not found in /proc/self/maps;
 *   - a site whose two bytes straddle a cache line (the store that swaps
 *     them would not be atomic for threads running the code meanwhile);
 *   - the red-zone policy: `call` pushes 8 bytes below rsp, where a leaf
 *     function may keep data across the syscall.  A site is left alone when
 *     the code within RZ_BEFORE bytes before it or RZ_AFTER bytes after it
 *     addresses memory below the stack pointer (a negative displacement
 *     from rsp).  Cheap, conservative, and it catches the only way such
 *     data is read back.
 */
#include "runtime/runtime.h"

#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define SLED 512                 /* > every system call number */
#define RZ_BEFORE 48
#define RZ_AFTER 64
#define SITES 8192               /* open-addressing table, power of two */

_Static_assert(offsetof(struct dt_thread, vfork_child) == 192, "T_VFORK_CHILD in trampoline.S");

uint64_t dt_xsave_size DT_HIDDEN;
uint8_t dt_have_xsavec DT_HIDDEN;
__thread void *dt_clone_ret DT_HIDDEN;   /* trampoline.S: a clone's way back */
bool dt_rewrite_on DT_HIDDEN;

void dt_trampoline_entry(void) DT_HIDDEN;
extern const char dt_retrap_syscall[] DT_HIDDEN;

/* Rewritten sites, and sites refused: read without a lock (a site is
 * published after its bytes changed), written under patch_lock. */
static volatile uintptr_t rewritten[SITES], refused[SITES];
static volatile int patch_lock;
static char maps_buf[1 << 20];

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
		if (tab[i] == a)
			return true;
		if (!tab[i]) {
			__atomic_store_n(&tab[i], a, __ATOMIC_RELEASE);
			return true;
		}
	}
	return false;      /* full: the site keeps trapping */
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
	/* The compiler must not see a store through NULL. */
	__asm__("" : "+r"(page));
	for (int i = 0; i < 4096; i += 2) {      /* ud2 wherever no sled is */
		page[i] = 0x0f;
		page[i + 1] = 0x0b;
	}
	memset(page, 0x90, SLED);                 /* nop sled */
	uint64_t entry = (uint64_t)dt_trampoline_entry;
	page[SLED] = 0x49;                        /* movabs $entry, %r11 */
	page[SLED + 1] = 0xbb;
	memcpy(page + SLED + 2, &entry, 8);
	page[SLED + 10] = 0x41;                   /* jmp *%r11 */
	page[SLED + 11] = 0xff;
	page[SLED + 12] = 0xe3;
	/* Execute-only where the CPU has protection keys; readable otherwise. */
	if (sys_call3(SYS_mprotect, 0, 4096, PROT_EXEC) < 0)
		return -EPERM;
	dt_rewrite_on = true;
	return 0;
}

/* ---- finding the mapping of a site (no libc: we are in the trap) -------- */

struct mapping { uintptr_t start, end; int prot; bool vdso, found; };

static uintptr_t hex(const char **p)
{
	uintptr_t v = 0;
	for (;; (*p)++) {
		char ch = **p;
		int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
		if (d < 0)
			return v;
		v = v * 16 + (uintptr_t)d;
	}
}

static struct mapping find_mapping(uintptr_t addr)
{
	struct mapping m = { 0 };
	long fd = sys_call3(SYS_open, "/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
	size_t len = 0;
	long n;

	if (fd < 0)
		return m;
	while (len < sizeof(maps_buf) - 1 &&
	       (n = sys_call3(SYS_read, fd, maps_buf + len, sizeof(maps_buf) - 1 - len)) > 0)
		len += (size_t)n;
	sys_call1(SYS_close, fd);
	maps_buf[len] = '\0';
	for (const char *p = maps_buf; *p; ) {
		const char *line = p;
		uintptr_t start = hex(&p), end;
		p++;
		end = hex(&p);
		if (addr >= start && addr < end) {
			m.start = start;
			m.end = end;
			m.found = true;
			p++;
			m.prot = (p[0] == 'r' ? PROT_READ : 0) | (p[1] == 'w' ? PROT_WRITE : 0) |
				 (p[2] == 'x' ? PROT_EXEC : 0);
			while (*p && *p != '\n')
				p++;
			m.vdso = p - line > 6 && !memcmp(p - 6, "[vdso]", 6);
			return m;
		}
		while (*p && *p != '\n')
			p++;
		if (*p)
			p++;
	}
	return m;
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

/* Called from the trap handler of a detached thread for the site that just
 * trapped; returns whether the site is rewritten now (false: it stays a
 * trapping site, or rewrite mode is off). */
bool rewrite_site(struct dt_thread *t, uintptr_t site)
{
	struct mapping m;
	uintptr_t page_lo, page_hi;
	const char *why = NULL;

	if (!dt_rewrite_on || table_has(refused, site))
		return false;
	if (table_has(rewritten, site))
		return true;      /* another thread's trap rewrote it meanwhile */
	while (__atomic_exchange_n(&patch_lock, 1, __ATOMIC_ACQUIRE))
		cpu_relax();
	m = find_mapping(site);
	if (!m.found || site + 2 > m.end)
		why = "unmapped";
	else if (m.vdso)
		why = "vdso";
	else if ((site & 63) == 63)
		why = "crosses a cache line";
	else if (touches_red_zone((const uint8_t *)(site - RZ_BEFORE < m.start ? m.start : site - RZ_BEFORE),
				  (const uint8_t *)(site + 2 + RZ_AFTER > m.end ? m.end : site + 2 + RZ_AFTER)))
		why = "red zone";
	else if (((const uint8_t *)site)[0] != 0x0f || ((const uint8_t *)site)[1] != 0x05)
		why = "not a syscall instruction";
	if (!why) {
		page_lo = site & ~4095ul;
		page_hi = (site + 2 + 4095) & ~4095ul;
		/* Writable and still executable: other threads may be running it. */
		if (sys_call3(SYS_mprotect, page_lo, page_hi - page_lo, m.prot | PROT_WRITE | PROT_EXEC) < 0) {
			why = "mprotect";
		} else if (!table_add(rewritten, site)) {
			why = "table full";
			sys_call3(SYS_mprotect, page_lo, page_hi - page_lo, m.prot);
		} else {
			/* Known before it exists: another thread may take the new
			 * call the moment it is stored.  One atomic 2-byte store
			 * (within a cache line): a thread fetching the site sees
			 * `syscall` or `call *%rax`, and both work. */
			__atomic_store_n((volatile uint16_t *)site, (uint16_t)0xd0ff, __ATOMIC_RELEASE);
			sys_call3(SYS_mprotect, page_lo, page_hi - page_lo, m.prot);   /* exactly as it was */
		}
	}
	if (why) {
		table_add(refused, site);
		t->stats->sites_refused++;
	} else {
		t->stats->sites_rewritten++;
	}
	__atomic_store_n(&patch_lock, 0, __ATOMIC_RELEASE);
	return !why;
}

/* A jump into page 0 that came from no rewritten site: a NULL function
 * pointer call, most likely.  Natively that is a SIGSEGV: make it one, and
 * say what happened. */
__attribute__((noreturn)) static void stray_jump(uintptr_t ret)
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

long dt_trampoline_is_detached(void) DT_HIDDEN;
long dt_trampoline_is_detached(void)
{
	return dt_self && !dt_self->vfork_child;
}

long dt_trampoline_dispatch(long nr, long *a, long *retrap, uintptr_t ret) DT_HIDDEN;
long dt_trampoline_dispatch(long nr, long *a, long *retrap, uintptr_t ret)
{
	struct dt_thread *t = dt_self;
	long r;

	if (!table_has(rewritten, ret - 2))
		stray_jump(ret);
	/* Not detached (other threads, proxies, children): the call itself. */
	if (!t || t->vfork_child)
		return sys_call6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	/* a copy: the dispatch may rewrite arguments, the slots behind a are
	 * what the program's registers are restored from */
	long args[6] = { a[0], a[1], a[2], a[3], a[4], a[5] };
	r = dt_dispatch(t, nr, args, NULL);
	if (t->need_trap) {
		t->need_trap = false;
		*retrap = 1;
	}
	return r;
}

bool rewrite_is_retrap(uintptr_t call_addr)
{
	return call_addr == (uintptr_t)dt_retrap_syscall + 2;
}
