/* Description: the x87 control word, MXCSR and every ymm register hold
 * across 1,000,000 forwarded calls (getppid from one inline `syscall`) and
 * 10,000 timed waits (nanosleep, served by the runtime) made
 * under signal load (a SIGALRM itimer every 100 us whose handler uses the
 * vector registers itself), natively and detached.
 * Timeout: 600 */
#include "helpers/t_detach.h"

#include <signal.h>
#include <sys/time.h>

#define CALLS 1000000
#define SLEEPS 10000

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
	return r == 0 && ticks > 0;
}

int main(int argc, char **argv)
{
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx"))
		t_skip("no AVX on this CPU: no ymm registers to check");
	if (!getenv("T_DETACHED")) {
		if (!run("natively"))
			return 1;
		fflush(stdout);
		t_reexec_detached(argc, argv, NULL);
	}
	t_check(t_find_proxy() != 0, "not detached");
	t_check(run("detached"), "registers or signal load");
	return t_detached_done();
}
