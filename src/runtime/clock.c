/* Timed waits of a detached thread, in user space (the paper's L4 absolute
 * timeouts): clock_nanosleep, nanosleep, and select/poll/ppoll/pselect6
 * with no descriptors.  No Linux timer is armed and the thread never sleeps
 * in the kernel.
 *
 * The wait spins on the TSC toward a target computed from the clock the
 * call names, and ends only when that clock itself (read through the vDSO,
 * which needs no kernel entry with a TSC clocksource) says the deadline has
 * passed: so it never ends early, follows the clock's own steering (NTP),
 * and honours a jump of CLOCK_REALTIME within CHECK_NS, as Linux does for
 * an absolute CLOCK_REALTIME wait.  A signal handler that runs during the
 * wait (rt_sigreturn finds its frame inside the detach_wait section, see
 * signals.c) ends it with EINTR, as nanosleep and poll always do. */
#include "runtime/clock.h"
#include "runtime/config.h"
#include "runtime/cputime.h"
#include "runtime/uaccess.h"

#include <elf.h>
#include <errno.h>
#include <stddef.h>
#include <ucontext.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/personality.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>

#define CHECK_NS 20000          /* re-read the clock at least this often */
#define OFF_CPU_NS 20000             /* a wait loop's gap: not running (dt_cfg.off_cpu_cycles) */
/* A zero-timeout wait this soon after the last empty one is a busy-poll
 * (dt_cfg.busy_poll_gap_cycles; waits.c, fd_wait, says why 20 us) */
#define BUSY_POLL_GAP_NS 20000
/* A trapped sleep: the handler's wait ends this long before the deadline,
 * the rest is waited after its rt_sigreturn (clock_resume.S); longer than
 * the way back through the kernel takes but in its rarest tails. */
#define RESUME_NS 20000

static inline uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

/* The vDSO's clock_gettime, called directly: the kernel builds it without
 * vector instructions, so a timed wait runs in general registers alone and
 * the trampoline saves no vector state for it (dispatch_general_only): no
 * xrstor between the deadline and the program.  libc's wrapper otherwise. */
static int (*vdso_gettime)(clockid_t, struct timespec *);

void clock_init(void)
{
	const char *base = (const char *)getauxval(AT_SYSINFO_EHDR);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;

	dt_cfg.off_cpu_cycles = ns_to_tsc_cycles(&dt_cfg.tsc, OFF_CPU_NS);
	dt_cfg.busy_poll_gap_cycles = ns_to_tsc_cycles(&dt_cfg.tsc, BUSY_POLL_GAP_NS);

	if (!base || !eh->e_shoff)
		return;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(base + eh->e_shoff);
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(base + eh->e_phoff);
	for (int i = 0; i < eh->e_phnum; i++)      /* linked at 0, as x86's is */
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr != ph[i].p_offset)
			return;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum)
			continue;
		const Elf64_Sym *sym = (const Elf64_Sym *)(base + sh[i].sh_offset);
		const char *str = base + sh[sh[i].sh_link].sh_offset;
		for (size_t k = 0; k < sh[i].sh_size / sizeof(*sym); k++)
			if (sym[k].st_shndx != SHN_UNDEF && !strcmp(str + sym[k].st_name, "__vdso_clock_gettime"))
				vdso_gettime = (int (*)(clockid_t, struct timespec *))(base + sym[k].st_value);
	}
}

bool timed_wait_general_only(void)
{
	return vdso_gettime != NULL;
}

/* The clock, through the vDSO. */
static uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	if (vdso_gettime)
		vdso_gettime(clk, &ts);
	else
		clock_gettime(clk, &ts);
	return ts_ns(&ts);
}

bool timed_wait_clock_ok(clockid_t clk)
{
	return clk == CLOCK_MONOTONIC || clk == CLOCK_REALTIME || clk == CLOCK_BOOTTIME;
}

/* Until clk reads deadline_ns or later: 0; -EINTR if a handler ran (one
 * that returned into this loop, or, for a masked wait, any since its mask
 * was applied: masked, thread.h masked_wait_ended).  The
 * cycles it spun are the runtime's, not the program's CPU time (cputime.c):
 * counted in waited, less the gaps in which the thread did not run at all
 * (off: the kernel did not count them either; on a CPU it shares, counting
 * them would take more from the thread's CPU time than the wait cost it). */
__attribute__((noinline, section("detach_wait")))
static long wait_until(struct dt_thread *t, clockid_t clk, uint64_t deadline_ns, uint64_t masked)
{
	uint64_t hz = dt_cfg.tsc.hz, check = ns_to_tsc_cycles(&dt_cfg.tsc, CHECK_NS);
	uint64_t now = clock_ns(clk), c, target, next, c0, prev, off = 0;

	/* a CPU-time limit the runtime could not lift (cputime.c) */
	if (dt_cpu_limited && cputime_limited_sleep(clk, deadline_ns, &now))
		return -EINTR;
	c = c0 = rdtsc();

	for (;;) {
		if (now >= deadline_ns) {
			if (t)          /* not the program's CPU time (cputime.c) */
				t->stats->waited += c - c0 - off;
			return 0;
		}
		/* cycles to go, capped so that the product cannot overflow;
		 * counted from a TSC read after the clock's: the target is late
		 * by the tail of that read, never early, so that the read at the
		 * target finds the deadline passed */
		uint64_t left = deadline_ns - now;
		target = c + (left > 1000000000000ull ? 1000000000000ull : left) * hz / 1000000000ull;
		next = c + check;
		do {
			if (t && (t->intr_first || masked_wait_ended(t, masked))) {
				t->intr_first = 0;
				t->stats->waited += c - c0 - off;
				return -EINTR;
			}
			cpu_relax();
			prev = c;
			c = rdtsc();
			if (c - prev > dt_cfg.off_cpu_cycles)
				off += c - prev;
		} while (c < target && c < next);
		now = clock_ns(clk);
		prev = c;
		c = rdtsc();
		if (c - prev > dt_cfg.off_cpu_cycles)
			off += c - prev;
	}
}

long timed_wait_until(struct dt_thread *t, clockid_t clk, uint64_t deadline_ns)
{
	return wait_until(t, clk, deadline_ns, 0);
}

/* The program's timespec, read as the kernel reads it: EFAULT, EINVAL */
static long checked_ns(const struct timespec *uts, uint64_t *ns)
{
	struct timespec ts;

	if (copy_from_user(&ts, uts, sizeof(ts)))
		return -EFAULT;
	if (ts.tv_sec < 0 || ts.tv_nsec < 0 || ts.tv_nsec >= 1000000000l)
		return -EINVAL;
	*ns = ts_ns(&ts);
	return 0;
}

/* The time left until deadline on clk, for a sleep a handler ended: r
 * (-EINTR), or -EFAULT where rem cannot be written, as the kernel's. */
static long write_left(clockid_t clk, uint64_t deadline, struct timespec *rem, long r)
{
	uint64_t now = clock_ns(clk), left = now < deadline ? deadline - now : 0;
	struct timespec ts = { (time_t)(left / 1000000000ull), (long)(left % 1000000000ull) };

	return copy_to_user(rem, &ts, sizeof(ts)) ? -EFAULT : r;
}

/* select, ppoll and pselect6 write back the time left, as the kernel's
 * poll_select_finish does: not for a zero timeout, not when the thread's
 * personality has STICKY_TIMEOUTS, and where they cannot, it says nothing
 * of it. */
static void write_back(const struct dt_thread *t, uint64_t timeout_ns, void *u, const void *v, size_t n)
{
	if (timeout_ns && !(t->persona & STICKY_TIMEOUTS))
		(void)copy_to_user(u, v, n);
}

/* A timed wait's start (wait_begins, thread.h): the mark left before it
 * is not its interruption.  At depth 0 it is stale and goes.  At depth > 0
 * the wait is a handler's, made on top of a forwarded call, and the mark
 * may be that call's: the first handler returned into its wait_reply, and
 * a second signal, pending as that return ended, ran this handler before
 * wait_reply looked.  Natively the first signal decided the call's end
 * and this handler's sleep is a sleep of its own: so the mark is taken
 * aside for the length of the wait (the wait would take it as its own
 * interruption and end at once, and the call would end as this handler's
 * signal says) and put back by wait_back when it ends.  Taken with an
 * exchange: nothing can return into the outer wait while this runs, but
 * a handler on top of this one returns into code of ours. */
static uint32_t wait_aside(struct dt_thread *t)
{
	if (!t->depth) {
		t->intr_first = 0;
		return 0;
	}
	return __atomic_exchange_n(&t->intr_first, 0, __ATOMIC_RELAXED);
}

/* The end of a timed wait begun by wait_aside: the outer call's mark
 * back, over any this wait's handlers left (the outer one's was first,
 * and it decides, thread.h).  r: the wait's result. */
static long wait_back(struct dt_thread *t, uint32_t outer, long r)
{
	if (outer)
		t->intr_first = outer;
	return r;
}

extern const char dt_wait_resume[] DT_HIDDEN;

/* Whether the sleep that trapped with frame uc may end after the trap's
 * return, in dt_wait_resume: only the vDSO's clock is read there (no
 * vector register is saved), and it runs on the trampoline's half of the
 * runtime's stack, which must be free (clock_resume.S). */
static bool can_resume(const struct dt_thread *t, const ucontext_t *uc)
{
	if (!uc || !vdso_gettime || t->depth > 0 || t->vfork_child || !t->stack_hi)
		return false;
	/* the thread's own stack: neither ours nor the alternate one */
	return stack_of(t, (uintptr_t)uc->uc_mcontext.gregs[REG_RSP]) == 0;
}

/* clock_nanosleep(clk, flags, req, rem); nanosleep(req, rem) is
 * clock_nanosleep(CLOCK_MONOTONIC, 0, req, rem).  uc: the trap's frame
 * (NULL through a rewritten site).  The wait ends as close to the program
 * as it can, so that no way back lies between the deadline and the
 * program: a return after an interrupt (the tick, a host's exit) finds the
 * return-address predictor overwritten, and each `ret` between the end of
 * the wait and the program is then a mispredicted branch.  So the wait
 * here stops RESUME_NS before the deadline and leaves the rest:
 *   a trapped sleep to dt_wait_resume, where the frame resumes, with the
 *   record below the program's red zone (the program's stack is free
 *   memory there): the kernel's rt_sigreturn is before it;
 *   a rewritten site's sleep to the trampoline's tail, in the record of
 *   its frame (t->wait_tail): the C calls of the dispatch are before it. */
long timed_sleep(struct dt_thread *t, clockid_t clk, int flags, const struct timespec *req,
		 struct timespec *rem, ucontext_t *uc)
{
	uint64_t ns, start = clock_ns(clk), deadline;
	uint32_t outer = wait_aside(t);
	long r;

	if ((r = checked_ns(req, &ns)))
		return wait_back(t, outer, r);
	deadline = (flags & TIMER_ABSTIME) ? ns : start + ns;
	if (can_resume(t, uc)) {
		greg_t *g = uc->uc_mcontext.gregs;
		r = timed_wait_until(t, clk, deadline > RESUME_NS ? deadline - RESUME_NS : 0);
		if (r == 0) {
			struct wait_record *w = (struct wait_record *)(g[REG_RSP] - RED_ZONE) - 1;
			w->clk = clk;
			w->rem = flags & TIMER_ABSTIME ? NULL : rem;
			w->deadline = deadline;
			w->rip = (uintptr_t)g[REG_RIP];
			w->ret_to = 0;  /* the way back is a jump (clock_resume.S) */
			g[REG_RSP] = (greg_t)w;
			g[REG_RIP] = (greg_t)dt_wait_resume;
			return 0;       /* rax: dt_wait_resume's result replaces it */
		}
	} else if (!uc && t->wait_tail && !t->depth) {
		/* not a handler's on top of a forwarded call (depth > 0): the
		 * tail (clock_resume.S, dt_wait_ended) runs after this returns,
		 * and the outer call's mark is put back before it (wait_back) */
		r = timed_wait_until(t, clk, deadline > RESUME_NS ? deadline - RESUME_NS : 0);
		if (r == 0) {
			struct wait_record *w = t->wait_tail;
			w->rem = flags & TIMER_ABSTIME ? NULL : rem;
			w->deadline = deadline;
			w->clk = clk;   /* >= 0: the trampoline's tail waits */
			return 0;       /* the tail's result replaces it */
		}
	} else {
		r = timed_wait_until(t, clk, deadline);
	}
	if (r == -EINTR && !(flags & TIMER_ABSTIME) && rem)
		r = write_left(clk, deadline, rem, r);
	return wait_back(t, outer, r);
}

/* A sleep's last stretch is a spin on the TSC in dt_wait_end's own frame
 * (clock_resume.S), with no C frame to return from after it.  It lasts this
 * long: more than the way out of the C code and the rehearsal of the return
 * before it take even after an interrupt (a few hundred ns), and short
 * enough that an interrupt rarely lands in it (the tick is 4 ms apart). */
#define LAST_NS 2000

/* The rest of a sleep (dt_wait_end), up to its last stretch: 0, with
 * w->tsc_end the TSC at which clk should read the deadline; or -EINTR if a
 * handler ran.  tsc_end is counted from a TSC read after the clock's, so it
 * is late by the tail of that read, never early; and dt_wait_end still
 * asks the clock (timed_wait_finish) before the wait ends.  A clock that
 * reads far from where LAST_NS puts it (CLOCK_REALTIME set meanwhile)
 * leaves no stretch: timed_wait_finish waits in C, reading the clock as it
 * goes. */
long timed_wait_approach(struct dt_thread *t, struct wait_record *w)
{
	clockid_t clk = (clockid_t)w->clk;
	long r = timed_wait_until(t, clk, w->deadline > LAST_NS ? w->deadline - LAST_NS : 0);
	uint64_t now, c, left;

	if (r) {
		if (w->rem)
			r = write_left(clk, w->deadline, w->rem, r);
		return r;
	}
	now = clock_ns(clk);
	c = rdtsc();
	left = w->deadline > now ? w->deadline - now : 0;
	w->tsc_end = c + (left <= 2 * LAST_NS ? ns_to_tsc_cycles(&dt_cfg.tsc, left) : 0);
	/* the stretch, not the program's CPU time: counted ahead, so that
	 * nothing but the clock's read lies on the way back after it */
	t->stats->waited += w->tsc_end - c;
	return 0;
}

/* timed_wait_finish's other cases, out of line: a handler that ran during
 * the stretch, or just before it, ends the sleep with EINTR, as inside
 * timed_wait_until; a deadline not yet passed is waited for there. */
__attribute__((noinline))
static long finish_rest(struct dt_thread *t, const struct wait_record *w, uint64_t spun_to)
{
	clockid_t clk = (clockid_t)w->clk;
	long r;

	if (t->intr_first) {
		t->intr_first = 0;
		r = -EINTR;
		if (w->ret_to && spun_to < w->tsc_end)  /* counted ahead, not waited */
			t->stats->waited -= w->tsc_end - spun_to;
	} else if (clock_ns(clk) >= w->deadline) {
		return 0;
	} else {
		r = timed_wait_until(t, clk, w->deadline);
	}
	if (r == -EINTR && w->rem)
		r = write_left(clk, w->deadline, w->rem, r);
	return r;
}

/* After the last stretch, or for the whole rest where there is none
 * (dt_wait_end; spun_to: the stretch's last TSC read, which a handler may
 * have cut short): the clock itself says whether the deadline has passed.
 * Nothing but the clock's read between the stretch and the program:
 * timed_wait_until computes its TSC rates before it reads the clock.  The
 * common case, no handler and the deadline passed, is the straight line at
 * the function's start, which dt_wait_end fetches before the stretch (the
 * first two cache lines: aligned to one); the rest is finish_rest's.  The
 * call's result. */
__attribute__((aligned(64)))
long timed_wait_finish(struct dt_thread *t, const struct wait_record *w, uint64_t spun_to)
{
	if (__builtin_expect(!t->intr_first, 1) && clock_ns((clockid_t)w->clk) >= w->deadline)
		return 0;
	return finish_rest(t, w, spun_to);
}

/* poll/select with nothing to wait for: a sleep of timeout (NULL or < 0:
 * until a signal), on CLOCK_MONOTONIC; 0 when it runs out.  select writes
 * back the time left, as Linux's does. */
long timed_poll(struct dt_thread *t, long timeout_ms)
{
	uint32_t outer = wait_aside(t);

	if (timeout_ms < 0)
		return wait_back(t, outer, timed_wait_until(t, CLOCK_MONOTONIC, UINT64_MAX));
	return wait_back(t, outer, timed_wait_until(t, CLOCK_MONOTONIC,
						    clock_ns(CLOCK_MONOTONIC) + (uint64_t)timeout_ms * 1000000ull));
}

long timed_select(struct dt_thread *t, struct timeval *tv)
{
	uint64_t deadline, now;
	uint32_t outer = wait_aside(t);
	struct timeval v;
	long r;

	if (!tv)
		return wait_back(t, outer, timed_wait_until(t, CLOCK_MONOTONIC, UINT64_MAX));
	if (copy_from_user(&v, tv, sizeof(v)))
		return wait_back(t, outer, -EFAULT);
	if (v.tv_sec < 0 || v.tv_usec < 0)
		return wait_back(t, outer, -EINVAL);
	uint64_t ns = (uint64_t)v.tv_sec * 1000000000ull + (uint64_t)v.tv_usec * 1000ull;
	deadline = clock_ns(CLOCK_MONOTONIC) + ns;
	r = timed_wait_until(t, CLOCK_MONOTONIC, deadline);
	now = clock_ns(CLOCK_MONOTONIC);
	uint64_t left = now < deadline ? deadline - now : 0;
	v.tv_sec = (time_t)(left / 1000000000ull);
	v.tv_usec = (suseconds_t)(left % 1000000000ull / 1000);
	write_back(t, ns, tv, &v, sizeof(v));
	return wait_back(t, outer, r);
}

/* ppoll and pselect6 take a timespec and, like the kernel's, write back
 * the time left.  masked: the wait's record of handler_returns from before
 * its mask was applied (waits.c; 0: no mask), for the handler that runs
 * between the mask and this wait (thread.h, masked_wait_ended). */
long timed_ppoll(struct dt_thread *t, struct timespec *ts, uint64_t masked)
{
	uint64_t ns, deadline, now, left;
	uint32_t outer = wait_aside(t);
	long r;

	if (!ts)
		return wait_back(t, outer, wait_until(t, CLOCK_MONOTONIC, UINT64_MAX, masked));
	if ((r = checked_ns(ts, &ns)))
		return wait_back(t, outer, r);
	deadline = clock_ns(CLOCK_MONOTONIC) + ns;
	r = wait_until(t, CLOCK_MONOTONIC, deadline, masked);
	now = clock_ns(CLOCK_MONOTONIC);
	left = now < deadline ? deadline - now : 0;
	struct timespec v = { (time_t)(left / 1000000000ull), (long)(left % 1000000000ull) };
	write_back(t, ns, ts, &v, sizeof(v));
	return wait_back(t, outer, r);
}
