/* The files of a running sandbox, whichever API asks (sbfile.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "sandbox.h"
#include "relay.h"
#include "sbfile.h"

/* A relay call's result in the service's form: cell-init's refusal (1, rerr) folded into
 * err, keeping its errno and message as they are. */
static int refusal(int rc, const struct relay_error *rerr, struct cell_error *err)
{
	if (rc == 1)
		cell_err_msg(err, rerr->errnum, "%s", rerr->message);
	return rc;
}

int sbfile_stat(const struct sbfile_ctx *c, const char *path, sbfile_info *st,
		struct cell_error *err)
{
	struct relay_error rerr;
	return refusal(relay_file_stat(c->sb, path, st, &rerr, c->b, err), &rerr, err);
}

json_t *sbfile_info_meta(const sbfile_info *st)
{
	return relay_stat_meta(st);
}

/* A request that cannot be built: a text JSON cannot carry, else out of memory. */
static int no_request(const char *a, const char *b, struct cell_error *err)
{
	if (!sbfile_text_ok(a) || (b && !sbfile_text_ok(b)))
		return cell_err_msg(err, EINVAL, "path is not valid UTF-8");
	return cell_err(err, ENOMEM, "request");
}

/* One change: req (taken) sent as a frame of type, cell-init's OK into *ok (when asked),
 * audited as action unless action is NULL. */
static int change(const struct sbfile_ctx *c, uint16_t type, const char *action, json_t *req,
		  json_t **ok, struct cell_error *err)
{
	struct relay_error rerr;
	json_t *answer = NULL;
	int rc = relay_file_op(c->sb, type, req, &answer, &rerr, c->b, err);
	refusal(rc, &rerr, err);
	if (ok && rc == 0)
		*ok = answer;
	else
		json_decref(answer);
	if (action)
		audit_log(c->sb->id, action, sbfile_req_audit(req, c->user, rc == 0));
	json_decref(req);
	return rc;
}

int sbfile_mkdir(const struct sbfile_ctx *c, const char *path, const struct sbfile_perm *p,
		 bool *created, struct cell_error *err)
{
	json_t *req = sbfile_req_perm(path, p), *ok = NULL;
	if (!req)
		return no_request(path, NULL, err);
	int rc = change(c, CELL_FRAME_FILE_MKDIR, "file.mkdir", req, &ok, err);
	if (created)
		*created = rc == 0 && json_is_true(json_object_get(ok, "created"));
	json_decref(ok);
	return rc;
}

int sbfile_make_parents(const struct sbfile_ctx *c, const char *path, int64_t uid, int64_t gid,
			struct cell_error *err)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	size_t len = strlen(dir);
	while (len > 1 && dir[len - 1] == '/')
		dir[--len] = '\0';
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0; /* below the root: nothing to make */
	*slash = '\0';
	sbfile_info st;
	int rc = sbfile_stat(c, dir, &st, err);
	if (rc != 1 || err->code != ENOENT)
		return rc < 0 ? rc : 0; /* there (or not reachable: the write says why) */
	cell_err_clear(err);
	/* Top down, one level per request: a level made is uid's, one there is left as it is
	 * (FILE_MKDIR's mkdir -p would make the levels between root's). */
	struct sbfile_perm p = {.mode = 0755, .user = {.id = uid}, .group = {.id = gid}};
	for (char *q = dir + 1;; q++) {
		if (*q != '/' && *q)
			continue;
		char keep = *q;
		*q = '\0';
		json_t *req = sbfile_req_perm(dir, &p);
		rc = req ? change(c, CELL_FRAME_FILE_MKDIR, NULL, req, NULL, err)
			 : no_request(dir, NULL, err);
		*q = keep;
		if (rc != 0 || !keep)
			return rc;
	}
}

int sbfile_move(const struct sbfile_ctx *c, const char *src, const char *dest,
		struct cell_error *err)
{
	json_t *req = json_pack("{s:s, s:s}", "src", src, "dest", dest);
	if (!req)
		return no_request(src, dest, err);
	return change(c, CELL_FRAME_FILE_MOVE, "file.move", req, NULL, err);
}

int sbfile_remove(const struct sbfile_ctx *c, const char *path, bool recursive,
		  struct cell_error *err)
{
	json_t *req = json_pack("{s:s, s:b}", "path", path, "recursive", recursive);
	if (!req)
		return no_request(path, NULL, err);
	return change(c, CELL_FRAME_FILE_REMOVE, "file.delete", req, NULL, err);
}

int sbfile_chmod(const struct sbfile_ctx *c, const char *path, const struct sbfile_perm *p,
		 struct cell_error *err)
{
	json_t *req = sbfile_req_perm(path, p);
	if (!req)
		return no_request(path, NULL, err);
	return change(c, CELL_FRAME_FILE_CHMOD, "file.chmod", req, NULL, err);
}

int sbfile_replace(const struct sbfile_ctx *c, const char *path, const char *old,
		   const char *new_text, int64_t *count, struct cell_error *err)
{
	json_t *req = json_pack("{s:s, s:s, s:s}", "path", path, "old", old, "new", new_text);
	if (!req)
		return no_request(path, NULL, err);
	json_t *ok = NULL;
	struct relay_error rerr;
	int rc = relay_file_op(c->sb, CELL_FRAME_FILE_REPLACE, req, &ok, &rerr, c->b, err);
	refusal(rc, &rerr, err);
	json_t *n = json_object_get(ok, "replaced");
	if (rc == 0 && count && (!json_is_integer(n) || json_integer_value(n) < 0))
		rc = cell_err(err, EPROTO, "cell-init sent OK without a count");
	else if (rc == 0 && count)
		*count = json_integer_value(n);
	json_decref(ok);
	audit_log(c->sb->id, "file.replace", sbfile_req_audit(req, c->user, rc == 0));
	json_decref(req);
	return rc;
}

int sbfile_list(const struct sbfile_ctx *c, const char *path, int depth, const char *pattern,
		sbfile_each_fn each, void *cls, struct cell_error *err)
{
	json_t *req = pattern ? json_pack("{s:s, s:s}", "path", path, "pattern", pattern)
			      : json_pack("{s:s, s:i}", "path", path, "depth", depth);
	if (!req)
		return no_request(path, pattern, err);
	struct relay_error rerr;
	int rc = relay_file_list(c->sb, req, SBFILE_LIST_MAX, each, cls, &rerr, c->b, err);
	json_decref(req);
	return refusal(rc, &rerr, err);
}

int sbfile_read_open(const struct sbfile_ctx *c, const char *path, int64_t offset, int64_t limit,
		     int *fd, sbfile_info *st, struct cell_error *err)
{
	struct relay_error rerr;
	int rc = relay_file_read(c->sb, path, offset, limit, fd, st, &rerr, c->b, err);
	return refusal(rc, &rerr, err);
}

int sbfile_tar_open(const struct sbfile_ctx *c, const char *path, int *fd, sbfile_info *st,
		    struct cell_error *err)
{
	struct relay_error rerr;
	return refusal(relay_file_tar(c->sb, path, fd, st, &rerr, c->b, err), &rerr, err);
}

int sbfile_read_next(int fd, struct cell_frame *chunk, struct cell_error *err)
{
	return relay_file_read_next(fd, chunk, err);
}

int sbfile_read_all(const struct sbfile_ctx *c, const char *path, size_t max, char **out,
		    struct cell_error *err)
{
	sbfile_info st;
	int fd;
	int rc = sbfile_read_open(c, path, 0, (int64_t)max, &fd, &st, err);
	if (rc != 0)
		return rc;
	size_t len = 0;
	char *buf = malloc(max + 1);
	if (!buf) {
		close(fd);
		return cell_err(err, ENOMEM, "reading %s", path);
	}
	struct cell_frame f;
	while ((rc = sbfile_read_next(fd, &f, err)) > 0) {
		size_t n = f.len < max - len ? f.len : max - len;
		memcpy(buf + len, f.payload, n);
		len += n;
		cell_frame_free(&f);
	}
	close(fd);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

int sbfile_watch_open(const struct sbfile_ctx *c, const char *path, bool recursive, int *fd,
		      struct cell_error *err)
{
	json_t *req = json_pack("{s:s, s:b}", "path", path, "recursive", recursive);
	if (!req)
		return no_request(path, NULL, err);
	struct relay_error rerr;
	int rc = relay_file_watch(c->sb, req, fd, &rerr, c->b, err);
	json_decref(req);
	return refusal(rc, &rerr, err);
}

int sbfile_watch_ready(int fd, int timeout_ms)
{
	return relay_wait(fd, timeout_ms);
}

int sbfile_watch_next(int fd, json_t **events, struct cell_error *err)
{
	return relay_watch_next(fd, events, err);
}
