/* Interactive terminals of the CLI (exec -t, shell, attach): a PTY session in the sandbox
 * (execd's /pty routes) driven from the user's terminal over its WebSocket. */
#pragma once

#include <stdbool.h>

#include <jansson.h>

#include "cell/error.h"

struct cli_term_attach {
	const char *id;	     /* sandbox */
	const char *session; /* PTY session */
	long long since;     /* replay from this output offset; <0: none */
	bool takeover;	     /* evict another client attached to it */
	bool input;	     /* pass stdin on (else the session gets no input from here) */
	bool remove_at_end;  /* DELETE the session when its process ends or the link drops */
};

/* POST .../pty {"command"?,"cwd"?}: a new PTY session, its id in *session (malloc'd). */
int cli_term_create(const char *id, const char *command, const char *cwd, char **session,
		    struct cell_error *err);

/* Start a session's process (it starts on the first attach) and leave it running with
 * nobody attached: 0 once celld said it is connected, -errno with err filled. */
int cli_term_start(const char *id, const char *session, struct cell_error *err);

/* Attach the user's terminal to a session until its process ends (0, *exit_code its code),
 * the user detaches with ^P^Q (0, *exit_code 0, how to come back printed), or the link
 * fails (-errno, err says why). The terminal is in raw mode meanwhile (when stdin is one)
 * and its size follows SIGWINCH. */
int cli_term_attach(const struct cli_term_attach *a, int *exit_code, struct cell_error *err);

/* argv as one shell command line: each word single-quoted, `exec` first, exports of envs
 * (an object of strings, may be NULL) before it. malloc'd; NULL on ENOMEM. */
char *cli_term_command_line(char *const *argv, json_t *envs);
