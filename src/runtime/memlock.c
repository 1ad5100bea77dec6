/* What a detached thread needs in memory, locked so that it takes no page
 * fault on its CPU, without changing what the rest of the program's memory
 * does (--mlock, DETACH_MLOCK):
 *   thread (default)  the thread's stack below it (up to 256 KiB, touched
 *                     first so that the stack has grown there) and above it,
 *                     its struct, its statistics slot, the runtime's stack
 *                     for it (stack.c), and the runtime's own code and data.  The program's other memory behaves as
 *                     natively: madvise(MADV_DONTNEED), heap growth beyond
 *                     RLIMIT_MEMLOCK, sparse MAP_NORESERVE reservations.
 *   all               mlockall(MCL_CURRENT | MCL_FUTURE): every page, now and
 *                     later; see `detach run --help` for what that breaks.
 *   none              nothing locked, nothing touched.
 */
#include "runtime/memlock.h"
#include "runtime/config.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define STACK_PREFAULT (256 * 1024)
#define PAGE 4096ul

/* Touches the stack below the caller, up to STACK_PREFAULT (less on a thread
 * whose stack is smaller, leaving 32 KiB); returns the lowest address
 * touched, and the stack's top in *top (0: unknown). */
__attribute__((noinline)) static uintptr_t prefault_stack(uintptr_t *top)
{
	size_t want = STACK_PREFAULT, room = want;
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	pthread_attr_t attr;
	void *lo;
	size_t size;

	*top = 0;
	if (!pthread_getattr_np(pthread_self(), &attr)) {
		if (!pthread_attr_getstack(&attr, &lo, &size)) {
			/* 0 where sp is on another stack: the runtime's, when a
			 * watched thread is chosen in the trampoline (rewrite mode) */
			room = sp > (uintptr_t)lo + 32768 && sp <= (uintptr_t)lo + size ? sp - (uintptr_t)lo - 32768 : 0;
			*top = (uintptr_t)lo + size;
		}
		pthread_attr_destroy(&attr);
	}
	if (*top && (sp < (uintptr_t)lo || sp >= *top)) {
		/* Not on the thread's stack: on the runtime's own, in the trap
		 * of a watched thread that a rule chose (threads.c).  The
		 * thread's stack holds the program's live frames above a point
		 * we do not know, so nothing is written there: its top part is
		 * only locked, which faults its pages in (mlock populates). */
		uintptr_t want_lo = *top > want + (uintptr_t)lo + 32768 ? *top - want : (uintptr_t)lo + 32768;
		return want_lo < *top ? want_lo : *top;
	}
	size_t n = room < want ? room : want;
	if (n < PAGE)
		return sp;
	char area[n];
	for (size_t i = 0; i < n; i += PAGE)
		((volatile char *)area)[i] = 0;
	__asm__ volatile("" : : "r"(area) : "memory");
	return (uintptr_t)area;
}

static int lock_range(uintptr_t lo, uintptr_t hi)
{
	lo &= ~(PAGE - 1);
	hi = (hi + PAGE - 1) & ~(PAGE - 1);
	return hi > lo && mlock((void *)lo, hi - lo) ? -errno : 0;
}

static bool holds(const struct dl_phdr_info *info, uintptr_t addr)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && addr >= lo && addr < lo + ph->p_memsz)
			return true;
	}
	return false;
}

/* dl_iterate_phdr: locks the loaded segments (code, data, bss) of the object
 * that holds this function, the runtime; 1 when done, -errno on failure. */
static int lock_runtime_segments(struct dl_phdr_info *info, size_t size, void *unused)
{
	(void)size; (void)unused;
	if (!holds(info, (uintptr_t)lock_runtime_segments))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		int err;
		if (ph->p_type == PT_LOAD && (err = lock_range(lo, lo + ph->p_memsz)))
			return err;
	}
	return 1;
}

static void lock_failed(const char *what, int err)
{
	static bool said;

	if (said)
		return;
	said = true;
	dt_warn("cannot lock %s (%s): the detached thread may take page faults "
		"on its CPU; NOTE: raise RLIMIT_MEMLOCK (ulimit -l) or run as root", what, strerror(-err));
}

/* The calling thread, about to be detached as t. */
void memlock_thread(struct dt_thread *t)
{
	static bool runtime_locked;
	uintptr_t lo, top;
	int err;

	if (dt_cfg.mlock == MLOCK_NONE)
		return;
	if (dt_cfg.mlock == MLOCK_ALL && mlockall(MCL_CURRENT | MCL_FUTURE))
		lock_failed("the program's memory (--mlock all)", -errno);
	lo = prefault_stack(&top);
	if (dt_cfg.mlock == MLOCK_ALL)
		return;
	if (top > lo && (err = lock_range(lo, top)))
		lock_failed("the detached thread's stack", err);
	else if (top > lo) {
		t->locked_lo = lo & ~(PAGE - 1);
		t->locked_hi = (top + PAGE - 1) & ~(PAGE - 1);
	}
	if ((err = lock_range((uintptr_t)t, (uintptr_t)t + sizeof(*t))))
		lock_failed("the detached thread's state", err);
	if (t->stack_hi && (err = lock_range(t->stack_lo, t->stack_hi)))   /* stays locked in the pool */
		lock_failed("the runtime's stack of the detached thread (stack.c)", err);
	if (t->stats && (err = lock_range((uintptr_t)t->stats, (uintptr_t)(t->stats + 1))))
		lock_failed("the detached thread's statistics", err);
	if (!__atomic_exchange_n(&runtime_locked, true, __ATOMIC_ACQ_REL) &&
	    (err = dl_iterate_phdr(lock_runtime_segments, NULL)) < 0)
		lock_failed("the runtime's code and data", err);
}

/* The thread exits or attaches again: its stack is the program's again
 * (glibc may cache it for the next thread).  Raw call: on exit this runs
 * inside the trap. */
void memlock_release(struct dt_thread *t)
{
	if (t->locked_hi > t->locked_lo)
		sys_call2(SYS_munlock, t->locked_lo, t->locked_hi - t->locked_lo);
	t->locked_lo = t->locked_hi = 0;
}
