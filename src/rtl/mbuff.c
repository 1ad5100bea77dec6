/* mbuff: named shared memory for RT tasks and Linux processes, on dt_shm
 * (docs/rtl.md).
 *
 * mbuff_alloc(name, size) in any process linked with -ldetach-rtl maps the
 * region mbuff.NAME (created the first time); every caller gets the same
 * bytes.  RTLinux counted its users and freed the region with the last
 * mbuff_free: the count lives in the region's first page (the caller gets
 * the page after it, page-aligned as RTLinux's vmalloc'ed buffers were), and
 * the last mbuff_free removes the name.  A process that dies without
 * mbuff_free leaves its count behind: the region stays until
 * `rm /dev/shm/detach/ipc/mbuff.NAME.shm`. */
#include "rtl/rtl_int.h"

#define MBUFF_MAGIC 0x6666756262756d64ull   /* "dmbuff" */

struct mbuff_head {
	uint64_t magic;
	uint64_t users;
	uint64_t size;
};

static int shm_name(char *buf, size_t len, const char *name)
{
	return name && *name && (size_t)snprintf(buf, len, "mbuff.%s", name) < len ? 0 : -EINVAL;
}

RTL_API void *mbuff_alloc(const char *name, int size)
{
	long page = sysconf(_SC_PAGESIZE);
	struct mbuff_head *h;
	char shm[160];
	void *addr;

	if (size <= 0 || shm_name(shm, sizeof(shm), name))
		return NULL;
	if (dt_shm_open(shm, DT_CHAN_CREATE, (size_t)page + (size_t)size, &addr))
		return NULL;
	h = addr;
	/* the creator's zeroed page becomes a header; the first one in wins */
	uint64_t zero = 0;
	__atomic_compare_exchange_n(&h->magic, &zero, MBUFF_MAGIC, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	if (h->magic != MBUFF_MAGIC) {
		dt_shm_close(addr);
		return NULL;
	}
	__atomic_add_fetch(&h->users, 1, __ATOMIC_ACQ_REL);
	return (char *)addr + page;
}

RTL_API void mbuff_free(const char *name, void *mbuf)
{
	long page = sysconf(_SC_PAGESIZE);
	struct mbuff_head *h;
	char shm[160];

	if (!mbuf || shm_name(shm, sizeof(shm), name))
		return;
	h = (struct mbuff_head *)((char *)mbuf - page);
	if (__atomic_sub_fetch(&h->users, 1, __ATOMIC_ACQ_REL) == 0)
		dt_shm_unlink(shm);
	dt_shm_close(h);
}
