/* Helpers for standalone C tests: exit 0 pass, 1 fail, 77 skip. */
#ifndef DETACH_TESTS_T_H
#define DETACH_TESTS_T_H

#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>

#define T_SKIP 77

static int t_failures;

#define t_check(cond, ...) do {                                          \
	if (!(cond)) {                                                   \
		fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__);                            \
		fputc('\n', stderr);                                     \
		t_failures++;                                            \
	}                                                                \
} while (0)

/* A skip after a failed check is a failure: the failure is not hidden. */
#define t_skip(...) do {                                                 \
	printf(__VA_ARGS__);                                             \
	putchar('\n');                                                   \
	if (t_failures)                                                  \
		fprintf(stderr, "%d check(s) failed before the skip\n", t_failures); \
	exit(t_failures ? 1 : T_SKIP);                                   \
} while (0)

/* Skips when /dev/fuse does not open: detach ctl's files and detach-rtl's
 * /dev/rtfN are FUSE file systems.  An RTLinux test calls it from a
 * constructor, before the library's main() tries to mount. */
static inline void t_need_fuse(void)
{
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		t_skip("no usable /dev/fuse (modprobe fuse; in a container: --device /dev/fuse)");
	close(fd);
}

/* Skips without gdb: the tests of what a debugger sees */
static inline void t_need_gdb(void)
{
	if (system("gdb --version >/dev/null 2>&1") != 0)
		t_skip("gdb is not installed (tools/install-deps.sh)");
}

/* This test's program (/proc/self/exe), NUL-terminated in buf; 0 if
 * the link does not read */
static inline int t_self_exe(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return 1;
}

static inline int t_done(void)
{
	if (t_failures)
		fprintf(stderr, "%d check(s) failed\n", t_failures);
	return t_failures ? 1 : 0;
}

#endif
