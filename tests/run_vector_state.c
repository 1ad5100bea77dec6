/* Description: the x87 control word, MXCSR and every ymm register hold
 * across 1,000,000 forwarded calls (getppid from one inline `syscall`) and
 * 10,000 timed waits (nanosleep, served by the runtime) made
 * under signal load (a SIGALRM itimer every 100 us whose handler uses the
 * vector registers itself), natively and detached; and, for 6 s (1 s
 * natively), across forwarded calls while the program has its own
 * alternate signal stack and the handler, SA_ONSTACK and SA_NODEFER, makes
 * a call too: in sud mode each call's trap moves onto the runtime's stack
 * and returns from a copy of its frame there, and the handler's call moves
 * to the same place, which it may not while the copy or the moved trap's
 * way back is in use (a handler's call taken just after the trap's end
 * wrote over the copy's XSAVE area: the kernel's XRSTOR check failed and
 * the ymm upper halves were lost, ~1 call a second; in rewrite mode, a
 * handler's call nested in another's move crashed).  Where tracefs is
 * there, the kernel's x86_fpu:x86_fpu_xstate_check_failed tracepoint on the
 * thread must not fire either.
 * Timeout: 600 */
#include "helpers/t_altstack.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

#define CALLS 1000000
#define SLEEPS 10000
#define ALTSTACK (64 * 1024)

/* long vec_loop(long n, const uint8_t *want, uint8_t *got, long expect,
 *               long nr, long arg0)
 * Loads ymm0-15 from want[0..511], records the x87 control word and MXCSR
 * as they are into want[512..519], then n times: the call nr(arg0, 0)
 * (expecting the result expect; when expect is 0, a sleep, also -EINTR:
 * the timer interrupts it), and every ymm,
 * the control word and MXCSR stored to got[] and compared with want[]
 * (general registers only).  0: all held; i + 1: call i changed something
 * (got[] says what); -(i + 1): call i returned another value. */
long vec_loop(long n, uint8_t *want, uint8_t *got, long expect, long nr, long arg0);
__asm__(
	".text\n"
	".globl vec_loop\n"
	"vec_loop:\n"
	"	push %rbx; push %rbp; push %r12; push %r13; push %r14; push %r15\n"
	"	mov %rdi, %r12; mov %rsi, %r13; mov %rdx, %r14; mov %rcx, %r15\n"
	"	mov %r8, %rbp; push %r9\n"
	"	.irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
	"	vmovdqu \\i*32(%r13), %ymm\\i\n"
	"	.endr\n"
	"	fnstcw 512(%r13); movw $0, 514(%r13); stmxcsr 516(%r13)\n"
	"	xor %ebx, %ebx\n"
	"1:	cmp %r12, %rbx\n"
	"	je 3f\n"
	"	mov %rbp, %rax; mov (%rsp), %rdi; xor %esi, %esi\n"
	"	syscall\n"
	"	cmp %r15, %rax\n"
	"	je 6f\n"
	"	test %r15, %r15\n"                      /* expect 0: a sleep, EINTR too */
	"	jnz 4f\n"
	"	cmp $-4, %rax\n"
	"	jne 4f\n"
	"6:\n"
	"	.irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
	"	vmovdqu %ymm\\i, \\i*32(%r14)\n"
	"	.endr\n"
	"	fnstcw 512(%r14); movw $0, 514(%r14); stmxcsr 516(%r14)\n"
	"	mov %r13, %rsi; mov %r14, %rdi; mov $65, %ecx\n"
	"	repe cmpsq\n"
	"	jne 2f\n"
	"	inc %rbx\n"
	"	jmp 1b\n"
	"2:	lea 1(%rbx), %rax\n"
	"	jmp 5f\n"
	"3:	xor %eax, %eax\n"
	"	jmp 5f\n"
	"4:	lea 1(%rbx), %rax\n"
	"	neg %rax\n"
	"5:	vzeroupper\n"
	"	pop %r9; pop %r15; pop %r14; pop %r13; pop %r12; pop %rbp; pop %rbx\n"
	"	ret\n");

static volatile long ticks;

/* Uses the vector registers and the FPU itself: the kernel saves and
 * restores the interrupted state around it. */
static void on_alarm(int s)
{
	volatile double d = 1.0;
	(void)s;
	ticks++;
	for (int i = 0; i < 8; i++)
		d = d * 1.0000001 + 0.5;
	__asm__ volatile("vpcmpeqd %%ymm0, %%ymm0, %%ymm0; vpxor %%ymm7, %%ymm7, %%ymm7" ::: "xmm0", "xmm7");
}

/* What vec_loop's result r says went wrong, on stderr. */
static void report(const char *where, long r, const uint8_t *want, const uint8_t *got)
{
	if (r < 0)
		fprintf(stderr, "%s: call %ld returned another value than expected\n", where, -r - 1);
	if (r > 0) {
		for (int i = 0; i < 16; i++)
			if (memcmp(want + 32 * i, got + 32 * i, 32))
				fprintf(stderr, "%s: call %ld: ymm%d changed\n", where, r - 1, i);
		if (memcmp(want + 512, got + 512, 4))
			fprintf(stderr, "%s: call %ld: x87 control word %#x, was %#x\n", where, r - 1,
				*(uint16_t *)(got + 512), *(uint16_t *)(want + 512));
		if (memcmp(want + 516, got + 516, 4))
			fprintf(stderr, "%s: call %ld: MXCSR %#x, was %#x\n", where, r - 1,
				*(uint32_t *)(got + 516), *(uint32_t *)(want + 516));
	}
}

static int run(const char *where)
{
	static uint8_t want[520], got[520];
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	struct itimerval it = { { 0, 100 }, { 0, 100 } }, off = { { 0, 0 }, { 0, 0 } };
	uint16_t cw = 0x0c7f;            /* round toward zero, single precision */
	uint32_t mxcsr = 0xffc0;         /* flush to zero, denormals are zero, toward zero */
	long r;

	for (size_t i = 0; i < 512; i++)
		want[i] = (uint8_t)(i * 37 + 11);
	sigaction(SIGALRM, &sa, NULL);
	ticks = 0;
	setitimer(ITIMER_REAL, &it, NULL);
	__asm__ volatile("fldcw %0; ldmxcsr %1" : : "m"(cw), "m"(mxcsr));
	r = vec_loop(CALLS, want, got, getppid(), SYS_getppid, 0);
	if (r == 0) {                    /* timed waits: served by the runtime */
		struct timespec ts = { 0, 1000 };
		r = vec_loop(SLEEPS, want, got, 0, SYS_nanosleep, (long)&ts);
	}
	__asm__ volatile("fninit; ldmxcsr %0" : : "m"((uint32_t){ 0x1f80 }));
	setitimer(ITIMER_REAL, &off, NULL);
	printf("%s: %d calls and %d 1 us nanosleeps, %ld signals handled during them: %s\n", where, CALLS, SLEEPS, ticks,
	       r == 0 ? "every register held" : "changed");
	report(where, r, want, got);
	return r == 0 && ticks > 0;
}

static long ppid;
static volatile long handler_calls_bad;
static volatile int handler_depth;

/* On the program's alternate stack, nestable: the same, and a call (sud:
 * a handler's trap, moved onto the runtime's stack; rewrite: sent there by
 * the trampoline), also from a handler that interrupted another's call.
 * No deeper: a forwarded call waits for the proxy, and a handler every
 * 100 us nested on the last one's call as long as the proxy was held up
 * (CPU 0 busy), until the stack overflowed, as natively a slow call would. */
static void on_alarm_call(int s)
{
	on_alarm(s);
	if (++handler_depth <= 2 && syscall(SYS_getppid) != ppid)
		handler_calls_bad++;
	handler_depth--;
}

/* The kernel's x86_fpu:x86_fpu_xstate_check_failed on thread tid (an
 * rt_sigreturn whose frame's XSAVE area failed the check: the FPU state
 * restored is the FXSAVE part only) in a tracing instance of our own:
 * fpu_trace(tid) starts it (0: no tracefs here, 1), fpu_trace(0) stops it
 * and returns how often it fired. */
static long fpu_trace(pid_t tid)
{
	static char inst[96];
	static const char ev[] = "events/x86_fpu/x86_fpu_xstate_check_failed";
	char path[192], line[512], text[32];
	long n = 0;
	FILE *f;

	if (tid) {
		snprintf(inst, sizeof(inst), "/sys/kernel/tracing/instances/detach-t-vector-state-%d", getpid());
		if (mkdir(inst, 0700))
			return 0;
		snprintf(text, sizeof(text), "common_pid == %d", tid);
		snprintf(path, sizeof(path), "%s/%s/filter", inst, ev);
		if ((f = fopen(path, "w")) && fputs(text, f) >= 0 && !fclose(f)) {
			snprintf(path, sizeof(path), "%s/%s/enable", inst, ev);
			if ((f = fopen(path, "w")) && fputs("1", f) >= 0 && !fclose(f))
				return 1;
		}
		rmdir(inst);
		return 0;
	}
	snprintf(path, sizeof(path), "%s/trace", inst);
	if ((f = fopen(path, "r"))) {
		while (fgets(line, sizeof(line), f))
			n += line[0] != '#' && strstr(line, "x86_fpu_xstate_check_failed") != NULL;
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/%s/enable", inst, ev);
	if ((f = fopen(path, "w"))) {
		fputs("0", f);
		fclose(f);
	}
	rmdir(inst);
	return n;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Forwarded calls for secs seconds with the program's own alternate stack
 * and on_alarm_call on it every 100 us. */
static int run_altstack(const char *where, double secs)
{
	static uint8_t want[520], got[520];
	struct sigaction sa = { .sa_handler = on_alarm_call, .sa_flags = SA_ONSTACK | SA_NODEFER | SA_RESTART };
	struct itimerval it = { { 0, 100 }, { 0, 100 } }, off = { { 0, 0 }, { 0, 0 } };
	stack_t none = { .ss_flags = SS_DISABLE };
	bool traced;
	double end;
	long r, calls = 0, failed = -1;

	for (size_t i = 0; i < 512; i++)
		want[i] = (uint8_t)(i * 41 + 3);
	if (!t_altstack_set(ALTSTACK)) {
		fprintf(stderr, "%s: no alternate stack: %s\n", where, strerror(errno));
		return 0;
	}
	ppid = getppid();
	sigaction(SIGALRM, &sa, NULL);
	ticks = handler_calls_bad = 0;
	traced = fpu_trace(t_main_tid());
	setitimer(ITIMER_REAL, &it, NULL);
	end = now() + secs;
	do {
		r = vec_loop(20000, want, got, ppid, SYS_getppid, 0);
		calls += r ? (r > 0 ? r : -r) : 20000;
	} while (r == 0 && now() < end);
	setitimer(ITIMER_REAL, &off, NULL);
	sigaltstack(&none, NULL);
	if (traced)
		failed = fpu_trace(0);
	printf("%s, own alternate stack: %ld calls, %ld signals handled during them (handlers making calls): %s; "
	       "x86_fpu_xstate_check_failed on the thread: %ld%s\n", where, calls, ticks,
	       r == 0 ? "every register held" : "changed", failed, traced ? "" : " (no tracefs: not counted)");
	report(where, r, want, got);
	if (handler_calls_bad)
		fprintf(stderr, "%s: %ld handler calls returned another value than expected\n", where, handler_calls_bad);
	return r == 0 && ticks > 0 && !handler_calls_bad && failed <= 0;
}

int main(int argc, char **argv)
{
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx"))
		t_skip("no AVX on this CPU: no ymm registers to check");
	if (!getenv("T_DETACHED")) {
		if (!run("natively") || !run_altstack("natively", 1))
			return 1;
		fflush(stdout);
		t_reexec_detached(argc, argv, NULL);
	}
	t_check(t_find_proxy() != 0, "not detached");
	t_check(run("detached"), "registers or signal load");
	t_check(run_altstack("detached", 6), "registers, a handler's calls or the kernel's XRSTOR on the program's alternate stack");
	return t_detached_done();
}
