/* Description: a rewritten site behaves natively for every thread that is
 * not detached (results, errno, signal handlers, fork, vfork, posix_spawn,
 * pthread_create through rewritten sites); a leaf function that keeps live
 * data below rsp (its red zone: at -8 and -128) across a site has it
 * rewritten and keeps its data; syscall(SYS_clone)
 * through glibc's syscall() (a window site whose number comes at run time)
 * run at the kept `syscall`; a NULL function pointer call crashes with
 * SIGSEGV, as natively (no page 0 is mapped); a site whose only
 * instruction before it is a function's entry `xor %eax,%eax` (glibc's
 * __read_nocancel) hops through the nop before the entry, and code falling
 * through that nop still reaches the entry; a window with a rip-relative
 * lea (__libc_signal_block_all's) moves with its address fixed up.
 * Timeout: 600 */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <signal.h>
#include <spawn.h>

extern char **environ;

/* A leaf function that keeps values in its red zone (at -8 and -128, its
 * two ends) across a syscall: the exact pattern, rewritten. */
long red_zone_leaf(long v);
extern const unsigned char red_zone_site[];
__asm__(".text\n"
	"red_zone_leaf:\n"
	"	movq %rdi, -8(%rsp)\n"
	"	notq %rdi\n"
	"	movq %rdi, -128(%rsp)\n"
	"	movl $39, %eax\n"            /* getpid */
	"red_zone_site:\n"
	"	syscall\n"
	"	movq -128(%rsp), %rax\n"
	"	notq %rax\n"
	"	cmpq %rax, -8(%rsp)\n"
	"	jne 1f\n"
	"	movq -8(%rsp), %rax\n"
	"	ret\n"
	"1:	xorl %eax, %eax\n"
	"	ret\n");

/* hop_read(fd, buf, n): read() as __read_nocancel does it, at a 16-byte
 * aligned entry behind an 8-byte nop; hop_fall runs 8 bytes of moves and
 * falls through the nop into it. */
long hop_read(int fd, void *buf, size_t n);
long hop_fall(int fd, void *buf, size_t n);
/* rip_lea(): getppid() with `lea rip_data(%rip),%rsi` right before the
 * syscall; returns rsi as the call left it. */
long rip_lea(void);
extern const unsigned char rip_data[], rip_site[];
__asm__(".text\n"
	".p2align 4\n"
	"hop_fall:\n"
	"	.byte 0x48, 0x89, 0xff, 0x48, 0x89, 0xf6, 0x66, 0x90\n"   /* mov %rdi,%rdi; mov %rsi,%rsi; xchg %ax,%ax */
	"	.byte 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00\n"   /* nopl 0x0(%rax,%rax,1) */
	"hop_read:\n"
	"	xorl %eax, %eax\n"
	"	syscall\n"
	"	ret\n"
	"rip_lea:\n"
	"	movl $110, %eax\n"           /* getppid */
	"	leaq rip_data(%rip), %rsi\n"
	"rip_site:\n"
	"	syscall\n"
	"	movq %rsi, %rax\n"
	"	ret\n"
	".data\n"
	"rip_data: .quad 0\n"
	".text\n");

static volatile sig_atomic_t handled;
static void on_usr1(int s) { (void)s; handled++; }

/* Everything a program does with system calls, once: run first on the
 * detached thread (its sites trap and are rewritten), then on a thread that
 * is not detached, through the rewritten sites. */
static int exercise(const char *who)
{
	volatile int bad = 0;
	int st;
	char buf[1];
	pid_t p;

	errno = 0;
	if (read(-1, buf, 1) != -1 || errno != EBADF) {
		fprintf(stderr, "%s: read(-1): errno %d\n", who, errno);
		bad++;
	}
	if (getppid() <= 0)
		bad++;
	handled = 0;
	signal(SIGUSR1, on_usr1);
	pthread_kill(pthread_self(), SIGUSR1);          /* handler, rt_sigreturn */
	if (handled != 1) {
		fprintf(stderr, "%s: handler ran %d times\n", who, handled);
		bad++;
	}
	p = fork();
	if (p == 0)
		_exit(7);
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 7) {
		fprintf(stderr, "%s: fork child status %#x\n", who, st);
		bad++;
	}
	p = vfork();
	if (p == 0)
		_exit(8);
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 8) {
		fprintf(stderr, "%s: vfork child status %#x\n", who, st);
		bad++;
	}
	char *argv[] = { "sh", "-c", "exit 9", NULL };
	if (posix_spawnp(&p, "sh", NULL, NULL, argv, environ) || waitpid(p, &st, 0) != p ||
	    !WIFEXITED(st) || WEXITSTATUS(st) != 9) {
		fprintf(stderr, "%s: posix_spawn child status %#x\n", who, st);
		bad++;
	}
	return bad;
}

static void *second_thread(void *arg)
{
	*(int *)arg = exercise("second thread");
	return NULL;
}

static void *nested(void *arg)
{
	(void)arg;
	return (void *)(long)getpid();
}

static int inner(void)
{
	int bad = 0, second = -1;
	pthread_t th;
	void *r;

	bad += exercise("detached thread");
	/* the sites are rewritten now: another thread goes through them */
	pthread_create(&th, NULL, second_thread, &second);
	pthread_join(th, NULL);
	bad += second;
	/* pthread_create from the detached thread and from the second one */
	pthread_create(&th, NULL, nested, NULL);
	pthread_join(th, &r);
	if ((long)r != getpid())
		bad++;
	for (long i = 0; i < 1000; i++)
		if (red_zone_leaf(0x5a5a0000 + i) != 0x5a5a0000 + i) {
			fprintf(stderr, "red zone value lost at call %ld\n", i);
			bad++;
			break;
		}
	unsigned char first = *(const volatile unsigned char *)((uintptr_t)red_zone_site - 5);
	if (first != 0xe9) {
		fprintf(stderr, "the red-zone site was not rewritten (%#x)\n", first);
		bad++;
	}
	/* the hop: from the detached thread (rewritten at its first trap),
	 * then falling through the padding */
	int zero = open("/dev/zero", O_RDONLY);
	char buf[16];
	for (int i = 0; i < 100; i++)
		if (hop_read(zero, buf, sizeof(buf)) != sizeof(buf) || hop_fall(zero, buf, 3) != 3) {
			fprintf(stderr, "hop_read/hop_fall at call %d\n", i);
			bad++;
			break;
		}
	uintptr_t entry_at = (uintptr_t)hop_read;
	__asm__("" : "+r"(entry_at));    /* an address, not an object the compiler knows */
	const volatile unsigned char *entry = (const volatile unsigned char *)entry_at;
	if (entry[0] != 0xeb || entry[-8] != 0xeb || entry[-6] != 0xe9) {
		fprintf(stderr, "the hop site was not rewritten (%#x, padding %#x %#x)\n", entry[0], entry[-8],
			entry[-6]);
		bad++;
	}
	close(zero);
	/* the rip-relative window: rsi holds rip_data's address after it */
	for (int i = 0; i < 100; i++)
		if (rip_lea() != (long)rip_data) {
			fprintf(stderr, "rip_lea: %#lx, want %p\n", rip_lea(), (void *)rip_data);
			bad++;
			break;
		}
	if (*(const volatile unsigned char *)((uintptr_t)rip_site - 7) != 0xe9) {
		fprintf(stderr, "the rip-relative window was not rewritten\n");
		bad++;
	}
	/* a fork as clone through glibc's syscall(): a window whose number
	 * is rax's; the trampoline makes it in its clone gate */
	for (int i = 0; i < 2; i++) {
		long p = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
		int st;
		if (p == 0)
			_exit(5);
		if (p < 0 || waitpid((pid_t)p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 5) {
			fprintf(stderr, "syscall(SYS_clone): %ld, status %#x\n", p, st);
			bad++;
		}
	}
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const char *const rewrite[] = { "--mode", "rewrite", NULL };
	char stats[128];
	int st;

	if (argc > 1 && !strcmp(argv[1], "inner"))
		return inner();
	if (argc > 1 && !strcmp(argv[1], "null")) {
		void (*volatile fn)(void) = NULL;
		getpid();                 /* make sure the runtime is past its start */
		__asm__ volatile("call *%0" : : "a"(fn) : "memory");
		return 0;
	}
	st = t_run_inner(argv[0], "inner", rewrite, stats, sizeof(stats), false);
	t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "inner run: status %#x", st);
	long long sites = t_stats_value(stats, "sites_rewritten"), refused = t_stats_value(stats, "sites_refused");
	long long traps = t_stats_value(stats, "traps"), trefused = t_stats_value(stats, "traps_refused");
	long long retraps = t_stats_value(stats, "retraps");
	printf("%lld sites rewritten, %lld refused; %lld traps (%lld at refused sites), %lld retraps\n",
	       sites, refused, traps, trefused, retraps);
	t_check(t_stats_has(stats, "\"mode\": \"rewrite\""), "not in rewrite mode");
	t_check(sites > 0, "no site rewritten");
	t_check(traps - trefused <= sites + refused, "%lld traps for %lld sites", traps - trefused, sites + refused);
	t_check(trefused < 100, "%lld traps at refused sites", trefused);
	unlink(stats);

	st = t_run_inner(argv[0], "null", rewrite, stats, sizeof(stats), true);
	printf("NULL function pointer call: %s %d\n", WIFSIGNALED(st) ? "signal" : "exit",
	       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	t_check(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "NULL call: status %#x, want SIGSEGV", st);
	unlink(stats);
	t_reap_registry();
	return t_done();
}
