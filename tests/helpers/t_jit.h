/* Code a test writes into memory of its own (JIT code, a file mapping) and
 * calls: a system call site that is no library's, for the rewrite tests. */
#ifndef DETACH_TESTS_T_JIT_H
#define DETACH_TESTS_T_JIT_H

#include "t.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* mov $39,%eax; syscall; ret (getpid), and the same with 110 (getppid) */
static const unsigned char t_jit_getpid[] = { 0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0xc3 };
static const unsigned char t_jit_getppid[] = { 0xb8, 110, 0, 0, 0, 0x0f, 0x05, 0xc3 };

/* Calls code; its rax.  The code clobbers rax, rcx, r11 (the syscall). */
static inline long t_jit_call(const void *code)
{
	long r;

	__asm__ volatile("call *%1" : "=a"(r) : "r"(code) : "rcx", "r11", "memory");
	return r;
}

/* A read-only file of one page whose start is t_jit_getpid: code that
 * cannot be rewritten once mapped shared.  file: a mkstemp template, made
 * the file's name (checked). */
static inline void t_jit_file(char *file)
{
	int fd = mkstemp(file);

	t_check(fd >= 0 && write(fd, t_jit_getpid, sizeof(t_jit_getpid)) == (ssize_t)sizeof(t_jit_getpid) &&
		ftruncate(fd, 4096) == 0, "%s: %s", file, strerror(errno));
	close(fd);
	chmod(file, 0444);
}

#endif
