/* Bash sessions of cell-init: one long-lived shell each, runs fed to it one at a time. */
#pragma once

#include <stdbool.h>

#include <jansson.h>

struct conn;

/* At most this many sessions live in one sandbox; SESSION_OPEN beyond it: ERROR EMFILE. */
#define SESSION_MAX 64

/* SESSION_OPEN: start the shell; OK {"pid","shell"} once it is ready, or ERROR. */
void session_open(struct conn *c, json_t *req);
/* SESSION_RUN: STARTED, STDOUT/STDERR*, EXIT; or ERROR (ENOENT no such session, EBUSY a
 * run is going on, EPIPE its shell has exited). */
void session_run(struct conn *c, json_t *req);
/* SESSION_CLOSE: kill the shell and what it started; OK or ERROR ENOENT. */
void session_close(struct conn *c, json_t *req);
/* A child was reaped; true when it was a session's shell. */
bool session_reaped(int pid, int status);
