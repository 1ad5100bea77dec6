/* Description: a call that changes what the calling thread is to the
 * kernel for every later call takes effect for every call the detached
 * thread makes, wherever it is carried out, as natively: unshare of a user
 * and a mount namespace succeeds in a single-threaded program (the kernel
 * refuses it to a thread that shares its process), and afterwards every
 * thread of the process, the proxy included, is in the one new namespace
 * (/proc/self/task/ TID/ns/mnt, the kernel's own view); a Landlock domain
 * that the detached thread enters restricts its forwarded calls and its
 * children, and an attempt to escape it through another path fails; a
 * session keyring joined by name is the one later calls see.  Run natively
 * first (the same checks must hold there), then detached. */
#include "helpers/t_detach.h"

#include <dirent.h>
#include <linux/keyctl.h>
#include <linux/landlock.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char dir[64];

/* Every thread of this process is in the mount namespace of the first. */
static void one_mount_namespace(const char *when)
{
	char want[64] = "", got[64], path[96];
	struct dirent *e;
	DIR *d = opendir("/proc/self/task");
	int threads = 0;

	t_check(readlink("/proc/self/ns/mnt", want, sizeof(want) - 1) > 0, "readlink ns/mnt: %s", strerror(errno));
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/ns/mnt", e->d_name);
		memset(got, 0, sizeof(got));
		if (readlink(path, got, sizeof(got) - 1) <= 0)
			continue;               /* a thread that ended meanwhile */
		threads++;
		t_check(!strcmp(got, want), "%s: thread %s is in %s, the process in %s", when, e->d_name, got, want);
	}
	if (d)
		closedir(d);
	t_check(threads >= 1, "%s: no thread found", when);
}

static void mount_namespace(void)
{
	char file[96];
	struct stat st;

	if (geteuid() != 0) {
		printf("mount namespace: not root: not checked\n");
		return;
	}
	t_check(unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS): %s", strerror(errno));
	one_mount_namespace("after unshare");
	/* nothing made here reaches the namespace we came from */
	t_check(mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "private /: %s", strerror(errno));
	/* a mount made there is seen by the calls that follow, all of them */
	t_check(mount("none", dir, "tmpfs", 0, NULL) == 0, "mount tmpfs on %s: %s", dir, strerror(errno));
	snprintf(file, sizeof(file), "%s/inside", dir);
	int fd = open(file, O_CREAT | O_WRONLY, 0600);
	t_check(fd >= 0, "create %s: %s", file, strerror(errno));
	close(fd);
	t_check(stat(file, &st) == 0, "stat %s: %s", file, strerror(errno));
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[512];
	bool seen = false;
	while (f && fgets(line, sizeof(line), f))
		seen |= strstr(line, dir) && strstr(line, "tmpfs");
	if (f)
		fclose(f);
	t_check(seen, "the tmpfs on %s is not in /proc/self/mountinfo", dir);
	/* and a child is born in it too */
	pid_t p = fork();
	if (p == 0)
		_exit(stat(file, &st) == 0 ? 0 : 1);
	int ws = 0;
	t_check(p > 0 && waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
		"a child does not see %s (status %#x)", file, ws);
	one_mount_namespace("after mount");
	unlink(file);
	t_check(umount2(dir, 0) == 0, "umount %s: %s", dir, strerror(errno));
	t_check(rmdir(dir) == 0, "rmdir %s: %s", dir, strerror(errno));
}

/* A single-threaded process may make a user namespace (the kernel refuses
 * one to a thread that shares its process: the runtime's proxy must not
 * count) */
static void user_namespace(void)
{
	t_check(unshare(CLONE_NEWUSER) == 0, "unshare(CLONE_NEWUSER): %s", strerror(errno));
	long id = syscall(SYS_getuid);
	t_check(id == 65534, "getuid in a new user namespace without a map: %ld, natively 65534 (the overflow uid)", id);
	one_mount_namespace("after unshare(CLONE_NEWUSER)");
}

/* Landlock: writing under dir is denied from now on, for this thread and
 * its children, whatever path the call takes. */
static void landlock(void)
{
	struct landlock_ruleset_attr ra = { .handled_access_fs = LANDLOCK_ACCESS_FS_MAKE_REG };
	struct landlock_path_beneath_attr pb = { .allowed_access = LANDLOCK_ACCESS_FS_MAKE_REG };
	char denied[96], allowed[96];
	int rfd = (int)syscall(SYS_landlock_create_ruleset, &ra, sizeof(ra), 0);

	if (rfd < 0) {
		printf("landlock: not available (%s): not checked\n", strerror(errno));
		return;
	}
	/* files may be made under /dev/shm only */
	pb.parent_fd = open("/dev/shm", O_PATH | O_CLOEXEC);
	t_check(syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) == 0, "add_rule: %s",
		strerror(errno));
	t_check(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no_new_privs: %s", strerror(errno));
	t_check(syscall(SYS_landlock_restrict_self, rfd, 0) == 0, "restrict_self: %s", strerror(errno));
	close(rfd);
	close(pb.parent_fd);

	snprintf(denied, sizeof(denied), "/tmp/detach-landlock-%d", getpid());
	snprintf(allowed, sizeof(allowed), "/dev/shm/detach-landlock-%d", getpid());
	errno = 0;
	int fd = open(denied, O_CREAT | O_WRONLY | O_EXCL, 0600);
	t_check(fd < 0 && errno == EACCES, "creating %s inside the sandbox: fd %d, %s", denied, fd, strerror(errno));
	/* escapes: through the raw call, through a relative path, from a child */
	errno = 0;
	fd = (int)syscall(SYS_openat, AT_FDCWD, denied, O_CREAT | O_WRONLY | O_EXCL, 0600);
	t_check(fd < 0 && errno == EACCES, "raw openat escapes the sandbox: fd %d, %s", fd, strerror(errno));
	int tmp = open("/tmp", O_PATH | O_DIRECTORY);
	errno = 0;
	fd = openat(tmp, denied + 5, O_CREAT | O_WRONLY | O_EXCL, 0600);
	t_check(fd < 0 && errno == EACCES, "openat relative to /tmp escapes the sandbox: fd %d, %s", fd, strerror(errno));
	close(tmp);
	pid_t p = fork();
	if (p == 0)
		_exit(open(denied, O_CREAT | O_WRONLY | O_EXCL, 0600) < 0 && errno == EACCES ? 0 : 1);
	int ws = 0;
	t_check(p > 0 && waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
		"a child escapes the sandbox (status %#x)", ws);
	unlink(denied);
	fd = open(allowed, O_CREAT | O_WRONLY | O_EXCL, 0600);
	t_check(fd >= 0, "creating %s, which the ruleset allows: %s", allowed, strerror(errno));
	close(fd);
	unlink(allowed);
}

static void keyring(void)
{
	char name[64];

	snprintf(name, sizeof(name), "detach-test-%d", getpid());
	long id = syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, name);
	if (id < 0 && (errno == ENOSYS || errno == EOPNOTSUPP)) {
		printf("keyrings: not available: not checked\n");
		return;
	}
	t_check(id > 0, "join session keyring %s: %s", name, strerror(errno));
	long now = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
	t_check(now == id, "the session keyring is %ld after joining %ld", now, id);
	long key = syscall(SYS_add_key, "user", "k", "v", 1, KEY_SPEC_SESSION_KEYRING);
	t_check(key > 0, "add_key to the session keyring: %s", strerror(errno));
	t_check(syscall(SYS_keyctl, KEYCTL_SEARCH, id, "user", "k", 0) == key, "the key is not found in %ld: %s", id,
		strerror(errno));
	/* the thread keyring is this thread's: asked twice, the same one */
	long a = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_THREAD_KEYRING, 1);
	long b = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_THREAD_KEYRING, 0);
	t_check(a > 0 && a == b, "thread keyring %ld then %ld", a, b);
}

int main(int argc, char **argv)
{
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || !getenv("DETACH_BIN"))
		t_skip("needs 2 CPUs and DETACH_BIN (tests/run.sh)");
	t_native_then_detached(argc, argv, NULL);
	snprintf(dir, sizeof(dir), "/tmp/detach-ns-%d", getpid());
	if (mkdir(dir, 0700) && errno != EEXIST)
		t_check(0, "mkdir %s: %s", dir, strerror(errno));
	keyring();
	mount_namespace();
	landlock();
	user_namespace();           /* last: the process is nobody from here */
	return t_detached_done();
}
