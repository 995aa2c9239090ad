/* Copies of a sandbox's writable layer (an overlay upper/ dir, or the ext4 image of a loop
 * disk quota), for snapshots and the sandboxes made from them.
 *
 * An upper layer is written by the sandbox: hostile. Every walk is fd-relative, never
 * follows a symlink, never crosses a mount, and is bounded in entries and depth. Files are
 * owned by host ids in the sandbox's uid range (uid_base ... uid_base + CELL_UID_RANGE - 1);
 * a copy for another sandbox shifts every id of that range by the difference of the two
 * bases, in owners, in POSIX ACL entries and in the root id of v3 file capabilities. Ids
 * outside the range (overlay's own whiteouts, 0:0) stay as they are. Kept: mode bits
 * (setuid and setgid included, set again after the chown that clears them), timestamps,
 * overlay whiteouts (0:0 character devices), fifos and sockets, and every xattr
 * (trusted.overlay.* such as opaque dirs included). Not kept: hard links between files
 * (each name gets its own copy), other device nodes (a sandbox cannot make them). */
#pragma once

#include <stdint.h>

#include "cell/error.h"

#define CELL_LAYER_MAX_ENTRIES 1000000u /* names in one layer */
#define CELL_LAYER_MAX_DEPTH   128u	/* directories deep */

struct cell_layer_stats {
	uint64_t entries, files, bytes, cloned; /* cloned: files that share their blocks */
	uint64_t skipped;			/* device nodes left out */
};

/* Copy the tree of dir src_fd into dst_parent_fd/dst_name (created, must not exist), ids
 * shifted from from_base's range to to_base's (equal bases: kept). Regular files are
 * reflinked where the filesystem can (FICLONE), else copied extent by extent
 * (SEEK_DATA/SEEK_HOLE, copy_file_range), holes kept. On failure what was made is left for
 * the caller to remove. */
int cell_layer_copy(int src_fd, int dst_parent_fd, const char *dst_name, uint32_t from_base,
		    uint32_t to_base, struct cell_layer_stats *stats, struct cell_error *err);

/* Shift the ids of the tree of dir fd in place (a loop image's upper/ once mounted). */
int cell_layer_shift(int fd, uint32_t from_base, uint32_t to_base, struct cell_layer_stats *stats,
		     struct cell_error *err);

/* out (empty, regular) becomes a copy of in: a reflink where the filesystem has them,
 * else the data extents only (holes kept). *cloned tells which (may be NULL). */
int cell_file_clone(int in, int out, int *cloned);
