/* Statistics: live counters in shared memory (REGISTRY_DIR/<pid>, read by
 * `detach ps`) and, with --stats FILE, JSON written once at exit.  The file
 * is published only while the process holds its byte of the locks file
 * (claims.c, lib/liveness.h): a reader that finds the byte free knows the
 * file is a dead process's and removes it.
 * The kernel's own per-thread figures (faults, context switches) are read
 * from /proc when written, never counted by us; a thread's JSON is
 * lib/registry.c's, as `detach ps --json` writes it. */
#include "runtime/stats.h"
#include "runtime/claims.h"
#include "runtime/config.h"
#include "lib/contract.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

struct dt_registry *dt_registry;
int dt_exit_code = -1;
static char registry_path[64];

int registry_open(void)
{
	struct rlimit fsize;
	void *p = MAP_FAILED;
	int fd = -1;

	if (dt_registry) {
		/* a fork child the `fork` rule detaches (threads.c): the entry
		 * it inherited is its parent's */
		munmap(dt_registry, sizeof(*dt_registry));
		dt_registry = NULL;
	}
	snprintf(registry_path, sizeof(registry_path), "%s/%d", REGISTRY_DIR, (int)dt_cfg.pid);
	if (!claims_alive()) {
		/* a file no lock of ours keeps would be removed as a dead
		 * one's (claims_open said why) */
		errno = ENOLCK;
	} else if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur < sizeof(struct dt_registry)) {
		/* growing the file past the limit would kill the program (SIGXFSZ) */
		errno = EFBIG;
	} else if (!unlink(registry_path) || errno == ENOENT) {
		/* A file of this pid is a dead process's or this process's before
		 * its execve: a new one, never the old one truncated under a
		 * reader that maps it (SIGBUS). */
		fd = open(registry_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	}
	if (fd >= 0 && ftruncate(fd, sizeof(struct dt_registry)) == 0)
		p = mmap(NULL, sizeof(struct dt_registry), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd >= 0) {
		int err = errno;
		if (p == MAP_FAILED)
			unlink(registry_path);
		close(fd);
		errno = err;
	}
	if (p == MAP_FAILED) {
		/* Not published: no lock of ours keeps it, a program that
		 * changed its uid and then called execve (the file of its first
		 * image is not its own any more), one under a small
		 * RLIMIT_FSIZE.  The counters go on in private memory; the
		 * program must not suffer for them. */
		if (errno != ENOLCK)
			dt_warn("%s: %s: this image's statistics are not shown by "
				"'detach ps'", registry_path, strerror(errno));
		registry_path[0] = '\0';
		p = mmap(NULL, sizeof(struct dt_registry), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -errno;
	}
	dt_registry = p;
	dt_registry->pid = dt_cfg.pid;
	dt_registry->tsc = dt_cfg.tsc;
	snprintf(dt_registry->mode, sizeof(dt_registry->mode), "%s", dt_cfg.mode);
	snprintf(dt_registry->proxy, sizeof(dt_registry->proxy), "%s",
		 contract_proxies[dt_cfg.proxy_wait]);
	read_text_file("/proc/self/comm", dt_registry->comm, sizeof(dt_registry->comm));
	atomic_store_explicit((_Atomic uint64_t *)&dt_registry->magic, REGISTRY_MAGIC, memory_order_release);
	return 0;
}

/* A slot taken for a thread that was not detached after all. */
void registry_slot_free(struct dt_thread_stats *s)
{
	memset((void *)&s->cpu, 0, sizeof(*s) - sizeof(s->tid));
	atomic_store_explicit((_Atomic int32_t *)&s->tid, 0, memory_order_release);
}

struct dt_thread_stats *registry_slot(pid_t tid, int cpu)
{
	for (int i = 0; i < DT_MAX_THREADS; i++) {
		struct dt_thread_stats *s = &dt_registry->threads[i];
		int32_t expect = 0;
		if (atomic_compare_exchange_strong((_Atomic int32_t *)&s->tid, &expect, tid)) {
			s->cpu = cpu;
			if (i >= dt_registry->nthreads)
				dt_registry->nthreads = i + 1;
			return s;
		}
	}
	return NULL;
}

/* A detached thread that was preempted often shared its CPU with another
 * runnable thread (one it does not know of, as under --select first, where
 * threads that pin themselves are not watched) or task: said at the end,
 * from the kernel's count of involuntary switches. */
#define SHARED_SWITCHES 100

static void warn_shared_cpus(void)
{
	for (int i = 0; dt_registry && i < dt_registry->nthreads; i++) {
		struct dt_thread_stats *s = &dt_registry->threads[i];
		struct kernel_counters k = s->at_exit;
		if (!s->tid || (!s->ended && kernel_counters_read(0, s->tid, &k)))
			continue;
		uint64_t n = k.invol_switches - s->at_detach.invol_switches;
		if (n >= SHARED_SWITCHES)
			dt_warn("detached CPU %d was shared: tid %d was preempted %llu times by "
				"another runnable thread or task; NOTE: `detach isolate` keeps other tasks away, and "
				"the default --select (first,pinned) detaches a thread pinned there",
				s->cpu, (int)s->tid, (unsigned long long)n);
	}
}

void (*stats_on_write)(struct json *j);

/* Once per process, at its end, on a thread that may use libc freely (a
 * proxy, or a thread that is not detached). */
void stats_finish(void)
{
	static atomic_int done;
	struct run_header h;
	struct json j;
	char cmdline[4096];
	char *argv[64];
	int argc = 0, fd, len;
	char *text = NULL;
	size_t size = 0;
	struct rlimit fsize;
	FILE *f;

	if (!dt_cfg.active || atomic_exchange(&done, 1))
		return;
	warn_shared_cpus();
	if (dt_registry && registry_path[0])
		unlink(registry_path);
	if (!dt_cfg.stats_path[0])
		return;
	fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	len = fd >= 0 ? (int)read(fd, cmdline, sizeof(cmdline) - 1) : 0;
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < len && argc < 63; i += (int)strlen(cmdline + i) + 1)
		argv[argc++] = cmdline + i;
	run_header_init(&h, argc, argv);
	h.start = dt_cfg.start;            /* the program's start, not this moment */
	h.tsc_hz = dt_cfg.tsc.hz;
	/* Composed in memory first: statistics never kill the program, and a
	 * file grown past RLIMIT_FSIZE would (SIGXFSZ). */
	f = open_memstream(&text, &size);
	if (!f)
		return;
	json_init(&j, f);
	json_object_begin(&j, NULL);
	json_common_header(&j, &h, dt_exit_code);
	json_int(&j, "pid", dt_cfg.pid);
	json_str(&j, "mode", dt_registry ? dt_registry->mode : dt_cfg.mode);
	json_str(&j, "proxy", contract_proxies[dt_cfg.proxy_wait]);
	json_array_begin(&j, "threads");
	for (int i = 0; dt_registry && i < dt_registry->nthreads; i++) {
		if (!dt_registry->threads[i].tid)
			continue;
		json_object_begin(&j, NULL);
		registry_thread_json(&j, dt_registry, &dt_registry->threads[i], 0);
		json_object_end(&j);
	}
	json_array_end(&j);
	if (stats_on_write)
		stats_on_write(&j);
	json_object_end(&j);
	fclose(f);
	fd = -1;
	if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur < size) {
		dt_warn("statistics not written to %s: %zu bytes exceed the file size "
			"limit (ulimit -f)", dt_cfg.stats_path, size);
	} else if ((fd = open(dt_cfg.stats_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)) < 0 ||
		   write(fd, text, size) != (ssize_t)size) {
		dt_warn("cannot write statistics to %s: %s", dt_cfg.stats_path, strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	free(text);
}
