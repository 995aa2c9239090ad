/* interpreter.c: celld as a client of the code-interpreter service inside a sandbox (the
 * project's own, src/interpreter/code_interpreter.py, started by the code-interpreter
 * image's entrypoint on 127.0.0.1:INTERP_PORT of the sandbox's network namespace). Its
 * protocol is E2B's code-interpreter server's (POST /execute answering NDJSON, /contexts);
 * E2B's SDK reaches it through the port proxy as it is, and OpenSandbox's /code routes
 * (api_code.c) through these calls. Everything it answers is bounded and judged: it runs
 * inside the sandbox. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cell/error.h"

struct sandbox;

#define INTERP_PORT	  49999
#define INTERP_ANSWER_MAX (1u << 20) /* a unary answer's body */
/* One NDJSON line of a run: the service bounds a run's results to 16 MiB; a line past this
 * is a misbehaving sandbox's, and ends the run (celld holds at most this much per run). */
#define INTERP_LINE_MAX	   (20u << 20)
#define INTERP_REQUEST_MAX (2u << 20) /* what is sent: the service refuses more */

/* A connection to sb's service (portconn's, non-blocking), or -errno with err. A sandbox
 * that started (or resumed) less than INTERP_START_S ago may not have its service up yet:
 * a refused connection is tried again, a little later each time, for up to
 * INTERP_READY_MS, so a client's first call right after its create finds it, as on a
 * platform whose templates start with the service running. The port proxy uses it for
 * INTERP_PORT too. */
#define INTERP_START_S	60
#define INTERP_READY_MS 30000
int interp_connect(struct sandbox *sb, struct cell_error *err);

/* A unary answer: its status and body (NUL-terminated; JSON on 2xx, one line of text
 * naming what was wrong otherwise). */
struct interp_answer {
	int status;
	char *body;
	size_t len;
};
void interp_answer_free(struct interp_answer *a);

/* METHOD path with body (NULL: none) to sb's service: 0 with *a (whatever its status), or
 * -errno with err: -ECONNREFUSED when nothing listens (no service in this image, or not
 * started yet), -ETIMEDOUT, -EPROTO for an answer that is no HTTP/1.1 within bounds. */
int interp_call(struct sandbox *sb, const char *method, const char *path, json_t *body,
		struct interp_answer *a, struct cell_error *err);

/* A run: POST /execute with req ({code, context_id?, language?, env_vars?}). 0 with *run
 * streaming; 1 with *refused (the service's 4xx/5xx, the run never started); -errno as
 * for interp_call. Closing the run (interp_run_close) before its end interrupts it: the
 * service interrupts the kernel when its client goes. */
struct interp_run;
int interp_run_open(struct sandbox *sb, json_t *req, struct interp_run **run,
		    struct interp_answer *refused, struct cell_error *err);
/* The context the service runs it in (its answer's X-Context-Id: the one named, or the
 * language's default), NULL when it named none. */
const char *interp_run_context(const struct interp_run *run);
/* The connection's fd, for a poll (POLLIN) while interp_run_next has nothing. */
int interp_run_fd(const struct interp_run *run);
/* The run's next line as a JSON object (a new reference) in *line: 1; 0 at the end of the
 * stream; -EAGAIN when nothing whole has come yet (poll the fd); -errno with err (-EPROTO
 * for a line that is no JSON object or over INTERP_LINE_MAX). Never blocks. */
int interp_run_next(struct interp_run *run, json_t **line, struct cell_error *err);
void interp_run_close(struct interp_run *run);
