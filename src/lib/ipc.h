/* The shared-memory layout of channels and doorbells (docs/ipc.md), read by
 * the runtime (src/runtime/chan.c, bell.c, watcher.c), `detach ps` and the
 * tests.  Everything in these structures can be written by a peer process:
 * a reader copies a field into a local once, checks it, then uses the copy.
 *
 * One directory holds every name: IPC_DIR/NAME.chan (header + ring),
 * NAME.chan.wake (the FIFO that wakes Linux waiters), NAME.chan.kick (the
 * FIFO that wakes the watchers when a waiter comes), NAME.bell,
 * NAME.bell.wake, NAME.bell.kick, NAME.shm. */
#ifndef DETACH_LIB_IPC_H
#define DETACH_LIB_IPC_H

#include "lib/contract.h"

#include <stdbool.h>
#include <stdint.h>

#define IPC_DIR          REGISTRY_DIR "/ipc"
#define IPC_SHM_SUFFIX   ".shm"         /* a region NAME is the file IPC_DIR/NAME.shm */
#define IPC_NAME_MAX     128            /* bytes of a name, [A-Za-z0-9._-], not starting with '.' */
#define IPC_VERSION      1              /* doorbells */
#define CHAN_VERSION     2              /* 2: records polled by their header, lines split by writer */
#define CHAN_MAGIC       0x324e414843544400ull   /* "\0DTCHAN2"; version 1 had "\0DTCHAN1" */
#define BELL_MAGIC       0x314c4c4542544400ull   /* "\0DTBELL1" */
#define CHAN_RING_MIN    4096u
#define CHAN_RING_MAX    (1u << 30)

/* A role (the producer, the consumer) is held by one process, named by pid
 * and start time (clock ticks since boot, /proc/PID/stat field 22) so that a
 * reused pid is not mistaken for the holder.  0: nobody. */
static inline uint64_t ipc_role_word(uint32_t pid, uint32_t starttime)
{
	return (uint64_t)starttime << 32 | pid;
}
static inline uint32_t ipc_role_pid(uint64_t w) { return (uint32_t)w; }
/* The holder still runs (not a zombie, same start time); a /proc it cannot
 * read counts as alive, only a missing one as dead.  src/lib/ipc.c */
bool ipc_role_alive(uint64_t role);
/* State letter and start time of pid from /proc/PID/stat; -errno if gone. */
int ipc_proc_stat(uint32_t pid, char *state, uint64_t *starttime);

/* wake_wanted: Linux threads sleeping on the FIFO (1 each) and handles
 * whose FIFO is watched with poll/epoll (WAKE_ARMED each). */
#define WAKE_ARMED       0x10000u

/* Each line has one writer, and in the steady state a put or get writes
 * only its own side's line and the ring: the consumer polls the record
 * header, not the producer's tail, and the producer reads the consumer's
 * head only when its copy says the ring is full (docs/ipc.md). */
struct chan_shared {
	/* written once by the creator, before the file gets its name */
	_Alignas(64) uint64_t magic;
	uint32_t version;
	uint32_t flags;                 /* DT_CHAN_STREAM */
	uint64_t ring_bytes;            /* a power of two; the ring follows the header */
	/* the producer */
	_Alignas(64) uint64_t tail;     /* bytes ever written, stored after each record's header */
	uint64_t puts, put_bytes, full, no_consumer, corrupt;
	/* the consumer */
	_Alignas(64) uint64_t head;     /* bytes ever consumed: the commit point of a get */
	uint64_t gets, get_bytes, corrupt_seen;
	/* the holders (role words): written at open and close, and by the
	 * watchers when a holder dies; read by every put and every empty get */
	_Alignas(64) uint64_t producer;
	uint64_t consumer;
	/* Linux waiters (consumers sleeping or polling the fd) */
	_Alignas(64) uint32_t wake_wanted;
};
#define CHAN_HDR_BYTES   4096u          /* the ring starts on the next page */

/* A message is an 8-byte header word and its bytes, padded to 8; the
 * header never straddles the end of the ring, the bytes may.  The header
 * word is {u32 len, u32 tag} (little-endian: len in the low half), stored
 * by the producer with a release store after the bytes: the commit point
 * of a put, and what a consumer polls. */
struct chan_record {
	uint32_t len;
	uint32_t tag;                   /* chan_tag(position, len) */
};
/* Ties a header to its position in the byte stream: a stale header of an
 * earlier lap (positions differ by the ring, at most 2^30, so the tags
 * differ) or a changed length does not check. */
static inline uint32_t chan_tag(uint64_t pos, uint32_t len)
{
	return (uint32_t)((pos >> 3) * 0x9e3779b1u) ^ len ^ 0xd7c4a11eu;
}
static inline uint64_t chan_header(uint64_t pos, uint32_t len)
{
	return (uint64_t)chan_tag(pos, len) << 32 | len;
}
/* Where the next header will go, the producer first stores a word that is
 * no header of that position, so a consumer that reaches it waits. */
static inline uint64_t chan_marker(uint64_t pos)
{
	return chan_header(pos, 0) ^ 1ull << 32;
}
static inline uint64_t chan_record_bytes(uint64_t len)
{
	return sizeof(struct chan_record) + ((len + 7) & ~7ull);
}

struct bell_shared {
	_Alignas(64) uint64_t magic;
	uint32_t version;
	uint32_t pad;
	_Alignas(64) uint64_t rings;    /* every ringer adds 1 */
	_Alignas(64) uint32_t wake_wanted;
};
#define BELL_BYTES       4096u

/* "name" is usable as a file name in IPC_DIR. */
static inline bool ipc_name_ok(const char *name)
{
	int n = 0;

	if (!name || !name[0] || name[0] == '.')
		return false;
	for (; name[n]; n++) {
		char c = name[n];
		if (n >= IPC_NAME_MAX)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

#endif
