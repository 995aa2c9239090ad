/* Running a command in a sandbox from the CLI (exec and run): the options they share
 * (-w, -e, -t, -u) and the stream that passes the command's output and exit code through. */
#pragma once

#include <stdbool.h>

#include <jansson.h>

#include "cell/error.h"

struct cli_exec_req {
	const char *id;
	char *const *argv;
	const char *cwd;      /* NULL: the server's default (/workspace) */
	json_t *envs;	      /* object or NULL */
	long long timeout_ms; /* 0: none */
	bool set_user;	      /* --user given: run as uid:gid */
	bool input;	      /* feed our stdin to the command's (-i) */
	bool background;      /* start it and return at once (run -d) */
	bool delete_sandbox;  /* celld deletes the sandbox when it ends (run -d --rm) */
	long long uid, gid;
};

/* -w DIR, -e K=V, -t SECONDS, -u UID[:GID] (optstring "w:e:t:u:"). */
/* clang-format off */
#define CLI_EXEC_LONGOPTS                                      \
	{"workdir", required_argument, NULL, 'w'},             \
	{"env", required_argument, NULL, 'e'},                 \
	{"timeout", required_argument, NULL, 't'},             \
	{"user", required_argument, NULL, 'u'}
/* clang-format on */

/* Handle one of CLI_EXEC_LONGOPTS into req (and envs, req->envs' object): 1 when c was one,
 * 0 when not, -errno (already reported) for a bad value. */
int cli_exec_opt(int c, const char *arg, struct cli_exec_req *req, json_t *envs);

/* Run a command in a sandbox and stream its output to fds 1 and 2 byte-exact.
 * Returns 0 with *exit_code set (the command's code, 128+N for a signal, 124 on timeout),
 * or -errno with err filled when cell itself failed. When interrupted by a signal
 * (cli_signals_caught) or when fd 1 or 2 is a closed pipe, the command is interrupted
 * through DELETE /command and *exit_code = 128 + the signal. */
int cli_exec_stream(const struct cli_exec_req *req, int *exit_code, struct cell_error *err);

/* CMD started on a new PTY session (its id in *session, malloc'd), nobody attached: 0, or
 * -1 with the failure printed naming command (--timeout and --user refused first, then,
 * with input_tty, an input that is not a terminal). */
int cli_exec_tty_start(const struct cli_exec_req *xr, const char *command, bool input_tty,
		       char **session);

/* -t of exec and run: CMD on a PTY session wired to this terminal (input passed on with
 * interactive), removed when it ends (kept when the user detaches). The exit status, any
 * failure printed naming command. */
int cli_exec_tty(const struct cli_exec_req *xr, const char *command, bool interactive);
