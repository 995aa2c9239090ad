/* execd's terminals under /v1/sandboxes/{id}/proxy/44772: POST /pty, GET and DELETE
 * /pty/{sid}, and the WebSocket of GET /pty/{sid}/ws (OpenSandbox execd's PTY API).
 *
 * cell-init keeps the terminal (its process, its PTY or pipes, its scrollback, who is
 * attached), reached through processes.h; this front makes the id and speaks WebSocket. A WebSocket
 * is one PTY_ATTACH conversation, held on the HTTP connection's own thread: one poll loop over the
 * client's socket and the relay. Attaching happens before the 101, so an unknown session (404) and
 * one already held (409 without ?takeover=1) are plain HTTP answers. Then: a JSON "connected"
 * frame, binary frames with a channel byte (0x01 stdout, 0x02 stderr in pipe mode, 0x03 replay: an
 * 8-byte big-endian offset, then bytes), and from the client binary 0x00+bytes (stdin) or JSON text
 * frames (stdin, resize, signal, ping). The process's end is an "exit" frame and close 1000; a
 * takeover closes the previous holder with 4001 TAKEN_OVER. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/id.h"
#include "cell/log.h"
#include "api.h"
#include "audit.h"
#include "fields.h"
#include "http/http.h"
#include "processes.h"
#include "sandbox.h"
#include "timefmt.h"
#include "http/websocket.h"

#define PTY_COMMAND_MAX (64u << 10)
/* Columns and rows as cell-init bounds them: a larger window (a wide screen, a small
 * font) gets this many rather than a refusal; below 1 is an error. */
#define PTY_DIM_MAX 1000
#define WS_MSG_MAX  (1u << 20) /* a client message; larger ones close with 1009 */
#define WS_PING_MS  30000      /* as execd */
#define WS_IDLE_MS  60000      /* a client silent this long is dropped (as execd) */
#define WS_CLOSE_MS 5000       /* the close handshake, then the socket is closed */
#define WS_STOP_MS  500	       /* the same when celld stops (its exit waits for this thread) */

static int not_found(struct http_req *r, const char *sid)
{
	return http_error(r, 404, "CONTEXT_NOT_FOUND", "pty session %s not found", sid);
}

/* A refusal of cell-init's on a PTY request: 404 for an unknown session, else the errno
 * table. */
static int refused(struct http_req *r, const char *sid, const struct proc_refusal *e)
{
	if (e->errnum == ENOENT)
		return not_found(r, sid);
	if (e->errnum == EMFILE || e->errnum == EEXIST)
		return http_fail(r, EBUSY, "TOO_MANY_SESSIONS", "%s", e->message);
	return http_fail(r, e->errnum, NULL, "%s", e->message);
}

/* Answer a failed PTY request (rc: 1 refused, else -errno with err); returns 1 when it
 * did. */
static int failed(struct http_req *r, int rc, const struct proc_refusal *why,
		  const struct cell_error *err)
{
	if (rc < 0)
		return http_internal(r, err), 1;
	if (rc == 1)
		return refused(r, http_param(r, 1), why), 1;
	return 0;
}

/* PTY_STATUS of session sid of sandbox {id}: 0 with its answer, or answered (1). */
static int status_of(struct http_req *r, const char *sid, bool *running, int64_t *offset)
{
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 1;
	struct proc_refusal why;
	struct cell_error err = {0};
	int rc = proc_status(sb, sid, running, offset, &why, &err);
	sandbox_unref(sb);
	if (rc == 2)
		return http_error(r, 502, "SANDBOX_PROTOCOL",
				  "cell-init sent an invalid status of pty session %s", sid),
		       1;
	return failed(r, rc, &why, &err);
}

/* ---- POST /pty {"cwd"?, "command"?} → 201 {"session_id"} ---- */

int api_pty_create(struct http_req *r)
{
	json_t *body = NULL;
	size_t len = 0;
	http_body(r, &len);
	if (len && http_json_body(r, &body) < 0) /* no body: the defaults, as execd */
		return 0;
	const char *cwd = NULL, *command = NULL;
	struct cell_error err = {0};
	if (body && (field_string(body, "cwd", "cwd", false, &cwd, &err) < 0 ||
		     field_string(body, "command", "command", false, &command, &err) < 0)) {
		json_decref(body);
		return http_error(r, 400, "INVALID_REQUEST_BODY", "%s", err.msg);
	}
	if (cwd && !cwd[0])
		cwd = NULL;
	if (command && !command[0])
		command = NULL;
	const char *bad = NULL;
	if (cwd && (cwd[0] != '/' || strlen(cwd) >= PATH_MAX))
		bad = "cwd must be an absolute path shorter than 4096 bytes";
	else if (command && strlen(command) > PTY_COMMAND_MAX)
		bad = "command must be at most 65536 bytes";
	else if (command && strlen(command) != json_string_length(json_object_get(body, "command")))
		bad = "command must not contain a NUL byte";
	if (bad) {
		json_decref(body);
		return http_error(r, 400, "INVALID_REQUEST_BODY", "%s", bad);
	}
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb) {
		json_decref(body);
		return 0;
	}
	char id[CELL_ID_RANDOM_LEN + 1];
	int rc = cell_id_random(id);
	/* What the table keeps of it: what it runs and where. */
	json_t *config = rc == 0 ? json_pack("{s:s*, s:s*}", "command", command, "cwd", cwd) : NULL;
	/* The sandbox's environment, as a bash session's; its mode is its first attach's. */
	const struct proc_spec spec = {.api = PROC_API_OPENSANDBOX,
				       .sid = id,
				       .command = command,
				       .cwd = cwd,
				       .stdin_open = -1,
				       .timeout_ms = -1,
				       .pty = true,
				       .config = config};
	struct proc_refusal why = {0};
	int pid;
	rc = config ? proc_start(sb, &spec, NULL, &pid, &why, &err)
		    : cell_err(&err, ENOMEM, "out of memory");
	json_decref(config);
	json_decref(body);
	sandbox_unref(sb);
	if (rc == 1 && (why.errnum == EINVAL || why.errnum == ENOENT))
		return http_fail(r, EINVAL, "INVALID_REQUEST_BODY", "%s", why.message);
	if (rc == 1)
		return refused(r, id, &why);
	if (rc < 0)
		return http_internal(r, &err);
	return http_json(r, 201, json_pack("{s:s}", "session_id", id));
}

/* ---- GET /pty/{sid} → {"session_id","running","output_offset"} ---- */

int api_pty_status(struct http_req *r)
{
	const char *sid = http_param(r, 1);
	bool running;
	int64_t off;
	if (status_of(r, sid, &running, &off))
		return 0;
	return http_json(r, 200,
			 json_pack("{s:s, s:b, s:I}", "session_id", sid, "running", running,
				   "output_offset", (json_int_t)off));
}

/* ---- DELETE /pty/{sid}: its process group killed, the session gone ---- */

int api_pty_delete(struct http_req *r)
{
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	struct proc_refusal why;
	struct cell_error err = {0};
	int rc = proc_close(sb, http_param(r, 1), &why, &err);
	sandbox_unref(sb);
	if (failed(r, rc, &why, &err))
		return 0;
	return http_empty(r, 200);
}

/* ---- GET /pty/{sid}/ws ---- */

struct term {
	char sid[CELL_ID_MAX + 1];
	char mode[8];		/* "pty" or "pipe" */
	struct proc_conn *conn; /* the attached conversation; NULL once it ended */
	char fail[300];		/* the process could not start: sent as START_FAILED, then closed */
	struct websocket *ws;
	bool over;	 /* stop reading the client: a fatal error or the end was sent */
	bool input_gone; /* init closed its side: what it sent last (ERROR, EXIT) tells why */
	/* Input sent and not yet taken by the process (PROC_STDIN_WINDOW at most), and the one
	 * message held back, the client unread meanwhile, until the window has room for it. */
	uint64_t unacked;
	uint8_t *held;
	size_t held_len;
	/* Referenced while attached, and counted in its streams: an attached terminal is
	 * activity for the idle timer however quiet it is. */
	struct sandbox *sb;
};

static void term_free(void *cls)
{
	struct term *t = cls;
	proc_conn_close(t->conn);
	free(t->held);
	if (t->sb) {
		sandbox_stream_end(t->sb);
		sandbox_unref(t->sb);
	}
	free(t);
}

static void send_json(struct term *t, json_t *o)
{
	_cleanup_free_ char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (text)
		websocket_send(t->ws, true, text, strlen(text));
}

static void send_error(struct term *t, const char *code, const char *msg)
{
	send_json(t, json_pack("{s:s, s:s, s:s}", "type", "error", "error", msg, "code", code));
}

static void conn_end(struct term *t)
{
	proc_conn_close(t->conn);
	t->conn = NULL;
}

/* The end of the conversation: close with code (after a last frame the caller queued). */
static void term_end(struct term *t, uint16_t code, const char *reason)
{
	conn_end(t);
	if (!t->over)
		websocket_close(t->ws, code, reason);
	t->over = true;
}

static void conn_failed(struct term *t, const char *what, const struct cell_error *err)
{
	char msg[CELL_ERROR_MSG_MAX + 64];
	snprintf(msg, sizeof(msg), "%s: %s", what, err->msg);
	send_error(t, "RUNTIME_ERROR", msg);
	term_end(t, WEBSOCKET_INTERNAL, "relay failed");
}

/* What a send to the process returned: on -EPIPE or -ECONNRESET, init ended the
 * conversation (a takeover, the process's end, a bound): the frames it sent before that are
 * still to be read, and say which. */
static void sent(struct term *t, int rc, bool input, const struct cell_error *err)
{
	if (rc == -EPIPE || rc == -ECONNRESET) {
		t->input_gone = true;
		return;
	}
	if (rc < 0) {
		send_error(t, input ? "STDIN_WRITE_FAILED" : "RUNTIME_ERROR", err->msg);
		term_end(t, WEBSOCKET_INTERNAL, "relay failed");
	}
}

/* The process has ended: input goes nowhere. */
static bool gone(const struct term *t)
{
	return !t->conn || t->input_gone;
}

static void send_input(struct term *t, const void *data, size_t len)
{
	struct cell_error err = {0};
	if (!gone(t))
		sent(t, proc_conn_input(t->conn, data, len, &err), true, &err);
}

static void send_resize(struct term *t, unsigned cols, unsigned rows)
{
	struct cell_error err = {0};
	if (!gone(t))
		sent(t, proc_conn_resize(t->conn, cols, rows, &err), false, &err);
}

static void send_signal(struct term *t, int sig)
{
	struct cell_error err = {0};
	if (!gone(t))
		sent(t, proc_conn_signal(t->conn, sig, &err), false, &err);
}

static const struct {
	const char *name;
	int sig;
} signals[] = {
    {"SIGINT", SIGINT},	  {"SIGTERM", SIGTERM},	  {"SIGKILL", SIGKILL}, {"SIGQUIT", SIGQUIT},
    {"SIGHUP", SIGHUP},	  {"SIGTSTP", SIGTSTP},	  {"SIGCONT", SIGCONT}, {"SIGUSR1", SIGUSR1},
    {"SIGUSR2", SIGUSR2}, {"SIGWINCH", SIGWINCH},
};

static json_int_t dim(json_int_t v)
{
	return v > PTY_DIM_MAX ? PTY_DIM_MAX : v;
}

/* Input for the process: sent while the window has room for it, else held (one message, the
 * client not read meanwhile) until STDIN_TAKEN makes room. */
static void to_stdin(struct term *t, const void *data, size_t len)
{
	if (!t->held && t->unacked + len <= PROC_STDIN_WINDOW) {
		t->unacked += len;
		send_input(t, data, len);
		return;
	}
	uint8_t *h = realloc(t->held, t->held_len + len);
	if (!h) {
		send_error(t, "STDIN_WRITE_FAILED", "out of memory");
		term_end(t, WEBSOCKET_INTERNAL, "out of memory");
		return;
	}
	memcpy(h + t->held_len, data, len);
	t->held = h;
	t->held_len += len;
	websocket_read_pause(t->ws, true);
}

static void stdin_taken(struct term *t, uint64_t n)
{
	t->unacked -= n < t->unacked ? n : t->unacked;
	if (!t->held || t->unacked + t->held_len > PROC_STDIN_WINDOW)
		return;
	uint8_t *h = t->held;
	size_t len = t->held_len;
	t->held = NULL;
	t->held_len = 0;
	t->unacked += len;
	send_input(t, h, len);
	free(h);
	websocket_read_pause(t->ws, false);
}

static void on_text(struct term *t, const uint8_t *data, size_t len)
{
	json_error_t jerr;
	json_t *o = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &jerr);
	const char *type = json_string_value(json_object_get(o, "type"));
	char msg[200];
	if (!json_is_object(o) || !type) {
		send_error(t, "INVALID_FRAME",
			   "a text frame must be a JSON object with a \"type\"");
	} else if (!strcmp(type, "ping")) {
		send_json(t, json_pack("{s:s}", "type", "pong"));
	} else if (!strcmp(type, "stdin")) {
		json_t *d = json_object_get(o, "data");
		if (!json_is_string(d))
			send_error(t, "INVALID_FRAME", "stdin: data must be a string");
		else if (json_string_length(d))
			to_stdin(t, json_string_value(d), json_string_length(d));
	} else if (!strcmp(type, "resize")) {
		json_t *c = json_object_get(o, "cols"), *rw = json_object_get(o, "rows");
		json_int_t cols = json_integer_value(c), rows = json_integer_value(rw);
		if (!json_is_integer(c) || !json_is_integer(rw) || cols < 1 || rows < 1 ||
		    cols > 65535 || rows > 65535)
			send_error(t, "INVALID_FRAME", "resize: cols and rows must be 1-65535");
		else
			send_resize(t, (unsigned)dim(cols), (unsigned)dim(rows));
	} else if (!strcmp(type, "signal")) {
		const char *name = json_string_value(json_object_get(o, "signal"));
		int sig = 0;
		for (size_t i = 0; name && i < CELL_ARRAY_SIZE(signals); i++)
			if (!strcmp(name, signals[i].name))
				sig = signals[i].sig;
		if (!sig) {
			snprintf(msg, sizeof(msg),
				 "signal: unknown signal '%.40s' (SIGINT, SIGTERM, "
				 "SIGKILL, SIGQUIT, SIGHUP, ...)",
				 name ? name : "");
			send_error(t, "INVALID_FRAME", msg);
		} else {
			send_signal(t, sig);
		}
	} else {
		snprintf(msg, sizeof(msg), "unknown frame type \"%.40s\"", type);
		send_error(t, "INVALID_FRAME", msg);
	}
	json_decref(o);
}

static void on_message(void *cls, bool text, const uint8_t *data, size_t len)
{
	struct term *t = cls;
	if (t->over)
		return;
	if (text)
		on_text(t, data, len);
	else if (len && data[0] == 0x00)
		to_stdin(t, data + 1, len - 1);
	else if (len)
		send_error(t, "INVALID_FRAME", "a binary frame from the client is 0x00 then stdin");
}

/* One frame from init, turned into the client's. */
static void from_conn(struct term *t)
{
	struct proc_event ev;
	struct cell_error err = {0};
	if (proc_conn_read(t->conn, &ev, &err) < 0) {
		conn_failed(t, "the terminal's relay", &err);
		return;
	}
	switch (ev.kind) {
	case PROC_EV_STDOUT:
		websocket_send_prefixed(t->ws, 0x01, ev.data, ev.len);
		break;
	case PROC_EV_STDERR:
		websocket_send_prefixed(t->ws, 0x02, ev.data, ev.len);
		break;
	case PROC_EV_REPLAY: /* its payload is already the offset, then the bytes */
		websocket_send_prefixed(t->ws, 0x03, ev.data, ev.len);
		break;
	case PROC_EV_STDIN_TAKEN:
		stdin_taken(t, ev.taken);
		break;
	case PROC_EV_EXIT:
		send_json(t, json_pack("{s:s, s:i}", "type", "exit", "exit_code", ev.exit.code));
		term_end(t, WEBSOCKET_NORMAL, "process exited");
		break;
	case PROC_EV_ERROR:
		if (ev.error.errnum == ECONNABORTED) {
			term_end(t, 4001, "TAKEN_OVER");
		} else {
			send_error(t, "RUNTIME_ERROR", ev.error.message);
			term_end(t, WEBSOCKET_INTERNAL, "terminal failed");
		}
		break;
	}
}

static void term_run(void *cls, int fd, const char *extra, size_t extra_len,
		     struct http_upgrade *handle)
{
	struct term *t = cls;
	struct cell_error err = {0};
	t->ws = websocket_new(fd, extra, extra_len, WS_MSG_MAX, on_message, t, &err);
	if (!t->ws)
		goto out;
	if (t->fail[0]) {
		send_error(t, "START_FAILED", t->fail);
		term_end(t, WEBSOCKET_INTERNAL, "start failed");
	} else {
		send_json(t, json_pack("{s:s, s:s, s:s}", "type", "connected", "session_id", t->sid,
				       "mode", t->mode));
	}
	int64_t next_ping = celld_now_ms() + WS_PING_MS, close_by = 0;
	/* Bytes that came with the request head first: poll would not report them. */
	short revents = 0;
	for (;;) {
		if (websocket_io(t->ws, revents) < 0)
			break; /* the client is gone (or not reading): detached, the process runs on
				*/
		short want = websocket_events(t->ws);
		if (!want && !t->held)
			break; /* the close handshake is over */
		int64_t now = celld_now_ms();
		if (t->over && !close_by)
			close_by = now + WS_CLOSE_MS;
		if (close_by && now >= close_by)
			break;
		/* A client held back by the window is not silent: it is not being read. */
		if (!t->over && !t->held && now - websocket_heard_ms(t->ws) >= WS_IDLE_MS) {
			log_info("pty %s: the client was silent for %d s: dropped", t->sid,
				 WS_IDLE_MS / 1000);
			break;
		}
		if (now >= next_ping) {
			websocket_ping(t->ws);
			next_ping = now + WS_PING_MS;
			revents = 0;
			continue;
		}
		struct pollfd p[3] = {{.fd = fd, .events = want}, {.fd = -1}, {.fd = -1}};
		/* Output is read from the relay while the client keeps up: a slow client slows
		 * the terminal's output (it goes to the scrollback), never grows celld. */
		if (t->conn && !websocket_backlogged(t->ws))
			p[1] = (struct pollfd){.fd = proc_conn_fd(t->conn), .events = POLLIN};
		if (!t->over)
			p[2] = (struct pollfd){.fd = http_upgrades_stopping_fd(), .events = POLLIN};
		int64_t until = close_by ? close_by : next_ping;
		int64_t idle = websocket_heard_ms(t->ws) + WS_IDLE_MS;
		if (!t->over && !t->held && idle < until)
			until = idle;
		int n = poll(p, 3, (int)(until > now ? until - now : 0));
		if (n < 0 && errno != EINTR)
			break;
		revents = n > 0 ? p[0].revents : 0;
		if (n > 0 && p[1].revents)
			from_conn(t);
		/* celld stops: detach (the process runs on in the sandbox) and say so. */
		if (n > 0 && p[2].revents && !t->over) {
			term_end(t, WEBSOCKET_GOING_AWAY, "celld is stopping");
			close_by = celld_now_ms() + WS_STOP_MS;
		}
	}
	/* Leftover queued frames are dropped: the socket closes below either way. */
out:
	websocket_free(t->ws);
	term_free(t);
	http_upgrade_done(handle);
}

/* A query flag: absent → dflt; "1"/"true" or "0"/"false"; anything else answered 400. */
static int query_flag(struct http_req *r, const char *key, bool dflt, bool *out)
{
	const char *v = http_query(r, key);
	*out = dflt;
	if (!v || !v[0])
		return 0;
	if (!strcmp(v, "1") || !strcmp(v, "true"))
		*out = true;
	else if (!strcmp(v, "0") || !strcmp(v, "false"))
		*out = false;
	else
		return http_error(r, 400, "INVALID_ARGUMENT", "%s must be 0 or 1 (or false, true)",
				  key),
		       -EINVAL;
	return 0;
}

static int query_num(struct http_req *r, const char *key, int64_t min, int64_t max, int64_t *out)
{
	const char *v = http_query(r, key);
	*out = -1;
	if (!v || !v[0])
		return 0;
	if (parse_int64(v, min, max, out) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT", "%s must be an integer %lld-%lld",
				  key, (long long)min, (long long)max),
		       -EINVAL;
	return 0;
}

int api_pty_ws(struct http_req *r)
{
	const char *sid = http_param(r, 1);
	bool pty, takeover;
	int64_t since, cols, rows;
	if (query_flag(r, "pty", true, &pty) < 0 ||
	    query_flag(r, "takeover", false, &takeover) < 0 ||
	    query_num(r, "since", 0, INT64_MAX, &since) < 0 ||
	    query_num(r, "cols", 1, 65535, &cols) < 0 || query_num(r, "rows", 1, 65535, &rows) < 0)
		return 0;
	char accept[WEBSOCKET_ACCEPT_LEN + 1];
	struct cell_error herr = {0};
	const struct websocket_handshake hs = {
	    .method = http_method(r),
	    .upgrade = http_header(r, "Upgrade"),
	    .connection = http_header(r, "Connection"),
	    .version = http_header(r, "Sec-WebSocket-Version"),
	    .key = http_header(r, "Sec-WebSocket-Key"),
	};
	if (websocket_check(&hs, accept, &herr) < 0) {
		/* An unknown session is still a 404, as execd answers it before the upgrade. */
		bool running;
		int64_t off;
		if (status_of(r, sid, &running, &off))
			return 0;
		return http_error(r, 400, "BAD_HANDSHAKE", "%s", herr.msg);
	}
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	/* No since is 0, as execd takes it: an attach replays all the kept output. */
	const struct proc_attach a = {.sid = sid,
				      .pty = pty,
				      .takeover = takeover,
				      .since = since >= 0 ? since : 0,
				      .cols = cols > 0 ? (unsigned)dim(cols) : 0,
				      .rows = rows > 0 ? (unsigned)dim(rows) : 0};
	struct term *t = calloc(1, sizeof(*t));
	struct proc_attached info = {0};
	struct proc_refusal why = {0};
	struct cell_error err = {0};
	int rc = t ? proc_attach(sb, &a, &t->conn, &info, &why, &err)
		   : cell_err(&err, ENOMEM, "out of memory");
	if (rc < 0 || (rc == 1 && (why.errnum == ENOENT || why.errnum == EBUSY))) {
		sandbox_unref(sb);
		free(t);
		if (rc < 0)
			return http_internal(r, &err);
		if (why.errnum == ENOENT)
			return not_found(r, sid);
		return http_error(r, 409, "ALREADY_CONNECTED",
				  "another client is already connected to pty session %s (use "
				  "?takeover=1 to take it over)",
				  sid);
	}
	t->sb = sb; /* our reference moves to t */
	sandbox_stream_begin(sb);
	snprintf(t->sid, sizeof(t->sid), "%s", sid);
	snprintf(t->mode, sizeof(t->mode), "%s", rc == 0 && !info.is_pty ? "pipe" : "pty");
	if (rc == 1) /* init could not start its process: told on the WebSocket, as execd */
		snprintf(t->fail, sizeof(t->fail), "%s", why.message);
	/* The HTTP server adds Connection: Upgrade to a 101 itself. */
	const char *const headers[] = {"Sec-WebSocket-Accept", accept, NULL};
	if (http_upgrade_ex(r, "websocket", headers, term_run, t, term_free) < 0) {
		term_free(t);
		return http_no_memory(r);
	}
	return 0;
}
