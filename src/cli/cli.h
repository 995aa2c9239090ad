/* The cell CLI's internal interface: global options, the HTTP client (libcurl over the
 * Unix socket, jansson for JSON), and one entry point per subcommand.
 *
 * Everything the CLI receives from celld is treated as untrusted text: ids are validated
 * before they are put into a URL path, and server messages are stripped of control
 * characters before they reach the terminal (escape sequences in an error message must
 * not be able to rewrite the user's screen). Command output is the exception: it is
 * written byte-exact, because that is what `cell run` promises. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "cell/error.h"

#define CLI_DEFAULT_SOCKET "/run/cell/cell.sock"
#define CLI_DEFAULT_IMAGES "/var/lib/cell/images"
#define CLI_EXECD_PREFIX   "/proxy/44772"

/* Exit codes of the CLI itself. `run` and `exec` pass the command's code through and use
 * CLI_EXIT_RUN_FAIL for their own failures (CONTRACT "CLI exit codes"). */
enum {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAIL = 1,
	CLI_EXIT_USAGE = 2,
	CLI_EXIT_TIMEOUT = 124,
	CLI_EXIT_RUN_FAIL = 125,
};

struct cli_global {
	const char *socket; /* --socket, $CELL_SOCKET, or CLI_DEFAULT_SOCKET */
	bool json;	    /* --json */
};

extern struct cli_global cli;

/* Set by the SIGINT/SIGTERM/SIGHUP handler (cli_signals_install); 0 when none arrived. */
extern volatile sig_atomic_t cli_interrupted;

/* ---- main.c: option helpers shared by the subcommands ---- */

/* Long option values shared by every subcommand, so `cell ls --json` works as well as
 * `cell --json ls`. */
enum { CLI_OPT_SOCKET = 0x1000, CLI_OPT_JSON };

/* clang-format off */
#define CLI_GLOBAL_LONGOPTS                                    \
	{"socket", required_argument, NULL, CLI_OPT_SOCKET},   \
	{"json", no_argument, NULL, CLI_OPT_JSON},             \
	{"help", no_argument, NULL, 'h'}
/* clang-format on */

/* Handle a global option returned by getopt_long; true when it was one. */
bool cli_global_opt(int c, const char *arg);

/* Parse the options of a command that takes only the global ones and -h (optstring "h",
 * or "+h" to stop at the first operand). Returns the exit code when the command is done
 * (help printed, or a bad option), -1 when it should go on with argv[optind...]. */
int cli_global_opts_only(int argc, char **argv, const char *optstring, const char *cmd,
			 void (*help)(FILE *));

/* Print "cell: <msg>\n" to stderr, control characters replaced. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Write text to f with every control character (other than \n and \t) replaced by '?'. */
void cli_fputs_safe(const char *s, FILE *f);

/* Usage error: "cell <cmd>: <msg>" then "Try 'cell <cmd> --help'." Returns `code`. */
int cli_usage_error(const char *cmd, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* After getopt_long has printed what was wrong with an option: point at the help. */
int cli_bad_option(const char *cmd, int code);

/* Refuse anything that is not a well-formed sandbox id before it reaches a URL. */
bool cli_check_id(const char *id);

/* Parse "K=V" (or "K", taken from the CLI's own environment) into obj. */
int cli_parse_env(json_t *obj, const char *arg);

/* Parse "-v HOST:DEST[:ro|:rw]" into a {"host","dest","readOnly"} object appended to arr;
 * HOST is made absolute with realpath() (it must exist). */
int cli_parse_volume(json_t *arr, const char *arg);

/* Parse a positive number of seconds (fractions allowed) into milliseconds. */
int cli_parse_seconds_ms(const char *arg, long long *ms);

/* Install handlers for SIGINT/SIGTERM/SIGHUP that only record the signal (so the CLI can
 * interrupt the command and delete a --rm sandbox), and ignore SIGPIPE. */
void cli_signals_install(void);

/* ---- client.c: HTTP over the Unix socket ---- */

/* Fill err for a failure that is not a failed system call: the message as given, without
 * cell_err's ": strerror" suffix; returns -code. */
int cli_fail(struct cell_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

struct cli_buf {
	char *data;
	size_t len;
	size_t cap;
};

void cli_buf_free(struct cli_buf *b);

/* One JSON request. path is the URL path + query ("/v1/sandboxes?page=1"). body may be
 * NULL. On a 2xx answer returns 0 and sets *out to the parsed JSON (NULL for an empty
 * body) and *status. On a transport failure or a non-2xx answer returns -errno with err
 * naming what failed (the server's {"code","message"} when it sent one); *status is the
 * HTTP status (0 when none). `what` prefixes the message ("create sandbox"). */
int cli_api(const char *method, const char *path, json_t *body, const char *what, json_t **out,
	    long *status, struct cell_error *err);

/* Like cli_api, but the caller gets the server's error code (e.g. "FILE_NOT_FOUND") too. */
int cli_api_code(const char *method, const char *path, json_t *body, const char *what, json_t **out,
		 long *status, char *code, size_t code_size, struct cell_error *err);

/* Run a command in a sandbox and stream its output (SSE) to fds 1 and 2.
 * Returns 0 with *exit_code set (the command's code, 128+N for a signal, 124 on timeout),
 * or -errno with err filled when cell itself failed. When interrupted by a signal
 * (cli_interrupted) the command is interrupted through DELETE /command and
 * *exit_code = 128 + signal. */
struct cli_exec_req {
	const char *id;
	char *const *argv;
	const char *cwd;      /* NULL: the server's default (/workspace) */
	json_t *envs;	      /* object or NULL */
	long long timeout_ms; /* 0: none */
};
int cli_exec_stream(const struct cli_exec_req *req, int *exit_code, struct cell_error *err);

/* ---- cmd_exec.c: the command's options, shared by exec and run ---- */

/* -w DIR, -e K=V, -t SECONDS (optstring "w:e:t:"). */
/* clang-format off */
#define CLI_EXEC_LONGOPTS                                      \
	{"workdir", required_argument, NULL, 'w'},             \
	{"env", required_argument, NULL, 'e'},                 \
	{"timeout", required_argument, NULL, 't'}
/* clang-format on */

/* Handle one of CLI_EXEC_LONGOPTS into req (and envs, req->envs' object): 1 when c was one,
 * 0 when not, -errno (already reported) for a bad value. */
int cli_exec_opt(int c, const char *arg, struct cli_exec_req *req, json_t *envs);

/* Upload local file `src` (fd, already open; name used for the part's filename) to
 * `dest` in sandbox id, with permission bits `mode`. */
int cli_upload(const char *id, int fd, const char *filename, const char *dest, unsigned mode,
	       struct cell_error *err);

/* Download `path` from sandbox id into fd. */
int cli_download(const char *id, const char *path, int fd, struct cell_error *err);

/* Set when a request failed because celld's socket could not be connected to. */
extern bool cli_unreachable;

/* URL-encode s (for query strings); malloc'd, NULL on allocation failure. */
char *cli_urlencode(const char *s);

/* Release libcurl (the shared handle keeps the connection to celld open between calls). */
void cli_client_cleanup(void);

/* ---- shared sandbox operations (cmd_create.c, cmd_rm.c) ---- */

struct cli_create_opts {
	const char *image;   /* NULL: "default" */
	const char *session; /* extensions["cell.sessionKey"] */
	json_t *volumes;     /* array of {"host","dest","readOnly"}, or NULL */
	json_t *env;	     /* object, or NULL */
	long long timeout_s; /* sandbox lifetime; 0: none */
	const char *seccomp; /* extensions["cell.seccomp"]; NULL: celld's default */
	bool seccomp_log;    /* extensions["cell.seccompLog"] */
};

/* --seccomp NAME and --seccomp-log of create and run. */
enum { CLI_OPT_SECCOMP = 0x1100, CLI_OPT_SECCOMP_LOG };
/* clang-format off */
#define CLI_SECCOMP_LONGOPTS                                           \
	{"seccomp", required_argument, NULL, CLI_OPT_SECCOMP},         \
	{"seccomp-log", no_argument, NULL, CLI_OPT_SECCOMP_LOG}
/* clang-format on */
/* Handle one of CLI_SECCOMP_LONGOPTS into o: true when c was one. */
bool cli_seccomp_opt(int c, const char *arg, struct cli_create_opts *o);

/* POST /v1/sandboxes; on success the new (or resumed) sandbox's id is in id[] and its JSON
 * in *out (may be NULL). */
int cli_create_sandbox(const struct cli_create_opts *o, char *id, size_t id_size, json_t **out,
		       struct cell_error *err);

/* DELETE /v1/sandboxes/{id}. */
int cli_delete_sandbox(const char *id, struct cell_error *err);

/* ---- subcommands ---- */

int cmd_run(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_pause(int argc, char **argv);  /* cmd_pause.c */
int cmd_resume(int argc, char **argv); /* cmd_pause.c */
int cmd_cp(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_selftest(int argc, char **argv); /* cmd_selftest.c */
int cmd_version(int argc, char **argv);

/* ---- output.c ---- */

/* Print JSON pretty (2-space indent) to stdout, with a trailing newline. */
int cli_print_json(json_t *j);

/* A simple left-aligned table: rows of `cols` strings; column widths from the contents.
 * Cells are printed with control characters replaced. */
struct cli_table {
	size_t cols;
	size_t rows;
	char **cells; /* rows * cols, malloc'd strings */
};
void cli_table_init(struct cli_table *t, size_t cols);
int cli_table_add(struct cli_table *t, const char *const *row);
void cli_table_print(const struct cli_table *t, FILE *f);
void cli_table_free(struct cli_table *t);

/* Human size: "1.2 GiB". */
void cli_human_size(unsigned long long n, char *buf, size_t size);
