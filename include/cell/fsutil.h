/* Filesystem helpers that never follow a symlink they were not asked to follow. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "cell/error.h"

/* mkdir -p of an absolute host path that cell itself controls (state dir, images dir). */
int cell_mkdir_p(const char *path, mode_t mode, struct cell_error *err);

/* Open `path` beneath `rootfd` as if rootfd were "/": openat2() with RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS (plus RESOLVE_NO_SYMLINKS when no_symlinks). `..` and absolute
 * symlinks stay inside rootfd. Returns an fd or -errno. */
int cell_open_in_root(int rootfd, const char *path, int flags, mode_t mode, int no_symlinks);

/* write() until all of buf is out: EINTR retried, EAGAIN (a non-blocking fd, e.g. a terminal
 * someone set O_NONBLOCK on) waits for POLLOUT. Returns 0 or -errno. */
int cell_write_all(int fd, const void *buf, size_t len);

/* Write a whole file atomically: tmp file in the same dir, fsync, rename. */
int cell_write_file_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
			   struct cell_error *err);

/* Read a whole regular file of at most max bytes (more is -EFBIG). *out is malloc'd and
 * NUL-terminated. */
int cell_read_file_at(int dirfd, const char *path, size_t max, char **out, size_t *out_len,
		      struct cell_error *err);

/* Write a short string to an existing file (cgroup and /proc knobs). */
int cell_write_string(const char *path, const char *value, struct cell_error *err);

/* rm -rf of dirfd/name without ever following a symlink or crossing a mount (used on
 * sandbox upper dirs, whose contents are hostile). Missing is success. */
int cell_remove_tree_at(int dirfd, const char *name, struct cell_error *err);

/* A file a program finds: flag when given, else `beside` relative to the directory of the
 * running binary when access(mode) allows it there (a build tree), else installed. */
void cell_pick_path(char *buf, size_t size, const char *flag, const char *beside, int mode,
		    const char *installed);
