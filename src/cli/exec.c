/* Running a command in a sandbox from the CLI: the options exec and run share, and the
 * command's output and exit code passed through. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "client.h"
#include "error.h"
#include "exec.h"
#include "global.h"
#include "parse.h"
#include "signals.h"
#include "terminal.h"

int cli_exec_opt(int c, const char *arg, struct cli_exec_req *req, json_t *envs)
{
	int r;
	switch (c) {
	case 'w':
		/* Said as the flag here: celld's answer would name its field, cwd. */
		if (arg[0] != '/') {
			cli_error("-w '%s': must be an absolute path in the sandbox", arg);
			return -EINVAL;
		}
		req->cwd = arg;
		return 1;
	case 'e':
		r = cli_parse_env(envs, arg);
		return r < 0 ? r : 1;
	case 't':
		r = cli_parse_seconds_ms(arg, &req->timeout_ms);
		return r < 0 ? r : 1;
	case 'u':
		r = cli_parse_user(arg, &req->uid, &req->gid);
		req->set_user = r == 0;
		return r < 0 ? r : 1;
	default:
		return 0;
	}
}

static json_t *exec_body(const struct cli_exec_req *req)
{
	json_t *argv = json_array();
	json_t *body = json_object();
	if (!argv || !body)
		goto fail;
	if (!req->argv[0][0]) {
		cli_error("CMD is empty: name a program after '--'");
		goto fail;
	}
	for (char *const *a = req->argv; *a; a++) {
		json_t *s = json_string(*a);
		if (!s) {
			cli_error("argument '%s' is not valid UTF-8", *a);
			goto fail;
		}
		json_array_append_new(argv, s);
	}
	json_object_set_new(body, "argv", argv);
	argv = NULL;
	/* The bytes exactly as the command wrote them, not execd's lines. */
	json_object_set_new(body, "rawOutput", json_true());
	if (req->cwd && json_object_set_new(body, "cwd", json_string(req->cwd)) < 0) {
		cli_error("-w '%s': not valid UTF-8", req->cwd);
		goto fail;
	}
	if (req->envs && json_object_size(req->envs))
		json_object_set(body, "envs", req->envs);
	if (req->timeout_ms > 0)
		json_object_set_new(body, "timeout", json_integer(req->timeout_ms));
	if (req->input)
		json_object_set_new(body, "stdin", json_true());
	if (req->background)
		json_object_set_new(body, "background", json_true());
	if (req->delete_sandbox)
		json_object_set_new(body, "deleteSandboxOnExit", json_true());
	if (req->set_user) {
		json_object_set_new(body, "uid", json_integer(req->uid));
		json_object_set_new(body, "gid", json_integer(req->gid));
	}
	return body;
fail:
	json_decref(argv);
	json_decref(body);
	return NULL;
}

/* The command's output, byte-exact to our own stdout and stderr. */
static int exec_output(void *ctx, int fd, const void *data, size_t len, struct cell_error *err)
{
	(void)ctx;
	int r = cell_write_all(fd, data, len);
	if (r < 0 && r != -EPIPE)
		return cell_err(err, -r, "writing the command's %s", fd == 1 ? "stdout" : "stderr");
	return r;
}

/* cell-init's "cwd DIR: why" when -w DIR could not be entered (CMD never started), said
 * as the flag the user gave: true when text was that. */
static bool workdir_failed(const struct cli_exec_req *req, const char *text)
{
	if (!req->cwd || !text || strncmp(text, "cwd ", 4))
		return false;
	size_t n = strlen(req->cwd);
	if (strncmp(text + 4, req->cwd, n) || strncmp(text + 4 + n, ": ", 2))
		return false;
	const char *why = text + 4 + n + 2;
	if (!strcmp(why, strerror(ENOENT)))
		cli_error("-w %s: no such directory in the sandbox", req->cwd);
	else
		cli_error("-w %s: %s", req->cwd, why);
	return true;
}

/* celld could not carry the command to its end: say so with what became of its sandbox,
 * the usual cause (deleted or stopped under it). */
static void say_celld_failed(const char *id, const char *why)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	json_t *sb = NULL;
	long status = 0;
	struct cell_error err = {0};
	int r = cli_client_api("GET", path, NULL, "sandbox", &sb, &status, &err);
	json_t *st = json_object_get(sb, "status");
	const char *state = json_string_value(json_object_get(st, "state"));
	const char *reason = json_string_value(json_object_get(st, "reason"));
	if (r < 0 && status == 404)
		cli_error("sandbox %s was deleted while the command ran (%s)", id, why);
	else if (state && strcmp(state, "Running"))
		cli_error("sandbox %s is %s: the command ended with it (%s)", id,
			  reason && !strcmp(reason, "Stopped") ? "Stopped" : state, why);
	else
		cli_error("sandbox %s: %s", id, why);
	json_decref(sb);
}

/* The command's exit code from its error event. A plain non-zero exit is the command's own
 * business; a timeout, a signal or a failure to start deserves one line on stderr naming
 * what happened. */
static int exec_error_code(const struct cli_exec_req *req, json_t *e, int code)
{
	const char *ename = json_string_value(json_object_get(e, "ename"));
	const char *evalue = json_string_value(json_object_get(e, "evalue"));
	json_t *tb = json_object_get(e, "traceback");
	if (workdir_failed(req, evalue) ||
	    workdir_failed(req, json_string_value(json_array_get(tb, 0))))
		return CLI_EXIT_RUN_FAIL;
	bool exec_error = ename && !strcmp(ename, "CommandExecError");
	/* celld's own failure (the sandbox stopped or deleted under the command, its relay
	 * gone) is 125 with a traceback of "cell: why": never silent, never doubled. */
	const char *first = json_string_value(json_array_get(tb, 0));
	if (exec_error && first && !strncmp(first, "cell: ", 6)) {
		say_celld_failed(req->id, first + 6);
		return CLI_EXIT_RUN_FAIL;
	}
	if (!exec_error || code < 0 || code == CLI_EXIT_TIMEOUT || code > 128) {
		size_t i;
		json_t *line;
		json_array_foreach(tb, i, line)
		{
			if (json_is_string(line))
				cli_error("%s", json_string_value(line));
		}
		if (!json_array_size(tb))
			cli_error("command failed: %s: %s", ename ? ename : "error",
				  evalue ? evalue : "?");
	}
	return code >= 0 ? code : CLI_EXIT_RUN_FAIL;
}

/* Ask celld to stop the command (SIGTERM to its process group, then SIGKILL). */
static void exec_interrupt(const char *id, const char *cmd_id)
{
	struct cell_error err = {0};
	if (cell_client_exec_interrupt(cli_client(), id, cmd_id, &err) < 0 && err.code != ENOENT)
		cli_error("%s", err.msg);
}

/* -i: a thread copies our stdin to the command's, over its own connection (the stream
 * holds the CLI's), from the moment the init event names the command. Only its read of
 * stdin may be cancelled: the end of the command ends it there. */
struct feeder {
	const char *id;
	char cmd_id[129];
	pthread_t thread;
	bool started;
};

static void *feed_stdin(void *arg)
{
	struct feeder *f = arg;
	struct cell_client c = *cli_client();
	c.curl_ = NULL; /* a connection of its own */
	c.json_headers_ = NULL;
	c.interrupt = NULL;
	static char buf[256 << 10]; /* under celld's bound per request */
	struct cell_error err = {0};
	for (;;) {
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		ssize_t n = read(0, buf, sizeof(buf));
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (n < 0 && errno == EINTR)
			continue;
		bool end = n <= 0;
		int r;
		/* 503: the command has not read for a while; celld waited, so ask again. */
		while ((r = cell_client_exec_stdin(&c, f->id, f->cmd_id, buf, end ? 0 : (size_t)n,
						   end, &err)) == -EAGAIN)
			;
		if (r < 0) {
			/* A command that stopped taking input is not an error of ours. */
			if (err.code != EEXIST)
				cli_error("%s", err.msg);
			break;
		}
		if (end)
			break;
	}
	cell_client_close(&c);
	return NULL;
}

static void exec_event(void *ctx, json_t *ev)
{
	struct feeder *f = ctx;
	const char *type = json_string_value(json_object_get(ev, "type"));
	const char *cmd = json_string_value(json_object_get(ev, "text"));
	if (f->started || !type || strcmp(type, "init") || !cmd)
		return;
	snprintf(f->cmd_id, sizeof(f->cmd_id), "%s", cmd);
	f->started = pthread_create(&f->thread, NULL, feed_stdin, f) == 0;
	if (!f->started)
		cli_error("exec -i: cannot start the input thread");
}

static void feeder_stop(struct feeder *f)
{
	if (!f->started)
		return;
	pthread_cancel(f->thread);
	pthread_join(f->thread, NULL);
}

int cli_exec_stream(const struct cli_exec_req *req, int *exit_code, struct cell_error *err)
{
	*exit_code = CLI_EXIT_RUN_FAIL;
	json_t *body = exec_body(req);
	if (!body)
		return cell_err_msg(err, EINVAL, "building the command request");
	_cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!text)
		return cell_err(err, ENOMEM, "building the command request");
	static const struct cell_client_exec_ops ops = {.output = exec_output};
	static const struct cell_client_exec_ops ops_input = {.output = exec_output,
							      .event = exec_event};
	struct feeder f = {.id = req->id};
	struct cell_client_exec_result res;
	int r = cell_client_exec(cli_client(), req->id, text, req->input ? &ops_input : &ops, &f,
				 &res, err);
	feeder_stop(&f);
	if (res.stream_failed && (r == -EPIPE || (r == -EINTR && cli_signals_caught))) {
		/* The caller went away (^C, kill, closed pipe): stop the command too. */
		exec_interrupt(req->id, res.cmd_id);
		*exit_code = 128 + (r == -EPIPE ? SIGPIPE : cli_signals_caught);
		r = 0;
	} else if (r < 0 && res.stream_failed) {
		exec_interrupt(req->id, res.cmd_id);
	} else if (r == 0) {
		*exit_code = res.complete ? 0 : exec_error_code(req, res.error, res.exit_code);
	}
	cell_client_exec_result_free(&res);
	return r;
}

/* -t's -w DIR, checked before the session starts: its process would otherwise fail on
 * the user's terminal with cell-init's words. 0, or -1 after saying what is wrong. */
static int tty_workdir(const char *id, const char *cwd)
{
	_cleanup_free_ char *enc = cell_client_urlencode(cwd);
	char path[8192];
	if (!enc ||
	    snprintf(path, sizeof(path), "/v1/sandboxes/%s" CLI_EXECD_PREFIX "/files/info?path=%s",
		     id, enc) >= (int)sizeof(path)) {
		cli_error("-w %.80s: too long", cwd);
		return -1;
	}
	json_t *ans = NULL;
	long status = 0;
	struct cell_error err = {0};
	int r = cli_client_api("GET", path, NULL, "-w", &ans, &status, &err);
	/* {"<path>": {FileInfo}}: one entry. */
	json_t *info = json_object_iter_value(json_object_iter(ans));
	const char *type = json_string_value(json_object_get(info, "type"));
	bool dir = type && (!strcmp(type, "directory") || !strcmp(type, "dir"));
	if (r < 0 && status == 404)
		cli_error("-w %s: no such directory in the sandbox", cwd);
	else if (r < 0)
		cli_error("%s", err.msg);
	else if (!dir)
		cli_error("-w %s: not a directory in the sandbox", cwd);
	json_decref(ans);
	return r == 0 && dir ? 0 : -1;
}

int cli_exec_tty_start(const struct cli_exec_req *xr, const char *command, bool input_tty,
		       char **session)
{
	if (xr->timeout_ms || xr->set_user)
		return cli_error_usage(command, -1, "-t does not take %s",
				       xr->timeout_ms ? "--timeout" : "--user");
	if (input_tty && !isatty(0)) {
		cli_error("%s -it: the input is not a terminal (pipe input with -i alone)",
			  command);
		return -1;
	}
	_cleanup_free_ char *line = cli_term_command_line(xr->argv, xr->envs);
	if (!line) {
		cli_error("%s: an -e name is not a shell variable name", command);
		return -1;
	}
	if (xr->cwd && tty_workdir(xr->id, xr->cwd) < 0)
		return -1;
	struct cell_error err = {0};
	if (cli_term_create(xr->id, line, xr->cwd, session, &err) < 0) {
		cli_error("%s", err.msg);
		return -1;
	}
	return 0;
}

/* -t: CMD on a PTY session, removed when it ends (kept when the user detaches). */
int cli_exec_tty(const struct cli_exec_req *xr, const char *command, bool interactive)
{
	struct cell_error err = {0};
	_cleanup_free_ char *sid = NULL;
	int code = CLI_EXIT_RUN_FAIL;
	if (cli_exec_tty_start(xr, command, interactive, &sid) < 0)
		return code;
	struct cli_term_attach a = {
	    .id = xr->id, .session = sid, .since = 0, .input = interactive, .remove_at_end = true};
	if (cli_term_attach(&a, &code, &err) < 0) {
		cli_error("%s", err.msg);
		code = CLI_EXIT_RUN_FAIL;
	}
	return code;
}
