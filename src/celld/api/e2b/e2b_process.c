/* envd's process service (process.Process, the Connect protocol with JSON messages).
 *
 * Every process is one of cell-init's PTY sessions (PTY_* frames, include/cell/proto.h),
 * created "once" (forgotten when its process ends), in pipe mode for a command (stdout and
 * stderr apart, stdin a pipe) or pty mode when Start asks for a terminal:
 *   Start       PTY_CREATE (argv, cwd, env, user, Connect-Timeout-Ms as timeout_ms), then
 *               PTY_ATTACH held by the stream: start event (the sandbox pid), data events,
 *               keepalives, the end event, the end-of-stream frame. A dropped stream only
 *               detaches: the process runs on.
 *   Connect     PTY_ATTACH by pid, shared (beside the streams that follow it already), no
 *               replay: only new output.
 *   SendInput, CloseStdin, Update, SendSignal: PTY_CONTROL by pid, a short conversation of
 *               its own, so they work while a stream holds the process.
 *   List        PTY_LIST, joined with what Start was given (the table below).
 * The table keeps, per sandbox, what List reports (cmd, args, envs, cwd, tag) for the
 * processes Start made: bounded (PROC_TABLE_MAX per sandbox, as cell-init's PTY_MAX) and
 * pruned by what cell-init says runs, and of sandboxes that are gone. */
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
#include "commands.h"
#include "e2b.h"
#include "http/http.h"
#include "registry.h"
#include "relay.h"
#include "sandbox.h"
#include "http/sse.h"
#include "timefmt.h"

#define SID_PREFIX	 "e2b-"
#define PROC_TABLE_MAX	 64    /* processes remembered per sandbox (cell-init's PTY_MAX) */
#define ARGS_MAX	 4096  /* args of one process */
#define ENVS_MAX	 4096  /* envs of one process */
#define TAG_MAX		 256   /* a tag's bytes */
#define USER_MAX	 256   /* a user name's bytes */
#define DIM_MAX		 1000  /* a terminal's columns and rows, as cell-init bounds them */
#define KEEPALIVE_MS	 50000 /* a silent stream's keepalive, at most this far apart */
#define KEEPALIVE_MIN_MS 1000
#define READAHEAD	 (256u << 10) /* output read ahead into one piece for the client */
#define DEFAULT_USER	 "user"

/* ---- the table: what List reports of the processes Start made ---- */

struct proc_entry {
	struct proc_entry *next;
	char sandbox[CELL_ID_MAX + 1];
	char sid[CELL_ID_MAX + 1];
	int pid;
	char *tag;	/* NULL: none */
	json_t *config; /* {"cmd","args","envs","cwd"} */
	uint64_t added; /* table_added when it came */
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct proc_entry *table;
static uint64_t table_added; /* entries ever added: a list taken after mark saw those */

/* The mark to take before asking cell-init what runs: a prune with that answer may drop only
 * entries added up to the mark, as later ones may have started after the answer was made. */
static uint64_t table_mark(void)
{
	pthread_mutex_lock(&table_lock);
	uint64_t m = table_added;
	pthread_mutex_unlock(&table_lock);
	return m;
}

static void entry_free(struct proc_entry *e)
{
	free(e->tag);
	json_decref(e->config);
	free(e);
}

/* Drop the entries of sandbox added up to mark whose session is not in running (PTY_LIST's
 * "sessions", asked for after mark was taken). */
static void table_prune(const char *sandbox, json_t *running, uint64_t mark)
{
	pthread_mutex_lock(&table_lock);
	for (struct proc_entry **pp = &table; *pp;) {
		struct proc_entry *e = *pp;
		bool live = strcmp(e->sandbox, sandbox) != 0 || e->added > mark;
		size_t i;
		json_t *s;
		json_array_foreach(running, i, s)
		{
			if (!live &&
			    !strcmp(json_string_value(json_object_get(s, "id")) ?: "", e->sid))
				live = true;
		}
		if (live) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		entry_free(e);
	}
	pthread_mutex_unlock(&table_lock);
}

/* Forget the entries of sandboxes no longer in the registry. */
static void table_sweep(void)
{
	char(*ids)[CELL_ID_MAX + 1] = NULL;
	size_t n = 0, cap = 0;
	pthread_mutex_lock(&table_lock);
	for (struct proc_entry *e = table; e; e = e->next)
		cap++;
	ids = cap ? calloc(cap, sizeof(*ids)) : NULL;
	for (struct proc_entry *e = table; ids && e; e = e->next) {
		bool seen = false;
		for (size_t i = 0; i < n && !seen; i++)
			seen = !strcmp(ids[i], e->sandbox);
		if (!seen)
			snprintf(ids[n++], sizeof(ids[0]), "%s", e->sandbox);
	}
	pthread_mutex_unlock(&table_lock);
	for (size_t i = 0; i < n; i++) {
		struct sandbox *sb = registry_get(ids[i]);
		if (sb)
			sandbox_unref(sb);
		else
			table_prune(ids[i], NULL, UINT64_MAX);
	}
	free(ids);
}

static void table_remove(const char *sandbox, const char *sid)
{
	pthread_mutex_lock(&table_lock);
	for (struct proc_entry **pp = &table; *pp; pp = &(*pp)->next) {
		struct proc_entry *e = *pp;
		if (!strcmp(e->sandbox, sandbox) && !strcmp(e->sid, sid)) {
			*pp = e->next;
			entry_free(e);
			break;
		}
	}
	pthread_mutex_unlock(&table_lock);
}

/* Add e (taken); at the cap its sandbox's oldest entry goes. */
static void table_add(struct proc_entry *e)
{
	pthread_mutex_lock(&table_lock);
	size_t n = 0;
	struct proc_entry **oldest = NULL;
	for (struct proc_entry **pp = &table; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->sandbox, e->sandbox)) {
			n++;
			oldest = pp;
		}
	if (n >= PROC_TABLE_MAX && oldest) {
		struct proc_entry *o = *oldest;
		*oldest = o->next;
		entry_free(o);
	}
	e->added = ++table_added;
	e->next = table;
	table = e;
	pthread_mutex_unlock(&table_lock);
}

/* The pid of the process tagged tag in sandbox (-1: none). */
static int table_tag_pid(const char *sandbox, const char *tag)
{
	int pid = -1;
	pthread_mutex_lock(&table_lock);
	for (struct proc_entry *e = table; e && pid < 0; e = e->next)
		if (e->tag && !strcmp(e->sandbox, sandbox) && !strcmp(e->tag, tag))
			pid = e->pid;
	pthread_mutex_unlock(&table_lock);
	return pid;
}

/* List's entry of session sid (pid): what Start was given, or only the pid when celld does
 * not know it (a restart of celld since). */
static json_t *table_list_entry(const char *sandbox, const char *sid, int pid)
{
	json_t *o = NULL;
	pthread_mutex_lock(&table_lock);
	for (struct proc_entry *e = table; e && !o; e = e->next)
		if (!strcmp(e->sandbox, sandbox) && !strcmp(e->sid, sid)) {
			o = json_pack("{s:O, s:i}", "config", e->config, "pid", pid);
			if (o && e->tag)
				json_object_set_new(o, "tag", json_string(e->tag));
		}
	pthread_mutex_unlock(&table_lock);
	if (!o)
		o = json_pack("{s:{s:s, s:[], s:{}}, s:i}", "config", "cmd", "", "args", "envs",
			      "pid", pid);
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
static int selector_pid(struct http_req *r, const struct sandbox *sb, json_t *msg, bool stream)
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
	int p = table_tag_pid(sb->id, json_string_value(tag));
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

/* PTY_LIST of sb: its "sessions" (a new reference), NULL with err. */
static json_t *list_sessions(const struct sandbox *sb, struct cell_error *err)
{
	json_t *req = json_object(), *ok = NULL;
	struct relay_error rerr = {0};
	struct relay_budget b = RELAY_BUDGET_INIT;
	int rc = relay_file_op(sb, CELL_FRAME_PTY_LIST, req, &ok, &rerr, &b, err);
	json_decref(req);
	if (rc == 1)
		cell_err(err, rerr.errnum, "%s", rerr.message);
	json_t *s = rc == 0 ? json_object_get(ok, "sessions") : NULL;
	if (rc == 0 && !json_is_array(s))
		cell_err(err, EPROTO, "cell-init sent an invalid PTY_LIST answer");
	s = json_is_array(s) ? json_incref(s) : NULL;
	json_decref(ok);
	return s;
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
	int fd;	       /* the PTY_ATTACH conversation; -1 once over */
	int client_fd; /* the HTTP connection's socket, -1 if unknown */
	int pid;
	bool is_pty;
	bool done;
	bool cut; /* the sandbox went away: the HTTP stream is cut, not ended */
	struct relay_reader rd;
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
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
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

static void end_event(struct pstream *s, const struct relay_exit *ex)
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
	table_remove(s->sb->id, s->sid);
	stream_over(s, CONNECT_OK, "");
}

static void stream_frame(struct pstream *s)
{
	struct relay_pty_event ev;
	struct cell_error err = {0};
	if (relay_pty_read(s->fd, &s->rd, &ev, &err) < 0) {
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
		close(s->fd);
		s->fd = -1;
		s->done = true; /* no end frame: what output there is goes, then the cut */
		return;
	}
	switch (ev.type) {
	case CELL_FRAME_STDOUT:
	case CELL_FRAME_STDERR: {
		_cleanup_free_ char *b64 = cell_base64_encode(ev.data, ev.len);
		const char *key = s->is_pty			 ? "pty"
				  : ev.type == CELL_FRAME_STDOUT ? "stdout"
								 : "stderr";
		event(s, b64 ? json_pack("{s:{s:s}}", "data", key, b64) : NULL);
		break;
	}
	case CELL_FRAME_EXIT:
		end_event(s, &ev.exit);
		break;
	case CELL_FRAME_ERROR:
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
	struct pollfd p[3] = {{.fd = s->fd, .events = POLLIN},
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
	while (!s->done && s->out.len - s->out.off < READAHEAD && relay_wait(s->fd, 0) == 1)
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
	if (s->fd >= 0)
		close(s->fd);
	relay_reader_free(&s->rd);
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

/* Answer with the stream of attached conversation fd (taken) of sb (our reference taken). */
static int stream_respond(struct http_req *r, struct sandbox *sb, const char *sid, int fd, int pid,
			  bool is_pty)
{
	struct pstream *s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		sandbox_unref(sb);
		return connect_stream_error(r, CONNECT_INTERNAL, "out of memory");
	}
	s->sb = sb;
	sandbox_stream_begin(sb);
	snprintf(s->sid, sizeof(s->sid), "%s", sid);
	s->fd = fd;
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
	if (tag && (!q->tag || json_string_length(tag) > TAG_MAX ||
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

/* PTY_CREATE's payload for q. */
static json_t *create_request(const struct sandbox *sb, const char *sid, const struct start_req *q,
			      const char *user, int64_t timeout_ms)
{
	json_t *req = command_session_open(sb, sid, q->cwd, q->envs);
	json_t *argv = json_array();
	_cleanup_free_ char *c0 = cell_base64_encode(q->cmd, strlen(q->cmd));
	if (!req || !argv || !c0 || json_array_append_new(argv, json_string(c0)) < 0)
		goto fail;
	/* HOME is the user's (cell-init reads it from the sandbox's passwd), not the base
	 * environment's root one, unless the sandbox's envs or the call's name it. */
	json_t *env = json_object_get(req, "env");
	bool named = json_object_get(q->envs, "HOME") || json_object_get(sb->env, "HOME");
	for (size_t k = json_array_size(env); k-- > 0 && !named;)
		if (!strncmp(json_string_value(json_array_get(env, k)) ?: "", "HOME=", 5))
			json_array_remove(env, k);
	size_t i;
	json_t *v;
	json_array_foreach(q->args, i, v)
	{
		_cleanup_free_ char *a =
		    cell_base64_encode(json_string_value(v), json_string_length(v));
		if (!a || json_array_append_new(argv, json_string(a)) < 0)
			goto fail;
	}
	/* No header: the template's user, root in an image without that account; root is
	 * root whatever its passwd says. */
	bool optional = !strcmp(user, DEFAULT_USER) || !strcmp(user, "root");
	if (json_object_set_new(req, "argv", argv) < 0 ||
	    json_object_set_new(req, "user", json_string(user)) < 0 ||
	    json_object_set_new(req, "user_optional", json_boolean(optional)) < 0 ||
	    json_object_set_new(req, "once", json_true()) < 0 ||
	    /* As envd: a command without stdin reads /dev/null (a terminal always has one). */
	    json_object_set_new(req, "stdin", json_boolean(q->pty || q->stdin_open)) < 0 ||
	    json_object_set_new(req, "timeout_ms", json_integer(timeout_ms)) < 0) {
		json_decref(req);
		return NULL;
	}
	return req;
fail:
	json_decref(argv);
	json_decref(req);
	return NULL;
}

static void close_session(const struct sandbox *sb, const char *sid)
{
	json_t *req = json_pack("{s:s}", "id", sid), *ok = NULL;
	struct relay_error rerr = {0};
	struct relay_budget b = RELAY_BUDGET_INIT;
	struct cell_error err = {0};
	if (relay_file_op(sb, CELL_FRAME_PTY_CLOSE, req, &ok, &rerr, &b, &err) < 0)
		cell_err_drop(&err, "closing an E2B process that did not start");
	json_decref(req);
	json_decref(ok);
}

static json_t *entry_config(const struct start_req *q)
{
	return json_pack("{s:s, s:o, s:o, s:s}", "cmd", q->cmd, "args",
			 q->args ? json_incref(q->args) : json_array(), "envs",
			 q->envs ? json_incref(q->envs) : json_object(), "cwd",
			 q->cwd ? q->cwd : "");
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
	char rnd[CELL_ID_RANDOM_LEN + 1], sid[CELL_ID_MAX + 1];
	struct cell_error err = {0};
	json_t *req = NULL;
	if (cell_id_random(rnd) == 0) {
		snprintf(sid, sizeof(sid), SID_PREFIX "%s", rnd);
		req = create_request(sb, sid, &q, user, connect_timeout_ms(r));
	}
	/* A cwd that is not there is the caller's error, as envd says it, not the process's
	 * (a relative one is below the user's home: cell-init's to find). */
	if (req && q.cwd && q.cwd[0] == '/') {
		struct relay_stat st;
		struct relay_error serr = {0};
		struct relay_budget sbud = RELAY_BUDGET_INIT;
		int src = relay_file_stat(sb, q.cwd, &st, &serr, &sbud, &err);
		if (src != 0 || strcmp(st.type, "directory")) {
			if (src < 0)
				connect_stream_error(r, connect_code_from_errno(err.code), "%s",
						     err.msg);
			else
				connect_stream_error(
				    r, CONNECT_INVALID_ARGUMENT, "cwd '%.200s' %s", q.cwd,
				    src == 1 ? "does not exist" : "is no directory");
			json_decref(req);
			sandbox_unref(sb);
			json_decref(msg);
			return 0;
		}
	}
	/* Stale entries go before a new one comes. */
	table_sweep();
	uint64_t mark = table_mark();
	json_t *running = list_sessions(sb, &err);
	if (running)
		table_prune(sb->id, running, mark);
	else
		cell_err_drop(&err, "listing the processes before a start");
	json_decref(running);
	/* For the audit log: what runs, as whom, where (its environment never). */
	json_t *rec = json_pack("{s:s, s:O?, s:s?, s:s, s:b, s:s?}", "cmd", q.cmd, "args", q.args,
				"cwd", q.cwd, "user", user, "pty", q.pty, "tag", q.tag);
	json_t *ok = NULL;
	struct relay_error rerr = {0};
	struct relay_budget b = RELAY_BUDGET_INIT;
	int rc = req ? relay_file_op(sb, CELL_FRAME_PTY_CREATE, req, &ok, &rerr, &b, &err)
		     : cell_err(&err, ENOMEM, "out of memory");
	json_decref(req);
	json_decref(ok);
	ok = NULL;
	int fd = -1;
	if (rc == 0) {
		req = json_pack("{s:s, s:b, s:i, s:i}", "id", sid, "pty", q.pty, "cols", q.cols,
				"rows", q.rows);
		rc = relay_pty_attach(sb, req, &fd, &ok, &rerr, &b, &err);
		json_decref(req);
		if (rc != 0)
			close_session(sb, sid);
	}
	json_t *jpid = json_object_get(ok, "pid");
	int pid = json_is_integer(jpid) ? (int)json_integer_value(jpid) : 0;
	if (rc == 0 && pid <= 0) {
		rc = cell_err(&err, EPROTO, "cell-init sent no pid for process %s", sid);
		close(fd);
		fd = -1;
		close_session(sb, sid);
	}
	json_decref(ok);
	if (rec) {
		json_object_set_new(rec, "ok", json_boolean(rc == 0));
		if (rc == 0)
			json_object_set_new(rec, "pid", json_integer(pid));
	}
	audit_log(sb->id, "process.start", rec);
	if (rc != 0) {
		sandbox_unref(sb);
		json_decref(msg);
		if (rc < 0)
			return connect_stream_error(r, connect_code_from_errno(err.code), "%s",
						    err.msg);
		/* A user the sandbox does not have, a cwd, a bad field: the caller's. */
		enum connect_code code = rerr.errnum == ENOENT || rerr.errnum == EINVAL
					     ? CONNECT_INVALID_ARGUMENT
					     : refused_code(rerr.errnum);
		return connect_stream_error(r, code, "%s", rerr.message);
	}
	struct proc_entry *e = calloc(1, sizeof(*e));
	if (e) {
		snprintf(e->sandbox, sizeof(e->sandbox), "%s", sb->id);
		snprintf(e->sid, sizeof(e->sid), "%s", sid);
		e->pid = pid;
		e->tag = q.tag ? strdup(q.tag) : NULL;
		e->config = entry_config(&q);
		table_add(e);
	}
	json_decref(msg);
	return stream_respond(r, sb, sid, fd, pid, q.pty);
}

/* ---- Connect ---- */

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
	json_t *req = json_pack("{s:i, s:b, s:b}", "pid", pid, "pty", 0, "share", 1), *ok = NULL;
	struct relay_error rerr = {0};
	struct relay_budget b = RELAY_BUDGET_INIT;
	struct cell_error err = {0};
	int fd = -1;
	int rc = relay_pty_attach(sb, req, &fd, &ok, &rerr, &b, &err);
	json_decref(req);
	if (rc != 0) {
		sandbox_unref(sb);
		json_decref(ok);
		if (rc < 0)
			return connect_stream_error(r, connect_code_from_errno(err.code), "%s",
						    err.msg);
		return connect_stream_error(r, refused_code(rerr.errnum), "process %d: %s", pid,
					    rerr.message);
	}
	const char *mode = json_string_value(json_object_get(ok, "mode"));
	bool is_pty = mode && !strcmp(mode, "pty");
	char sid[CELL_ID_MAX + 1] = "";
	/* The session's id, for the table: the one PTY_LIST names with this pid. */
	json_t *running = list_sessions(sb, &err);
	size_t i;
	json_t *s;
	json_array_foreach(running, i, s)
	{
		if (json_integer_value(json_object_get(s, "pid")) == pid)
			snprintf(sid, sizeof(sid), "%s",
				 json_string_value(json_object_get(s, "id")) ?: "");
	}
	if (!running)
		cell_err_drop(&err, "listing the processes for a connect");
	json_decref(running);
	json_decref(ok);
	return stream_respond(r, sb, sid, fd, pid, is_pty);
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
	uint64_t mark = table_mark();
	json_t *running = list_sessions(sb, &err);
	if (!running) {
		sandbox_unref(sb);
		return connect_error(r, connect_code_from_errno(err.code), "%s", err.msg);
	}
	table_sweep();
	table_prune(sb->id, running, mark);
	json_t *list = json_array();
	size_t i;
	json_t *s;
	json_array_foreach(running, i, s)
	{
		const char *sid = json_string_value(json_object_get(s, "id"));
		json_t *pid = json_object_get(s, "pid");
		/* Only envd's processes: not the OpenSandbox API's terminals. */
		if (!sid || strncmp(sid, SID_PREFIX, strlen(SID_PREFIX)) || !json_is_integer(pid))
			continue;
		json_t *o = table_list_entry(sb->id, sid, (int)json_integer_value(pid));
		if (o)
			json_array_append_new(list, o);
	}
	json_decref(running);
	sandbox_unref(sb);
	return connect_reply(r, list ? json_pack("{s:o}", "processes", list) : NULL);
}

/* ---- SendInput, CloseStdin, SendSignal, Update: PTY_CONTROL ---- */

/* PTY_CONTROL for the process msg selects, with fields ctl (taken); answers {} or the
 * error. */
static int control(struct http_req *r, json_t *msg, json_t *ctl)
{
	struct sandbox *sb = e2b_envd_sandbox(r, false);
	if (!sb) {
		json_decref(ctl);
		return 0;
	}
	int pid = selector_pid(r, sb, msg, false);
	if (pid < 0) {
		json_decref(ctl);
		sandbox_unref(sb);
		return 0;
	}
	json_t *ok = NULL;
	struct relay_error rerr = {0};
	struct relay_budget b = RELAY_BUDGET_INIT;
	struct cell_error err = {0};
	int rc = ctl && json_object_set_new(ctl, "pid", json_integer(pid)) == 0
		     ? relay_file_op(sb, CELL_FRAME_PTY_CONTROL, ctl, &ok, &rerr, &b, &err)
		     : cell_err(&err, ENOMEM, "out of memory");
	json_decref(ctl);
	json_decref(ok);
	sandbox_unref(sb);
	if (rc < 0)
		return connect_error(r, connect_code_from_errno(err.code), "%s", err.msg);
	if (rc == 1)
		return connect_error(r, refused_code(rerr.errnum), "process %d: %s", pid,
				     rerr.message);
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
		rc = control(r, msg, json_pack("{s:O}", "stdin", data));
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
	int rc = control(r, msg, json_pack("{s:b}", "stdin_close", 1));
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
		rc = control(r, msg, json_pack("{s:i}", "signal", sig));
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
		json_t *ctl = json_object();
		if (ctl && cols)
			json_object_set_new(ctl, "cols", json_integer(cols));
		if (ctl && rows)
			json_object_set_new(ctl, "rows", json_integer(rows));
		rc = control(r, msg, ctl);
	}
	json_decref(msg);
	return rc;
}
