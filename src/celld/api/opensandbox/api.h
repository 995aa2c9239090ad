/* The OpenSandbox API (API.md): its route table, its auth (OPEN-SANDBOX-API-KEY), its error
 * body {"code": "...", "message": "..."} (api_opensandbox.c), and the route handlers of
 * api_sandboxes.c, api_execd.c, api_pty.c, api_files.c, api_metrics.c, api_egress.c and
 * api_proxy.c. Handlers answer on r and return 0; they map failures through the errno table
 * (http_fail, http_internal).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include <jansson.h>

#include "cell/id.h"
#include "api/api_proxy.h"
#include "http/http.h"

struct sandbox;
struct cell_quota_usage;

extern const struct http_api api_opensandbox;

/* ---- api.c: helpers of every route group ---- */

/* Resolve {id} (param 0) to a referenced sandbox; answers 404 SANDBOX_NOT_FOUND itself. */
struct sandbox *api_find_sandbox(struct http_req *r);
/* api_find_sandbox for a call that uses the sandbox (a command's status, logs, stdin or
 * interrupt): its idle timer starts again. Reading its record or metrics is not use. */
struct sandbox *api_used_sandbox(struct http_req *r);
/* {id} resolved to a referenced sandbox that can run things (Running, not busy; a Paused
 * one is resumed first), or NULL with 404/409 answered. */
struct sandbox *api_running_sandbox(struct http_req *r);

/* ---- api_sandboxes.c: the lifecycle under /v1 ---- */

int api_sandbox_create(struct http_req *r);
int api_sandbox_list(struct http_req *r);
int api_sandbox_get(struct http_req *r);
int api_sandbox_delete(struct http_req *r);
int api_sandbox_endpoint(struct http_req *r);
int api_sandbox_inspect(struct http_req *r);
int api_sandbox_renew(struct http_req *r);
int api_sandbox_patch_metadata(struct http_req *r);
int api_sandbox_pause(struct http_req *r);
int api_sandbox_resume(struct http_req *r);
/* cell's own: stop (→ Stopped, disk kept) and keepalive (the idle timer starts again). */
int api_sandbox_stop(struct http_req *r);
int api_sandbox_keepalive(struct http_req *r);
int api_metrics_event(struct http_req *r);

/* api_snapshots.c */
int api_snapshot_create(struct http_req *r);
int api_snapshot_list(struct http_req *r);
int api_snapshot_get(struct http_req *r);
int api_snapshot_delete(struct http_req *r);
int api_info(struct http_req *r);
/* api_operator.c: GET /metrics (Prometheus' text format) and GET /health, on the Unix
 * socket only (a 404 on TCP, as an unknown route). */
int api_operator_metrics(struct http_req *r);
int api_operator_health(struct http_req *r);
/* api_stats.c: GET /stats (the counters of the named sandboxes, or of every one the caller
 * sees) and GET /sandboxes/{id}/top (its processes). */
int api_stats(struct http_req *r);
int api_sandbox_top(struct http_req *r);

/* ---- api_volumes.c: named volumes (cell's own) ---- */

int api_volume_list(struct http_req *r);
int api_volume_get(struct http_req *r);
int api_volume_delete(struct http_req *r);

/* ---- api_images.c: images (cell's own) ---- */

int api_image_list(struct http_req *r);
int api_image_get(struct http_req *r);
int api_image_delete(struct http_req *r);
int api_image_pull(struct http_req *r);
int api_image_prune(struct http_req *r);
int api_image_tag(struct http_req *r);

/* ---- api_skills.c: the skills registry (cell's own) ---- */

int api_skill_add(struct http_req *r);
int api_skill_add_begin(struct http_req *r);
int api_skill_add_data(struct http_req *r, const char *data, size_t len);
int api_skill_list(struct http_req *r);
int api_skill_get(struct http_req *r);
int api_skill_delete(struct http_req *r);
int api_skill_delete_version(struct http_req *r);

/* ---- api_image_import.c: images made here (cell's own) ---- */

int api_image_import(struct http_req *r);
int api_image_import_begin(struct http_req *r);
int api_image_import_data(struct http_req *r, const char *data, size_t len);
int api_sandbox_commit(struct http_req *r);
int api_snapshot_commit(struct http_req *r);

/* ---- api_execd.c: execd's ping and commands ---- */

int api_execd_ping(struct http_req *r);
int api_execd_command(struct http_req *r);
int api_execd_status(struct http_req *r);
int api_execd_logs(struct http_req *r);
int api_execd_interrupt(struct http_req *r);
int api_execd_session_create(struct http_req *r);
int api_execd_session_run(struct http_req *r);
int api_execd_session_delete(struct http_req *r);
/* cell's extension: the stdin of a command started with "stdin": true. */
int api_execd_stdin(struct http_req *r);

/* ---- api_pty.c: execd's terminals, /pty and its WebSocket ---- */

int api_pty_create(struct http_req *r);
int api_pty_status(struct http_req *r);
int api_pty_delete(struct http_req *r);
int api_pty_ws(struct http_req *r);

/* ---- api_files.c: execd's files ---- */

/* Uploads stream: begin (after headers; may answer early), data per chunk, end. */
int api_files_upload_begin(struct http_req *r);
int api_files_upload_data(struct http_req *r, const char *data, size_t len);
int api_files_upload(struct http_req *r);
int api_files_download(struct http_req *r);
int api_files_info(struct http_req *r);
int api_files_delete(struct http_req *r);
int api_dirs_create(struct http_req *r);
int api_dirs_delete(struct http_req *r);
int api_dirs_list(struct http_req *r);
int api_files_search(struct http_req *r);
int api_files_move(struct http_req *r);
int api_files_permissions(struct http_req *r);
int api_files_replace(struct http_req *r);

/* ---- api_metrics.c: execd GET /metrics and /metrics/watch ---- */

int api_execd_metrics(struct http_req *r);
int api_execd_metrics_watch(struct http_req *r);

/* ---- api_code.c: execd's code interpreter (/code, /code/context, /code/contexts) ---- */

int api_code_context_create(struct http_req *r);
int api_code_contexts_list(struct http_req *r);
int api_code_contexts_delete(struct http_req *r);
int api_code_context_get(struct http_req *r);
int api_code_context_delete(struct http_req *r);
int api_code_run(struct http_req *r);
int api_code_interrupt(struct http_req *r);

/* ---- api_egress.c: the egress API, /policy under the endpoint of port 18080 ---- */

int api_egress_get(struct http_req *r);
int api_egress_patch(struct http_req *r);
int api_egress_delete(struct http_req *r);

/* ---- api_preview.c: preview tokens and preview host names for the port proxy ---- */

/* The API's reroute hook: a Host "<port>-<id>.<--preview-domain>" becomes that sandbox's
 * port proxy; -1 when it answered (404 for a bad name under the domain). */
int api_preview_reroute(struct http_req *r);
/* Whether r (a TCP request without the API key) may pass: the port proxy of an app's port
 * with that port's preview token (header, cookie or query); id is then its sandbox's. */
bool api_preview_authorized(const struct http_req *r, char id[CELL_ID_MAX + 1]);
/* The same for the gate, from a first request's raw head. */
bool api_preview_head_authorized(const char *head, size_t len);
/* At the start of a proxied request to port of sandbox id: a token in the query is
 * answered here (302 to the URL without it, setting the cookie; 401 when it is wrong):
 * 1 when r was answered, 0 to proxy it. */
int api_preview_begin(struct http_req *r, const char *id, unsigned port);
/* The endpoint answer for an app's port: "endpoint" (host is the one the client used),
 * "headers" with the token (dying after the Unix second expires, when > 0), and cell's
 * "url" a browser opens. NULL when out of memory or the secret is not loaded. */
json_t *api_preview_endpoint(struct http_req *r, const char *id, unsigned port, const char *host,
			     uint64_t expires);

/* ---- api_audit.c: a sandbox's and the image store's events, the audit log (cell's own) ---- */

int api_sandbox_events(struct http_req *r);
int api_image_events(struct http_req *r);
int api_audit(struct http_req *r);

/* ---- api_logs.c: a sandbox's logs, one command's kept output, and its commands ---- */

int api_sandbox_logs(struct http_req *r);
int api_sandbox_commands(struct http_req *r);

/* ---- api_tunnel.c: a raw TCP tunnel to a port (cell forward) ---- */

int api_tunnel(struct http_req *r);
