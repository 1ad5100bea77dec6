#ifndef DETACH_LIB_SYSCALL_NAMES_H
#define DETACH_LIB_SYSCALL_NAMES_H
#include <string.h>
/* "write" for 1; NULL for a number without a name. */
const char *syscall_name(long nr);
/* 1 for "write"; -1 for an unknown name. */
long syscall_number(const char *name);
#endif
