/* x86-64 system call names, generated from the kernel's asm/unistd_64.h. */
#include "lib/syscall_names.h"

static const char *const names[] = {
#include "gen/syscall_names.inc"
};

const char *syscall_name(long nr)
{
	if (nr < 0 || (unsigned long)nr >= sizeof(names) / sizeof(names[0]) || !names[nr])
		return NULL;
	return names[nr];
}

long syscall_number(const char *name)
{
	for (unsigned long i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i] && !strcmp(names[i], name))
			return (long)i;
	return -1;
}
