/* The undo log (undo_log.h): append, read back, escape. */
#include "lib/undo_log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int undo_log_append(int fd, const char *line)
{
	char buf[4096];
	size_t len = strlen(line);

	/* one write() per record: a crash leaves whole lines or a torn last one */
	if (len + 1 > sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, line, len);
	buf[len++] = '\n';
	if (write(fd, buf, len) != (ssize_t)len)
		return errno ? -errno : -EIO;
	return fsync(fd) ? -errno : 0;
}

int undo_log_append_path(const char *path, const char *line)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600), err;

	if (fd < 0)
		return -errno;
	err = undo_log_append(fd, line);
	close(fd);
	return err;
}

int undo_log_read(const char *path, char *buf, size_t cap, char **lines, int max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), n = 0;
	size_t len = 0;
	ssize_t got;

	if (fd < 0)
		return -errno;
	while (len < cap - 1 && (got = read(fd, buf + len, cap - 1 - len)) > 0)
		len += (size_t)got;
	/* more than fits: refused whole, never replayed in part */
	got = len == cap - 1 ? read(fd, &(char){ 0 }, 1) : 0;
	close(fd);
	if (got > 0)
		return -EFBIG;
	buf[len] = '\0';
	for (char *p = buf; *p && n < max; ) {
		char *nl = strchr(p, '\n');
		if (!nl)
			break;          /* cut by a crash: never acted on */
		*nl = '\0';
		lines[n++] = p;
		p = nl + 1;
	}
	return n;
}

void undo_log_sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

void undo_log_escape(const char *in, char *out, size_t len)
{
	size_t o = 0;

	for (; *in && o + 3 < len; in++) {
		if (*in == '\\') { out[o++] = '\\'; out[o++] = '\\'; }
		else if (*in == '\n') { out[o++] = '\\'; out[o++] = 'n'; }
		else if (*in == '\t') { out[o++] = '\\'; out[o++] = 't'; }
		else out[o++] = *in;
	}
	out[o] = '\0';
}

void undo_log_unescape(const char *in, char *out, size_t len)
{
	size_t o = 0;

	for (; *in && o + 1 < len; in++) {
		if (*in == '\\' && in[1]) {
			in++;
			out[o++] = *in == 'n' ? '\n' : *in == 't' ? '\t' : *in;
		} else {
			out[o++] = *in;
		}
	}
	out[o] = '\0';
}
