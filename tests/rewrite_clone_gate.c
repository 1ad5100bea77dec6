/* Description: a detached thread's vfork at a rewritten site runs in the
 * trampoline's clone gate (trampoline.S), without a trap: glibc's vfork
 * site (`pop %rdi; mov $58,%eax; syscall; push %rdi`) is patched at its
 * first trap, and of 2 LOOPS vfork+_exit and LOOPS vfork+execve in the
 * default mode the kernel delivers SIGSYS for that first one only
 * (strace, si_syscall=__NR_vfork; without the timer below: under
 * ptrace each of its signals is a stop, and without --seccomp-bpf its
 * ticks take all the time the program has, natively too), and the statistics
 * count fewer than 100 traps in all while an ITIMER_REAL of 100 us
 * interrupts the loop with a handler (which makes a call itself).  Every
 * child runs off the detached CPU before any code of the program (the
 * kernel's getcpu in it, the exec'd image's sched_getcpu: its status); the parent
 * and the child find the callee-saved registers, xmm0-xmm15 and the 112
 * bytes of the red zone below the caller's rsp that natively survive
 * (all but the return address glibc pushes back) as the caller set them
 * before vfork.  So for forks (glibc's fork(), whose _Fork makes a
 * clone): of LOOPS / 2 the kernel delivers SIGSYS for the first only
 * (si_syscall=__NR_clone), each child runs off the detached CPU (its
 * status), and parent and child find the callee-saved registers as set
 * before the call (fork() is a C function: the red zone and xmm are not
 * kept natively).  And for clone3: of LOOPS / 4 pthread_create and as
 * many posix_spawn (of `self cpu`) the kernel delivers SIGSYS for the
 * first clone3 only, and each thread (the kernel's getcpu) and spawned
 * image (its status) runs off the detached CPU.  The same role exits 0
 * natively and in sud mode.  And a handler on top of a forwarded read (on
 * the runtime's own stack) makes a vfork and a fork through patched sites
 * whose children exit with their own status, natively and in both modes
 * (the clone gate there killed the process with SIGSEGV).
 * Timeout: 120 */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>

#define LOOPS 2000

/* xmm0-xmm15 as vfork_regs loads and checks them */
_Alignas(16) unsigned char xmm_pat[16][16];

/* whether vfork_regs checks the red zone and xmm0-15: vfork's, not
 * fork's (a C function, whose frame natively lies there and which may
 * use any caller-saved register) */
int check_red_zone = 1;

/* long vfork_regs(long *bad, pid_t (*fn)(void)): glibc's vfork() (or fn) with rbx rbp r12-r15,
 * xmm0-xmm15 and the red zone [rsp-128, rsp-16) of the caller set to known
 * values before, checked after it, in both child and parent.  The parent
 * stores its count of mismatches in *bad (r15 carries the pointer across:
 * a wrong r15 faults) and returns the pid (or -1); the child _exits with
 * its count (raw exit_group: nothing on the stack). */
long vfork_regs(long *bad, pid_t (*fn)(void));
__asm__(".text\n"
	".p2align 4\n"
	"vfork_regs:\n"
	"	push %rbx\n push %rbp\n push %r12\n push %r13\n push %r14\n push %r15\n"
	"	mov %rdi, %r15\n"
	"	movabs $0x1111111111111111, %rbx\n"
	"	movabs $0x2222222222222222, %rbp\n"
	"	movabs $0x3333333333333333, %r12\n"
	"	movabs $0x4444444444444444, %r13\n"
	"	movabs $0x5555555555555555, %r14\n"
	"	.irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
	"	movdqu xmm_pat+16*\\i(%rip), %xmm\\i\n"
	"	.endr\n"
	"	.irp i,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16\n"
	"	lea \\i(%rbx), %rax\n"
	"	mov %rax, -8*\\i(%rsp)\n"
	"	.endr\n"
	"	call *%rsi\n"                         /* vfork@GOTPCREL: bound at load, no lazy resolver below rsp */
	"	mov %rax, %r10\n"
	"	xor %ecx, %ecx\n"
	"	movabs $0x1111111111111111, %rax\n cmp %rax, %rbx\n je 1f\n inc %ecx\n1:\n"
	"	movabs $0x2222222222222222, %rax\n cmp %rax, %rbp\n je 1f\n inc %ecx\n1:\n"
	"	movabs $0x3333333333333333, %rax\n cmp %rax, %r12\n je 1f\n inc %ecx\n1:\n"
	"	movabs $0x4444444444444444, %rax\n cmp %rax, %r13\n je 1f\n inc %ecx\n1:\n"
	"	movabs $0x5555555555555555, %rax\n cmp %rax, %r14\n je 1f\n inc %ecx\n1:\n"
	"	cmpl $0, check_red_zone(%rip)\n"
	"	je 3f\n"
	"	.irp i,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16\n"
	"	lea \\i(%rbx), %rax\n"
	"	cmp %rax, -8*\\i(%rsp)\n je 1f\n inc %ecx\n1:\n"
	"	.endr\n"
	"	.irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
	"	pcmpeqb xmm_pat+16*\\i(%rip), %xmm\\i\n"
	"	pmovmskb %xmm\\i, %eax\n"
	"	cmp $0xffff, %eax\n je 1f\n inc %ecx\n1:\n"
	"	.endr\n"
	"3:\n"
	"	test %r10, %r10\n"
	"	jnz 2f\n"
	"	mov %ecx, %edi\n"
	"	mov $231, %eax\n"                 /* exit_group: the child's own */
	"	syscall\n"
	"	ud2\n"
	"2:	mov %rcx, (%r15)\n"
	"	mov %r10, %rax\n"
	"	pop %r15\n pop %r14\n pop %r13\n pop %r12\n pop %rbp\n pop %rbx\n"
	"	ret\n");

static atomic_long ticks;

static void tick(int sig)
{
	(void)sig;
	(void)getppid();                /* a call of its own, at a rewritten site */
	atomic_fetch_add(&ticks, 1);
}

static int status_of(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return t_exit_code(st);
}

/* vfork and _exit: the child's CPU into *cpu, the parent's memory.  The
 * kernel's getcpu, not glibc's sched_getcpu(), which reads the rseq area
 * in the TLS that a vfork child shares with its parent: the parent's CPU */
static __attribute__((noinline)) pid_t vfork_cpu(volatile int *cpu)
{
	pid_t pid = vfork();

	if (pid == 0) {
		unsigned c = 0;
		*cpu = syscall(SYS_getcpu, &c, NULL, NULL) == 0 ? (int)c : -1;
		_exit(0);
	}
	return pid;
}

/* vfork and execve of `self cpu` (whose status is its CPU) */
static __attribute__((noinline)) pid_t vfork_exec(const char *self)
{
	pid_t pid = vfork();

	if (pid == 0) {
		execl(self, self, "cpu", (char *)NULL);
		_exit(255);
	}
	return pid;
}

/* A thread's body: its CPU (the kernel's) into *arg, and a callee-saved
 * check of its own start is glibc's (start_thread): nothing to check but
 * that it runs and where */
static void *thread_cpu(void *arg)
{
	unsigned c = 0;

	*(volatile int *)arg = syscall(SYS_getcpu, &c, NULL, NULL) == 0 ? (int)c : -1;
	return (void *)0x5a;
}

extern char **environ;

/* The role, run natively, in sud mode and in rewrite mode: LOOPS
 * vfork+_exit (through vfork_regs) and LOOPS vfork+execve of `self cpu`,
 * under a 100 us ITIMER_REAL.  check_cpu: the caller is detached, every
 * child must run on another CPU.  Exit status: 0, or the bits of what went
 * wrong (printed too). */
static int vfork_role(const char *self, bool check_cpu)
{
	struct sigaction sa = { .sa_handler = tick, .sa_flags = SA_RESTART };
	struct itimerval it = { { 0, 100 }, { 0, 100 } };
	volatile int child_cpu = -1;
	int mine = sched_getcpu(), bad_parent = 0, bad_child = 0, same_cpu = 0, bad_exec = 0;

	for (int r = 0; r < 16; r++)
		for (int b = 0; b < 16; b++)
			xmm_pat[r][b] = (unsigned char)(0x40 + 16 * r + b);
	sigaction(SIGALRM, &sa, NULL);
	if (!getenv("T_NO_TIMER"))
		setitimer(ITIMER_REAL, &it, NULL);
	for (int i = 0; i < LOOPS; i++) {
		long bad = -1;
		pid_t pid = (pid_t)vfork_regs(&bad, vfork);
		int st = pid > 0 ? status_of(pid) : -1;
		if (bad != 0)
			bad_parent++;
		if (st != 0)
			bad_child++;
		/* the child's CPU, written in the shared memory before it exits */
		child_cpu = -1;
		pid = vfork_cpu(&child_cpu);
		if (pid < 0 || status_of(pid) != 0 || child_cpu < 0 || (check_cpu && child_cpu == mine))
			same_cpu++;
		pid = vfork_exec(self);
		st = pid > 0 ? status_of(pid) : -1;
		if (st < 0 || st >= 255 || (check_cpu && st == mine))
			bad_exec++;
	}
	/* fork (glibc: _Fork's clone) */
	int bad_fork = 0;
	check_red_zone = 0;
	for (int i = 0; i < LOOPS / 4; i++) {
		long bad = -1;
		pid_t pid = (pid_t)vfork_regs(&bad, fork);
		int st = pid > 0 ? status_of(pid) : -1;
		if (bad != 0 || st != 0)
			bad_fork++;
		pid = fork();
		if (pid == 0)
			_exit(sched_getcpu());
		st = pid > 0 ? status_of(pid) : -1;
		if (st < 0 || (check_cpu && st == mine))
			bad_fork++;
	}
	check_red_zone = 1;
	/* clone3: pthread_create (a thread on its own stack and TLS) and
	 * posix_spawn (a vfork child on its own stack) */
	int bad_clone3 = 0;
	for (int i = 0; i < LOOPS / 4; i++) {
		volatile int tcpu = -1;
		pthread_t th;
		void *ret = NULL;
		if (pthread_create(&th, NULL, thread_cpu, (void *)&tcpu) != 0 || pthread_join(th, &ret) != 0 ||
		    ret != (void *)0x5a || tcpu < 0 || (check_cpu && tcpu == mine))
			bad_clone3++;
		pid_t pid;
		char *args[] = { (char *)self, (char *)"cpu", NULL };
		int st = posix_spawn(&pid, self, NULL, NULL, args, environ) == 0 ? status_of(pid) : -1;
		if (st < 0 || st >= 255 || (check_cpu && st == mine))
			bad_clone3++;
	}
	printf("clone3: %d pthread_create and posix_spawn: %d wrong\n", LOOPS / 4, bad_clone3);
	printf("fork: %d loops: %d wrong (registers, or a child on this CPU)\n", LOOPS / 4, bad_fork);
	setitimer(ITIMER_REAL, &(struct itimerval){ { 0, 0 }, { 0, 0 } }, NULL);
	printf("vfork: CPU %d, %d loops: registers or stack wrong in %d parents, %d children; %d children "
	       "on this CPU (or lost), %d exec'd children on it (or failed); %ld SIGALRM handled\n", mine, LOOPS,
	       bad_parent, bad_child, same_cpu, bad_exec, atomic_load(&ticks));
	return (bad_parent ? 1 : 0) | (bad_child ? 2 : 0) | (same_cpu ? 4 : 0) | (bad_exec ? 8 : 0) |
	       (!getenv("T_NO_TIMER") && atomic_load(&ticks) < 10 ? 16 : 0) | (bad_fork ? 32 : 0) |
	       (bad_clone3 ? 64 : 0);
}

/* The role "handler": a handler that runs on top of a forwarded call's
 * wait (on the runtime's own stack: no SA_ONSTACK) makes a vfork and a
 * fork.  Their sites are patched first (one of each in the loop before),
 * so that the handler's calls come through the stub; the runtime sends
 * them to the trap path (the gate's frame there would lie right below the
 * handler's, where the vfork child writes).  Each child's status and the
 * read's byte say whether all went right. */
static int pipe_fd[2];
static atomic_int handler_vfork = -1, handler_fork = -1, handler_done;

static void in_read_handler(int sig)
{
	(void)sig;
	pid_t pid = vfork();

	if (pid == 0)
		_exit(7);
	handler_vfork = pid > 0 ? status_of(pid) : -1;
	pid = fork();
	if (pid == 0)
		_exit(8);
	handler_fork = pid > 0 ? status_of(pid) : -1;
	atomic_store(&handler_done, 1);
}

static void *signaller(void *arg)
{
	pid_t tid = *(pid_t *)arg;

	for (int i = 0; i < 200 && !atomic_load(&handler_done); i++) {
		usleep(10000);          /* the detached thread is in read() by now */
		if (i % 20 == 0)
			syscall(SYS_tgkill, getpid(), tid, SIGUSR1);
	}
	return write(pipe_fd[1], "x", 1) == 1 ? NULL : arg;
}

static int handler_role(void)
{
	struct sigaction sa = { .sa_handler = in_read_handler, .sa_flags = SA_RESTART };
	pid_t tid = (pid_t)syscall(SYS_gettid), pid;
	pthread_t th;
	char c = 0;

	for (int i = 0; i < 3; i++) {   /* the sites patched */
		status_of(vfork_cpu(&(int){ 0 }));
		if ((pid = fork()) == 0)
			_exit(0);
		status_of(pid);
	}
	if (pipe(pipe_fd) || sigaction(SIGUSR1, &sa, NULL) || pthread_create(&th, NULL, signaller, &tid))
		return 90;
	ssize_t n = read(pipe_fd[0], &c, 1);
	pthread_join(th, NULL);
	printf("handler on the runtime's stack: vfork child status %d, fork child status %d, read %zd '%c'\n",
	       handler_vfork, handler_fork, n, c ? c : '?');
	return handler_vfork == 7 && handler_fork == 8 && n == 1 && c == 'x' ? 0 : 91;
}

int main(int argc, char **argv)
{
	char self[4096], cmd[8192], trace[128], stats[128];
	const char *bin = getenv("DETACH_BIN");
	int st, vfork_traps, fork_traps, clone3_traps;

	if (argc > 1 && !strcmp(argv[1], "cpu"))
		return sched_getcpu();
	if (!t_self_exe(self, sizeof(self)))
		t_skip("no /proc/self/exe");
	if (argc > 1 && !strcmp(argv[1], "vfork"))
		return vfork_role(self, argc > 2);
	if (argc > 1 && !strcmp(argv[1], "handler"))
		return handler_role();
	if (!bin)
		t_skip("DETACH_BIN is not set: run through tests/run.sh");
	if (system("strace -V >/dev/null 2>&1") != 0)
		t_skip("strace is not installed (tools/install-deps.sh)");

	snprintf(cmd, sizeof(cmd), "%s vfork", self);
	st = t_run_status(cmd);
	t_check(st == 0, "natively: status %d", st);
	snprintf(cmd, sizeof(cmd), "%s run -c 1 --mode sud -- %s vfork detached", bin, self);
	st = t_run_status(cmd);
	t_check(st == 0, "sud mode: status %d", st);

	/* the default mode (rewrite), under the timer's storm */
	snprintf(stats, sizeof(stats), "/tmp/detach-test-%d-gate.json", getpid());
	snprintf(cmd, sizeof(cmd), "%s run -c 1 --stats %s -- %s vfork detached", bin, stats, self);
	st = t_run_status(cmd);
	t_check(st == 0, "the default mode: status %d", st);
	t_check(t_stats_has(stats, "\"mode\": \"rewrite\""), "the default mode was not rewrite");
	long long traps = t_stats_value(stats, "traps");
	printf("the default mode, under the timer: %lld traps in all (statistics)\n", traps);
	t_check(traps >= 0 && traps < 100, "%lld traps for %d vfork, %d fork and %d clone3 calls", traps, 3 * LOOPS, LOOPS / 2,
		LOOPS / 2);
	unlink(stats);

	/* a vfork and a fork in a handler on top of a forwarded read */
	for (int m = 0; m < 3; m++) {
		static const char *const how[] = { "", "run -c 1 --mode sud -- ", "run -c 1 -- " };
		snprintf(cmd, sizeof(cmd), "%s%s%s%s handler", m ? bin : "", m ? " " : "", how[m], self);
		st = t_run_status(cmd);
		t_check(st == 0, "a vfork and a fork in a handler on top of a forwarded read (%s): status %d",
			m == 0 ? "natively" : m == 1 ? "sud mode" : "the default mode", st);
	}

	/* and under strace, for the kernel's count of SIGSYS: without the
	 * timer, whose signals under ptrace are each a stop of the tracee
	 * and make the run long (with --seccomp-bpf its interrupts of the
	 * proxy once piled up there until a SIGSEGV: run_interrupt_resent) */
	snprintf(trace, sizeof(trace), "/tmp/detach-test-%d-gate.strace", getpid());
	snprintf(cmd, sizeof(cmd),
		 "T_NO_TIMER=1 strace -f --seccomp-bpf -qq -e trace=none -e signal=SIGSYS -o %s %s run -c 1 "
		 "--stats %s -- %s vfork detached", trace, bin, stats, self);
	st = t_run_status(cmd);
	t_check(st == 0, "the default mode under strace: status %d", st);
	vfork_traps = t_strace_sigsys(trace, "si_syscall=__NR_vfork");
	fork_traps = t_strace_sigsys(trace, "si_syscall=__NR_clone,");
	clone3_traps = t_strace_sigsys(trace, "si_syscall=__NR_clone3");
	printf("the default mode: the kernel delivered SIGSYS for %d of %d vfork calls\n", vfork_traps,
	       3 * LOOPS);
	t_check(vfork_traps == 1, "%d vfork calls trapped, want 1 (the site's patch)", vfork_traps);
	printf("the default mode: the kernel delivered SIGSYS for %d of %d fork (clone) calls\n", fork_traps,
	       LOOPS / 2);
	t_check(fork_traps == 1, "%d fork calls trapped, want 1 (the site's patch)", fork_traps);
	printf("the default mode: the kernel delivered SIGSYS for %d of %d clone3 calls\n", clone3_traps,
	       LOOPS / 2);
	t_check(clone3_traps == 1, "%d clone3 calls trapped, want 1 (the site's patch)", clone3_traps);
	unlink(stats);
	unlink(trace);
	return t_done();
}
