/* cell's HTTP client library: libcurl to celld's OpenSandbox API, over its Unix socket or
 * TCP, shared by the CLI, the bench client and the integration test harness.
 *
 * A `struct cell_client` is one endpoint and one kept-alive connection: fill it with
 * cell_client_init(), then set what differs (url, api_key, timeouts, interrupt) before the
 * first request; release it with cell_client_close(). Nothing in here reads a global, prints
 * or exits: every call returns 0 (or a non-negative value) or -errno with a message in the
 * caller's `struct cell_error` naming what failed (the server's {"code","message"} when it
 * sent one). A handle is not thread-safe; use one per thread.
 *
 * Layers, each usable on its own:
 *   cell_client_request   one raw request: method, path, body, headers in; status, body and
 *                         header lines out, whatever the status (the harness's h_request);
 *   cell_client_api       one JSON request; a non-2xx answer is an error (the CLI);
 *   cell_client_sse_*     the event-stream framer: bytes in, one callback per event;
 *   cell_client_stream    a request whose answer is an event stream, read through the framer;
 *   cell_client_exec      POST .../command: output events decoded and handed to a callback,
 *                         the end event in a result (the CLI's `run`/`exec`, the bench);
 *   cell_client_upload    multipart POST .../files/upload from an fd or a buffer;
 *   cell_client_download  GET .../files/download into an fd (or, as a tar archive of a
 *                         directory, into a sink: cell_client_download_tar).
 *
 * Everything celld sends is untrusted: answers and events are bounded in size, and text
 * from the server is returned as given (a caller printing it to a terminal strips control
 * characters itself). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cell/error.h"

#define CELL_CLIENT_EXECD_PREFIX "/proxy/44772" /* execd's routes under a sandbox */
#define CELL_CLIENT_KEY_HEADER	 "OPEN-SANDBOX-API-KEY"
#define CELL_CLIENT_BODY_MAX	 (64u << 20) /* default bound of a buffered answer */
#define CELL_CLIENT_EVENT_MAX	 (16u << 20) /* default bound of one event of a stream */
#define CELL_CLIENT_ERRBODY_MAX	 (64u << 10) /* bytes of an error answer kept for its message */

/* A growable byte buffer, always NUL-terminated when data is not NULL. */
struct cell_client_buf {
	char *data;
	size_t len;
	size_t cap;
};

/* Append len bytes; -EMSGSIZE when the buffer would exceed max bytes, -ENOMEM. */
int cell_client_buf_append(struct cell_client_buf *b, const void *data, size_t len, size_t max);
void cell_client_buf_free(struct cell_client_buf *b);

struct cell_client {
	/* ---- set by the caller (cell_client_init fills the defaults) ---- */
	const char *socket;	/* celld's Unix socket; NULL: connect to url */
	const char *url;	/* "http://127.0.0.1:8080" (no trailing '/') when socket is NULL */
	const char *api_key;	/* sent as CELL_CLIENT_KEY_HEADER; NULL: none */
	const char *user_agent; /* NULL: libcurl's none */
	long connect_timeout_s; /* 0: libcurl's default (300 s); init sets 10 */
	long timeout_s;		/* whole transfer; 0: none */
	/* Checked about once a second during a transfer marked abortable (streams, uploads,
	 * downloads; never a create or delete, which must not stop half-way): non-zero aborts
	 * it with -EINTR. Typically the flag a signal handler sets. NULL: never. */
	const volatile sig_atomic_t *interrupt;
	/* Never go through a proxy, whatever the environment names (a test harness keeps
	 * every request on the loopback). false: libcurl's environment rules. */
	bool no_proxy;

	/* ---- set by the library ---- */
	bool unreachable; /* the last failure was: could not connect to celld */

	/* ---- private ---- */
	void *curl_;
	void *json_headers_;
	bool abortable_;
	char errbuf_[256];
};

/* Defaults: socket as given (NULL for TCP: set url), connect timeout 10 s. */
void cell_client_init(struct cell_client *c, const char *socket);
/* Close the connection and release libcurl's state. The handle may be used again. */
void cell_client_close(struct cell_client *c);

/* "the Unix socket path" or "the URL": what messages call the endpoint. */
const char *cell_client_endpoint(const struct cell_client *c);

/* Bytes of the last transfer's answer as received (headers excluded, before any
 * decoding): what a throughput figure calls wire bytes. */
unsigned long long cell_client_received(struct cell_client *c);

/* URL-encode s for a query string ('/' kept); malloc'd, NULL on allocation failure. */
char *cell_client_urlencode(const char *s);

/* ---- raw requests ---- */

struct cell_client_req {
	const char *method;	    /* NULL: "GET" */
	const char *path;	    /* URL path + query, sent as is (no ".." normalisation) */
	const void *body;	    /* NULL: none (a POST sends an empty body) */
	size_t body_len;	    /* 0 with a body: strlen(body) */
	const char *content_type;   /* default "application/json" when there is a body */
	const char *const *headers; /* extra "Name: value" lines, NULL-terminated */
	bool chunked;		    /* send the body with chunked transfer encoding */
	size_t max_body;	    /* bytes of the answer kept; 0: CELL_CLIENT_BODY_MAX */
	bool abortable;		    /* cell_client.interrupt may abort this transfer */
	/* Streams only (cell_client_stream): */
	size_t recv_buffer; /* libcurl's receive buffer; 0: 64 KiB (output handed on early) */
	size_t max_event;   /* largest event; 0: CELL_CLIENT_EVENT_MAX */
	/* When set, receives the start (CELL_CLIENT_ERRBODY_MAX bytes) of a non-200 answer's
	 * body, for a caller that reads the answer itself; the caller frees it. */
	struct cell_client_buf *error_body;
};

struct cell_client_resp {
	long status;			/* 0 when no HTTP answer arrived */
	struct cell_client_buf body;	/* the answer's body */
	struct cell_client_buf headers; /* its header lines as received ("Name: value\r\n"...) */
};

/* One request. Returns 0 when an answer arrived, whatever its status; -errno when none did
 * (cannot connect, connection reset, answer larger than max_body: -EMSGSIZE, interrupted:
 * -EINTR). resp is filled either way and freed with cell_client_resp_free. */
int cell_client_request(struct cell_client *c, const struct cell_client_req *req,
			struct cell_client_resp *resp, struct cell_error *err);
/* The value of the first header `name` (case-insensitive) in buf (malloc'd), or NULL. */
char *cell_client_resp_header(const struct cell_client_resp *resp, const char *name);
void cell_client_resp_free(struct cell_client_resp *resp);

/* ---- the TCP tunnel ---- */

/* A connection to celld switched to a raw TCP tunnel to 127.0.0.1:port inside sandbox id
 * (POST /v1/sandboxes/{id}/ports/{port}/tunnel, "Upgrade: cell-tcp"): the fd, whose bytes
 * are the app's both ways from here (cell/splice.h joins it to another socket), or -errno
 * with err from celld's answer (nothing listens there: -EIO, "PROXY_CONNECT_FAILED").
 * Uses c's endpoint, key and connect timeout only: a socket of its own, never c's
 * libcurl handle, so threads may each open one with the same c. */
int cell_client_tunnel(const struct cell_client *c, const char *id, unsigned port,
		       struct cell_error *err);

/* ---- JSON requests ---- */

struct cell_client_answer {
	long status; /* HTTP status; 0 when none arrived */
	json_t
	    *json; /* the parsed body of a 2xx answer (NULL when empty); the caller's reference */
	char code[64]; /* the server's error "code" of a non-2xx answer ("FILE_NOT_FOUND"), or "" */
};

/* One JSON request (body may be NULL) with "Content-Type: application/json". On a 2xx
 * answer returns 0 with ans->json set. On a transport failure or a non-2xx answer returns
 * -errno (400 -EINVAL, 401/403 -EACCES, 404 -ENOENT, 409 -EEXIST, 413 -EFBIG, 503 -EAGAIN,
 * else -EIO) with err "<what>: <server message> (<code>)". ans may be NULL. */
int cell_client_api(struct cell_client *c, const char *method, const char *path, json_t *body,
		    const char *what, struct cell_client_answer *ans, struct cell_error *err);

/* ---- event streams ---- */

/* One event's data: a bare JSON line, or the joined "data:" lines of an SSE block. Return
 * 0 to go on, 1 when this was the last event wanted (the rest of the stream is read and
 * dropped), -errno to stop (with the callback's own err filled). */
typedef int cell_client_event_fn(void *ctx, const char *data, size_t len);

/* The framer: events end at a blank line; within a block, each line starting with '{' is
 * an event of its own, "data:" lines are joined with "\n", comments and other fields are
 * skipped; "\r\n" is accepted. */
struct cell_client_sse {
	cell_client_event_fn *on_event;
	void *ctx;
	size_t max_event;	/* 0: CELL_CLIENT_EVENT_MAX */
	struct cell_error *err; /* filled when an event is too large */
	/* private */
	struct cell_client_buf buf_;
	size_t scanned_;
	bool done_;
};

/* Feed bytes: the callback's result for the first event that stopped (1 or -errno), or 0.
 * After 1 (done) further input is ignored. */
int cell_client_sse_feed(struct cell_client_sse *s, const void *data, size_t len);
/* The stream ended: whatever is left is one last block. */
int cell_client_sse_finish(struct cell_client_sse *s);
bool cell_client_sse_done(const struct cell_client_sse *s);
void cell_client_sse_free(struct cell_client_sse *s);

/* A request whose 200 answer is an event stream (req->abortable is honoured; the answer is
 * read whole unless on_event ends it). Returns 0 when the stream ended or on_event returned
 * 1; on_event's -errno; -errno of the transport (-EINTR when interrupted); or, for a non-200
 * answer, the status's -errno with err from its body (as cell_client_api). *status is the
 * HTTP status (0 when none). `what` names the request in messages. */
int cell_client_stream(struct cell_client *c, const struct cell_client_req *req,
		       cell_client_event_fn *on_event, void *ctx, const char *what, long *status,
		       struct cell_error *err);

/* ---- commands ---- */

struct cell_client_exec_ops {
	/* Decoded output of the command: fd 1 (stdout) or 2 (stderr). -EPIPE stops the stream
	 * because its reader went away; another -errno stops it as an error (fill err). */
	int (*output)(void *ctx, int fd, const void *data, size_t len, struct cell_error *err);
	/* Optional: every parsed event, before it is handled (borrowed reference). */
	void (*event)(void *ctx, json_t *ev);
};

struct cell_client_exec_result {
	long status;	    /* HTTP status of the POST */
	char cmd_id[129];   /* text of the "init" event: the id for interrupt and status */
	bool done;	    /* an end event (execution_complete or error) arrived */
	bool complete;	    /* it was execution_complete */
	int exit_code;	    /* 0 on execution_complete; an error event's evalue when it is
			     * 0..255; -1 otherwise */
	json_t *error;	    /* the error event's "error" object (ename, evalue, traceback) */
	bool stream_failed; /* the failure came from the stream or its reader (including -EPIPE
			     * from output and -EINTR): the command may still run, and
			     * cell_client_exec_interrupt stops it */
};

/* POST /v1/sandboxes/{id}/proxy/44772/command with the JSON text body, the stream decoded
 * (text or base64 output) into ops. Returns 0 when an end event arrived (res says which),
 * or -errno: the transport's, an HTTP error's (as cell_client_api), -ECONNRESET when the
 * stream ended without an end event, -EPROTO for a malformed event, or output's. The
 * transfer is abortable. Free res with cell_client_exec_result_free. */
int cell_client_exec(struct cell_client *c, const char *id, const char *body,
		     const struct cell_client_exec_ops *ops, void *ctx,
		     struct cell_client_exec_result *res, struct cell_error *err);
void cell_client_exec_result_free(struct cell_client_exec_result *res);

/* DELETE .../command?id=cmd_id: SIGTERM to the command's process group, then SIGKILL.
 * Does nothing (returns 0) when cmd_id is empty. -ENOENT when it is already gone. */
int cell_client_exec_interrupt(struct cell_client *c, const char *id, const char *cmd_id,
			       struct cell_error *err);

/* POST .../command/{cmd_id}/stdin: len bytes of data (may be 0) to the stdin of a command
 * started with "stdin": true; close_it closes its stdin after them. -EEXIST (409) when the
 * command takes no more input (it ended, or its stdin was closed). */
int cell_client_exec_stdin(struct cell_client *c, const char *id, const char *cmd_id,
			   const void *data, size_t len, bool close_it, struct cell_error *err);

/* ---- files ---- */

struct cell_client_upload {
	const char *id;	      /* sandbox */
	const char *dest;     /* path inside it */
	int mode;	      /* permission bits (0755), sent as execd's decimal digits; <0: none */
	int fd;		      /* data from this fd (a regular file's size is sent), or ... */
	const void *data;     /* ... from this buffer when fd < 0 */
	size_t len;	      /* bytes of data */
	const char *filename; /* the file part's filename; NULL: "file" */
	/* When set, receives the answer whatever its status: status, header lines and body
	 * (at most CELL_CLIENT_BODY_MAX bytes); the caller frees it (cell_client_resp_free). */
	struct cell_client_resp *answer;
};

/* Multipart POST .../files/upload ("metadata" JSON part, then the "file" part). Abortable;
 * a 2xx answer is success, anything else an error as cell_client_api. */
int cell_client_upload(struct cell_client *c, const struct cell_client_upload *up,
		       struct cell_error *err);
/* POST path with fd's bytes as the body (to its end; a regular file's size is sent, anything
 * else goes chunked), progress(cls, bytes sent so far) called as they go (may be NULL).
 * Abortable. 0 when an answer came (any status: *answer holds it, freed with
 * cell_client_resp_free), -errno when none did. */
typedef void cell_client_progress_fn(void *cls, unsigned long long sent);
int cell_client_post_fd(struct cell_client *c, const char *path, int fd, const char *content_type,
			cell_client_progress_fn *progress, void *cls,
			struct cell_client_resp *answer, struct cell_error *err);
/* GET .../files/download?path= into fd. Abortable. */
int cell_client_download(struct cell_client *c, const char *id, const char *path, int fd,
			 struct cell_error *err);
/* GET .../files/download?path=&format=tar: the archive of a directory (or file), each piece
 * as it comes to sink (0 to go on, or -errno to stop: that is the result, with err set by
 * sink). A body cut short (the archive was, inside the sandbox) is an error. Abortable. */
typedef int cell_client_sink_fn(void *cls, const void *data, size_t len, struct cell_error *err);
int cell_client_download_tar(struct cell_client *c, const char *id, const char *path,
			     cell_client_sink_fn *sink, void *cls, struct cell_error *err);

/* GET path (URL path + query), a 2xx answer's body piece by piece to sink as it comes (a
 * sandbox's logs), its header lines into *headers when not NULL (the caller frees them;
 * cell_client_resp_header reads one from a struct cell_client_resp holding them). Abortable.
 * A non-2xx answer is an error as cell_client_api's; what names the request. */
int cell_client_get_sink(struct cell_client *c, const char *path, const char *what,
			 cell_client_sink_fn *sink, void *cls, struct cell_client_buf *headers,
			 struct cell_error *err);

/* ---- upgraded connections ---- */

/* A request answered with 101 Switching Protocols: the connection is then a raw byte stream
 * (a WebSocket, a TCP tunnel). It is the client's own connection: make no other request on
 * c while it is in use, and cell_client_close(c) after cell_client_upgraded_free. */
struct cell_client_upgraded;
/* method path with "Connection: Upgrade", "Upgrade: protocol", the API key and headers
 * ("Name: value" lines, NULL-terminated). 0 on 101 (*out; *head, when asked, the answer's
 * head, malloc'd); -errno otherwise, a refusal's status and message in err as
 * cell_client_api says. */
int cell_client_upgrade(struct cell_client *c, const char *method, const char *path,
			const char *protocol, const char *const *headers, const char *what,
			struct cell_client_upgraded **out, char **head, struct cell_error *err);
/* Non-blocking I/O: bytes moved, 0 (recv: the peer closed), -EAGAIN, or -errno. */
ssize_t cell_client_upgraded_send(struct cell_client_upgraded *u, const void *data, size_t len);
ssize_t cell_client_upgraded_recv(struct cell_client_upgraded *u, void *buf, size_t len);
/* Bytes already read from the socket wait to be received (poll would not say so). */
bool cell_client_upgraded_buffered(const struct cell_client_upgraded *u);
int cell_client_upgraded_fd(const struct cell_client_upgraded *u);
void cell_client_upgraded_free(struct cell_client_upgraded *u);
/* The value of header name in an answer's head, malloc'd, or NULL. */
char *cell_client_head_header(const char *head, const char *name);

/* ---- WebSocket ---- */

/* A whole message from celld (text or binary); data is valid during the call only. */
typedef void cell_client_ws_msg_fn(void *ctx, bool binary, const uint8_t *data, size_t len);
struct cell_client_ws;
/* GET path as a WebSocket (the accept key checked). Errors as cell_client_upgrade. The
 * connection is c's own: cell_client_close(c) after cell_client_ws_free. */
int cell_client_ws_open(struct cell_client *c, const char *path, cell_client_ws_msg_fn *on_msg,
			void *msg_ctx, const char *what, struct cell_client_ws **out,
			struct cell_error *err);
/* The socket and the poll events it waits for now. */
int cell_client_ws_fd(const struct cell_client_ws *ws);
short cell_client_ws_events(const struct cell_client_ws *ws);
/* Queue a message (sent by the next pump). */
int cell_client_ws_send(struct cell_client_ws *ws, bool binary, const void *data, size_t len);
/* Move what poll said is ready (revents; 0 when only queued output waits): messages go to
 * on_msg. 0 to go on, 1 when the conversation is over (closed by either side, or broken). */
int cell_client_ws_pump(struct cell_client_ws *ws, short revents);
/* Start a close with code (1000 normal) and reason. */
int cell_client_ws_close(struct cell_client_ws *ws, uint16_t code, const char *reason);
/* The code of the peer's close frame (0: none came). */
uint16_t cell_client_ws_close_code(const struct cell_client_ws *ws);
void cell_client_ws_free(struct cell_client_ws *ws);
