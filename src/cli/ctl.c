/* detach ctl: mounts and unmounts the paper's control files (section
 * III-B-4), which ctl_fs.c serves with FUSE; docs/pid.md.
 *
 * Mounting changes the system: directories may be made for the mount
 * point, a file system is mounted, a log is written.  All of it is recorded
 * before it is made, in /run/detach/ctl-<path>.state (the mount point with
 * '/' as '%'), and undone from that record: by the daemon when it stops
 * (SIGTERM, SIGINT, SIGHUP, `--unmount`, an unmount), and by `--unmount` or
 * the next `--mount` of the same path after a daemon that died (the kernel
 * leaves its mount behind, "Transport endpoint is not connected"). */
#include "cli/cli.h"
#include "cli/ctl.h"
#include "cli/pid_op.h"
#include "lib/partition.h"
#include "lib/undo_log.h"
#include "lib/liveness.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_MADE 16
#define DAEMON_COMM "detach-ctl"

struct record {
	char file[PATH_MAX], log[PATH_MAX];
	char path[PATH_MAX];            /* the mount point */
	pid_t pid;                      /* the daemon */
	int nmade;
	char made[MAX_MADE][PATH_MAX];  /* directories made, outermost first */
};

static int usage(int status)
{
	fprintf(status ? stderr : stdout,
		"usage: detach ctl --mount [PATH]\n"
		"       detach ctl --unmount [PATH]\n\n"
		"The paper's control files, served with FUSE at PATH (default " CTL_DEFAULT_PATH "),\n"
		"for root only:\n"
		"  detach        write a pid: its first thread is detached (as 'detach pid');\n"
		"                read: the pids with a detached thread\n"
		"  PID/cpu       the CPU of its detached thread; write one of the partition's\n"
		"                CPUs to move it there\n"
		"  PID/stats     its live statistics, as 'detach ps --json'\n"
		"  PID/attach    write 1: an ordinary thread again\n"
		"Detached threads take the CPUs of the 'detach isolate' partition, or else\n"
		"every online CPU but the first.  Errors are a sysfs file's (EINVAL, ESRCH,\n"
		"EPERM, EBUSY), the reason in the daemon's log.\n\n"
		"options:\n"
		"  --mount [PATH]     mount (the directory is made if missing) and serve\n"
		"  --unmount [PATH]   stop the daemon and undo the mount and what it made,\n"
		"                     also after a daemon that died\n"
		"  -h, --help         this text\n\n"
		"exit status: 0 done, 1 failed, 2 bad usage\n");
	return status;
}

/* ---- the record -------------------------------------------------------------------- */

/* An absolute path without "." and "..", its existing part resolved. */
static int resolve(const char *in, char *out, size_t len)
{
	char tmp[PATH_MAX], rest[PATH_MAX] = "", base[PATH_MAX];

	if (in[0] == '/')
		snprintf(tmp, sizeof(tmp), "%s", in);
	else if (getcwd(base, sizeof(base)))
		snprintf(tmp, sizeof(tmp), "%s/%s", base, in);
	else
		return -errno;
	for (;;) {
		size_t n = strlen(tmp);
		while (n > 1 && tmp[n - 1] == '/')
			tmp[--n] = '\0';
		if (realpath(tmp, base)) {
			snprintf(out, len, "%s%s", strcmp(base, "/") ? base : "", rest[0] ? rest : "");
			if (!out[0])
				snprintf(out, len, "/");
			return 0;
		}
		char *slash = strrchr(tmp, '/');
		if (errno != ENOENT || !slash || !strcmp(slash, "/.") || !strcmp(slash, "/.."))
			return -ENOENT;
		char r2[PATH_MAX];
		snprintf(r2, sizeof(r2), "%s%s", slash, rest);
		snprintf(rest, sizeof(rest), "%s", r2);
		if (slash == tmp)
			snprintf(tmp, sizeof(tmp), "/");
		else
			*slash = '\0';
	}
}

static void record_names(struct record *r, const char *path)
{
	char esc[PATH_MAX];

	snprintf(r->path, sizeof(r->path), "%s", path);
	snprintf(esc, sizeof(esc), "%s", path);
	for (char *p = esc; *p; p++)
		if (*p == '/')
			*p = '%';
	snprintf(r->file, sizeof(r->file), ISOLATE_STATE_DIR "/ctl-%s.state", esc);
	snprintf(r->log, sizeof(r->log), ISOLATE_STATE_DIR "/ctl-%s.log", esc);
}

/* The record is an undo log (lib/undo_log.h), written whole under a new
 * name and renamed over the old one, before anything it lists is made. */
static int record_write(const struct record *r)
{
	char tmp[PATH_MAX + 8], line[PATH_MAX + 16];
	int fd, err;

	snprintf(tmp, sizeof(tmp), "%s.new", r->file);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
		return -errno;
	snprintf(line, sizeof(line), "pid %d", (int)r->pid);
	err = undo_log_append(fd, line);
	snprintf(line, sizeof(line), "path %s", r->path);
	if (!err)
		err = undo_log_append(fd, line);
	for (int i = 0; i < r->nmade && !err; i++) {
		snprintf(line, sizeof(line), "made %s", r->made[i]);
		err = undo_log_append(fd, line);
	}
	close(fd);
	if (!err && rename(tmp, r->file))
		err = -errno;
	if (!err)
		undo_log_sync_dir(ISOLATE_STATE_DIR);
	return err;
}

static int record_read(struct record *r)
{
	char buf[(MAX_MADE + 2) * (PATH_MAX + 8)], *lines[MAX_MADE + 2];
	int n = undo_log_read(r->file, buf, sizeof(buf), lines, MAX_MADE + 2);

	if (n < 0)
		return n;
	r->nmade = 0;
	r->pid = 0;
	for (int i = 0; i < n; i++) {
		if (!strncmp(lines[i], "pid ", 4))
			r->pid = atoi(lines[i] + 4);
		else if (!strncmp(lines[i], "made ", 5) && r->nmade < MAX_MADE)
			snprintf(r->made[r->nmade++], PATH_MAX, "%s", lines[i] + 5);
	}
	return 0;
}

/* Is path mounted, and by detach ctl? 0 no, 1 ours, 2 something else. */
static int mounted(const char *path)
{
	char line[2 * PATH_MAX], src[PATH_MAX], dst[PATH_MAX];
	int found = 0;
	FILE *f = fopen("/proc/self/mounts", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%4095s %4095s", src, dst) == 2 && !strcmp(dst, path))
			found = strcmp(src, CTL_FSNAME) ? 2 : 1;
	if (f)
		fclose(f);
	return found;
}

/* Everything the record says undone: the mount (if still there), the
 * directories made (innermost first; one holding something else stays),
 * the log and the record. */
static void undo(const struct record *r)
{
	if (mounted(r->path) == 1 && umount2(r->path, MNT_DETACH))
		fprintf(stderr, "detach: warning: cannot unmount %s: %s\n", r->path, strerror(errno));
	unlink(r->log);
	unlink(r->file);
	for (int i = r->nmade - 1; i >= 0; i--)
		if (rmdir(r->made[i]) && errno != ENOENT && errno != ENOTEMPTY)
			fprintf(stderr, "detach: warning: cannot remove %s: %s\n", r->made[i], strerror(errno));
}

/* Our daemon (its name), and alive: not a zombie waiting for its reaper. */
static bool daemon_alive(pid_t pid)
{
	char path[64], comm[32];

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	return pid_alive(pid) && !read_text_file(path, comm, sizeof(comm)) && !strcmp(comm, DAEMON_COMM);
}

/* The directories from the first missing ancestor of path down to path,
 * outermost first, in r->made (the record's own directory first). */
static int plan_dirs(struct record *r)
{
	const char *wanted[2] = { ISOLATE_STATE_DIR, r->path };

	r->nmade = 0;
	for (int w = 0; w < 2; w++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s", wanted[w]);
		for (char *s = p + 1;; s++) {
			if (*s != '/' && *s)
				continue;
			char c = *s;
			*s = '\0';
			bool listed = false;
			for (int i = 0; i < r->nmade; i++)
				listed |= !strcmp(r->made[i], p);
			if (!listed && access(p, F_OK)) {
				if (r->nmade == MAX_MADE)
					return -ENAMETOOLONG;
				snprintf(r->made[r->nmade++], PATH_MAX, "%s", p);
			}
			*s = c;
			if (!c)
				break;
		}
	}
	return 0;
}

/* ---- mounting -------------------------------------------------------------------------- */

static int daemon_main(struct record *r, int ready)
{
	cpu_set_t cpus;
	int fd, status;

	setsid();
	prctl(PR_SET_NAME, DAEMON_COMM, 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	if (chdir("/"))
		return 1;
	if ((fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) {
		dup2(fd, 0);
		close(fd);
	}
	/* the record first, then what it records (but the record's own
	 * directory, listed in it all the same) */
	r->pid = getpid();
	if (plan_dirs(r) || (mkdir(ISOLATE_STATE_DIR, 0755) && errno != EEXIST)) {
		dprintf(ready, "cannot make %s: %s\n", ISOLATE_STATE_DIR, strerror(errno));
		return 1;
	}
	if (record_write(r)) {
		dprintf(ready, "cannot write %s: %s\n", r->file, strerror(errno));
		undo(r);
		return 1;
	}
	for (int i = 0; i < r->nmade; i++)
		if (mkdir(r->made[i], 0755) && errno != EEXIST) {
			dprintf(ready, "cannot make %s: %s\n", r->made[i], strerror(errno));
			undo(r);
			return 1;
		}
	if ((fd = open(r->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		close(fd);
	}
	pid_default_cpus(&cpus);
	status = ctl_serve(r->path, &cpus, ready);
	undo(r);
	return status;
}

static int do_mount(const char *path)
{
	struct record r;
	char msg[512] = "";
	int p[2];
	ssize_t n;
	pid_t child;

	memset(&r, 0, sizeof(r));
	record_names(&r, path);
	if (!record_read(&r)) {
		if (daemon_alive(r.pid)) {
			cli_err("the control files are mounted at %s already (daemon %d)", path, (int)r.pid);
			cli_note("'detach ctl --unmount %s' stops it", path);
			return 1;
		}
		cli_warn("the daemon of %s (pid %d) died: its mount and directories are undone first",
			 path, (int)r.pid);
		undo(&r);
	}
	if (mounted(path)) {
		cli_err("%s is a mount point already", path);
		cli_note("choose another path: detach ctl --mount PATH");
		return 1;
	}
	if (access("/dev/fuse", R_OK | W_OK)) {
		cli_err("no /dev/fuse: %s", strerror(errno));
		cli_note("load the module: modprobe fuse");
		return 1;
	}
	if (pipe2(p, O_CLOEXEC) || (child = fork()) < 0) {
		cli_err("cannot start the daemon: %s", strerror(errno));
		return 1;
	}
	if (child == 0) {
		close(p[0]);
		_exit(daemon_main(&r, p[1]));
	}
	close(p[1]);
	n = read(p[0], msg, sizeof(msg) - 1);
	close(p[0]);
	msg[n > 0 ? n : 0] = '\0';
	msg[strcspn(msg, "\n")] = '\0';
	if (strcmp(msg, "ok")) {
		waitpid(child, NULL, 0);
		cli_err("cannot mount the control files at %s: %s", path, msg[0] ? msg : "the daemon died");
		cli_note("is FUSE available (modprobe fuse) and %s an empty directory or missing?", path);
		return 1;
	}
	printf("detach: control files at %s (daemon %d, log %s)\n", path, (int)child, r.log);
	return 0;
}

static int do_unmount(const char *path)
{
	struct record r;

	memset(&r, 0, sizeof(r));
	record_names(&r, path);
	if (record_read(&r)) {
		if (mounted(path) == 1) {
			/* a record lost with /run: the mount alone */
			if (umount2(path, MNT_DETACH)) {
				cli_err("cannot unmount %s: %s", path, strerror(errno));
				return 1;
			}
			printf("detach: unmounted %s (no record of it was left)\n", path);
			return 0;
		}
		cli_err("the control files are not mounted at %s", path);
		cli_note("'grep %s /proc/mounts' lists where they are", CTL_FSNAME);
		return 1;
	}
	if (daemon_alive(r.pid)) {
		kill(r.pid, SIGTERM);
		for (int i = 0; i < 500 && daemon_alive(r.pid); i++)
			nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
		if (daemon_alive(r.pid)) {
			cli_err("the daemon %d of %s did not stop within 5 s", (int)r.pid, path);
			cli_note("is a detach or attach of it stuck? 'kill -9 %d' and then 'detach ctl --unmount %s'",
				 (int)r.pid, path);
			return 1;
		}
	}
	if (!access(r.file, F_OK))
		undo(&r);       /* the daemon died without undoing */
	if (mounted(path) == 1) {
		cli_err("%s is still mounted", path);
		return 1;
	}
	printf("detach: unmounted %s\n", path);
	return 0;
}

static int ctl_main(int argc, char **argv)
{
	static const struct option longs[] = {
		{ "mount", no_argument, NULL, 'm' },
		{ "unmount", no_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char path[PATH_MAX];
	int c, what = 0, err;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case 'm':
		case 'u':
			if (what && what != c) {
				cli_err("--mount and --unmount exclude each other");
				cli_note("detach ctl --mount [PATH] or detach ctl --unmount [PATH]");
				return EXIT_USAGE;
			}
			what = c;
			break;
		case 'h':
			return usage(0);
		default:
			return cli_bad_option("ctl", argv);
		}
	}
	if (!what) {
		cli_err("mount or unmount?");
		cli_note("detach ctl --mount [PATH] or detach ctl --unmount [PATH]");
		return EXIT_USAGE;
	}
	if (optind + 1 < argc)
		return cli_unexpected_arg("ctl", argv[optind + 1]);
	if (geteuid() != 0) {
		cli_err("the control files are served by root only");
		cli_note("run 'sudo detach ctl ...'");
		return 1;
	}
	if ((err = resolve(optind < argc ? argv[optind] : CTL_DEFAULT_PATH, path, sizeof(path)))) {
		cli_err("'%s' is not a usable path: %s", argv[optind], strerror(-err));
		cli_note("name an absolute path, e.g. " CTL_DEFAULT_PATH);
		return EXIT_USAGE;
	}
	return what == 'm' ? do_mount(path) : do_unmount(path);
}

DETACH_VERB(verb_ctl) = { "ctl", "the paper's control files (detach, PID/cpu, ...) with FUSE", ctl_main };
