/* Who holds a channel's role (lib/ipc.h): read from /proc by the runtime,
 * the opener that finds a role taken, and `detach ps`. */
#include "lib/ipc.h"
#include "lib/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int ipc_proc_stat(uint32_t pid, char *state, uint64_t *starttime)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;
	int err;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	if ((err = read_text_file(path, buf, sizeof(buf))))
		return err;
	if (!(p = strrchr(buf, ')')))
		return -EINVAL;
	/* after "pid (comm) ": state is field 3, starttime field 22 */
	if (sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		   state, &st) != 2)
		return -EINVAL;
	*starttime = st;
	return 0;
}

bool ipc_role_alive(uint64_t role)
{
	uint64_t st;
	char state;
	int err;

	if (!ipc_role_pid(role))
		return false;
	/* Only a missing /proc entry is a death: a failure to read it (no
	 * descriptor left, no memory) says nothing about the holder, and a
	 * role wrongly found dead ends its peer's channel (-EPIPE). */
	if ((err = ipc_proc_stat(ipc_role_pid(role), &state, &st)))
		return err != -ENOENT && err != -ESRCH;
	return state != 'Z' && state != 'X' && (uint32_t)st == (uint32_t)(role >> 32);
}
