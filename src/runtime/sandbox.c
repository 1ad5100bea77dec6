/* The program's seccomp filters, kept and judged by the runtime.
 *
 * The rule: a filter the program installs applies to the calls
 * the program makes, wherever they run, and never to the runtime's own
 * machinery.  A kernel filter on a detached thread would also judge the
 * runtime's calls there (the trap's rt_sigreturn, rewrite mode's patching)
 * and, mirrored onto the proxy, its waits; an allowlist sandbox then kills
 * the process for calls the program never made.  So no kernel filter goes
 * on a detached or watched thread (every call of which the runtime sees)
 * nor on the runtime's threads: the filters are copied at install into
 * memory of the runtime's (read-only from then on, shared by the threads
 * and children that inherit them, never freed) and run in user space
 * (cbpf.c) on every call the program makes, before it runs anywhere:
 * locally, emulated or forwarded.
 *
 * The kernel's semantics, kept: every filter runs, newest first; the
 * action of highest precedence wins (KILL_PROCESS, KILL_THREAD, TRAP,
 * ERRNO, USER_NOTIF, TRACE, LOG, ALLOW: the smallest as a signed number),
 * with the data of the newest filter that returned it; the action is
 * carried out as kernel/seccomp.c carries it out.  Refused at install, with
 * a line on stderr and EINVAL (what a kernel without the feature says):
 * SECCOMP_FILTER_FLAG_NEW_LISTENER (a supervisor process would answer
 * calls the runtime has to carry out) and SECCOMP_FILTER_FLAG_TSYNC in a
 * program with several threads (the kernel's would reach the runtime's
 * threads; one the runtime does not see cannot be given the filter).
 *
 * Not a security boundary under detach: the program's code can reach the
 * runtime's memory and its system call stubs.  The filter is what the
 * program observes, as natively; docs/runtime.md says what differs. */
#include "runtime/sandbox.h"
#include "runtime/config.h"
#include "runtime/env.h"
#include "runtime/signals.h"
#include "runtime/sud.h"
#include "runtime/uaccess.h"
#include "lib/contract.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <stddef.h>

#define MAX_INSNS_PER_PATH 32768        /* kernel/seccomp.c: 2^18 bytes of instructions */
#define FILTER_PENALTY 4                /* counted per filter on the path */
#define MAX_ERRNO 4095
#define FLAGS_KNOWN (SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_LOG | \
		     SECCOMP_FILTER_FLAG_SPEC_ALLOW | SECCOMP_FILTER_FLAG_NEW_LISTENER | \
		     SECCOMP_FILTER_FLAG_TSYNC_ESRCH | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)

/* Whether the calling thread is the program's only one (KILL_THREAD then
 * kills the process; TSYNC has no other thread to reach).  The runtime's
 * own threads (proxies, the channel watcher, the CPU-limit watchdog) are
 * named detach-*. */
static bool only_program_thread(void)
{
	char buf[4096], path[64] = "/proc/self/task/", comm[8];
	long fd = sys_call3(SYS_open, path, O_RDONLY | O_DIRECTORY, 0), n;
	int others = 0;

	if (fd < 0)
		return true;
	while ((n = sys_call3(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n; ) {
			struct dirent64 *e = (struct dirent64 *)(buf + off);
			size_t at = 16;         /* after "/proc/self/task/" */
			long c, got;

			off += e->d_reclen;
			if (e->d_name[0] == '.')
				continue;
			for (const char *s = e->d_name; *s && at < sizeof(path) - 6; )
				path[at++] = *s++;
			for (const char *s = "/comm"; *s; )
				path[at++] = *s++;
			path[at] = '\0';
			c = sys_call3(SYS_open, path, O_RDONLY, 0);
			if (c < 0)
				continue;       /* gone meanwhile */
			got = sys_call3(SYS_read, c, comm, 7);
			sys_call1(SYS_close, c);
			if (got == 7 && !__builtin_memcmp(comm, "detach-", 7))
				continue;
			others++;
		}
	}
	sys_call1(SYS_close, fd);
	return others <= 1;     /* the caller itself */
}

/* f's always-allowed calls, with those of the filters before it (the
 * kernel's seccomp_cache_prepare_bitmap). */
static void cache_always(struct sandbox_filter *f)
{
	for (int nr = 0; nr < DT_NR_SYSCALLS; nr++) {
		bool all = (!f->prev || (f->prev->always[nr / 64] >> (nr % 64) & 1)) &&
			   cbpf_allows_always(f->insns, f->len, nr, AUDIT_ARCH_X86_64);
		if (all)
			f->always[nr / 64] |= 1ull << (nr % 64);
	}
}

long sandbox_install(struct dt_thread *t, unsigned long flags, const void *prog)
{
	struct sock_fprog fp;
	struct sandbox_filter *f;
	size_t size;
	long total, err;

	/* seccomp_set_mode_filter: the flags first */
	if (flags & ~(unsigned long)FLAGS_KNOWN)
		return -EINVAL;
	if ((flags & SECCOMP_FILTER_FLAG_TSYNC) && (flags & SECCOMP_FILTER_FLAG_NEW_LISTENER) &&
	    !(flags & SECCOMP_FILTER_FLAG_TSYNC_ESRCH))
		return -EINVAL;
	if ((flags & SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV) && !(flags & SECCOMP_FILTER_FLAG_NEW_LISTENER))
		return -EINVAL;
	if (flags & SECCOMP_FILTER_FLAG_NEW_LISTENER) {
		dt_warn("the program asks for a seccomp filter with a listener (SECCOMP_FILTER_FLAG_NEW_LISTENER), "
			"which detach cannot keep (the runtime carries out the calls a supervisor would answer): refused with EINVAL");
		return -EINVAL;
	}
	if ((flags & SECCOMP_FILTER_FLAG_TSYNC) && !only_program_thread()) {
		dt_warn("the program asks for a seccomp filter on all its threads (SECCOMP_FILTER_FLAG_TSYNC) "
			"while it has several, which detach cannot do (the kernel's would reach the runtime's threads, "
			"and a thread it does not see cannot be given one): refused with EINVAL");
		return -EINVAL;
	}
	/* seccomp_prepare_filter */
	if (copy_from_user(&fp, prog, sizeof(fp)))
		return -EFAULT;
	if (fp.len == 0 || fp.len > BPF_MAXINSNS)
		return -EINVAL;
	if (sys_call2(SYS_prctl, PR_GET_NO_NEW_PRIVS, 0) != 1 && !thread_capable(CAP_SYS_ADMIN))
		return -EACCES;
	size = sizeof(*f) + fp.len * sizeof(struct sock_filter);
	f = (struct sandbox_filter *)sys_call6(SYS_mmap, 0, size, PROT_READ | PROT_WRITE,
					       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if ((unsigned long)f > -4096ul)
		return -ENOMEM;
	err = copy_from_user(f->insns, fp.filter, fp.len * sizeof(struct sock_filter));
	if (!err)
		err = cbpf_check(f->insns, fp.len);
	/* seccomp_attach_filter: the instructions of every filter on the path */
	total = fp.len;
	for (const struct sandbox_filter *p = t->filters; p; p = p->prev)
		total += p->len + FILTER_PENALTY;
	if (!err && total > MAX_INSNS_PER_PATH)
		err = -ENOMEM;
	if (err) {
		sys_call2(SYS_munmap, f, size);
		return err;
	}
	f->len = fp.len;
	f->flags = (uint32_t)flags;
	f->prev = t->filters;
	cache_always(f);
	sys_call3(SYS_mprotect, f, size, PROT_READ);
	t->filters = f;         /* read by this thread only (and its children to come) */
	return 0;
}

/* ---- threads the runtime does not see -------------------------------------- */

extern const char dt_native_syscall[] DT_HIDDEN;
#define PREFIX_LEN 8

/* The runtime's own calls on such a thread (the return from the trap or
 * the clone that made it, a SIGTRAP handler's) come from its stubs, the
 * section detach_allow; a rewritten site's call comes from one of them too,
 * dt_native_syscall, and is the program's.  So each filter goes on behind
 * a prefix: from the stubs but dt_native_syscall, ALLOW; else A = 0, as the
 * program starts, and the program itself (its jumps are relative). */
static unsigned runtime_prefix(struct sock_filter *p)
{
	uint64_t lo = (uintptr_t)__start_detach_allow, hi = (uintptr_t)__stop_detach_allow;
	uint32_t native = (uint32_t)((uintptr_t)dt_native_syscall + 2);
	const uint32_t ip_lo = offsetof(struct seccomp_data, instruction_pointer), ip_hi = ip_lo + 4;

	if (lo >> 32 != (hi - 1) >> 32)
		return 0;               /* not within one 4 GiB window: none */
	p[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ip_hi);
	p[1] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(lo >> 32), 0, 5);
	p[2] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ip_lo);
	p[3] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)lo, 0, 3);
	p[4] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)hi, 2, 0);
	p[5] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, native, 1, 0);
	p[6] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	p[7] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_IMM, 0);
	return PREFIX_LEN;
}

/* Oldest first, as the program installed them. */
void sandbox_to_kernel(const struct sandbox_filter *f, bool prefix)
{
	struct sock_fprog fp;
	struct sock_filter *p;
	size_t size;
	unsigned n;
	long r;

	if (!f)
		return;
	sandbox_to_kernel(f->prev, prefix);
	size = (f->len + PREFIX_LEN) * sizeof(struct sock_filter);
	p = (struct sock_filter *)sys_call6(SYS_mmap, 0, size, PROT_READ | PROT_WRITE,
					    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if ((unsigned long)p > -4096ul) {
		dt_warn("cannot map a seccomp filter for tid %ld: the program's filter is lost on it",
			sys_call0(SYS_gettid));
		return;
	}
	n = prefix && f->len + PREFIX_LEN <= BPF_MAXINSNS ? runtime_prefix(p) : 0;
	memcpy(p + n, f->insns, f->len * sizeof(struct sock_filter));
	fp.len = (unsigned short)(n + f->len);
	fp.filter = p;
	r = sys_call3(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
		      f->flags & (SECCOMP_FILTER_FLAG_LOG | SECCOMP_FILTER_FLAG_SPEC_ALLOW), &fp);
	if (r < 0)
		dt_warn("cannot install the program's seccomp filter on tid %ld: %s",
			sys_call0(SYS_gettid), strerror((int)-r));
	sys_call2(SYS_munmap, p, size);
}

/* ---- across execve ------------------------------------------------------------ */

/* The filters, oldest first, as records { flags, len, insns } in a memfd
 * that the new image inherits (no close-on-exec) and its runtime reads
 * back (sandbox_from_env): an environment string is limited to 128 KiB,
 * a path of filters to 256. */
static bool write_filters(long fd, const struct sandbox_filter *f)
{
	uint32_t head[2];

	if (!f)
		return true;
	if (!write_filters(fd, f->prev))
		return false;
	head[0] = f->flags;
	head[1] = f->len;
	return sys_call3(SYS_write, fd, head, sizeof(head)) == sizeof(head) &&
	       sys_call3(SYS_write, fd, f->insns, f->len * sizeof(struct sock_filter)) ==
		       (long)(f->len * sizeof(struct sock_filter));
}

long sandbox_to_env(struct dt_thread *t, char *buf)
{
	long fd = sys_call2(SYS_memfd_create, "detach-seccomp", 0);

	if (fd < 0 || !write_filters(fd, t->filters)) {
		dt_warn("cannot pass the program's seccomp filters on to the new image (%s): "
			"it runs without them", strerror(fd < 0 ? (int)-fd : EIO));
		if (fd >= 0)
			sys_call1(SYS_close, fd);
		return -1;
	}
	env_put_u64(stpcpy(buf, ENV_SECCOMP "="), (uint64_t)fd, '\0');
	return fd;
}

const struct sandbox_filter *sandbox_from_env(const char *v)
{
	const struct sandbox_filter *top = NULL;
	uint32_t head[2];
	long fd, off = 0;
	char *end;

	if (!v)
		return NULL;
	fd = strtol(v, &end, 10);
	if (*end || fd < 0)
		return NULL;
	while (sys_call4(SYS_pread64, fd, head, sizeof(head), off) == sizeof(head)) {
		size_t len = head[1] * sizeof(struct sock_filter), size = sizeof(struct sandbox_filter) + len;
		struct sandbox_filter *f = NULL;

		if (head[1] > 0 && head[1] <= BPF_MAXINSNS)     /* the length checked before it is mapped */
			f = (struct sandbox_filter *)sys_call6(SYS_mmap, 0, size, PROT_READ | PROT_WRITE,
							       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (!f || (unsigned long)f > -4096ul ||
		    sys_call4(SYS_pread64, fd, f->insns, len, off + (long)sizeof(head)) != (long)len ||
		    cbpf_check(f->insns, head[1])) {
			dt_warn("the seccomp filters of the image before execve cannot be read back: "
				"the program runs without them");
			top = NULL;
			break;
		}
		f->flags = head[0];
		f->len = head[1];
		f->prev = top;
		cache_always(f);
		sys_call3(SYS_mprotect, f, size, PROT_READ);
		top = f;
		off += (long)(sizeof(head) + len);
	}
	sys_call1(SYS_close, fd);
	return top;
}

/* ---- the actions ----------------------------------------------------------- */

/* SECCOMP_RET_TRAP: a SIGSYS that the kernel forces on the thread (blocked
 * or ignored, it takes the default action), with si_code SYS_SECCOMP, the
 * filter's data in si_errno, and the registers of the call: rax holds its
 * number (the kernel's syscall_rollback).  The handler may write a result
 * into rax, which is then the call's. */
static long trap(long nr, uint32_t data, uintptr_t ip, ucontext_t *uc)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = SIGSYS;
	si.si_code = 1;                         /* SYS_SECCOMP */
	si.si_errno = (int)data;
	si.si_call_addr = (void *)ip;
	si.si_syscall = (int)nr;
	si.si_arch = AUDIT_ARCH_X86_64;
	uc->uc_mcontext.gregs[REG_RAX] = nr;
	signal_deliver_app(&dt_app_sigsys, SIGSYS, &si, uc, true);
	return uc->uc_mcontext.gregs[REG_RAX];
}

enum sandbox_verdict sandbox_judge(struct dt_thread *t, long nr, const long a[6], uintptr_t ip,
				   ucontext_t *uc, long *ret)
{
	struct seccomp_data d;
	uint32_t best = SECCOMP_RET_ALLOW, data;

	if ((unsigned long)nr < DT_NR_SYSCALLS && (t->filters->always[nr / 64] >> (nr % 64) & 1))
		return SANDBOX_RUN;     /* every filter allows it, whatever the arguments */
	/* each field written: no memset, the path calls nothing */
	d.nr = (int)nr;
	d.arch = AUDIT_ARCH_X86_64;
	d.instruction_pointer = ip;
	for (int i = 0; i < 6; i++)
		d.args[i] = (uint64_t)a[i];
	for (const struct sandbox_filter *f = t->filters; f; f = f->prev) {
		uint32_t r = cbpf_run(f->insns, &d);

		if ((int32_t)(r & SECCOMP_RET_ACTION_FULL) < (int32_t)(best & SECCOMP_RET_ACTION_FULL))
			best = r;
	}
	data = best & SECCOMP_RET_DATA;
	switch (best & SECCOMP_RET_ACTION_FULL) {
	case SECCOMP_RET_ALLOW:
	case SECCOMP_RET_LOG:                   /* no audit record: docs/runtime.md */
		return SANDBOX_RUN;
	case SECCOMP_RET_ERRNO:
		*ret = -(long)(data > MAX_ERRNO ? MAX_ERRNO : data);
		return SANDBOX_DONE;
	case SECCOMP_RET_TRACE:                 /* no tracer asked for it */
	case SECCOMP_RET_USER_NOTIF:            /* no listener: refused at install */
		*ret = -ENOSYS;
		return SANDBOX_DONE;
	case SECCOMP_RET_TRAP:
		if (!uc)                        /* the trampoline: come back with a frame */
			*ret = DT_NEED_TRAP;
		else
			*ret = trap(nr, data, ip, uc);
		return SANDBOX_DONE;
	case SECCOMP_RET_KILL_THREAD:
		if (!only_program_thread())
			return SANDBOX_END_THREAD;
		/* the last thread takes the process with it */
		__attribute__((fallthrough));
	default:                                /* KILL_PROCESS, and unknown actions */
		signal_die(SIGSYS);
		sys_call1(SYS_exit_group, 128 + SIGSYS);        /* not reached */
		return SANDBOX_DONE;
	}
}
