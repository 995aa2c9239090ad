/* GET /v1/stats (the counters of many sandboxes in one request, for `cell stats`) and
 * GET /v1/sandboxes/{id}/top (the processes of one). Both only look: neither counts as a
 * use of a sandbox, wakes it, or restarts its idle timer. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "api.h"
#include "cell/id.h"
#include "http/http.h"
#include "registry.h"
#include "sandbox.h"
#include "sandbox_select.h"
#include "sandbox_stats.h"
#include "sandbox_top.h"
#include "tenancy.h"
#include "timefmt.h"

/* The ids one request may name; without any, it asks for every sandbox it sees. */
#define STATS_IDS_MAX 1024

static bool visible_locked(const struct sandbox *sb, void *cls)
{
	return tenancy_sees(cls, sb->owner);
}

/* The sandboxes the query's ids name, each referenced, into page; every id checked before
 * any is read. -1 once answered. */
static int named_sandboxes(struct http_req *r, const char **ids, size_t n,
			   struct sandbox_page *page)
{
	page->v = calloc(n, sizeof(*page->v));
	if (!page->v)
		return http_no_memory(r), -1;
	for (size_t i = 0; i < n; i++) {
		if (!cell_id_valid(ids[i])) {
			sandbox_page_free(page);
			return http_error(r, 400, "INVALID_ARGUMENT",
					  "id '%.64s' is not a sandbox id", ids[i]),
			       -1;
		}
		struct sandbox *sb = tenancy_sandbox(r, ids[i]);
		if (!sb) {
			sandbox_page_free(page);
			return http_error(r, 404, "SANDBOX_NOT_FOUND", "sandbox %s not found",
					  ids[i]),
			       -1;
		}
		page->v[page->n++] = sb;
	}
	page->total = n;
	return 0;
}

int api_stats(struct http_req *r)
{
	const char *ids[STATS_IDS_MAX + 1];
	size_t n = http_query_all(r, "id", ids, STATS_IDS_MAX + 1);
	if (n > STATS_IDS_MAX)
		return http_error(r, 400, "INVALID_ARGUMENT", "id: at most %d ids in one request",
				  STATS_IDS_MAX);
	struct sandbox_page page = {0};
	if (n) {
		if (named_sandboxes(r, ids, n, &page) < 0)
			return 0;
	} else if (sandbox_select(visible_locked, http_principal(r), false, 0, SIZE_MAX, &page) <
		   0) {
		return http_no_memory(r);
	}
	json_t *list = json_array();
	for (size_t i = 0; i < page.n && list; i++) {
		json_t *one = sandbox_stats_json(page.v[i]);
		if (!one || json_array_append_new(list, one) < 0) {
			json_decref(list);
			list = NULL;
		}
	}
	sandbox_page_free(&page);
	json_t *o = list ? json_pack("{s:I, s:o}", "timestamp", (json_int_t)celld_now_ms(),
				     "sandboxes", list)
			 : NULL;
	return o ? http_json(r, 200, o) : http_no_memory(r);
}

int api_sandbox_top(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	registry_lock();
	enum sbx_state state = sb->state;
	registry_unlock();
	if (state != SBX_RUNNING && state != SBX_PAUSED) {
		http_error(r, 409, "SANDBOX_NOT_RUNNING", "sandbox %s is %s: it has no processes",
			   sb->id, sandbox_state_name(state));
		sandbox_unref(sb);
		return 0;
	}
	json_t *o = NULL;
	struct cell_error err = {0};
	int rc = sandbox_top_json(sb, &o, &err);
	sandbox_unref(sb);
	if (rc == -ENOENT)
		return http_error(r, 409, "SANDBOX_NOT_RUNNING", "%s", err.msg);
	if (rc < 0)
		return http_internal(r, &err);
	return http_json(r, 200, o);
}
