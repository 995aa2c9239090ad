/* WebSocket (RFC 6455), server side: the check of an opening handshake and its answer's
 * key, and the framing of the connection it upgrades (libwslay), driven by the caller's
 * poll loop. One concern: no HTTP server, no route, no relay, no API (a leaf). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell/codec.h"
#include "cell/error.h"

/* Sec-WebSocket-Accept: base64 of a SHA-1, 28 characters. */
#define WEBSOCKET_ACCEPT_LEN CELL_WS_ACCEPT_LEN

/* Close codes (RFC 6455 7.4.1) and the application's own range. */
#define WEBSOCKET_NORMAL	 1000
#define WEBSOCKET_GOING_AWAY	 1001
#define WEBSOCKET_PROTOCOL_ERROR 1002
#define WEBSOCKET_TOO_BIG	 1009
#define WEBSOCKET_INTERNAL	 1011

/* The request headers of an opening handshake (NULL when absent). */
struct websocket_handshake {
	const char *method, *upgrade, *connection, *version, *key;
};
/* Whether h is an opening handshake this server accepts (GET, Upgrade: websocket,
 * Connection: upgrade, Sec-WebSocket-Version: 13, a Sec-WebSocket-Key of 16 bytes in
 * base64): 0 with the Sec-WebSocket-Accept of its answer, or -EINVAL with err naming the
 * header at fault. */
int websocket_check(const struct websocket_handshake *h, char accept[WEBSOCKET_ACCEPT_LEN + 1],
		    struct cell_error *err);

/* One upgraded connection. Client messages larger than max_msg close it with 1009;
 * fragmented data messages are reassembled within that bound; reserved bits, unmasked client
 * frames and bad control frames close it with 1002 (all checked by libwslay). */
struct websocket;
/* A whole message from the client: text (else binary) and its bytes. */
typedef void (*websocket_message_fn)(void *cls, bool text, const uint8_t *data, size_t len);

struct websocket *websocket_new(int fd, const char *extra, size_t extra_len, size_t max_msg,
				websocket_message_fn on_message, void *cls, struct cell_error *err);
void websocket_free(struct websocket *ws);
/* Queue a message (copied). -EPIPE once a close was queued, -ENOMEM. */
int websocket_send(struct websocket *ws, bool text, const void *data, size_t len);
/* The same for a binary message of one prefix byte then data. */
int websocket_send_prefixed(struct websocket *ws, uint8_t prefix, const void *data, size_t len);
int websocket_ping(struct websocket *ws);
/* Queue a close frame (reason: at most 123 bytes); nothing is queued after it. */
int websocket_close(struct websocket *ws, uint16_t code, const char *reason);
/* The poll events it waits for now (POLLIN, POLLOUT; 0: the conversation is over). */
short websocket_events(const struct websocket *ws);
/* Read what is there and write what can be written, after poll said revents. -errno when
 * the connection failed or the peer went away (-ENOBUFS: it sends and does not read, see
 * websocket_backlogged); then the caller ends it. */
int websocket_io(struct websocket *ws, short revents);
/* The client is behind: WEBSOCKET_BACKLOG_BYTES or WEBSOCKET_BACKLOG_MSGS are queued for it
 * and not yet written. The caller makes no more until it catches up (past the backlog by
 * at most one message of CELL_FRAME_MAX). What the client itself makes queue (a pong for
 * each of its pings) is bounded too: at four times the backlog, websocket_io fails with
 * -ENOBUFS, a client that does not read being cut off. */
#define WEBSOCKET_BACKLOG_BYTES (1u << 20)
#define WEBSOCKET_BACKLOG_MSGS	4096u
bool websocket_backlogged(const struct websocket *ws);
/* When anything last came from the client (celld_now_ms). */
int64_t websocket_heard_ms(const struct websocket *ws);
/* Stop (or go on) reading the peer after the message being delivered: the caller cannot
 * take more now (backpressure through the socket). */
void websocket_read_pause(struct websocket *ws, bool paused);
/* The close the client sent or was sent (0 when none yet). */
bool websocket_closing(const struct websocket *ws);
