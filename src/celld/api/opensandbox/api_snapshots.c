/* The OpenSandbox snapshot routes: POST /sandboxes/{id}/snapshots, GET /snapshots,
 * GET and DELETE /snapshots/{id}. A capture runs to its end before the answer, so a
 * snapshot is Ready when a client first sees it (snapshots.c); a create with snapshotId
 * is api_sandbox_create's. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "api.h"
#include "fields.h"
#include "http/http.h"
#include "registry.h"
#include "sandbox.h"
#include "snapshots.h"

#define PAGE_SIZE_MAX 200

static const char *const snapshot_states[] = {"Creating", "Ready", "Failed", "Deleting"};

/* {name?}: nothing else (the spec's additionalProperties: false). */
static int parse_body(struct http_req *r, json_t **body, const char **name)
{
	*body = NULL;
	*name = NULL;
	size_t len = 0;
	http_body(r, &len);
	if (!len)
		return 0;
	if (http_json_body(r, body) < 0)
		return -EINVAL;
	struct cell_error err = {0};
	if (snapshot_request_name(*body, name, &err) < 0)
		return http_internal(r, &err), -EINVAL;
	return 0;
}

int api_snapshot_create(struct http_req *r)
{
	json_t *body;
	const char *name;
	if (parse_body(r, &body, &name) < 0) {
		json_decref(body);
		return 0;
	}
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb) {
		json_decref(body);
		return 0;
	}
	json_t *meta = NULL;
	struct cell_error err = {0};
	int rc = snapshot_take(sb, name, http_principal(r), &meta, &err);
	json_decref(body);
	sandbox_unref(sb);
	if (rc == -ENOENT)
		return http_error(r, 404, "SANDBOX_NOT_FOUND", "%s", err.msg);
	if (rc < 0)
		return http_internal(r, &err);
	json_t *o = snapshot_json(meta);
	json_decref(meta);
	return o ? http_json(r, 202, o) : http_no_memory(r);
}

static bool state_matches(const char **want, size_t n)
{
	if (!n)
		return true;
	for (size_t i = 0; i < n; i++)
		if (!strcasecmp(want[i], "Ready"))
			return true;
	return false;
}

int api_snapshot_list(struct http_req *r)
{
	const char *states[8];
	size_t n_states = http_query_all(r, "state", states, 8);
	for (size_t i = 0; i < n_states; i++) {
		bool ok = false;
		for (size_t j = 0; j < 4; j++)
			ok = ok || !strcasecmp(states[i], snapshot_states[j]);
		if (!ok)
			return http_error(r, 400, "INVALID_ARGUMENT",
					  "state '%.32s' is not one of Creating, Ready, Failed, "
					  "Deleting",
					  states[i]);
	}
	int64_t page = 1, page_size = 20;
	const char *p = http_query(r, "page"), *ps = http_query(r, "pageSize");
	if (p && parse_int64(p, 1, INT_MAX, &page) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT", "page must be an integer >= 1");
	if (ps && parse_int64(ps, 1, PAGE_SIZE_MAX, &page_size) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT", "pageSize must be between 1 and %d",
				  PAGE_SIZE_MAX);
	const char *sandbox_id = http_query(r, "sandboxId");
	const char *name = http_query(r, "name");
	json_t *all;
	struct cell_error err = {0};
	if (snapshot_list(http_principal(r), &all, &err) < 0)
		return http_internal(r, &err);
	json_t *items = json_array();
	int64_t total = 0, first = (page - 1) * page_size;
	size_t i;
	json_t *m;
	bool every = state_matches(states, n_states);
	json_array_foreach(all, i, m)
	{
		const char *sid = json_string_value(json_object_get(m, "sandboxId"));
		const char *nm = json_string_value(json_object_get(m, "name"));
		if (!every || (sandbox_id && (!sid || strcmp(sid, sandbox_id))) ||
		    (name && (!nm || strcmp(nm, name))))
			continue;
		if (total >= first && total < first + page_size && items)
			json_array_append_new(items, snapshot_json(m));
		total++;
	}
	json_decref(all);
	int64_t pages = (total + page_size - 1) / page_size;
	json_t *o = json_pack("{s:o, s:{s:I, s:I, s:I, s:I, s:b}}", "items", items, "pagination",
			      "page", (json_int_t)page, "pageSize", (json_int_t)page_size,
			      "totalItems", (json_int_t)total, "totalPages", (json_int_t)pages,
			      "hasNextPage", page < pages);
	return o ? http_json(r, 200, o) : http_no_memory(r);
}

int api_snapshot_get(struct http_req *r)
{
	const char *id = http_param(r, 0);
	json_t *meta;
	struct cell_error err = {0};
	int rc = snapshot_get(http_principal(r), id ? id : "", &meta, &err);
	if (rc == -ENOENT)
		return http_error(r, 404, "SNAPSHOT_NOT_FOUND", "%s", err.msg);
	if (rc < 0)
		return http_internal(r, &err);
	json_t *o = snapshot_json(meta);
	json_decref(meta);
	return o ? http_json(r, 200, o) : http_no_memory(r);
}

int api_snapshot_delete(struct http_req *r)
{
	const char *id = http_param(r, 0);
	struct cell_error err = {0};
	int rc = snapshot_delete(http_principal(r), id ? id : "", &err);
	if (rc == -ENOENT)
		return http_error(r, 404, "SNAPSHOT_NOT_FOUND", "%s", err.msg);
	if (rc < 0)
		return http_internal(r, &err);
	return http_empty(r, 204);
}
