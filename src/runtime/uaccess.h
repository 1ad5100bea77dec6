/* Layer 0 (docs/architecture.md): the program's memory, read and written
 * from the runtime as the kernel reads it: a bad address gives -EFAULT,
 * never a crash (uaccess.S; docs/runtime.md, "The program's memory").
 * Includes nothing of the runtime. */
#ifndef DETACH_RUNTIME_UACCESS_H
#define DETACH_RUNTIME_UACCESS_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#include "runtime/sys.h"

long dt_copy(void *dst, const void *src, size_t n) DT_HIDDEN;
long dt_copy_str(char *dst, const char *src, size_t n) DT_HIDDEN;
extern const char dt_copy_insn[], dt_copy_fixup[], dt_copy_str_insn[], dt_copy_str_fixup[] DT_HIDDEN;
static inline bool user_range_ok(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;

	return a + n >= a;
}

/* 0, or -EFAULT */
static inline long copy_from_user(void *dst, const void *src, size_t n)
{
	return user_range_ok(src, n) ? dt_copy(dst, src, n) : -EFAULT;
}

static inline long copy_to_user(void *dst, const void *src, size_t n)
{
	return user_range_ok(dst, n) ? dt_copy(dst, src, n) : -EFAULT;
}

/* The string's length (< n), n when it has no NUL within n bytes, or -EFAULT */
static inline long strncpy_from_user(char *dst, const char *src, size_t n)
{
	return user_range_ok(src, 1) ? dt_copy_str(dst, src, n) : -EFAULT;
}

/* The exception table: a fault at one of the routines' instructions
 * resumes at its fixup.  True when uc was such a fault (and now resumes). */
static inline bool uaccess_fixup(ucontext_t *uc)
{
	greg_t *ip = &uc->uc_mcontext.gregs[REG_RIP];

	if (*ip == (greg_t)dt_copy_insn)
		*ip = (greg_t)dt_copy_fixup;
	else if (*ip == (greg_t)dt_copy_str_insn)
		*ip = (greg_t)dt_copy_str_fixup;
	else
		return false;
	return true;
}

#endif
