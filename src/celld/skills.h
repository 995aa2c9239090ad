/* skills.c: the registry of skills on disk, <state>/skills/<name>/<version>/ (root-only):
 * "archive" (the package as uploaded, judged by skillpkg.c) and "skill.json" (name,
 * version, sha256, size, format, createdAt). A version is immutable once registered. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cell/error.h"

#define SKILL_NAME_MAX	  64
#define SKILL_VERSION_MAX 64
/* An uploaded archive, at most. */
#define SKILL_UPLOAD_MAX      (64ull << 20)
#define SKILL_UPLOAD_MAX_TEXT "64 MiB"

/* [A-Za-z0-9._-], 1..max bytes, no leading dot. */
bool skill_name_valid(const char *s, size_t max);
/* A new temp file in the registry for an upload: its fd (read/write), name in path. */
int skills_upload_open(char *path, size_t size, int *fd, struct cell_error *err);
/* Drop an upload's temp file (path as skills_upload_open made it). */
void skills_upload_drop(const char *path);
/* Judge the archive in fd (the upload at path) and register it as name@version: 0 with
 * *out its description (a new reference); -EINVAL with err naming the field or the
 * archive's entry; -EEXIST when that version is registered. The temp file is consumed
 * either way. */
int skills_register(const char *name, const char *version, int fd, const char *path, json_t **out,
		    struct cell_error *err);
/* The descriptions of every version of name (NULL: of every skill), sorted; NULL on
 * allocation failure. */
json_t *skills_list(const char *name);
/* Remove one version, or every version when version is NULL: 0 or -ENOENT. */
int skills_delete(const char *name, const char *version, struct cell_error *err);
/* Open name@version's archive for reading: fd, or -ENOENT. */
int skills_open(const char *name, const char *version, struct cell_error *err);
