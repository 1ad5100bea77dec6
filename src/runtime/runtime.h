/* libdetach.so internals.  Start reading at init.c (dt_init), then
 * intercept.c (the SIGSYS entry), dispatch.c (the table of calls that stay on
 * the detached thread) and proxy.c (the mailbox and the proxy thread). */
#ifndef DETACH_RUNTIME_H
#define DETACH_RUNTIME_H

#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>

#include "lib/registry.h"
#include "lib/util.h"

#define DT_HIDDEN __attribute__((visibility("hidden")))

/* ---- raw system calls (stubs.S) ----------------------------------------
 * The stubs live in the section `detach_allow`, the address range Syscall
 * User Dispatch always lets through: the runtime's own calls on a detached
 * thread never trap.  They return -errno and never touch errno. */
long sys_call6(long nr, long a1, long a2, long a3, long a4, long a5, long a6) DT_HIDDEN;
#define sys_call0(nr)                   sys_call6(nr, 0, 0, 0, 0, 0, 0)
#define sys_call1(nr, a)                sys_call6(nr, (long)(a), 0, 0, 0, 0, 0)
#define sys_call2(nr, a, b)             sys_call6(nr, (long)(a), (long)(b), 0, 0, 0, 0)
#define sys_call3(nr, a, b, c)          sys_call6(nr, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys_call4(nr, a, b, c, d)       sys_call6(nr, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
/* The SIGSYS handler's sa_restorer: rt_sigreturn from inside the range. */
void sys_sigreturn_restorer(void) DT_HIDDEN;
/* rt_sigreturn with rsp = uc: resumes the context saved in a signal frame. */
__attribute__((noreturn)) void sys_sigreturn_at(void *uc) DT_HIDDEN;
/* clone family on the detached thread (see lifecycle.c, do_clone):
 * child_uc != NULL: the child resumes the program through that frame copy;
 * parent_uc != NULL: so does the parent (vfork on a shared stack). */
long sys_clone_resume(long nr, long a1, long a2, long a3, long a4, long a5,
		      void *child_uc, void *parent_uc) DT_HIDDEN;
/* The proxy's way to run a forwarded call: a call cancelled before the
 * syscall instruction (*intr == INTR_CANCEL) gives -EINTR instead. */
long sys_proxy_call(long nr, long a1, long a2, long a3, long a4, long a5, long a6,
		    volatile uint8_t *intr) DT_HIDDEN;
extern const char sys_proxy_call_check[], sys_proxy_call_insn[], sys_proxy_call_eintr[] DT_HIDDEN;
extern const char __start_detach_allow[], __stop_detach_allow[] DT_HIDDEN;

/* ---- the mailbox between a detached thread and its proxy ----------------
 * Request and reply sit on separate cache lines: each line has one writer,
 * so the only traffic is the hand-over itself. */
enum { DT_CMD_QUIT = -1, DT_CMD_STATS = -2, DT_CMD_COUNTERS = -3 };
/* What a handler that ran on the detached thread during a forwarded call
 * asks of that call (proxy.c, send_interrupt).  INTR_CANCEL is tested by
 * sys_proxy_call (stubs.S) as the byte 1. */
enum { INTR_NONE = 0, INTR_CANCEL = 1, INTR_EINTR = 2, INTR_RESTART = 3 };

struct mailbox {
	_Alignas(64)
	volatile uint64_t req_seq;      /* detached thread -> proxy */
	long nr;
	long args[6];
	_Alignas(64)
	volatile uint64_t done_seq;     /* proxy -> detached thread */
	long ret;
	volatile uint64_t intr_ack;     /* intr_sent as last seen by the proxy's handler */
	volatile int32_t raised;        /* a signal the call raised on the proxy (SIGPIPE...) */
	_Alignas(64)
	volatile uint8_t intr;          /* INTR_*: set by the detached thread */
	volatile uint64_t intr_sent;
};

/* The kernel's struct sched_attr (sched_setattr(2)), VER1 (56 bytes). */
struct kernel_sched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime, sched_deadline, sched_period;
	uint32_t sched_util_min, sched_util_max;
};
/* A detached thread's scheduling settings as the program made them (sched.c) */
struct app_sched {
	struct kernel_sched_attr attr;
	cpu_set_t affinity;
};

/* ---- a detached thread ------------------------------------------------- */
struct dt_thread {
	struct mailbox mb;
	/* set by a vfork child that borrows this thread's TLS (trampoline.S reads
	 * it at a fixed offset), cleared by the parent when it resumes */
	volatile uint8_t vfork_child;
	/* The runtime's own stack (stack.c), where the trampoline and the
	 * SIGSYS handler run (its alternate signal stack when the program set
	 * none), and the program's alternate stack as the program set it (0, 0:
	 * none).  trampoline.S reads the four at fixed offsets. */
	uintptr_t stack_lo, stack_hi;
	uintptr_t app_ss_lo, app_ss_hi;
	stack_t app_ss;                 /* what sigaltstack reports (signals.c) */
	bool need_trap;                 /* rewrite mode: this call needs the trap path */
	/* Watched, not detached: a thread of a program whose threads are chosen
	 * by rule (threads.c).  Its calls trap and run on itself, natively, but
	 * for the few that may choose it. */
	bool observed;
	volatile bool evicted;          /* another thread took its CPU (threads.c) */
	int pending_cpu;                /* >= 0: detach on this CPU at the next trap */
	uintptr_t locked_lo, locked_hi; /* its stack range memlock.c locked */
	struct dt_thread *next;         /* threads.c's list */
	pid_t tid;
	int cpu;
	int node;
	pid_t proxy_tid;
	volatile int depth;             /* forwarded calls in flight (signal nesting) */
	uintptr_t wait_frame;           /* stack frame of the forwarded call in flight */
	volatile int intr_signo;        /* a handler ran while we waited */
	siginfo_t raised_info;          /* written by the proxy with mb.raised */
	volatile uint8_t selector;      /* Syscall User Dispatch selector byte */
	uint64_t app_blocked_open;      /* of the signals kept open (dispatch.h:
					 * kept_open), those the program believes blocked */
	uint64_t cpu_seen[5][3];        /* CPU times last answered (cputime.c) */
	struct app_sched app;           /* scheduling settings it believes in */
	struct dt_thread_stats *stats;
	char path[4096 + 64];           /* /proc/thread-self rewriting */
	struct dt_thread_stats own_stats; /* counters until a registry slot is had */
	/* vfork on the shared stack: the frame both child and parent resume from */
	_Alignas(64) char frame[16384];
};

/* ---- process-wide configuration, fixed after dt_init --------------------- */
enum proxy_wait { PROXY_SPIN, PROXY_ADAPTIVE };
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
extern __thread struct dt_thread *dt_self DT_HIDDEN;
extern struct dt_registry *dt_registry DT_HIDDEN;

/* The kernel's struct sigaction, as rt_sigaction takes it (not glibc's). */
struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

/* intercept.c */
extern struct ksigaction dt_app_sigsys DT_HIDDEN;
extern struct ksigaction dt_app_sigtrap DT_HIDDEN;
bool intercept_own_sigtrap(void) DT_HIDDEN;
int intercept_install(void) DT_HIDDEN;
int intercept_arm(struct dt_thread *t) DT_HIDDEN;
void intercept_disarm(struct dt_thread *t) DT_HIDDEN;
bool intercept_restart_pending(const ucontext_t *uc) DT_HIDDEN;
void intercept_end_with_eintr(ucontext_t *uc) DT_HIDDEN;

/* dispatch.c: one call of a detached thread; uc is its signal context. */
long dt_dispatch(struct dt_thread *t, long nr, long a[6], ucontext_t *uc) DT_HIDDEN;

/* clock.c: timed waits served in user space */
void clock_init(void) DT_HIDDEN;
bool timed_wait_general_only(void) DT_HIDDEN;
bool timed_wait_clock_ok(clockid_t clk) DT_HIDDEN;
long timed_wait_until(struct dt_thread *t, clockid_t clk, uint64_t deadline_ns) DT_HIDDEN;
long timed_sleep(struct dt_thread *t, clockid_t clk, int flags, const struct timespec *req,
		 struct timespec *rem) DT_HIDDEN;
long timed_poll(struct dt_thread *t, long timeout_ms) DT_HIDDEN;
long timed_select(struct dt_thread *t, struct timeval *tv) DT_HIDDEN;
long timed_ppoll(struct dt_thread *t, struct timespec *ts) DT_HIDDEN;

/* stack.c */
#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1u << 31)   /* linux/signal.h: glibc does not define it */
#endif
void stack_give(struct dt_thread *t) DT_HIDDEN;
void stack_return(struct dt_thread *t) DT_HIDDEN;
void stack_arm(struct dt_thread *t) DT_HIDDEN;
void stack_disarm(struct dt_thread *t) DT_HIDDEN;
void stack_real(const struct dt_thread *t, stack_t *real) DT_HIDDEN;
void stack_on_return(const struct dt_thread *t, ucontext_t *uc) DT_HIDDEN;

bool dispatch_general_only(long nr) DT_HIDDEN;

/* rewrite.c */
int rewrite_init(void) DT_HIDDEN;
bool rewrite_site(struct dt_thread *t, uintptr_t site) DT_HIDDEN;
bool rewrite_is_retrap(uintptr_t call_addr) DT_HIDDEN;
bool rewrite_int3(ucontext_t *uc) DT_HIDDEN;
extern bool dt_rewrite_on DT_HIDDEN;

/* proxy.c */
int proxy_start(struct dt_thread *t) DT_HIDDEN;
long proxy_forward(struct dt_thread *t, long nr, const long a[6]) DT_HIDDEN;
void proxy_stop(struct dt_thread *t) DT_HIDDEN;
void proxy_abandoned(struct dt_thread *t) DT_HIDDEN;
void proxy_interrupt_taken(ucontext_t *uc) DT_HIDDEN;
extern __thread bool dt_is_proxy DT_HIDDEN;

/* cputime.c */
void cputime_start(void) DT_HIDDEN;
void cputime_child(void) DT_HIDDEN;
void cputime_proxy_ends(struct dt_thread_stats *s) DT_HIDDEN;
void cputime_from_env(const char *v) DT_HIDDEN;
void cputime_to_env(struct dt_thread *t, char *buf) DT_HIDDEN;
long cputime_limited_sleep(clockid_t clk, uint64_t deadline_ns, uint64_t *now) DT_HIDDEN;
extern bool dt_cpu_limited DT_HIDDEN;
#define CPUTIME_ENV_MAX 192

/* sched.c */
void sched_start(void) DT_HIDDEN;
void sched_capture(struct dt_thread *t) DT_HIDDEN;
void sched_inherit(const struct dt_thread *t, pid_t tid) DT_HIDDEN;
void sched_from_env(const char *v) DT_HIDDEN;
void sched_to_env(struct dt_thread *t, char *buf) DT_HIDDEN;
#define SCHED_ENV_MAX (32 + 30 * (9 + CPU_SETSIZE / 64))

/* env.c */
char *env_put_u64(char *p, uint64_t v, char end) DT_HIDDEN;
void env_scrub(void) DT_HIDDEN;
int env_adopt(const char *contract, const char *lib) DT_HIDDEN;
const char *env_get(const char *name) DT_HIDDEN;
long env_execve(long nr, long a[6]) DT_HIDDEN;

/* stats.c */
int registry_open(void) DT_HIDDEN;
struct dt_thread_stats *registry_slot(pid_t tid, int cpu) DT_HIDDEN;
int kernel_counters_read(pid_t tid, struct kernel_counters *k) DT_HIDDEN;
void stats_finish(void) DT_HIDDEN;
extern int dt_exit_code DT_HIDDEN;      /* exit_group's status; -1: not known */

/* init.c */
void dt_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2))) DT_HIDDEN;
void dt_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2))) DT_HIDDEN;
int runtime_start(void) DT_HIDDEN;

/* memlock.c */
void memlock_thread(struct dt_thread *t) DT_HIDDEN;
void memlock_release(struct dt_thread *t) DT_HIDDEN;

/* threads.c */
void start_threads(void) DT_HIDDEN;
struct dt_thread *detach_thread(struct dt_thread *t, int cpu) DT_HIDDEN;
void observe_call(struct dt_thread *t, long nr, const long a[6]) DT_HIDDEN;
bool thread_pinning(struct dt_thread *t, long a[6]) DT_HIDDEN;
void thread_evicted(struct dt_thread *t) DT_HIDDEN;
struct dt_thread *thread_alloc(void) DT_HIDDEN;
void thread_free(struct dt_thread *t) DT_HIDDEN;
int claim_cpu(int want) DT_HIDDEN;
void release_cpu(int cpu) DT_HIDDEN;
void attach_thread(struct dt_thread *t) DT_HIDDEN;
void dt_fork_child(void) DT_HIDDEN;
void dt_child_placement(void) DT_HIDDEN;
void place_child(pid_t tid) DT_HIDDEN;
void dt_vfork_parent_resumed(void) DT_HIDDEN;

#endif
