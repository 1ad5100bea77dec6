/* Is an executable statically linked (no program interpreter, so the
 * runtime cannot be preloaded into it)?  Asked by `detach run` of the
 * program it starts and by the runtime of the image a detached thread
 * execs.  The file access is the caller's: the runtime asks from inside a
 * trap, where only its raw system calls may enter the kernel. */
#ifndef DETACH_LIB_ELF_H
#define DETACH_LIB_ELF_H

#include <stdbool.h>
#include <stddef.h>

struct file_ops {
	long (*open)(int dirfd, const char *path);          /* fd or -errno */
	long (*pread)(long fd, void *buf, size_t len, long off);
	void (*close)(long fd);
};

/* true: an ELF executable without PT_INTERP, or a script whose #!
 * interpreter is one.  dirfd/path as openat takes them; an empty path with
 * dirfd >= 0 means dirfd itself (execveat AT_EMPTY_PATH). */
bool exec_is_static(int dirfd, const char *path, const struct file_ops *ops);

#endif
