/* Description: a thread that stands at an inner boundary of a window of two
 * instructions when the window becomes a jump (it ran the first one, then
 * was preempted, interrupted or stopped) goes on correctly.  Two JIT sites,
 * called detached in the default mode:
 *   A: mov %rdi,%rsi; mov %edx,%eax; syscall   the boundary (offset 3) lies
 *      inside the jump's rel32: the stub is placed so that byte is an int3;
 *   B: mov $110,%eax; mov %rdi,%rsi; syscall   the boundary (offset 5) lies
 *      in the int3 filler after the jump.
 * After each is rewritten, code entered at its boundary, as such a thread
 * resumes, gives getppid's result, on the detached thread and on another
 * thread, and meanwhile a third thread enters at the boundaries in a loop
 * from before the rewrite to after it (it meets the old bytes, the int3s
 * or the new ones, never a mix).  The stub page is locked in memory.  A
 * site whose boundary at offset 4 cannot be guarded (no stub can lie about
 * 860 MiB below code at 256 MiB) is rewritten all the same, and works.
 * Timeout: 120 */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#define ENTRIES 200

/* long jump_into(void *at, long rdi, long rdx, long rax): enters code at
 * `at` with those registers and rsi = rdi (as the window's mov %rdi,%rsi
 * leaves it), as a call: the code's `ret` returns to our caller. */
long jump_into(const void *at, long rdi, long rdx, long rax);
__asm__(".text\n"
	".globl jump_into\n"
	".type jump_into,@function\n"
	"jump_into:\n"
	"	movq %rdi, %r8\n"
	"	movq %rsi, %rdi\n"
	"	movq %rcx, %rax\n"
	"	jmp *%r8\n"
	".size jump_into, .-jump_into\n");

static const unsigned char code_a[] = { 0x48, 0x89, 0xfe, 0x89, 0xd0, 0x0f, 0x05, 0xc3 };
static const unsigned char code_b[] = { 0xb8, 110, 0, 0, 0, 0x48, 0x89, 0xfe, 0x0f, 0x05, 0xc3 };
/* mov 0x8(%rsp),%edi; mov %edx,%eax; syscall: a boundary at offset 4 */
static const unsigned char code_c[] = { 0x8b, 0x7c, 0x24, 0x08, 0x89, 0xd0, 0x0f, 0x05, 0xc3 };
#define A_BOUND 3
#define B_BOUND 5

static unsigned char *a, *b;
static long ppid;
static atomic_int stop;
static atomic_long hammered;
static long hammer_bad;

/* enters both sites at their boundaries, as a thread resuming there */
static long enter_bounds(void)
{
	long bad = 0;

	bad += jump_into(a + A_BOUND, 0, 110, 0) != ppid;   /* mov %edx,%eax next */
	bad += jump_into(b + B_BOUND, 0, 0, 110) != ppid;   /* eax set by the mov before */
	return bad;
}

static void *hammer(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		hammer_bad += enter_bounds();
		hammered++;
	}
	return NULL;
}

static void *other(void *arg)
{
	long bad = 0;

	(void)arg;
	for (int i = 0; i < ENTRIES; i++)
		bad += enter_bounds();
	return (void *)bad;
}

static int inner(void)
{
	/* three pages, the code in the middle one: the bytes around a site
	 * that rewrite.c reads (1 KiB each way) are ours, `ret`s */
	unsigned char *jit = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pthread_t h, o;
	void *obad;

	t_check(jit != MAP_FAILED, "mmap: %s", strerror(errno));
	if (jit == MAP_FAILED)
		return t_done();
	ppid = getppid();
	memset(jit, 0xc3, 3 * 4096);
	a = jit + 4096 + 0x400;
	b = jit + 4096 + 0x800;
	memcpy(a, code_a, sizeof(code_a));
	memcpy(b, code_b, sizeof(code_b));
	t_check(mprotect(jit, 3 * 4096, PROT_READ | PROT_EXEC) == 0, "mprotect RX: %s", strerror(errno));

	/* natively first (the old bytes) */
	t_check(enter_bounds() == 0, "entering at the boundaries before the rewrite gave a wrong result");
	t_check(pthread_create(&h, NULL, hammer, NULL) == 0, "pthread_create");
	while (!hammered)
		;
	long (*fa)(long, long, long) = (long (*)(long, long, long))(void *)a;
	long (*fb)(void) = (long (*)(void))(void *)b;
	t_check(fa(0, 0, 110) == ppid, "A: not getppid's result");
	t_check(fb() == ppid, "B: not getppid's result");
	t_check(a[0] == 0xe9 && b[0] == 0xe9, "a site was not rewritten (%#x %#x)", a[0], b[0]);
	t_check(a[A_BOUND] == 0xcc, "A's rel32 byte at its boundary is %#x, not an int3", a[A_BOUND]);
	t_check(b[B_BOUND] == 0xcc, "B's filler byte at its boundary is %#x", b[B_BOUND]);
	int32_t rel;
	memcpy(&rel, a + 1, 4);
	printf("A's stub at %+d bytes (rel32 %08x); B's filler %02x\n", rel, (unsigned)rel, b[B_BOUND]);
	/* the stub page is the runtime's code: locked (--mlock thread, the
	 * default), as the rest of it */
	uintptr_t stub = (uintptr_t)a + 5 + (uintptr_t)(intptr_t)rel;
	FILE *sm = fopen("/proc/self/smaps", "re");
	char line[256];
	bool in = false;
	long locked = -1;
	while (sm && fgets(line, sizeof(line), sm)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
			in = stub >= lo && stub < hi;
		else if (in && !strncmp(line, "Locked:", 7))
			locked = atol(line + 7);
	}
	if (sm)
		fclose(sm);
	t_check(locked >= 4, "the stub page is not locked in memory (Locked: %ld kB)", locked);

	long bad = 0;
	for (int i = 0; i < ENTRIES; i++)
		bad += enter_bounds();
	t_check(!bad, "%ld entries at a boundary on the detached thread gave a wrong result", bad);
	t_check(pthread_create(&o, NULL, other, NULL) == 0, "pthread_create");
	pthread_join(o, &obad);
	t_check(!obad, "%ld entries at a boundary on another thread gave a wrong result", (long)obad);

	/* A boundary at offset 4 wants a stub about 860 MiB below the code:
	 * none for code at 256 MiB.  The site is rewritten all the same, that
	 * boundary unguarded (as before), and its calls work. */
	unsigned char *low = mmap((void *)(256ul << 20), 3 * 4096, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (low == (void *)(256ul << 20)) {
		unsigned char *c = low + 4096 + 0x400;
		memset(low, 0xc3, 3 * 4096);
		memcpy(c, code_c, sizeof(code_c));
		t_check(mprotect(low, 3 * 4096, PROT_READ | PROT_EXEC) == 0, "mprotect: %s", strerror(errno));
		long (*fc)(long, long, long) = (long (*)(long, long, long))(void *)c;
		long cbad = 0;
		for (int i = 0; i < 1000; i++)
			cbad += fc(0, 0, 110) != ppid;
		t_check(!cbad, "C: %ld calls gave a wrong result", cbad);
		memcpy(&rel, c + 1, 4);
		printf("C (code at 256 MiB): %#x, stub at %+d bytes, byte at the boundary %#x\n", c[0], rel, c[4]);
		t_check(c[0] == 0xe9, "C was not rewritten (%#x)", c[0]);
	} else {
		printf("C: 256 MiB not free here, not checked\n");
	}
	for (int i = 0; i < 100000 && hammered < 1000; i++)
		usleep(100);
	atomic_store(&stop, 1);
	pthread_join(h, NULL);
	printf("the hammering thread entered the boundaries %ld times\n", atomic_load(&hammered));
	t_check(!hammer_bad, "%ld of the hammering thread's entries gave a wrong result", hammer_bad);
	return t_done();
}

int main(int argc, char **argv)
{
	char stats[128];

	if (argc > 1 && !strcmp(argv[1], "inner"))
		return inner();
	t_run_inner_rewritten(argv[0], stats, sizeof(stats));
	long long hits = t_stats_value(stats, "int3_hits");
	printf("int3_hits of the detached thread: %lld\n", hits);
	t_check(hits >= 2 * ENTRIES, "the detached thread met %lld int3, want >= %d", hits, 2 * ENTRIES);
	unlink(stats);
	return t_done();
}
