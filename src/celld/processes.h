/* processes.c: cell-init's PTY sessions (a process on a terminal or pipes that outlives its
 * attached connections) and bash sessions, for both fronts.
 *
 * The fronts describe what to start and how to attach in these types; this module speaks
 * cell-init's frames (PTY_*, SESSION_OPEN/CLOSE), records every start in the sandbox's table
 * (proc_table.h) and in the audit log (one "process.start" record whichever API asked). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cell/error.h"
#include "cell/id.h"
#include "proc_table.h"

struct sandbox;

/* Input sent to a process and not yet taken (STDIN_TAKEN), at most: cell-init's bound. */
#define PROC_STDIN_WINDOW (1u << 20)

/* Why cell-init refused a request: its errno (1..4095) and its message. */
struct proc_refusal {
	int errnum;
	char message[256];
};

/* What a process is started with (PTY_CREATE). */
struct proc_spec {
	enum proc_api api;
	const char *sid;     /* its session's id, the front's choice */
	const char *command; /* a line for the shell (NULL with no cmd: an interactive shell) */
	const char *cmd;     /* or an argv: cmd, then args */
	json_t *args, *envs; /* borrowed, may be NULL; envs add to the sandbox's environment */
	const char *cwd;     /* NULL: the image's WorkingDir; relative: below the user's home */
	const char *user;    /* NULL: none named; else USER, LOGNAME and HOME are the user's */
	bool user_optional;  /* root when the sandbox has no such user */
	bool once;	     /* forgotten when its process ends */
	int stdin_open;	     /* -1: cell-init's default; 0: /dev/null; 1: a pipe */
	int64_t timeout_ms;  /* killed this long after its start; < 0: never */
	bool pty;	     /* on a terminal (a /pty terminal's mode is its attach's) */
	unsigned cols, rows; /* of the attach that proc_start makes */
	const char *tag;     /* NULL: none */
	json_t *config;	     /* what the table keeps for the front's list (borrowed) */
};

/* How a client attaches to a session (PTY_ATTACH). */
struct proc_attach {
	const char *sid;     /* the session, or NULL and */
	int pid;	     /* its process's pid */
	bool pty;	     /* on its terminal, else its pipes */
	bool takeover;	     /* from the client attached already */
	bool share;	     /* beside the clients attached already */
	int64_t since;	     /* replay the kept output from this offset; < 0: no replay */
	unsigned cols, rows; /* 0: cell-init's default */
};

/* An attached conversation: the fd a stream polls, and what it reads. */
struct proc_conn;

struct proc_attached {
	int pid;
	bool is_pty; /* the terminal, not pipes */
};

enum proc_ev {
	PROC_EV_STDOUT,
	PROC_EV_STDERR,
	PROC_EV_REPLAY, /* data: the 8-byte big-endian offset, then the bytes */
	PROC_EV_STDIN_TAKEN,
	PROC_EV_EXIT,
	PROC_EV_ERROR /* error.errnum ECONNABORTED: another client took it over */
};

struct proc_exit {
	int code; /* as reported: 124 on timeout, 128+N for signal N, else the exit code */
	int exit_code;
	int signal;
};

struct proc_event {
	enum proc_ev kind;
	const uint8_t *data; /* valid until the next read */
	size_t len;
	uint64_t taken; /* STDIN_TAKEN */
	struct proc_exit exit;
	struct proc_refusal error;
};

/* One session cell-init runs (PTY_LIST). */
struct proc_running {
	char sid[CELL_ID_MAX + 1];
	int pid; /* -1: none said */
};

/* Start s in sb: the table pruned by what runs, PTY_CREATE, then (conn not NULL) attached as
 * s->pty says with *conn and *pid; recorded in the table and the audit log. 0, 1 refused
 * (why), -errno. A session whose attach failed is closed again. */
int proc_start(struct sandbox *sb, const struct proc_spec *s, struct proc_conn **conn, int *pid,
	       struct proc_refusal *why, struct cell_error *err);
/* PTY_ATTACH: 0 with *out and *info, 1 refused (why), -errno. */
int proc_attach(const struct sandbox *sb, const struct proc_attach *a, struct proc_conn **out,
		struct proc_attached *info, struct proc_refusal *why, struct cell_error *err);
int proc_conn_fd(const struct proc_conn *c);
/* 1 readable, 0 nothing within timeout_ms, -errno. */
int proc_conn_wait(struct proc_conn *c, int timeout_ms);
/* The next frame; any frame cell-init may not send here is -EPROTO. */
int proc_conn_read(struct proc_conn *c, struct proc_event *ev, struct cell_error *err);
/* Input for its process, a resize, a signal: -EPIPE or -ECONNRESET when cell-init ended the
 * conversation (what it sent before says why). */
int proc_conn_input(struct proc_conn *c, const void *data, size_t len, struct cell_error *err);
int proc_conn_resize(struct proc_conn *c, unsigned cols, unsigned rows, struct cell_error *err);
int proc_conn_signal(struct proc_conn *c, int sig, struct cell_error *err);
/* Detach (the process runs on) and free. */
void proc_conn_close(struct proc_conn *c);

/* What PTY_CONTROL does to a process, on a short conversation of its own. */
struct proc_control {
	const char *input_b64; /* input, base64 (NULL: none) */
	bool close_stdin;
	int signal;	     /* 0: none */
	unsigned cols, rows; /* 0: unchanged */
};
int proc_control(const struct sandbox *sb, int pid, const struct proc_control *c,
		 struct proc_refusal *why, struct cell_error *err);
/* The sessions cell-init runs (*out freed by the caller), the table pruned by them. */
int proc_list(struct sandbox *sb, struct proc_running **out, size_t *n, struct cell_error *err);
/* PTY_STATUS: 0 with *running and *offset (its output's end), 1 refused, 2 an answer that
 * is no status, -errno. */
int proc_status(const struct sandbox *sb, const char *sid, bool *running, int64_t *offset,
		struct proc_refusal *why, struct cell_error *err);
/* PTY_CLOSE: its process group killed, the session and its entry gone. 0, 1, -errno. */
int proc_close(struct sandbox *sb, const char *sid, struct proc_refusal *why,
	       struct cell_error *err);
/* Forget session sid's entry: its process ended. */
void proc_forget(struct sandbox *sb, const char *sid);
/* The pid of sb's process tagged tag (-1: none). */
int proc_tag_pid(struct sandbox *sb, const char *tag);
/* A path in sb that must be a directory: 0 it is, 1 it is not there (or cell-init refused
 * to look), 2 it is no directory, -errno. */
int proc_dir_check(const struct sandbox *sb, const char *path, struct cell_error *err);

/* A bash session (SESSION_OPEN): counted in sb's table first (-EUSERS, -ENOSPC when full,
 * nothing sent), then opened; 0 with *shell "bash" or "sh", 1 refused, -errno. */
int proc_shell_open(struct sandbox *sb, const char *id, const char *cwd, json_t *envs,
		    char shell[8], struct proc_refusal *why, struct cell_error *err);
/* SESSION_CLOSE: 0, 1 refused, -errno; forgotten unless -errno. */
int proc_shell_close(struct sandbox *sb, const char *id, struct proc_refusal *why,
		     struct cell_error *err);
/* A session cell-init no longer knows. */
void proc_shell_forget(struct sandbox *sb, const char *id);
