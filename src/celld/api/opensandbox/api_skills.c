/* cell's own routes of the skills registry: POST /v1/skills (multipart: name, version,
 * file), GET /v1/skills, GET /v1/skills/{name}, DELETE /v1/skills/{name}[/{version}]. The
 * upload is streamed into a temp file in the registry (at most SKILL_UPLOAD_MAX), then
 * judged and registered by skills.c, for the request's principal: who owns a skill, and
 * who sees it, is skills.h's. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "http/http.h"
#include "http/multipart.h"
#include "skills.h"

enum skill_part { PART_NONE, PART_NAME, PART_VERSION, PART_FILE };

struct skill_upload {
	struct multipart *mp;
	enum skill_part part;
	char name[SKILL_NAME_MAX + 2], version[SKILL_VERSION_MAX + 2];
	size_t name_len, version_len;
	bool has_name, has_version, has_file;
	int fd;
	char path[PATH_MAX];
	unsigned long long size;
	/* The first failure; the rest of the body is read and dropped, then it is answered. */
	struct http_later failed;
};

static void upload_free(void *cls)
{
	struct skill_upload *u = cls;
	if (u->fd >= 0)
		close(u->fd);
	skills_upload_drop(u->path);
	multipart_free(u->mp);
	free(u);
}

static int on_begin(void *cls, const char *name)
{
	struct skill_upload *u = cls;
	if (!strcmp(name, "name") && !u->has_name) {
		u->part = PART_NAME;
		u->has_name = true;
	} else if (!strcmp(name, "version") && !u->has_version) {
		u->part = PART_VERSION;
		u->has_version = true;
	} else if (!strcmp(name, "file") && !u->has_file) {
		u->part = PART_FILE;
		u->has_file = true;
		struct cell_error err = {0};
		if (skills_upload_open(u->path, sizeof(u->path), &u->fd, &err) < 0)
			return http_later_fail_errno(&u->failed, err.code, NULL, "%s", err.msg);
	} else {
		return http_later_fail(
		    &u->failed, 400, "INVALID_ARGUMENT",
		    "unexpected part '%.64s' (name, version and file, once each)", name);
	}
	return 0;
}

static int on_data(void *cls, const char *data, size_t len)
{
	struct skill_upload *u = cls;
	if (u->part == PART_NAME || u->part == PART_VERSION) {
		char *buf = u->part == PART_NAME ? u->name : u->version;
		size_t *n = u->part == PART_NAME ? &u->name_len : &u->version_len;
		size_t cap = (u->part == PART_NAME ? sizeof(u->name) : sizeof(u->version)) - 1;
		if (*n + len > cap)
			return http_later_fail(
			    &u->failed, 400, "INVALID_ARGUMENT", "%s is longer than %d characters",
			    u->part == PART_NAME ? "name" : "version",
			    u->part == PART_NAME ? SKILL_NAME_MAX : SKILL_VERSION_MAX);
		memcpy(buf + *n, data, len);
		*n += len;
		buf[*n] = '\0';
		return 0;
	}
	if (u->size + len > SKILL_UPLOAD_MAX)
		return http_later_fail(&u->failed, 413, "REQUEST_TOO_LARGE",
				       "file is larger than " SKILL_UPLOAD_MAX_TEXT);
	u->size += len;
	while (len) {
		ssize_t w = write(u->fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return http_later_fail_errno(&u->failed, errno, NULL, "writing %s: %s",
						     u->path, strerror(errno));
		data += w;
		len -= (size_t)w;
	}
	return 0;
}

static int on_end(void *cls)
{
	struct skill_upload *u = cls;
	u->part = PART_NONE;
	return 0;
}

static const struct multipart_ops ops = {on_begin, on_data, on_end};

int api_skill_add_begin(struct http_req *r)
{
	struct skill_upload *u = calloc(1, sizeof(*u));
	if (!u)
		return http_no_memory(r);
	u->fd = -1;
	http_set_state(r, u, upload_free);
	struct cell_error err = {0};
	u->mp = multipart_new(http_header(r, "Content-Type"), &ops, u, &err);
	if (!u->mp)
		return http_error(r, 400, "INVALID_ARGUMENT", "%s", err.msg);
	return 0;
}

int api_skill_add_data(struct http_req *r, const char *data, size_t len)
{
	struct skill_upload *u = http_state(r);
	if (!u || u->failed.status)
		return 0;
	struct cell_error err = {0};
	if (multipart_feed(u->mp, data, len, &err) < 0 && !u->failed.status)
		http_later_fail(&u->failed, 400, "INVALID_ARGUMENT", "%s", err.msg);
	return 0;
}

int api_skill_add(struct http_req *r)
{
	struct skill_upload *u = http_state(r);
	if (!u)
		return http_error(r, 500, "INTERNAL", "upload state lost");
	struct cell_error err = {0};
	if (!u->failed.status && multipart_finish(u->mp, &err) < 0)
		http_later_fail(&u->failed, 400, "INVALID_ARGUMENT", "%s", err.msg);
	if (!u->failed.status && !u->has_name)
		http_later_fail(&u->failed, 400, "INVALID_ARGUMENT", "name is required");
	if (!u->failed.status && !u->has_version)
		http_later_fail(&u->failed, 400, "INVALID_ARGUMENT", "version is required");
	if (!u->failed.status && !u->has_file)
		http_later_fail(&u->failed, 400, "INVALID_ARGUMENT",
				"file is required (a tar.gz or zip archive)");
	if (u->failed.status)
		return http_later_answer(r, &u->failed);
	json_t *o = NULL;
	int rc = skills_register(http_principal(r), u->name, u->version, u->fd, u->path, &o, &err);
	u->path[0] = '\0'; /* consumed */
	if (rc == -EEXIST)
		return http_fail(r, EEXIST, "SKILL_EXISTS", "%s", err.msg);
	if (rc == -SKILL_ENAME_TAKEN)
		return http_error(r, 409, "SKILL_NAME_TAKEN", "%s", err.msg);
	if (rc == -SKILL_EPINNED)
		return http_error(r, 409, "SKILL_VERSION_PINNED", "%s", err.msg);
	if (rc == -EINVAL)
		return http_fail(r, EINVAL, "INVALID_SKILL", "%s", err.msg);
	if (rc < 0)
		return http_internal(r, &err);
	return http_json(r, 201, o);
}

int api_skill_list(struct http_req *r)
{
	json_t *items = skills_list(http_principal(r), NULL);
	if (!items)
		return http_no_memory(r);
	return http_json(r, 200, json_pack("{s:o}", "items", items));
}

int api_skill_get(struct http_req *r)
{
	const char *name = http_param(r, 0);
	json_t *items =
	    skill_name_valid(name, SKILL_NAME_MAX) ? skills_list(http_principal(r), name) : NULL;
	if (!json_array_size(items)) {
		json_decref(items);
		return http_fail(r, ENOENT, "SKILL_NOT_FOUND", "skill %.64s not found", name);
	}
	return http_json(r, 200, json_pack("{s:s, s:o}", "name", name, "versions", items));
}

static int delete (struct http_req *r, const char *name, const char *version)
{
	struct cell_error err = {0};
	int rc = skills_delete(http_principal(r), name, version, &err);
	if (rc == -ENOENT)
		return http_fail(r, ENOENT, "SKILL_NOT_FOUND", "%s", err.msg);
	if (rc == -SKILL_ESHARED)
		return http_error(r, 403, "SKILL_SHARED", "%s", err.msg);
	if (rc < 0)
		return http_internal(r, &err);
	return http_empty(r, 204);
}

int api_skill_delete(struct http_req *r)
{
	return delete (r, http_param(r, 0), NULL);
}

int api_skill_delete_version(struct http_req *r)
{
	return delete (r, http_param(r, 0), http_param(r, 1));
}
