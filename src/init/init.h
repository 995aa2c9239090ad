/* cell-init internals: the event loop, relay connections, commands and file operations.
 *
 * cell-init serves everything from one thread, which never waits on anything a process in
 * the sandbox controls; a second thread only clones commands (exec.c). Every fd it waits on
 * (listening socket, connections, command pipes, the signalfd, timerfds) is non-blocking and
 * registered in one epoll set through a `struct init_watch`. Objects that own watches are freed
 * only after the current batch of epoll events has been dispatched (init_defer_free), so an event
 * for an object that died earlier in the same batch finds the watch inactive instead of freed
 * memory. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include <jansson.h>

#define init_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- event loop (main.c) ---- */

struct init_watch {
	void (*fn)(struct init_watch *w, uint32_t events);
	int fd;
	bool active; /* registered in epoll; events for inactive watches are dropped */
};

int init_watch_add(struct init_watch *w, uint32_t events);
int init_watch_mod(struct init_watch *w, uint32_t events);
void init_watch_del(struct init_watch *w);

struct init_deferred {
	struct init_deferred *next;
	void *obj; /* free()d after the current event batch */
};
void init_defer_free(struct init_deferred *d, void *obj);

extern int init_rootfd;	    /* open("/", O_PATH): every client path resolves beneath it */
extern int init_devnull_fd; /* stdin of every command */
extern struct rlimit init_nofile_orig; /* RLIMIT_NOFILE restored in commands */

/* ---- relay connections (conn.c) ---- */

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

void conn_new(int fd);
int conn_count(void);
void conn_attach(struct conn *c, const struct conn_handler *h, void *op);
/* Queue one frame (copied). */
void conn_send(struct conn *c, uint16_t type, const void *payload, uint32_t len);
/* Queue one JSON frame; takes the reference to obj. */
void conn_send_json(struct conn *c, uint16_t type, json_t *obj);
void conn_send_error(struct conn *c, int errnum, const char *msg);
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

/* First frame of a connection (main.c): picks the operation. */
void init_request(struct conn *c, uint16_t type, uint8_t *payload, uint32_t len);

/* Parse a control payload as a JSON object; on failure sends ERROR, finishes c and returns
 * NULL. */
json_t *init_parse_json(struct conn *c, const uint8_t *payload, uint32_t len, const char *what);

/* Copy msg into a fresh json string, replacing bytes that are not valid UTF-8 with '?'
 * (messages carry hostile paths and program names; jansson accepts only UTF-8). */
json_t *init_json_string_lossy(const char *msg, size_t len);

/* ---- commands (exec.c) ---- */

/* Start the spawner thread (after the epoll set exists, with every signal blocked). */
void exec_init(void);
void exec_start(struct conn *c, json_t *req);
/* A child was reaped; returns true when it was the main process of a command. */
bool exec_reaped(int pid, int status);
/* A child stopped (signal sig): one that has not reached its execve yet is killed and its
 * request answered ERROR. */
void exec_stopped(int pid, int sig);
/* Test mode shutdown: SIGKILL every command's process group. */
void exec_kill_all(void);

/* ---- files (files.c) ---- */

void files_stat(struct conn *c, json_t *req);
void files_read(struct conn *c, json_t *req);
void files_write(struct conn *c, json_t *req);
