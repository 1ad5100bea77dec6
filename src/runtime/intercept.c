/* Catching every system call of a detached thread: Syscall User Dispatch.
 *
 * prctl(PR_SET_SYSCALL_USER_DISPATCH) arms the calling thread only.  Calls
 * made from the runtime's `detach_allow` section always run; any other
 * `syscall` instruction of the thread, with the selector at BLOCK, turns into
 * SIGSYS with the registers in the signal frame.  The handler hands the call
 * to dt_dispatch (dispatch.c), puts the result in the frame's rax, and
 * returns through the runtime's own restorer (glibc's lies outside the range
 * and would trap while returning from a trap).
 *
 * SIMD state needs no care here: the kernel saves the complete FPU/vector
 * state in the signal frame on entry and restores it on rt_sigreturn, so the
 * program sees every register but rax exactly as it left it.  (The
 * non-trapping entry of rewrite mode, trampoline.S, saves it with xsave.)
 *
 * In rewrite mode the handler also rewrites the site that trapped
 * (rewrite.c), and takes the calls the trampoline sends back on purpose
 * because they need a signal frame (retraps).
 */
#include "runtime/runtime.h"

#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_OFF 0
#define PR_SYS_DISPATCH_ON 1
#endif
#define SUD_ALLOW 0
#define SUD_BLOCK 1
#ifndef SYS_USER_DISPATCH
#define SYS_USER_DISPATCH 2
#endif

/* What the program asked for SIGSYS: the runtime owns the real handler and
 * keeps the program's wish here (signals.c: do_sigaction). */
struct ksigaction dt_app_sigsys;

static void sigsys_handler(int sig, siginfo_t *si, void *ctx);

/* SA_NODEFER: a program's signal handler that runs on top of our wait for a
 * forwarded call and makes a system call traps again, inside this handler;
 * a blocked SIGSYS raised by Syscall User Dispatch would kill the process.
 * SA_RESTART is switched per interrupt (intercept_set_restart): it decides
 * how a proxy's interrupted call ends, exactly as the program's handler
 * flags would have decided for the detached thread. */
static struct ksigaction sigsys_action = {
	.handler = (void *)sigsys_handler,
	.flags = SA_SIGINFO | SA_NODEFER | SA_RESTORER,
	.restorer = (void *)sys_sigreturn_restorer,
	.mask = 0,
};

int intercept_install(void)
{
	long r = sys_call4(SYS_rt_sigaction, SIGSYS, &sigsys_action, &dt_app_sigsys, 8);

	return r < 0 ? (int)r : 0;
}

void intercept_set_restart(bool restart)
{
	unsigned long want = restart ? (sigsys_action.flags | SA_RESTART) : (sigsys_action.flags & ~(unsigned long)SA_RESTART);

	if (want == sigsys_action.flags)
		return;
	sigsys_action.flags = want;
	sys_call4(SYS_rt_sigaction, SIGSYS, &sigsys_action, NULL, 8);
}

int intercept_arm(struct dt_thread *t)
{
	long r;

	t->selector = SUD_BLOCK;
	r = sys_call6(SYS_prctl, PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON,
		      (long)__start_detach_allow, __stop_detach_allow - __start_detach_allow,
		      (long)&t->selector, 0);
	return r < 0 ? (int)r : 0;
}

void intercept_disarm(struct dt_thread *t)
{
	(void)t;
	sys_call6(SYS_prctl, PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0, 0);
}

/* A SIGSYS that is no Syscall User Dispatch trap and no proxy interrupt
 * (seccomp's SECCOMP_RET_TRAP, a kill -SYS) goes where the program wanted it. */
static void chain_app_sigsys(int sig, siginfo_t *si, void *ctx)
{
	void *h = dt_app_sigsys.handler;

	if (h == SIG_IGN)
		return;
	if (h == SIG_DFL) {
		/* The default action: restore it and let the signal kill us. */
		struct ksigaction dfl = { .handler = SIG_DFL };
		sys_call4(SYS_rt_sigaction, SIGSYS, &dfl, NULL, 8);
		sys_call3(SYS_tgkill, sys_call0(SYS_getpid), sys_call0(SYS_gettid), SIGSYS);
		return;
	}
	if (dt_app_sigsys.flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))h)(sig, si, ctx);
	else
		((void (*)(int))h)(sig);
}

static void sigsys_handler(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	greg_t *g = uc->uc_mcontext.gregs;
	struct dt_thread *t = dt_self;
	long a[6];

	if (si->si_code != SYS_USER_DISPATCH) {
		if (dt_is_proxy && si->si_code == SI_QUEUE && si->si_pid == dt_cfg.pid)
			proxy_interrupt_taken(uc);
		else
			chain_app_sigsys(sig, si, ctx);
		return;
	}
	if (!t)
		dt_die("a system call trapped on a thread that is not detached (tid %ld)", sys_call0(SYS_gettid));
	if (rewrite_is_retrap((uintptr_t)si->si_call_addr)) {
		/* Sent here by the trampoline (rewrite mode) for a call that needs
		 * a signal frame: resume at the return address it left on the
		 * stack, the site's, as if the site itself had trapped. */
		t->stats->retraps++;
		g[REG_RIP] = *(greg_t *)g[REG_RSP];
		g[REG_RSP] += 8;
	} else {
		t->stats->traps++;
		/* before the call: it may not return (exit, execve) */
		if (!rewrite_site(t, (uintptr_t)si->si_call_addr - 2) && dt_rewrite_on)
			t->stats->traps_refused++;
	}
	a[0] = g[REG_RDI];
	a[1] = g[REG_RSI];
	a[2] = g[REG_RDX];
	a[3] = g[REG_R10];
	a[4] = g[REG_R8];
	a[5] = g[REG_R9];
	g[REG_RAX] = dt_dispatch(t, si->si_syscall, a, uc);
}
