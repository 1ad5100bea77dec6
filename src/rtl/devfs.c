/* /dev/rtfN for Linux processes: a FUSE file system of the RT task's FIFOs,
 * served by libfuse3 on the housekeeping CPUs (docs/rtl.md says why FUSE).
 *
 * The task mounts /dev/shm/detach-rtl.PID (files rtfN, one per created
 * FIFO) and links LINKDIR/rtfN to it: LINKDIR is $DETACH_RTF_DIR, else /dev
 * when it is writable, else /dev/shm/detach-rtf.  A read takes what the RT
 * side put (blocking until a byte is there, unless O_NONBLOCK: EAGAIN); a
 * write hands its bytes to the RT side, then counts a write, which makes the
 * executive run the FIFO's handler.  poll: readable while the RT side's
 * bytes wait, writable while there is room; a poll that waits is told by
 * the notifier thread, which sleeps in poll(2) on the FIFOs' channel fds
 * (the ipc watcher writes them when the detached side puts).  A link or
 * mount left by a task that died is removed when the next task starts or
 * creates that FIFO. */
#define FUSE_USE_VERSION 312
#include "rtl/rtl_int.h"
#include "lib/liveness.h"

#include <dirent.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/stat.h>

#define INO_FIFO0 2                       /* inode of rtf0; 1 is the root */
#define SLICE_NS 50000000ull              /* a blocked read looks at interrupts this often */
#define MOUNT_PREFIX "/dev/shm/detach-rtl."

static struct fuse_session *se;
static pthread_t loop_thread, notify_thread;
static pthread_mutex_t poll_lock = PTHREAD_MUTEX_INITIALIZER;   /* the poll handles */
static int stopping;
static char mnt[64], linkdir[256];

static int fifo_of(fuse_ino_t ino)
{
	return ino >= INO_FIFO0 && ino < INO_FIFO0 + RTF_NO &&
	       load_acquire(&rtl_fifos[ino - INO_FIFO0].created) ? (int)(ino - INO_FIFO0) : -1;
}

static int fill_attr(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (fifo_of(ino) < 0)
		return ENOENT;
	st->st_mode = S_IFREG | 0600;
	st->st_nlink = 1;
	return 0;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = { 0 };
	unsigned int n;
	char end;

	if (parent != FUSE_ROOT_ID || sscanf(name, "rtf%u%c", &n, &end) != 1 || n >= RTF_NO ||
	    fill_attr(INO_FIFO0 + n, &e.attr)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	e.ino = INO_FIFO0 + n;
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int err = fill_attr(ino, &st);

	(void)fi;
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, 0);
}

/* O_TRUNC of `echo > /dev/rtfN` arrives as a setattr: nothing to truncate. */
static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	(void)attr, (void)to_set;
	op_getattr(req, ino, fi);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	char buf[4096], name[16];
	size_t used = 0;
	struct stat st = { 0 };

	(void)fi;
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (size > sizeof(buf))
		size = sizeof(buf);
	/* offsets: 1 ".", 2 "..", 3 + n rtfN */
	for (off_t i = off; i < 3 + RTF_NO; i++) {
		size_t need;

		if (i == 0 || i == 1) {
			st.st_ino = FUSE_ROOT_ID;
			st.st_mode = S_IFDIR;
			snprintf(name, sizeof(name), "%s", i ? ".." : ".");
		} else if (i == 2 || fifo_of(INO_FIFO0 + (fuse_ino_t)(i - 3)) < 0) {
			continue;
		} else {
			st.st_ino = INO_FIFO0 + (fuse_ino_t)(i - 3);
			st.st_mode = S_IFREG;
			snprintf(name, sizeof(name), "rtf%d", (int)(i - 3));
		}
		need = fuse_add_direntry(req, buf + used, size - used, name, &st, i + 1);
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (fifo_of(ino) < 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fi->direct_io = 1;        /* every read and write reaches us, any size */
	fi->nonseekable = 1;
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	int n = fifo_of(ino);
	struct rtl_fifo *f;
	char *buf;
	long got = 0;

	(void)off;
	if (n < 0) {
		fuse_reply_buf(req, NULL, 0);     /* destroyed: end of file */
		return;
	}
	f = &rtl_fifos[n];
	if (!(buf = malloc(size ? size : 1))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&f->rlock);
	while (load_acquire(&f->created)) {
		uint64_t flushed = load_acquire(&f->out_flushed);

		/* rtf_flush: what was in the FIFO then is dropped, not read */
		while (f->out_taken < flushed &&
		       (got = dt_chan_get(f->out_reader, buf, size < flushed - f->out_taken ? size : flushed - f->out_taken, 0)) > 0)
			f->out_taken += (uint64_t)got;
		got = dt_chan_get(f->out_reader, buf, size, fi->flags & O_NONBLOCK ? 0 : dt_now_ns() + SLICE_NS);
		if (got > 0)
			f->out_taken += (uint64_t)got;
		if (got != -ETIMEDOUT || fuse_req_interrupted(req))
			break;
	}
	pthread_mutex_unlock(&f->rlock);
	if (got >= 0)
		fuse_reply_buf(req, buf, (size_t)got);
	else
		fuse_reply_err(req, got == -ETIMEDOUT ? EINTR : got == -EAGAIN ? EAGAIN : EIO);
	free(buf);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct timespec ms = { 0, 1000000 };
	int n = fifo_of(ino), err = 0;
	struct rtl_fifo *f;
	size_t done = 0;

	(void)off;
	if (n < 0) {
		fuse_reply_err(req, ENODEV);
		return;
	}
	f = &rtl_fifos[n];
	pthread_mutex_lock(&f->wlock);
	while (done < size && load_acquire(&f->created)) {
		size_t chunk = size - done < f->ring_bytes ? size - done : f->ring_bytes;

		err = dt_chan_put(f->in_writer, buf + done, chunk);
		if (!err) {
			done += chunk;
			/* release: the bytes are in before the RT side sees the count */
			__atomic_add_fetch(&f->in_put, chunk, __ATOMIC_RELEASE);
			continue;
		}
		if (err != -EAGAIN || fi->flags & O_NONBLOCK || fuse_req_interrupted(req))
			break;
		nanosleep(&ms, NULL);     /* full: the RT side has not taken enough yet */
	}
	if (done) {
		__atomic_add_fetch(&f->writes, 1, __ATOMIC_RELEASE);
		__atomic_add_fetch(&rtl_fifo_writes, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&f->wlock);
	if (done)
		fuse_reply_write(req, done);
	else
		fuse_reply_err(req, err == -EAGAIN ? (fi->flags & O_NONBLOCK ? EAGAIN : EINTR) : ENODEV);
}

/* What a poll of FIFO f would see now. */
static unsigned ready_mask(struct rtl_fifo *f)
{
	uint64_t put = load_acquire(&f->out_put), taken = __atomic_load_n(&f->out_taken, __ATOMIC_RELAXED);
	uint64_t flushed = load_acquire(&f->out_flushed);
	unsigned m = 0;

	if (put > (taken > flushed ? taken : flushed))
		m |= POLLIN;
	if (load_acquire(&f->in_put) - load_acquire(&f->in_got) < f->ring_bytes)
		m |= POLLOUT;
	return m;
}

static void op_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, struct fuse_pollhandle *ph)
{
	int n = fifo_of(ino);
	struct rtl_fifo *f;
	unsigned m;

	(void)fi;
	if (n < 0) {
		if (ph)
			fuse_pollhandle_destroy(ph);
		fuse_reply_poll(req, POLLIN);        /* destroyed: end of file to read */
		return;
	}
	f = &rtl_fifos[n];
	pthread_mutex_lock(&poll_lock);
	m = ready_mask(f);
	if (ph) {
		/* the notifier tells it when the mask differs from this one */
		if (f->poll_handle)
			fuse_pollhandle_destroy(f->poll_handle);
		f->poll_handle = ph;
		f->poll_mask = m;
	}
	pthread_mutex_unlock(&poll_lock);
	fuse_reply_poll(req, m);
}

/* Tells waiting polls that their FIFO became ready: sleeps in poll(2) on
 * the channels of FIFOs with a waiting poll, at most 100 ms (room to write
 * appears without a wake-up). */
static void *notify_main(void *arg)
{
	(void)arg;
	while (!load_acquire(&stopping)) {
		struct pollfd fds[RTF_NO];
		int nfds = 0;

		pthread_mutex_lock(&poll_lock);
		for (int n = 0; n < RTF_NO; n++) {
			struct rtl_fifo *f = &rtl_fifos[n];

			if (!f->poll_handle)
				continue;
			if (!load_acquire(&f->created) || ready_mask(f) != f->poll_mask) {
				fuse_lowlevel_notify_poll(f->poll_handle);
				fuse_pollhandle_destroy(f->poll_handle);
				f->poll_handle = NULL;
			} else if (f->out_fd >= 0) {
				fds[nfds++] = (struct pollfd){ .fd = f->out_fd, .events = POLLIN };
			}
		}
		pthread_mutex_unlock(&poll_lock);
		poll(fds, (nfds_t)nfds, 100);
	}
	return NULL;
}

static const struct fuse_lowlevel_ops ops = {
	.poll = op_poll,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readdir = op_readdir,
	.open = op_open,
	.read = op_read,
	.write = op_write,
};

/* ---- links and mounts ---------------------------------------------------- */

/* The pid of the task a link or mount of ours names; 0 if not ours. */
static pid_t owner_of(const char *target)
{
	size_t len = strlen(MOUNT_PREFIX);

	return strncmp(target, MOUNT_PREFIX, len) ? 0 : (pid_t)atoi(target + len);
}

static void remove_mount(pid_t pid)
{
	char dir[64];

	snprintf(dir, sizeof(dir), MOUNT_PREFIX "%d", (int)pid);
	umount2(dir, MNT_DETACH);
	rmdir(dir);
}

/* Mounts of tasks that died without unmounting. */
static void remove_dead_mounts(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	char path[300];
	pid_t pid;

	if (!d)
		return;
	while ((e = readdir(d))) {
		snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
		if ((pid = owner_of(path)) > 0 && !pid_alive(pid))
			remove_mount(pid);
	}
	closedir(d);
}

int rtl_devfs_link(unsigned int n)
{
	char link[300], target[300], old[300];
	ssize_t len;
	pid_t pid;

	rtl_fifos[n].out_fd = dt_chan_fd(rtl_fifos[n].out_reader);

	snprintf(link, sizeof(link), "%s/rtf%u", linkdir, n);
	snprintf(target, sizeof(target), "%s/rtf%u", mnt, n);
	if ((len = readlink(link, old, sizeof(old) - 1)) >= 0) {
		old[len] = 0;
		pid = owner_of(old);
		if (!pid || (pid != getpid() && pid_alive(pid)))
			return -EBUSY;           /* another task's FIFO, or not ours at all */
		unlink(link);
		if (pid != getpid())
			remove_mount(pid);
	} else if (errno != ENOENT) {
		return -EBUSY;                   /* a file that is not a link: a real device */
	}
	return symlink(target, link) ? -errno : 0;
}

void rtl_devfs_unlink(unsigned int n)
{
	char link[300], old[300];
	ssize_t len;

	pthread_mutex_lock(&poll_lock);
	rtl_fifos[n].out_fd = -1;               /* the notifier tells its poll */
	pthread_mutex_unlock(&poll_lock);

	snprintf(link, sizeof(link), "%s/rtf%u", linkdir, n);
	if ((len = readlink(link, old, sizeof(old) - 1)) >= 0) {
		old[len] = 0;
		if (owner_of(old) == getpid())
			unlink(link);
	}
}

static void *loop_main(void *arg)
{
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();

	(void)arg;
	fuse_loop_cfg_set_max_threads(cfg, 2 * RTF_NO + 4);   /* a blocked reader and writer per FIFO */
	fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return NULL;
}

int rtl_devfs_start(void)
{
	const char *dir = getenv("DETACH_RTF_DIR");
	char opts[] = "-ofsname=detach-rtl,default_permissions,allow_other";
	char *argv[] = { "detach-rtl", opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(2, argv);
	int err;

	if (dir && *dir)
		snprintf(linkdir, sizeof(linkdir), "%s", dir);
	else if (!access("/dev", W_OK))
		snprintf(linkdir, sizeof(linkdir), "/dev");
	else
		snprintf(linkdir, sizeof(linkdir), "/dev/shm/detach-rtf");
	if (mkdir(linkdir, 0755) && errno != EEXIST)
		return -errno;
	if (geteuid())
		args.argc = 1;                   /* allow_other is root's (fuse.conf) */
	remove_dead_mounts();
	snprintf(mnt, sizeof(mnt), MOUNT_PREFIX "%d", (int)getpid());
	if (mkdir(mnt, 0755) && errno != EEXIST)
		return -errno;
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se) {
		rmdir(mnt);
		return -ENOMEM;
	}
	if (fuse_session_mount(se, mnt)) {
		fuse_session_destroy(se);
		se = NULL;
		rmdir(mnt);
		return -ENODEV;
	}
	if ((err = pthread_create(&loop_thread, NULL, loop_main, NULL)) ||
	    (err = pthread_create(&notify_thread, NULL, notify_main, NULL))) {
		rtl_devfs_stop();
		return -err;
	}
	return 0;
}

void rtl_devfs_stop(void)
{
	if (!se)
		return;
	store_release(&stopping, 1);
	if (notify_thread)
		pthread_join(notify_thread, NULL);
	fuse_session_exit(se);
	fuse_session_unmount(se);
	if (loop_thread)
		pthread_join(loop_thread, NULL);
	fuse_session_destroy(se);
	se = NULL;
	rmdir(mnt);
}
