/* detach ps, the channels: every channel in IPC_DIR with its holders and
 * the counters each side publishes in its header (lib/ipc.h).  The header
 * is read once into a local copy and only printed: a damaged one shows
 * damaged numbers, nothing else. */
#include "cli/cli.h"
#include "lib/ipc.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static bool read_header(const char *dir, const char *file, struct chan_shared *h)
{
	char path[512];
	struct stat st;
	void *p;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	if (fstat(fd, &st) || st.st_size < (off_t)CHAN_HDR_BYTES) {
		close(fd);
		return false;
	}
	p = mmap(NULL, CHAN_HDR_BYTES, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return false;
	memcpy(h, p, sizeof(*h));
	munmap(p, CHAN_HDR_BYTES);
	return h->magic == CHAN_MAGIC;
}

/* A holder's pid while it lives, else 0. */
static long holder(uint64_t role)
{
	return ipc_role_alive(role) ? (long)ipc_role_pid(role) : 0;
}

/* Lists the channels: into j's open object as "channels", or as a table
 * on stdout (j NULL).  Returns how many. */
int ps_channels(struct json *j)
{
	DIR *d = opendir(IPC_DIR);
	struct dirent *e;
	int rows = 0;

	if (j)
		json_array_begin(j, "channels");
	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		struct chan_shared h;
		char name[IPC_NAME_MAX + 8];

		if (n < 6 || strcmp(e->d_name + n - 5, ".chan") || !read_header(IPC_DIR, e->d_name, &h))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(n - 5), e->d_name);
		if (j) {
			json_object_begin(j, NULL);
			json_str(j, "name", name);
			json_bool(j, "stream", h.flags != 0);
			json_uint(j, "ring_bytes", h.ring_bytes);
			json_uint(j, "queued_bytes", h.tail - h.head);
			json_int(j, "producer_pid", holder(h.producer));
			json_int(j, "consumer_pid", holder(h.consumer));
			json_uint(j, "puts", h.puts);
			json_uint(j, "put_bytes", h.put_bytes);
			json_uint(j, "gets", h.gets);
			json_uint(j, "get_bytes", h.get_bytes);
			json_uint(j, "full", h.full);
			json_uint(j, "no_consumer", h.no_consumer);
			json_uint(j, "corrupt_seen_by_producer", h.corrupt);
			json_uint(j, "corrupt_seen_by_consumer", h.corrupt_seen);
			json_object_end(j);
		} else {
			if (!rows)
				printf("\n%-24s %10s %10s %8s %8s %12s %12s %10s %10s %9s\n", "CHANNEL", "RING", "QUEUED",
				       "PRODUCER", "CONSUMER", "PUTS", "GETS", "FULL", "NOPEER", "CORRUPT");
			printf("%-24s %10llu %10llu %8ld %8ld %12llu %12llu %10llu %10llu %9llu\n", name,
			       (unsigned long long)h.ring_bytes, (unsigned long long)(h.tail - h.head), holder(h.producer),
			       holder(h.consumer), (unsigned long long)h.puts, (unsigned long long)h.gets,
			       (unsigned long long)h.full, (unsigned long long)h.no_consumer,
			       (unsigned long long)(h.corrupt + h.corrupt_seen));
		}
		rows++;
	}
	if (d)
		closedir(d);
	if (j)
		json_array_end(j);
	return rows;
}
