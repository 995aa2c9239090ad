/* sbfile.c: the files of a running sandbox, whichever API asks. Typed calls onto cell-init's
 * file conversations (stat, mkdir, move, remove, chmod, replace, list, read, tar, watch),
 * and the one audit record of each change they make (file.mkdir, file.move, file.delete,
 * file.chmod, file.replace; file.write is file_xfer.c's, in the same shape). The fronts
 * (api_files.c, e2b_filesystem.c, e2b_files.c, e2b_common.c) translate their wire formats
 * into these calls and never speak the relay themselves.
 *
 * Every call returns 0 when done, 1 when cell-init refused it (err->code is its errno,
 * err->msg its message: a path not there, a permission), or -errno when the relay failed
 * (err says why). Paths are absolute; cell-init resolves them beneath the sandbox's root. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "cell/error.h"
#include "relay_types.h"
#include "sbfile_req.h"

struct cell_frame;

struct sandbox;

/* One entry as cell-init stats it: type ("file", "directory", "symlink", "other"), size,
 * mode, uid and gid with their names, times, a symlink's text, its metadata. */
typedef struct relay_stat sbfile_info;
/* What one API request may spend waiting on cell-init's answers, all calls together. */
typedef struct relay_budget sbfile_budget;
#define SBFILE_BUDGET_INIT RELAY_BUDGET_INIT

#define SBFILE_LIST_DEPTH_MAX 32	  /* cell-init's bound too */
#define SBFILE_LIST_MAX	      10000	  /* entries one listing holds; cell-init's bound */
#define SBFILE_REPLACE_MAX    (64u << 10) /* a replace's old or new text; cell-init's bound */

/* Who asks: the sandbox, the sandbox user the call acts as (for the audit; NULL when its
 * API names none) and the budget the call's steps share. */
struct sbfile_ctx {
	struct sandbox *sb;
	const char *user;
	sbfile_budget *b;
};

/* The entry path names (a last symlink itself). */
int sbfile_stat(const struct sbfile_ctx *c, const char *path, sbfile_info *st,
		struct cell_error *err);
/* st's metadata as a JSON object {key: value} (a new reference), NULL when it has none. */
json_t *sbfile_info_meta(const sbfile_info *st);

/* mkdir -p path, p applied to path itself when this call made it; *created says whether
 * it did (an existing directory is left as it is). Audited: file.mkdir. */
int sbfile_mkdir(const struct sbfile_ctx *c, const char *path, const struct sbfile_perm *p,
		 bool *created, struct cell_error *err);
/* The directories above path that are missing, made top down one level at a time, each
 * 0755 and owned by uid:gid; those there are left as they are. Part of the write or move
 * it precedes, so not audited on its own. */
int sbfile_make_parents(const struct sbfile_ctx *c, const char *path, int64_t uid, int64_t gid,
			struct cell_error *err);
/* rename(2) src to dest, whose directory must exist. Audited: file.move. */
int sbfile_move(const struct sbfile_ctx *c, const char *src, const char *dest,
		struct cell_error *err);
/* A file, or with recursive a directory and all it holds. Audited: file.delete. */
int sbfile_remove(const struct sbfile_ctx *c, const char *path, bool recursive,
		  struct cell_error *err);
/* A mode and owners changed. Audited: file.chmod. */
int sbfile_chmod(const struct sbfile_ctx *c, const char *path, const struct sbfile_perm *p,
		 struct cell_error *err);
/* Every occurrence of old (non-empty) replaced by new in the regular file path; *count (when
 * asked) the number replaced. Audited: file.replace, never the texts. */
int sbfile_replace(const struct sbfile_ctx *c, const char *path, const char *old,
		   const char *new_text, int64_t *count, struct cell_error *err);

/* The entries below the directory path, depth levels down (1: its own), or those matching
 * the glob pattern (non-NULL) at any depth, each through each() (at most SBFILE_LIST_MAX);
 * each()'s own failure is returned as it is. */
typedef int (*sbfile_each_fn)(void *cls, const char *path, const sbfile_info *st);
int sbfile_list(const struct sbfile_ctx *c, const char *path, int depth, const char *pattern,
		sbfile_each_fn each, void *cls, struct cell_error *err);

/* A reader of path's bytes from offset (limit -1: to its end): 0 with *fd the open
 * conversation and st what it read (file_download_new streams it, sbfile_read_next reads
 * it). */
int sbfile_read_open(const struct sbfile_ctx *c, const char *path, int64_t offset, int64_t limit,
		     int *fd, sbfile_info *st, struct cell_error *err);
/* The same for the tar archive of what path leads to, made as it is read. */
int sbfile_tar_open(const struct sbfile_ctx *c, const char *path, int *fd, sbfile_info *st,
		    struct cell_error *err);
/* A reader's next bytes: 1 with *chunk (cell_frame_free it), 0 at the end, -errno. */
int sbfile_read_next(int fd, struct cell_frame *chunk, struct cell_error *err);
/* A small file read whole: at most max bytes into *out (malloc'd, NUL-terminated). */
int sbfile_read_all(const struct sbfile_ctx *c, const char *path, size_t max, char **out,
		    struct cell_error *err);

/* A watch of the directory path (with recursive, its subdirectories too): 0 with *fd the
 * open conversation, its events waiting in it. */
int sbfile_watch_open(const struct sbfile_ctx *c, const char *path, bool recursive, int *fd,
		      struct cell_error *err);
/* 1 when a watch has events to read within timeout_ms (0: now), 0 when none, -errno. */
int sbfile_watch_ready(int fd, int timeout_ms);
/* A watch's next events: 1 with *events (an array of {"name", "op"}: op create, write,
 * remove, rename or chmod; a new reference), 0 when cell-init ended the watch (its
 * directory gone), -errno (EOVERFLOW: events were lost). */
int sbfile_watch_next(int fd, json_t **events, struct cell_error *err);
