/* Description: every combination of the flags a program can set (CF PF AF
 * ZF SF DF OF: 128) holds exactly across a raw `syscall` of the detached
 * thread, and r11 holds them as the kernel leaves it: a forwarded call
 * (getppid), an emulated one (gettid) and a timed wait (nanosleep of 1 us),
 * each at a site of its own that rewrite mode rewrites into a jump to a
 * stub (checked: its first byte is the jump), so that the trampoline's way
 * back restores them: without popfq for the arithmetic ones, with it for DF.
 * The same checks pass natively first. */
#include "helpers/t_detach.h"

#include <time.h>

/* uint64_t NAME(const void *arg1, void *arg2, uint64_t flags, uint64_t *r11):
 * the flags loaded, `mov $nr,%eax; syscall` (at NAME_site), the flags after
 * it returned; r11 as the call left it.  r8 keeps the pointer: syscall
 * preserves it, not rcx. */
#define FLAGS_SITE(name, nr)                                      \
	".globl " #name "\n" #name ":\n"                           \
	"	mov %rcx, %r8\n"                                   \
	"	push %rdx\n"                                       \
	"	popfq\n"                                           \
	".globl " #name "_site\n" #name "_site:\n"                 \
	"	mov $" #nr ", %eax\n"                              \
	"	syscall\n"                                         \
	"	pushfq\n"                                          \
	"	mov %r11, (%r8)\n"                                 \
	"	pop %rax\n"                                        \
	"	cld\n"                                             \
	"	ret\n"
__asm__(".text\n"
	FLAGS_SITE(flags_getppid, 110)
	FLAGS_SITE(flags_gettid, 186)
	FLAGS_SITE(flags_nanosleep, 35));

typedef uint64_t flags_fn(const void *, void *, uint64_t, uint64_t *);
extern flags_fn flags_getppid, flags_gettid, flags_nanosleep;
extern const uint8_t flags_getppid_site[], flags_gettid_site[], flags_nanosleep_site[];

/* CF PF AF ZF SF DF OF, and the bits always set in user mode (1, IF) */
static const uint64_t bit[7] = { 0x1, 0x4, 0x10, 0x40, 0x80, 0x400, 0x800 };
#define VISIBLE 0xCD5ull
#define ALWAYS 0x202ull

static void sweep(const char *what, flags_fn *fn, const void *arg1)
{
	for (unsigned m = 0; m < 128; m++) {
		uint64_t in = ALWAYS, r11 = 0;

		for (int b = 0; b < 7; b++)
			if (m & (1u << b))
				in |= bit[b];
		errno = 0;
		uint64_t out = fn(arg1, NULL, in, &r11);
		t_check((out & (VISIBLE | ALWAYS)) == in, "%s: flags %#llx before, %#llx after", what,
			(unsigned long long)in, (unsigned long long)out);
		t_check((r11 & (VISIBLE | ALWAYS)) == in, "%s: flags %#llx before, r11 %#llx after", what,
			(unsigned long long)in, (unsigned long long)r11);
	}
}

int main(int argc, char **argv)
{
	static const struct timespec us = { 0, 1000 };
	bool rewrite;

	t_native_then_detached(argc, argv, NULL);
	rewrite = !t_native() && getenv("DETACH_MODE") && !strcmp(getenv("DETACH_MODE"), "rewrite");
	if (!t_native())
		t_check(t_find_proxy() > 0, "not detached");
	for (int round = 0; round < 2; round++) {      /* the first call at a site traps */
		sweep("getppid", flags_getppid, NULL);
		sweep("gettid", flags_gettid, NULL);
		sweep("nanosleep", flags_nanosleep, &us);
	}
	if (rewrite) {
		t_check(flags_getppid_site[0] == 0xe9, "getppid's site is not rewritten (%#x)", flags_getppid_site[0]);
		t_check(flags_gettid_site[0] == 0xe9, "gettid's site is not rewritten (%#x)", flags_gettid_site[0]);
		t_check(flags_nanosleep_site[0] == 0xe9, "nanosleep's site is not rewritten (%#x)",
			flags_nanosleep_site[0]);
	}
	printf("%s: 3 sites x 128 flag combinations x 2 rounds\n", t_native() ? "natively" : "detached");
	return t_native() ? t_done() : t_detached_done();
}
