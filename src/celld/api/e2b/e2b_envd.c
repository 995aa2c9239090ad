/* envd's sandbox (the one E2b-Sandbox-Id names) and its small plain HTTP routes: /health,
 * /envs, /metrics. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cell/id.h"
#include "e2b.h"
#include "http/errors.h"
#include "http/http.h"
#include "lifecycle.h"
#include "registry.h"
#include "sandbox.h"
#include "tenancy.h"

enum answer_kind { ANSWER_UNARY, ANSWER_STREAM, ANSWER_HTTP };

/* A failure in the form the call expects. A sandbox that is not there is a 502, as E2B's
 * front answers for a sandbox it cannot reach (the SDK reads it as "sandbox gone"). */
static void refuse(struct http_req *r, enum answer_kind kind, enum connect_code code,
		   unsigned status, const char *msg)
{
	if (status == 502 || kind == ANSWER_HTTP)
		e2b_error(r, status, "%s", msg);
	else if (kind == ANSWER_STREAM)
		connect_stream_error(r, code, "%s", msg);
	else
		connect_error(r, code, "%s", msg);
}

static struct sandbox *envd_sandbox(struct http_req *r, enum answer_kind kind)
{
	/* The header, or (a signed /files URL, rerouted by its signature) the path's {id}. */
	const char *id = http_header(r, E2B_HEADER_ID);
	if (!id)
		id = http_param(r, 0);
	char msg[256];
	if (!id || !cell_id_valid(id)) {
		snprintf(msg, sizeof(msg), "missing or invalid %s header", E2B_HEADER_ID);
		refuse(r, kind, CONNECT_INVALID_ARGUMENT, 400, msg);
		return NULL;
	}
	struct sandbox *sb = tenancy_sandbox(r, id);
	if (!sb) {
		snprintf(msg, sizeof(msg), "sandbox %s not found", id);
		refuse(r, kind, CONNECT_NOT_FOUND, 502, msg);
		return NULL;
	}
	/* E2B's auto-resume: a paused or stopped sandbox is started by its use, and the use
	 * is activity for its idle timer. Created with autoResume {"enabled": false}, it is
	 * not: E2B's front answers 502 for it (the SDK: not running) until a connect. */
	enum sbx_use use;
	struct sbx_use_view v;
	struct cell_error err = {0};
	if (lifecycle_use(sb, true, &use, &v, &err) < 0) {
		sandbox_unref(sb);
		refuse(r, kind, connect_code_from_errno(err.code), errors_lookup(err.code)->status,
		       err.msg);
		return NULL;
	}
	if (use == SBX_USE_READY)
		return sb;
	if (use == SBX_USE_ASLEEP)
		snprintf(msg, sizeof(msg),
			 "sandbox %s is paused and is not resumed by its use (autoResume false): "
			 "connect to it first",
			 id);
	else
		snprintf(msg, sizeof(msg), "sandbox %s is %s", id, sandbox_state_name(v.state));
	sandbox_unref(sb);
	/* Asleep: 502, as E2B answers a sandbox that is not running (the SDK reads it so). */
	refuse(r, kind, CONNECT_UNAVAILABLE, use == SBX_USE_ASLEEP ? 502 : 503, msg);
	return NULL;
}

struct sandbox *e2b_envd_sandbox(struct http_req *r, bool streaming)
{
	return envd_sandbox(r, streaming ? ANSWER_STREAM : ANSWER_UNARY);
}

struct sandbox *e2b_envd_http_sandbox(struct http_req *r)
{
	return envd_sandbox(r, ANSWER_HTTP);
}

/* envd's 204 while the sandbox runs, else 502 as for a sandbox E2B cannot reach (the SDK's
 * isRunning() is false after a pause: asking must not resume it). Without a sandbox, the
 * control plane's own health. */
int e2b_health(struct http_req *r)
{
	const char *id = http_header(r, E2B_HEADER_ID);
	if (!id)
		return http_json(r, 200, json_pack("{s:s}", "status", "ok"));
	struct sandbox *sb = cell_id_valid(id) ? tenancy_sandbox(r, id) : NULL;
	if (!sb)
		return e2b_error(r, 502, "sandbox %.80s not found", id);
	/* A sandbox whose processes are being ended (deleted, stopped, paused) is gone for
	 * envd already: the SDK asks when a stream breaks, before the delete is answered. */
	registry_lock();
	enum sbx_op op = sb->busy;
	bool running = sb->state == SBX_RUNNING && sb->in_table && op != SBX_DELETING &&
		       op != SBX_STOPPING && op != SBX_PAUSING && op != SBX_RECOVERING;
	const char *state = op == SBX_DELETING ? "being deleted" : sandbox_state_name(sb->state);
	registry_unlock();
	sandbox_unref(sb);
	if (!running)
		return e2b_error(r, 502, "sandbox %s is %s", id, state);
	return http_empty(r, 204);
}

/* envd's GET /envs: the sandbox's environment as its create gave it (envVars, or
 * OpenSandbox's env), a map of strings. */
int e2b_envs(struct http_req *r)
{
	struct sandbox *sb = e2b_envd_http_sandbox(r);
	if (!sb)
		return 0;
	/* env is fixed once the sandbox is published. */
	json_t *env = json_is_object(sb->env) ? json_deep_copy(sb->env) : json_object();
	sandbox_unref(sb);
	return env ? http_json(r, 200, env) : http_no_memory(r);
}

/* envd's GET /metrics: {ts (Unix seconds), cpu_count, cpu_used_pct, mem_total, mem_used,
 * disk_used, disk_total (bytes), mem_total_mib, mem_used_mib}, measured from the host. */
int e2b_envd_metrics(struct http_req *r)
{
	struct sandbox *sb = e2b_envd_http_sandbox(r);
	if (!sb)
		return 0;
	struct e2b_sample s;
	int rc = e2b_sample(sb, &s);
	sandbox_unref(sb);
	if (rc < 0)
		return e2b_error(r, 503, "the sandbox's usage cannot be read now");
	return http_json(
	    r, 200,
	    json_pack("{s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I}", "ts", (json_int_t)s.at,
		      "cpu_count", (json_int_t)s.cpu_count, "cpu_used_pct", s.cpu_used_pct,
		      "mem_total", (json_int_t)s.mem_total, "mem_used", (json_int_t)s.mem_used,
		      "disk_used", (json_int_t)s.disk_used, "disk_total", (json_int_t)s.disk_total,
		      "mem_total_mib", (json_int_t)(s.mem_total >> 20), "mem_used_mib",
		      (json_int_t)(s.mem_used >> 20)));
}
