/* HTTP client of the cell CLI: libcurl over celld's Unix socket, JSON via jansson, the
 * command stream (SSE) and file transfers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cell/error.h"

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
 * (cli_signals_caught) the command is interrupted through DELETE /command and
 * *exit_code = 128 + signal. */
struct cli_exec_req {
	const char *id;
	char *const *argv;
	const char *cwd;      /* NULL: the server's default (/workspace) */
	json_t *envs;	      /* object or NULL */
	long long timeout_ms; /* 0: none */
};
int cli_exec_stream(const struct cli_exec_req *req, int *exit_code, struct cell_error *err);

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
