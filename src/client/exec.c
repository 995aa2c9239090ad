/* Commands through the client library: POST .../command, its event stream decoded. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "internal.h"

struct exec_state {
	const struct cell_client_exec_ops *ops;
	void *ctx;
	struct cell_client_exec_result *res;
	struct cell_error *err;
	bool stream_failed;
};

static int exec_output(struct exec_state *st, json_t *ev, int fd)
{
	json_t *jt = json_object_get(ev, "text");
	const char *text = json_string_value(jt);
	if (!text || !st->ops->output)
		return 0;
	size_t len = json_string_length(jt);
	const char *enc = json_string_value(json_object_get(ev, "encoding"));
	_cleanup_free_ uint8_t *raw = NULL;
	if (enc && !strcmp(enc, "base64")) {
		size_t rlen = 0;
		if (cell_base64_decode(text, len, &raw, &rlen) < 0)
			return cell_err_msg(st->err, EPROTO,
					    "celld sent an output event with bad base64");
		text = (const char *)raw;
		len = rlen;
	} else if (enc) {
		return cell_err_msg(st->err, EPROTO, "celld sent unknown encoding '%s'", enc);
	}
	return st->ops->output(st->ctx, fd, text, len, st->err);
}

static int parse_exit_value(const char *s)
{
	char *end = NULL;
	errno = 0;
	long v = s ? strtol(s, &end, 10) : -1;
	if (!s || errno || end == s || *end || v < 0 || v > 255)
		return -1;
	return (int)v;
}

static int exec_end(struct exec_state *st, json_t *ev, bool complete)
{
	struct cell_client_exec_result *res = st->res;
	res->done = true;
	res->complete = complete;
	if (complete) {
		res->exit_code = 0;
		return 1;
	}
	res->error = json_incref(json_object_get(ev, "error"));
	res->exit_code = parse_exit_value(json_string_value(json_object_get(res->error, "evalue")));
	return 1;
}

static int exec_event(void *ctx, const char *text, size_t len)
{
	struct exec_state *st = ctx;
	json_error_t jerr;
	/* JSON_ALLOW_NUL: command output may contain NUL bytes ("\u0000" is valid JSON). */
	json_t *ev = json_loadb(text, len, JSON_ALLOW_NUL, &jerr);
	if (!ev || !json_is_object(ev)) {
		json_decref(ev);
		st->stream_failed = true;
		return cell_err_msg(st->err, EPROTO, "celld sent a malformed event: %s", jerr.text);
	}
	if (st->ops->event)
		st->ops->event(st->ctx, ev);
	const char *type = json_string_value(json_object_get(ev, "type"));
	int r = 0;
	if (!type) {
		r = 0;
	} else if (!strcmp(type, "stdout")) {
		r = exec_output(st, ev, 1);
	} else if (!strcmp(type, "stderr")) {
		r = exec_output(st, ev, 2);
	} else if (!strcmp(type, "init")) {
		const char *id = json_string_value(json_object_get(ev, "text"));
		if (id)
			snprintf(st->res->cmd_id, sizeof(st->res->cmd_id), "%s", id);
	} else if (!strcmp(type, "execution_complete")) {
		r = exec_end(st, ev, true);
	} else if (!strcmp(type, "error")) {
		r = exec_end(st, ev, false);
	} /* ping and event types of later versions are ignored */
	json_decref(ev);
	if (r < 0)
		st->stream_failed = true;
	return r;
}

int cell_client_exec(struct cell_client *c, const char *id, const char *body,
		     const struct cell_client_exec_ops *ops, void *ctx,
		     struct cell_client_exec_result *res, struct cell_error *err)
{
	*res = (struct cell_client_exec_result){.exit_code = -1};
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "/v1/sandboxes/%s" CELL_CLIENT_EXECD_PREFIX "/command", id) < 0)
		return cell_err(err, ENOMEM, "building the command request");
	struct exec_state st = {.ops = ops, .ctx = ctx, .res = res, .err = err};
	struct cell_client_req req = {
	    .method = "POST", .path = path, .body = body, .abortable = true};
	int r =
	    cell_client_stream(c, &req, exec_event, &st, "running the command", &res->status, err);
	if (r == -EINTR || r == -EMSGSIZE)
		st.stream_failed = true; /* interrupted, or an event too large */
	res->stream_failed = st.stream_failed;
	if (r < 0)
		return r;
	if (!res->done)
		return cell_err_msg(err, ECONNRESET,
				    "celld ended the output stream before the command finished");
	return 0;
}

void cell_client_exec_result_free(struct cell_client_exec_result *res)
{
	json_decref(res->error);
	res->error = NULL;
}

int cell_client_exec_interrupt(struct cell_client *c, const char *id, const char *cmd_id,
			       struct cell_error *err)
{
	if (!cmd_id[0])
		return 0;
	_cleanup_free_ char *enc = cell_client_urlencode(cmd_id);
	_cleanup_free_ char *path = NULL;
	if (!enc || asprintf(&path, "/v1/sandboxes/%s" CELL_CLIENT_EXECD_PREFIX "/command?id=%s",
			     id, enc) < 0)
		return cell_err(err, ENOMEM, "interrupting the command");
	return cell_client_api(c, "DELETE", path, NULL, "interrupting the command", NULL, err);
}

int cell_client_exec_stdin(struct cell_client *c, const char *id, const char *cmd_id,
			   const void *data, size_t len, bool close_it, struct cell_error *err)
{
	_cleanup_free_ char *enc = cell_client_urlencode(cmd_id);
	_cleanup_free_ char *path = NULL;
	if (!enc ||
	    asprintf(&path, "/v1/sandboxes/%s" CELL_CLIENT_EXECD_PREFIX "/command/%s/stdin%s", id,
		     enc, close_it ? "?close=true" : "") < 0)
		return cell_err(err, ENOMEM, "the command's input");
	struct cell_client_req req = {.method = "POST",
				      .path = path,
				      .body = len ? data : "",
				      .body_len = len,
				      .content_type = "application/octet-stream"};
	struct cell_client_resp resp = {0};
	int rc = cell_client_request(c, &req, &resp, err);
	if (rc == 0 && (resp.status < 200 || resp.status > 299))
		rc = cell_client_status_error(resp.status, &resp.body, "the command's input", NULL,
					      0, err);
	cell_client_resp_free(&resp);
	return rc;
}
