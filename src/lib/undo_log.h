/* An undo log: what a command is about to change, recorded before it
 * changes it, so that the change can be undone after any end, a crash or
 * a SIGKILL included (docs/isolate.md, docs/trace.md, docs/pid.md).  One
 * record a line, appended with one write() and fsynced; a last line
 * without its newline was cut by a crash, and the change it announced
 * never happened.  Undone newest first, by the owner or by whoever finds
 * the log of an owner that is gone.  `detach isolate` (cli/journal.c), the
 * trace session's guard (lib/trace.c) and `detach ctl` (cli/ctl.c) keep
 * theirs this way; each knows its own kinds of record.
 *
 * Reading uses system calls only, into the caller's buffer: a guard
 * process forked from a multi-threaded owner may replay a log, and may
 * not allocate there. */
#ifndef DETACH_LIB_UNDO_LOG_H
#define DETACH_LIB_UNDO_LOG_H

#include <stddef.h>
#include <sys/types.h>

/* Appends line and a newline to the log open at fd (O_APPEND) and fsyncs
 * it: 0, or -errno. */
int undo_log_append(int fd, const char *line);
/* The same on the log at path, created (0600) when missing. */
int undo_log_append_path(const char *path, const char *line);
/* Reads the log at path into buf (at most cap - 1 bytes) and splits its
 * complete lines into lines[] (at most max, oldest first), NUL-terminated
 * in place; the count, or -errno.  -EFBIG when it does not fit. */
int undo_log_read(const char *path, char *buf, size_t cap, char **lines, int max);
/* fsyncs directory dir, so that a log's new name survives a crash too. */
void undo_log_sync_dir(const char *dir);
/* A value with tabs, newlines or backslashes on one line, and back. */
void undo_log_escape(const char *in, char *out, size_t len);
void undo_log_unescape(const char *in, char *out, size_t len);

#endif
