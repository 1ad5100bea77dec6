/* Layer 2c (kept calls, docs/architecture.md): the program's seccomp filters,
 * kept by the runtime and judged in user space (sandbox.c). */
#ifndef DETACH_RUNTIME_SANDBOX_H
#define DETACH_RUNTIME_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>

#include "runtime/cbpf.h"
#include "runtime/thread.h"

/* One filter the program installed, in runtime-owned memory, never
 * changed nor freed (threads and children share it, as the kernel's). */
struct sandbox_filter {
	const struct sandbox_filter *prev;      /* installed before it */
	uint32_t len;
	uint32_t flags;                         /* SECCOMP_FILTER_FLAG_* it came with */
	/* the calls this filter and every one before it allow whatever their
	 * arguments (cbpf_allows_always): judged by one bit */
	uint64_t always[DT_NR_SYSCALLS / 64];
	struct sock_filter insns[];
};

/* seccomp(SECCOMP_SET_MODE_FILTER, flags, prog) for thread t, checked as
 * the kernel checks it: 0 or -errno. */
long sandbox_install(struct dt_thread *t, unsigned long flags, const void *prog) DT_HIDDEN;

/* A thread the runtime does not intercept (a fork or vfork child, a thread
 * under --select first) gets the filters as kernel filters, each behind a
 * prefix that lets the runtime's own stubs through (runtime_prefix), and
 * an image that will not load the runtime gets them as they are: the last
 * thing before the program's own calls. */
void sandbox_to_kernel(const struct sandbox_filter *filters, bool runtime_prefix) DT_HIDDEN;
/* Across execve: "DETACH_SECCOMP=<fd>" into buf (SANDBOX_ENV_MAX bytes),
 * the descriptor (to close if the exec fails) or -1; and the new image's
 * side, which reads and closes it. */
#define SANDBOX_ENV_MAX 40
long sandbox_to_env(struct dt_thread *t, char *buf) DT_HIDDEN;
const struct sandbox_filter *sandbox_from_env(const char *v) DT_HIDDEN;

/* What dt_dispatch does with a call of a thread with filters. */
enum sandbox_verdict {
	SANDBOX_RUN,            /* ALLOW, LOG: the call runs */
	SANDBOX_DONE,           /* ERRNO, TRACE, TRAP...: *ret is its result */
	SANDBOX_END_THREAD,     /* KILL_THREAD: the thread ends (not the last) */
};
/* Judges the call nr(a) made at ip (the address after its `syscall`) by
 * every filter of t, and carries out what is not RUN; KILL_PROCESS and the
 * last thread's KILL_THREAD do not return.  uc: the trap's frame, NULL on
 * the trampoline's path (a TRAP then asks for the trap path: *ret is
 * DT_NEED_TRAP, call.h).
 * No allocation, no lock, no call that enters the kernel but the
 * action's own. */
enum sandbox_verdict sandbox_judge(struct dt_thread *t, long nr, const long a[6], uintptr_t ip,
				   ucontext_t *uc, long *ret) DT_HIDDEN;

#endif
