/* execd routes under /v1/sandboxes/{id}/proxy/44772: ping, command (SSE), status, logs,
 * interrupt. The command text is base64-encoded into the EXEC frame and decoded only
 * inside the sandbox: it never meets a host shell. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/id.h"
#include "cell/log.h"
#include "api.h"
#include "audit.h"
#include "http/errors.h"
#include "commands.h"
#include "lifecycle.h"
#include "processes.h"
#include "timefmt.h"
#include "fields.h"
#include "http/sse.h"
#include "http/http.h"
#include "registry.h"
#include "sandbox.h"

#define PING_EVERY_MS	    3000
#define EXEC_TIMEOUT_MAX_MS 2147483647LL
#define ARGV_MAX	    4096

int api_execd_ping(struct http_req *r)
{
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	struct cell_error err = {0};
	int rc = command_ping(sb, 5000, &err);
	sandbox_unref(sb);
	if (rc < 0 && errors_host_short(-rc))
		return http_internal(r, &err); /* celld out of fds or memory: not the sandbox */
	if (rc < 0)
		return http_error(r, 503, "SANDBOX_UNAVAILABLE", "%s", err.msg);
	return http_empty(r, 200);
}

/* ---- POST /command ---- */

struct exec_opts {
	const char *command, *cwd;
	json_t *argv, *envs;
	bool background, raw, stdin; /* stdin: cell's extension, fed by POST .../stdin */
	bool delete_sandbox;	     /* cell's: deleteSandboxOnExit, of a background one */
	int64_t timeout, uid, gid;
};

static int parse_opts(json_t *body, struct exec_opts *o, struct cell_error *err)
{
	memset(o, 0, sizeof(*o));
	int has_cmd = field_string(body, "command", "command", false, &o->command, err);
	int has_uid, has_gid;
	if (has_cmd < 0 || field_string_array(body, "argv", "argv", &o->argv, err) < 0 ||
	    field_string(body, "cwd", "cwd", false, &o->cwd, err) < 0 ||
	    field_bool(body, "background", "background", &o->background, err) < 0 ||
	    field_bool(body, "rawOutput", "rawOutput", &o->raw, err) < 0 ||
	    field_bool(body, "stdin", "stdin", &o->stdin, err) < 0 ||
	    field_bool(body, "deleteSandboxOnExit", "deleteSandboxOnExit", &o->delete_sandbox,
		       err) < 0 ||
	    field_int(body, "timeout", "timeout", 0, EXEC_TIMEOUT_MAX_MS, &o->timeout, err) < 0 ||
	    field_string_map(body, "envs", "envs", &o->envs, err) < 0 ||
	    (has_uid = field_int(body, "uid", "uid", 0, CELL_UID_RANGE - 1, &o->uid, err)) < 0 ||
	    (has_gid = field_int(body, "gid", "gid", 0, CELL_UID_RANGE - 1, &o->gid, err)) < 0)
		return -EINVAL;
	/* uid alone: the user's primary group, looked up inside the sandbox (as execd does);
	 * neither: the image's user (commands.h). */
	if (has_uid && !has_gid)
		o->gid = -1;
	if (!has_uid) {
		o->uid = -1;
		o->gid = has_gid ? o->gid : -1;
	}
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
	/* A foreground command's client is there to delete the sandbox itself. */
	if (o->delete_sandbox && !o->background)
		return field_fail(err, "deleteSandboxOnExit needs background: true");
	const char *k;
	json_t *v;
	if (o->envs)
		json_object_foreach(o->envs, k, v) if (!k[0] || strchr(k, '=')) return field_fail(
		    err, "envs key '%.64s' is invalid", k);
	return 0;
}

static int respond_events(struct http_req *r, char *text, size_t len)
{
	return http_text(r, text, len, "text/event-stream", "no-cache");
}

/* Takes ev (an event from the sse builders, or NULL after a failed allocation). The
 * length is read through a pointer because the builders fill it while the arguments of
 * this very call are evaluated (in unspecified order). */
static int out_add(struct sse_buf *b, char *ev, const size_t *lenp)
{
	if (!ev)
		return 0;
	int r = sse_buf_add(b, ev, *lenp);
	free(ev);
	return r;
}

/* init refused to start it: the stream still tells the story (init, stderr, error), with
 * the exit code a shell would give (127 not found, 126 otherwise). */
static int respond_refused(struct http_req *r, struct command *c, const struct command_refusal *e,
			   bool raw)
{
	struct sse_buf b = {0};
	size_t len = 0;
	struct sse_lines l = {0};
	int code = e->errnum == ENOENT ? 127 : 126;
	out_add(&b, sse_init(command_id(c), &len), &len);
	if (raw) { /* the bytes a shell would have written: the line ending kept */
		char line[300];
		snprintf(line, sizeof(line), "%s\n", e->message);
		struct sse_utf8 u = {0};
		sse_output_add(&b, "stderr", &u, (const uint8_t *)line, strlen(line), true);
	} else {
		sse_lines_add(&b, "stderr", &l, (const uint8_t *)e->message, strlen(e->message),
			      true);
		sse_lines_free(&l);
	}
	out_add(&b, sse_error(code, e->message, &len), &len);
	if (!b.data)
		return http_no_memory(r);
	return respond_events(r, b.data, b.len);
}

/* Output is read ahead from the relay while it is there at once, up to this much
 * unsent: the client gets large pieces, and a slow client still slows the command. */
#define STREAM_READAHEAD (256u << 10)
/* A stream that has carried this much is a bulk transfer: its client socket gets a
 * larger send buffer (fewer wakeups of both ends per megabyte). Small outputs never pay
 * for the extra system call. */
#define STREAM_BULK   (256u << 10)
#define STREAM_SNDBUF (1 << 20)

/* A foreground command streamed as events, read from the relay by MHD's connection
 * thread as the client takes them (so a slow client slows the command, not celld). */
struct exec_stream {
	struct sandbox *sb;
	struct command *cmd;
	struct command_stream *events; /* NULL once closed */
	struct sse_buf out;
	bool done;
	int64_t next_ping, t0;
	bool raw; /* rawOutput: chunks as they came (u_out, u_err) */
	struct sse_utf8 u_out, u_err;
	struct sse_lines l_out, l_err; /* else output split into lines, as execd does */
	int client_fd;		       /* the HTTP connection's socket, -1 if unknown */
	uint64_t output;	       /* bytes of output carried so far */
};

static void stream_close_events(struct exec_stream *s)
{
	if (s->events)
		command_stream_close(s->events);
	s->events = NULL;
}

/* What the sandbox is going through when its command's stream breaks: the usual cause, for
 * the client to read instead of a bare relay error. NULL when nothing. */
static const char *sandbox_ending(struct sandbox *sb)
{
	registry_lock();
	enum sbx_op op = sb->busy;
	registry_unlock();
	return op == SBX_DELETING     ? "the sandbox is being deleted"
	       : op == SBX_STOPPING   ? "the sandbox is being stopped"
	       : op == SBX_RECOVERING ? "the sandbox's cell-init died"
				      : NULL;
}

static void stream_fail(struct exec_stream *s, const char *msg)
{
	size_t len;
	char tb[CELL_ERROR_MSG_MAX + 64];
	const char *ending = sandbox_ending(s->sb);
	snprintf(tb, sizeof(tb), "cell: %s%s%s", ending ? ending : "", ending ? ": " : "", msg);
	command_finish(s->cmd, -1, msg);
	out_add(&s->out, sse_error(125, tb, &len), &len);
	stream_close_events(s);
	s->done = true;
}

static void stream_exit(struct exec_stream *s, const struct command_event *ex)
{
	size_t len;
	if (s->raw) {
		sse_output_add(&s->out, "stdout", &s->u_out, NULL, 0, true);
		sse_output_add(&s->out, "stderr", &s->u_err, NULL, 0, true);
	} else {
		sse_lines_add(&s->out, "stdout", &s->l_out, NULL, 0, true);
		sse_lines_add(&s->out, "stderr", &s->l_err, NULL, 0, true);
	}
	if (ex->code == 0) {
		int64_t ms = ex->duration_ms ? ex->duration_ms : celld_now_ms() - s->t0;
		out_add(&s->out, sse_complete(ms, &len), &len);
	} else {
		out_add(&s->out, sse_error(ex->code, ex->text, &len), &len);
	}
	stream_close_events(s);
	s->done = true;
}

/* Read and turn into events one frame; one is waiting. */
static void stream_frame(struct exec_stream *s)
{
	struct cell_error err = {0};
	struct command_event ev;
	if (command_stream_read(s->events, &ev, &err) < 0) {
		stream_fail(s, err.msg);
		return;
	}
	if (ev.kind == COMMAND_EV_EXIT) {
		stream_exit(s, &ev);
		return;
	}
	if (ev.kind == COMMAND_EV_STDIN_TAKEN)
		return;
	bool out = ev.kind == COMMAND_EV_STDOUT;
	const char *type = out ? "stdout" : "stderr";
	int rc =
	    s->raw
		? sse_output_add(&s->out, type, out ? &s->u_out : &s->u_err, ev.data, ev.len, false)
		: sse_lines_add(&s->out, type, out ? &s->l_out : &s->l_err, ev.data, ev.len, false);
	if (rc < 0) {
		stream_fail(s, "out of memory");
		return;
	}
	if (s->output < STREAM_BULK && (s->output += ev.len) >= STREAM_BULK && s->client_fd >= 0) {
		int size = STREAM_SNDBUF;
		setsockopt(s->client_fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	}
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
	int w = command_stream_wait(s->events, (int)wait);
	if (w == 0)
		return;
	if (w < 0) {
		stream_fail(s, strerror(-w));
		return;
	}
	stream_frame(s);
	/* More frames already waiting go into the same piece for the client. */
	while (!s->done && s->out.len - s->out.off < STREAM_READAHEAD &&
	       command_stream_wait(s->events, 0) == 1)
		stream_frame(s);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct exec_stream *s = cls;
	for (;;) {
		size_t n = sse_buf_take(&s->out, buf, max);
		if (n)
			return (ssize_t)n;
		if (s->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		stream_step(s);
	}
}

static void stream_free(void *cls)
{
	struct exec_stream *s = cls;
	if (s->events && !s->done) {
		/* The client went away: the command runs on and its output is still kept. */
		command_stream_drain(s->events);
		s->events = NULL;
	}
	sandbox_stream_end(s->sb); /* begun with the stream (respond_stream) */
	stream_close_events(s);
	sse_lines_free(&s->l_out);
	sse_lines_free(&s->l_err);
	sse_buf_free(&s->out);
	command_unref(s->cmd);
	sandbox_unref(s->sb);
	free(s);
}

/* MHD asks for up to this much per call; large pieces mean fewer chunks and sends. */
#define STREAM_BLOCK (256u << 10)

static int respond_stream(struct http_req *r, struct sandbox *sb, struct command *c,
			  struct command_stream *events, bool raw)
{
	struct exec_stream *s = calloc(1, sizeof(*s));
	size_t len;
	if (!s) {
		command_stream_drain(events);
		return http_no_memory(r);
	}
	sandbox_ref(sb);
	command_ref(c);
	s->sb = sb;
	s->cmd = c;
	s->events = events;
	s->raw = raw;
	s->t0 = command_started_ms(c);
	s->next_ping = celld_now_ms() + PING_EVERY_MS;
	s->client_fd = http_socket(r);
	/* A client reading a command's events is using the sandbox until the stream ends or
	 * it goes away (the command then runs on unwatched, which is not use: idle_rule.h). */
	sandbox_stream_begin(sb);
	out_add(&s->out, sse_init(command_id(c), &len), &len);
	struct MHD_Response *resp = MHD_create_response_from_callback(
	    MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read, s, stream_free);
	if (!resp) {
		stream_free(s);
		return http_no_memory(r);
	}
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return http_respond(r, 200, resp);
}

/* Start req (taken) in sb and answer with its events: the stream, or for a background
 * command init and execution_complete at once. */
static void run_request(struct http_req *r, struct sandbox *sb, json_t *req, const char *content,
			const struct exec_opts *o)
{
	bool raw = o->raw, background = o->background;
	struct cell_error err = {0};
	struct command *c;
	struct command_stream *events;
	struct command_refusal why;
	bool takes_stdin = json_is_true(json_object_get(req, "stdin"));
	int rc = command_open(sb, false, req, content, http_principal(r), &c, &events, &why, &err);
	json_decref(req);
	if (rc == 0 && takes_stdin)
		command_take_stdin(c);
	if (rc < 0)
		http_internal(r, &err);
	else if (rc == 1)
		respond_refused(r, c, &why, raw);
	else if (background) {
		/* As execd: init, then at once execution_complete (the SDK waits for a terminal
		 * event); the command runs on, its status and logs under its id. */
		struct sse_buf b = {0};
		size_t ilen = 0, clen = 0;
		_cleanup_free_ char *init = sse_init(command_id(c), &ilen);
		_cleanup_free_ char *done =
		    sse_complete(celld_now_ms() - command_started_ms(c), &clen);
		command_set_background(c); /* what the sandbox's logs show (api_logs.c) */
		if (o->delete_sandbox)
			command_delete_sandbox_at_end(c, sb);
		command_stream_drain(events);
		if (init && done && sse_buf_add(&b, init, ilen) == 0 &&
		    sse_buf_add(&b, done, clen) == 0)
			respond_events(r, b.data, b.len);
		else {
			sse_buf_free(&b);
			http_no_memory(r);
		}
	} else {
		respond_stream(r, sb, c, events, raw);
	}
	if (rc >= 0)
		command_unref(c);
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
	if (!req || (o.stdin && json_object_set_new(req, "stdin", json_true()) < 0)) {
		json_decref(req);
		sandbox_unref(sb);
		return http_no_memory(r);
	}
	run_request(r, sb, req, content, &o);
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
	struct sandbox *sb = api_used_sandbox(r);
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

/* The log is streamed from the command's buffer as the client takes it: a slow reader
 * holds one piece, never a copy of up to CMD_LOG_MAX bytes. */
struct log_stream {
	struct command *c;
	uint64_t pos, end;
};

static ssize_t log_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct log_stream *ls = cls;
	size_t n = command_logs_read(ls->c, &ls->pos, ls->end, buf, max);
	return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void log_stream_free(void *cls)
{
	struct log_stream *ls = cls;
	command_unref(ls->c);
	free(ls);
}

int api_execd_logs(struct http_req *r)
{
	const char *cur = http_query(r, "cursor");
	int64_t cursor = 0;
	if (cur && cur[0] && parse_int64(cur, 0, INT64_MAX, &cursor) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "cursor must be a byte offset (an integer >= 0)");
	struct sandbox *sb = api_used_sandbox(r);
	if (!sb)
		return 0;
	struct command *c = find_command(r, sb, http_param(r, 1));
	sandbox_unref(sb);
	if (!c)
		return 0;
	struct log_stream *ls = malloc(sizeof(*ls));
	if (!ls) {
		command_unref(c);
		return http_no_memory(r);
	}
	/* Up to what was written when the request came: that is the next cursor. */
	*ls = (struct log_stream){.c = c, .pos = (uint64_t)cursor, .end = command_logs_end(c)};
	if (ls->pos > ls->end)
		ls->pos = ls->end;
	char nbuf[32];
	snprintf(nbuf, sizeof(nbuf), "%llu", (unsigned long long)ls->end);
	struct MHD_Response *resp = MHD_create_response_from_callback(
	    MHD_SIZE_UNKNOWN, 64 << 10, log_read, ls, log_stream_free);
	if (!resp) {
		log_stream_free(ls);
		return http_no_memory(r);
	}
	MHD_add_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
	MHD_add_response_header(resp, "EXECD-COMMANDS-TAIL-CURSOR", nbuf);
	return http_respond(r, 200, resp);
}

int api_execd_interrupt(struct http_req *r)
{
	const char *id = http_query(r, "id");
	if (!id || !cell_id_valid(id))
		return http_error(r, 400, "INVALID_ID", "query parameter id must be a command id");
	struct sandbox *sb = api_used_sandbox(r);
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

/* ---- POST /command/{cmd}/stdin (cell's extension) ----
 *
 * The body's raw bytes (at most HTTP_JSON_MAX per request, read whole before this runs) go
 * to the stdin of a command started with "stdin": true, in order, one request at a time;
 * ?close=true closes its stdin afterwards (the command sees EOF). */
int api_execd_stdin(struct http_req *r)
{
	const char *cl = http_query(r, "close");
	bool close_it = false;
	if (cl && !strcmp(cl, "true"))
		close_it = true;
	else if (cl && strcmp(cl, "false"))
		return http_error(r, 400, "INVALID_ARGUMENT", "close must be true or false");
	size_t len = 0;
	const char *data = http_body(r, &len);
	if (!len && !close_it)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "a request body (the bytes for stdin) or close=true is required");
	struct sandbox *sb = api_used_sandbox(r);
	if (!sb)
		return 0;
	struct command *c = find_command(r, sb, http_param(r, 1));
	sandbox_unref(sb);
	if (!c)
		return 0;
	struct cell_error err = {0};
	int rc = command_stdin(c, data, len, close_it, &err);
	command_unref(c);
	if (rc == -ESRCH || rc == -EPIPE)
		return http_error(r, 409, rc == -ESRCH ? "COMMAND_ENDED" : "STDIN_CLOSED", "%s",
				  err.msg);
	if (rc == -EAGAIN)
		return http_fail(r, EAGAIN, "STDIN_FULL", "%s", err.msg);
	if (rc < 0)
		return http_internal(r, &err);
	return http_json(r, 200,
			 json_pack("{s:I, s:b}", "written", (json_int_t)len, "closed", close_it));
}

/* ---- bash sessions: /session, /session/{sid}/run, DELETE /session/{sid} ----
 *
 * A session is one long-lived shell that cell-init keeps in the sandbox (bash, or sh when the
 * image has none: src/init/session.c): a run is fed to it and streamed as a command's events,
 * so its working directory, variables, functions, aliases, options and traps stay for the
 * next run. Runs of one session go one at a time (a second one meanwhile: 409 SESSION_BUSY);
 * a run's timeout or interrupt stops the processes it started, not the shell. The shells are
 * the sandbox's own and die with it. cell-init knows the sessions by id, so they outlive a
 * restart of celld; celld only counts them, for its caps, in the sandbox's table
 * (processes.h). */

static int session_path(const char *cwd, struct cell_error *err)
{
	if (cwd && (cwd[0] != '/' || strlen(cwd) >= PATH_MAX))
		return field_fail(err, "cwd must be an absolute path shorter than %d bytes",
				  PATH_MAX);
	return 0;
}

int api_execd_session_create(struct http_req *r)
{
	json_t *body = NULL, *envs = NULL;
	const char *len = http_header(r, "Content-Length");
	bool empty = len && !strcmp(len, "0");
	if (!empty && http_json_body(r, &body) < 0)
		return 0;
	const char *cwd = NULL;
	struct cell_error err = {0};
	const char *k;
	json_t *v;
	if (body && (field_string(body, "cwd", "cwd", false, &cwd, &err) < 0 ||
		     field_string_map(body, "envs", "envs", &envs, &err) < 0 ||
		     session_path(cwd, &err) < 0)) {
		json_decref(envs);
		json_decref(body);
		return http_error(r, 400, "INVALID_ARGUMENT", "%s", err.msg);
	}
	if (envs)
		json_object_foreach(envs, k, v) if (!k[0] || strchr(k, '='))
		{
			http_error(r, 400, "INVALID_ARGUMENT", "envs key '%.64s' is invalid", k);
			json_decref(envs);
			json_decref(body);
			return 0;
		}
	struct sandbox *sb = api_running_sandbox(r);
	char id[CELL_ID_RANDOM_LEN + 1];
	if (!sb || cell_id_random(id) < 0) {
		json_decref(envs);
		json_decref(body);
		if (sb) {
			sandbox_unref(sb);
			http_no_memory(r);
		}
		return 0;
	}
	/* For the audit log: the session, its cwd and the names of its envs (never values). */
	json_t *rec = json_pack("{s:s, s:s*, s:[]}", "session", id, "cwd", cwd, "envNames");
	json_object_foreach(envs, k, v) if (rec)
	    json_array_append_new(json_object_get(rec, "envNames"), json_string(k));
	char shell[8];
	struct proc_refusal why = {0};
	int rc = proc_shell_open(sb, id, cwd, envs, shell, &why, &err);
	json_decref(envs);
	json_decref(body);
	if (rc == -EUSERS || rc == -ENOSPC) {
		json_decref(rec);
		sandbox_unref(sb);
		return http_error(r, 409, "TOO_MANY_SESSIONS",
				  "a sandbox keeps at most %d bash sessions (celld at most %d): "
				  "delete one first",
				  PROC_SHELLS_PER_SANDBOX, PROC_SHELLS_MAX);
	}
	if (rec)
		json_object_set_new(rec, "ok", json_boolean(rc == 0));
	audit_log(sb->id, "session.open", rec);
	sandbox_unref(sb);
	if (rc < 0)
		return http_internal(r, &err);
	if (rc == 1) {
		if (why.errnum == EMFILE || why.errnum == EEXIST)
			return http_fail(r, EBUSY, "TOO_MANY_SESSIONS", "%s", why.message);
		if (why.errnum == ENOENT)
			return http_fail(r, EINVAL, NULL, "cwd: %s", why.message);
		return http_fail(r, why.errnum, NULL, "%s", why.message);
	}
	if (strcmp(shell, "bash"))
		log_info("sandbox %s: session %s runs sh: the image has no bash", http_param(r, 0),
			 id);
	return http_json(r, 200, json_pack("{s:s, s:s}", "session_id", id, "shell", shell));
}

/* A session refused a run: no such session (404), busy or its shell gone (409). */
static int session_refused(struct http_req *r, struct sandbox *sb, const char *sid,
			   const struct command_refusal *e)
{
	if (e->errnum == ENOENT) {
		proc_shell_forget(sb, sid);
		return http_error(r, 404, "SESSION_NOT_FOUND", "session %s not found", sid);
	}
	if (e->errnum == EBUSY)
		return http_fail(r, EBUSY, "SESSION_BUSY", "%s", e->message);
	if (e->errnum == EPIPE)
		return http_fail(r, EBUSY, "SESSION_EXITED", "%s (delete it)", e->message);
	return http_fail(r, e->errnum, NULL, "%s", e->message);
}

int api_execd_session_run(struct http_req *r)
{
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	const char *command = NULL, *cwd = NULL;
	int64_t timeout = 0;
	struct cell_error err = {0};
	if (field_string(body, "command", "command", true, &command, &err) < 0 ||
	    field_string(body, "cwd", "cwd", false, &cwd, &err) < 0 ||
	    field_int(body, "timeout", "timeout", 0, EXEC_TIMEOUT_MAX_MS, &timeout, &err) < 0 ||
	    (!command[0] && field_fail(&err, "command must not be empty") < 0) ||
	    session_path(cwd, &err) < 0) {
		json_decref(body);
		return http_error(r, 400, "INVALID_ARGUMENT", "%s", err.msg);
	}
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb) {
		json_decref(body);
		return 0;
	}
	const char *sid = http_param(r, 1);
	_cleanup_free_ char *content = NULL;
	json_t *req = command_session_run(sid, command, cwd, timeout, &content);
	json_decref(body);
	if (!req) {
		sandbox_unref(sb);
		return http_no_memory(r);
	}
	struct command *c = NULL;
	struct command_stream *events;
	struct command_refusal why = {0};
	int rc = command_open(sb, true, req, content, http_principal(r), &c, &events, &why, &err);
	json_decref(req);
	if (rc < 0)
		http_internal(r, &err);
	else if (rc == 1)
		session_refused(r, sb, sid, &why);
	else {
		respond_stream(r, sb, c, events, false);
		command_unref(c);
	}
	sandbox_unref(sb);
	return 0;
}

int api_execd_session_delete(struct http_req *r)
{
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	const char *sid = http_param(r, 1);
	struct proc_refusal why = {0};
	struct cell_error err = {0};
	int rc = proc_shell_close(sb, sid, &why, &err);
	sandbox_unref(sb);
	if (rc < 0)
		return http_internal(r, &err);
	if (rc == 1)
		return why.errnum == ENOENT
			   ? http_error(r, 404, "SESSION_NOT_FOUND", "session %s not found", sid)
			   : http_fail(r, why.errnum, NULL, "%s", why.message);
	return http_empty(r, 200);
}
