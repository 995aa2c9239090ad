/* cell-init's PTY sessions and bash sessions for both fronts (processes.h).
 *
 * cell-init keeps each session (its process, its PTY or pipes, its scrollback, who is
 * attached); celld keeps, per sandbox, only what a start was given (proc_table.c), which
 * cell-init never says back. A start of either API is one audit record, "process.start". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/log.h"
#include "audit.h"
#include "commands.h"
#include "processes.h"
#include "relay.h"
#include "sandbox.h"

_Static_assert(PROC_STDIN_WINDOW == CELL_STDIN_WINDOW, "cell-init's stdin window");

struct proc_conn {
	int fd;
	struct relay_reader rd;
};

static void refusal(struct proc_refusal *why, const struct relay_error *e)
{
	why->errnum = e->errnum;
	snprintf(why->message, sizeof(why->message), "%s", e->message);
}

/* A one-answer request (req taken): 0 with *ok (may be NULL: not wanted), 1 refused, -errno. */
static int op(const struct sandbox *sb, uint16_t type, json_t *req, json_t **ok,
	      struct proc_refusal *why, struct cell_error *err)
{
	json_t *answer = NULL;
	struct relay_error rerr = {0};
	struct relay_budget b = RELAY_BUDGET_INIT;
	int rc = req ? relay_file_op(sb, type, req, &answer, &rerr, &b, err)
		     : cell_err(err, ENOMEM, "out of memory");
	json_decref(req);
	if (rc == 1)
		refusal(why, &rerr);
	if (ok)
		*ok = answer;
	else
		json_decref(answer);
	return rc;
}

/* ---- starting ---- */

/* HOME is a named user's (cell-init reads it from the sandbox's passwd), not the base
 * environment's root one, unless the sandbox's envs or the call's name it. */
static void drop_base_home(const struct sandbox *sb, const struct proc_spec *s, json_t *req)
{
	json_t *env = json_object_get(req, "env");
	if (json_object_get(s->envs, "HOME") || json_object_get(sb->env, "HOME"))
		return;
	for (size_t k = json_array_size(env); k-- > 0;)
		if (!strncmp(json_string_value(json_array_get(env, k)) ?: "", "HOME=", 5)) {
			json_array_remove(env, k);
			return;
		}
}

static int set_b64(json_t *o, const char *key, const char *text, size_t len)
{
	_cleanup_free_ char *b64 = cell_base64_encode(text, len);
	return b64 ? json_object_set_new(o, key, json_string(b64)) : -1;
}

static json_t *argv_of(const struct proc_spec *s)
{
	json_t *argv = json_array();
	_cleanup_free_ char *c0 = cell_base64_encode(s->cmd, strlen(s->cmd));
	if (!argv || !c0 || json_array_append_new(argv, json_string(c0)) < 0)
		goto fail;
	size_t i;
	json_t *v;
	json_array_foreach(s->args, i, v)
	{
		_cleanup_free_ char *a =
		    cell_base64_encode(json_string_value(v), json_string_length(v));
		if (!a || json_array_append_new(argv, json_string(a)) < 0)
			goto fail;
	}
	return argv;
fail:
	json_decref(argv);
	return NULL;
}

/* PTY_CREATE's payload: SESSION_OPEN's (the sandbox's environment) plus what runs. */
static json_t *create_request(const struct sandbox *sb, const struct proc_spec *s)
{
	json_t *req = command_session_open(sb, s->sid, s->cwd, s->envs);
	if (!req)
		return NULL;
	int bad = 0;
	if (s->command)
		bad |= set_b64(req, "command", s->command, strlen(s->command));
	if (s->cmd) {
		json_t *argv = argv_of(s);
		bad |= argv ? json_object_set_new(req, "argv", argv) : -1;
	}
	if (s->user) {
		drop_base_home(sb, s, req);
		bad |= json_object_set_new(req, "user", json_string(s->user));
		bad |= json_object_set_new(req, "user_optional", json_boolean(s->user_optional));
	}
	if (s->once)
		bad |= json_object_set_new(req, "once", json_true());
	if (s->stdin_open >= 0)
		bad |= json_object_set_new(req, "stdin", json_boolean(s->stdin_open));
	if (s->timeout_ms >= 0)
		bad |= json_object_set_new(req, "timeout_ms", json_integer(s->timeout_ms));
	if (bad) {
		json_decref(req);
		return NULL;
	}
	return req;
}

/* Entries of processes that ended go before a new one comes (the table is bounded). */
static void prune(struct sandbox *sb)
{
	struct proc_running *run = NULL;
	size_t n = 0;
	struct cell_error err = {0};
	if (proc_list(sb, &run, &n, &err) < 0)
		cell_err_drop(&err, "listing the processes before a start");
	free(run);
}

/* For the audit log: what runs, as whom, where, which API asked (its environment never). */
static void audit_start(const struct sandbox *sb, const struct proc_spec *s, int rc, int pid)
{
	json_t *rec =
	    json_pack("{s:s, s:s, s:b, s:s*, s:s*, s:O*, s:s*, s:s*, s:s*, s:b}", "api",
		      s->api == PROC_API_E2B ? "e2b" : "opensandbox", "session", s->sid, "pty",
		      s->pty, "command", s->command, "cmd", s->cmd, "args", s->args, "cwd", s->cwd,
		      "user", s->user, "tag", s->tag, "ok", rc == 0);
	if (rec && rc == 0 && pid > 0)
		json_object_set_new(rec, "pid", json_integer(pid));
	audit_log(sb->id, "process.start", rec);
}

static void close_quietly(struct sandbox *sb, const char *sid)
{
	struct proc_refusal why;
	struct cell_error err = {0};
	if (proc_close(sb, sid, &why, &err) < 0)
		cell_err_drop(&err, "closing a process that did not start");
}

/* The attach a start makes: its pid, or the session closed again. */
static int start_attach(struct sandbox *sb, const struct proc_spec *s, struct proc_conn **conn,
			int *pid, struct proc_refusal *why, struct cell_error *err)
{
	const struct proc_attach a = {
	    .sid = s->sid, .pty = s->pty, .since = -1, .cols = s->cols, .rows = s->rows};
	struct proc_attached info = {0};
	int rc = proc_attach(sb, &a, conn, &info, why, err);
	if (rc == 0 && info.pid <= 0) {
		rc = cell_err(err, EPROTO, "cell-init sent no pid for process %s", s->sid);
		proc_conn_close(*conn);
		*conn = NULL;
	}
	if (rc != 0)
		close_quietly(sb, s->sid);
	*pid = rc == 0 ? info.pid : 0;
	return rc;
}

int proc_start(struct sandbox *sb, const struct proc_spec *s, struct proc_conn **conn, int *pid,
	       struct proc_refusal *why, struct cell_error *err)
{
	*pid = 0;
	if (conn)
		*conn = NULL;
	prune(sb);
	int rc = op(sb, CELL_FRAME_PTY_CREATE, create_request(sb, s), NULL, why, err);
	if (rc == 0 && conn)
		rc = start_attach(sb, s, conn, pid, why, err);
	audit_start(sb, s, rc, *pid);
	if (rc == 0 && s->config &&
	    proc_table_add(sb->procs, s->sid, *pid, s->api, s->tag, json_incref(s->config)) < 0)
		log_warn("sandbox %s: process %s is not remembered: out of memory", sb->id, s->sid);
	return rc;
}

/* ---- attached conversations ---- */

static json_t *attach_request(const struct proc_attach *a)
{
	json_t *req = a->sid ? json_pack("{s:s, s:b}", "id", a->sid, "pty", a->pty)
			     : json_pack("{s:i, s:b}", "pid", a->pid, "pty", a->pty);
	if (!req)
		return NULL;
	int bad = 0;
	if (a->takeover)
		bad |= json_object_set_new(req, "takeover", json_true());
	if (a->share)
		bad |= json_object_set_new(req, "share", json_true());
	if (a->since >= 0)
		bad |= json_object_set_new(req, "since", json_integer(a->since));
	if (a->cols)
		bad |= json_object_set_new(req, "cols", json_integer(a->cols));
	if (a->rows)
		bad |= json_object_set_new(req, "rows", json_integer(a->rows));
	if (bad) {
		json_decref(req);
		return NULL;
	}
	return req;
}

int proc_attach(const struct sandbox *sb, const struct proc_attach *a, struct proc_conn **out,
		struct proc_attached *info, struct proc_refusal *why, struct cell_error *err)
{
	*out = NULL;
	memset(info, 0, sizeof(*info));
	json_t *req = attach_request(a), *ok = NULL;
	struct proc_conn *c = calloc(1, sizeof(*c));
	struct relay_error rerr = {0};
	struct relay_budget b = RELAY_BUDGET_INIT;
	int rc = req && c ? relay_pty_attach(sb, req, &c->fd, &ok, &rerr, &b, err)
			  : cell_err(err, ENOMEM, "out of memory");
	json_decref(req);
	if (rc == 1)
		refusal(why, &rerr);
	if (rc != 0) {
		free(c);
		json_decref(ok);
		return rc;
	}
	json_t *pid = json_object_get(ok, "pid");
	const char *mode = json_string_value(json_object_get(ok, "mode"));
	info->pid = json_is_integer(pid) ? (int)json_integer_value(pid) : 0;
	info->is_pty = mode && !strcmp(mode, "pty");
	json_decref(ok);
	*out = c;
	return 0;
}

int proc_conn_fd(const struct proc_conn *c)
{
	return c->fd;
}

int proc_conn_wait(struct proc_conn *c, int timeout_ms)
{
	return relay_wait(c->fd, timeout_ms);
}

/* relay_pty_read answers only these frames: any other is -EPROTO there. */
static enum proc_ev kind_of(uint16_t type)
{
	switch (type) {
	case CELL_FRAME_STDOUT:
		return PROC_EV_STDOUT;
	case CELL_FRAME_STDERR:
		return PROC_EV_STDERR;
	case CELL_FRAME_REPLAY:
		return PROC_EV_REPLAY;
	case CELL_FRAME_STDIN_TAKEN:
		return PROC_EV_STDIN_TAKEN;
	case CELL_FRAME_EXIT:
		return PROC_EV_EXIT;
	default:
		return PROC_EV_ERROR;
	}
}

int proc_conn_read(struct proc_conn *c, struct proc_event *ev, struct cell_error *err)
{
	struct relay_pty_event re;
	memset(ev, 0, sizeof(*ev));
	int rc = relay_pty_read(c->fd, &c->rd, &re, err);
	if (rc < 0)
		return rc;
	ev->kind = kind_of(re.type);
	ev->data = re.data;
	ev->len = re.len;
	ev->taken = re.taken;
	ev->exit = (struct proc_exit){.code = relay_exit_code(&re.exit),
				      .exit_code = re.exit.exit_code,
				      .signal = re.exit.signal};
	refusal(&ev->error, &re.error);
	return 0;
}

int proc_conn_input(struct proc_conn *c, const void *data, size_t len, struct cell_error *err)
{
	return relay_send_bytes(c->fd, CELL_FRAME_STDIN, data, len, err);
}

int proc_conn_resize(struct proc_conn *c, unsigned cols, unsigned rows, struct cell_error *err)
{
	return relay_send_control(
	    c->fd, CELL_FRAME_RESIZE,
	    json_pack("{s:I, s:I}", "cols", (json_int_t)cols, "rows", (json_int_t)rows), err);
}

int proc_conn_signal(struct proc_conn *c, int sig, struct cell_error *err)
{
	return relay_send_control(c->fd, CELL_FRAME_SIGNAL, json_pack("{s:i}", "signal", sig), err);
}

void proc_conn_close(struct proc_conn *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	relay_reader_free(&c->rd);
	free(c);
}

/* ---- short requests ---- */

int proc_control(const struct sandbox *sb, int pid, const struct proc_control *c,
		 struct proc_refusal *why, struct cell_error *err)
{
	json_t *req = json_pack("{s:i}", "pid", pid);
	int bad = !req;
	if (req && c->input_b64)
		bad |= json_object_set_new(req, "stdin", json_string(c->input_b64));
	if (req && c->close_stdin)
		bad |= json_object_set_new(req, "stdin_close", json_true());
	if (req && c->signal)
		bad |= json_object_set_new(req, "signal", json_integer(c->signal));
	if (req && c->cols)
		bad |= json_object_set_new(req, "cols", json_integer(c->cols));
	if (req && c->rows)
		bad |= json_object_set_new(req, "rows", json_integer(c->rows));
	if (bad) {
		json_decref(req);
		req = NULL;
	}
	return op(sb, CELL_FRAME_PTY_CONTROL, req, NULL, why, err);
}

static int list_parse(json_t *sessions, struct proc_running **out, size_t *n,
		      struct cell_error *err)
{
	size_t cap = json_array_size(sessions), i;
	json_t *s;
	*out = calloc(cap ? cap : 1, sizeof(**out));
	if (!*out)
		return cell_err(err, ENOMEM, "out of memory");
	json_array_foreach(sessions, i, s)
	{
		json_t *pid = json_object_get(s, "pid");
		struct proc_running *r = &(*out)[(*n)++];
		snprintf(r->sid, sizeof(r->sid), "%s",
			 json_string_value(json_object_get(s, "id")) ?: "");
		r->pid = json_is_integer(pid) ? (int)json_integer_value(pid) : -1;
	}
	return 0;
}

int proc_list(struct sandbox *sb, struct proc_running **out, size_t *n, struct cell_error *err)
{
	*out = NULL;
	*n = 0;
	/* Taken before asking: a start that comes while the answer is on its way is kept. */
	uint64_t mark = proc_table_mark(sb->procs);
	json_t *ok = NULL;
	struct proc_refusal why;
	int rc = op(sb, CELL_FRAME_PTY_LIST, json_object(), &ok, &why, err);
	if (rc == 1)
		rc = cell_err(err, why.errnum, "%s", why.message);
	json_t *sessions = json_object_get(ok, "sessions");
	if (rc == 0 && !json_is_array(sessions))
		rc = cell_err(err, EPROTO, "cell-init sent an invalid PTY_LIST answer");
	if (rc == 0) {
		proc_table_prune(sb->procs, sessions, mark);
		rc = list_parse(sessions, out, n, err);
	}
	json_decref(ok);
	return rc;
}

int proc_status(const struct sandbox *sb, const char *sid, bool *running, int64_t *offset,
		struct proc_refusal *why, struct cell_error *err)
{
	json_t *ok = NULL;
	int rc = op(sb, CELL_FRAME_PTY_STATUS, json_pack("{s:s}", "id", sid), &ok, why, err);
	if (rc != 0)
		return rc;
	json_t *run = json_object_get(ok, "running");
	json_t *off = json_object_get(ok, "output_offset");
	if (!json_is_boolean(run) || !json_is_integer(off) || json_integer_value(off) < 0)
		rc = 2;
	*running = json_is_true(run);
	*offset = json_integer_value(off);
	json_decref(ok);
	return rc;
}

int proc_close(struct sandbox *sb, const char *sid, struct proc_refusal *why,
	       struct cell_error *err)
{
	int rc = op(sb, CELL_FRAME_PTY_CLOSE, json_pack("{s:s}", "id", sid), NULL, why, err);
	if (rc == 0)
		proc_table_remove(sb->procs, sid);
	return rc;
}

void proc_forget(struct sandbox *sb, const char *sid)
{
	proc_table_remove(sb->procs, sid);
}

int proc_tag_pid(struct sandbox *sb, const char *tag)
{
	return proc_table_tag_pid(sb->procs, tag);
}

int proc_dir_check(const struct sandbox *sb, const char *path, struct cell_error *err)
{
	struct relay_stat st;
	struct relay_error rerr = {0};
	struct relay_budget b = RELAY_BUDGET_INIT;
	int rc = relay_file_stat(sb, path, &st, &rerr, &b, err);
	if (rc != 0)
		return rc;
	return strcmp(st.type, "directory") ? 2 : 0;
}

/* ---- bash sessions ---- */

int proc_shell_open(struct sandbox *sb, const char *id, const char *cwd, json_t *envs,
		    char shell[8], struct proc_refusal *why, struct cell_error *err)
{
	int rc = proc_table_shell_add(sb->procs, id);
	if (rc < 0)
		return rc;
	json_t *ok = NULL;
	rc =
	    op(sb, CELL_FRAME_SESSION_OPEN, command_session_open(sb, id, cwd, envs), &ok, why, err);
	if (rc != 0)
		proc_table_shell_forget(sb->procs, id);
	/* sh when the image has no bash; anything else cell-init says is not believed. */
	const char *sh = json_string_value(json_object_get(ok, "shell"));
	snprintf(shell, 8, "%s", sh && !strcmp(sh, "bash") ? "bash" : "sh");
	json_decref(ok);
	return rc;
}

int proc_shell_close(struct sandbox *sb, const char *id, struct proc_refusal *why,
		     struct cell_error *err)
{
	int rc = op(sb, CELL_FRAME_SESSION_CLOSE, json_pack("{s:s}", "id", id), NULL, why, err);
	if (rc >= 0)
		proc_table_shell_forget(sb->procs, id);
	return rc;
}

void proc_shell_forget(struct sandbox *sb, const char *id)
{
	proc_table_shell_forget(sb->procs, id);
}
