/* The process-wide configuration and the runtime's two ways to speak.
 * Layer 1 (docs/architecture.md). */
#include "runtime/config.h"
#include "lib/contract.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct dt_config dt_cfg;
cpu_set_t dt_hk_mask;
bool dt_rewrite_on;

/* A message of the runtime on stderr, by raw calls (also inside a trap),
 * that never harms the program: the SIGXFSZ (stderr a file past ulimit -f)
 * or SIGPIPE (a closed pipe) this write raises is taken back, as if the
 * message had not been written; one that was pending before stays. */
void dt_say(const char *msg, size_t len)
{
	const uint64_t ours = (1ull << (SIGPIPE - 1)) | (1ull << (SIGXFSZ - 1));
	uint64_t old, before = 0, after = 0;
	siginfo_t si;
	const struct timespec now = { 0, 0 };

	sys_call4(SYS_rt_sigprocmask, SIG_BLOCK, &ours, &old, 8);
	sys_call2(SYS_rt_sigpending, &before, 8);
	sys_call3(SYS_write, 2, msg, len);
	sys_call2(SYS_rt_sigpending, &after, 8);
	uint64_t raised = after & ~before & ours;
	if (raised)
		sys_call4(SYS_rt_sigtimedwait, &raised, &si, &now, 8);
	if (raised & (raised - 1))      /* both: one call takes one */
		sys_call4(SYS_rt_sigtimedwait, &raised, &si, &now, 8);
	sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
}

/* "detach: KIND: ..." ("detach: ..." without a kind) and a newline, through
 * dt_say: formatted on the stack and written with one raw write, never
 * through stdio, whose lock the program may hold (a trap or a handler
 * that reports here interrupted it, or another thread holds it). */
static void say(const char *kind, const char *fmt, va_list ap)
{
	char buf[1024];
	int n = kind ? snprintf(buf, sizeof(buf), "detach: %s: ", kind) : snprintf(buf, sizeof(buf), "detach: ");

	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	dt_say(buf, (size_t)n);
}

void dt_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("warning", fmt, ap);
	va_end(ap);
}

void dt_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("error", fmt, ap);
	va_end(ap);
	sys_call1(SYS_exit_group, 1);
	__builtin_unreachable();
}

void dt_verbose(const char *fmt, ...)
{
	va_list ap;

	if (!dt_cfg.verbose)
		return;
	va_start(ap, fmt);
	say(NULL, fmt, ap);
	va_end(ap);
}

/* The configuration a contract says (init.c: `detach run`'s; api.c:
 * dt_detach()'s, the defaults). */
void config_apply(const struct run_contract *c)
{
	dt_cfg.pid = getpid();
	dt_cfg.cpus = c->cpus;
	dt_cfg.housekeeping = c->housekeeping;
	dt_hk_mask = c->housekeeping;
	snprintf(dt_cfg.policy, sizeof(dt_cfg.policy), "%s", c->policy);
	snprintf(dt_cfg.select, sizeof(dt_cfg.select), "%s", c->select);
	snprintf(dt_cfg.mode, sizeof(dt_cfg.mode), "%s", c->mode);
	snprintf(dt_cfg.stats_path, sizeof(dt_cfg.stats_path), "%s", c->stats);
	snprintf(dt_cfg.home_cpuset, sizeof(dt_cfg.home_cpuset), "%s", c->home_cpuset);
	dt_cfg.mlock = !strcmp(c->mlock, "all") ? MLOCK_ALL : !strcmp(c->mlock, "none") ? MLOCK_NONE : MLOCK_THREAD;
	dt_cfg.verbose = c->verbose;
	dt_cfg.keep_policy = c->keep_policy;
	/* A spinning proxy on the only housekeeping CPU would leave nothing of
	 * it to the rest of the program and the system. */
	int proxy = c->proxy[0] ? contract_index(c->proxy, contract_proxies) : -1;
	if (proxy >= 0)
		dt_cfg.proxy_wait = (enum proxy_wait)proxy;
	else
		dt_cfg.proxy_wait = CPU_COUNT(&c->housekeeping) >= 2 ? PROXY_SPIN : PROXY_ADAPTIVE;
}

/* dt_detach() without `detach run` (api.c): everything as `detach run`
 * without options, on the detached and housekeeping CPUs given. */
void config_defaults(const cpu_set_t *cpus, const cpu_set_t *housekeeping)
{
	struct run_contract c;

	contract_defaults(&c);
	c.cpus = *cpus;
	c.housekeeping = *housekeeping;
	config_apply(&c);
}
