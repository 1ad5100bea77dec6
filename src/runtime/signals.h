/* Layer 2c (kept calls, docs/architecture.md): signal state and delivery of a detached
 * thread (signals.c). */
#ifndef DETACH_RUNTIME_SIGNALS_H
#define DETACH_RUNTIME_SIGNALS_H

#include <stdbool.h>

#include "runtime/call.h"

DT_HIDDEN call_fn do_sigreturn, do_sigaction, do_sigprocmask, do_sigsuspend, do_sigaltstack,
	do_kill, do_thread_signal, do_fd_track;
/* A descriptor whose readiness is the calling thread's pending signals (a
 * signalfd, or an epoll set holding one): calls on it run on the thread. */
bool sigfd_is(long fd) DT_HIDDEN;
/* poll/select sets holding one */
bool sigfd_in_pollfds(const void *fds, unsigned long n) DT_HIDDEN;
bool sigfd_in_fdset(const void *set, long nfds) DT_HIDDEN;

/* The program's action for a signal of the runtime's own that is not for
 * the runtime; forced: blocked or ignored, it takes the default action. */
void signal_deliver_app(struct ksigaction *app, int sig, siginfo_t *si, void *ctx, bool forced) DT_HIDDEN;
/* SIGSEGV and SIGBUS become the runtime's, the program's actions kept:
 * a fault of uaccess.S is an EFAULT, any other the program's. */
int signal_fault_install(void) DT_HIDDEN;
/* SIGTTIN and SIGTTOU: the program's actions become its wish, and where
 * it has a handler the kernel's is the runtime's tty_handler (the proxies
 * open those only for a call: proxy.c). */
int signal_tty_capture(void) DT_HIDDEN;
/* Around the detached thread's execve (before: true; after a failed one:
 * false): an ignored SIGSEGV or SIGBUS stays ignored in the new image. */
void signal_fault_exec(bool before) DT_HIDDEN;
/* The default action of sig, for real, on the calling thread. */
void signal_die(int sig) DT_HIDDEN;

#endif
