/* The contract between `detach run` and the preloaded runtime: environment
 * variables set by the command, read (and hidden from the program) by the
 * runtime's constructor, and put back on the execve of a detached process so
 * that detached state survives exec.  One place for their names. */
#ifndef DETACH_LIB_CONTRACT_H
#define DETACH_LIB_CONTRACT_H

#include <sched.h>
#include <stdbool.h>
#include <sys/types.h>

#define ENV_PID          "DETACH_PID"          /* the process to detach; exec keeps the pid */
#define ENV_CPUS         "DETACH_CPUS"         /* CPU list for detached threads */
#define ENV_HOUSEKEEPING "DETACH_HOUSEKEEPING" /* CPU list for proxies and other threads */
#define ENV_POLICY       "DETACH_POLICY"       /* o | f:N | r:N */
#define ENV_MLOCK        "DETACH_MLOCK"        /* thread | all | none */
#define ENV_STATS        "DETACH_STATS"        /* JSON statistics file, or unset */
#define ENV_MODE         "DETACH_MODE"         /* sud | rewrite | auto */
#define ENV_PROXY        "DETACH_PROXY"        /* spin | adaptive | sleep */
#define ENV_PRELOAD_WAS  "DETACH_PRELOAD_WAS"  /* the program's own LD_PRELOAD, if any */
#define ENV_VERBOSE      "DETACH_VERBOSE"      /* 1: runtime reports what it does */
#define ENV_HOME_CPUSET  "DETACH_HOME_CPUSET"  /* the cpuset `detach run` ran in (/proc/self/cpuset) */
#define ENV_SELECT       "DETACH_SELECT"       /* which threads: first,order:N,name:GLOB,pinned */
#define ENV_CPUTIME      "DETACH_CPUTIME"      /* the runtime's CPU time and the kept RLIMIT_CPU, across exec */
#define ENV_SCHED        "DETACH_SCHED"        /* the detached thread's own scheduling settings, across exec */
#define ENV_KEEP_POLICY  "DETACH_KEEP_POLICY"  /* 1: scheduling requests of detached threads for real */
#define ENV_SECCOMP      "DETACH_SECCOMP"      /* a descriptor holding the exec'ing thread's seccomp filters */
#define ENV_CLAIMS       "DETACH_CLAIMS"       /* the locks file's descriptor, its locks kept across exec (lib/liveness.h) */

/* What `detach run` (and `detach pid`) tell the runtime, typed: one encoder
 * and one decoder (contract.c), so that the three parties cannot disagree
 * about a name, an encoding or a default.  The variables after ENV_PROXY
 * that are not here (ENV_PRELOAD_WAS, ENV_CPUTIME, ENV_SCHED, ENV_SECCOMP)
 * are the runtime's own, passed across its execve (runtime/env.c). */
struct run_contract {
	pid_t pid;                      /* the process to detach: exec keeps the pid */
	cpu_set_t cpus;                 /* for detached threads */
	cpu_set_t housekeeping;         /* for proxies and all other threads */
	char policy[16];                /* o | f:N | r:N (N 1..99) */
	char mlock[8];                  /* thread | all | none */
	char mode[16];                  /* sud | rewrite | auto */
	char proxy[16];                 /* one of contract_proxies; "": the runtime chooses */
	char stats[4096];               /* absolute path of the JSON statistics; "": none */
	char select[256];               /* the --select rules */
	char home_cpuset[256];          /* the cpuset `detach run` ran in; "": unknown */
	bool keep_policy;               /* --keep-policy */
	bool verbose;                   /* -v */
};

/* How a proxy waits for its detached thread's next call (--proxy), NULL
 * ended; the runtime's enum proxy_wait (runtime/config.h) follows this
 * order. */
extern const char *const contract_proxies[];
/* v's index in a NULL-ended list of choices (contract_proxies), or -1 */
int contract_index(const char *v, const char *const *choices);

/* A contract with every default but the pid and the CPUs: what the runtime
 * does where a variable is unset, and what dt_detach() without `detach
 * run` does (`detach run` passes its own --select default). */
void contract_defaults(struct run_contract *c);
/* c->stats from a path given on the command line, made absolute. */
int contract_set_stats(struct run_contract *c, const char *path);
/* Each variable, in order, to put(name, value, ctx); value NULL: the
 * variable must not be set (an option left at its default).  Stops at the
 * first non-zero return of put and returns it. */
int contract_encode(const struct run_contract *c, int (*put)(const char *name, const char *value, void *ctx),
		    void *ctx);
/* From get(name, ctx) (NULL: unset).  0; -ENOENT when there is no
 * contract for pid (none, or one for another process: a child that
 * inherited the environment); -EINVAL when a variable is malformed, with
 * its name in *bad. */
int contract_decode(struct run_contract *c, pid_t pid, const char *(*get)(const char *name, void *ctx), void *ctx,
		    const char **bad);

/* Every variable above, for scrubbing and re-injection. */
#define CONTRACT_VARS { ENV_PID, ENV_CPUS, ENV_HOUSEKEEPING, ENV_POLICY, ENV_MLOCK, \
			ENV_STATS, ENV_MODE, ENV_PROXY, ENV_PRELOAD_WAS, ENV_VERBOSE, ENV_HOME_CPUSET, \
			ENV_SELECT, ENV_CPUTIME, ENV_SCHED, ENV_KEEP_POLICY, ENV_SECCOMP, \
			ENV_CLAIMS }
#define CONTRACT_NVARS 17

/* Where running detached processes publish their live statistics
 * (`detach ps` reads them): REGISTRY_DIR/<pid>. */
#define REGISTRY_DIR "/dev/shm/detach"

#endif
