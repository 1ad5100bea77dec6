/* Layer 2c (kept calls, docs/architecture.md): timed waits served in user space against the
 * TSC (clock.c). */
#ifndef DETACH_RUNTIME_CLOCK_H
#define DETACH_RUNTIME_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>

#include "runtime/thread.h"

void clock_init(void) DT_HIDDEN;
bool timed_wait_general_only(void) DT_HIDDEN;
bool timed_wait_clock_ok(clockid_t clk) DT_HIDDEN;
long timed_wait_until(struct dt_thread *t, clockid_t clk, uint64_t deadline_ns) DT_HIDDEN;
long timed_sleep(struct dt_thread *t, clockid_t clk, int flags, const struct timespec *req,
		 struct timespec *rem, ucontext_t *uc) DT_HIDDEN;
/* The rest of a sleep whose wait ends after the way back from the runtime,
 * next to the program: in dt_wait_end (clock_resume.S), reached from
 * dt_wait_resume after a trap's rt_sigreturn and from the trampoline's tail
 * for a rewritten site (trampoline.S).  clk < 0: none (a rewritten site's
 * sleep that ended inside the runtime). */
struct wait_record {
	long clk;
	struct timespec *rem;           /* NULL: none, or an absolute sleep */
	uint64_t deadline;
	uintptr_t rip;                  /* the program's, after its `syscall`: where a trapped
					 * sleep resumes; a rewritten site's, whose code
					 * dt_wait_end touches before the last stretch */
	uintptr_t ret_to;               /* the rewritten site's stub's return address,
					 * whose return dt_wait_end rehearses; 0: none */
	uint64_t tsc_end;               /* where the last stretch ends (timed_wait_approach) */
};
long timed_wait_approach(struct dt_thread *t, struct wait_record *w) DT_HIDDEN;
long timed_wait_finish(struct dt_thread *t, const struct wait_record *w, uint64_t spun_to) DT_HIDDEN;
long timed_poll(struct dt_thread *t, long timeout_ms) DT_HIDDEN;
long timed_select(struct dt_thread *t, struct timeval *tv) DT_HIDDEN;
long timed_ppoll(struct dt_thread *t, struct timespec *ts, uint64_t masked) DT_HIDDEN;

#endif
