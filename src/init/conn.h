/* Relay connections of cell-init: frames in and out of one celld connection each.
 *
 * A connection's first frame is its request; conn.c hands it up to the dispatcher main.c
 * set (conn_set_request), which picks the operation (exec, a file read or write) that owns
 * the connection from then on (conn_attach). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define CONN_HIGH_WATER (1u << 20)   /* stop producing output above this many queued bytes */
#define CONN_LOW_WATER	(256u << 10) /* ask the producer for more below this */

struct conn;

/* The operation that owns a connection after its request frame (an exec, a file read or
 * write). */
struct conn_handler {
	/* A frame arrived. The payload is freed by the caller after return. */
	void (*frame)(void *op, struct conn *c, uint16_t type, uint8_t *payload, uint32_t len);
	/* The output queue fell below CONN_LOW_WATER after conn_want_drain(). */
	void (*drain)(void *op, struct conn *c);
	/* The connection is finishing or gone: forget it. Called exactly once. */
	void (*closed)(void *op, struct conn *c);
	/* celld half-closed its side. true keeps the connection for output, false drops it. */
	bool keep_on_eof;
};

/* The retry timer of sends refused for want of memory (conn.c), made once at start while
 * memory is there: 0 or -errno (then such a send ends its connection). */
int conn_setup(void);
void conn_new(int fd);
int conn_count(void);
void conn_attach(struct conn *c, const struct conn_handler *h, void *op);
/* Queue one frame (copied). */
void conn_send(struct conn *c, uint16_t type, const void *payload, uint32_t len);
/* Queue one JSON frame; takes the reference to obj. */
void conn_send_json(struct conn *c, uint16_t type, json_t *obj);
void conn_send_error(struct conn *c, int errnum, const char *msg);
/* One frame carrying fd (SCM_RIGHTS), sent at once; only as a conversation's first answer.
 * Takes the reference to obj; fd stays the caller's. */
void conn_send_json_with_fd(struct conn *c, uint16_t type, json_t *obj, int fd);
/* Read up to CELL_FRAME_CHUNK bytes from fd straight into a new frame of the given type.
 * Returns bytes read, 0 on EOF, or -errno (-EAGAIN when nothing is there). */
long conn_send_from_fd(struct conn *c, uint16_t type, int fd, uint32_t max, int64_t pread_off);
size_t conn_queued(const struct conn *c);
/* A bulk producer feeds c: a larger socket send buffer, so each wakeup of celld finds more
 * (memory is only used while bytes wait in it). */
#define CONN_BULK_SNDBUF (1 << 20)
void conn_grow_sndbuf(struct conn *c);
void conn_want_drain(struct conn *c);
/* Flush what is queued, then close. Detaches the handler (closed() is called). */
void conn_finish(struct conn *c);
/* ERROR {"errno","message"} then conn_finish. */
void conn_fail(struct conn *c, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Flush every connection that has new output (end of each loop iteration). */
void conn_flush_dirty(void);

/* The first frame of a connection: picks the operation. The payload is freed by the
 * caller after return. */
typedef void conn_request_fn(struct conn *c, uint16_t type, uint8_t *payload, uint32_t len);
void conn_set_request(conn_request_fn *fn);

/* Parse a control payload as a JSON object; on failure sends ERROR, finishes c and returns
 * NULL. */
/* The request's "id" (a bash or PTY session's): 1-CONN_ID_MAX letters, digits, '.', '-'
 * or '_'; NULL after failing c with EINVAL naming what. */
#define CONN_ID_MAX 64
const char *conn_req_id(struct conn *c, json_t *req, const char *what);
json_t *conn_parse_json(struct conn *c, const uint8_t *payload, uint32_t len, const char *what);

/* The signal of a SIGNAL frame, the one frame a running command or session run takes
 * (during names it for the error: "a command", "a session"); anything else, or a signal
 * outside 1..NSIG-1, sends ERROR, finishes c and returns -1. */
int conn_parse_signal(struct conn *c, uint16_t type, const uint8_t *payload, uint32_t len,
		      const char *during);
