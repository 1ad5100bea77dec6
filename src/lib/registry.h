/* The registry: the statistics a running program's runtime publishes in
 * shared memory, one file REGISTRY_DIR/<pid> (lib/contract.h) holding one
 * struct dt_registry, written by the runtime (src/runtime/stats.c) and read
 * by `detach ps`.  The layout is the interface between them: REGISTRY_MAGIC
 * names its version; change the magic with the layout. */
#ifndef DETACH_LIB_REGISTRY_H
#define DETACH_LIB_REGISTRY_H

#include <stdint.h>
#include <sys/types.h>

#include "lib/util.h"

#define DT_MAX_THREADS 64         /* detached threads per process */
#define DT_NR_SYSCALLS 512        /* per-syscall counters; x86-64 numbers stay below */

/* The kernel's own per-thread figures (/proc/self/task/TID/stat, status). */
struct kernel_counters {
	uint64_t minflt, majflt, vol_switches, invol_switches;
};
struct dt_thread_stats {
	volatile int32_t tid;           /* 0: slot free */
	int32_t cpu;
	int32_t proxy_tid;
	volatile int32_t state;         /* 1 detached, 0 attached again (dt_attach) */
	volatile uint64_t forwarded;    /* carried out by the proxy */
	volatile uint64_t local;        /* run on the detached thread itself */
	volatile uint64_t emulated;     /* answered without the kernel */
	volatile uint64_t waited;       /* TSC cycles spent waiting for the runtime
					 * (timed waits, forwarded calls): cputime.c */
	volatile uint64_t traps;        /* Syscall User Dispatch traps at program sites */
	volatile uint64_t retraps;      /* rewrite mode: traps at sites already rewritten (calls
					 * sent to the trap path on purpose, races with the patch) */
	volatile uint64_t sites_rewritten; /* rewrite mode: jumps to stubs, sites_window of them
					    * with an instruction other than mov $nr,%eax moved
					    * (a forward window's too: rewrite.c, find_forward) */
	volatile uint64_t sites_window;
	volatile uint64_t sites_refused; /* left trapping: vDSO, no instruction to move, ... */
	volatile uint64_t traps_refused; /* traps at those sites (rewrite mode) */
	volatile uint64_t sync_cores;   /* membarrier SYNC_CORE of its rewrites: IPIs to
					 * every CPU running the process (warm-up only) */
	volatile uint64_t int3_hits;    /* its calls that met a site's int3 mid-rewrite */
	volatile uint64_t interrupts_resent; /* interrupts of its proxy sent again: not
					      * acknowledged within 10 ms (proxy.c, ack_late) */
	volatile uint64_t per_nr[DT_NR_SYSCALLS];
	struct kernel_counters at_detach;   /* the kernel's figures when detached */
	struct kernel_counters at_exit;     /* ... and when it exited or attached */
	volatile int32_t ended;             /* at_exit is valid */
	uint64_t proxy_cpu[3];              /* the proxy's CPU clocks when it ended (ns) */
	uint64_t retired_proxy_cpu[3];      /* ... of the proxies it had before (ns):
					     * a call that changed the thread made a new one */
};

/* A system call site rewrite mode met (src/runtime/rewrite.c), once each:
 * its address, what became of it (kind: 0 rewritten exactly, 1 with a
 * window, a hop or a forward window, 2 left trapping, 3 left trapping for want of a stub page), and,
 * for one left trapping, the traps there (its first included).  Readers
 * group them by the mapping the address lies in (registry_sites_json). */
#define DT_SITES 4096
enum { DT_SITE_EXACT, DT_SITE_WINDOW, DT_SITE_TRAPPING, DT_SITE_NO_STUB };
struct dt_site {
	volatile uint64_t addr;         /* 0: not yet written */
	volatile uint32_t traps;
	volatile uint8_t kind;
	uint8_t pad[3];
};

#define REGISTRY_MAGIC 0x36484354454400ull   /* "DETACH6" */
struct dt_registry {
	uint64_t magic;
	int32_t pid;
	int32_t nthreads;
	char mode[16];
	char proxy[16];
	char comm[32];
	struct tsc_clock tsc;           /* the runtime's: its TSC cycles (waited) in ns */
	struct dt_thread_stats threads[DT_MAX_THREADS];
	volatile uint32_t nsites;       /* sites[] entries taken (may exceed DT_SITES) */
	struct dt_site sites[DT_SITES];
};

/* The kernel's figures for thread tid of process pid (0: this process,
 * /proc/self): faults from its stat, context switches from its status.
 * 0 or -errno. */
int kernel_counters_read(pid_t pid, pid_t tid, struct kernel_counters *k);

/* The sites of r by the mapping they lie in (registry_sites_group) */
#define DT_SITE_MAPS 32
struct dt_site_map {
	char name[160];                 /* the mapping's path, or [anon], [vdso]... */
	uint64_t n[DT_SITE_NO_STUB + 1];  /* sites by kind */
	uint64_t traps, after;          /* traps at those left trapping; after each one's first */
};
struct dt_site_left { unsigned map, site; unsigned long off; };   /* by[map], sites[site], file offset */
/* Groups the sites of r by the mapping of /proc/<pid>/maps (0: self) they
 * lie in, into by (at most max); left (when given) receives the sites left
 * trapping, *nleft of them.  The number of mappings.  Uses stdio. */
unsigned registry_sites_group(const struct dt_registry *r, pid_t pid, struct dt_site_map *by, unsigned max,
			      struct dt_site_left *left, unsigned *nleft);
struct json;
/* "sites": the sites of r by the mapping they lie in (its path, or [anon],
 * [vdso]...), found in /proc/<pid>/maps (pid 0: /proc/self): how many were
 * rewritten exactly, with a window, left trapping (and for want of a stub
 * page), the traps at those left trapping, those traps after each one's
 * first (traps_after_warmup), and each site left trapping: its offset in
 * the file (as objdump shows it), its traps, and why (why(i) for the
 * site sites[i], when why is given: the runtime's own reasons).  Uses
 * stdio. */
void registry_sites_json(struct json *j, const struct dt_registry *r, pid_t pid, const char *(*why)(unsigned i));
/* A thread's statistics as JSON, the one writer of them (`detach run
 * --stats` at the program's exit, `detach ps --json`, the ctl files):
 * the members of the thread's object, which the caller opens and closes.
 * Its counters, waited_ns, the runtime's account of kernel entries, the
 * kernel's own figures since it was detached (at its end, or read now
 * from /proc/<proc_pid>; proc_pid 0: /proc/self; left out when neither
 * can be had) and its calls by name, most first.  Uses stdio and the
 * stack (4 KiB): not for the runtime's trap path. */
void registry_thread_json(struct json *j, const struct dt_registry *r, const struct dt_thread_stats *s,
			  pid_t proc_pid);

#endif
