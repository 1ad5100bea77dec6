/* Static executables: see elf.h.  No libc call that enters the kernel. */
#include "lib/elf.h"

#include <elf.h>
#include <string.h>

static bool is_static(int dirfd, const char *path, const struct file_ops *ops, int depth)
{
	char buf[256];
	Elf64_Ehdr eh;
	long fd = path[0] || dirfd < 0 ? ops->open(dirfd, path) : dirfd;
	long n;
	bool result = false;

	if (fd < 0)
		return false;
	n = ops->pread(fd, buf, sizeof(buf) - 1, 0);
	if (n > 2 && buf[0] == '#' && buf[1] == '!' && depth == 0) {
		buf[n] = '\0';
		char *interp = buf + 2 + strspn(buf + 2, " \t");
		interp[strcspn(interp, " \t\n")] = '\0';
		if (fd != dirfd)
			ops->close(fd);
		return interp[0] == '/' && is_static(-100 /* AT_FDCWD */, interp, ops, 1);
	}
	if (n >= (long)sizeof(eh) && !memcmp(buf, ELFMAG, SELFMAG) && buf[EI_CLASS] == ELFCLASS64) {
		memcpy(&eh, buf, sizeof(eh));
		if (eh.e_type == ET_EXEC || eh.e_type == ET_DYN) {
			result = true;
			for (int i = 0; i < eh.e_phnum; i++) {
				Elf64_Phdr ph;
				if (ops->pread(fd, &ph, sizeof(ph), (long)(eh.e_phoff + (Elf64_Off)i * eh.e_phentsize)) !=
				    (long)sizeof(ph))
					break;
				if (ph.p_type == PT_INTERP) {
					result = false;
					break;
				}
			}
		}
	}
	if (fd != dirfd)
		ops->close(fd);
	return result;
}

bool exec_is_static(int dirfd, const char *path, const struct file_ops *ops)
{
	return path && is_static(dirfd, path, ops, 0);
}
