/* skillpkg.c: a skill's archive (tar.gz or zip) read and judged: every entry a regular
 * file or a directory under a relative path without "..", bounded in count and expansion,
 * with entrypoint.sh at its top (or in its single top directory). Pure (zlib only): unit
 * suites link it alone. An archive comes from a client and is hostile. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell/error.h"

#define SKILLPKG_ENTRIES_MAX 4096
#define SKILLPKG_TOTAL_MAX   (256ull << 20) /* bytes of all files together */
/* Expansion beyond this many times the archive's size is a bomb, once past the floor. */
#define SKILLPKG_RATIO_MAX   200
#define SKILLPKG_RATIO_FLOOR (8ull << 20)
#define SKILLPKG_PATH_MAX    1024
#define SKILLPKG_DEPTH_MAX   32

enum skillpkg_kind { SKILLPKG_DIR, SKILLPKG_FILE };

struct skillpkg_entry {
	const char *path; /* relative, normalised, the top directory (if any) taken off */
	enum skillpkg_kind kind;
	uint32_t mode; /* 0755 or 0644 (files), 0755 (directories) */
	uint64_t size;
};

/* Called for each entry (directories and files in archive order); a file's bytes follow
 * through data, then end. A negative return stops the walk and is returned. */
struct skillpkg_ops {
	int (*begin)(void *cls, const struct skillpkg_entry *e);
	int (*data)(void *cls, const void *buf, size_t len);
	int (*end)(void *cls);
};

struct skillpkg_info {
	char format[8];	    /* "tar.gz" or "zip" */
	char prefix[260];   /* "" or "<top dir>/": taken off every path */
	unsigned entries;   /* files and directories */
	uint64_t total;	    /* bytes of all files */
	uint64_t file_size; /* the archive's */
};

/* Judge the archive open on fd (read from offset 0): 0 with info, or -EINVAL with err
 * naming the entry and what is wrong with it ("entry '../x': a '..' component"), or
 * -errno for I/O. With ops, a second walk streams what the first judged sound. */
int skillpkg_scan(int fd, const struct skillpkg_ops *ops, void *cls, struct skillpkg_info *info,
		  struct cell_error *err);
