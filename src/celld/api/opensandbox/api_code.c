/* execd's code routes under /v1/sandboxes/{id}/proxy/44772 (OpenSandbox's code
 * interpreter): contexts (create, list, get, delete, delete by language), a run streamed
 * as server-sent events, and its interrupt. Each is one call of the core's client of the
 * sandbox's code-interpreter service (interpreter.h), whose NDJSON lines become execd's
 * events:
 *   number_of_executions   execution_count
 *   stdout, stderr         stdout, stderr (text as it came)
 *   result                 result, its fields as a MIME bundle ("text/plain", "image/png"...)
 *   error                  error {ename, evalue, traceback: its lines}: the run's last event
 *   end_of_execution       execution_complete {execution_time}, unless an error came
 * The first event is init, whose text is the run's context id: DELETE /code?id= takes it.
 * A client that leaves ends the run (the service interrupts its kernel); pings every
 * PING_EVERY_MS keep a quiet run's stream open. */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "cell/cleanup.h"
#include "cell/id.h"
#include "api.h"
#include "http/http.h"
#include "http/sse.h"
#include "interpreter.h"
#include "sandbox.h"
#include "timefmt.h"

#define PING_EVERY_MS 3000
#define LANGUAGE_MAX  32
#define STREAM_BLOCK  (256u << 10)

/* ---- answers ---- */

/* A failure reaching the service: nothing there is the sandbox's image or start, not
 * celld's (502); the rest through the errno table. */
static int unreachable(struct http_req *r, const struct cell_error *err)
{
	if (err->code == ECONNREFUSED || err->code == EPROTO)
		return http_error(r, 502, "CODE_INTERPRETER_UNAVAILABLE", "%s", err->msg);
	return http_internal(r, err);
}

/* The service's refusal (its text names what was wrong) in execd's error body. */
static int refused(struct http_req *r, const struct interp_answer *a)
{
	const char *code = a->status == 404   ? "CONTEXT_NOT_FOUND"
			   : a->status == 413 ? "REQUEST_TOO_LARGE"
			   : a->status < 500  ? "INVALID_ARGUMENT"
					      : "CODE_INTERPRETER_FAILED";
	unsigned status = a->status >= 400 && a->status < 500 ? (unsigned)a->status : 502;
	return http_error(r, status, code, "%.*s", (int)strcspn(a->body, "\r\n"), a->body);
}

/* A context of the service's as OpenSandbox's CodeContext {id, language}; NULL unless o is
 * one. */
static json_t *context_of(json_t *o)
{
	const char *id = json_string_value(json_object_get(o, "id"));
	const char *lang = json_string_value(json_object_get(o, "language"));
	if (!id || !lang)
		return NULL;
	return json_pack("{s:s, s:s}", "id", id, "language", lang);
}

/* A 2xx answer's body as JSON, or answered (502) and NULL. */
static json_t *answer_json(struct http_req *r, const struct interp_answer *a)
{
	json_error_t jerr;
	json_t *j = json_loadb(a->body, a->len, 0, &jerr);
	if (!j)
		http_error(r, 502, "CODE_INTERPRETER_FAILED",
			   "the code interpreter answered no JSON: %.200s", jerr.text);
	return j;
}

/* One unary call of sb's service: 0 with a 2xx in *a, or answered (and *a freed). */
static int call(struct http_req *r, struct sandbox *sb, const char *method, const char *path,
		json_t *body, struct interp_answer *a)
{
	struct cell_error err = {0};
	int rc = interp_call(sb, method, path, body, a, &err);
	if (rc < 0) {
		unreachable(r, &err);
		return -1;
	}
	if (a->status < 200 || a->status > 299) {
		refused(r, a);
		interp_answer_free(a);
		return -1;
	}
	return 0;
}

static bool language_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (!n || n > LANGUAGE_MAX)
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789+#._-") == n;
}

/* A context id from a client, before it becomes part of a path to the service. */
static bool context_id_ok(const char *s)
{
	return s && cell_id_valid(s);
}

/* ---- contexts ---- */

int api_code_context_create(struct http_req *r)
{
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	json_t *lang = json_object_get(body, "language");
	const char *l = lang ? json_string_value(lang) : "python";
	if (!language_ok(l)) {
		json_decref(body);
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "language must be a language name (python, r...), 1 to %d "
				  "characters",
				  LANGUAGE_MAX);
	}
	json_t *req = json_pack("{s:s}", "language", l);
	json_decref(body);
	if (!req)
		return http_no_memory(r);
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb) {
		json_decref(req);
		return 0;
	}
	struct interp_answer a;
	int rc = call(r, sb, "POST", "/contexts", req, &a);
	json_decref(req);
	sandbox_unref(sb);
	if (rc < 0)
		return 0;
	json_t *j = answer_json(r, &a);
	interp_answer_free(&a);
	if (!j)
		return 0;
	json_t *ctx = context_of(j);
	json_decref(j);
	if (!ctx)
		return http_error(r, 502, "CODE_INTERPRETER_FAILED",
				  "the code interpreter answered no context");
	return http_json(r, 200, ctx);
}

/* The service's contexts of sb (of language when not NULL), as CodeContexts: a new
 * reference, or answered and NULL. */
static json_t *contexts_of(struct http_req *r, struct sandbox *sb, const char *language)
{
	struct interp_answer a;
	if (call(r, sb, "GET", "/contexts", NULL, &a) < 0)
		return NULL;
	json_t *all = answer_json(r, &a);
	interp_answer_free(&a);
	if (!all)
		return NULL;
	json_t *out = json_array();
	size_t i;
	json_t *c;
	json_array_foreach(all, i, c)
	{
		json_t *ctx = context_of(c);
		const char *l = json_string_value(json_object_get(ctx, "language"));
		if (ctx && (!language || !strcmp(l, language)))
			json_array_append_new(out, ctx);
		else
			json_decref(ctx);
	}
	json_decref(all);
	if (!out)
		http_no_memory(r);
	return out;
}

static const char *language_query(struct http_req *r, bool required, bool *bad)
{
	const char *l = http_query(r, "language");
	*bad = (l && !language_ok(l)) || (required && !l);
	if (*bad)
		http_error(r, 400, "INVALID_ARGUMENT",
			   "query parameter language must name a language (python, r...)");
	return l;
}

int api_code_contexts_list(struct http_req *r)
{
	bool bad;
	const char *language = language_query(r, false, &bad);
	if (bad)
		return 0;
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	json_t *list = contexts_of(r, sb, language);
	sandbox_unref(sb);
	return list ? http_json(r, 200, list) : 0;
}

/* DELETE one context; the language's default context (the service keeps it) is restarted
 * instead: its state goes as a deleted one's would. 0, or answered. */
static int remove_context(struct http_req *r, struct sandbox *sb, const char *id)
{
	char path[CELL_ID_MAX + 32];
	snprintf(path, sizeof(path), "/contexts/%s", id);
	struct cell_error err = {0};
	struct interp_answer a;
	if (interp_call(sb, "DELETE", path, NULL, &a, &err) < 0)
		return unreachable(r, &err), -1;
	int status = a.status;
	if (status == 400) { /* the default context: restarted, not removed */
		interp_answer_free(&a);
		snprintf(path, sizeof(path), "/contexts/%s/restart", id);
		if (interp_call(sb, "POST", path, NULL, &a, &err) < 0)
			return unreachable(r, &err), -1;
		status = a.status;
	}
	if (status < 200 || status > 299) {
		refused(r, &a);
		interp_answer_free(&a);
		return -1;
	}
	interp_answer_free(&a);
	return 0;
}

int api_code_contexts_delete(struct http_req *r)
{
	bool bad;
	const char *language = language_query(r, true, &bad);
	if (bad)
		return 0;
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	json_t *list = contexts_of(r, sb, language);
	size_t i;
	json_t *c;
	int rc = list ? 0 : -1;
	json_array_foreach(list, i, c)
	{
		if (rc == 0)
			rc = remove_context(r, sb, json_string_value(json_object_get(c, "id")));
	}
	json_decref(list);
	sandbox_unref(sb);
	return rc == 0 ? http_empty(r, 200) : 0;
}

/* {cmd} (param 1) as a context id, or answered 404 and NULL. */
static const char *context_param(struct http_req *r)
{
	const char *id = http_param(r, 1);
	if (!context_id_ok(id)) {
		http_error(r, 404, "CONTEXT_NOT_FOUND", "no context '%.64s'", id ? id : "");
		return NULL;
	}
	return id;
}

int api_code_context_get(struct http_req *r)
{
	const char *id = context_param(r);
	if (!id)
		return 0;
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	char path[CELL_ID_MAX + 32];
	snprintf(path, sizeof(path), "/contexts/%s", id);
	struct interp_answer a;
	int rc = call(r, sb, "GET", path, NULL, &a);
	sandbox_unref(sb);
	if (rc < 0)
		return 0;
	json_t *j = answer_json(r, &a);
	interp_answer_free(&a);
	json_t *ctx = context_of(j);
	json_decref(j);
	if (!ctx)
		return j ? http_error(r, 502, "CODE_INTERPRETER_FAILED",
				      "the code interpreter answered no context")
			 : 0;
	return http_json(r, 200, ctx);
}

int api_code_context_delete(struct http_req *r)
{
	const char *id = context_param(r);
	if (!id)
		return 0;
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	int rc = remove_context(r, sb, id);
	sandbox_unref(sb);
	return rc == 0 ? http_empty(r, 200) : 0;
}

/* DELETE /code?id=<context>: the run in progress there is interrupted (its stream ends
 * with the error the interrupt raised); an unknown context is 404. */
int api_code_interrupt(struct http_req *r)
{
	const char *id = http_query(r, "id");
	if (!id || !*id)
		return http_error(r, 400, "INVALID_ARGUMENT", "query parameter id is required");
	if (!context_id_ok(id))
		return http_error(r, 404, "CONTEXT_NOT_FOUND", "no context '%.64s'", id);
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	char path[CELL_ID_MAX + 32];
	snprintf(path, sizeof(path), "/contexts/%s/interrupt", id);
	struct interp_answer a;
	int rc = call(r, sb, "POST", path, NULL, &a);
	sandbox_unref(sb);
	if (rc < 0)
		return 0;
	interp_answer_free(&a);
	return http_empty(r, 200);
}

/* ---- a run ---- */

struct code_stream {
	struct sandbox *sb;
	struct interp_run *run;
	struct sse_buf out;
	int client_fd;
	int64_t t0, next_ping;
	bool failed; /* an error event went out: the run's last */
	bool done;
};

/* Appends the event ev (taken) as "<json>\n\n". */
static void emit(struct code_stream *s, json_t *ev)
{
	if (!ev)
		return;
	json_object_set_new(ev, "timestamp", json_integer(celld_now_ms()));
	char *text = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	if (text) {
		sse_buf_add(&s->out, text, strlen(text));
		sse_buf_add(&s->out, "\n\n", 2);
	}
	free(text);
}

static void emit_error(struct code_stream *s, const char *name, const char *value,
		       json_t *traceback)
{
	emit(s, json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "error", "error", "ename", name,
			  "evalue", value, "traceback", traceback ? traceback : json_array()));
	s->failed = true;
}

/* The service's result fields as a MIME bundle. */
static json_t *mime_bundle(json_t *line)
{
	static const char *const fields[][2] = {
	    {"text", "text/plain"},
	    {"html", "text/html"},
	    {"markdown", "text/markdown"},
	    {"svg", "image/svg+xml"},
	    {"png", "image/png"},
	    {"jpeg", "image/jpeg"},
	    {"pdf", "application/pdf"},
	    {"latex", "text/latex"},
	    {"json", "application/json"},
	    {"javascript", "application/javascript"},
	    {"data", "application/vnd.cell.data+json"},
	    {"chart", "application/vnd.cell.chart+json"},
	};
	json_t *b = json_object();
	for (size_t i = 0; b && i < sizeof(fields) / sizeof(fields[0]); i++) {
		json_t *v = json_object_get(line, fields[i][0]);
		if (v && !json_is_null(v))
			json_object_set(b, fields[i][1], v);
	}
	json_t *extra = json_object_get(line, "extra");
	if (b && json_is_object(extra))
		json_object_update_missing(b, extra);
	return b;
}

/* The traceback as its lines (the service sends one text). */
static json_t *traceback_lines(json_t *tb)
{
	json_t *lines = json_array();
	const char *t = json_string_value(tb);
	while (lines && t && *t) {
		size_t n = strcspn(t, "\n");
		json_array_append_new(lines, json_stringn(t, n));
		t += n + (t[n] == '\n');
	}
	if (lines && json_is_array(tb))
		json_array_extend(lines, tb);
	return lines;
}

/* One line of the service's as execd's event(s). */
static void translate(struct code_stream *s, json_t *line)
{
	const char *type = json_string_value(json_object_get(line, "type"));
	if (!type)
		type = "";
	if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
		const char *text = json_string_value(json_object_get(line, "text"));
		emit(s, json_pack("{s:s, s:s}", "type", type, "text", text ? text : ""));
	} else if (!strcmp(type, "result")) {
		emit(s, json_pack("{s:s, s:o}", "type", "result", "results", mime_bundle(line)));
	} else if (!strcmp(type, "number_of_executions")) {
		json_t *n = json_object_get(line, "execution_count");
		if (json_is_integer(n))
			emit(s, json_pack("{s:s, s:O}", "type", "execution_count",
					  "execution_count", n));
	} else if (!strcmp(type, "error")) {
		const char *name = json_string_value(json_object_get(line, "name"));
		const char *value = json_string_value(json_object_get(line, "value"));
		if (!s->failed)
			emit_error(s, name ? name : "Error", value ? value : "",
				   traceback_lines(json_object_get(line, "traceback")));
	} else if (!strcmp(type, "end_of_execution")) {
		if (!s->failed)
			emit(s, json_pack("{s:s, s:I}", "type", "execution_complete",
					  "execution_time", (json_int_t)(celld_now_ms() - s->t0)));
		s->done = true;
	} else if (!strcmp(type, "unexpected_end_of_execution")) {
		if (!s->failed)
			emit_error(s, "KernelDied",
				   "the kernel died during the run; the next run starts a fresh "
				   "one",
				   NULL);
		s->done = true;
	}
}

/* Wait for the run's next bytes, the client's hangup, or the next ping. */
static void stream_wait(struct code_stream *s)
{
	int64_t wait = s->next_ping - celld_now_ms();
	if (wait <= 0) {
		s->next_ping = celld_now_ms() + PING_EVERY_MS;
		size_t len;
		char *ping = sse_ping(&len);
		if (ping)
			sse_buf_add(&s->out, ping, len);
		free(ping);
		return;
	}
	struct pollfd p[2] = {{.fd = interp_run_fd(s->run), .events = POLLIN},
			      {.fd = s->client_fd, .events = POLLRDHUP}};
	int n = poll(p, s->client_fd >= 0 ? 2 : 1, (int)wait);
	if (n > 0 && s->client_fd >= 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
		s->done = true; /* the client left: closing the run interrupts it */
}

static void stream_step(struct code_stream *s)
{
	json_t *line = NULL;
	struct cell_error err = {0};
	int rc = interp_run_next(s->run, &line, &err);
	if (rc == 1) {
		translate(s, line);
		json_decref(line);
	} else if (rc == -EAGAIN) {
		stream_wait(s);
	} else {
		if (!s->failed)
			emit_error(s, "CodeInterpreterError",
				   rc == 0 ? "the code interpreter ended the run without its end"
					   : err.msg,
				   NULL);
		s->done = true;
	}
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct code_stream *s = cls;
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
	struct code_stream *s = cls;
	interp_run_close(s->run);
	sandbox_stream_end(s->sb);
	sandbox_unref(s->sb);
	sse_buf_free(&s->out);
	free(s);
}

/* The run's request for the service from execd's {code, context: {id?, language?}}, or
 * answered 400 and NULL. */
static json_t *run_request(struct http_req *r, json_t *body)
{
	json_t *code = json_object_get(body, "code");
	json_t *ctx = json_object_get(body, "context");
	const char *bad = NULL;
	if (!json_is_string(code) || !json_string_length(code))
		bad = "code must be a non-empty string";
	else if (ctx && !json_is_object(ctx) && !json_is_null(ctx))
		bad = "context must be an object {id?, language?}";
	const char *id = json_string_value(json_object_get(ctx, "id"));
	const char *lang = json_string_value(json_object_get(ctx, "language"));
	if (!bad && id && *id && !context_id_ok(id))
		bad = "context.id is no context id";
	if (!bad && lang && !language_ok(lang))
		bad = "context.language must name a language (python, r...)";
	if (bad) {
		http_error(r, 400, "INVALID_ARGUMENT", "%s", bad);
		return NULL;
	}
	/* A context names its language too; the service takes one or the other. text_repr:
	 * results' text/plain as Jupyter gives it, as execd hands it on (E2B's protocol strips
	 * a string's quotes). */
	json_t *req =
	    id && *id ? json_pack("{s:O, s:s, s:b}", "code", code, "context_id", id, "text_repr", 1)
		      : json_pack("{s:O, s:s, s:b}", "code", code, "language",
				  lang ? lang : "python", "text_repr", 1);
	if (!req)
		http_no_memory(r);
	return req;
}

int api_code_run(struct http_req *r)
{
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	json_t *req = run_request(r, body);
	const char *id = json_string_value(json_object_get(json_object_get(body, "context"), "id"));
	char ctx_id[CELL_ID_MAX + 1];
	snprintf(ctx_id, sizeof(ctx_id), "%s", id ? id : "");
	json_decref(body);
	if (!req)
		return 0;
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb) {
		json_decref(req);
		return 0;
	}
	struct interp_run *run = NULL;
	struct interp_answer no;
	struct cell_error err = {0};
	int64_t t0 = celld_now_ms();
	int rc = interp_run_open(sb, req, &run, &no, &err);
	json_decref(req);
	if (rc != 0) {
		sandbox_unref(sb);
		if (rc < 0)
			return unreachable(r, &err);
		refused(r, &no);
		interp_answer_free(&no);
		return 0;
	}
	if (interp_run_context(run))
		snprintf(ctx_id, sizeof(ctx_id), "%s", interp_run_context(run));
	struct code_stream *s = calloc(1, sizeof(*s));
	if (!s) {
		interp_run_close(run);
		sandbox_unref(sb);
		return http_no_memory(r);
	}
	*s = (struct code_stream){.sb = sb, .run = run, .client_fd = http_socket(r), .t0 = t0};
	s->next_ping = celld_now_ms() + PING_EVERY_MS;
	/* A client reading a run's events is using the sandbox until the stream ends. */
	sandbox_stream_begin(sb);
	size_t len;
	char *init = sse_init(ctx_id, &len);
	if (init)
		sse_buf_add(&s->out, init, len);
	free(init);
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
