/* The contract between `detach run` and the preloaded runtime: environment
 * variables set by the command, read (and hidden from the program) by the
 * runtime's constructor, and put back on the execve of a detached process so
 * that detached state survives exec.  One place for their names. */
#ifndef DETACH_LIB_CONTRACT_H
#define DETACH_LIB_CONTRACT_H

#define ENV_PID          "DETACH_PID"          /* the process to detach; exec keeps the pid */
#define ENV_CPUS         "DETACH_CPUS"         /* CPU list for detached threads */
#define ENV_HOUSEKEEPING "DETACH_HOUSEKEEPING" /* CPU list for proxies and other threads */
#define ENV_POLICY       "DETACH_POLICY"       /* o | f:N | r:N */
#define ENV_MLOCK        "DETACH_MLOCK"        /* thread | all | none */
#define ENV_STATS        "DETACH_STATS"        /* JSON statistics file, or unset */
#define ENV_MODE         "DETACH_MODE"         /* sud | rewrite | auto */
#define ENV_PROXY        "DETACH_PROXY"        /* spin | adaptive */
#define ENV_PRELOAD_WAS  "DETACH_PRELOAD_WAS"  /* the program's own LD_PRELOAD, if any */
#define ENV_VERBOSE      "DETACH_VERBOSE"      /* 1: runtime reports what it does */
#define ENV_HOME_CPUSET  "DETACH_HOME_CPUSET"  /* the cpuset `detach run` ran in (/proc/self/cpuset) */
#define ENV_SELECT       "DETACH_SELECT"       /* which threads: first,order:N,name:GLOB,pinned */
#define ENV_CPUTIME      "DETACH_CPUTIME"      /* the runtime's CPU time and the kept RLIMIT_CPU, across exec */
#define ENV_SCHED        "DETACH_SCHED"        /* the detached thread's own scheduling settings, across exec */
#define ENV_KEEP_POLICY  "DETACH_KEEP_POLICY"  /* 1: scheduling requests of detached threads for real */
#define ENV_SECCOMP      "DETACH_SECCOMP"      /* a descriptor holding the exec'ing thread's seccomp filters */

/* Every variable above, for scrubbing and re-injection. */
#define CONTRACT_VARS { ENV_PID, ENV_CPUS, ENV_HOUSEKEEPING, ENV_POLICY, ENV_MLOCK, \
			ENV_STATS, ENV_MODE, ENV_PROXY, ENV_PRELOAD_WAS, ENV_VERBOSE, ENV_HOME_CPUSET, \
			ENV_SELECT, ENV_CPUTIME, ENV_SCHED, ENV_KEEP_POLICY, ENV_SECCOMP }
#define CONTRACT_NVARS 16

/* Where running detached processes publish their live statistics
 * (`detach ps` reads them): REGISTRY_DIR/<pid>. */
#define REGISTRY_DIR "/dev/shm/detach"

#endif
