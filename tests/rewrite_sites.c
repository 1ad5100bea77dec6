/* Description: a rewritten site behaves natively for every thread that is
 * not detached (results, errno, signal handlers, fork, vfork, posix_spawn,
 * pthread_create through rewritten sites); a site holding live data at
 * -8(%rsp) stays a trapping site and keeps its data; a call into page 0 from
 * no rewritten site (a NULL function pointer) crashes with SIGSEGV and a
 * message.
 * Timeout: 600 */
#include "helpers/t_detach.h"

#include <pthread.h>
#include <signal.h>
#include <spawn.h>

extern char **environ;

/* A leaf function that keeps a value in its red zone across a syscall. */
long red_zone_leaf(long v);
__asm__(".text\n"
	"red_zone_leaf:\n"
	"	movq %rdi, -8(%rsp)\n"
	"	movl $39, %eax\n"            /* getpid */
	"	syscall\n"
	"	movq -8(%rsp), %rax\n"
	"	ret\n");

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
	t_need_rewrite();
	st = t_run_inner(argv[0], "inner", rewrite, stats, sizeof(stats), false);
	t_check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "inner run: status %#x", st);
	long long sites = t_stats_value(stats, "sites_rewritten"), refused = t_stats_value(stats, "sites_refused");
	long long traps = t_stats_value(stats, "traps"), trefused = t_stats_value(stats, "traps_refused");
	long long retraps = t_stats_value(stats, "retraps");
	printf("%lld sites rewritten, %lld refused; %lld traps (%lld at refused sites), %lld retraps\n",
	       sites, refused, traps, trefused, retraps);
	t_check(t_stats_has(stats, "\"mode\": \"rewrite\""), "not in rewrite mode");
	t_check(sites > 0, "no site rewritten");
	t_check(refused >= 1 && trefused >= 1000, "the red-zone site was rewritten (%lld refused, %lld traps there)",
		refused, trefused);
	t_check(traps - trefused <= sites + refused, "%lld traps for %lld sites", traps - trefused, sites + refused);
	unlink(stats);

	st = t_run_inner(argv[0], "null", rewrite, stats, sizeof(stats), true);
	printf("NULL function pointer call: %s %d\n", WIFSIGNALED(st) ? "signal" : "exit",
	       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	t_check(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "NULL call: status %#x, want SIGSEGV", st);
	unlink(stats);
	t_reap_registry();
	return t_done();
}
