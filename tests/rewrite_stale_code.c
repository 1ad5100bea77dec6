/* Description: code unmapped after its site was rewritten, and other code
 * mapped at the same address (a JIT reusing its memory, a library loaded
 * again where it was), is new code to the runtime.  Detached, default mode:
 *   - a site rewritten (getpid), its pages unmapped, and new code mapped
 *     there with a site at the same address (getppid): its calls give
 *     getppid's result, the site is rewritten again at its first trap, and
 *     its 1,000 calls do not trap (no retrap at a patch that is gone);
 *   - a site rewritten, its pages unmapped, and new code mapped there with
 *     an int3 at the old jump's first byte: executing it runs the program's
 *     SIGTRAP handler (the int3 is the program's), not the old stub;
 *   - then a window of two instructions mapped so that its inner boundary
 *     (an int3 for good, in the filler after its jump) lies at that old
 *     first byte: code entered there, as a thread resumes at the boundary,
 *     goes on in the new window's stub (the old, stale start at the same
 *     byte does not make the int3 the program's);
 *   - the statistics count the one site (rewritten three times) once.
 * Timeout: 120 */
#include "helpers/t_detach.h"
#include "helpers/t_jit.h"

#include <signal.h>
#include <sys/mman.h>

#define CALLS 1000
#define AT 0x400        /* the code's offset in the middle page */

static const unsigned char int3_code[] = { 0xcc, 0xc3 };
/* mov $110,%eax; mov %rdi,%rsi; syscall: an inner boundary at offset 5 */
static const unsigned char window_code[] = { 0xb8, 110, 0, 0, 0, 0x48, 0x89, 0xfe, 0x0f, 0x05, 0xc3 };
#define WINDOW_BOUND 5

/* long jump_into(void *at, long rdi, long rax): enters code at `at` with
 * those registers, as a call: the code's `ret` returns to our caller. */
long jump_into(const void *at, long rdi, long rax);
__asm__(".text\n"
	".globl jump_into\n"
	".type jump_into,@function\n"
	"jump_into:\n"
	"	movq %rdi, %r8\n"
	"	movq %rsi, %rdi\n"
	"	movq %rdx, %rax\n"
	"	jmp *%r8\n"
	".size jump_into, .-jump_into\n");

/* Three pages of `ret` at want (anywhere when NULL, else exactly there),
 * code at the middle page's AT, read-only and executable */
static unsigned char *jit_map(void *want, const unsigned char *code, size_t len)
{
	unsigned char *p = mmap(want, 3 * 4096, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | (want ? MAP_FIXED : 0), -1, 0);

	t_check(p != MAP_FAILED, "mmap: %s", strerror(errno));
	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0xc3, 3 * 4096);
	memcpy(p + 4096 + AT, code, len);
	t_check(mprotect(p, 3 * 4096, PROT_READ | PROT_EXEC) == 0, "mprotect: %s", strerror(errno));
	return p;
}

static volatile int traps_seen;

static void on_trap(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
	(void)ctx;
	traps_seen++;
}

static int inner(void)
{
	pid_t pid = getpid(), ppid = getppid();
	unsigned char *r = jit_map(NULL, t_jit_getpid, sizeof(t_jit_getpid)), *site;

	if (!r)
		return t_done();
	site = r + 4096 + AT;
	t_check(t_jit_call(site) == pid, "first code: not getpid's result");
	t_check(site[0] == 0xe9, "the first code's site was not rewritten (%#x)", site[0]);

	/* other code at the same address */
	t_check(munmap(r, 3 * 4096) == 0, "munmap: %s", strerror(errno));
	t_check(jit_map(r, t_jit_getppid, sizeof(t_jit_getppid)) == r, "not mapped again at %p", (void *)r);
	t_check(site[0] == 0xb8, "the new code is not as written");
	long bad = 0;
	for (int i = 0; i < CALLS; i++)
		bad += t_jit_call(site) != ppid;
	t_check(!bad, "%ld calls of the new code gave a wrong result", bad);
	t_check(site[0] == 0xe9, "the new code's site was not rewritten (%#x)", site[0]);

	/* an int3 of the program's at the old jump's first byte */
	t_check(munmap(r, 3 * 4096) == 0, "munmap: %s", strerror(errno));
	t_check(jit_map(r, t_jit_getpid, sizeof(t_jit_getpid)) == r, "not mapped again at %p", (void *)r);
	t_check(t_jit_call(site) == pid && site[0] == 0xe9, "the third code's site was not rewritten");
	struct sigaction sa = { .sa_sigaction = on_trap, .sa_flags = SA_SIGINFO };
	t_check(sigaction(SIGTRAP, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
	t_check(munmap(r, 3 * 4096) == 0, "munmap: %s", strerror(errno));
	t_check(jit_map(r, int3_code, sizeof(int3_code)) == r, "not mapped again at %p", (void *)r);
	t_jit_call(site);
	t_check(traps_seen == 1, "the program's int3 reached its handler %d times, want 1", traps_seen);

	/* a window whose inner boundary is the old start (still in the
	 * tables, its jump gone): entered there, it is the window's */
	t_check(munmap(r, 3 * 4096) == 0, "munmap: %s", strerror(errno));
	unsigned char *w = site - WINDOW_BOUND;
	t_check(jit_map(r, int3_code + 1, 1) == r, "not mapped again at %p", (void *)r);   /* a ret */
	t_check(mprotect(r, 3 * 4096, PROT_READ | PROT_WRITE) == 0, "mprotect: %s", strerror(errno));
	memcpy(w, window_code, sizeof(window_code));
	t_check(mprotect(r, 3 * 4096, PROT_READ | PROT_EXEC) == 0, "mprotect: %s", strerror(errno));
	t_check(t_jit_call(w) == ppid, "the window's code: not getppid's result");
	t_check(w[0] == 0xe9 && site[0] == 0xcc, "the window was not rewritten with an int3 at its boundary (%#x %#x)",
		w[0], site[0]);
	bad = 0;
	for (int i = 0; i < 100; i++)
		bad += jump_into(site, 0, 110) != ppid;
	t_check(!bad, "%ld entries at the boundary gave a wrong result", bad);
	t_check(traps_seen == 1, "entered at the window's boundary, the program's SIGTRAP handler ran %d times",
		traps_seen - 1);
	return t_done();
}

int main(int argc, char **argv)
{
	char stats[128];

	if (argc > 1 && !strcmp(argv[1], "inner"))
		return inner();
	t_run_inner_rewritten(argv[0], stats, sizeof(stats));
	long long retraps = t_stats_value(stats, "retraps");
	printf("retraps of the detached thread: %lld\n", retraps);
	t_check(retraps >= 0 && retraps < 10, "%lld retraps: the new code's calls trapped at a patch that is gone",
		retraps);
	/* one site, rewritten three times: counted once */
	char buf[1 << 16], *anon = t_stats_read(stats, buf, sizeof(buf)) ? strstr(buf, "\"[anon]\": {") : NULL;
	t_check(anon && !strncmp(strstr(anon, "\"exact\": ") ?: "", "\"exact\": 1,", 11),
		"the statistics do not count the one JIT site once: %.80s", anon ? anon : "(no [anon])");
	unlink(stats);
	return t_done();
}
