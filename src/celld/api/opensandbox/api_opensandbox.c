/* The OpenSandbox API as a listener serves it: its routes, its key, its error body. */
#include <errno.h>
#include <string.h>

#include "api.h"
#include "http/head.h"
#include "cell/cleanup.h"
#include "cell/id.h"
#include "config.h"
#include "credentials.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/keys.h"
#include "http/router.h"
#include "tenancy.h"

#define KEY_HEADER CREDENTIALS_OPENSANDBOX_KEY

#define EXECD "sandboxes/{id}/proxy/44772/"
/* OpenSandbox's egress sidecar port: cell answers its /policy itself (api_egress.c). */
#define EGRESS "sandboxes/{id}/proxy/18080/"

#define SHORT	 ROUTE_SHORT
#define STREAMED ROUTE_STREAMED
#define NONE	 ROUTE_BODY_NONE
#define JSON	 ROUTE_BODY_JSON
#define STREAM	 ROUTE_BODY_STREAM

/* Below the optional /v1. */
static const struct route routes[] = {
    {"POST", "sandboxes", JSON, SHORT, api_sandbox_create, NULL, NULL},
    {"GET", "sandboxes", NONE, STREAMED, api_sandbox_list, NULL, NULL},
    {"GET", "sandboxes/{id}", NONE, SHORT, api_sandbox_get, NULL, NULL},
    {"DELETE", "sandboxes/{id}", NONE, SHORT, api_sandbox_delete, NULL, NULL},
    {"GET", "sandboxes/{id}/endpoints/{port}", NONE, SHORT, api_sandbox_endpoint, NULL, NULL},
    {"GET", "sandboxes/{id}/inspect", NONE, SHORT, api_sandbox_inspect, NULL, NULL},
    {"GET", "sandboxes/{id}/top", NONE, SHORT, api_sandbox_top, NULL, NULL},
    {"POST", "sandboxes/{id}/renew-expiration", JSON, SHORT, api_sandbox_renew, NULL, NULL},
    {"PATCH", "sandboxes/{id}/metadata", JSON, SHORT, api_sandbox_patch_metadata, NULL, NULL},
    {"POST", "sandboxes/{id}/pause", NONE, SHORT, api_sandbox_pause, NULL, NULL},
    {"POST", "sandboxes/{id}/resume", NONE, SHORT, api_sandbox_resume, NULL, NULL},
    {"POST", "sandboxes/{id}/stop", NONE, SHORT, api_sandbox_stop, NULL, NULL},
    {"POST", "sandboxes/{id}/keepalive", NONE, SHORT, api_sandbox_keepalive, NULL, NULL},
    {"GET", "sandboxes/{id}/events", NONE, STREAMED, api_sandbox_events, NULL, NULL},
    {"GET", "sandboxes/{id}/logs", NONE, STREAMED, api_sandbox_logs, NULL, NULL},
    {"GET", "sandboxes/{id}/commands", NONE, SHORT, api_sandbox_commands, NULL, NULL},
    {"GET", "audit", NONE, SHORT, api_audit, NULL, NULL},
    {"POST", "sandboxes/{id}/snapshots", JSON, SHORT, api_snapshot_create, NULL, NULL},
    {"GET", "snapshots", NONE, SHORT, api_snapshot_list, NULL, NULL},
    {"GET", "snapshots/{id}", NONE, SHORT, api_snapshot_get, NULL, NULL},
    {"DELETE", "snapshots/{id}", NONE, SHORT, api_snapshot_delete, NULL, NULL},
    {"POST", "metrics/events", JSON, SHORT, api_metrics_event, NULL, NULL},
    {"GET", "info", NONE, SHORT, api_info, NULL, NULL},
    /* The operator's: the Unix socket only, a 404 on TCP (api_operator.c). */
    {"GET", "metrics", NONE, SHORT, api_operator_metrics, NULL, NULL},
    {"GET", "health", NONE, SHORT, api_operator_health, NULL, NULL},
    {"GET", "stats", NONE, SHORT, api_stats, NULL, NULL},
    {"GET", "volumes", NONE, SHORT, api_volume_list, NULL, NULL},
    {"GET", "volumes/{name}", NONE, SHORT, api_volume_get, NULL, NULL},
    {"DELETE", "volumes/{name}", NONE, SHORT, api_volume_delete, NULL, NULL},
    {"GET", "images", NONE, SHORT, api_image_list, NULL, NULL},
    {"POST", "images/pull", JSON, STREAMED, api_image_pull, NULL, NULL},
    {"POST", "images/prune", NONE, SHORT, api_image_prune, NULL, NULL},
    {"POST", "images/tag", JSON, SHORT, api_image_tag, NULL, NULL},
    {"GET", "images/events", NONE, STREAMED, api_image_events, NULL, NULL},
    {"GET", "images/*", NONE, SHORT, api_image_get, NULL, NULL},
    {"DELETE", "images/*", NONE, SHORT, api_image_delete, NULL, NULL},
    {"POST", "skills", STREAM, STREAMED, api_skill_add, api_skill_add_begin, api_skill_add_data},
    {"GET", "skills", NONE, SHORT, api_skill_list, NULL, NULL},
    {"GET", "skills/{name}", NONE, SHORT, api_skill_get, NULL, NULL},
    {"DELETE", "skills/{name}", NONE, SHORT, api_skill_delete, NULL, NULL},
    {"DELETE", "skills/{name}/{version}", NONE, SHORT, api_skill_delete_version, NULL, NULL},
    {"POST", "images/import", STREAM, STREAMED | ROUTE_ARCHIVE, api_image_import,
     api_image_import_begin, api_image_import_data},
    {"POST", "sandboxes/{id}/commit", JSON, SHORT, api_sandbox_commit, NULL, NULL},
    {"POST", "snapshots/{id}/commit", JSON, SHORT, api_snapshot_commit, NULL, NULL},
    {"GET", EXECD "ping", NONE, SHORT, api_execd_ping, NULL, NULL},
    {"POST", EXECD "command", JSON, STREAMED, api_execd_command, NULL, NULL},
    {"DELETE", EXECD "command", NONE, SHORT, api_execd_interrupt, NULL, NULL},
    {"GET", EXECD "command/status/{cmd}", NONE, SHORT, api_execd_status, NULL, NULL},
    {"GET", EXECD "command/{cmd}/logs", NONE, STREAMED, api_execd_logs, NULL, NULL},
    /* cell's extension: the raw body (read whole, as a JSON one) is the command's stdin. */
    {"POST", EXECD "command/{cmd}/stdin", JSON, SHORT, api_execd_stdin, NULL, NULL},
    {"POST", EXECD "pty", JSON, SHORT, api_pty_create, NULL, NULL},
    {"GET", EXECD "pty/{cmd}", NONE, SHORT, api_pty_status, NULL, NULL},
    {"DELETE", EXECD "pty/{cmd}", NONE, SHORT, api_pty_delete, NULL, NULL},
    {"GET", EXECD "pty/{cmd}/ws", NONE, STREAMED, api_pty_ws, NULL, NULL},
    {"POST", EXECD "session", JSON, SHORT, api_execd_session_create, NULL, NULL},
    {"POST", EXECD "session/{cmd}/run", JSON, STREAMED, api_execd_session_run, NULL, NULL},
    {"DELETE", EXECD "session/{cmd}", NONE, SHORT, api_execd_session_delete, NULL, NULL},
    {"POST", EXECD "files/upload", STREAM, STREAMED, api_files_upload, api_files_upload_begin,
     api_files_upload_data},
    {"GET", EXECD "files/download", NONE, STREAMED, api_files_download, NULL, NULL},
    {"GET", EXECD "files/info", NONE, SHORT, api_files_info, NULL, NULL},
    {"DELETE", EXECD "files", NONE, SHORT, api_files_delete, NULL, NULL},
    {"POST", EXECD "directories", JSON, SHORT, api_dirs_create, NULL, NULL},
    {"DELETE", EXECD "directories", NONE, SHORT, api_dirs_delete, NULL, NULL},
    {"GET", EXECD "directories/list", NONE, SHORT, api_dirs_list, NULL, NULL},
    {"GET", EXECD "files/search", NONE, SHORT, api_files_search, NULL, NULL},
    {"POST", EXECD "files/mv", JSON, SHORT, api_files_move, NULL, NULL},
    {"POST", EXECD "files/permissions", JSON, SHORT, api_files_permissions, NULL, NULL},
    {"POST", EXECD "files/replace", JSON, SHORT, api_files_replace, NULL, NULL},
    {"POST", EXECD "code/context", JSON, SHORT, api_code_context_create, NULL, NULL},
    {"GET", EXECD "code/contexts", NONE, SHORT, api_code_contexts_list, NULL, NULL},
    {"DELETE", EXECD "code/contexts", NONE, SHORT, api_code_contexts_delete, NULL, NULL},
    {"GET", EXECD "code/contexts/{cmd}", NONE, SHORT, api_code_context_get, NULL, NULL},
    {"DELETE", EXECD "code/contexts/{cmd}", NONE, SHORT, api_code_context_delete, NULL, NULL},
    {"POST", EXECD "code", JSON, STREAMED, api_code_run, NULL, NULL},
    {"DELETE", EXECD "code", NONE, SHORT, api_code_interrupt, NULL, NULL},
    {"GET", EXECD "metrics", NONE, SHORT, api_execd_metrics, NULL, NULL},
    {"GET", EXECD "metrics/watch", NONE, STREAMED, api_execd_metrics_watch, NULL, NULL},
    {"GET", EGRESS "policy", NONE, SHORT, api_egress_get, NULL, NULL},
    {"PATCH", EGRESS "policy", JSON, SHORT, api_egress_patch, NULL, NULL},
    {"DELETE", EGRESS "policy", JSON, SHORT, api_egress_delete, NULL, NULL},
    {"POST", "sandboxes/{id}/ports/{port}/tunnel", NONE, SHORT, api_tunnel, NULL, NULL},
    /* Last: any other port, any method, any path below it (a path the routes above know
     * with another method stays their 405). */
    {"*", "sandboxes/{id}/proxy/{port}/*", STREAM, STREAMED, api_proxy, api_proxy_begin,
     api_proxy_data},
};

/* An API key (its tenant's), or (the port proxy of an app's port only) that port's preview
 * token (that sandbox alone). */
static bool authorized(struct http_req *r)
{
	const char *key = http_header(r, KEY_HEADER);
	struct adm_principal *who = keys_match(key, key ? strlen(key) : 0);
	char id[CELL_ID_MAX + 1];
	if (who)
		http_grant(r, who, NULL);
	else if (api_preview_authorized(r, id))
		tenancy_grant_scoped(r, id, true); /* handed to browsers */
	else
		return false;
	return true;
}

/* Accepts at least what the HTTP server's own check (authorized) accepts: the header's
 * name in any case, blanks around the value. */
static bool head_authorized(const char *head, size_t len, const struct peer_key *client)
{
	(void)client; /* the same check from every client */
	const char *v;
	size_t vlen;
	return (head_value(head, len, KEY_HEADER, &v, &vlen) && keys_match(v, vlen)) ||
	       api_preview_head_authorized(head, len);
}

static int unrouted(struct http_req *r, enum router_result res, const struct router_match *m)
{
	if (res == ROUTER_BAD_PATH)
		return http_error(r, 400, "INVALID_ARGUMENT", "malformed request path");
	if (res == ROUTER_BAD_ID)
		return http_error(r, 400, "INVALID_ID",
				  "invalid %s '%.80s': use 1-64 characters of [a-z0-9-]",
				  strcmp(m->bad_name, "id")			     ? "command id"
				  : !strncmp(http_raw_path(r), "/v1/snapshots/", 14) ? "snapshot id"
										     : "sandbox id",
				  m->params[m->bad_param]);
	/* /sandboxes/<not an id>/...: the id is what is wrong, whatever follows it. */
	char buf[ROUTER_PATH_MAX];
	char *segs[ROUTER_SEGS_MAX];
	int n = router_split(&api_opensandbox.routes, http_raw_path(r), buf, sizeof(buf), segs);
	if (n >= 2 && !strcmp(segs[0], "sandboxes") && !cell_id_valid(segs[1]))
		return http_error(r, 400, "INVALID_ID",
				  "invalid sandbox id '%.80s': use 1-64 characters of [a-z0-9-]",
				  segs[1]);
	if (res == ROUTER_NO_METHOD)
		return http_error(r, 405, "METHOD_NOT_ALLOWED", "%s is not allowed on this path",
				  http_method(r));
	return http_error(r, 404, "NOT_FOUND", "no such endpoint");
}

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* A route's latency group, from its pattern: a handful of fixed names. */
static enum metric_group route_group(const struct route *route)
{
	if (!route)
		return METRIC_GROUP_OTHER;
	const char *p = route->pattern;
	if (starts(p, EXECD))
		return starts(p + strlen(EXECD), "files") ||
			       starts(p + strlen(EXECD), "directories")
			   ? METRIC_GROUP_FILES
			   : METRIC_GROUP_EXECD;
	if (starts(p, EGRESS))
		return METRIC_GROUP_LIFECYCLE;
	if (starts(p, "sandboxes/{id}/proxy/") || starts(p, "sandboxes/{id}/ports/"))
		return METRIC_GROUP_PROXY;
	if (starts(p, "images") || starts(p, "skills"))
		return METRIC_GROUP_IMAGES;
	if (!strcmp(p, "metrics") || !strcmp(p, "health") || !strcmp(p, "info") ||
	    !strcmp(p, "audit"))
		return METRIC_GROUP_OPERATOR;
	return METRIC_GROUP_LIFECYCLE;
}

const struct http_api api_opensandbox = {
    .name = "OpenSandbox",
    .routes = {routes, CELL_ARRAY_SIZE(routes), "v1"},
    .authorized = authorized,
    .head_authorized = head_authorized,
    .key_header = KEY_HEADER,
    .unauthorized_message = "missing or wrong " KEY_HEADER " header (or, for a sandbox's "
			    "port, its preview token)",
    .error_body = errors_body_named,
    .unrouted = unrouted,
    .reroute = api_preview_reroute,
    .route_group = route_group,
};
