/* The proxy: one helper thread per detached thread, on the housekeeping
 * CPUs, that carries out the detached thread's system calls.
 *
 * Hand-over through struct mailbox (thread.h): the detached thread writes
 * the call and bumps req_seq; the proxy sees it, runs the call, writes ret
 * and bumps done_seq.  Both sides wait by polling, so the detached thread
 * never enters the kernel to wait for its proxy, nor to wake it but after
 * a pause of ADAPTIVE_SLEEP_AFTER_NS without a call, when an adaptive proxy
 * sleeps in the kernel (sleep_until_called) and the pause's first call costs
 * the detached thread one futex wake; a sleeping proxy (--proxy sleep) does
 * so after every pause longer than SLEEP_SPIN_NS.
 *
 * Signals: a proxy blocks every signal but SIGSYS (the runtime's interrupt)
 * and glibc's SIGSETXID, so the program's handlers never run on it and
 * setuid() & co. still reach it as they reach every thread glibc knows;
 * SIGTTIN and SIGTTOU it blocks as its detached thread does
 * (tty_signals_follow), and takes them to its detached thread where the
 * program has a handler for them (proxy_tty_signal_taken).
 * A signal handled by the detached thread while it waits interrupts the
 * proxy's call with the handler's SA_RESTART semantics (interrupt_wished).
 */
#include "runtime/proxy.h"
#include "runtime/config.h"
#include "runtime/placement.h"
#include "runtime/sud.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#define SIGSETXID 33                  /* glibc's __SIGRTMIN + 1 */
#define ADAPTIVE_SPIN_NS 100000       /* spin this long after each call ... */
#define ADAPTIVE_SHORT_NS 50000       /* ... then poll every 50 us ... */
#define ADAPTIVE_SHORT_FOR_NS 10000000 /* ... for 10 ms, then every 1 ms ... */
#define ADAPTIVE_LONG_NS 1000000
#define ADAPTIVE_SLEEP_AFTER_NS 100000000 /* ... and after 100 ms, sleep until called */
/* --proxy sleep: spin this long after each call (the program's next call of
 * a burst, a busy-poll's next bounded wait), then sleep until called.  For a
 * housekeeping CPU that runs the program's or another job's work (an MPI
 * rank beside a detached one): an adaptive proxy's spins and 50 us polls
 * took a quarter of that CPU and slowed the rank there by half (docs/mpi.md) */
#define SLEEP_SPIN_NS 5000

__thread bool dt_is_proxy DT_HIDDEN;
_Atomic uint64_t dt_tty_handled DT_HIDDEN;
static __thread struct dt_thread *proxy_of;
/* a SIGTTIN or SIGTTOU of the program's handler taken here during a call,
 * and its siginfo (proxy_tty_signal_taken) */
static __thread int tty_taken;
static __thread siginfo_t tty_taken_info;
/* an interrupt asking for EINTR (or a cancel) taken on top of a SIGTTIN or
 * SIGTTOU frame not yet run (proxy_interrupt_taken) */
static __thread bool tty_intr;
uintptr_t dt_tty_entry;
static const struct proxy_hooks *hooks;

void proxy_hooks_set(const struct proxy_hooks *h)
{
	hooks = h;
}

/* Orders the argument stores before the sequence store that publishes them
 * (x86 keeps stores in order; the release stops the compiler reordering). */
static inline void publish(volatile uint64_t *seq, uint64_t v)
{
	atomic_store_explicit((_Atomic uint64_t *)seq, v, memory_order_release);
}

static inline uint64_t observe(volatile uint64_t *seq)
{
	return atomic_load_explicit((_Atomic uint64_t *)seq, memory_order_acquire);
}

/* Signal fence: a handler running on this same thread must see depth
 * raised before the mailbox is touched; no CPU ordering is needed. */
#define same_thread_barrier() atomic_signal_fence(memory_order_seq_cst)

/* depth++ in one instruction, returning what depth was: a signal of this
 * thread is taken before the instruction or after it (at an instruction
 * boundary), never between a load of depth and its store, so a handler's
 * call cannot slip in between the test and the raise (or between a
 * load and a store of a compiled depth++).  Not locked: only this thread
 * writes depth, its handlers included, and against those one instruction
 * is enough; a lock prefix would cost some 20 cycles at every forwarded
 * call.  "memory": no access moves across it (it is the fence the old
 * test and increment had). */
static inline int depth_raise(struct dt_thread *t)
{
	int old = 1;

	__asm__ volatile("xaddl %0, %1" : "+r"(old), "+m"(t->depth) : : "memory", "cc");
	return old;
}

/* wait_frame = outer, if wait_frame still holds mine, in one instruction:
 * a non-locked cmpxchg (atomic against a signal of this thread, as
 * dt_app_restorer's cmpxchgl, stubs.S; not locked for the same reason as
 * depth_raise).  A handler's call that ended put mine back; one that a
 * second handler abandoned by siglongjmp into the first left its own frame
 * and depth 1, and that frame must stay for forget_abandoned to cancel it.
 * "memory": the store stays after depth--. */
static inline void wait_frame_back(struct dt_thread *t, uintptr_t mine, uintptr_t outer)
{
	__asm__ volatile("cmpxchgq %2, %1" : "+a"(mine), "+m"(t->wait_frame) : "r"(outer) : "memory", "cc");
}

/* ---- detached thread side ----------------------------------------------- */

/* Interrupts the proxy's call as the signal whose handler just ran here
 * would have interrupted ours (signal(7)): want is INTR_EINTR for a handler
 * without SA_RESTART, INTR_RESTART for one with it, INTR_CANCEL for a call
 * its caller abandoned.  The proxy's kernel decides what an interrupt does
 * to the call it is in (a call that cannot block completes; poll, nanosleep
 * and the like end with EINTR whatever the flags), and the proxy's handler
 * applies the wish (proxy_interrupt_taken).  A wish only ever gets
 * stronger (CANCEL < EINTR < RESTART): a call whose wish is EINTR had
 * ended natively, whatever handlers come after; one whose wish is RESTART,
 * hit again by a handler without SA_RESTART after the wait looked, had
 * been entered again natively, and that handler ends it.  The signal path
 * only: its kernel entries cost nothing in steady state. */
static void signal_proxy(struct dt_thread *t)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = SIGSYS;
	si.si_code = SI_QUEUE;        /* < 0: allowed between our own threads */
	si.si_pid = dt_cfg.pid;       /* how the proxy recognizes us */
	sys_call4(SYS_rt_tgsigqueueinfo, dt_cfg.pid, t->proxy_tid, SIGSYS, &si);
}

/* The wish, stronger only (above) */
static void interrupt_wish(struct dt_thread *t, uint8_t want)
{
	if (t->mb.intr == INTR_NONE || want < t->mb.intr)
		t->mb.intr = want;
}

/* Sends the wish as it stands (interrupt_wish) */
static void interrupt_send(struct dt_thread *t)
{
	t->mb.intr_sent++;
	/* a system call: orders the stores of the wish and of intr_sent
	 * before the proxy's handler reads them */
	signal_proxy(t);
}

static void send_interrupt(struct dt_thread *t, uint8_t want)
{
	interrupt_wish(t, want);
	interrupt_send(t);
}

/* An interrupt not acknowledged after this long is sent again (ack_late). */
#define INTERRUPT_LATE_NS 10000000
static uint64_t interrupt_late_cycles;

/* The proxy's acknowledgment of the interrupts sent (intr_ack) is late by
 * INTERRUPT_LATE_NS since *since (0: it was not late at the last look):
 * the interrupt is sent again, and counted (interrupts_resent).  A safety
 * net, not a path: runs of a 20 us SIGALRM storm (run_rewrite_signals) hung,
 * about one process in several thousand, in the wait of a handler's own
 * call with the reply in and one interrupt never acknowledged, though no
 * SIGSYS was pending on the proxy; how is not known.  Sending it again is
 * harmless: the proxy applies the call's wish as it stands and acknowledges
 * every interrupt sent so far (proxy_interrupt_taken), and a proxy merely
 * slow to run (a loaded machine) takes two signals for one. */
static void ack_late(struct dt_thread *t, uint64_t now, uint64_t *since)
{
	if (t->mb.intr_ack == t->mb.intr_sent) {
		*since = 0;
	} else if (!*since) {
		*since = now;
	} else if (now - *since > interrupt_late_cycles) {
		signal_proxy(t);
		t->stats->interrupts_resent++;
		*since = now;
	}
}

/* Handlers of the program ran on top of wait_reply since it last looked:
 * the first of them decides, as natively (intr_first, thread.h); its
 * SA_RESTART is read now, not at its delivery (a handler that changed its
 * own action decides by the new flags).  Taken with an exchange, one
 * instruction: a handler that returns into the wait between a read and a
 * clear would be lost. */
static bool interrupt_wished(struct dt_thread *t)
{
	int signo = (int)__atomic_exchange_n(&t->intr_first, 0, __ATOMIC_RELAXED);
	struct ksigaction ka = { 0 };

	/* the wait saw a mark, but a handler that ran on top of it since
	 * consumed it (a timed wait of its own, clock.c) and left none (its
	 * frame carries no signal number, signals.c): no wish */
	if (!signo)
		return false;
	sys_call4(SYS_rt_sigaction, signo, NULL, &ka, 8);
	interrupt_wish(t, ka.flags & SA_RESTART ? INTR_RESTART : INTR_EINTR);
	return true;
}

/* The detached thread's wait for its proxy.  Its own section: the rip of a
 * signal frame inside [__start_detach_wait, __stop_detach_wait) says that a
 * handler interrupted a forwarded call.
 *
 * Only a call still in flight is interrupted.  One that has ended had ended
 * before the handler as far as the program can tell (natively the signal
 * came just after it), and an interrupt sent then only makes the wait
 * longer: it must be acknowledged before we return, and under a signal
 * storm each handler that runs during that wait sent another one (a 20 us
 * SIGALRM on a loaded machine: 1,820 interrupts a run, 1,037 without them).
 * Nor is a command of the runtime's (nr < 0): it is no call of the
 * program's, and after QUIT or RETIRE the proxy is exiting, where an
 * interrupt may arrive after its last return to user space and never be
 * acknowledged. */
/* The proxy answered a later call than the one this wait is for: a handler
 * on top of it published its own call through the mailbox while this one
 * was in flight (its depth was wrong), and this wait would never end. */
__attribute__((noinline, cold, noreturn))
static void wait_overtaken(const struct dt_thread *t, uint64_t seq)
{
	dt_die("the wait for forwarded call %lu was overtaken by call %lu (depth %d): "
	       "results can no longer be trusted", (unsigned long)seq, (unsigned long)t->mb.done_seq, t->depth);
}

/* The calls whose interruption by a handled signal ends them with EINTR
 * whatever SA_RESTART says (signal(7); the kernel's -ERESTARTNOHAND,
 * -ERESTART_RESTARTBLOCK or a plain -EINTR). */
static bool never_restarted(long nr)
{
	switch (nr) {
	case SYS_poll: case SYS_ppoll: case SYS_select: case SYS_pselect6:
	case SYS_epoll_wait: case SYS_epoll_pwait: case SYS_epoll_pwait2:
	case SYS_nanosleep: case SYS_clock_nanosleep: case SYS_pause:
	case SYS_rt_sigsuspend: case SYS_rt_sigtimedwait:
	case SYS_io_getevents: case SYS_io_pgetevents:
	case SYS_msgrcv: case SYS_msgsnd: case SYS_semop: case SYS_semtimedop:
		return true;
	}
	return false;
}

/* The signal number of a handler of the program's that returned into a
 * wait_reply on a thread that is not t's (dt_self NULL: stubs.S,
 * dt_app_restorer): a fork child made by that handler; 0: none. */
__thread volatile uint32_t dt_orphan_intr;

/* wait_reply on a thread that is not t's: a fork child made by a handler
 * of the program's that ran on top of the wait (or in proxy_forward before
 * it), returned from that handler into its own copy of the wait.  No proxy
 * answers that copy: it waited for ever, at 100% CPU.  Natively the child
 * resumes the interrupted call as the parent does: entered again after a
 * handler with SA_RESTART, ended with EINTR after one without (or after
 * any, for a call that is never restarted, and for a masked wait); a call
 * no handler interrupted (the fork came before the call was published) is
 * made.  So the child decides it as the kernel would have, and makes the
 * call itself: it is no detached thread (lifecycle.c, dt_fork_child), its
 * calls run natively.  The first handler decides (thread.h, intr_first):
 * the copy's own mark (an earlier handler the parent's wait had not looked
 * at yet), else the forking handler's (dt_orphan_intr; or the new detached
 * thread's mark, when the `fork` rule detached the child in its fork
 * handlers); a wish the parent's wait already sent (mb.intr: EINTR, or a
 * masked wait's CANCEL) had ended the call.  What the parent's proxy left
 * in the copy is the parent's (a raised signal, a held terminal signal): cleared,
 * so that proxy_forward's way out sends nothing to the parent's thread. */
__attribute__((noinline, cold))
static long wait_orphaned(struct dt_thread *t)
{
	struct dt_thread *now = dt_self;
	uint32_t signo = __atomic_exchange_n(&t->intr_first, 0, __ATOMIC_RELAXED);
	uint32_t forker = __atomic_exchange_n(&dt_orphan_intr, 0, __ATOMIC_RELAXED);
	uint8_t wish = t->mb.intr;
	long nr = t->mb.nr, *a = t->mb.args;
	struct ksigaction ka = { 0 };

	if (!forker && now)
		forker = __atomic_exchange_n(&now->intr_first, 0, __ATOMIC_RELAXED);
	if (!signo)
		signo = forker;
	t->mb.intr = INTR_NONE;
	t->mb.raised = 0;
	t->tty_held = 0;
	if (nr < 0)                     /* a command of the runtime's: the parent's */
		return 0;
	if (wish == INTR_EINTR || wish == INTR_CANCEL)
		return -EINTR;
	if (signo) {
		if (never_restarted(nr) || masked_wait_since(t, nr))
			return -EINTR;
		sys_call4(SYS_rt_sigaction, signo, NULL, &ka, 8);
		if (!(ka.flags & SA_RESTART))
			return -EINTR;
	}
	return sys_call6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

__attribute__((noinline, section("detach_wait")))
static long wait_reply(struct dt_thread *t, uint64_t seq, uint64_t *off)
{
	uint64_t c = rdtsc(), prev, late = 0;
	/* a handler's wish is in mb.intr, its interrupt not sent yet */
	bool owed = false;
	/* a masked wait's (waits.c): any handler since its mask cancels it */
	uint64_t masked = masked_wait_since(t, t->mb.nr);
	/* dt_self's address, once: the loop reads it with one load (volatile:
	 * a handler that runs on top of the loop, a fork's, changes it) */
	struct dt_thread *volatile *self = (struct dt_thread *volatile *)&dt_self;

	/* an address the compiler no longer knows for dt_self's: it would
	 * fold it back into a GOT load of the offset at every turn */
	__asm__("" : "+r"(self));

	while (observe(&t->mb.done_seq) != seq || t->mb.intr_ack != t->mb.intr_sent) {
		/* a fork child's copy of the wait (wait_orphaned): one load
		 * and a compare */
		if (__builtin_expect(*self != t, 0))
			return wait_orphaned(t);
		if ((int64_t)(observe(&t->mb.done_seq) - seq) > 0)
			wait_overtaken(t, seq);
		/* ppoll, pselect6 and epoll_pwait end with EINTR whatever
		 * SA_RESTART says, and one the proxy has not entered yet must
		 * not be (INTR_EINTR would let it start after the handler and
		 * wait for the signal it already took): INTR_CANCEL.  Once. */
		if (masked_wait_ended(t, masked)) {
			masked = 0;
			t->intr_first = 0;
			if (observe(&t->mb.done_seq) != seq)
				send_interrupt(t, INTR_CANCEL);
		}
		/* One interrupt in flight at a time: a handler's interrupt
		 * waits until the proxy has taken the one before.
		 * Our SIGSYS is SA_NODEFER, so each interrupt sent after the
		 * proxy's kernel took the one before and before the handler it
		 * set up ran is delivered on top of it, at its first
		 * instruction; a handler here for every tick of a 100 us
		 * timer, while each delivery to the proxy waited for a tracer
		 * (`strace -f --seccomp-bpf`: a signal-delivery stop each),
		 * nested 83 frames of SIGSYS there without one handler run,
		 * until the proxy's stack ran out (SIGSEGV, SI_KERNEL).  The
		 * proxy's handler takes the wish as it finds it and
		 * acknowledges last.  So the mark is taken into the wish at
		 * every look (a later handler's stronger wish, EINTR after
		 * RESTART, is not lost: the mark is set only while it is 0)
		 * and only the interrupt waits: one wish taken after the
		 * proxy's handler read it is the next interrupt's. */
		if (t->intr_first) {
			if (t->mb.nr < 0 || observe(&t->mb.done_seq) == seq)
				t->intr_first = 0;
			else
				owed |= interrupt_wished(t);
		}
		if (owed && t->mb.intr_ack == t->mb.intr_sent) {
			owed = false;
			if (observe(&t->mb.done_seq) != seq)
				interrupt_send(t);
		}
		cpu_relax();
		/* a gap: the thread did not run (dt_cfg.off_cpu_cycles) */
		prev = c;
		c = rdtsc();
		if (c - prev > dt_cfg.off_cpu_cycles)
			*off += c - prev;
		ack_late(t, c, &late);
	}
	return t->mb.ret;
}

/* The call ended (or was abandoned): a signal of the terminal this thread
 * held during it (signals.c, tty_hold) is delivered now, as it comes after
 * the result, unless the proxy took the same one (raised): the call raised
 * it again, and that one is delivered in its place.  After depth is down:
 * its handler's calls are forwarded as usual. */
static void tty_held_deliver(struct dt_thread *t, int raised)
{
	int held = t->tty_held;
	siginfo_t info;

	if (!held)
		return;
	info = t->tty_held_info;
	t->tty_held = 0;
	if (held != raised)
		sys_call4(SYS_rt_tgsigqueueinfo, dt_cfg.pid, t->tid, held, &info);
}

/* A handler that siglongjmp'd out of our wait (the alarm-and-longjmp read
 * timeout idiom) left the forwarded call behind: natively the signal would
 * have interrupted it.  Interrupt it now, without restart, and wait until
 * the proxy is free again. */
void proxy_abandoned(struct dt_thread *t)
{
	uint64_t late = 0;

	send_interrupt(t, INTR_CANCEL);
	while (observe(&t->mb.done_seq) != t->mb.req_seq || t->mb.intr_ack != t->mb.intr_sent) {
		cpu_relax();
		ack_late(t, rdtsc(), &late);
	}
	t->mb.intr = INTR_NONE;
	t->intr_first = 0;
	t->depth = 0;
	same_thread_barrier();
	tty_held_deliver(t, 0);
}

long proxy_forward(struct dt_thread *t, long nr, const long a[6])
{
	struct mailbox *mb = &t->mb;
	/* The frame of a wait we run inside of: a handler that runs between
	 * its caller's store of wait_frame and its depth++ (depth still 0)
	 * forwards its own call through here, and its frame, below the
	 * caller's, must not outlive it.  Left there, a second handler's call
	 * made where the first one's was (the same rsp: after the caller's
	 * wait_reply returned) found its frame at that stale wait frame and
	 * took the caller's finished call for abandoned: depth went to -1,
	 * and the next handler's getpid shared the mailbox with the call it
	 * interrupted (run_rewrite_signals: getppid returned the pid, about
	 * one process in 1,700 beside a loaded CPU; run_wait_frame_window
	 * makes the window with a tracer every time). */
	const uintptr_t outer_frame = t->wait_frame;
	uint64_t seq;
	int32_t raised;
	long r;

again:
	wait_begins(t);
	/* where this wait's frame is: a later call from above it means the
	 * wait was abandoned (forward(), dispatch.h) */
	t->wait_frame = (uintptr_t)__builtin_frame_address(0);
	/* the frame before depth: a handler that sees depth up judges its
	 * call by it (depth is volatile, wait_frame not: without the fence
	 * the compiler may store them the other way round) */
	same_thread_barrier();
	/* Entered at depth 0 (forward() and the other callers make sure of
	 * it), so a depth found up here is a handler's call, forwarded in a
	 * window before the raise, whose wait a second handler left by
	 * siglongjmp into the first: still on the proxy.  Natively that signal
	 * interrupted it; cancelled now (proxy_abandoned puts depth to 0, which
	 * undoes this raise too), and this call starts again, not queued
	 * behind it.  The test is the raise's own result: with a test and a
	 * raise apart, a handler that ran between the two left its abandoned
	 * call unseen, and this call waited behind it (a hang behind a read)
	 * with depth stuck at 1 afterwards. */
	if (__builtin_expect(depth_raise(t) != 0, 0)) {
		proxy_abandoned(t);
		goto again;
	}
	/* The frame again, now that depth is up (one store; same line as
	 * depth): a handler's call made in the window before the raise, left
	 * there by a second handler's siglongjmp, and cancelled by a later
	 * call of the first handler's (forget_abandoned) put back the frame
	 * of the abandoned call, which it found as its outer, not ours; kept,
	 * a handler on top of our wait would judge its call by that stale
	 * frame and could take our call for abandoned. */
	t->wait_frame = (uintptr_t)__builtin_frame_address(0);
	/* From here on a handler that interrupts us runs its calls locally
	 * (forward()) and leaves the mailbox alone; one that ran before
	 * forwarded its call through it, with the next sequence number.  So
	 * the number is read only now: read before depth was raised, it was
	 * that handler's too, our publish changed nothing, and its reply (a
	 * SIGALRM handler's getpid) became ours (a uname returned the pid). */
	same_thread_barrier();
	seq = mb->req_seq + 1;
	mb->nr = nr;
	for (int i = 0; i < 6; i++)
		mb->args[i] = a[i];
	/* Sequentially consistent (xchg): the store must be visible before
	 * proxy_asleep is read, as the proxy's store of proxy_asleep is before
	 * its read of req_seq (sleep_until_called): one of the two sees the
	 * other's, so a proxy never sleeps on a request nobody wakes it for.
	 * It also orders the argument stores before it, as publish() does. */
	atomic_store_explicit((_Atomic uint64_t *)&mb->req_seq, seq, memory_order_seq_cst);
	if (mb->proxy_asleep)
		/* the first call after a long pause: a kernel entry here, once
		 * (the proxy clears the flag before it answers) */
		sys_call3(SYS_futex, &mb->req_seq, FUTEX_WAKE_PRIVATE, 1);
	uint64_t t0 = rdtsc(), off = 0; /* the wait is not the program's CPU time (cputime.c) */
	r = wait_reply(t, seq, &off);
	t->stats->waited += rdtsc() - t0 - off;
	/* Cleared only where set (a handler's interrupt): the proxy reads
	 * this line at every call (sys_proxy_call's check), so a store here
	 * at every call took it from the proxy's cache and back, a third
	 * cache line crossing the CPUs per call beside the mailbox's two.
	 * Only this thread writes intr (send_interrupt, from wait_reply or
	 * proxy_abandoned), so the read sees its last store. */
	uint8_t wish = mb->intr;
	if (wish != INTR_NONE)
		mb->intr = INTR_NONE;
	/* ours: once depth is down, a handler's call may reuse the mailbox,
	 * and the proxy may write its own raised signal's info */
	raised = mb->raised;
	siginfo_t info;
	if (raised)
		info = t->raised_info;
	same_thread_barrier();
	t->depth--;
	/* Below 0 only if a call was taken for abandoned that was not: its
	 * wait came back here.  Every later handler's call would then share
	 * the mailbox with the call it interrupted and take its reply. */
	if (t->depth < 0)
		dt_die("a forwarded call was taken for abandoned while its wait went on "
		       "(system call %ld, depth %d): results can no longer be trusted", nr, t->depth);
	/* after depth is down: with depth up, a handler judges its call by
	 * wait_frame, which must be this wait's until then.  Only if it is
	 * still this wait's: a handler that ran since depth-- forwarded its
	 * own call, and a second handler's siglongjmp out of that call's wait
	 * into the first left it on the proxy, with depth 1 and its frame
	 * here; overwritten, forget_abandoned no longer found it abandoned,
	 * it stayed on the proxy and every later call ran on this thread. */
	wait_frame_back(t, (uintptr_t)__builtin_frame_address(0), outer_frame);
	/* The common way out, spelt out: the compiler does not thread the
	 * tests of raised below across wait_frame_back's asm, and every call
	 * paid for them (seven instructions) */
	if (__builtin_expect(!raised, 1)) {
		tty_held_deliver(t, 0);
		return r;
	}
	bool tty = raised == SIGTTIN || raised == SIGTTOU;
	if (tty && (r == -PROXY_ERESTART || r == -EINTR) && wish != INTR_EINTR && wish != INTR_CANCEL) {
		uint64_t blocked = 0;
		/* This thread blocks it after all: a mask the kernel applied
		 * without a call the runtime saw (a handler's sa_mask), so the
		 * record the proxy followed was stale.  The signal ended the
		 * call before anything was transferred, whether the kernel was
		 * to restart it (PROXY_ERESTART) or it ended with EINTR (a
		 * handler without SA_RESTART); no handler of this thread asked
		 * for EINTR (wish).  Natively the kernel had judged the call by
		 * this mask (EIO, or the write goes through): the call is made
		 * again under the corrected record.  The terminal's signal
		 * (SI_KERNEL: kill_pgrp's SEND_SIG_PRIV, tty_jobctrl.c) was
		 * natively not raised: not delivered; one sent by a process
		 * (kill -TTIN) natively stays pending, blocked: sent to this
		 * thread, where it does.  The signal path only. */
		sys_call4(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &blocked, 8);
		if (blocked & (1ull << (raised - 1))) {
			t->mb.tty_blocked = blocked & TTY_SIGNALS;
			if (info.si_code != SI_KERNEL)
				sys_call4(SYS_rt_tgsigqueueinfo, dt_cfg.pid, t->tid, raised, &info);
			goto again;
		}
	}
	/* The terminal's SIGTTIN or SIGTTOU ended the call on the proxy
	 * (proxy_tty_signal_taken), and its handler runs here next: natively
	 * the kernel enters the call again after the handler if the action
	 * had SA_RESTART when the signal was delivered (ours carries the
	 * program's: signals.c, tty_action), else it ends with EINTR.  Read
	 * before the delivery: the handler may change the action.  The
	 * signal path only. */
	struct ksigaction ka = { 0 };
	if (r == -PROXY_ERESTART && raised)         /* never one without the other */
		sys_call4(SYS_rt_sigaction, raised, NULL, &ka, 8);
	if (raised)
		/* delivered on the way out of this kernel entry, before the
		 * program sees the result, as natively; its handler's calls
		 * are forwarded as usual (depth is back) */
		sys_call4(SYS_rt_tgsigqueueinfo, dt_cfg.pid, t->tid, raised, &info);
	tty_held_deliver(t, raised);
	if (r == -PROXY_ERESTART && raised) {
		if (ka.flags & SA_RESTART)
			goto again;
		r = -EINTR;
	}
	return r;
}

/* Returns once thread tid of this process is gone from every count and
 * list of its thread group, so that the single-thread checks (unshare's
 * thread_group_empty) and the choice of the exit status (below) no longer
 * see it.  Its exit's group bookkeeping (synchronize_group_exit) is the
 * first thing do_exit does; its release (release_task) unhashes its tid
 * and then unlinks it from the thread list, both under tasklist_lock held
 * for writing.  tgkill finds threads under RCU alone, so its ESRCH can
 * come between the two (the detached thread polls from another CPU, and
 * the releasing vCPU may be stopped by the host there): unshare(CLONE_NEWUSER)
 * then still saw the proxy and gave EINVAL (run_thread_state beside a
 * loaded machine, 1 of 20 loops).  A waitid for our own process, which is
 * never our child, takes tasklist_lock for reading: it returns (ECHILD)
 * after that release has left the lock, with the thread unlinked.  Raw
 * calls: the trap. */
void proxy_gone(pid_t tid)
{
	if (tid <= 0)
		return;
	while (sys_call3(SYS_tgkill, dt_cfg.pid, tid, 0) != -ESRCH)
		cpu_relax();
	sys_call4(SYS_waitid, P_PID, dt_cfg.pid, NULL, WEXITED | WNOHANG);
}

/* The thread exits or attaches again: its kernel figures first, then the
 * proxy goes, and is gone when this returns.  Its reply to DT_CMD_QUIT
 * comes before its exit (glibc's thread teardown, then exit(0)), and the
 * kernel takes the exit status of a process none of whose threads called
 * exit_group from its last thread to exit (kernel/exit.c,
 * synchronize_group_exit; seen on 6.18): a detached thread that is its program's last and exits
 * with SYS_exit (a handler's exit(2)) while its proxy is still on its way
 * out made the process exit 0, its proxy's status, whenever the proxy was
 * late (run_call_left_behind beside a loaded machine; run_exit_last holds
 * the proxy at its exit every time). */
void proxy_stop(struct dt_thread *t)
{
	long none[6] = { 0 };

	proxy_forward(t, DT_CMD_COUNTERS, none);
	proxy_forward(t, DT_CMD_QUIT, none);
	proxy_gone(t->proxy_tid);
}

/* ---- proxy side ---------------------------------------------------------- */

/* Our SIGSYS handler, on a proxy, for an interrupt from its detached thread. */
void proxy_interrupt_taken(ucontext_t *uc)
{
	struct dt_thread *t = proxy_of;
	greg_t *g = uc->uc_mcontext.gregs;
	uintptr_t rip = (uintptr_t)g[REG_RIP];
	uint8_t want;

	if (!t)
		return;
	want = t->mb.intr;
	if (rip >= (uintptr_t)sys_proxy_call_check && rip <= (uintptr_t)sys_proxy_call_insn &&
	    (want == INTR_EINTR || want == INTR_CANCEL)) {
		if (frame_restart_pending(uc))
			/* In the kernel, which would restart it (SA_RESTART is
			 * ours, not the program's handler's): it ends. */
			frame_end_with_eintr(uc);
		else if (want == INTR_CANCEL)
			/* Not started, and its caller is gone: never start it. */
			g[REG_RIP] = (greg_t)sys_proxy_call_eintr;
		/* Not started, else: it starts after the handler, as a call made
		 * just after a signal does. */
	}
	/* On top of the terminal's signal's frame, set up at the same exit
	 * from the call (the kernel delivers SIGTTIN and SIGTTOU before
	 * SIGSYS, the lower number first): the call was in the kernel when
	 * this interrupt came.  Natively the signal whose handler sent it
	 * was pending there with the terminal's, and the lower-numbered of
	 * the two decided the call's end: taken as the handler's (SIGALRM,
	 * SIGCHLD, SIGUSR1 are; the number is not known here, and a signal
	 * above SIGTTOU, which natively leaves the restart to the
	 * terminal's, ends the call too).  The frame below ends it with
	 * EINTR (proxy_tty_signal_taken). */
	if (rip == dt_tty_entry && (want == INTR_EINTR || want == INTR_CANCEL))
		tty_intr = true;
	/* The detached thread returns only when every interrupt it sent has
	 * been taken, so none can hit its next call.  SIGSYS does not queue:
	 * two sent before one is taken arrive as one, so acknowledge all that
	 * were sent by now rather than count deliveries.  The acknowledgment
	 * only grows: our SIGSYS is SA_NODEFER, so a later interrupt can run
	 * this handler again on top of this one between its load and its
	 * store (an interrupt or a preemption there, the next SIGSYS sent
	 * meanwhile); a plain store would then put back the older count after
	 * the newer one, and the detached thread would wait for an
	 * acknowledgment that never comes. */
	_Atomic uint64_t *ack = (_Atomic uint64_t *)&t->mb.intr_ack;
	uint64_t sent = atomic_load_explicit((_Atomic uint64_t *)&t->mb.intr_sent, memory_order_acquire);
	uint64_t cur = atomic_load_explicit(ack, memory_order_relaxed);

	while (cur < sent &&
	       !atomic_compare_exchange_weak_explicit(ack, &cur, sent, memory_order_release, memory_order_relaxed))
		;
}

/* The runtime's handler of SIGTTIN or SIGTTOU (signals.c, where the program
 * has a handler for it), on a proxy: the proxy had it open for a call
 * (tty_signals_follow), for the kernel to judge a terminal access by the
 * detached thread's mask; the signal is the program's, and its handler runs
 * on the detached thread.  Kept with its siginfo and handed over with the
 * reply (mb.raised), where the detached thread sends it to itself.  A call
 * not ended yet (the kernel's restart of a job-control ERESTARTSYS, which
 * would only raise the signal again, or a call not entered) ends with
 * PROXY_ERESTART: the detached thread enters it again or ends it with EINTR
 * as the handler's SA_RESTART says (proxy_forward); with EINTR where an
 * interrupt asking for it came at the same exit (tty_intr).  One that ended with
 * EINTR (no SA_RESTART) or completed keeps its result. */
void proxy_tty_signal_taken(int sig, const siginfo_t *si, ucontext_t *uc)
{
	greg_t *g = uc->uc_mcontext.gregs;
	uintptr_t rip = (uintptr_t)g[REG_RIP];

	if (!proxy_of)
		return;
	tty_taken = sig;
	tty_taken_info = *si;
	if (rip >= (uintptr_t)sys_proxy_call_check && rip <= (uintptr_t)sys_proxy_call_insn) {
		/* an interrupt that asked for EINTR came with it */
		g[REG_RAX] = tty_intr ? -EINTR : -PROXY_ERESTART;
		g[REG_RIP] = (greg_t)sys_proxy_call_insn + 2;   /* its ret */
	}
	tty_intr = false;
}

/* A forwarded call that failed with EPIPE or EFBIG raised SIGPIPE or
 * SIGXFSZ on the thread that made it: the proxy, which blocks them.  Take
 * it off the proxy; the detached thread sends it to itself before it
 * returns to the program (proxy_forward), where the kernel would have
 * delivered it.  Returns the signal, or 0. */
static int take_raised_signal(struct dt_thread *t)
{
	static const struct timespec now = { 0, 0 };
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigaddset(&set, SIGXFSZ);
	int sig = sigtimedwait(&set, &t->raised_info, &now);
	return sig > 0 ? sig : 0;
}

static void sleep_ns(long ns)
{
	struct timespec ts = { 0, ns };

	nanosleep(&ts, NULL);
}

/* An adaptive proxy idle for ADAPTIVE_SLEEP_AFTER_NS: no more polls that
 * wake its CPU a thousand times a second and preempt whatever runs there
 * (an MPI rank beside a detached one: docs/mpi.md); it sleeps in the kernel
 * on the low half of req_seq (little-endian: the word's own address) until
 * the detached thread's next request wakes it (proxy_forward).  The kernel
 * compares the word with seen after it queued us, so a request published
 * after our store of proxy_asleep either is seen there or sees the flag. */
static void sleep_until_called(struct dt_thread *t, uint64_t seen)
{
	struct mailbox *mb = &t->mb;

	atomic_store_explicit((_Atomic uint32_t *)&mb->proxy_asleep, 1, memory_order_seq_cst);
	if (observe(&mb->req_seq) == seen)
		/* returns on a wake, on a changed word (EAGAIN), and on a
		 * signal (EINTR: an interrupt, glibc's SIGSETXID): the caller
		 * looks at req_seq again */
		sys_call4(SYS_futex, &mb->req_seq, FUTEX_WAIT_PRIVATE, (uint32_t)seen, NULL);
	/* before the call is answered: the detached thread's next request
	 * reads it after it saw the reply */
	atomic_store_explicit((_Atomic uint32_t *)&mb->proxy_asleep, 0, memory_order_relaxed);
}

static uint64_t wait_request(struct dt_thread *t, uint64_t seen)
{
	uint64_t seq;

	if (dt_cfg.proxy_wait == PROXY_SPIN) {
		while ((seq = observe(&t->mb.req_seq)) == seen)
			cpu_relax();
		return seq;
	}
	/* adaptive and sleep: callers that make calls back to back find us
	 * spinning; an idle program costs its housekeeping CPU little (adaptive)
	 * or nothing (sleep).  The clock is read every 16 pauses (a pause is
	 * 10-140 cycles), so the spin ends within a microsecond of its time. */
	bool sleeper = dt_cfg.proxy_wait == PROXY_SLEEP;
	uint64_t spin_ns = sleeper ? SLEEP_SPIN_NS : ADAPTIVE_SPIN_NS;
	uint64_t sleep_after_ns = sleeper ? SLEEP_SPIN_NS : ADAPTIVE_SLEEP_AFTER_NS;
	uint64_t start = monotonic_ns(), idle;
	unsigned n = 0;
	while ((seq = observe(&t->mb.req_seq)) == seen) {
		cpu_relax();
		if (++n & 15)
			continue;
		idle = monotonic_ns() - start;
		if (idle < spin_ns)
			continue;
		if (idle >= sleep_after_ns)
			sleep_until_called(t, seen);
		else
			sleep_ns(idle < ADAPTIVE_SHORT_FOR_NS ? ADAPTIVE_SHORT_NS : ADAPTIVE_LONG_NS);
	}
	return seq;
}

/* Job control: the kernel judges a background process's read of its
 * terminal, and its write under tostop or its tcsetattr, by the calling
 * thread's mask and the process's action (tty_jobctrl.c): SIGTTIN or
 * SIGTTOU blocked or ignored, a read gets EIO and a write goes through;
 * else the signal goes to the process group (a default action stops it)
 * and the call is restarted once the process is continued.  The calling
 * thread is the proxy, so it blocks each of the two as the detached thread
 * does (the tty_blocked record).  One the program has a handler for is open
 * only during a call (in_call; the handler is the runtime's then, which
 * hands the signal to the detached thread: proxy_tty_signal_taken), so
 * that one sent to the process while the proxy waits for work goes to the
 * detached thread, not here (but a proxy idle since the handler was
 * installed, or since the record changed, has the state of its last
 * call's end until its next call); the two kernel entries a call this
 * costs are paid only by a program that handles them.  Looked at before
 * and after each call: one load from a line read anyway and one of a word written
 * only by rt_sigaction; the mask changes only when the wish does.  open:
 * the two that this proxy has open now. */
static void tty_signals_follow(struct dt_thread *t, uint64_t base, uint64_t *open, bool in_call)
{
	uint64_t want = TTY_SIGNALS & ~t->mb.tty_blocked;
	uint64_t mask;

	if (!in_call)
		want &= ~atomic_load_explicit(&dt_tty_handled, memory_order_relaxed);
	mask = base & ~want;

	if (want == *open)
		return;
	sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &mask, NULL, 8);
	*open = want;
}

static void *proxy_main(void *arg)
{
	struct dt_thread *t = arg;
	struct mailbox *mb = &t->mb;
	/* a proxy made again (proxy_renewed_around) starts after the last
	 * request its predecessor took */
	uint64_t seen = observe(&mb->req_seq);
	sigset_t mask;
	uint64_t base, tty_open = 0;

	/* a forked child's copy of a parent's sleeping proxy's flag: its
	 * detached thread would wake us on every call */
	mb->proxy_asleep = 0;

	/* Born where its creator runs (the detached CPU, perhaps inside the
	 * partition): first of all, off to the housekeeping CPUs. */
	dt_is_proxy = true;
	placement_home(0);
	proxy_of = t;
	/* Born with its creator's mask (glibc's pthread_create gives the new
	 * thread the mask of the thread that made it): the detached thread's,
	 * as the program has it (a trap's handler blocks nothing more:
	 * sud.c).  The record of SIGTTIN and SIGTTOU starts from it. */
	pthread_sigmask(SIG_BLOCK, NULL, &mask);
	mb->tty_blocked = (sigismember(&mask, SIGTTIN) ? 1ull << (SIGTTIN - 1) : 0) |
			  (sigismember(&mask, SIGTTOU) ? 1ull << (SIGTTOU - 1) : 0);
	sigfillset(&mask);
	sigdelset(&mask, SIGSYS);
	sigdelset(&mask, SIGSETXID);
	/* it runs glibc's system call sites too (nanosleep, adaptive): one
	 * being rewritten holds an int3, which kills a thread that blocks
	 * SIGTRAP (rewrite.c, dispatch.h: kept_open) */
	sigdelset(&mask, SIGTRAP);
	pthread_sigmask(SIG_SETMASK, &mask, NULL);
	memcpy(&base, &mask, sizeof(base));     /* the kernel's 64 signals */
	prctl(PR_SET_NAME, "detach-proxy");
	prctl(PR_SET_TIMERSLACK, 1);       /* adaptive polls: no 50 us slack */
	__atomic_store_n(&t->proxy_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);

	for (;;) {
		uint64_t seq = wait_request(t, seen);
		long nr = mb->nr, r = 0;

		seen = seq;
		if (nr == DT_CMD_RETIRE) {
			/* a new proxy takes over (proxy_renewed_around) */
			hooks->retires(t);
			t->stats->proxy_tid = 0;
		}
		if (nr == DT_CMD_QUIT || nr == DT_CMD_RETIRE) {
			publish(&mb->done_seq, seq);
			break;
		}
		if (nr == DT_CMD_STATS) {
			hooks->stats();
		} else if (nr == DT_CMD_COUNTERS) {
			/* the detached thread is about to exit or attach: its figures */
			hooks->counters(t);
		}
		else if (nr >= 0) {
			tty_signals_follow(t, base, &tty_open, true);
			r = sys_proxy_call(nr, mb->args[0], mb->args[1], mb->args[2], mb->args[3],
					   mb->args[4], mb->args[5], &mb->intr);
			tty_signals_follow(t, base, &tty_open, false);
		}
		if (tty_taken) {
			t->raised_info = tty_taken_info;
			mb->raised = tty_taken;
			tty_taken = 0;
		} else {
			mb->raised = (r == -EPIPE || r == -EFBIG) ? take_raised_signal(t) : 0;
		}
		mb->ret = r;
		publish(&mb->done_seq, seq);
	}
	return NULL;
}

int proxy_start(struct dt_thread *t)
{
	pthread_attr_t attr;
	struct sched_param sp = { 0 };
	pthread_t th;
	int err;

	interrupt_late_cycles = ns_to_tsc_cycles(&dt_cfg.tsc, INTERRUPT_LATE_NS);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* Never a real-time policy: a spinning RT proxy with throttling off
	 * freezes its CPU's kernel threads. */
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
	pthread_attr_setschedparam(&attr, &sp);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	err = pthread_create(&th, &attr, proxy_main, t);
	pthread_attr_destroy(&attr);
	if (err)
		return -err;
	while (!__atomic_load_n(&t->proxy_tid, __ATOMIC_ACQUIRE))
		cpu_relax();
	t->proxyless = false;           /* its calls may go to the proxy again */
	return 0;
}
