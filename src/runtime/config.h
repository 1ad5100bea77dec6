/* Layer 1: the process-wide configuration, read from `detach run`'s
 * contract (init.c) or set by dt_detach() (api.c) through config_defaults(),
 * fixed once the runtime started but for `active`; and how the runtime
 * speaks (dt_say, dt_warn, dt_die, dt_verbose: config.c). */
#ifndef DETACH_RUNTIME_CONFIG_H
#define DETACH_RUNTIME_CONFIG_H

#include <sched.h>
#include <stdbool.h>
#include <sys/types.h>
#include <stddef.h>
#include <time.h>

#include "lib/util.h"
#include "runtime/sys.h"

/* in the order of contract_proxies (lib/contract.h), which names them */
enum proxy_wait { PROXY_SPIN, PROXY_ADAPTIVE, PROXY_SLEEP };
enum dt_mlock { MLOCK_THREAD, MLOCK_ALL, MLOCK_NONE };   /* memlock.c */
struct dt_config {
	bool active;                    /* this process is the detached one */
	pid_t pid;
	cpu_set_t cpus;
	cpu_set_t housekeeping;
	char policy[16];
	enum dt_mlock mlock;
	bool verbose;
	enum proxy_wait proxy_wait;
	char stats_path[4096];
	char mode[16];
	struct tsc_clock tsc;
	/* A gap this long between two TSC reads of a wait loop: the thread was
	 * not running (preempted, or the host took its vCPU), and the kernel
	 * counted none of it as its CPU time (clock.c, proxy.c, cputime.c) */
	uint64_t off_cpu_cycles;
	/* A zero-timeout wait this soon after the same thread's last empty one
	 * is a busy-poll, forwarded as a short blocking wait (waits.c,
	 * fd_wait) */
	uint64_t busy_poll_gap_cycles;
	struct timespec start;          /* CLOCK_REALTIME when the runtime started */
	bool rt_throttled;              /* sched_rt_runtime_us >= 0 at start */
	bool keep_policy;               /* --keep-policy: scheduling requests for real */
	/* The cpuset the program started in, when detached threads moved into
	 * the `detach isolate` partition: threads and children they create go
	 * back there ("0" written to it moves the writer). */
	char select[256];               /* which threads are detached (threads.c) */
	char home_cpuset[256];
	char home_tasks[512];
};
extern struct dt_config dt_cfg DT_HIDDEN;
extern cpu_set_t dt_hk_mask DT_HIDDEN;          /* read by the clone stub's child */
/* rewrite mode is on: set once at start by rewrite.c (rewrite_init) */
extern bool dt_rewrite_on DT_HIDDEN;

struct run_contract;
/* The configuration of a contract (init.c), or of the defaults (api.c). */
void config_apply(const struct run_contract *c) DT_HIDDEN;
void config_defaults(const cpu_set_t *cpus, const cpu_set_t *housekeeping) DT_HIDDEN;

void dt_say(const char *msg, size_t len) DT_HIDDEN;
void dt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2))) DT_HIDDEN;
void dt_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2))) DT_HIDDEN;
void dt_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2))) DT_HIDDEN;

#endif
