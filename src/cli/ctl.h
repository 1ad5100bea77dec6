/* detach ctl: the paper's control files (section III-B-4) served with
 * FUSE.  ctl.c mounts and unmounts, ctl_fs.c answers the files. */
#ifndef DETACH_CLI_CTL_H
#define DETACH_CLI_CTL_H

#include <sched.h>

#define CTL_DEFAULT_PATH "/run/detach/ctl"
#define CTL_FSNAME       "detach-ctl"       /* the source column of /proc/mounts */

/* Mounts the files at path (an existing directory) and serves them until SIGTERM, SIGINT or SIGHUP or an unmount; detached threads take
 * CPUs of cpus.  Writes one line to ready_fd once mounted ("ok", or the
 * error), then closes it.  Returns the exit status. */
int ctl_serve(const char *path, const cpu_set_t *cpus, int ready_fd);

/* One line in the daemon's log (stderr, redirected to the log file). */
void ctl_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
