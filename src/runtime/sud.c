/* Syscall User Dispatch, the mechanism: the process's SIGSYS action and
 * arming a thread.  Layer 2 (docs/architecture.md); the handler itself, the
 * entry of every trap, is intercept.c's.
 *
 * prctl(PR_SET_SYSCALL_USER_DISPATCH) arms the calling thread only.  Calls
 * made from the runtime's `detach_allow` section always run; any other
 * `syscall` instruction of the thread, with the selector at BLOCK, turns into
 * SIGSYS with the registers in the signal frame. */
#include "runtime/sud.h"
#include "runtime/stack.h"

#include <errno.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_OFF 0
#define PR_SYS_DISPATCH_ON 1
#endif

/* What the program asked for SIGSYS: the runtime owns the real handler and
 * keeps the program's wish here (signals.c: do_sigaction). */
struct ksigaction dt_app_sigsys;
struct ksigaction dt_app_sigtrap;

/* SA_NODEFER: a program's signal handler that runs on top of our wait for a
 * forwarded call and makes a system call traps again, inside this handler;
 * a blocked SIGSYS raised by Syscall User Dispatch would kill the process.
 * SA_RESTART, always: the proxy's kernel then restarts what it can restart
 * when our interrupt arrives, and the proxy's handler turns that restart
 * into EINTR where the detached thread's handler had no SA_RESTART
 * (proxy.c, proxy_interrupt_taken).  The flag is process-wide and never
 * changes, so interrupts of several detached threads cannot race on it.
 * SA_ONSTACK: the trap's frame goes to the alternate stack, the runtime's
 * own unless the program set one (stack.c), never to a stack of the
 * program's that may be 2 KiB (a goroutine's). */
int sud_install(void (*handler)(int, siginfo_t *, void *))
{
	const struct ksigaction action = {
		.handler = (void *)handler,
		.flags = SA_SIGINFO | SA_NODEFER | SA_RESTART | SA_ONSTACK | SA_RESTORER,
		.restorer = (void *)sys_sigreturn_restorer,
		.mask = 0,
	};
	long r = sys_call4(SYS_rt_sigaction, SIGSYS, &action, &dt_app_sigsys, 8);

	return r < 0 ? (int)r : 0;
}

/* The context of a signal that interrupted a system call the kernel is
 * about to restart (our SIGSYS has SA_RESTART): rip was moved back onto the
 * `syscall` instruction, and rcx still holds the return address that the
 * instruction itself wrote.  A context that merely reached the instruction
 * has rcx == rip + 2 only by chance (sys_proxy_call makes it 0). */
bool frame_restart_pending(const ucontext_t *uc)
{
	const greg_t *g = uc->uc_mcontext.gregs;
	const unsigned char *ip = (const unsigned char *)g[REG_RIP];

	return ip && g[REG_RCX] == g[REG_RIP] + 2 && ip[0] == 0x0f && ip[1] == 0x05;
}

/* Ends, with EINTR, the call a signal interrupted and the kernel would
 * restart: what a handler without SA_RESTART gets natively. */
void frame_end_with_eintr(ucontext_t *uc)
{
	uc->uc_mcontext.gregs[REG_RAX] = -EINTR;
	uc->uc_mcontext.gregs[REG_RIP] += 2;
}

int sud_arm(struct dt_thread *t)
{
	long r;

	stack_arm(t);
	t->selector = SUD_BLOCK;
	r = sys_call6(SYS_prctl, PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON,
		      (long)__start_detach_allow, __stop_detach_allow - __start_detach_allow,
		      (long)&t->selector, 0);
	return r < 0 ? (int)r : 0;
}

void sud_disarm(struct dt_thread *t)
{
	sys_call6(SYS_prctl, PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0, 0);
	stack_disarm(t);
}
