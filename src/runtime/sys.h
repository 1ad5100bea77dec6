/* Layer 0 of the runtime (docs/architecture.md): raw system calls and what
 * the kernel's own structures look like.  Includes nothing of the runtime. */
#ifndef DETACH_RUNTIME_SYS_H
#define DETACH_RUNTIME_SYS_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/capability.h>
#include <sys/syscall.h>

#define DT_HIDDEN __attribute__((visibility("hidden")))
/* The x86-64 ABI's red zone: the 128 bytes below rsp a function may use
 * without moving rsp, which the runtime steps over before it writes on the
 * program's stack (a rewritten site's stub, a trapped sleep's record). */
#define RED_ZONE 128

/* The stubs live in the section `detach_allow`, the address range Syscall
 * User Dispatch always lets through: the runtime's own calls on a detached
 * thread never trap.  They return -errno and never touch errno. */
long sys_call6(long nr, long a1, long a2, long a3, long a4, long a5, long a6) DT_HIDDEN;
#define sys_call0(nr)                   sys_call6(nr, 0, 0, 0, 0, 0, 0)
#define sys_call1(nr, a)                sys_call6(nr, (long)(a), 0, 0, 0, 0, 0)
#define sys_call2(nr, a, b)             sys_call6(nr, (long)(a), (long)(b), 0, 0, 0, 0)
#define sys_call3(nr, a, b, c)          sys_call6(nr, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys_call4(nr, a, b, c, d)       sys_call6(nr, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
/* The SIGSYS handler's sa_restorer: rt_sigreturn from inside the range. */
void sys_sigreturn_restorer(void) DT_HIDDEN;
/* The program's handlers' sa_restorer: the same without a trap, with the
 * records of a handler's return (stubs.S; signals.c, restorer_for). */
void dt_app_restorer(void) DT_HIDDEN;
/* rt_sigreturn with rsp = uc: resumes the context saved in a signal frame. */
__attribute__((noreturn)) void sys_sigreturn_at(void *uc) DT_HIDDEN;
/* fn(a, b, live) on the stack below sp; live: the lowest address of the
 * caller's stack still in use. */
void sys_run_on(void (*fn)(void *a, void *b, uintptr_t live), void *a, void *b, uintptr_t sp) DT_HIDDEN;
/* The proxy's way to run a forwarded call: a call cancelled before the
 * syscall instruction (*intr == INTR_CANCEL) gives -EINTR instead. */
long sys_proxy_call(long nr, long a1, long a2, long a3, long a4, long a5, long a6,
		    volatile uint8_t *intr) DT_HIDDEN;
extern const char sys_proxy_call_check[], sys_proxy_call_insn[], sys_proxy_call_eintr[] DT_HIDDEN;
/* clone family on the detached thread (lifecycle.c, do_clone):
 * child_uc != NULL: the child resumes the program through that frame copy;
 * parent_uc != NULL: so does the parent (vfork on a shared stack). */
long sys_clone_resume(long nr, long a1, long a2, long a3, long a4, long a5,
		      void *child_uc, void *parent_uc) DT_HIDDEN;
/* What sys_clone_resume calls in a child that shares our memory, first of
 * all, with the word below child_uc (what the child inherits), and in a
 * vfork parent resumed, with parent_uc (set at start by init.c). */
extern void (*sys_on_clone_child)(const void *inherit) DT_HIDDEN;
extern void (*sys_on_vfork_parent)(const void *uc) DT_HIDDEN;
extern const char __start_detach_allow[], __stop_detach_allow[] DT_HIDDEN;

/* The calling thread has capability cap in its effective set (capget). */
static inline bool thread_capable(int cap)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	return sys_call2(SYS_capget, &h, d) == 0 && (d[cap / 32].effective & (1u << (cap % 32)));
}

/* The kernel's struct sigaction, as rt_sigaction takes it (not glibc's). */
struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif
#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1u << 31)   /* linux/signal.h: glibc does not define it */
#endif

#endif
