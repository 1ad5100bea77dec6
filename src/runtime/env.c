/* The program sees its environment as it would without detach: the
 * constructor takes the contract variables (src/lib/contract.h) and our
 * LD_PRELOAD entry out of environ.  A detached thread's execve
 * (lifecycle.c) puts them back into the new image's environment, so
 * detached state survives exec; nobody else's exec (children, other
 * threads) gets them. */
#include "runtime/env.h"
#include "runtime/config.h"
#include "runtime/uaccess.h"
#include "lib/contract.h"
#include "lib/elf.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static char *saved[CONTRACT_NVARS];   /* "NAME=value", for re-injection */
static int nsaved;
static char *runtime_path;            /* our entry of LD_PRELOAD */

static bool starts_with_var(const char *entry, const char *name)
{
	size_t n = strlen(name);

	return !strncmp(entry, name, n) && entry[n] == '=';
}

/* `detach pid`: the contract arrives as "NAME=value" lines from outside,
 * not in the environment (__dt_pid_start, init.c).  From then on it is read
 * from here and passed on by execve as if `detach run` had set it.  A later
 * contract (a move to another CPU) replaces the variables it names and
 * keeps the others. */
static bool adopted;

int env_adopt(const char *contract, const char *lib)
{
	static const char *const vars[] = CONTRACT_VARS;

	for (const char *l = contract; l && *l; l += strcspn(l, "\n"), l += *l == '\n') {
		size_t len = strcspn(l, "\n");
		for (size_t i = 0; i < CONTRACT_NVARS; i++) {
			if (!starts_with_var(l, vars[i]))
				continue;
			int at = 0;
			while (at < nsaved && !starts_with_var(saved[at], vars[i]))
				at++;
			if (at == CONTRACT_NVARS)
				break;
			char *v = strndup(l, len);
			if (!v)
				return -ENOMEM;
			if (at < nsaved)
				free(saved[at]);     /* every entry is ours (strndup, malloc) */
			else
				nsaved++;
			saved[at] = v;
		}
	}
	if (lib) {
		free(runtime_path);
		if (!(runtime_path = strdup(lib)))
			return -ENOMEM;
	}
	/* variables taken from the environment (a `detach run` program) stay:
	 * env_get reads them all from here now */
	adopted = true;
	return 0;
}

/* A contract variable: from the environment, or from an adopted contract. */
const char *env_get(const char *name)
{
	size_t n = strlen(name);

	if (!adopted)
		return getenv(name);
	for (int i = 0; i < nsaved; i++)
		if (starts_with_var(saved[i], name))
			return saved[i] + n + 1;
	return NULL;
}

void env_scrub(void)
{
	static const char *const vars[] = CONTRACT_VARS;
	const char *preload = getenv("LD_PRELOAD");
	const char *was = getenv(ENV_PRELOAD_WAS);

	/* Loaded by dlopen (`detach pid`, or a program linked with -ldetach):
	 * the program's environment is its own, whatever it holds. */
	if (!preload || !strstr(preload, "libdetach"))
		return;

	if (preload) {
		size_t n = strcspn(preload, ": ");
		runtime_path = strndup(preload, n);
	}
	if (was)
		setenv("LD_PRELOAD", was, 1);
	else
		unsetenv("LD_PRELOAD");
	for (size_t i = 0; i < CONTRACT_NVARS; i++) {
		const char *v = getenv(vars[i]);
		if (!v)
			continue;
		size_t len = strlen(vars[i]) + strlen(v) + 2;
		char *e = malloc(len);
		if (e) {
			snprintf(e, len, "%s=%s", vars[i], v);
			saved[nsaved++] = e;
		}
		unsetenv(vars[i]);
	}
}

/* Raw calls for exec_is_static: we are inside the trap. */
static long raw_open(int dirfd, const char *path)
{
	return sys_call4(SYS_openat, dirfd, path, O_RDONLY | O_CLOEXEC, 0);
}

static long raw_pread(long fd, void *buf, size_t len, long off)
{
	return sys_call4(SYS_pread64, fd, buf, len, off);
}

static void raw_close(long fd)
{
	sys_call1(SYS_close, fd);
}

/* A static image cannot take the runtime: it would run undetached without
 * a word.  Said as `detach run` says it of a static program named directly
 * (the exec may still fail: then the program learns why from its errno).
 * True when the image will not load the runtime: static, or set-user-ID or
 * set-group-ID without no_new_privs (the loader's secure mode drops our
 * LD_PRELOAD entry). */
bool env_exec_bare(long nr, const long a[6])
{
	static const struct file_ops raw_file = { raw_open, raw_pread, raw_close };
	int dirfd = nr == SYS_execve ? AT_FDCWD : (int)a[0];
	const char *path = (const char *)(nr == SYS_execve ? a[0] : a[1]);

	struct stat st;
	char first;

	if (!path || strncpy_from_user(&first, path, 1) < 0)
		return false;                   /* the exec fails (EFAULT): nothing runs */
	if (first && sys_call4(SYS_faccessat, dirfd, path, X_OK, 0) < 0)
		return false;                   /* the exec fails: nothing runs */
	if (!first && !(nr == SYS_execveat && (a[4] & AT_EMPTY_PATH)))
		return false;
	if (sys_call4(SYS_newfstatat, dirfd, path, &st, first ? 0 : AT_EMPTY_PATH) == 0 &&
	    (st.st_mode & (S_ISUID | S_ISGID)) && sys_call2(SYS_prctl, PR_GET_NO_NEW_PRIVS, 0) != 1)
		return true;
	if (!exec_is_static(dirfd, path, &raw_file))
		return false;
	dt_warn("%s is statically linked: the runtime cannot be preloaded into it, so it runs undetached",
		path[0] ? path : "the program");
	return true;
}

/* v in decimal at p, then end; returns the position after end.  Safe in
 * the trap: no libc. */
char *env_put_u64(char *p, uint64_t v, char end)
{
	char num[24];
	int i = sizeof(num);

	do { num[--i] = (char)('0' + v % 10); v /= 10; } while (v);
	memcpy(p, num + i, sizeof(num) - (size_t)i);
	p += sizeof(num) - (size_t)i;
	*p++ = end;
	return p;
}

/* Whether an execve (lifecycle.c) may read the program's envp: every pointer, the head
 * of every string (what it compares), and LD_PRELOAD's whole value (what
 * it copies), through uaccess.  Where it may not, the kernel reads the
 * whole of it and refuses the exec with EFAULT. */
bool env_exec_readable(char *const *envp)
{
	char buf[4096];
	char *e;

	for (; envp; envp++) {
		if (copy_from_user(&e, envp, sizeof(e)))
			return false;
		if (!e)
			return true;
		long n = strncpy_from_user(buf, e, 64);
		if (n < 0 || (starts_with_var(buf, "LD_PRELOAD") && strncpy_from_user(buf, e, sizeof(buf)) < 0))
			return false;
	}
	return true;
}

/* The new image's environment, first part, into out: the program's
 * variables (envp, readable: env_exec_readable) but LD_PRELOAD and the
 * contract's, then the contract's as this runtime holds them, but those
 * each exec writes anew (the CPU time, the scheduling settings, the
 * seccomp filters, the locks, the program's own LD_PRELOAD).  The entries
 * written; *app_preload: the program's own part of its LD_PRELOAD, or
 * NULL.  Safe in the trap: no libc call that enters the kernel. */
size_t env_exec_program(char **envp, char **out, const char **app_preload)
{
	size_t at = 0;

	*app_preload = NULL;
	for (char **e = envp; e && *e; e++) {
		bool ours = false;
		if (starts_with_var(*e, "LD_PRELOAD")) {
			/* A program may pass on the LD_PRELOAD it was started with
			 * (bash's `exec` does): our own entry is not its. */
			size_t n = runtime_path ? strlen(runtime_path) : 0;
			*app_preload = *e + 11;
			if (n && !strncmp(*app_preload, runtime_path, n) &&
			    ((*app_preload)[n] == ':' || (*app_preload)[n] == '\0'))
				*app_preload += n + ((*app_preload)[n] == ':');
			continue;
		}
		for (int i = 0; i < nsaved && !ours; i++)
			ours = !strncmp(*e, saved[i], strcspn(saved[i], "=") + 1);
		if (!ours)
			out[at++] = *e;
	}
	for (int i = 0; i < nsaved; i++)
		if (!starts_with_var(saved[i], ENV_PRELOAD_WAS) && !starts_with_var(saved[i], ENV_CPUTIME) &&
		    !starts_with_var(saved[i], ENV_SCHED) && !starts_with_var(saved[i], ENV_SECCOMP) &&
		    !starts_with_var(saved[i], ENV_CLAIMS))
			out[at++] = saved[i];
	return at;
}

/* Its LD_PRELOAD, into out: LD_PRELOAD=<runtime>[:<the program's own>] in
 * preload (8192 bytes), and the program's own remembered in was (8192
 * bytes) so that the new image sees just that.  The entries written. */
size_t env_exec_preload(char **out, char *preload, char *was, const char *app_preload)
{
	size_t at = 0;
	char *p = preload;

	p = stpcpy(p, "LD_PRELOAD=");
	if (runtime_path && strlen(runtime_path) < 4096)
		p = stpcpy(p, runtime_path);
	if (app_preload && *app_preload && strlen(app_preload) < 4000) {
		*p++ = ':';
		strcpy(p, app_preload);
		p = stpcpy(was, ENV_PRELOAD_WAS "=");
		strcpy(p, app_preload);
		out[at++] = was;
	}
	out[at++] = preload;
	return at;
}
