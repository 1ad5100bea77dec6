/* A detached thread's lifecycle calls: exit, exit_group, the clone family
 * (the child resumes the program from a copy of the trap's frame) and execve
 * (the detached state is passed on to the new image). */
#include "runtime/lifecycle.h"
#include "runtime/claims.h"
#include "runtime/cputime.h"
#include "runtime/env.h"
#include "runtime/sandbox.h"
#include "runtime/sched.h"
#include "runtime/signals.h"
#include "runtime/stats.h"
#include "runtime/threads.h"
#include "runtime/uaccess.h"
#include "lib/contract.h"

#include <errno.h>
#include <linux/sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

long do_exit(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	long code = a[0];

	(void)uc;
	count(t, nr, &t->stats->local);
	thread_end(t, THREAD_EXIT);
	return sys_call1(nr, code);
}

long do_exit_group(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	long none[6] = { 0 };

	(void)uc;
	dt_exit_code = (int)a[0];
	forget_abandoned(t);    /* a read left by siglongjmp must not keep the statistics unwritten */
	if (t->observed) {
		t->selector = 0;        /* libc may run here: let its calls through */
		stats_finish();
	} else if (!calls_stay(t)) {
		proxy_forward(t, DT_CMD_STATS, none);
	}
	return local_call(t, nr, a);
}

/* The size of the trap's xsave area (512: a bare fxsave image) */
static uint32_t frame_fpsize(const ucontext_t *uc)
{
	const char *fp = (const char *)uc->uc_mcontext.fpregs;
	uint32_t magic1, fpsize = 512;

	if (fp) {
		/* struct _fpx_sw_bytes sits at byte 464 of the fxsave image */
		memcpy(&magic1, fp + 464, 4);
		if (magic1 == 0x46505853u)       /* FP_XSTATE_MAGIC1 */
			memcpy(&fpsize, fp + 468, 4);   /* extended_size */
	}
	return fpsize;
}

/* Copies the trap's signal context (ucontext and xsave area) below hi, for
 * a child that resumes the program elsewhere: rax 0, rsp sp.  A new thread
 * starts without an alternate signal stack, as the kernel would give it. */
static void *frame_copy(ucontext_t *uc, uintptr_t hi, uintptr_t sp, bool new_thread)
{
	const char *fp = (const char *)uc->uc_mcontext.fpregs;
	uint32_t fpsize = frame_fpsize(uc);
	uintptr_t fp_dst, uc_dst;
	ucontext_t *c;

	fp_dst = (hi - fpsize) & ~(uintptr_t)63;          /* xrstor needs 64 */
	uc_dst = (fp_dst - KERNEL_UCONTEXT_SIZE) & ~(uintptr_t)63;
	if (fp)
		memcpy((void *)fp_dst, fp, fpsize);
	memcpy((void *)uc_dst, uc, KERNEL_UCONTEXT_SIZE);
	c = (ucontext_t *)uc_dst;
	c->uc_mcontext.fpregs = fp ? (struct _libc_fpstate *)fp_dst : NULL;
	c->uc_mcontext.gregs[REG_RAX] = 0;
	c->uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
	if (new_thread) {
		c->uc_stack.ss_sp = NULL;
		c->uc_stack.ss_size = 0;
		c->uc_stack.ss_flags = SS_DISABLE;
	}
	return c;
}

/* Whether a child's own stack, top its top and size its size (0: the call
 * gives none, a clone's), holds what the trap path writes below the top
 * before the child runs: 256 bytes left alone, the frame copy
 * (frame_copy: two 64-byte alignments) and the word below it (do_clone).
 * Every page of it writable: one 8-byte word per page read and written
 * back as it was (the uaccess probe: a bad page gives -EFAULT, no fault in
 * the handler).  Natively the kernel writes nothing there: an unmapped or
 * read-only stack is the child's first push's fault, in the child.
 * Neither a clone3's size nor the child's placement stack below the copy
 * (stubs.S, sys_clone_resume) is asked: a stack that held the copy before
 * this check keeps it, because the fallback (do_clone: the thread's
 * buffer) has a window for a thread child that a stack of its own has
 * not.  The placement's own depth below the copy is as before. */
static bool stack_holds(const ucontext_t *uc, uintptr_t top, size_t size)
{
	size_t n = 256 + frame_fpsize(uc) + 64 + KERNEL_UCONTEXT_SIZE + 64 + 8;
	uintptr_t lo;
	uint64_t w;

	/* top < size: a top that wraps (the kernel says EINVAL: access_ok) */
	if (top < n || (size && top < size))
		return false;
	lo = top - n;
	for (uintptr_t p = top - 8;; p -= 4096) {
		if (p < lo || p > top)
			p = lo;
		if (copy_from_user(&w, (const void *)p, 8) || copy_to_user((void *)p, &w, 8))
			return false;
		if (p == lo)
			return true;
	}
}

/* A child that shares memory but not a TLS of its own (clone(CLONE_VM)
 * without CLONE_SETTLS, not a vfork: old "lightweight process" code) sees
 * the parent's dt_self.  It marks that state as a vfork child's
 * (dt_child_placement), so that it does not take itself for the detached
 * thread, and nothing can clear the mark while both run: the thread no
 * longer counts as detached.  The promise is broken, so say so, once. */
static void warn_tls_shared(const struct dt_thread *t, pid_t child)
{
	static bool said;

	if (said)
		return;
	said = true;
	dt_warn("the detached thread (tid %d) made child %d with clone(CLONE_VM) without CLONE_SETTLS: "
		"the child shares its thread-local storage and with it the runtime's state of the thread, "
		"which from here on does not count as detached (%s; dt_is_detached() returns 0)",
		(int)t->tid, (int)child,
		dt_rewrite_on ? "its calls at rewritten sites run natively on its CPU" : "its calls are still forwarded");
}

/* After a clone, fork or vfork of the detached thread (ret: its result
 * here), on either side; *child_mask: the signal mask the child will run
 * the program with */
static void clone_done(struct dt_thread *t, unsigned long flags, long ret, uint64_t *child_mask)
{
	if (ret > 0 && !(flags & CLONE_VFORK))
		sched_inherit(t, (pid_t)ret);   /* the policy it believes in (sched.c) */
	if (ret == 0) {
		/* a fork child: private memory, back here.  It runs undetached,
		 * with the mask its program believes in (kept_open) */
		*child_mask |= t->app_blocked_open;
		dt_fork_child(t->filters);
	}
	else if (flags & CLONE_VFORK)
		dt_vfork_parent_resumed(NULL);
	else if (ret > 0 && !t->observed) {
		place_child((pid_t)ret);
		if ((flags & (CLONE_VM | CLONE_SETTLS)) == CLONE_VM)
			warn_tls_shared(t, (pid_t)ret);
	}
}

/* A fork made as fork or as clone without shared memory, a new stack nor
 * TLS (glibc's _Fork: clone(CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID |
 * SIGCHLD, 0, ...)): its child is a copy that resumes where the parent
 * does, which the clone gate can make (trampoline.S) */
static bool gate_forks(long nr, const long *a)
{
	const unsigned long shared = CLONE_VM | CLONE_VFORK | CLONE_SETTLS | CLONE_THREAD | CLONE_SIGHAND;

	return nr == SYS_fork || (nr == SYS_clone && !((unsigned long)a[0] & shared) && !a[1]);
}

/* A clone3 of a thread (CLONE_VM | CLONE_SETTLS: pthread_create) or of a
 * vfork child on a stack of its own (CLONE_VM | CLONE_VFORK: posix_spawn),
 * whose clone_args the gate can read and whose stack holds the packet
 * (trampoline.S): its flags and its stack top.  Anything else
 * (CLONE_VM alone: warn_tls_shared's case; no stack; a short or unreadable
 * clone_args, for the kernel to judge) takes the trap path. */

static bool gate_thread(long nr, const long *a, uint64_t *flags, uintptr_t *top)
{
	struct clone_args ca;

	if (nr != SYS_clone3 || (unsigned long)a[1] < 64 || copy_from_user(&ca, (const void *)a[0], 64))
		return false;
	if (!ca.stack || ca.stack_size < GATE_PACKET + dt_xsave_size + 64 + GATE_STACK_MIN)
		return false;
	if (!(ca.flags & CLONE_VM) || !(ca.flags & (CLONE_SETTLS | CLONE_VFORK)) ||
	    (ca.flags & CLONE_SETTLS && ca.flags & CLONE_VFORK))
		return false;
	*flags = ca.flags;
	*top = (uintptr_t)(ca.stack + ca.stack_size);
	if (*top < ca.stack || (*top & 15))
		return false;
	/* The packet's two ends writable (trampoline.S writes it with plain
	 * stores, every signal blocked: a fault there would kill the
	 * process); any other stack goes to the trap path, as before the
	 * gate (whose frame copy goes there only if the stack holds it:
	 * stack_holds) */
	uint64_t zero = 0;
	return !copy_to_user((void *)((*top - GATE_PACKET - dt_xsave_size) & -64ull), &zero, 8) &&
	       !copy_to_user((void *)(*top - 8), &zero, 8);
}

long do_clone(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	unsigned long flags;
	uintptr_t stack = 0;
	size_t stack_size = 0;          /* 0: the call gives none */
	void *child_uc = NULL, *parent_uc = NULL;
	long ret;

	if (!uc) {
		/* Rewrite mode, no frame.  A vfork, a fork (gate_forks) or
		 * a clone3 of a thread (gate_thread) runs in the clone gate
		 * (trampoline.S), which needs none: the child resumes the
		 * program through the trampoline's own return, as the parent
		 * does.  Not for a watched thread (its calls run on itself,
		 * natively: the trap path, as before) nor under the program's
		 * seccomp filters (the child inherits them in the kernel from
		 * the trap path's frame copy, lifecycle's one place for it).
		 * Every other clone needs the trap's frame: a stack too small
		 * for the packet, shared memory without CLONE_VFORK or a TLS. */
		uint64_t all = ~0ull, gflags = 0;
		uintptr_t top = 0;
		if (t->observed || t->filters)
			return DT_NEED_TRAP;
		if (nr == SYS_vfork)
			gflags = CLONE_VM | CLONE_VFORK;
		else if (!gate_forks(nr, a) && !gate_thread(nr, a, &gflags, &top))
			return DT_NEED_TRAP;
		/* Every signal blocked from here until each side's hook has run
		 * (trampoline.S puts the mask back): before the gate's word in
		 * t is written, so that a handler's own clone through the gate,
		 * which would overwrite it, runs before or not at all. */
		sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &all, &t->gate_mask, 8);
		t->gate_flags = gflags;
		t->gate_top = top;
		count(t, nr, &t->stats->local);
		return DT_CLONE_GATE;
	}

	switch (nr) {
	case SYS_fork:
		flags = SIGCHLD;
		break;
	case SYS_vfork:
		flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
		break;
	case SYS_clone:
		flags = (unsigned long)a[0];
		stack = (uintptr_t)a[1];
		break;
	default: {                              /* clone3 */
		struct clone_args ca;
		if ((unsigned long)a[1] < 64)
			return local_call(t, nr, a);    /* the kernel says why */
		/* its first 64 bytes (CLONE_ARGS_SIZE_VER0), which the kernel
		 * reads too: unreadable, it says EFAULT */
		if (copy_from_user(&ca, (const void *)a[0], 64))
			return local_call(t, nr, a);
		/* a stack without a size or a size without a stack: the kernel
		 * says EINVAL (clone3_stack_valid) before anything is made, and
		 * nothing may be written there first */
		if (!ca.stack != !ca.stack_size)
			return local_call(t, nr, a);
		flags = ca.flags;
		if (ca.stack) {
			stack = (uintptr_t)(ca.stack + ca.stack_size);
			stack_size = ca.stack_size;
		}
		break;
	}
	}
	if (stack) {
		/* A stack of its own: the frame goes just below its top, memory the
		 * child has not used yet, if the stack holds it.  If not
		 * (unmapped, read-only, no writable room below its top, outside
		 * user space) nothing is written there: the frame goes to our
		 * buffer, and the child, rsp at the top it was given, leaves
		 * through it into the program, whose first push faults in the
		 * child as natively (or the kernel refuses the call).  The
		 * buffer is the child's until
		 * its rt_sigreturn: a copy of it without CLONE_VM, a vfork's
		 * parent waits; a thread's parent goes on, and a second clone of
		 * this thread through the buffer before the child has left would
		 * overwrite its frame (as with CLONE_VM without a stack, below). */
		bool new_thread = (flags & (CLONE_VM | CLONE_VFORK)) == CLONE_VM;
		if (stack_holds(uc, stack, stack_size)) {
			child_uc = frame_copy(uc, stack - 256, stack, new_thread);
		} else {
			child_uc = frame_copy(uc, (uintptr_t)t->frame + sizeof(t->frame), stack, new_thread);
			/* The fault its push will take goes to the runtime's
			 * handler (signals.c, SA_ONSTACK), which the kernel
			 * would run at the top of the alternate stack the
			 * frame names: ours, where a vfork's parent waits in
			 * its trap.  The child gets the program's (none: the
			 * fault kills it, as natively), as the kernel gives
			 * a child that is no thread; a thread has none. */
			if (!new_thread)
				((ucontext_t *)child_uc)->uc_stack = t->app_ss;
		}
	} else if (flags & CLONE_VM) {
		/* Our stack, shared: the frame goes to a buffer of ours.  The child
		 * may overwrite the handler's frames, so a vfork parent leaves
		 * through the same copy when the child has released it. */
		child_uc = frame_copy(uc, (uintptr_t)t->frame + sizeof(t->frame),
				      (uintptr_t)uc->uc_mcontext.gregs[REG_RSP], !(flags & CLONE_VFORK));
		if (flags & CLONE_VFORK)
			parent_uc = child_uc;
	}
	if (child_uc)   /* the child's inheritance (stubs.S): the filters are never freed */
		((const void **)child_uc)[-1] = t->filters;
	count(t, nr, &t->stats->local);
	ret = sys_clone_resume(nr, a[0], a[1], a[2], a[3], a[4], child_uc, parent_uc);
	clone_done(t, flags, ret, (uint64_t *)&uc->uc_sigmask);
	return ret;
}

/* The clone gate's hook (trampoline.S), in the parent and in the child,
 * right after the call, every signal still blocked: clone_done's work, and
 * the mask the child runs the program with (in the parent: unused).  A
 * vfork child (shared memory, the parent suspended) runs
 * dt_child_placement, as the trap path's does in sys_clone_resume. */
uint64_t dt_gate_done(long nr, long ret)
{
	(void)nr;                       /* t->gate_flags says what it was */
	struct dt_thread *t = dt_self;
	uint64_t mask = t->gate_mask;

	if (ret == 0 && (t->gate_flags & CLONE_VM)) {
		dt_child_placement(NULL);
		return mask;
	}
	clone_done(t, t->gate_flags, ret, &mask);
	return mask;
}

/* The new image gets the runtime and the detached state in its
 * environment (env.c).  Runs on the detached thread inside the trap: no
 * allocation but one mmap of our own, no libc call that enters the
 * kernel. */
long do_execve(struct dt_thread *t, long nr, long *a, ucontext_t *uc)
{
	char **envp = (char **)(nr == SYS_execve ? a[2] : a[3]);
	const char *app_preload;
	size_t n = 0, size, at;
	char **out, *preload, *was, *p;
	long ret, b[6], fd = -1, claims = -1;
	bool bare;

	(void)uc;
	count(t, nr, &t->stats->local);
	if (!env_exec_readable(envp))
		return sys_call6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	for (char **e = envp; e && *e; e++)
		n++;
	size = (n + CONTRACT_NVARS + 3) * sizeof(char *) + 2 * 8192 + CPUTIME_ENV_MAX + SCHED_ENV_MAX +
	       SANDBOX_ENV_MAX + CLAIMS_ENV_MAX;
	out = (char **)sys_call6(SYS_mmap, 0, (long)size, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if ((long)out < 0 && (long)out > -4096)
		return (long)out;
	preload = (char *)(out + n + CONTRACT_NVARS + 3);
	was = preload + 8192;

	at = env_exec_program(envp, out, &app_preload);
	/* as of now: the runtime's CPU time, the thread's scheduling settings */
	cputime_to_env(t, was + 8192);
	out[at++] = was + 8192;
	if (!t->observed) {
		sched_to_env(t, was + 8192 + CPUTIME_ENV_MAX);
		out[at++] = was + 8192 + CPUTIME_ENV_MAX;
	}
	at += env_exec_preload(out + at, preload, was, app_preload);

	/* The program's seccomp filters: to the new runtime, or, for an image
	 * that will not load it, to the kernel right before the exec. */
	bare = env_exec_bare(nr, a);
	if (t->filters && bare)
		sandbox_to_kernel(t->filters, false);
	else if (t->filters && (fd = sandbox_to_env(t, was + 8192 + CPUTIME_ENV_MAX + SCHED_ENV_MAX)) >= 0)
		out[at++] = was + 8192 + CPUTIME_ENV_MAX + SCHED_ENV_MAX;
	/* The locks (the CPU claimed, the registry file ours) stay the
	 * process's across the exec for the new runtime, without a moment
	 * free; an image without the runtime runs undetached: they go. */
	p = was + 8192 + CPUTIME_ENV_MAX + SCHED_ENV_MAX + SANDBOX_ENV_MAX;
	if (!bare && !t->observed && (claims = claims_pass_on()) >= 0) {
		env_put_u64(stpcpy(p, ENV_CLAIMS "="), (uint64_t)claims, '\0');
		out[at++] = p;
	}
	out[at] = NULL;
	memcpy(b, a, sizeof(b));
	b[nr == SYS_execve ? 2 : 3] = (long)out;
	signal_fault_exec(true);
	ret = sys_call6(nr, b[0], b[1], b[2], b[3], b[4], b[5]);
	/* only reached when exec failed */
	signal_fault_exec(false);
	if (fd >= 0)
		sys_call1(SYS_close, fd);
	claims_exec_failed(claims);
	sys_call2(SYS_munmap, out, size);
	return ret;
}
