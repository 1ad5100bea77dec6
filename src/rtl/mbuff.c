/* mbuff: named shared memory for RT tasks and Linux processes, on dt_shm
 * (docs/rtl.md).
 *
 * mbuff_alloc(name, size) in any process linked with -ldetach-rtl maps the
 * region mbuff.NAME (created the first time); every caller gets the same
 * bytes, the page after a header page (page-aligned, as RTLinux's vmalloc'ed
 * buffers were).  RTLinux counted the users and freed the region with the
 * last mbuff_free; its kernel driver also dropped the count of a process
 * that died.  Here the kernel counts too: each mbuff_alloc opens the
 * region's file and holds a shared open-file-description lock on it
 * (F_OFD_SETLK, listed in /proc/locks); mbuff_free turns its own lock
 * exclusive, which succeeds only when no other user holds one, and then
 * removes the name.  The kernel releases the locks of a process that dies,
 * however it dies (SIGKILL), so a crashed user is not counted: the last live
 * user's mbuff_free removes the region.
 *
 * Whoever created the region, the map from dt_shm_open and the locked file
 * must be the same file: the name can be removed and made again between the
 * two opens.  The header's id (set once, by the first opener) tells; the
 * name cannot go while the lock is held. */
#include "rtl/rtl_int.h"
#include "lib/ipc.h"
#include "lib/util.h"

#include <fcntl.h>
#include <sys/stat.h>

#define MBUFF_MAGIC 0x6666756262756d64ull   /* "dmbuff" */

struct mbuff_head {
	uint64_t magic;
	uint64_t id;                 /* which making of the name this is */
};

/* The lock of each mbuff_alloc of this process, by its address. */
struct mbuff_user {
	struct mbuff_user *next;
	void *head;
	int fd;
};
static struct mbuff_user *users;
static pthread_mutex_t users_lock = PTHREAD_MUTEX_INITIALIZER;

static int shm_name(char *buf, size_t len, const char *name)
{
	return name && *name && (size_t)snprintf(buf, len, "mbuff.%s", name) < len ? 0 : -EINVAL;
}

static int lock_file(int fd, short type, bool wait)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };

	return fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) ? -errno : 0;
}

/* The file fd is the one the name stands for now and the one h maps. */
static bool same_region(int fd, const char *path, const struct mbuff_head *h)
{
	struct stat a, b;
	struct mbuff_head on_file;

	return !fstat(fd, &a) && !stat(path, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
	       pread(fd, &on_file, sizeof(on_file), 0) == (ssize_t)sizeof(on_file) &&
	       on_file.id == load_acquire(&h->id);
}

RTL_API void *mbuff_alloc(const char *name, int size)
{
	long page = sysconf(_SC_PAGESIZE);
	struct mbuff_user *u;
	char shm[160], path[sizeof(shm) + sizeof(IPC_DIR) + 8];
	uint64_t zero, id = (rdtsc() ^ (uint64_t)getpid() << 40) | 1;

	if (size <= 0 || shm_name(shm, sizeof(shm), name) || !(u = malloc(sizeof(*u))))
		return NULL;
	snprintf(path, sizeof(path), "%s/%s%s", IPC_DIR, shm, IPC_SHM_SUFFIX);
	for (int tries = 0; tries < 100; tries++) {   /* the name made again meanwhile: again */
		struct mbuff_head *h;
		void *addr;

		if (dt_shm_open(shm, DT_CHAN_CREATE, (size_t)page + (size_t)size, &addr))
			break;
		h = addr;
		/* the creator's zeroed page becomes a header; the first one in wins */
		zero = 0;
		__atomic_compare_exchange_n(&h->magic, &zero, MBUFF_MAGIC, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
		zero = 0;
		__atomic_compare_exchange_n(&h->id, &zero, id, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
		if (h->magic != MBUFF_MAGIC) {        /* a dt_shm region of that name, not an mbuff */
			dt_shm_close(addr);
			break;
		}
		u->fd = open(path, O_RDWR | O_CLOEXEC);
		if (u->fd >= 0 && !lock_file(u->fd, F_RDLCK, true) && same_region(u->fd, path, h)) {
			u->head = h;
			pthread_mutex_lock(&users_lock);
			u->next = users;
			users = u;
			pthread_mutex_unlock(&users_lock);
			return (char *)addr + page;
		}
		if (u->fd >= 0)
			close(u->fd);
		dt_shm_close(addr);
	}
	free(u);
	return NULL;
}

RTL_API void mbuff_free(const char *name, void *mbuf)
{
	long page = sysconf(_SC_PAGESIZE);
	struct mbuff_user *u = NULL;
	void *h;
	char shm[160];

	if (!mbuf || shm_name(shm, sizeof(shm), name))
		return;
	h = (char *)mbuf - page;
	pthread_mutex_lock(&users_lock);
	for (struct mbuff_user **p = &users; *p; p = &(*p)->next)
		if ((*p)->head == h) {
			u = *p;
			*p = u->next;
			break;
		}
	pthread_mutex_unlock(&users_lock);
	if (!u)
		return;                              /* not one of ours: as RTLinux, nothing */
	if (!lock_file(u->fd, F_WRLCK, false))      /* no other user holds a lock */
		dt_shm_unlink(shm);
	close(u->fd);                                /* the lock goes with it */
	dt_shm_close(h);
	free(u);
}
