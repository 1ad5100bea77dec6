/* A tracing session on one CPU (trace.h, docs/trace.md): setup and undo
 * with a journal and a guard process, binary reading through libtracefs,
 * events turned into struct trace_rec.
 * Longer than 500 lines on purpose: setup, undo and reading all work on
 * struct trace_session, which stays private to this file. */
#include "lib/trace.h"
#include "lib/undo_log.h"
#include "lib/partition.h"
#include "lib/liveness.h"
#include "lib/util.h"

#include <tracefs/tracefs.h>
#include <traceevent/event-parse.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TRACEFS_PATH     "/sys/kernel/tracing"
#define JOURNAL_FMT      ISOLATE_STATE_DIR "/trace-%d"
#define BUFFER_KB        8192      /* the traced CPU's ring buffer */
#define DRAIN_PERIOD_NS  20000000  /* 20 ms: the buffer holds seconds */

struct evmap {
	int id;
	uint8_t type, phase;
	const char *name;       /* TR_VECTOR: the vector's name */
};

struct trace_session {
	int cpu;
	char tracing_dir[256];
	char journal[128];
	bool mounted;           /* by us */
	struct tracefs_instance *inst;
	struct tep_handle *tep;
	struct evmap map[48];
	int nmap;
	bool tsc_clock;         /* x86-tsc; else mono, mapped with tsc */
	struct tsc_clock tsc;
	struct trace_rec *rec;
	size_t n, cap;
	uint64_t lost;
	bool oom;
	pthread_t drainer;
	bool draining;
	atomic_bool stop;
	pid_t guard;
	int guard_fd;           /* write end: its closing wakes the guard */
	struct tep_handle *ksyms;
};

/* ---- the journal: what to undo, written before it is done -------------- */

static int journal_add(struct trace_session *s, const char *kind, const char *path)
{
	char line[512];

	snprintf(line, sizeof(line), "%s %s", kind, path);
	return undo_log_append_path(s->journal, line);
}

/* rmdir or umount that waits out EBUSY: a dead owner's trace buffers stay
 * open until its exit has closed every file, and the guard wakes at the
 * first (its pipe), so the instance can still be busy for a moment.
 * Already gone (ENOENT, or EINVAL: not mounted) counts as done. */
static bool undo_with_patience(bool is_mount, const char *path)
{
	for (int i = 0; i < 500; i++) {         /* 5 s at most */
		int rc = is_mount ? umount2(path, 0) : rmdir(path);
		if (rc == 0 || errno == ENOENT || (is_mount && errno == EINVAL))
			return true;
		if (errno != EBUSY)
			return false;
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	}
	return false;
}

/* Undoes a journal's lines, last first, and removes it once all is undone
 * (what could not be undone stays journaled for the next session's
 * trace_cleanup_stale).  Idempotent: the guard and a later session may both
 * replay a dead owner's journal.  Uses system calls only, so the guard can
 * run it after fork. */
static void journal_replay(const char *path)
{
	char buf[4096], *lines[32];
	bool all_undone = true;
	int count = undo_log_read(path, buf, sizeof(buf), lines, 32);

	if (count < 0)
		return;
	for (int n = count - 1; n >= 0; n--) {
		if (!strncmp(lines[n], "instance ", 9)) {
			char on[600];
			snprintf(on, sizeof(on), "%s/tracing_on", lines[n] + 9);
			int fd = open(on, O_WRONLY | O_CLOEXEC);
			if (fd >= 0) {
				if (write(fd, "0", 1) < 0) { /* removal below still tried */ }
				close(fd);
			}
			all_undone &= undo_with_patience(false, lines[n] + 9);
		} else if (!strncmp(lines[n], "mount ", 6)) {
			all_undone &= undo_with_patience(true, lines[n] + 6);
		}
	}
	if (all_undone)
		unlink(path);
}

int trace_cleanup_stale(void)
{
	DIR *d = opendir(ISOLATE_STATE_DIR);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[300];
		int pid;

		/* pid_alive: a zombie is dead too, an owner nobody reaps (its
		 * parent gone, a PID 1 that does not wait) must not keep its
		 * journal alive */
		if (sscanf(e->d_name, "trace-%d", &pid) != 1 || pid_alive(pid))
			continue;
		snprintf(path, sizeof(path), "%s/%s", ISOLATE_STATE_DIR, e->d_name);
		journal_replay(path);
		n++;
	}
	closedir(d);
	return n;
}

/* Replays the journal when the owner dies however it dies: the pipe's
 * write end closes with the owner's last file descriptor.  Its own
 * session, deaf to the terminal's signals, so Ctrl-C or a killed process
 * group still leaves it to clean up. */
static int guard_start(struct trace_session *s, const cpu_set_t *others)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int err = -errno;
		close(p[0]);
		close(p[1]);
		return err;
	}
	if (pid == 0) {
		char c;
		int nul = open("/dev/null", O_RDWR);

		setsid();
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		prctl(PR_SET_NAME, "detach-traceguard");
		sched_setaffinity(0, sizeof(*others), others);
		for (int fd = 0; fd < 1024; fd++)
			if (fd != p[0] && fd != nul)
				close(fd);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		journal_replay(s->journal);
		_exit(0);
	}
	close(p[0]);
	s->guard = pid;
	s->guard_fd = p[1];
	return 0;
}

/* ---- setup ------------------------------------------------------------ */

static int find_tracefs(char *dir, size_t len)
{
	FILE *f = fopen("/proc/mounts", "re");
	char dev[256], mnt[256], type[64];
	int found = -ENOENT;

	if (!f)
		return -errno;
	while (fscanf(f, "%255s %255s %63s %*[^\n]", dev, mnt, type) == 3)
		if (!strcmp(type, "tracefs")) {
			snprintf(dir, len, "%s", mnt);
			found = 0;
			break;
		}
	fclose(f);
	return found;
}

static void map_event(struct trace_session *s, const char *sys, const char *ev,
		      uint8_t type, uint8_t phase, const char *name)
{
	struct tep_event *e = tep_find_event_by_name(s->tep, sys, ev);

	if (!e || s->nmap >= (int)(sizeof(s->map) / sizeof(s->map[0])))
		return;
	s->map[s->nmap++] = (struct evmap){ e->id, type, phase, name };
}

/* Enables sys/ev with filter; an event this kernel lacks is left out. */
static int enable(struct trace_session *s, const char *sys, const char *ev, const char *filter)
{
	if (!tracefs_event_file_exists(s->inst, sys, ev, "enable"))
		return -ENOENT;
	if (filter && tracefs_event_file_write(s->inst, sys, ev, "filter", filter) < 0)
		return -EINVAL;
	return tracefs_event_enable(s->inst, sys, ev) < 0 ? -EIO : 0;
}

static int setup_events(struct trace_session *s, char *err, size_t errlen)
{
	static const char *const systems[] = { "irq", "irq_vectors", "nmi", "ipi", "csd",
					       "tlb", "sched", "workqueue", NULL };
	char here[32], ipi[32], tlb[64], mask[48];
	char **vec;

	snprintf(here, sizeof(here), "CPU == %d", s->cpu);
	snprintf(ipi, sizeof(ipi), "cpu == %d", s->cpu);
	snprintf(mask, sizeof(mask), "cpumask & CPUS{%d}", s->cpu);
	/* reason 0 is the flush of a task switch, part of "task" already */
	snprintf(tlb, sizeof(tlb), "CPU == %d && reason != 0", s->cpu);

	s->tep = tracefs_local_events_system(s->tracing_dir, systems);
	if (!s->tep) {
		snprintf(err, errlen, "cannot read the event formats under %s/events", s->tracing_dir);
		return -EIO;
	}
	if (enable(s, "irq", "irq_handler_entry", here) || enable(s, "irq", "irq_handler_exit", here) ||
	    enable(s, "irq", "softirq_entry", here) || enable(s, "irq", "softirq_exit", here) ||
	    enable(s, "sched", "sched_switch", here)) {
		snprintf(err, errlen, "cannot enable the irq and sched events in %s",
			 tracefs_instance_get_trace_dir(s->inst));
		return -EIO;
	}
	map_event(s, "irq", "irq_handler_entry", TR_IRQ, TP_ENTRY, NULL);
	map_event(s, "irq", "irq_handler_exit", TR_IRQ, TP_EXIT, NULL);
	map_event(s, "irq", "softirq_entry", TR_SOFTIRQ, TP_ENTRY, NULL);
	map_event(s, "irq", "softirq_exit", TR_SOFTIRQ, TP_EXIT, NULL);
	map_event(s, "sched", "sched_switch", TR_SWITCH, TP_POINT, NULL);

	/* System vectors: every _entry and _exit pair this kernel has (the tick
	 * is local_timer; IPIs are call_function*, reschedule, irq_work). */
	vec = tracefs_system_events(s->tracing_dir, "irq_vectors");
	for (int i = 0; vec && vec[i]; i++) {
		size_t l = strlen(vec[i]);
		bool entry = l > 6 && !strcmp(vec[i] + l - 6, "_entry");
		bool exit_ = l > 5 && !strcmp(vec[i] + l - 5, "_exit");
		char *name;

		if ((!entry && !exit_) || enable(s, "irq_vectors", vec[i], here))
			continue;
		name = strndup(vec[i], l - (entry ? 6 : 5));
		map_event(s, "irq_vectors", vec[i], TR_VECTOR, entry ? TP_ENTRY : TP_EXIT, name);
	}
	tracefs_list_free(vec);

	if (!enable(s, "nmi", "nmi_handler", here))
		map_event(s, "nmi", "nmi_handler", TR_NMI, TP_POINT, NULL);
	if (!enable(s, "tlb", "tlb_flush", tlb))
		map_event(s, "tlb", "tlb_flush", TR_TLB, TP_POINT, NULL);
	if (!enable(s, "ipi", "ipi_send_cpu", ipi))
		map_event(s, "ipi", "ipi_send_cpu", TR_IPI_SEND, TP_POINT, NULL);
	if (!enable(s, "ipi", "ipi_send_cpumask", mask))
		map_event(s, "ipi", "ipi_send_cpumask", TR_IPI_SEND, TP_POINT, NULL);
	if (!enable(s, "csd", "csd_function_entry", here) && !enable(s, "csd", "csd_function_exit", here)) {
		map_event(s, "csd", "csd_function_entry", TR_CSD, TP_ENTRY, NULL);
		map_event(s, "csd", "csd_function_exit", TR_CSD, TP_EXIT, NULL);
	}
	if (!enable(s, "workqueue", "workqueue_execute_start", here) &&
	    !enable(s, "workqueue", "workqueue_execute_end", here)) {
		map_event(s, "workqueue", "workqueue_execute_start", TR_WORK, TP_ENTRY, NULL);
		map_event(s, "workqueue", "workqueue_execute_end", TR_WORK, TP_EXIT, NULL);
	}
	return 0;
}

/* ---- reading ------------------------------------------------------------ */

static long long field(struct tep_event *e, struct tep_record *r, const char *name)
{
	unsigned long long v = 0;

	tep_get_field_val(NULL, e, name, r, &v, 0);
	return (long long)v;
}

static void field_str(struct tep_event *e, struct tep_record *r, const char *name,
		      char *buf, size_t len)
{
	int l = 0;
	const char *p = tep_get_field_raw(NULL, e, name, r, &l, 0);

	if (!p || l <= 0) {
		snprintf(buf, len, "?");
		return;
	}
	snprintf(buf, len, "%.*s", l, p);
}

static const char *softirq_name(unsigned vec)
{
	static const char *const names[] = { "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK",
					     "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU" };
	return vec < sizeof(names) / sizeof(names[0]) ? names[vec] : "?";
}

static uint64_t to_tsc(const struct trace_session *s, uint64_t ts)
{
	if (s->tsc_clock)
		return ts;
	/* mono: nanoseconds of CLOCK_MONOTONIC, put on the calibrated TSC */
	return s->tsc.base_tsc + (uint64_t)((double)((int64_t)(ts - s->tsc.base_ns)) *
					    (double)s->tsc.hz / 1e9);
}

static int on_event(struct tep_event *e, struct tep_record *r, int cpu, void *ctx)
{
	struct trace_session *s = ctx;
	struct trace_rec *t;
	const struct evmap *m = NULL;

	if (r->missed_events > 0)
		s->lost += (uint64_t)r->missed_events;
	for (int i = 0; i < s->nmap; i++)
		if (s->map[i].id == e->id) {
			m = &s->map[i];
			break;
		}
	if (!m)
		return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 65536;
		void *p = realloc(s->rec, cap * sizeof(*s->rec));
		if (!p) {
			s->oom = true;
			s->lost++;
			return 0;
		}
		s->rec = p;
		s->cap = cap;
	}
	t = &s->rec[s->n++];
	memset(t, 0, sizeof(*t));
	t->ts = to_tsc(s, r->ts);
	t->cpu = (int16_t)cpu;
	t->type = m->type;
	t->phase = m->phase;
	t->pid = tep_data_pid(s->tep, r);
	switch (m->type) {
	case TR_IRQ:
		t->num = (int32_t)field(e, r, "irq");
		if (m->phase == TP_ENTRY)
			field_str(e, r, "name", t->name, sizeof(t->name));
		break;
	case TR_SOFTIRQ:
		t->num = (int32_t)field(e, r, "vec");
		snprintf(t->name, sizeof(t->name), "%s", softirq_name((unsigned)t->num));
		break;
	case TR_VECTOR:
		t->num = (int32_t)field(e, r, "vector");
		snprintf(t->name, sizeof(t->name), "%s", m->name);
		break;
	case TR_NMI:
		t->arg = (uint64_t)field(e, r, "delta_ns");
		break;
	case TR_TLB:
		t->num = (int32_t)field(e, r, "reason");
		t->arg = (uint64_t)field(e, r, "pages");
		break;
	case TR_SWITCH:
		t->pid = (int32_t)field(e, r, "prev_pid");
		t->pid2 = (int32_t)field(e, r, "next_pid");
		field_str(e, r, "prev_comm", t->comm, sizeof(t->comm));
		field_str(e, r, "next_comm", t->name, sizeof(t->name));
		break;
	case TR_IPI_SEND:
		t->num = tep_find_field(e, "cpu") ? (int32_t)field(e, r, "cpu") : -1;
		t->arg = (uint64_t)field(e, r, "callback");
		break;
	case TR_CSD:
		t->arg = (uint64_t)field(e, r, "func");
		break;
	case TR_WORK:
		t->arg = (uint64_t)field(e, r, "function");
		break;
	}
	return 0;
}

static void drain(struct trace_session *s)
{
	cpu_set_t all;

	cpus_online(&all);
	tracefs_iterate_raw_events(s->tep, s->inst, &all, sizeof(all), on_event, s);
}

static void *drainer(void *arg)
{
	struct trace_session *s = arg;
	struct timespec ts = { 0, DRAIN_PERIOD_NS };

	while (!atomic_load(&s->stop)) {
		drain(s);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* ---- the session ---------------------------------------------------------- */

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

int trace_start(struct trace_session **out, int cpu, char *err, size_t errlen)
{
	struct trace_session *s;
	cpu_set_t others;
	char name[64], *clocks;
	int rc;

	*out = NULL;
	if (geteuid() != 0)
		return fail(err, errlen, -EPERM, "tracing needs root (tracefs)");
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cpu = cpu;
	s->guard = -1;
	s->guard_fd = -1;
	cpus_online(&others);
	CPU_CLR(cpu, &others);
	if (CPU_COUNT(&others) == 0)
		CPU_SET(cpu, &others);
	trace_cleanup_stale();
	mkdir(ISOLATE_STATE_DIR, 0755);
	snprintf(s->journal, sizeof(s->journal), JOURNAL_FMT, (int)getpid());
	unlink(s->journal);
	if ((rc = guard_start(s, &others)) < 0) {
		fail(err, errlen, rc, "cannot start the guard process: %s", strerror(-rc));
		goto out;
	}

	if (find_tracefs(s->tracing_dir, sizeof(s->tracing_dir)) < 0) {
		snprintf(s->tracing_dir, sizeof(s->tracing_dir), "%s", TRACEFS_PATH);
		if ((rc = journal_add(s, "mount", s->tracing_dir)) < 0) {
			fail(err, errlen, rc, "cannot write %s: %s", s->journal, strerror(-rc));
			goto out;
		}
		if (mount("nodev", s->tracing_dir, "tracefs", 0, NULL) < 0) {
			rc = -errno;
			fail(err, errlen, rc, "cannot mount tracefs on %s: %s", s->tracing_dir, strerror(errno));
			goto out;
		}
		s->mounted = true;
	}
	/* libtracefs would mount tracefs itself if it looked on its own */
	if (tracefs_set_tracing_dir(s->tracing_dir) < 0) {
		rc = fail(err, errlen, -EIO, "libtracefs rejects %s", s->tracing_dir);
		goto out;
	}
	snprintf(name, sizeof(name), "detach-%d", (int)getpid());
	{
		char path[400];
		snprintf(path, sizeof(path), "%s/instances/%s", s->tracing_dir, name);
		if ((rc = journal_add(s, "instance", path)) < 0) {
			fail(err, errlen, rc, "cannot write %s: %s", s->journal, strerror(-rc));
			goto out;
		}
	}
	s->inst = tracefs_instance_create(name);
	if (!s->inst) {
		rc = -errno ? -errno : -EIO;
		fail(err, errlen, rc, "cannot create the tracing instance %s/instances/%s: %s",
		     s->tracing_dir, name, strerror(-rc));
		goto out;
	}
	tracefs_trace_off(s->inst);

	clocks = tracefs_instance_file_read(s->inst, "trace_clock", NULL);
	s->tsc_clock = clocks && strstr(clocks, "x86-tsc");
	free(clocks);
	if (!s->tsc_clock && (rc = tsc_calibrate(&s->tsc, 0)) < 0) {
		fail(err, errlen, rc, "cannot calibrate the TSC to map trace times");
		goto out;
	}
	if (tracefs_instance_file_write(s->inst, "trace_clock", s->tsc_clock ? "x86-tsc" : "mono") < 0) {
		rc = fail(err, errlen, -EIO, "cannot set the trace clock of %s",
			  tracefs_instance_get_trace_dir(s->inst));
		goto out;
	}
	tracefs_instance_set_buffer_size(s->inst, BUFFER_KB, cpu);
	if ((rc = setup_events(s, err, errlen)) < 0)
		goto out;
	if (tracefs_trace_on(s->inst) < 0) {
		rc = fail(err, errlen, -EIO, "cannot switch tracing on in %s",
			  tracefs_instance_get_trace_dir(s->inst));
		goto out;
	}
	{
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setaffinity_np(&a, sizeof(others), &others);
		rc = -pthread_create(&s->drainer, &a, drainer, s);
		pthread_attr_destroy(&a);
		if (rc < 0) {
			fail(err, errlen, rc, "cannot start the trace reader: %s", strerror(-rc));
			goto out;
		}
		s->draining = true;
	}
	*out = s;
	return 0;
out:
	trace_close(s);
	return rc;
}

int trace_stop(struct trace_session *s)
{
	if (!s->draining)
		return 0;
	tracefs_trace_off(s->inst);
	atomic_store(&s->stop, true);
	pthread_join(s->drainer, NULL);
	s->draining = false;
	drain(s);
	/* Names of the IPI senders, from the kernel's saved command lines */
	if (tracefs_load_cmdlines(s->tracing_dir, s->tep) == 0)
		for (size_t i = 0; i < s->n; i++)
			if (s->rec[i].type == TR_IPI_SEND) {
				const char *c = tep_data_comm_from_pid(s->tep, s->rec[i].pid);
				snprintf(s->rec[i].comm, sizeof(s->rec[i].comm), "%s", c ? c : "?");
			}
	return 0;
}

void trace_close(struct trace_session *s)
{
	if (!s)
		return;
	trace_stop(s);
	if (s->inst) {
		tracefs_instance_destroy(s->inst);
		tracefs_instance_free(s->inst);
	}
	if (s->tep)
		tep_free(s->tep);
	if (s->ksyms)
		tep_free(s->ksyms);
	if (s->mounted)
		umount2(s->tracing_dir, 0);
	unlink(s->journal);
	if (s->guard > 0) {
		close(s->guard_fd);
		waitpid(s->guard, NULL, 0);
	}
	for (int i = 0; i < s->nmap; i++)
		if (s->map[i].type == TR_VECTOR)
			free((char *)s->map[i].name);
	free(s->rec);
	free(s);
}

const struct trace_rec *trace_records(const struct trace_session *s, size_t *n)
{
	*n = s->n;
	return s->rec;
}

uint64_t trace_lost(const struct trace_session *s)
{
	return s->lost;
}

const char *trace_clock_name(const struct trace_session *s)
{
	return s->tsc_clock ? "x86-tsc" : "mono mapped";
}

const char *trace_symbol(struct trace_session *s, uint64_t addr)
{
	if (!s->ksyms) {
		FILE *f = fopen("/proc/kallsyms", "re");
		char *buf = NULL;
		size_t len = 0;

		if (!f)
			return NULL;
		s->ksyms = tep_alloc();
		{
			FILE *m = open_memstream(&buf, &len);
			char line[512];
			while (m && fgets(line, sizeof(line), f))
				fputs(line, m);
			if (m)
				fclose(m);
		}
		fclose(f);
		if (s->ksyms && buf)
			tep_parse_kallsyms(s->ksyms, buf);
		free(buf);
	}
	return s->ksyms ? tep_find_function(s->ksyms, addr) : NULL;
}

void trace_rec_format(struct trace_session *s, const struct trace_rec *r, uint64_t t0,
		      const struct tsc_clock *tsc, char *buf, size_t len)
{
	static const char *const type[] = { "irq", "softirq", "vector", "nmi", "tlb_flush",
					    "sched_switch", "ipi_send", "csd_function", "workqueue" };
	static const char *const phase[] = { "_entry", "_exit", "" };
	const char *sym = NULL;
	int64_t d = (int64_t)(r->ts - t0);
	int l;

	l = snprintf(buf, len, "%14.3f us cpu%d %s%s", (d < 0 ? -(double)tsc_cycles_to_ns(tsc, (uint64_t)-d)
						     : (double)tsc_cycles_to_ns(tsc, (uint64_t)d)) / 1e3,
		     r->cpu, type[r->type], phase[r->phase]);
	if ((size_t)l >= len)
		return;
	buf += l;
	len -= (size_t)l;
	if (r->type == TR_CSD || r->type == TR_WORK || r->type == TR_IPI_SEND)
		sym = r->arg ? trace_symbol(s, r->arg) : NULL;
	switch (r->type) {
	case TR_IRQ:
		snprintf(buf, len, " irq=%d %s", r->num, r->name);
		break;
	case TR_SOFTIRQ:
	case TR_VECTOR:
		snprintf(buf, len, " %s (%d)", r->name, r->num);
		break;
	case TR_NMI:
		snprintf(buf, len, " %llu ns", (unsigned long long)r->arg);
		break;
	case TR_TLB:
		snprintf(buf, len, " reason=%d pages=%llu", r->num, (unsigned long long)r->arg);
		break;
	case TR_SWITCH:
		snprintf(buf, len, " %s[%d] -> %s[%d]", r->comm, r->pid, r->name, r->pid2);
		break;
	case TR_IPI_SEND:
		if (r->num >= 0)
			snprintf(buf, len, " to cpu%d by %s[%d] %s", r->num, r->comm, r->pid, sym ? sym : "");
		else
			snprintf(buf, len, " to a mask by %s[%d] %s", r->comm, r->pid, sym ? sym : "");
		break;
	default:
		snprintf(buf, len, " %s", sym ? sym : "");
	}
}
