/* E2B's snapshots and forks on cell's snapshots (snapshots.c): createSnapshot is a capture
 * of the sandbox's writable layer (a running sandbox frozen for the copy, then thawed), a
 * snapshot is a template (Sandbox.create(snapshotId) makes a sandbox from it,
 * e2b_sandboxes.c), deleteSnapshot is DELETE /templates/{id}; a fork is a capture, the
 * creates from it, and the capture's removal. A sandbox from a snapshot starts fresh on
 * the copied disk: cell keeps no memory image, so no process of the source runs in it
 * (celld(8), E2B API). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "create_spec.h"
#include "e2b.h"
#include "e2b_templates.h"
#include "http/errors.h"
#include "fields.h"
#include "images.h"
#include "lifecycle.h"
#include "cell/log.h"
#include "registry.h"
#include "sandbox.h"
#include "snapshots.h"

#define FORKS_MAX	     8 /* sandboxes one fork request makes */
#define LIST_LIMIT_MAX	     100
#define FORK_TIMEOUT_DEFAULT 300
#define FORK_TIMEOUT_MAX     (10LL * 365 * 24 * 3600)

/* E2B's SnapshotInfo: snapshotID (what Sandbox.create takes), names (its name, if any). */
static json_t *snapshot_info(json_t *meta)
{
	json_t *names = json_array();
	json_t *name = json_object_get(meta, "name");
	if (names && json_is_string(name))
		json_array_append(names, name);
	return json_pack("{s:O, s:o*}", "snapshotID", json_object_get(meta, "id"), "names", names);
}

/* ---- POST /sandboxes/{id}/snapshots {"name"?} ---- */

int e2b_snapshot_create(struct http_req *r)
{
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	const char *name;
	struct cell_error err = {0};
	if (snapshot_request_name(body, &name, &err) < 0) {
		json_decref(body);
		return e2b_error(r, 400, "%s", err.msg);
	}
	struct sandbox *sb = e2b_find_sandbox(r);
	if (!sb) {
		json_decref(body);
		return 0;
	}
	json_t *meta = NULL;
	int rc = snapshot_take(sb, name, http_principal(r), &meta, &err);
	sandbox_unref(sb);
	json_decref(body);
	if (rc < 0)
		return e2b_change_failed(r, rc, &err);
	json_t *o = snapshot_info(meta);
	json_decref(meta);
	return o ? http_json(r, 201, o) : http_no_memory(r);
}

/* ---- GET /snapshots?sandboxID&name&limit&nextToken ---- */

struct snapshot_query {
	const char *sandbox_id, *name;
	int64_t limit;
	struct e2b_page_token token; /* the page starts after it (createdAt, id) */
};

static int parse_snapshot_query(struct http_req *r, struct snapshot_query *q)
{
	*q = (struct snapshot_query){.limit = LIST_LIMIT_MAX};
	q->sandbox_id = http_query(r, "sandboxID");
	q->name = http_query(r, "name");
	const char *limit = http_query(r, "limit"), *token = http_query(r, "nextToken");
	if (limit && parse_int64(limit, 1, LIST_LIMIT_MAX, &q->limit) < 0)
		return e2b_error(r, 400, "limit must be between 1 and %d", LIST_LIMIT_MAX), -EINVAL;
	if (token && e2b_page_token_parse(token, &q->token) < 0)
		return e2b_error(r, 400, "nextToken is not one this server gave"), -EINVAL;
	return 0;
}

/* Whether snapshot m is on the page q asks for: after its token, of its sandbox, named
 * as it asks (by name or id). */
static bool snapshot_selected(json_t *m, const struct snapshot_query *q)
{
	const char *id = json_string_value(json_object_get(m, "id"));
	const char *sid = json_string_value(json_object_get(m, "sandboxId"));
	const char *name = json_string_value(json_object_get(m, "name"));
	json_int_t at = json_integer_value(json_object_get(m, "createdAt"));
	if (q->token.set && e2b_page_token_cmp(&q->token, at, id) <= 0)
		return false;
	if (q->sandbox_id && (!sid || strcmp(sid, q->sandbox_id)))
		return false;
	return !q->name || !strcmp(id, q->name) || (name && !strcmp(name, q->name));
}

int e2b_snapshot_list(struct http_req *r)
{
	struct snapshot_query q;
	if (parse_snapshot_query(r, &q) < 0)
		return 0;
	json_t *all;
	struct cell_error err = {0};
	if (snapshot_list(http_principal(r), &all, &err) < 0)
		return http_internal(r, &err);
	json_t *items = json_array();
	json_t *m, *last = NULL;
	size_t i;
	bool more = false;
	json_array_foreach(all, i, m) /* oldest first, as snapshot_list sorts them */
	{
		if (!items || !snapshot_selected(m, &q))
			continue;
		if ((int64_t)json_array_size(items) == q.limit) {
			more = true;
			break;
		}
		json_array_append_new(items, snapshot_info(m));
		last = m;
	}
	char token[E2B_PAGE_TOKEN_MAX];
	if (more && last)
		e2b_page_token_format(token, json_integer_value(json_object_get(last, "createdAt")),
				      json_string_value(json_object_get(last, "id")));
	json_decref(all);
	if (!items)
		return http_no_memory(r);
	return e2b_page(r, items, more && last ? token : NULL);
}

/* ---- GET /templates/aliases/{alias}: Template.exists ---- */

#define ALIAS_MAX 128 /* as a create's templateID */

/* The template a create would take for alias, in a create's order (e2b_create_spec): an
 * id the map lists (the operator's catalogue, pulled by the create when the host lacks its
 * image); else an image of that name the caller may use without a pull (unless the map
 * refuses unlisted ids); else one of the caller's own snapshots, by id or name. Without a
 * pull: a registry is never asked whether an image exists. 200 {templateID, public}, else
 * 404; never E2B's 403 (another team's template), which the SDK reads as "exists": another
 * tenant's snapshot is absent here, as every lookup of it is. */
int e2b_template_alias(struct http_req *r)
{
	const char *alias = http_param(r, 0);
	size_t n = strlen(alias);
	bool printable = n && n <= ALIAS_MAX;
	for (size_t i = 0; printable && i < n; i++)
		printable = (unsigned char)alias[i] >= 0x20 && alias[i] != 0x7f;
	if (!printable)
		return e2b_error(r, 400, "alias must be 1-%d bytes without control characters",
				 ALIAS_MAX);
	struct create_spec spec = {.owner = http_principal(r)};
	const char *image = NULL;
	bool found = e2b_template_listed(alias);
	if (!found && e2b_template_image(alias, &image) == 0) {
		spec.image = image;
		found = create_image_present(&spec);
	}
	if (found)
		return http_json(r, 200, json_pack("{s:s, s:b}", "templateID", alias, "public", 1));
	json_t *meta = NULL;
	struct cell_error err = {0};
	int rc = snapshot_find(spec.owner, alias, &meta, &err);
	if (rc == -ENOENT)
		return e2b_error(r, 404, "template '%.128s' not found", alias);
	if (rc < 0)
		return http_internal(r, &err);
	json_t *body =
	    json_pack("{s:O, s:b}", "templateID", json_object_get(meta, "id"), "public", 0);
	json_decref(meta);
	return http_json(r, 200, body);
}

/* ---- DELETE /templates/{id}: a snapshot (cell's images are the operator's) ---- */

int e2b_template_delete(struct http_req *r)
{
	const char *id = http_param(r, 0);
	struct cell_error err = {0};
	int rc = snapshot_delete(http_principal(r), id, &err);
	if (rc == 0)
		return http_empty(r, 204);
	if (rc == -EBUSY)
		return e2b_error(r, 409, "%s", err.msg);
	if (rc != -ENOENT)
		return http_internal(r, &err);
	char rootfs[4096];
	const char *image = id;
	struct cell_error ierr = {0};
	if (e2b_template_listed(id) || (e2b_template_image(id, &image) == 0 &&
					image_resolve(image, rootfs, sizeof(rootfs), &ierr) == 0))
		return e2b_error(r, 400,
				 "template '%.128s' is an image of this host: cell's images are "
				 "managed by its operator, only snapshots are deleted here",
				 id);
	return e2b_error(r, 404, "template '%.128s' not found", id);
}

/* ---- POST /sandboxes/{id}/fork {"timeout"?, "count"?} ---- */

static int parse_fork(json_t *body, int64_t *timeout, int64_t *count, struct cell_error *err)
{
	const char *k;
	json_t *v;
	json_object_foreach(body, k, v)
	{
		if (strcmp(k, "timeout") && strcmp(k, "count"))
			return field_fail(err, "%.64s is not a field of a fork request", k);
	}
	*timeout = FORK_TIMEOUT_DEFAULT;
	*count = 1;
	if (field_int(body, "timeout", "timeout", 1, FORK_TIMEOUT_MAX, timeout, err) < 0 ||
	    field_int(body, "count", "count", 1, FORKS_MAX, count, err) < 0)
		return -EINVAL;
	return 0;
}

/* What a fork keeps of its source beside the snapshot's record: E2B's own choices. */
struct fork_source {
	bool manual_resume, public_ports;
	enum sbx_on_timeout on_timeout;
};

/* One fork from the snapshot snap_id: {"sandbox": Sandbox} or {"error": {code, message}}
 * (E2B's SandboxForkResult). */
static json_t *fork_one(struct http_req *r, const char *snap_id, int64_t timeout,
			const struct fork_source *src)
{
	json_t *body =
	    json_pack("{s:s, s:I}", "templateID", snap_id, "timeout", (json_int_t)timeout);
	struct create_spec spec = {.owner = http_principal(r)};
	struct cell_error err = {0};
	const char *tid = NULL;
	int rc =
	    body ? e2b_create_spec(body, true, &spec, &tid, &err) : cell_err(&err, ENOMEM, "fork");
	struct sandbox *sb = NULL;
	bool created = false;
	if (rc == 0) {
		spec.manual_resume = src->manual_resume;
		spec.public_ports = src->public_ports;
		spec.timers.on_timeout = src->on_timeout;
		rc = lifecycle_create(&spec, &sb, &created, &err);
	}
	create_spec_free(&spec);
	json_decref(body);
	if (rc < 0)
		return json_pack("{s:{s:i, s:s}}", "error", "code",
				 (int)errors_lookup(err.code)->status, "message", err.msg);
	json_t *o = e2b_sandbox_json(sb, NULL);
	sandbox_unref(sb);
	return o ? json_pack("{s:o}", "sandbox", o) : NULL;
}

int e2b_sandbox_fork(struct http_req *r)
{
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	int64_t timeout, count;
	struct cell_error err = {0};
	int rc = parse_fork(body, &timeout, &count, &err);
	json_decref(body);
	if (rc < 0)
		return e2b_error(r, 400, "%s", err.msg);
	struct sandbox *sb = e2b_find_sandbox(r);
	if (!sb)
		return 0;
	registry_lock();
	struct fork_source src = {sb->manual_resume, sb->public_ports, sb->timers.on_timeout};
	registry_unlock();
	json_t *meta = NULL;
	rc = snapshot_take(sb, NULL, http_principal(r), &meta, &err);
	char source[CELL_ID_MAX + 1];
	snprintf(source, sizeof(source), "%s", sb->id);
	sandbox_unref(sb);
	if (rc < 0)
		return e2b_change_failed(r, rc, &err);
	char snap_id[CELL_ID_MAX + 1];
	snprintf(snap_id, sizeof(snap_id), "%s", json_string_value(json_object_get(meta, "id")));
	json_decref(meta);
	json_t *results = json_array();
	for (int64_t i = 0; results && i < count; i++)
		if (json_array_append_new(results, fork_one(r, snap_id, timeout, &src)) < 0) {
			json_decref(results);
			results = NULL;
		}
	/* The forks have their copies: the capture is no one's. */
	if (snapshot_delete(http_principal(r), snap_id, &err) < 0)
		log_warn("fork of %s: removing its snapshot %s: %s", source, snap_id, err.msg);
	log_info("sandbox %s forked %lld times through snapshot %s", source, (long long)count,
		 snap_id);
	return results ? http_json(r, 201, results) : http_no_memory(r);
}
