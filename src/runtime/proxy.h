/* Layer 2b (mechanism, docs/architecture.md): the proxy thread of a
 * detached thread and the mailbox hand-over (proxy.c).  Pure mechanism: the
 * work of a thread's end that belongs to the services above (its figures,
 * the statistics file) is done through hooks that threads.c registers. */
#ifndef DETACH_RUNTIME_PROXY_H
#define DETACH_RUNTIME_PROXY_H

#include <stdbool.h>
#include <ucontext.h>

#include "runtime/thread.h"

/* Run on the proxy for the runtime's commands (thread.h: DT_CMD_*) */
struct proxy_hooks {
	void (*retires)(struct dt_thread *t);   /* RETIRE: a new proxy takes over */
	void (*counters)(struct dt_thread *t);  /* COUNTERS: the thread exits or attaches */
	void (*stats)(void);                    /* STATS: the program exits */
};
/* Before the first proxy_start (threads.c) */
void proxy_hooks_set(const struct proxy_hooks *h) DT_HIDDEN;
int proxy_start(struct dt_thread *t) DT_HIDDEN;
long proxy_forward(struct dt_thread *t, long nr, const long a[6]) DT_HIDDEN;
void proxy_stop(struct dt_thread *t) DT_HIDDEN;
void proxy_gone(pid_t tid) DT_HIDDEN;
void proxy_abandoned(struct dt_thread *t) DT_HIDDEN;
void proxy_interrupt_taken(ucontext_t *uc) DT_HIDDEN;
/* A SIGTTIN or SIGTTOU the program handles, taken on a proxy (signals.c) */
void proxy_tty_signal_taken(int sig, const siginfo_t *si, ucontext_t *uc) DT_HIDDEN;
/* The kernel's handler of those (signals.c sets it before installing it) */
extern uintptr_t dt_tty_entry DT_HIDDEN;
/* A forwarded call that a job-control signal ended on the proxy before its
 * handler ran (the kernel's ERESTARTSYS): to be entered again or to end
 * with EINTR as the handler's SA_RESTART says (proxy_forward) */
#define PROXY_ERESTART 512
extern __thread bool dt_is_proxy DT_HIDDEN;
/* Set by dt_app_restorer (stubs.S) on a thread that is not detached, where
 * a handler returns into a wait for a proxy: a fork child's (proxy.c) */
extern __thread volatile uint32_t dt_orphan_intr DT_HIDDEN;
/* Of TTY_SIGNALS, those whose action is a handler of the program's
 * (signals.c keeps it): the proxies open them only during a call (proxy.c). */
extern _Atomic uint64_t dt_tty_handled DT_HIDDEN;

#endif
