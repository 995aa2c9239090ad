/* sbfile_req.c: the pure half of the files service (sbfile.c): what a caller may name (a
 * user or group, an absolute path), the request cell-init reads for a change built from
 * typed arguments, and the one audit record of each change, whichever API asked. No I/O,
 * so a unit suite links it alone. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#define SBFILE_NAME_MAX 32 /* a user or group name, as useradd takes it */

/* Who a file made or changed belongs to: a numeric id inside the sandbox's range, or a
 * name cell-init looks up in the sandbox's own /etc/passwd or /etc/group. id -1 and name
 * "": left as it is. */
struct sbfile_owner {
	int64_t id;
	char name[SBFILE_NAME_MAX + 1];
};

/* A mode (permission bits, -1: left as it is) and owners. */
struct sbfile_perm {
	int32_t mode;
	struct sbfile_owner user, group;
};

#define SBFILE_PERM_KEEP                                                                           \
	(struct sbfile_perm)                                                                       \
	{                                                                                          \
		.mode = -1, .user = {.id = -1}, .group = {.id = -1 }                               \
	}

/* A user or group name: 1 to SBFILE_NAME_MAX of [A-Za-z0-9_.-], not led by '-', a '$' only
 * last (a machine account). */
bool sbfile_name_ok(const char *s, size_t n);
/* An absolute path of at most PATH_MAX - 1 bytes. */
bool sbfile_path_ok(const char *path);
/* Valid UTF-8 (shortest forms, no surrogates, at most U+10FFFF): what cell-init's JSON
 * requests can carry. */
bool sbfile_text_ok(const char *s);

/* {"path", "mode"?, "uid"|"owner"?, "gid"|"group"?}: the request of a mkdir, a chmod or a
 * write; NULL when out of memory or path is not UTF-8. */
json_t *sbfile_req_perm(const char *path, const struct sbfile_perm *p);

/* The audit record of a change: the request's fields but the texts it writes (a replace's
 * "old" and "new"), "user" (the sandbox user the call acted as, null when its API names
 * none) and "ok". A new object; req is not taken. */
json_t *sbfile_req_audit(const json_t *req, const char *user, bool ok);
/* The record of a write: {"path", "size", "user", "ok"}, never the bytes. */
json_t *sbfile_req_audit_write(const char *path, int64_t size, const char *user, bool ok);
