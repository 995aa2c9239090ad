/* envd's process service (process.Process, the Connect protocol with JSON messages).
 *
 * Every process is one of cell-init's PTY sessions (processes.h), created "once" (forgotten when
 * its process ends), in pipe mode for a command (stdout and stderr apart, stdin a pipe) or pty mode
 * when Start asks for a terminal: Start       PTY_CREATE (argv, cwd, env, user, Connect-Timeout-Ms
 * as timeout_ms), then PTY_ATTACH held by the stream: start event (the sandbox pid), data events,
 *               keepalives, the end event, the end-of-stream frame. A dropped stream only
 *               detaches: the process runs on.
 *   Connect     PTY_ATTACH by pid, shared (beside the streams that follow it already), no
 *               replay: only new output.
 *   SendInput, CloseStdin, Update, SendSignal: PTY_CONTROL by pid, a short conversation of
 *               its own, so they work while a stream holds the process.
 *   List        PTY_LIST, joined with what Start was given (the table below).
 * The sandbox's table (proc_table.h) keeps what List reports (cmd, args, envs, cwd, tag) for
 * the processes Start made. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/id.h"
#include "cell/log.h"
#include "audit.h"
#include "e2b.h"
#include "http/http.h"
#include "processes.h"
#include "registry.h"
#include "sandbox.h"
#include "http/sse.h"
#include "timefmt.h"

#define SID_PREFIX	 "e2b-"
#define ARGS_MAX	 4096  /* args of one process */
#define ENVS_MAX	 4096  /* envs of one process */
#define USER_MAX	 256   /* a user name's bytes */
#define DIM_MAX		 1000  /* a terminal's columns and rows, as cell-init bounds them */
#define KEEPALIVE_MS	 50000 /* a silent stream's keepalive, at most this far apart */
#define KEEPALIVE_MIN_MS 1000
#define READAHEAD	 (256u << 10) /* output read ahead into one piece for the client */
#define DEFAULT_USER	 "user"

/* List's entry of session sid (pid): what Start was given, or only the pid when celld does
 * not know it (a restart of celld since). */
static json_t *list_entry(struct sandbox *sb, const char *sid, int pid)
{
	struct proc_info info;
	if (!proc_table_get(sb->procs, sid, &info))
		return json_pack("{s:{s:s, s:[], s:{}}, s:i}", "config", "cmd", "", "args", "envs",
				 "pid", pid);
	json_t *o = json_pack("{s:o, s:i}", "config", info.config, "pid", pid);
	if (o && info.has_tag)
		json_object_set_new(o, "tag", json_string(info.tag));
	return o;
}

/* ---- helpers ---- */

/* An ERROR of cell-init as a code. */
static enum connect_code refused_code(int errnum)
{
	switch (errnum) {
	case ENOENT:
	case ESRCH:
		return CONNECT_NOT_FOUND;
	case EMFILE:
	case ENOBUFS:
		return CONNECT_RESOURCE_EXHAUSTED;
	case EPIPE:
		return CONNECT_FAILED_PRECONDITION;
	default:
		return connect_code_from_errno(errnum);
	}
}

/* The process selector {"pid"} or {"tag"} of a message's "process": its pid, or answered
 * (-1). */
static int selector_pid(struct http_req *r, struct sandbox *sb, json_t *msg, bool stream)
{
	json_t *sel = json_object_get(msg, "process");
	json_t *pid = json_object_get(sel, "pid"), *tag = json_object_get(sel, "tag");
	int64_t v;
	const char *bad = NULL;
	if (!json_is_object(sel) || (!pid && !tag))
		bad = "process must be a selector: {\"pid\"} or {\"tag\"}";
	else if (pid && (connect_int64(pid, &v) < 0 || v < 1 || v > INT32_MAX))
		bad = "process.pid must be a positive integer";
	else if (!pid && !json_is_string(tag))
		bad = "process.tag must be a string";
	if (bad) {
		if (stream)
			connect_stream_error(r, CONNECT_INVALID_ARGUMENT, "%s", bad);
		else
			connect_error(r, CONNECT_INVALID_ARGUMENT, "%s", bad);
		return -1;
	}
	if (pid)
		return (int)v;
	int p = proc_tag_pid(sb, json_string_value(tag));
	if (p < 0) {
		if (stream)
			connect_stream_error(r, CONNECT_NOT_FOUND, "no process tagged '%.80s'",
					     json_string_value(tag));
		else
			connect_error(r, CONNECT_NOT_FOUND, "no process tagged '%.80s'",
				      json_string_value(tag));
	}
	return p;
}

/* The user of a call: Authorization: Basic base64("<name>:"), as the SDK sends it when the
 * call names one; NULL for none. Returns 0 (name in out, "" for none) or -EINVAL. */
static int call_user(struct http_req *r, char out[USER_MAX + 1])
{
	out[0] = '\0';
	const char *h = http_header(r, "Authorization");
	if (!h)
		return 0;
	if (strncasecmp(h, "Basic ", 6))
		return -EINVAL;
	uint8_t *buf;
	size_t len;
	if (cell_base64_decode(h + 6, strlen(h + 6), &buf, &len) < 0)
		return -EINVAL;
	uint8_t *colon = memchr(buf, ':', len);
	size_t n = colon ? (size_t)(colon - buf) : len;
	int rc = n <= USER_MAX && !memchr(buf, '\0', n) ? 0 : -EINVAL;
	if (!rc) {
		memcpy(out, buf, n);
		out[n] = '\0';
	}
	free(buf);
	return rc;
}

/* ---- the stream of Start and Connect ---- */

struct pstream {
	struct sandbox *sb; /* referenced, counted in its streams */
	char sid[CELL_ID_MAX + 1];
	struct proc_conn *conn; /* the attached conversation; NULL once over */
	int client_fd;		/* the HTTP connection's socket, -1 if unknown */
	int pid;
	bool is_pty;
	bool done;
	bool cut; /* the sandbox went away: the HTTP stream is cut, not ended */
	struct sse_buf out;
	int64_t keepalive_ms, next_keepalive;
};

static void event(struct pstream *s, json_t *ev)
{
	json_t *msg = ev ? json_pack("{s:o}", "event", ev) : NULL;
	if (!msg || connect_frame(&s->out, msg) < 0) {
		/* Out of memory: the stream cannot go on. */
		s->done = true;
	}
	json_decref(msg);
}

static void stream_over(struct pstream *s, enum connect_code code, const char *msg)
{
	proc_conn_close(s->conn);
	s->conn = NULL;
	connect_end(&s->out, code, msg);
	s->done = true;
}

/* How Go's os.ProcessState says it (real envd's end event's status). */
static const char *signal_text(int sig)
{
	static const struct {
		int sig;
		const char *text;
	} names[] = {
	    {SIGHUP, "hangup"},
	    {SIGINT, "interrupt"},
	    {SIGQUIT, "quit"},
	    {SIGILL, "illegal instruction"},
	    {SIGTRAP, "trace/breakpoint trap"},
	    {SIGABRT, "aborted"},
	    {SIGBUS, "bus error"},
	    {SIGFPE, "floating point exception"},
	    {SIGKILL, "killed"},
	    {SIGUSR1, "user defined signal 1"},
	    {SIGSEGV, "segmentation fault"},
	    {SIGUSR2, "user defined signal 2"},
	    {SIGPIPE, "broken pipe"},
	    {SIGALRM, "alarm clock"},
	    {SIGTERM, "terminated"},
	};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(names); i++)
		if (names[i].sig == sig)
			return names[i].text;
	return NULL;
}

static void end_event(struct pstream *s, const struct proc_exit *ex)
{
	char status[64];
	json_t *end;
	if (ex->signal > 0) {
		const char *t = signal_text(ex->signal);
		if (t)
			snprintf(status, sizeof(status), "signal: %s", t);
		else
			snprintf(status, sizeof(status), "signal: signal %d", ex->signal);
		/* As Go reports a process a signal ended: exit code -1, not exited. */
		end = json_pack("{s:i, s:b, s:s, s:s}", "exitCode", -1, "exited", 0, "status",
				status, "error", status);
	} else {
		snprintf(status, sizeof(status), "exit status %d", ex->exit_code);
		end = json_pack("{s:i, s:b, s:s}", "exitCode", ex->exit_code, "exited", 1, "status",
				status);
		if (end && ex->exit_code)
			json_object_set_new(end, "error", json_string(status));
	}
	event(s, end ? json_pack("{s:o}", "end", end) : NULL);
	proc_forget(s->sb, s->sid);
	stream_over(s, CONNECT_OK, "");
}

static void stream_frame(struct pstream *s)
{
	struct proc_event ev;
	struct cell_error err = {0};
	if (proc_conn_read(s->conn, &ev, &err) < 0) {
		/* Its sandbox going (deleted, stopped, dead) ends the conversation: then the
		 * stream is cut as E2B's is when a sandbox is killed, and the SDK, finding
		 * /health 502, says the sandbox was killed or reached its end of life. */
		registry_lock();
		s->cut = !s->sb->in_table || s->sb->state != SBX_RUNNING || s->sb->busy != SBX_IDLE;
		registry_unlock();
		if (!s->cut) {
			stream_over(s, CONNECT_UNAVAILABLE, err.msg);
			return;
		}
		proc_conn_close(s->conn);
		s->conn = NULL;
		s->done = true; /* no end frame: what output there is goes, then the cut */
		return;
	}
	switch (ev.kind) {
	case PROC_EV_STDOUT:
	case PROC_EV_STDERR: {
		_cleanup_free_ char *b64 = cell_base64_encode(ev.data, ev.len);
		const char *key = s->is_pty		      ? "pty"
				  : ev.kind == PROC_EV_STDOUT ? "stdout"
							      : "stderr";
		event(s, b64 ? json_pack("{s:{s:s}}", "data", key, b64) : NULL);
		break;
	}
	case PROC_EV_EXIT:
		end_event(s, &ev.exit);
		break;
	case PROC_EV_ERROR:
		if (ev.error.errnum == ECONNABORTED)
			stream_over(s, CONNECT_ABORTED,
				    "another stream (a Connect) took this process over");
		else
			stream_over(s, refused_code(ev.error.errnum), ev.error.message);
		break;
	default: /* REPLAY (never asked for), STDIN_TAKEN: nothing for the client */
		break;
	}
}

/* The next piece: output, the end, or a keepalive when the process was silent long enough. */
static void stream_step(struct pstream *s)
{
	int64_t now = celld_now_ms();
	if (now >= s->next_keepalive) {
		s->next_keepalive = now + s->keepalive_ms;
		event(s, json_pack("{s:{}}", "keepalive"));
		return;
	}
	/* The client's hang-up too: its process is let go of at once, not at the next write. */
	struct pollfd p[3] = {{.fd = proc_conn_fd(s->conn), .events = POLLIN},
			      {.fd = http_upgrades_stopping_fd(), .events = POLLIN},
			      {.fd = s->client_fd, .events = POLLRDHUP}};
	int n = poll(p, 3, (int)(s->next_keepalive - now));
	if (n < 0 && errno != EINTR) {
		stream_over(s, CONNECT_INTERNAL, strerror(errno));
		return;
	}
	if (n <= 0)
		return;
	if (p[2].revents && !p[0].revents) {
		stream_over(s, CONNECT_CANCELED, "the client went away");
		return;
	}
	if (p[1].revents && !p[0].revents) {
		/* celld stops: the process runs on in the sandbox. */
		stream_over(s, CONNECT_UNAVAILABLE, "celld is stopping");
		return;
	}
	stream_frame(s);
	while (!s->done && s->out.len - s->out.off < READAHEAD && proc_conn_wait(s->conn, 0) == 1)
		stream_frame(s);
	s->next_keepalive = celld_now_ms() + s->keepalive_ms;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct pstream *s = cls;
	for (;;) {
		if (s->out.off < s->out.len)
			return (ssize_t)connect_buf_take(&s->out, buf, max);
		if (s->done)
			return s->cut ? MHD_CONTENT_READER_END_WITH_ERROR
				      : MHD_CONTENT_READER_END_OF_STREAM;
		stream_step(s);
	}
}

static void stream_free(void *cls)
{
	struct pstream *s = cls;
	/* Closing the conversation detaches: the process runs on. */
	proc_conn_close(s->conn);
	sse_buf_free(&s->out);
	sandbox_stream_end(s->sb);
	sandbox_unref(s->sb);
	free(s);
}

/* Keepalive-Ping-Interval (seconds), bounded; KEEPALIVE_MS without it. */
static int64_t keepalive_ms(struct http_req *r)
{
	const char *v = http_header(r, "Keepalive-Ping-Interval");
	char *end;
	long sec = v ? strtol(v, &end, 10) : 0;
	if (!v || !v[0] || *end || sec <= 0)
		return KEEPALIVE_MS;
	int64_t ms = (int64_t)sec * 1000;
	return ms < KEEPALIVE_MIN_MS ? KEEPALIVE_MIN_MS : ms > KEEPALIVE_MS ? KEEPALIVE_MS : ms;
}

/* Answer with the stream of attached conversation conn (taken) of sb (our reference taken). */
static int stream_respond(struct http_req *r, struct sandbox *sb, const char *sid,
			  struct proc_conn *conn, int pid, bool is_pty)
{
	struct pstream *s = calloc(1, sizeof(*s));
	if (!s) {
		proc_conn_close(conn);
		sandbox_unref(sb);
		return connect_stream_error(r, CONNECT_INTERNAL, "out of memory");
	}
	s->sb = sb;
	sandbox_stream_begin(sb);
	snprintf(s->sid, sizeof(s->sid), "%s", sid);
	s->conn = conn;
	s->client_fd = http_socket(r);
	s->pid = pid;
	s->is_pty = is_pty;
	s->keepalive_ms = keepalive_ms(r);
	s->next_keepalive = celld_now_ms() + s->keepalive_ms;
	event(s, json_pack("{s:{s:i}}", "start", "pid", pid));
	return connect_stream(r, stream_read, s, stream_free);
}

/* ---- Start ---- */

struct start_req {
	const char *cmd, *cwd, *tag;
	json_t *args, *envs; /* borrowed from the message */
	bool pty, stdin_open;
	unsigned cols, rows;
};

static const char *parse_dim(json_t *size, const char *key, unsigned *out)
{
	int64_t v;
	json_t *j = json_object_get(size, key);
	if (!j)
		return NULL;
	if (connect_int64(j, &v) < 0 || v < 1 || v > 65535)
		return "pty.size's cols and rows must be integers in 1..65535";
	*out = v > DIM_MAX ? DIM_MAX : (unsigned)v;
	return NULL;
}

/* The message's fields, checked; NULL or what is wrong. */
static const char *parse_start(json_t *msg, struct start_req *q)
{
	json_t *proc = json_object_get(msg, "process");
	if (!json_is_object(proc))
		return "process must be an object with cmd";
	json_t *cmd = json_object_get(proc, "cmd");
	q->cmd = json_string_value(cmd);
	if (!q->cmd || !q->cmd[0] || strlen(q->cmd) != json_string_length(cmd))
		return "process.cmd must be a non-empty string without a NUL byte";
	q->args = json_object_get(proc, "args");
	if (q->args && (!json_is_array(q->args) || json_array_size(q->args) > ARGS_MAX))
		return "process.args must be an array of at most 4096 strings";
	size_t i;
	json_t *v;
	json_array_foreach(q->args, i, v)
	{
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return "process.args must be strings without a NUL byte";
	}
	q->envs = json_object_get(proc, "envs");
	if (q->envs && (!json_is_object(q->envs) || json_object_size(q->envs) > ENVS_MAX))
		return "process.envs must be an object of at most 4096 strings";
	const char *k;
	json_object_foreach(q->envs, k, v)
	{
		if (!k[0] || strchr(k, '=') || !json_is_string(v) ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return "process.envs must map names (without '=') to strings without a NUL "
			       "byte";
	}
	json_t *cwd = json_object_get(proc, "cwd");
	q->cwd = json_string_value(cwd);
	if (cwd && !json_is_string(cwd))
		return "process.cwd must be a string";
	if (q->cwd && !q->cwd[0])
		q->cwd = NULL;
	/* A relative one (and "~", "~/...") is below the user's home: cell-init resolves it. */
	if (q->cwd && (strlen(q->cwd) >= 4096 || strlen(q->cwd) != json_string_length(cwd)))
		return "process.cwd must be a path of at most 4095 bytes without a NUL byte";
	json_t *tag = json_object_get(msg, "tag");
	q->tag = json_string_value(tag);
	if (tag && (!q->tag || json_string_length(tag) > PROC_TAG_MAX ||
		    strlen(q->tag) != json_string_length(tag)))
		return "tag must be a string of at most 256 bytes";
	json_t *in = json_object_get(msg, "stdin");
	if (in && !json_is_boolean(in))
		return "stdin must be a boolean";
	/* As real envd: stdin is a pipe unless the call says false. */
	q->stdin_open = !in || json_is_true(in);
	json_t *pty = json_object_get(msg, "pty");
	q->pty = pty && !json_is_null(pty);
	q->cols = 80;
	q->rows = 24;
	if (q->pty) {
		json_t *size = json_object_get(pty, "size");
		if (!json_is_object(pty) || (size && !json_is_object(size)))
			return "pty must be {\"size\":{\"cols\",\"rows\"}}";
		const char *bad = parse_dim(size, "cols", &q->cols);
		if (!bad)
			bad = parse_dim(size, "rows", &q->rows);
		if (bad)
			return bad;
	}
	return NULL;
}

static json_t *entry_config(const struct start_req *q)
{
	return json_pack("{s:s, s:o, s:o, s:s}", "cmd", q->cmd, "args",
			 q->args ? json_incref(q->args) : json_array(), "envs",
			 q->envs ? json_incref(q->envs) : json_object(), "cwd",
			 q->cwd ? q->cwd : "");
}

/* A cwd that is not there is the caller's error, as envd says it, not the process's (a
 * relative one is below the user's home: cell-init's to find). 0, or answered (-1). */
static int check_cwd(struct http_req *r, const struct sandbox *sb, const char *cwd)
{
	if (!cwd || cwd[0] != '/')
		return 0;
	struct cell_error err = {0};
	int rc = proc_dir_check(sb, cwd, &err);
	if (rc == 0)
		return 0;
	if (rc < 0)
		connect_stream_error(r, connect_code_from_errno(err.code), "%s", err.msg);
	else
		connect_stream_error(r, CONNECT_INVALID_ARGUMENT, "cwd '%.200s' %s", cwd,
				     rc == 1 ? "does not exist" : "is no directory");
	return -1;
}

/* The start's failure answered: rc -errno (err) or 1 (why). */
static int start_failed(struct http_req *r, int rc, const struct proc_refusal *why,
			const struct cell_error *err)
{
	if (rc < 0)
		return connect_stream_error(r, connect_code_from_errno(err->code), "%s", err->msg);
	/* A user the sandbox does not have, a cwd, a bad field: the caller's. */
	enum connect_code code = why->errnum == ENOENT || why->errnum == EINVAL
				     ? CONNECT_INVALID_ARGUMENT
				     : refused_code(why->errnum);
	return connect_stream_error(r, code, "%s", why->message);
}

/* Start q in sb as user (our reference to sb taken): the stream, or the failure. */
static int start(struct http_req *r, struct sandbox *sb, const struct start_req *q,
		 const char *user)
{
	char rnd[CELL_ID_RANDOM_LEN + 1], sid[CELL_ID_MAX + 1];
	struct cell_error err = {0};
	struct proc_refusal why = {0};
	json_t *config = cell_id_random(rnd) == 0 ? entry_config(q) : NULL;
	snprintf(sid, sizeof(sid), SID_PREFIX "%s", rnd);
	/* No header: the template's user, root in an image without that account; root is
	 * root whatever its passwd says. As envd: a command without stdin reads /dev/null (a
	 * terminal always has one). */
	const struct proc_spec spec = {
	    .api = PROC_API_E2B,
	    .sid = sid,
	    .cmd = q->cmd,
	    .args = q->args,
	    .envs = q->envs,
	    .cwd = q->cwd,
	    .user = user,
	    .user_optional = !strcmp(user, DEFAULT_USER) || !strcmp(user, "root"),
	    .once = true,
	    .stdin_open = q->pty || q->stdin_open,
	    .timeout_ms = connect_timeout_ms(r),
	    .pty = q->pty,
	    .cols = q->cols,
	    .rows = q->rows,
	    .tag = q->tag,
	    .config = config,
	};
	struct proc_conn *conn = NULL;
	int pid = 0;
	int rc = config ? proc_start(sb, &spec, &conn, &pid, &why, &err)
			: cell_err(&err, ENOMEM, "out of memory");
	json_decref(config);
	if (rc != 0) {
		sandbox_unref(sb);
		return start_failed(r, rc, &why, &err);
	}
	return stream_respond(r, sb, sid, conn, pid, q->pty);
}

int e2b_process_start(struct http_req *r)
{
	json_t *msg;
	if (connect_request(r, true, &msg) < 0)
		return 0;
	struct start_req q = {0};
	const char *bad = parse_start(msg, &q);
	char user[USER_MAX + 1];
	if (!bad && call_user(r, user) < 0)
		bad = "the Authorization header must be Basic base64(\"<user>:\")";
	if (bad) {
		json_decref(msg);
		return connect_stream_error(r, CONNECT_INVALID_ARGUMENT, "%s", bad);
	}
	if (!user[0])
		snprintf(user, sizeof(user), "%s", DEFAULT_USER);
	struct sandbox *sb = e2b_envd_sandbox(r, true);
	if (!sb) {
		json_decref(msg);
		return 0;
	}
	if (check_cwd(r, sb, q.cwd) < 0) {
		sandbox_unref(sb);
		json_decref(msg);
		return 0;
	}
	start(r, sb, &q, user);
	json_decref(msg);
	return 0;
}

/* ---- Connect ---- */

/* The id of the session running pid ("" when none), for the table. */
static void sid_of(struct sandbox *sb, int pid, char sid[CELL_ID_MAX + 1])
{
	struct proc_running *run = NULL;
	size_t n = 0;
	struct cell_error err = {0};
	sid[0] = '\0';
	if (proc_list(sb, &run, &n, &err) < 0)
		cell_err_drop(&err, "listing the processes for a connect");
	for (size_t i = 0; i < n; i++)
		if (run[i].pid == pid)
			snprintf(sid, CELL_ID_MAX + 1, "%s", run[i].sid);
	free(run);
}

int e2b_process_connect(struct http_req *r)
{
	json_t *msg;
	if (connect_request(r, true, &msg) < 0)
		return 0;
	struct sandbox *sb = e2b_envd_sandbox(r, true);
	if (!sb) {
		json_decref(msg);
		return 0;
	}
	int pid = selector_pid(r, sb, msg, true);
	json_decref(msg);
	if (pid < 0) {
		sandbox_unref(sb);
		return 0;
	}
	/* No since: no replay, only what comes from now on; beside any stream that follows it
	 * already. */
	const struct proc_attach a = {.pid = pid, .share = true, .since = -1};
	struct proc_conn *conn = NULL;
	struct proc_attached info = {0};
	struct proc_refusal why = {0};
	struct cell_error err = {0};
	int rc = proc_attach(sb, &a, &conn, &info, &why, &err);
	if (rc != 0) {
		sandbox_unref(sb);
		if (rc < 0)
			return connect_stream_error(r, connect_code_from_errno(err.code), "%s",
						    err.msg);
		return connect_stream_error(r, refused_code(why.errnum), "process %d: %s", pid,
					    why.message);
	}
	char sid[CELL_ID_MAX + 1];
	sid_of(sb, pid, sid);
	return stream_respond(r, sb, sid, conn, pid, info.is_pty);
}

/* ---- List ---- */

int e2b_process_list(struct http_req *r)
{
	json_t *msg;
	if (connect_request(r, false, &msg) < 0)
		return 0;
	json_decref(msg);
	struct sandbox *sb = e2b_envd_sandbox(r, false);
	if (!sb)
		return 0;
	struct cell_error err = {0};
	struct proc_running *run = NULL;
	size_t n = 0;
	if (proc_list(sb, &run, &n, &err) < 0) {
		sandbox_unref(sb);
		return connect_error(r, connect_code_from_errno(err.code), "%s", err.msg);
	}
	json_t *list = json_array();
	for (size_t i = 0; i < n && list; i++) {
		/* Only envd's processes: not the OpenSandbox API's terminals. */
		if (strncmp(run[i].sid, SID_PREFIX, strlen(SID_PREFIX)) || run[i].pid < 0)
			continue;
		json_t *o = list_entry(sb, run[i].sid, run[i].pid);
		if (o)
			json_array_append_new(list, o);
	}
	free(run);
	sandbox_unref(sb);
	return connect_reply(r, list ? json_pack("{s:o}", "processes", list) : NULL);
}

/* ---- SendInput, CloseStdin, SendSignal, Update: PTY_CONTROL ---- */

/* PTY_CONTROL for the process msg selects; answers {} or the error. */
static int control(struct http_req *r, json_t *msg, const struct proc_control *ctl)
{
	struct sandbox *sb = e2b_envd_sandbox(r, false);
	if (!sb)
		return 0;
	int pid = selector_pid(r, sb, msg, false);
	if (pid < 0) {
		sandbox_unref(sb);
		return 0;
	}
	struct proc_refusal why = {0};
	struct cell_error err = {0};
	int rc = proc_control(sb, pid, ctl, &why, &err);
	sandbox_unref(sb);
	if (rc < 0)
		return connect_error(r, connect_code_from_errno(err.code), "%s", err.msg);
	if (rc == 1)
		return connect_error(r, refused_code(why.errnum), "process %d: %s", pid,
				     why.message);
	return connect_reply(r, json_object());
}

int e2b_process_send_input(struct http_req *r)
{
	json_t *msg;
	if (connect_request(r, false, &msg) < 0)
		return 0;
	json_t *in = json_object_get(msg, "input");
	json_t *data = json_object_get(in, "stdin");
	if (!data)
		data = json_object_get(in, "pty");
	int rc;
	if (!json_is_object(in) || !json_is_string(data))
		rc = connect_error(r, CONNECT_INVALID_ARGUMENT,
				   "input must be {\"stdin\"} or {\"pty\"}: base64 bytes");
	else
		rc = control(r, msg, &(struct proc_control){.input_b64 = json_string_value(data)});
	json_decref(msg);
	return rc;
}

int e2b_process_stream_input(struct http_req *r)
{
	return connect_error(r, CONNECT_UNIMPLEMENTED,
			     "StreamInput (client streaming) is not supported: use SendInput");
}

int e2b_process_close_stdin(struct http_req *r)
{
	json_t *msg;
	if (connect_request(r, false, &msg) < 0)
		return 0;
	int rc = control(r, msg, &(struct proc_control){.close_stdin = true});
	json_decref(msg);
	return rc;
}

int e2b_process_send_signal(struct http_req *r)
{
	json_t *msg;
	if (connect_request(r, false, &msg) < 0)
		return 0;
	static const struct {
		const char *name;
		int sig;
	} sigs[] = {{"SIGNAL_SIGKILL", SIGKILL},
		    {"SIGNAL_SIGTERM", SIGTERM},
		    {"SIGNAL_SIGINT", SIGINT},
		    {"SIGNAL_SIGHUP", SIGHUP}};
	json_t *jsig = json_object_get(msg, "signal");
	int sig = 0;
	for (size_t i = 0; i < CELL_ARRAY_SIZE(sigs); i++)
		if ((json_is_string(jsig) && !strcmp(json_string_value(jsig), sigs[i].name)) ||
		    (json_is_integer(jsig) && json_integer_value(jsig) == sigs[i].sig))
			sig = sigs[i].sig;
	int rc;
	if (!sig)
		rc =
		    connect_error(r, CONNECT_INVALID_ARGUMENT,
				  "signal must be SIGNAL_SIGKILL, SIGNAL_SIGTERM, SIGNAL_SIGINT or "
				  "SIGNAL_SIGHUP");
	else
		rc = control(r, msg, &(struct proc_control){.signal = sig});
	json_decref(msg);
	return rc;
}

int e2b_process_update(struct http_req *r)
{
	json_t *msg;
	if (connect_request(r, false, &msg) < 0)
		return 0;
	json_t *pty = json_object_get(msg, "pty");
	json_t *size = json_object_get(pty, "size");
	unsigned cols = 0, rows = 0;
	const char *bad = NULL;
	if (!json_is_object(size))
		bad = "pty must be {\"size\":{\"cols\",\"rows\"}}";
	if (!bad)
		bad = parse_dim(size, "cols", &cols);
	if (!bad)
		bad = parse_dim(size, "rows", &rows);
	int rc;
	if (bad) {
		rc = connect_error(r, CONNECT_INVALID_ARGUMENT, "%s", bad);
	} else {
		rc = control(r, msg, &(struct proc_control){.cols = cols, .rows = rows});
	}
	json_decref(msg);
	return rc;
}
