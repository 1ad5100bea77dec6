/* The process-wide configuration and the runtime's two ways to speak.
 * Layer 1 (docs/architecture.md). */
#include "runtime/config.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

struct dt_config dt_cfg;
cpu_set_t dt_hk_mask;
bool dt_rewrite_on;

void dt_die(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof(buf), "detach: error: ");
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	sys_call3(SYS_write, 2, buf, n);
	sys_call1(SYS_exit_group, 1);
	__builtin_unreachable();
}

void dt_verbose(const char *fmt, ...)
{
	va_list ap;

	if (!dt_cfg.verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "detach: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* The defaults both starts share (the constructor's contract, init.c, and
 * dt_detach() without `detach run`, api.c): everything as `detach run`
 * without options, on the detached and housekeeping CPUs given. */
void config_defaults(const cpu_set_t *cpus, const cpu_set_t *housekeeping)
{
	dt_cfg.pid = getpid();
	dt_cfg.cpus = *cpus;
	dt_cfg.housekeeping = *housekeeping;
	dt_hk_mask = *housekeeping;
	snprintf(dt_cfg.policy, sizeof(dt_cfg.policy), "o");
	snprintf(dt_cfg.select, sizeof(dt_cfg.select), "first");
	snprintf(dt_cfg.mode, sizeof(dt_cfg.mode), "auto");
	dt_cfg.mlock = MLOCK_THREAD;
	/* A spinning proxy on the only housekeeping CPU would leave nothing of
	 * it to the rest of the program and the system. */
	dt_cfg.proxy_wait = CPU_COUNT(housekeeping) >= 2 ? PROXY_SPIN : PROXY_ADAPTIVE;
}
