/* Description: every register the syscall ABI preserves (all but rax, rcx
 * and r11), the vector registers (xmm/ymm, zmm and opmasks where present)
 * and the flags the program can see hold exactly across a raw `syscall` of
 * a detached thread: forwarded, local and emulated calls, and a timed wait
 * (in sud mode it ends after the trap's return, clock_resume.S).  In rewrite
 * mode the site (its syscall preceded by two loads: a window) is rewritten
 * into a jump to a stub, and each call is repeated 2,000 times under a
 * 100 us SIGALRM whose handler makes a call of its own, so that signals land
 * in the stub and the trampoline. */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

/* Loads 11 general registers from in[] and, per level, the vector
 * registers from vin; makes the call; stores them back.
 *   void regs_call(const uint64_t in[12], uint64_t out[12], long nr,
 *                  const uint8_t *vin, uint8_t *vout, long level)
 * in[]/out[]: rdi rsi rdx r10 r8 r9 rbx rbp r12 r13 r14 r15
 * level 1: ymm0-15 (32 bytes each); 2: zmm0-31 (64 bytes) and k1-k7. */
__asm__(
	".text\n"
	".globl regs_call\n"
	"regs_call:\n"
	"	push %rbx; push %rbp; push %r12; push %r13; push %r14; push %r15\n"
	"	push %rsi\n"                      /* out */
	"	push %r8\n"                       /* vout */
	"	mov %rdx, %rax\n"
	"	mov %r9, %r11\n"                  /* level */
	"	cmp $2, %r11\n"
	"	je 2f\n"
	"	cmp $1, %r11\n"
	"	jne 3f\n"
	"	vmovdqu 0(%rcx), %ymm0; vmovdqu 32(%rcx), %ymm1; vmovdqu 64(%rcx), %ymm2; vmovdqu 96(%rcx), %ymm3\n"
	"	vmovdqu 128(%rcx), %ymm4; vmovdqu 160(%rcx), %ymm5; vmovdqu 192(%rcx), %ymm6; vmovdqu 224(%rcx), %ymm7\n"
	"	vmovdqu 256(%rcx), %ymm8; vmovdqu 288(%rcx), %ymm9; vmovdqu 320(%rcx), %ymm10; vmovdqu 352(%rcx), %ymm11\n"
	"	vmovdqu 384(%rcx), %ymm12; vmovdqu 416(%rcx), %ymm13; vmovdqu 448(%rcx), %ymm14; vmovdqu 480(%rcx), %ymm15\n"
	"	jmp 3f\n"
	"2:\n"
	"	.irp n,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
	"	vmovdqu64 \\n*64(%rcx), %zmm\\n\n"
	"	.endr\n"
	"	.irp n,1,2,3,4,5,6,7\n"
	"	kmovq 2048+\\n*8(%rcx), %k\\n\n"
	"	.endr\n"
	"3:\n"
	"	push %r11\n"                      /* level */
	"	push %rdi\n"                      /* in */
	"	mov 8(%rdi), %rsi; mov 16(%rdi), %rdx; mov 24(%rdi), %r10; mov 32(%rdi), %r8; mov 40(%rdi), %r9\n"
	"	mov 48(%rdi), %rbx; mov 56(%rdi), %rbp; mov 64(%rdi), %r12; mov 72(%rdi), %r13\n"
	"	mov 80(%rdi), %r14; mov 88(%rdi), %r15; mov 0(%rdi), %rdi\n"
	".globl regs_site\n"
	"regs_site:\n"
	"	syscall\n"
	"	pushf\n"
	"	push %rdi; push %rsi; push %rdx; push %r10; push %r8; push %r9\n"
	"	push %rbx; push %rbp; push %r12; push %r13; push %r14; push %r15\n"
	/* stack: r15 r14 r13 r12 rbp rbx r9 r8 r10 rdx rsi rdi flags in level vout out */
	"	mov 16*8(%rsp), %rdi\n"           /* out */
	"	.irp i,0,1,2,3,4,5,6,7,8,9,10,11\n"
	"	mov (11-\\i)*8(%rsp), %rax; mov %rax, \\i*8(%rdi)\n"
	"	.endr\n"
	"	mov 12*8(%rsp), %rax; mov %rax, 12*8(%rdi)\n"  /* flags */
	"	mov 14*8(%rsp), %r11\n"           /* level */
	"	mov 15*8(%rsp), %rcx\n"           /* vout */
	"	cmp $2, %r11\n"
	"	je 2f\n"
	"	cmp $1, %r11\n"
	"	jne 3f\n"
	"	vmovdqu %ymm0, 0(%rcx); vmovdqu %ymm1, 32(%rcx); vmovdqu %ymm2, 64(%rcx); vmovdqu %ymm3, 96(%rcx)\n"
	"	vmovdqu %ymm4, 128(%rcx); vmovdqu %ymm5, 160(%rcx); vmovdqu %ymm6, 192(%rcx); vmovdqu %ymm7, 224(%rcx)\n"
	"	vmovdqu %ymm8, 256(%rcx); vmovdqu %ymm9, 288(%rcx); vmovdqu %ymm10, 320(%rcx); vmovdqu %ymm11, 352(%rcx)\n"
	"	vmovdqu %ymm12, 384(%rcx); vmovdqu %ymm13, 416(%rcx); vmovdqu %ymm14, 448(%rcx); vmovdqu %ymm15, 480(%rcx)\n"
	"	jmp 3f\n"
	"2:\n"
	"	.irp n,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31\n"
	"	vmovdqu64 %zmm\\n, \\n*64(%rcx)\n"
	"	.endr\n"
	"	.irp n,1,2,3,4,5,6,7\n"
	"	kmovq %k\\n, 2048+\\n*8(%rcx)\n"
	"	.endr\n"
	"3:\n"
	"	vzeroupper\n"
	"	add $17*8, %rsp\n"
	"	pop %r15; pop %r14; pop %r13; pop %r12; pop %rbp; pop %rbx\n"
	"	ret\n");

void regs_call(const uint64_t *in, uint64_t *out, long nr, const uint8_t *vin, uint8_t *vout, long level);
extern const uint8_t regs_site[];

static const char *const gpr[12] = { "rdi", "rsi", "rdx", "r10", "r8", "r9", "rbx", "rbp", "r12", "r13", "r14", "r15" };

/* arithmetic flags and DF: CF PF AF ZF SF DF OF */
#define VISIBLE_FLAGS 0xCD5ull

static void one(const char *what, long nr, long level, const long *fixed_args);

/* The same call from a thread that is not detached: the flags a native
 * syscall leaves, for comparison. */
struct native_args { long nr, level; const long *fixed; uint64_t flags; };
static void *native(void *arg)
{
	struct native_args *n = arg;
	uint64_t in[13] = { 0 }, out[13];
	static uint8_t v[2048 + 64], vo[2048 + 64];

	for (int i = 0; n->fixed && i < 6; i++)
		if (n->fixed[i] != -1)
			in[i] = (uint64_t)n->fixed[i];
	regs_call(in, out, n->nr, v, vo, n->level);
	n->flags = out[12];
	return NULL;
}

static volatile long alarms;
static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
	syscall(SYS_getppid);
}

static int reps = 1;

static void one(const char *what, long nr, long level, const long *fixed_args)
{
	uint64_t in[13], out[13];
	static uint8_t vin[2048 + 64], vout[2048 + 64];

	for (int i = 0; i < 12; i++)
		in[i] = 0x1111111111111111ull * (uint64_t)(i + 1) ^ ((uint64_t)nr << 56);
	for (int i = 0; fixed_args && i < 6; i++)
		if (fixed_args[i] != -1)
			in[i] = (uint64_t)fixed_args[i];
	for (size_t i = 0; i < sizeof(vin); i++)
		vin[i] = (uint8_t)(i * 7 + nr + 1);
	for (int r = 0; r < reps; r++) {
	memset(vout, 0, sizeof(vout));
	memset(out, 0, sizeof(out));
	regs_call(in, out, nr, vin, vout, level);
	if (r + 1 < reps && !memcmp(out, in, 12 * 8) &&
	    !memcmp(vout, vin, level == 2 ? 2048 : level == 1 ? 512 : 0))
		continue;           /* the last round is checked in full below */
	break;
	}
	struct native_args na = { nr, level, fixed_args, 0 };
	pthread_t th;
	pthread_create(&th, NULL, native, &na);
	pthread_join(th, NULL);
	t_check((out[12] & VISIBLE_FLAGS) == (na.flags & VISIBLE_FLAGS), "%s: flags %#llx, natively %#llx", what,
		(unsigned long long)out[12], (unsigned long long)na.flags);
	for (int i = 0; i < 12; i++)
		t_check(out[i] == in[i], "%s: %s %#llx, want %#llx", what, gpr[i],
			(unsigned long long)out[i], (unsigned long long)in[i]);
	size_t vlen = level == 2 ? 2048 + 64 : level == 1 ? 512 : 0;
	if (level == 2)
		vlen = 2048 + 64, memset(vin + 2048, 0, 8), memset(vout + 2048, 0, 8);  /* k0 is not loaded */
	for (size_t i = 0; i < vlen; i++)
		if (vout[i] != vin[i]) {
			t_check(0, "%s: vector byte %zu (%s%zu) is %#x, want %#x", what, i, level == 2 ? (i < 2048 ? "zmm" : "k") : "ymm",
				level == 2 ? (i < 2048 ? i / 64 : (i - 2048) / 8) : i / 32, vout[i], vin[i]);
			break;
		}
	printf("%s (nr %ld): %d general registers%s hold\n", what, nr, 12,
	       level == 2 ? ", zmm0-31 and k1-7" : level == 1 ? ", ymm0-15" : "");
}

int main(int argc, char **argv)
{
	long level;

	t_reexec_detached(argc, argv, NULL);
	t_check(t_find_proxy() > 0, "not detached");
	__builtin_cpu_init();
	level = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx") ? 1 : 0;
	const char *mode = getenv("T_MODE");       /* the runner's DETACH_MODE */
	bool rewrite = !mode || strcmp(mode, "sud");
	if (rewrite) {
		signal(SIGALRM, on_alarm);
		struct itimerval it = { { 0, 100 }, { 0, 100 } };
		setitimer(ITIMER_REAL, &it, NULL);
		reps = 2000;
	}
	for (long l = 0; l <= level; l++) {
		one("getppid, forwarded", SYS_getppid, l, NULL);
		one("gettid, emulated", SYS_gettid, l, NULL);
		/* rt_sigprocmask(SIG_BLOCK, NULL, NULL, 8): local, harmless */
		const long mask_args[6] = { SIG_BLOCK, 0, 0, 8, -1, -1 };
		one("rt_sigprocmask, local", SYS_rt_sigprocmask, l, mask_args);
		static const struct timespec ts = { 0, 200000 };
		const long sleep_args[6] = { (long)&ts, 0, -1, -1, -1, -1 };
		one("nanosleep 200 us, timed wait", SYS_nanosleep, l, sleep_args);
	}
	if (rewrite) {
		struct itimerval off = { { 0, 0 }, { 0, 0 } };
		setitimer(ITIMER_REAL, &off, NULL);
		/* mov 88(%rdi),%r15; mov (%rdi),%rdi: 7 bytes, now a jump */
		uint8_t first = *(const volatile uint8_t *)((uintptr_t)regs_site - 7);
		printf("the site's first byte: %#x; %ld SIGALRM handled\n", first, alarms);
		t_check(first == 0xe9, "the site was not rewritten into a jump to a stub (%#x)", first);
		t_check(alarms > 100, "only %ld SIGALRM handled", alarms);
	}
	return t_detached_done();
}
