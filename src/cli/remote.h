/* Calling functions inside another process, as a debugger calls one in its
 * inferior (src/cli/remote.c).  Used by `detach pid` and `detach ctl`.
 *
 *   struct remote r;
 *   remote_seize(&r, pid, skip);    every thread seized and interrupted
 *   remote_stop(&r);                ... and stopped (new threads too)
 *   remote_pick(&r, tid);           the thread to call on; registers saved
 *   remote_call(&r, fn, a0, a1, a2, &ret);   as often as needed
 *   remote_restore(&r);             the thread's registers exactly as found
 *   remote_release(&r);             every thread let go, signals kept
 *
 * The split between remote_seize and remote_stop lets a caller answer a
 * thread that is blocked in a request of its own (a FUSE write) between the
 * two: a ptrace stop only takes effect on the way back to user space.
 * Every call is made from the same (tracer) thread; functions return 0 or
 * -errno and never print. */
#ifndef DETACH_CLI_REMOTE_H
#define DETACH_CLI_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/user.h>

#define REMOTE_MAX_THREADS 1024

struct remote {
	pid_t pid;
	int ntids;
	pid_t tids[REMOTE_MAX_THREADS];
	bool stopped[REMOTE_MAX_THREADS];
	int pending[REMOTE_MAX_THREADS];  /* a signal that arrived while stopped */
	bool (*skip)(pid_t pid, pid_t tid);   /* threads left running, or NULL */
	int cur;                          /* remote_pick's thread, -1: none */
	uintptr_t scratch;                /* next free byte below its stack */
	struct user_regs_struct regs;     /* its registers as found */
	struct iovec xv;
	char xstate[16384];               /* ... and its whole xsave state */
};

/* PTRACE_SEIZE + PTRACE_INTERRUPT of every thread of pid for which skip
 * (may be NULL) is false; does not wait for the stops. */
int remote_seize(struct remote *r, pid_t pid, bool (*skip)(pid_t pid, pid_t tid));
/* Waits until every seized thread is stopped, seizing threads that were
 * created meanwhile. */
int remote_stop(struct remote *r);
/* Chooses the (stopped) thread tid for the calls and saves its registers. */
int remote_pick(struct remote *r, pid_t tid);
/* Copies the string s below the picked thread's stack (under its red
 * zone); its address in the process, or 0 (too long, unwritable). */
uintptr_t remote_string(struct remote *r, const char *s);
/* fn(a0, a1, a2) on the picked thread from its saved state; the whole rax
 * in *ret (a function returning int leaves the upper half undefined: the
 * caller truncates).  The function returns to a non-canonical address,
 * whose fault stops the thread. */
int remote_call(struct remote *r, uintptr_t fn, long a0, long a1, long a2, long *ret);
/* Lets the picked thread run, one instruction at a time, until out(rip,
 * arg) holds (for at most max_ms); its registers as it is then become the
 * saved ones.  -ETIMEDOUT when it did not get there. */
int remote_step_until(struct remote *r, bool (*out)(uintptr_t rip, void *arg), void *arg, int max_ms);
/* The picked thread's registers, orig_rax included (a call our stop
 * interrupted is restarted), and xsave state put back. */
int remote_restore(struct remote *r);
/* PTRACE_DETACH of every seized thread, with the signal it kept. */
void remote_release(struct remote *r);

/* The lowest file-offset-0 mapping in pid of a file whose path ends in
 * suffix: its start and its full path. */
int remote_find_mapping(pid_t pid, const char *suffix, uintptr_t *base, char *path, size_t len);
/* The executable mappings whose name (a path, or "[vdso]") ends in suffix,
 * as [start, end) pairs: how many (at most max), or -errno. */
int remote_exec_ranges(pid_t pid, const char *suffix, uintptr_t (*ranges)[2], int max);
/* The address in pid of sym, which handle (dlopen, or RTLD_DEFAULT) finds
 * in our copy of the same file. */
int remote_symbol(pid_t pid, void *handle, const char *sym, const char *suffix, uintptr_t *out);

#endif
