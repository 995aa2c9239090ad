/* skills.c: the registry of skills on disk, <state>/skills/<name>/<version>/ (root-only):
 * "archive" (the package as uploaded, judged by skillpkg.c) and "skill.json" (name,
 * version, sha256, size, format, createdAt, owner). A version is immutable once
 * registered, and its content is pinned for good by <state>/skills/.pins/<name>@<version>
 * ({sha256, owner, pinnedAt}), which outlives a delete: name@version never means other
 * bytes, so a sandbox naming it never runs another entrypoint as root.
 *
 * Who owns a skill: a name belongs to whoever registered its first version (an API key,
 * or the operator on the Unix socket; versions from before owners: the operator's), and
 * every later version follows it; its pins keep it after its last version is deleted. The
 * operator's skills are a catalogue every key uses but only the operator changes; a key's
 * are its own (tenancy.h: another key does not see them). Names are one namespace: a key
 * learns that a name is taken. With one key, everything is shared as before. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cell/codec.h"
#include "cell/error.h"

struct adm_principal;

#define SKILL_NAME_MAX	  64
#define SKILL_VERSION_MAX 64
/* An uploaded archive, at most. */
#define SKILL_UPLOAD_MAX      (64ull << 20)
#define SKILL_UPLOAD_MAX_TEXT "64 MiB"

/* skills_register's refusals beyond -EINVAL and -EEXIST (negated): the name is another
 * owner's (409 SKILL_NAME_TAKEN); name@version is pinned to other bytes (409
 * SKILL_VERSION_PINNED). skills_delete's: the operator's skill, asked by a key (403
 * SKILL_SHARED). */
#define SKILL_ENAME_TAKEN EADDRINUSE
#define SKILL_EPINNED	  ENOTUNIQ
#define SKILL_ESHARED	  EPERM

/* [A-Za-z0-9._-], 1..max bytes, no leading dot. */
bool skill_name_valid(const char *s, size_t max);
/* A new temp file in the registry for an upload: its fd (read/write), name in path. */
int skills_upload_open(char *path, size_t size, int *fd, struct cell_error *err);
/* Drop an upload's temp file (path as skills_upload_open made it). */
void skills_upload_drop(const char *path);
/* Judge the archive in fd (the upload at path) and register it as name@version for who
 * (NULL: the operator): 0 with *out its description (a new reference, "owner" the owner's
 * name); -EINVAL with err naming the field or the archive's entry; -EEXIST when that
 * version is registered; -SKILL_ENAME_TAKEN; -SKILL_EPINNED (err names the pinned digest
 * only when who may use the pin owner's skills). The temp file is consumed either way. */
int skills_register(const struct adm_principal *who, const char *name, const char *version, int fd,
		    const char *path, json_t **out, struct cell_error *err);
/* The descriptions of every version of name (NULL: of every skill) who may use, sorted;
 * NULL on allocation failure. */
json_t *skills_list(const struct adm_principal *who, const char *name);
/* Remove one version, or every version when version is NULL, pinning each first (a
 * version from before pins gets its pin now): 0, -ENOENT (also: one who may not see), or
 * -SKILL_ESHARED. */
int skills_delete(const struct adm_principal *who, const char *name, const char *version,
		  struct cell_error *err);
/* Open name@version's archive for reading as who may (a sandbox's owner): fd, with sha its
 * registered SHA-256 (skill.json's, which its pin must agree with), or -ENOENT (also: one
 * who may not use). */
int skills_open(const struct adm_principal *who, const char *name, const char *version,
		char sha[CELL_SHA256_HEX_LEN + 1], struct cell_error *err);
/* The SHA-256 of everything fd holds, read from offset 0 (pread). */
int skills_sha256_fd(int fd, char hex[CELL_SHA256_HEX_LEN + 1], struct cell_error *err);
