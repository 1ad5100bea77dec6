/* The files of `detach ctl` (ctl.h), answered through libfuse3:
 *
 *   detach        write a pid: its first thread is detached (as `detach
 *                 pid`); read: the pids with a detached thread, one a line
 *   <pid>/cpu     read: the CPU of its detached thread; write: moves it to
 *                 another CPU of the partition
 *   <pid>/stats   the live statistics, as `detach ps --json` shows them
 *   <pid>/attach  write 1: the thread is an ordinary thread again
 *
 * Errors are those a sysfs file gives (EINVAL malformed, ESRCH no such
 * process, EPERM not allowed, EBUSY taken), the reason in the log.
 *
 * A program may write its own pid (the paper's wrapper script writes $$).
 * Its thread is then blocked inside our write, and a ptrace stop only takes
 * effect on the way back to user space: the operation runs on a thread of
 * its own (it is the tracer throughout), and the write is answered once
 * every thread of the program is seized and interrupted.  The writer then
 * stops on its way out of write(), before it can run on, and everything it
 * does next (`echo N > $$/cpu`, exec) comes after the operation.  Errors
 * found after the answer can only go to the log.  Other writers get the
 * operation's own result. */
#define FUSE_USE_VERSION 35
#include "cli/ctl.h"
#include "cli/pid_op.h"
#include "cli/ps.h"
#include "lib/liveness.h"

#include <errno.h>
#include <fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static cpu_set_t ctl_cpus;              /* the partition: where threads go */

void ctl_log(const char *fmt, ...)
{
	char stamp[32];
	time_t now = time(NULL);
	va_list ap;

	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", gmtime(&now));
	flockfile(stderr);
	fprintf(stderr, "%s ", stamp);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	funlockfile(stderr);
}

/* ---- operations on their own thread ---------------------------------------------- */

struct job {
	struct pid_op op;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool seized, done;
	int err;
	int refs;               /* the handler and the worker: the last frees */
};

static const char *const op_names[] = { "detach", "attach", "move" };

/* Operations under way: the daemon stops only after them, or a program
 * would be left stopped with its registers on one of our calls. */
static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jobs_cond = PTHREAD_COND_INITIALIZER;
static int jobs_running;

static void jobs_add(int n)
{
	pthread_mutex_lock(&jobs_lock);
	jobs_running += n;
	pthread_cond_broadcast(&jobs_cond);
	pthread_mutex_unlock(&jobs_lock);
}

static void jobs_wait(void)
{
	pthread_mutex_lock(&jobs_lock);
	while (jobs_running)
		pthread_cond_wait(&jobs_cond, &jobs_lock);
	pthread_mutex_unlock(&jobs_lock);
}

static void put_job(struct job *j)
{
	pthread_mutex_lock(&j->lock);
	int left = --j->refs;
	pthread_mutex_unlock(&j->lock);
	if (!left)
		free(j);
}

static void job_seized(void *arg)
{
	struct job *j = arg;

	pthread_mutex_lock(&j->lock);
	j->seized = true;
	pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
}

static void *job_run(void *arg)
{
	struct job *j = arg;
	int err;

	prctl(PR_SET_NAME, "detach-ctl-op", 0, 0, 0);
	err = pid_op_run(&j->op);
	if (err)
		ctl_log("%s pid %d: %s: %s%s%s", op_names[j->op.kind], (int)j->op.pid, strerror(-err), j->op.why,
			j->op.note[0] ? " (NOTE: " : "", j->op.note[0] ? j->op.note : "");
	else if (j->op.kind == PID_ATTACH)
		ctl_log("attach pid %d: an ordinary thread again", (int)j->op.pid);
	else
		ctl_log("%s pid %d: detached on CPU %d", op_names[j->op.kind], (int)j->op.pid,
			pid_detached_cpu(j->op.pid, j->op.tid ? j->op.tid : j->op.pid));
	pthread_mutex_lock(&j->lock);
	j->done = true;
	j->err = err;
	pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
	put_job(j);
	jobs_add(-1);
	return NULL;
}

/* Does the calling thread belong to process pid? */
static bool caller_in(pid_t pid)
{
	char path[64], buf[4096], *p;
	pid_t tid = fuse_get_context()->pid;

	if (tid == pid)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	return !read_text_file(path, buf, sizeof(buf)) && (p = strstr(buf, "\nTgid:")) && atoi(p + 6) == pid;
}

/* Runs op and answers: the writer's own process as soon as it is seized,
 * anybody else with the result. */
static int run_op(const struct pid_op *op)
{
	struct job *j = calloc(1, sizeof(*j));
	pthread_t th;
	bool self = caller_in(op->pid);
	int err;

	if (!j)
		return -ENOMEM;
	j->op = *op;
	j->op.seized = job_seized;
	j->op.arg = j;
	j->refs = 2;
	pthread_mutex_init(&j->lock, NULL);
	pthread_cond_init(&j->cond, NULL);
	jobs_add(1);
	if ((err = pthread_create(&th, NULL, job_run, j))) {
		jobs_add(-1);
		free(j);
		return -err;
	}
	pthread_detach(th);
	pthread_mutex_lock(&j->lock);
	while (!j->done && !(self && j->seized))
		pthread_cond_wait(&j->cond, &j->lock);
	err = j->done ? j->err : 0;
	pthread_mutex_unlock(&j->lock);
	put_job(j);
	return err;
}

/* ---- the files ----------------------------------------------------------------- */

enum node { N_NONE, N_ROOT, N_DETACH, N_DIR, N_CPU, N_STATS, N_ATTACH };

/* The first detached thread of pid and its CPU, or -1. */
struct found { pid_t pid, tid; int cpu; };

static void find_detached(const struct dt_registry *r, void *arg)
{
	struct found *f = arg;

	for (int i = 0; i < r->nthreads && i < DT_MAX_THREADS && f->cpu < 0; i++) {
		const struct dt_thread_stats *s = &r->threads[i];
		if (s->tid && s->state == 1 && !s->ended && task_alive(r->pid, s->tid)) {
			f->tid = s->tid;
			f->cpu = s->cpu;
		}
	}
}

static int detached(pid_t pid, pid_t *tid)
{
	struct found f = { pid, 0, -1 };

	ps_each(pid, find_detached, &f);
	if (tid)
		*tid = f.tid;
	return f.cpu;
}

/* A whole decimal number, with at most a newline after it. */
static bool parse_num(const char *buf, size_t len, long *v)
{
	char text[32], *end;

	if (len == 0 || len >= sizeof(text))
		return false;
	memcpy(text, buf, len);
	text[len] = '\0';
	if (text[len - 1] == '\n')
		text[--len] = '\0';
	if (!len || text[0] == '-' || text[0] == '+' || text[0] == ' ')
		return false;
	errno = 0;
	*v = strtol(text, &end, 10);
	return !*end && !errno;
}

static enum node classify(const char *path, pid_t *pid)
{
	char *end;
	long v;

	if (!strcmp(path, "/"))
		return N_ROOT;
	if (!strcmp(path, "/detach"))
		return N_DETACH;
	v = strtol(path + 1, &end, 10);
	if (v <= 0 || v > INT32_MAX || end == path + 1 || detached((pid_t)v, NULL) < 0)
		return N_NONE;
	*pid = (pid_t)v;
	if (!*end)
		return N_DIR;
	if (!strcmp(end, "/cpu"))
		return N_CPU;
	if (!strcmp(end, "/stats"))
		return N_STATS;
	if (!strcmp(end, "/attach"))
		return N_ATTACH;
	return N_NONE;
}

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	static const mode_t modes[] = {
		[N_ROOT] = S_IFDIR | 0755, [N_DIR] = S_IFDIR | 0755, [N_DETACH] = S_IFREG | 0600,
		[N_CPU] = S_IFREG | 0600, [N_STATS] = S_IFREG | 0400, [N_ATTACH] = S_IFREG | 0200,
	};
	pid_t pid;
	enum node n = classify(path, &pid);

	(void)fi;
	if (n == N_NONE)
		return -ENOENT;
	memset(st, 0, sizeof(*st));
	st->st_mode = modes[n];
	st->st_nlink = S_ISDIR(modes[n]) ? 2 : 1;
	st->st_size = S_ISDIR(modes[n]) ? 0 : 4096;      /* as sysfs: content made on read */
	st->st_mtime = st->st_atime = st->st_ctime = time(NULL);
	return 0;
}

struct dir_fill {
	void *buf;
	fuse_fill_dir_t fill;
	FILE *list;             /* or the text of `detach` */
};

static void list_pid(const struct dt_registry *r, void *arg)
{
	struct dir_fill *d = arg;
	struct found f = { r->pid, 0, -1 };
	char name[16];

	find_detached(r, &f);
	if (f.cpu < 0)
		return;
	snprintf(name, sizeof(name), "%d", (int)r->pid);
	if (d->list)
		fprintf(d->list, "%s\n", name);
	else
		d->fill(d->buf, name, NULL, 0, 0);
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags flags)
{
	struct dir_fill d = { buf, fill, NULL };
	pid_t pid;
	enum node n = classify(path, &pid);

	(void)off, (void)fi, (void)flags;
	if (n != N_ROOT && n != N_DIR)
		return n == N_NONE ? -ENOENT : -ENOTDIR;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	if (n == N_DIR) {
		fill(buf, "cpu", NULL, 0, 0);
		fill(buf, "stats", NULL, 0, 0);
		fill(buf, "attach", NULL, 0, 0);
		return 0;
	}
	fill(buf, "detach", NULL, 0, 0);
	ps_each(0, list_pid, &d);
	return 0;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
	pid_t pid;
	enum node n = classify(path, &pid);

	if (n == N_NONE)
		return -ENOENT;
	if (n == N_ROOT || n == N_DIR)
		return -EISDIR;
	fi->direct_io = 1;      /* sizes are not known before the read */
	return 0;
}

static void stats_of(const struct dt_registry *r, void *arg)
{
	struct json *j = arg;

	for (int i = 0; i < r->nthreads && i < DT_MAX_THREADS; i++)
		if (r->threads[i].tid)
			ps_thread_json(j, r, &r->threads[i]);
}

static int fs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	char *text = NULL;
	size_t len = 0;
	pid_t pid;
	FILE *f;
	enum node n = classify(path, &pid);

	(void)fi;
	if (n == N_NONE)
		return -ENOENT;
	if (n == N_ATTACH)
		return -EACCES;
	if (!(f = open_memstream(&text, &len)))
		return -ENOMEM;
	if (n == N_DETACH) {
		struct dir_fill d = { NULL, NULL, f };
		ps_each(0, list_pid, &d);
	} else if (n == N_CPU) {
		fprintf(f, "%d\n", detached(pid, NULL));
	} else if (n == N_STATS) {
		struct json j;
		json_init(&j, f);
		json_object_begin(&j, NULL);
		json_array_begin(&j, "threads");
		ps_each(pid, stats_of, &j);
		json_array_end(&j);
		json_object_end(&j);
		fputc('\n', f);
	}
	fclose(f);
	size_t n_out = (size_t)off < len ? len - (size_t)off : 0;
	if (n_out > size)
		n_out = size;
	memcpy(buf, text + off, n_out);
	free(text);
	return (int)n_out;
}

static int fs_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct pid_op op;
	pid_t pid = 0;
	long v;
	int err;
	enum node n = classify(path, &pid);

	(void)fi;
	if (n == N_NONE)
		return -ENOENT;
	if (fuse_get_context()->uid != 0) {
		ctl_log("write to %s by uid %d refused: root only", path, (int)fuse_get_context()->uid);
		return -EPERM;
	}
	if (off != 0 || !parse_num(buf, size, &v) || v < 0 || v > INT32_MAX) {
		ctl_log("write to %s: '%.*s' is not a number", path, (int)(size < 32 ? size : 32), buf);
		return -EINVAL;
	}
	memset(&op, 0, sizeof(op));
	op.pid = pid;
	op.cpus = ctl_cpus;
	switch (n) {
	case N_DETACH:
		op.kind = PID_DETACH;
		op.pid = (pid_t)v;
		op.cpu = -1;
		if (v == 0) {
			ctl_log("write to %s: 0 is no process", path);
			return -EINVAL;
		}
		break;
	case N_ATTACH:
		if (v != 1) {
			ctl_log("write to %s: only 1 attaches, not %ld", path, v);
			return -EINVAL;
		}
		op.kind = PID_ATTACH;
		detached(pid, &op.tid);
		break;
	case N_CPU:
		op.kind = PID_MOVE;
		op.cpu = (int)v;
		detached(pid, &op.tid);
		if (v >= CPU_SETSIZE || !CPU_ISSET(op.cpu, &ctl_cpus)) {
			ctl_log("write to %s: CPU %ld is not one of the partition's (%s)", path, v,
				cpulist_format(&ctl_cpus, (char[256]){ 0 }, 256));
			return -EINVAL;
		}
		break;
	default:
		return -EACCES;
	}
	if ((err = pid_op_check(&op))) {
		ctl_log("%s pid %d: %s: %s", op_names[op.kind], (int)op.pid, strerror(-err), op.why);
		return err;
	}
	err = run_op(&op);
	return err ? err : (int)size;
}

/* `echo N > file` opens with O_TRUNC */
static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	pid_t pid;

	(void)size, (void)fi;
	return classify(path, &pid) == N_NONE ? -ENOENT : 0;
}

/* Nothing cached by the kernel: a pid's directory comes and goes with its
 * detached thread, and every read is made anew. */
static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->entry_timeout = cfg->attr_timeout = cfg->negative_timeout = 0;
	cfg->direct_io = 1;
	return NULL;
}

static const struct fuse_operations ops = {
	.init = fs_init,
	.getattr = fs_getattr,
	.readdir = fs_readdir,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.truncate = fs_truncate,
};

int ctl_serve(const char *path, const cpu_set_t *cpus, int ready_fd)
{
	char *argv[] = { "detach-ctl", "-o", "fsname=" CTL_FSNAME ",subtype=detach", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fuse_loop_config cfg = { .clone_fd = 0, .max_idle_threads = 4 };
	struct fuse *f;
	int err = 1;

	ctl_cpus = *cpus;
	if (!(f = fuse_new(&args, &ops, sizeof(ops), NULL))) {
		dprintf(ready_fd, "cannot set up FUSE\n");
		close(ready_fd);
		return 1;
	}
	if (fuse_mount(f, path)) {
		dprintf(ready_fd, "cannot mount at %s (see the messages above)\n", path);
		close(ready_fd);
		fuse_destroy(f);
		return 1;
	}
	if (fuse_set_signal_handlers(fuse_get_session(f)) == 0) {
		ctl_log("mounted at %s, detached threads take CPUs %s", path,
			cpulist_format(cpus, (char[256]){ 0 }, 256));
		dprintf(ready_fd, "ok\n");
		close(ready_fd);
		ready_fd = -1;
		err = fuse_loop_mt(f, &cfg) ? 1 : 0;
		jobs_wait();
		fuse_remove_signal_handlers(fuse_get_session(f));
	}
	if (ready_fd >= 0) {
		dprintf(ready_fd, "cannot catch signals\n");
		close(ready_fd);
	}
	fuse_unmount(f);
	fuse_destroy(f);
	ctl_log("unmounted %s", path);
	return err;
}
