/* Regions: named shared memory, mapped, prefaulted and locked at open
 * (ipc.c), so that a detached thread uses it without a page fault or a
 * system call: RTLinux's mbuff.  What lives inside is the program's. */
#include "runtime/ipc.h"
#include "detach/detach.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#define DT_API __attribute__((visibility("default")))
#define SHM_MAX_BYTES ((size_t)1 << 36)

struct region {
	struct region *next;
	void *addr;
	size_t bytes;
};
static struct region *regions;
static pthread_mutex_t regions_lock = PTHREAD_MUTEX_INITIALIZER;

DT_API int dt_shm_open(const char *name, int flags, size_t bytes, void **addr)
{
	size_t size = (bytes + 4095) & ~(size_t)4095, got;
	struct region *r;
	bool created;
	void *p;
	int err;

	if (!addr || !ipc_name_ok(name) || (flags & ~DT_CHAN_CREATE) || bytes > SHM_MAX_BYTES)
		return -EINVAL;
	*addr = NULL;
	if (!(r = malloc(sizeof(*r))))
		return -ENOMEM;
	/* created with no size: there is nothing to map */
	err = ipc_open_file(name, IPC_SHM_SUFFIX, (flags & DT_CHAN_CREATE) && size, size, SHM_MAX_BYTES, NULL, 0, &p, &got,
			    &created);
	if (!err && !created && size > got) {
		munmap(p, got);
		err = -EINVAL;
	}
	if (err) {
		free(r);
		return err == -ENOENT && (flags & DT_CHAN_CREATE) && !size ? -EINVAL : err;
	}
	r->addr = p;
	r->bytes = got;
	pthread_mutex_lock(&regions_lock);
	r->next = regions;
	regions = r;
	pthread_mutex_unlock(&regions_lock);
	*addr = p;
	return 0;
}

DT_API int dt_shm_close(void *addr)
{
	struct region *r = NULL;

	pthread_mutex_lock(&regions_lock);
	for (struct region **p = &regions; *p; p = &(*p)->next)
		if ((*p)->addr == addr) {
			r = *p;
			*p = r->next;
			break;
		}
	pthread_mutex_unlock(&regions_lock);
	if (!r)
		return -EINVAL;
	munmap(r->addr, r->bytes);
	free(r);
	return 0;
}

DT_API int dt_shm_unlink(const char *name)
{
	return ipc_unlink(name, IPC_SHM_SUFFIX, false);
}
