/* Description: a forwarded call runs with the detached thread's
 * credentials: after setuid(65534) (glibc's, and the raw system call), a
 * root-only file cannot be opened, as natively. */
#include "helpers/t_detach.h"

#include <sys/stat.h>
#include <sys/wait.h>

static const char *path;

static int child(bool raw)
{
	int r = raw ? (int)syscall(SYS_setuid, 65534) : setuid(65534);
	if (r) {
		perror("setuid");
		return 2;
	}
	int fd = open(path, O_RDONLY);
	if (fd >= 0 || errno != EACCES) {
		fprintf(stderr, "%s setuid: open of a root-only file: fd %d, %s\n", raw ? "raw" : "glibc", fd, strerror(errno));
		return 1;
	}
	/* and what the proxy does carries the new identity: a file it creates
	 * belongs to 65534 */
	char mine[64];
	snprintf(mine, sizeof(mine), "/tmp/detach-creds-%d", getpid());
	fd = open(mine, O_CREAT | O_WRONLY | O_EXCL, 0600);
	struct stat st;
	int ok = fd >= 0 && fstat(fd, &st) == 0 && st.st_uid == 65534;
	if (fd >= 0)
		close(fd);
	unlink(mine);
	if (!ok) {
		fprintf(stderr, "file created after setuid is not owned by 65534\n");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (geteuid() != 0)
		t_skip("needs root (setuid to 65534)");
	path = "/tmp/detach-creds-secret";
	if (!getenv("T_DETACHED")) {
		int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
		if (fd < 0 || fchmod(fd, 0600))
			return 1;
		close(fd);
	}
	/* each variant in its own detached process: setuid is one-way */
	const char *variant = getenv("T_VARIANT");
	if (!variant) {
		int fails = 0;
		for (int raw = 0; raw < 2; raw++) {
			pid_t p = fork();
			if (p == 0) {
				setenv("T_VARIANT", raw ? "raw" : "glibc", 1);
				t_reexec_detached(argc, argv, NULL);
			}
			int st;
			waitpid(p, &st, 0);
			printf("%s setuid: exit %d\n", raw ? "raw" : "glibc", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
			fails += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		}
		unlink(path);
		t_reap_registry();      /* as nobody, a variant cannot remove root's file */
		return fails ? 1 : 0;
	}
	if (!t_find_proxy()) {
		fprintf(stderr, "not detached\n");
		return 1;
	}
	return child(!strcmp(variant, "raw"));
}
