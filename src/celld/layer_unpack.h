/* One image layer unpacked into a directory of the layer store: the security boundary of
 * images (cell-security(7), "Image layers"). The stream (plain, gzip or zstd, told by its
 * content) is read by libarchive's tar reader, never an external program; every path is
 * opened fd-relative below the layer's directory, one component at a time, never through a
 * symlink, a non-directory or a mount. A hostile entry is refused, not confined: the error
 * names it ("entry 'a/b': ..."), -EINVAL for a refused or malformed entry, -EFBIG for a
 * bound. On failure the directory holds part of the layer: the caller removes it with
 * layer_remove_all. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cell/error.h"

struct layer_limits {
	uint64_t max_bytes;	 /* the files' apparent sizes together */
	uint64_t max_entries;	 /* entries of the tar, whiteouts included */
	uint64_t max_file_bytes; /* one file's apparent size */
	uint32_t max_depth;	 /* components of an entry's path */
};

struct layer_stats {
	uint64_t entries, bytes, files, dirs, links, whiteouts, symlinks, fifos, xattrs_dropped;
	char diff_id[72];     /* sha256:<hex> of the uncompressed tar */
	char blob_digest[72]; /* of the bytes read from fd */
};

/* Unpacks the layer read from fd (to its end) into the empty directory dirfd. st is filled
 * on success and failure alike (what was done until then). */
int layer_unpack(int fd, int dirfd, const struct layer_limits *lim, struct layer_stats *st,
		 struct cell_error *err);

/* The same over the layers below it (parents: their directory fds, top first): a directory the
 * layer implies but does not list (a file under it, no entry of its own) takes owner, mode and
 * times from the first of them that has it as a directory (overlayfs shows the topmost layer's
 * directory, so a root 0755 one would hide e.g. /home/sandbox's owner); a whiteout or file
 * there, or none: root's 0755. */
int layer_unpack_over(int fd, int dirfd, const int *parents, size_t n_parents,
		      const struct layer_limits *lim, struct layer_stats *st,
		      struct cell_error *err);

/* rm -rf of parentfd/name, fd-relative, never following a symlink or crossing a mount. */
int layer_remove_all(int parentfd, const char *name, struct cell_error *err);
