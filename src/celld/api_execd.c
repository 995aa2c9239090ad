/* execd routes under /v1/sandboxes/{id}/proxy/44772: ping, command (SSE), status, logs,
 * interrupt. The command text is base64-encoded into the EXEC frame and decoded only
 * inside the sandbox: it never meets a host shell. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "celld.h"

#define PING_EVERY_MS	    3000
#define EXEC_TIMEOUT_MAX_MS 2147483647LL
#define ARGV_MAX	    4096

struct sandbox *api_running_sandbox(struct http_req *r)
{
	struct sandbox *sb = http_sandbox(r);
	if (!sb)
		return NULL;
	registry_lock();
	enum sbx_state st = sb->state;
	bool busy = sb->busy != SBX_IDLE;
	char reason[256];
	snprintf(reason, sizeof(reason), "%s", sb->reason ? sb->reason : "");
	registry_unlock();
	if (st == SBX_RUNNING && !busy)
		return sb;
	if (busy)
		http_error(r, 409, "SANDBOX_NOT_RUNNING", "sandbox %s is busy (%s)", sb->id,
			   sandbox_state_name(st));
	else
		http_error(r, 409, "SANDBOX_NOT_RUNNING", "sandbox %s is %s%s%s", sb->id,
			   sandbox_state_name(st), reason[0] ? ": " : "", reason);
	sandbox_unref(sb);
	return NULL;
}

int api_execd_ping(struct http_req *r)
{
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	struct cell_error err = {0};
	int rc = relay_ping(sb, 5000, &err);
	sandbox_unref(sb);
	if (rc < 0)
		return http_error(r, 503, "SANDBOX_UNAVAILABLE", "%s", err.msg);
	return http_empty(r, 200);
}

/* ---- POST /command ---- */

struct exec_opts {
	const char *command, *cwd;
	json_t *argv, *envs;
	bool background;
	int64_t timeout, uid, gid;
};

static int parse_opts(json_t *body, struct exec_opts *o, struct cell_error *err)
{
	memset(o, 0, sizeof(*o));
	int has_cmd = field_string(body, "command", "command", false, &o->command, err);
	if (has_cmd < 0 || field_string_array(body, "argv", "argv", &o->argv, err) < 0 ||
	    field_string(body, "cwd", "cwd", false, &o->cwd, err) < 0 ||
	    field_bool(body, "background", "background", &o->background, err) < 0 ||
	    field_int(body, "timeout", "timeout", 0, EXEC_TIMEOUT_MAX_MS, &o->timeout, err) < 0 ||
	    field_string_map(body, "envs", "envs", &o->envs, err) < 0 ||
	    field_int(body, "uid", "uid", 0, CELL_UID_RANGE - 1, &o->uid, err) < 0 ||
	    field_int(body, "gid", "gid", 0, CELL_UID_RANGE - 1, &o->gid, err) < 0)
		return -EINVAL;
	if (o->argv) {
		if (!json_array_size(o->argv) || json_array_size(o->argv) > ARGV_MAX)
			return field_fail(err, "argv must hold 1-%d strings", ARGV_MAX);
		if (!json_string_length(json_array_get(o->argv, 0)))
			return field_fail(err, "argv[0] must not be empty");
	} else if (!o->command || !o->command[0]) {
		return field_fail(err, "command is required (or argv)");
	}
	if (o->cwd && o->cwd[0] != '/')
		return field_fail(err, "cwd must be an absolute path");
	const char *k;
	json_t *v;
	if (o->envs)
		json_object_foreach(o->envs, k, v) if (!k[0] || strchr(k, '=')) return field_fail(
		    err, "envs key '%.64s' is invalid", k);
	return 0;
}

static int respond_events(struct http_req *r, char *text, size_t len)
{
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return http_error(r, 500, "INTERNAL", "out of memory");
	}
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	return http_respond(r, 200, resp);
}

/* A growable byte buffer of events not yet handed to the client. */
struct outbuf {
	char *data;
	size_t len, off;
};

/* Takes ev. The length is read through a pointer because the builders fill it while the
 * arguments of this very call are evaluated (in unspecified order). */
static int out_add(struct outbuf *b, char *ev, const size_t *lenp)
{
	if (!ev)
		return 0;
	size_t len = *lenp;
	char *nd = realloc(b->data, b->len + len);
	if (!nd) {
		free(ev);
		return -ENOMEM;
	}
	memcpy(nd + b->len, ev, len);
	b->data = nd;
	b->len += len;
	free(ev);
	return 0;
}

/* init refused to start it: the stream still tells the story (init, stderr, error), with
 * the exit code a shell would give (127 not found, 126 otherwise). */
static int respond_refused(struct http_req *r, struct command *c, const struct relay_error *e)
{
	struct outbuf b = {0};
	size_t len = 0;
	char line[300];
	snprintf(line, sizeof(line), "%s\n", e->message);
	struct sse_utf8 u = {0};
	char *ev = NULL;
	int code = e->errnum == ENOENT ? 127 : 126;
	out_add(&b, sse_init(command_id(c), &len), &len);
	if (sse_output("stderr", &u, (const uint8_t *)line, strlen(line), true, &ev, &len) == 0)
		out_add(&b, ev, &len);
	out_add(&b, sse_error(code, e->message, &len), &len);
	if (!b.data)
		return http_error(r, 500, "INTERNAL", "out of memory");
	return respond_events(r, b.data, b.len);
}

/* A foreground command streamed as events, read from the relay by MHD's connection
 * thread as the client takes them (so a slow client slows the command, not celld). */
struct exec_stream {
	struct sandbox *sb;
	struct command *cmd;
	int fd; /* relay; -1 once closed */
	struct outbuf out;
	bool done;
	int64_t next_ping, t0;
	struct sse_utf8 u_out, u_err;
};

static void stream_close_relay(struct exec_stream *s)
{
	if (s->fd < 0)
		return;
	command_set_relay(s->cmd, -1);
	close(s->fd);
	s->fd = -1;
}

static int stream_output(struct exec_stream *s, const char *type, struct sse_utf8 *u,
			 const uint8_t *data, size_t n, bool final)
{
	char *ev;
	size_t len;
	int r = sse_output(type, u, data, n, final, &ev, &len);
	return r < 0 ? r : out_add(&s->out, ev, &len);
}

static void stream_fail(struct exec_stream *s, const char *msg)
{
	size_t len;
	char tb[CELL_ERROR_MSG_MAX + 16];
	snprintf(tb, sizeof(tb), "cell: %s", msg);
	command_finish(s->cmd, -1, msg);
	out_add(&s->out, sse_error(125, tb, &len), &len);
	stream_close_relay(s);
	s->done = true;
}

static void stream_exit(struct exec_stream *s, const struct relay_exit *ex)
{
	size_t len;
	stream_output(s, "stdout", &s->u_out, NULL, 0, true);
	stream_output(s, "stderr", &s->u_err, NULL, 0, true);
	int code = relay_exit_code(ex);
	if (code == 0) {
		int64_t ms = ex->duration_ms ? ex->duration_ms : celld_now_ms() - s->t0;
		out_add(&s->out, sse_complete(ms, &len), &len);
	} else {
		char text[64];
		relay_exit_text(ex, text, sizeof(text));
		out_add(&s->out, sse_error(code, text, &len), &len);
	}
	stream_close_relay(s);
	s->done = true;
}

/* Produce the next event(s) into s->out: output, the end, or a ping when it is due. */
static void stream_step(struct exec_stream *s)
{
	size_t len;
	int64_t wait = s->next_ping - celld_now_ms();
	if (wait <= 0) {
		s->next_ping = celld_now_ms() + PING_EVERY_MS;
		out_add(&s->out, sse_ping(&len), &len);
		return;
	}
	int w = relay_wait(s->fd, (int)wait);
	if (w == 0)
		return;
	struct cell_error err = {0};
	struct relay_event ev;
	if (w < 0 || relay_exec_next(s->fd, &ev, &err) < 0) {
		stream_fail(s, w < 0 ? strerror(-w) : err.msg);
		return;
	}
	command_apply(s->cmd, &ev);
	if (ev.kind == RELAY_EV_EXIT) {
		stream_exit(s, &ev.exit);
	} else {
		bool out = ev.kind == RELAY_EV_STDOUT;
		if (stream_output(s, out ? "stdout" : "stderr", out ? &s->u_out : &s->u_err,
				  ev.frame.payload, ev.frame.len, false) < 0)
			stream_fail(s, "out of memory");
	}
	cell_frame_free(&ev.frame);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct exec_stream *s = cls;
	for (;;) {
		if (s->out.off < s->out.len) {
			size_t n = s->out.len - s->out.off;
			if (n > max)
				n = max;
			memcpy(buf, s->out.data + s->out.off, n);
			s->out.off += n;
			return (ssize_t)n;
		}
		free(s->out.data);
		s->out = (struct outbuf){0};
		if (s->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		stream_step(s);
	}
}

static void stream_free(void *cls)
{
	struct exec_stream *s = cls;
	if (s->fd >= 0 && !s->done) {
		/* The client went away: the command runs on and its output is still kept. */
		struct cell_error err;
		command_drain(s->cmd, s->fd, &err);
		s->fd = -1;
	}
	stream_close_relay(s);
	free(s->out.data);
	command_unref(s->cmd);
	sandbox_unref(s->sb);
	free(s);
}

static int respond_stream(struct http_req *r, struct sandbox *sb, struct command *c, int fd)
{
	struct exec_stream *s = calloc(1, sizeof(*s));
	size_t len;
	if (!s) {
		command_drain(c, fd, NULL);
		return http_error(r, 500, "INTERNAL", "out of memory");
	}
	sandbox_ref(sb);
	command_ref(c);
	s->sb = sb;
	s->cmd = c;
	s->fd = fd;
	s->t0 = command_started_ms(c);
	s->next_ping = celld_now_ms() + PING_EVERY_MS;
	out_add(&s->out, sse_init(command_id(c), &len), &len);
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 << 10,
								      stream_read, s, stream_free);
	if (!resp) {
		stream_free(s);
		return http_error(r, 500, "INTERNAL", "out of memory");
	}
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return http_respond(r, 200, resp);
}

int api_execd_command(struct http_req *r)
{
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	struct exec_opts o;
	struct cell_error err = {0};
	if (parse_opts(body, &o, &err) < 0) {
		json_decref(o.argv);
		json_decref(o.envs);
		json_decref(body);
		return http_error(r, 400, "INVALID_ARGUMENT", "%s", err.msg);
	}
	struct sandbox *sb = api_running_sandbox(r);
	_cleanup_free_ char *content = NULL;
	json_t *req = sb ? command_exec_request(sb, o.argv ? NULL : o.command, o.argv, o.envs,
						o.cwd, o.timeout, o.uid, o.gid, &content)
			 : NULL;
	json_decref(o.argv);
	json_decref(o.envs);
	json_decref(body);
	if (!sb)
		return 0;
	if (!req) {
		sandbox_unref(sb);
		return http_error(r, 500, "INTERNAL", "out of memory");
	}
	struct command *c;
	struct relay_error rerr;
	int fd;
	int rc = command_start(sb, req, content, &c, &fd, &rerr, &err);
	json_decref(req);
	if (rc < 0)
		http_internal(r, &err);
	else if (rc == 1)
		respond_refused(r, c, &rerr);
	else if (o.background) {
		size_t len;
		char *ev = sse_init(command_id(c), &len);
		command_drain(c, fd, &err);
		if (ev)
			respond_events(r, ev, len);
		else
			http_error(r, 500, "INTERNAL", "out of memory");
	} else {
		respond_stream(r, sb, c, fd);
	}
	if (rc >= 0)
		command_unref(c);
	sandbox_unref(sb);
	return 0;
}

/* ---- status, logs, interrupt ---- */

static struct command *find_command(struct http_req *r, struct sandbox *sb, const char *id)
{
	struct command *c = cmd_table_get(sb->cmds, id);
	if (!c)
		http_error(r, 404, "COMMAND_NOT_FOUND", "command %s not found", id);
	return c;
}

int api_execd_status(struct http_req *r)
{
	struct sandbox *sb = http_sandbox(r);
	if (!sb)
		return 0;
	struct command *c = find_command(r, sb, http_param(r, 1));
	if (c) {
		http_json(r, 200, command_status_json(c));
		command_unref(c);
	}
	sandbox_unref(sb);
	return 0;
}

int api_execd_logs(struct http_req *r)
{
	const char *cur = http_query(r, "cursor");
	int64_t cursor = 0;
	if (cur && cur[0] && parse_int64(cur, 0, INT64_MAX, &cursor) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "cursor must be a byte offset (an integer >= 0)");
	struct sandbox *sb = http_sandbox(r);
	if (!sb)
		return 0;
	struct command *c = find_command(r, sb, http_param(r, 1));
	sandbox_unref(sb);
	if (!c)
		return 0;
	char *text;
	size_t len;
	uint64_t next;
	int rc = command_logs(c, (uint64_t)cursor, &text, &len, &next);
	command_unref(c);
	if (rc < 0)
		return http_error(r, 500, "INTERNAL", "out of memory");
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return http_error(r, 500, "INTERNAL", "out of memory");
	}
	char nbuf[32];
	snprintf(nbuf, sizeof(nbuf), "%llu", (unsigned long long)next);
	MHD_add_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
	MHD_add_response_header(resp, "EXECD-COMMANDS-TAIL-CURSOR", nbuf);
	return http_respond(r, 200, resp);
}

int api_execd_interrupt(struct http_req *r)
{
	const char *id = http_query(r, "id");
	if (!id || !cell_id_valid(id))
		return http_error(r, 400, "INVALID_ID", "query parameter id must be a command id");
	struct sandbox *sb = http_sandbox(r);
	if (!sb)
		return 0;
	struct command *c = find_command(r, sb, id);
	sandbox_unref(sb);
	if (!c)
		return 0;
	struct cell_error err = {0};
	/* init turns it into SIGTERM for the process group, SIGKILL after a grace period. */
	int rc = command_signal(c, SIGTERM, &err);
	command_unref(c);
	if (rc < 0 && rc != -ESRCH)
		return http_internal(r, &err);
	return http_empty(r, 200);
}
