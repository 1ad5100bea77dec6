/* detach-rtl: the RTLinux 3.x API on top of detach (docs/rtl.md).
 *
 * An RTLinux program (a "module": init_module() and cleanup_module(), RT
 * threads made with pthread_create) builds unchanged but for its include
 * lines with
 *
 *     cc prog.c $(pkg-config --cflags --libs detach-rtl)
 *
 * The library provides main(): it detaches a thread (the executive) on a CPU
 * of its own, calls init_module() (non-zero: a message, exit 1), runs until
 * SIGINT or SIGTERM, calls cleanup_module() and exits 0.  RT threads run on
 * the executive, highest priority first, and switch only at their wait
 * points (pthread_wait_np, sleeps, rtf_get_wait, pthread_suspend_np): a
 * running RT thread is never preempted.
 *
 * This header redefines pthread_t, pthread_create and the calls below for
 * the whole translation unit: include it after every system header, or
 * alone (it includes the usual ones itself).  What RTLinux had and detach
 * does not provide is declared so that a call fails the build. */
#ifndef DETACH_RTL_H
#define DETACH_RTL_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- time ------------------------------------------------------------- */
typedef long long hrtime_t;                 /* nanoseconds */
#define HRTIME_INFINITY 0x7fffffffffffffffLL
#define NSECS_PER_SEC   1000000000LL

/* The RT clock: CLOCK_MONOTONIC in ns, read from the TSC (no kernel entry).
 * As in RTLinux, CLOCK_REALTIME in RT code is this clock, not the wall
 * clock. */
hrtime_t gethrtime(void);
hrtime_t clock_gethrtime(clockid_t clock);
clockid_t rtl_getschedclock(void);
int rtl_clock_gettime(clockid_t clock, struct timespec *ts);

static inline void timespec_add_ns(struct timespec *t, long long ns)
{
	ns += t->tv_nsec;
	t->tv_sec += ns / NSECS_PER_SEC;
	t->tv_nsec = ns % NSECS_PER_SEC;
	if (t->tv_nsec < 0) {
		t->tv_nsec += NSECS_PER_SEC;
		t->tv_sec--;
	}
}
#define timespec_to_ns(t) ((long long)(t)->tv_sec * NSECS_PER_SEC + (t)->tv_nsec)

/* Wait points in an RT thread (elsewhere the libc calls). */
int rtl_clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem);
int rtl_nanosleep(const struct timespec *req, struct timespec *rem);
int rtl_usleep(useconds_t us);
unsigned int rtl_sleep(unsigned int s);

/* To the program's stderr (from an RT thread: one write, through the
 * detached thread's proxy). */
int rtl_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- RT threads ------------------------------------------------------- */
struct rtl_thread;
typedef struct rtl_thread *rtl_pthread_t;

int rtl_pthread_create(rtl_pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
rtl_pthread_t rtl_pthread_self(void);
int rtl_pthread_equal(rtl_pthread_t a, rtl_pthread_t b);
int rtl_pthread_join(rtl_pthread_t thread, void **ret);
int rtl_pthread_cancel(rtl_pthread_t thread);
void rtl_pthread_exit(void *ret) __attribute__((noreturn));
int rtl_pthread_setschedparam(rtl_pthread_t thread, int policy, const struct sched_param *param);
int rtl_pthread_getschedparam(rtl_pthread_t thread, int *policy, struct sched_param *param);
int rtl_sched_yield(void);
/* RT priorities are SCHED_FIFO's (1..99, higher runs first; 0: a thread
 * made without one); the attribute is given that policy, as RTLinux's
 * threads had it. */
int rtl_pthread_attr_setschedparam(pthread_attr_t *attr, const struct sched_param *param);

/* Periodic threads: released at start, start + period, ...; the thread
 * waits for its next release in pthread_wait_np().  A thread that calls it
 * after that release has passed has overrun: the releases it missed are
 * counted (rtl_thread_stats) and it waits for the next one on its grid. */
int pthread_make_periodic_np(rtl_pthread_t thread, hrtime_t start, hrtime_t period);
int pthread_wait_np(void);
int pthread_wakeup_np(rtl_pthread_t thread);
int pthread_suspend_np(rtl_pthread_t thread);
int pthread_delete_np(rtl_pthread_t thread);
/* Floating point is always usable in RT threads: these do nothing. */
int pthread_attr_setfp_np(pthread_attr_t *attr, int flag);
int pthread_setfp_np(rtl_pthread_t thread, int flag);

/* detach extension: what the executive counts for an RT thread. */
struct rtl_thread_stats {
	int priority;
	unsigned long long switches_in;    /* times it was switched to */
	unsigned long long releases;       /* periodic releases it ran */
	unsigned long long overruns;       /* releases it missed */
	long long max_release_delay_ns;    /* release to switch-in, largest */
};
int rtl_thread_stats(rtl_pthread_t thread, struct rtl_thread_stats *s);

/* ---- RT-FIFOs (/dev/rtfN for Linux processes, docs/rtl.md) ------------ */
#define RTF_NO 64
int rtf_create(unsigned int fifo, int size);
int rtf_destroy(unsigned int fifo);
/* count bytes, all or nothing: count, or -ENOSPC (no room), -EINVAL. */
int rtf_put(unsigned int fifo, void *buf, int count);
/* What is there, up to count: the bytes copied (0: empty), or -EINVAL.
 * Never waits, as in RTLinux (rtf_get_wait below is the waiting one). */
int rtf_get(unsigned int fifo, void *buf, int count);
/* The handler runs on the executive, before any RT thread, after a Linux
 * process wrote to the FIFO. */
int rtf_create_handler(unsigned int fifo, int (*handler)(unsigned int fifo));
int rtf_create_rt_handler(unsigned int fifo, int (*handler)(unsigned int fifo));
int rtf_flush(unsigned int fifo);
/* detach extension (not in RTLinux), a wait point: as rtf_get, but waits until a byte is
 * there or gethrtime() >= deadline (-ETIMEDOUT; 0: no deadline). */
int rtf_get_wait(unsigned int fifo, void *buf, int count, hrtime_t deadline);

/* detach extension, a wait point: waits until the doorbell b rang (a
 * dt_bell of detach.h, the stand-in for a device interrupt: RTLinux's RT
 * threads waited for interrupts), or gethrtime() >= deadline (-ETIMEDOUT;
 * 0: no deadline).  0 when it rang. */
struct dt_bell;
int rtl_bell_wait(struct dt_bell *b, hrtime_t deadline);

/* ---- mbuff: named shared memory, the same region in every process ----- */
void *mbuff_alloc(const char *name, int size);
void mbuff_free(const char *name, void *mbuf);

/* ---- the module ---------------------------------------------------------- */
int init_module(void);
void cleanup_module(void);

/* ---- RTLinux calls detach does not provide: calling one fails the build -- */
#define RTL_NOT_PROVIDED(what) \
	__attribute__((error(what " is not provided by detach-rtl: see docs/rtl.md")))
struct rtl_frame;
int rtl_request_irq(unsigned int irq, unsigned int (*h)(unsigned int, struct rtl_frame *))
	RTL_NOT_PROVIDED("rtl_request_irq (RT interrupt handlers)");
int rtl_free_irq(unsigned int irq) RTL_NOT_PROVIDED("rtl_free_irq");
int rtl_hard_enable_irq(unsigned int irq) RTL_NOT_PROVIDED("rtl_hard_enable_irq");
int rtl_hard_disable_irq(unsigned int irq) RTL_NOT_PROVIDED("rtl_hard_disable_irq");
int rtl_request_global_irq(unsigned int irq, unsigned int (*h)(unsigned int, struct rtl_frame *))
	RTL_NOT_PROVIDED("rtl_request_global_irq");
int rtl_free_global_irq(unsigned int irq) RTL_NOT_PROVIDED("rtl_free_global_irq");
int rtl_global_pend_irq(int irq) RTL_NOT_PROVIDED("rtl_global_pend_irq");
int rtl_get_soft_irq(void (*h)(int, void *, void *), const char *name) RTL_NOT_PROVIDED("rtl_get_soft_irq");
void rtl_free_soft_irq(unsigned int irq) RTL_NOT_PROVIDED("rtl_free_soft_irq");
void rtl_no_interrupts(unsigned long state) RTL_NOT_PROVIDED("rtl_no_interrupts");
void rtl_restore_interrupts(unsigned long state) RTL_NOT_PROVIDED("rtl_restore_interrupts");
void rtl_stop_interrupts(void) RTL_NOT_PROVIDED("rtl_stop_interrupts");
void rtl_allow_interrupts(void) RTL_NOT_PROVIDED("rtl_allow_interrupts");
int rtl_setclockmode(void *clock, int mode, hrtime_t param) RTL_NOT_PROVIDED("rtl_setclockmode");
int pthread_attr_setcpu_np(pthread_attr_t *attr, int cpu)
	RTL_NOT_PROVIDED("pthread_attr_setcpu_np (RT threads share the executive's CPU)");
int rtf_link_user_ioctl(unsigned int fifo, int (*h)(unsigned int, unsigned int, unsigned long))
	RTL_NOT_PROVIDED("rtf_link_user_ioctl");
int rtf_make_user_pair(unsigned int fifo_get, unsigned int fifo_put) RTL_NOT_PROVIDED("rtf_make_user_pair");
/* These would block the executive's CPU in the kernel. */
int rtl_unprovided_sem_wait(sem_t *s) RTL_NOT_PROVIDED("sem_wait in an RT task");
int rtl_unprovided_sem_timedwait(sem_t *s, const struct timespec *t) RTL_NOT_PROVIDED("sem_timedwait in an RT task");
int rtl_unprovided_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) RTL_NOT_PROVIDED("pthread_cond_wait in an RT task");
int rtl_unprovided_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t)
	RTL_NOT_PROVIDED("pthread_cond_timedwait in an RT task");
int rtl_unprovided_pthread_kill(rtl_pthread_t t, int sig) RTL_NOT_PROVIDED("pthread_kill of an RT thread");

/* ---- the names a program uses, to this layer (not inside the library) ---- */
#ifndef RTL_LIBRARY_INTERNAL
#define clock_gettime rtl_clock_gettime
#define clock_nanosleep rtl_clock_nanosleep
#define nanosleep rtl_nanosleep
#define usleep rtl_usleep
#define sleep rtl_sleep
#define pthread_t rtl_pthread_t
#define pthread_create rtl_pthread_create
#define pthread_self rtl_pthread_self
#define pthread_equal rtl_pthread_equal
#define pthread_join rtl_pthread_join
#define pthread_cancel rtl_pthread_cancel
#define pthread_exit rtl_pthread_exit
#define pthread_setschedparam rtl_pthread_setschedparam
#define pthread_attr_setschedparam rtl_pthread_attr_setschedparam
#define pthread_getschedparam rtl_pthread_getschedparam
#define sched_yield rtl_sched_yield
#define sem_wait rtl_unprovided_sem_wait
#define sem_timedwait rtl_unprovided_sem_timedwait
#define pthread_cond_wait rtl_unprovided_cond_wait
#define pthread_cond_timedwait rtl_unprovided_cond_timedwait
#define pthread_kill rtl_unprovided_pthread_kill
#endif

#ifdef __cplusplus
}
#endif
#endif
