/* relay.c: client side of the frame protocol (init is hostile) */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "cell/error.h"
#include "cell/proto.h"
#include "relay_types.h"

struct sandbox;

#define RELAY_CONTROL_MAX (64u << 10) /* JSON frames from init */

struct relay_exit {
	int exit_code; /* 0..255 */
	int signal;    /* 0..64 */
	bool timed_out;
	int64_t duration_ms;
};

/* STDIN_TAKEN: the command took (or dropped) `taken` more bytes of its input. */
enum relay_ev { RELAY_EV_STDOUT, RELAY_EV_STDERR, RELAY_EV_EXIT, RELAY_EV_STDIN_TAKEN };

struct relay_event {
	enum relay_ev kind;
	struct cell_frame frame; /* STDOUT/STDERR bytes; cell_frame_free afterwards */
	struct relay_exit exit;
	uint64_t taken;
};

/* st's metadata as a JSON object {key: value} (a new reference), NULL when it has none. */
json_t *relay_stat_meta(const struct relay_stat *st);

/* Connect to <dir>/init.sock; the socket has send/receive timeouts so a stalled init can
 * never hold a thread inside a frame. */
int relay_connect(const struct sandbox *sb, struct relay_budget *b, struct cell_error *err);
/* Wait for data, up to timeout_ms (-1: forever). 1 readable, 0 timeout, -errno. */
int relay_wait(int fd, int timeout_ms);
/* PING → PONG within timeout_ms, all steps together. */
int relay_ping(const struct sandbox *sb, int timeout_ms, struct cell_error *err);
/* EXEC (or SESSION_RUN, type): send req, read STARTED (returns 0, *pid set) or ERROR
 * (returns 1, rerr set). */
int relay_exec_start(int fd, uint16_t type, json_t *req, pid_t *pid, struct relay_error *rerr,
		     struct relay_budget *b, struct cell_error *err);
/* Next event of a running EXEC conversation. */
int relay_exec_next(int fd, struct relay_event *ev, struct cell_error *err);
/* The same with the payload read into rd's buffer (reused from frame to frame, no
 * allocation per chunk): ev->frame.payload points into it, valid until the next call, and
 * is not to be freed. */
struct relay_reader {
	uint8_t *buf;
	size_t cap;
};
int relay_exec_read(int fd, struct relay_reader *rd, struct relay_event *ev,
		    struct cell_error *err);
void relay_reader_free(struct relay_reader *rd);
/* SIGNAL, sent within RELAY_BUDGET_MS. */
int relay_signal(int fd, int sig, struct cell_error *err);
/* FILE_STAT: 0 with st, 1 with rerr (init refused), -errno. */
int relay_file_stat(const struct sandbox *sb, const char *path, struct relay_stat *st,
		    struct relay_error *rerr, struct relay_budget *b, struct cell_error *err);
/* FILE_READ: on 0, *fd is the open conversation positioned after STAT. */
int relay_file_read(const struct sandbox *sb, const char *path, int64_t offset, int64_t limit,
		    int *fd, struct relay_stat *st, struct relay_error *rerr,
		    struct relay_budget *b, struct cell_error *err);
/* FILE_TAR: on 0, *fd is the open conversation positioned after STAT (of what path leads
 * to); the archive's bytes follow as relay_file_read_next() reads them. An ERROR there
 * means the archive was cut short. */
int relay_file_tar(const struct sandbox *sb, const char *path, int *fd, struct relay_stat *st,
		   struct relay_error *rerr, struct relay_budget *b, struct cell_error *err);
/* Next DATA chunk (returns 1 with frame) or END (returns 0); ERROR → -errno with message. */
int relay_file_read_next(int fd, struct cell_frame *frame, struct cell_error *err);
/* FILE_WRITE: opens the conversation; then DATA frames; relay_file_write_end sends END and
 * reads OK (0, *size) or ERROR (1, rerr). */
int relay_file_write(const struct sandbox *sb, json_t *req, int *fd, struct relay_budget *b,
		     struct cell_error *err);
int relay_file_write_end(int fd, int64_t *size, struct relay_error *rerr, struct relay_budget *b,
			 struct cell_error *err);
/* A one-answer file operation (FILE_MKDIR, FILE_REMOVE, ...): sends req, reads OK (0, *ok
 * its JSON object, a new reference) or ERROR (1, rerr); -errno otherwise. */
int relay_file_op(const struct sandbox *sb, uint16_t type, json_t *req, json_t **ok,
		  struct relay_error *rerr, struct relay_budget *b, struct cell_error *err);
/* FILE_LIST: each entry (at most max, else -EPROTO) through each(); 0 at END, 1 with rerr
 * on ERROR, -errno otherwise (each()'s own failure included). */
int relay_file_list(const struct sandbox *sb, json_t *req, unsigned long max,
		    int (*each)(void *cls, const char *path, const struct relay_stat *st),
		    void *cls, struct relay_error *rerr, struct relay_budget *b,
		    struct cell_error *err);
/* FILE_WATCH: sends req {"path","recursive"}, reads OK (0, *fdp the open conversation) or
 * ERROR (1, rerr); -errno otherwise. */
int relay_file_watch(const struct sandbox *sb, json_t *req, int *fdp, struct relay_error *rerr,
		     struct relay_budget *b, struct cell_error *err);
/* The next EVENTS frame of a watch (wait for it with relay_wait first): 1 with *events (an
 * array of {"name","op"}, a new reference), 0 when cell-init ended the watch (its directory
 * gone), -errno with err (cell-init's ERROR: EOVERFLOW when events were lost). */
int relay_watch_next(int fd, json_t **events, struct cell_error *err);
/* PTY_ATTACH: sends req, reads OK (0: *ok its JSON object, *fdp the open conversation) or
 * ERROR (1, rerr); -errno otherwise. */
int relay_pty_attach(const struct sandbox *sb, json_t *req, int *fdp, json_t **ok,
		     struct relay_error *rerr, struct relay_budget *b, struct cell_error *err);
/* The next frame of an attached terminal: STDOUT/STDERR (data, len), REPLAY (offset of its
 * first byte; data and len are the whole payload, the 8 bytes of the offset first), EXIT
 * (exit), ERROR (error: ECONNABORTED when another client took the terminal over). data
 * points into rd's buffer until the next call. Any other frame is -EPROTO. */
struct relay_pty_event {
	uint16_t type; /* CELL_FRAME_* */
	const uint8_t *data;
	size_t len;
	uint64_t offset;
	struct relay_exit exit;
	struct relay_error error;
	uint64_t taken; /* STDIN_TAKEN */
};
int relay_pty_read(int fd, struct relay_reader *rd, struct relay_pty_event *ev,
		   struct cell_error *err);
/* Raw bytes as frames of type (STDIN), at most CELL_FRAME_CHUNK each; len 0 sends one
 * empty frame (STDIN_CLOSE). Within RELAY_BUDGET_MS. */
int relay_send_bytes(int fd, uint16_t type, const void *data, size_t len, struct cell_error *err);
/* A JSON control frame (RESIZE, SIGNAL; payload may be NULL: empty), within RELAY_BUDGET_MS. */
int relay_send_control(int fd, uint16_t type, json_t *payload, struct cell_error *err);
/* Read an ERROR init sent (after a failed send, or early during a write) into rerr: 1 when
 * found, 0 when nothing came within timeout_ms, -EPROTO for any other frame. */
int relay_take_error(int fd, struct relay_error *rerr, int timeout_ms);
