/* Description: a detached thread's clone3 and clone with a new stack that
 * cannot be written (unmapped, read-only, outside user space, or with no writable room
 * for the trap path's frame copy below its top) behave as natively: the
 * kernel makes the child, which dies of SIGSEGV at its first push (a
 * process child alone: the parent gets its pid and goes on; a thread
 * child: the whole process) or, if it never pushes, runs; an argument the
 * kernel rejects gives its error.  Before, the runtime's trap path wrote
 * the child's frame at that stack top inside its SIGSYS handler and the
 * parent died there.  Each role runs natively and under `detach run`
 * (DETACH_MODE: sud, rewrite); stdout and the exit status (128 + the signal) must be equal.
 * Timeout: 120 */
#include "helpers/t_detach.h"

#include <linux/sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

/* nr (SYS_clone or SYS_clone3) with a and b as its first two arguments
 * (clone: flags, stack, no ptid, ctid nor tls; clone3: its clone_args and
 * their size).  The child (rax 0) pushes once if push is set, then exits
 * with code 7 by a raw system call: it never returns into C. */
static long clone_raw(long nr, long a, long b, long push)
{
	long ret;
	register long r10 __asm__("r10") = 0;
	register long r8 __asm__("r8") = 0;

	__asm__ volatile("syscall\n\t"
			 "testq %%rax, %%rax\n\t"
			 "jnz 2f\n\t"
			 "testq %[push], %[push]\n\t"
			 "jz 1f\n\t"
			 "pushq $0\n"
			 "1:\tmovl $7, %%edi\n\t"
			 "movl $60, %%eax\n\t"     /* exit */
			 "syscall\n\t"
			 "ud2\n"
			 "2:"
			 : "=a"(ret)
			 : "0"(nr), "D"(a), "S"(b), "d"(0L), "r"(r10), "r"(r8), [push] "r"(push)
			 : "rcx", "r11", "memory");
	return ret;
}

enum stack_kind { UNMAPPED, READONLY, SMALL, KERNEL };
static const char *const kind_name[] = { "unmapped", "read-only", "4 KiB above a guard page", "in kernel space" };

/* [*lo, returned top): a stack of the kind; size in *size */
static uintptr_t stack_of_kind(enum stack_kind k, uintptr_t *lo, size_t *size)
{
	size_t n = 64 * 1024;
	char *p;

	switch (k) {
	case UNMAPPED:
		p = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		t_check(p != MAP_FAILED && munmap(p, n) == 0, "mmap, munmap");
		break;
	case READONLY:
		p = mmap(NULL, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		t_check(p != MAP_FAILED, "mmap");
		break;
	case SMALL:
		n = 4096;
		p = t_guarded_stack(n);
		t_check(p != NULL, "t_guarded_stack");
		break;
	default:
		n = 4096;
		p = (char *)0x800000000000ull;  /* TASK_SIZE and above: access_ok fails */
		break;
	}
	*lo = (uintptr_t)p;
	*size = n;
	return (uintptr_t)p + n;
}

static void report(const char *what, long pid)
{
	int st = 0;

	if (pid < 0) {
		printf("%s: error %s\n", what, strerrorname_np((int)-pid));
		return;
	}
	if (waitpid((pid_t)pid, &st, __WALL) != pid) {
		printf("%s: waitpid: %s\n", what, strerrorname_np(errno));
		return;
	}
	if (WIFEXITED(st))
		printf("%s: exited %d\n", what, WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		printf("%s: killed by %s\n", what, sigabbrev_np(WTERMSIG(st)));
	else
		printf("%s: wait status %#x\n", what, st);
}

/* The program's SIGSEGV handler (role procs-handler): the child's fault
 * ends it with 9, on the program's alternate stack */
static void segv_exit(int sig)
{
	(void)sig;
	syscall(SYS_exit, 9);
}

/* Process children (no CLONE_THREAD): each clone's child on a stack of
 * each kind, pushing or not; handler: with the program's SIGSEGV handler
 * on an alternate stack of its own, which such a child inherits */
static int role_procs(bool handler)
{
	static const struct {
		const char *name;
		long nr;
		unsigned long flags;
	} calls[] = {
		{ "clone3 CLONE_VM|CLONE_VFORK", SYS_clone3, CLONE_VM | CLONE_VFORK },
		{ "clone3 fork", SYS_clone3, 0 },
		{ "clone CLONE_VM|CLONE_VFORK", SYS_clone, CLONE_VM | CLONE_VFORK },
		{ "clone fork", SYS_clone, 0 },
	};
	char what[160];

	if (getenv("T_DETACHED"))
		t_check(t_find_proxy() > 0, "not detached");
	if (handler) {
		stack_t ss = { .ss_sp = malloc(65536), .ss_size = 65536 };
		struct sigaction sa = { .sa_handler = segv_exit, .sa_flags = SA_ONSTACK };

		t_check(ss.ss_sp && sigaltstack(&ss, NULL) == 0, "sigaltstack");
		t_check(sigaction(SIGSEGV, &sa, NULL) == 0, "sigaction");
	}
	for (size_t c = 0; c < sizeof(calls) / sizeof(calls[0]); c++) {
		for (enum stack_kind k = UNMAPPED; k <= KERNEL; k++) {
			for (long push = 0; push < 2; push++) {
				uintptr_t lo, top;
				size_t size;
				long pid;

				/* clone takes no size: it cannot be refused
				 * for one, and the kernel writes nothing */
				if (k == KERNEL && calls[c].nr == SYS_clone)
					continue;
				top = stack_of_kind(k, &lo, &size);
				snprintf(what, sizeof(what), "%s, stack %s, %s", calls[c].name, kind_name[k],
					 push ? "push" : "no push");
				if (calls[c].nr == SYS_clone3) {
					struct clone_args ca = {
						.flags = calls[c].flags, .exit_signal = SIGCHLD,
						.stack = lo, .stack_size = size,
					};
					pid = clone_raw(SYS_clone3, (long)&ca, sizeof(ca), push);
				} else {
					pid = clone_raw(SYS_clone, (long)(calls[c].flags | SIGCHLD), (long)top, push);
				}
				report(what, pid);
				fflush(stdout);
			}
		}
	}
	return t_done();
}

/* A thread child (CLONE_THREAD, sharing the TLS: a raw clone3) on a stack
 * of the kind: its push kills the process with SIGSEGV; if it does not
 * push, it ends alone.  The parent says it lived 2 s on. */
static int role_thread(enum stack_kind k, long push)
{
	unsigned long flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
	uintptr_t lo;
	size_t size;
	long ret;

	stack_of_kind(k, &lo, &size);
	struct clone_args ca = { .flags = flags, .stack = lo, .stack_size = size };
	ret = clone_raw(SYS_clone3, (long)&ca, sizeof(ca), push);
	printf("clone3: %s\n", ret > 0 ? "a tid" : strerrorname_np((int)-ret));
	fflush(stdout);
	for (int i = 0; i < 20; i++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	printf("lived on\n");
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const roles[] = {
		"procs", "procs-handler", "thread-unmapped-push", "thread-readonly-push", "thread-unmapped", "thread-small",
		"thread-kernel-push",
	};
	static char out[2][16384];
	struct rlimit no_core = { 0, 0 };

	if (argc > 1) {
		if (strcmp(argv[1], "procs") == 0)
			return role_procs(false);
		if (strcmp(argv[1], "procs-handler") == 0)
			return role_procs(true);
		if (strcmp(argv[1], "thread-unmapped-push") == 0)
			return role_thread(UNMAPPED, 1);
		if (strcmp(argv[1], "thread-readonly-push") == 0)
			return role_thread(READONLY, 1);
		if (strcmp(argv[1], "thread-unmapped") == 0)
			return role_thread(UNMAPPED, 0);
		if (strcmp(argv[1], "thread-small") == 0)
			return role_thread(SMALL, 0);
		if (strcmp(argv[1], "thread-kernel-push") == 0)
			return role_thread(KERNEL, 1);
		return 2;
	}
	setrlimit(RLIMIT_CORE, &no_core);       /* a SIGSEGV's status without a core */
	for (size_t r = 0; r < sizeof(roles) / sizeof(roles[0]); r++) {
		int st[2];

		for (int detached = 0; detached < 2; detached++) {
			FILE *o = tmpfile();
			size_t n;

			t_check(o != NULL, "tmpfile");
			if (!o)
				return t_done();
			st[detached] = t_run_role_to(roles[r], detached, 60, o);
			rewind(o);
			n = fread(out[detached], 1, sizeof(out[0]) - 1, o);
			out[detached][n] = 0;
			fclose(o);
			printf("%s, %s: status %d\n%s", roles[r], detached ? "detached" : "natively",
			       st[detached], out[detached]);
		}
		bool thread_dies = strstr(roles[r], "thread-") && strstr(roles[r], "-push") &&
				   !strstr(roles[r], "kernel");
		if (thread_dies)
			t_check(st[0] == 128 + SIGSEGV, "%s natively: status %d", roles[r], st[0]);
		else
			t_check(st[0] == 0, "%s natively: status %d", roles[r], st[0]);
		t_check(st[1] == st[0], "%s detached: status %d, natively %d", roles[r], st[1], st[0]);
		/* a dying process's parent may or may not have printed */
		t_check(thread_dies || strcmp(out[0], out[1]) == 0, "%s: stdout differs", roles[r]);
	}
	return t_done();
}
