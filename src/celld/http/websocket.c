/* WebSocket (RFC 6455), server side. The handshake is ours (a few headers and a SHA-1);
 * the framing is libwslay's: masking, fragments, control frames, close codes and the bound
 * on a message are a small library's well-tested code rather than ours, and it does no I/O
 * of its own, so the caller's poll loop stays in charge of both sockets of a conversation.
 * Everything a client sends is hostile: the handshake's headers are checked before the 101,
 * a message is bounded before it is buffered, and a protocol error closes the connection. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <wslay/wslay.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "timefmt.h"
#include "websocket.h"

/* ---- the opening handshake (RFC 6455 4.2) ---- */

/* Whether the comma-separated header value list holds token (any case). */
static bool has_token(const char *list, const char *token)
{
	size_t tlen = strlen(token);
	for (const char *p = list; p && *p;) {
		p += strspn(p, " \t,");
		size_t n = strcspn(p, ",");
		size_t m = n;
		while (m && (p[m - 1] == ' ' || p[m - 1] == '\t'))
			m--;
		if (m == tlen && !strncasecmp(p, token, tlen))
			return true;
		p += n;
	}
	return false;
}

int websocket_check(const struct websocket_handshake *h, char accept[WEBSOCKET_ACCEPT_LEN + 1],
		    struct cell_error *err)
{
	if (!h->method || strcmp(h->method, "GET"))
		return cell_err(err, EINVAL, "a WebSocket handshake is a GET");
	if (!h->upgrade || !has_token(h->upgrade, "websocket"))
		return cell_err(err, EINVAL,
				"not a WebSocket handshake: header Upgrade must be "
				"'websocket'");
	if (!h->connection || !has_token(h->connection, "upgrade"))
		return cell_err(err, EINVAL,
				"not a WebSocket handshake: header Connection must "
				"name 'Upgrade'");
	if (!h->version || strcmp(h->version, "13"))
		return cell_err(err, EINVAL, "header Sec-WebSocket-Version must be 13");
	uint8_t *raw = NULL;
	size_t raw_len = 0;
	if (!h->key || strlen(h->key) != 24 || cell_base64_decode(h->key, 24, &raw, &raw_len) < 0 ||
	    raw_len != 16) {
		free(raw);
		return cell_err(err, EINVAL, "header Sec-WebSocket-Key must be 16 bytes in base64");
	}
	free(raw);
	if (cell_ws_accept(h->key, accept) < 0)
		return cell_err(err, ENOMEM, "the WebSocket accept key");
	return 0;
}

/* ---- framing ---- */

struct websocket {
	int fd;
	wslay_event_context_ptr ctx;
	const char *extra; /* bytes that came with the request head, read first */
	size_t extra_len;
	websocket_message_fn on_message;
	void *cls;
	int64_t heard_ms;
	int io_errno; /* why the socket failed (ECONNRESET: the peer closed it) */
	/* wslay sends control frames ahead of queued messages: a close waits here until the
	 * messages before it are out, so a last frame (the exit) is never cut off. */
	bool close_pending;
	uint16_t close_code;
	char close_reason[124];
	bool read_paused; /* websocket_read_pause: nothing more is read from the peer */
	bool read_kick;	  /* resumed: read once whatever poll says (wslay may hold bytes) */
};

/* At least times the backlog is queued for the client. */
static bool backlog_over(const struct websocket *ws, unsigned times)
{
	return wslay_event_get_queued_msg_length(ws->ctx) >= times * WEBSOCKET_BACKLOG_BYTES ||
	       wslay_event_get_queued_msg_count(ws->ctx) >= times * WEBSOCKET_BACKLOG_MSGS;
}

static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
	(void)flags;
	struct websocket *ws = user;
	if (ws->read_paused) {
		/* Stops wslay after what it already read (its small buffer), not the socket. */
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	/* Only the client's own pings (their pongs) queue past the backlog the caller keeps
	 * to, and a client that sends without pause is read in one wslay_event_recv: a client
	 * that sends them and does not read is cut off here. */
	if (backlog_over(ws, 4)) {
		ws->io_errno = ENOBUFS;
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	if (ws->extra_len) {
		size_t n = ws->extra_len < len ? ws->extra_len : len;
		memcpy(buf, ws->extra, n);
		ws->extra += n;
		ws->extra_len -= n;
		ws->heard_ms = celld_now_ms();
		return (ssize_t)n;
	}
	ssize_t n;
	do
		n = recv(ws->fd, buf, len, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		ws->heard_ms = celld_now_ms();
		return n;
	}
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	ws->io_errno = n == 0 ? ECONNRESET : errno;
	wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
	return -1;
}

static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
		       void *user)
{
	struct websocket *ws = user;
	int how = MSG_DONTWAIT | MSG_NOSIGNAL | ((flags & WSLAY_MSG_MORE) ? MSG_MORE : 0);
	ssize_t n;
	do
		n = send(ws->fd, data, len, how);
	while (n < 0 && errno == EINTR);
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	ws->io_errno = errno;
	wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
	return -1;
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
		   void *user)
{
	(void)ctx;
	struct websocket *ws = user;
	if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME)
		ws->on_message(ws->cls, arg->opcode == WSLAY_TEXT_FRAME, arg->msg, arg->msg_length);
	/* Ping (answered by wslay), pong and close need nothing here. */
}

struct websocket *websocket_new(int fd, const char *extra, size_t extra_len, size_t max_msg,
				websocket_message_fn on_message, void *cls, struct cell_error *err)
{
	struct websocket *ws = calloc(1, sizeof(*ws));
	if (!ws) {
		cell_err(err, ENOMEM, "WebSocket");
		return NULL;
	}
	*ws = (struct websocket){.fd = fd,
				 .extra = extra,
				 .extra_len = extra_len,
				 .on_message = on_message,
				 .cls = cls,
				 .heard_ms = celld_now_ms()};
	static const struct wslay_event_callbacks cbs = {
	    .recv_callback = on_recv, .send_callback = on_send, .on_msg_recv_callback = on_msg};
	if (wslay_event_context_server_init(&ws->ctx, &cbs, ws) != 0) {
		free(ws);
		cell_err(err, ENOMEM, "WebSocket");
		return NULL;
	}
	wslay_event_config_set_max_recv_msg_length(ws->ctx, max_msg);
	return ws;
}

void websocket_free(struct websocket *ws)
{
	if (!ws)
		return;
	wslay_event_context_free(ws->ctx);
	free(ws);
}

static int queue(struct websocket *ws, uint8_t opcode, const uint8_t *data, size_t len)
{
	if (ws->close_pending)
		return -EPIPE;
	struct wslay_event_msg m = {.opcode = opcode, .msg = data, .msg_length = len};
	int r = wslay_event_queue_msg(ws->ctx, &m);
	if (r == WSLAY_ERR_NOMEM)
		return -ENOMEM;
	return r ? -EPIPE : 0;
}

int websocket_send(struct websocket *ws, bool text, const void *data, size_t len)
{
	return queue(ws, text ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME, data, len);
}

int websocket_send_prefixed(struct websocket *ws, uint8_t prefix, const void *data, size_t len)
{
	uint8_t *buf = malloc(len + 1);
	if (!buf)
		return -ENOMEM;
	buf[0] = prefix;
	if (len)
		memcpy(buf + 1, data, len);
	int r = queue(ws, WSLAY_BINARY_FRAME, buf, len + 1);
	free(buf);
	return r;
}

int websocket_ping(struct websocket *ws)
{
	return queue(ws, WSLAY_PING, NULL, 0);
}

static int close_now(struct websocket *ws)
{
	ws->close_pending = false;
	int r = wslay_event_queue_close(ws->ctx, ws->close_code, (const uint8_t *)ws->close_reason,
					strlen(ws->close_reason));
	return r == WSLAY_ERR_NOMEM ? -ENOMEM : r ? -EPIPE : 0;
}

int websocket_close(struct websocket *ws, uint16_t code, const char *reason)
{
	if (ws->close_pending || wslay_event_get_close_sent(ws->ctx))
		return -EPIPE;
	ws->close_code = code;
	snprintf(ws->close_reason, sizeof(ws->close_reason), "%s", reason ? reason : "");
	ws->close_pending = true;
	return wslay_event_get_queued_msg_count(ws->ctx) ? 0 : close_now(ws);
}

short websocket_events(const struct websocket *ws)
{
	short ev = 0;
	if (wslay_event_want_read(ws->ctx) && !ws->read_paused)
		ev |= POLLIN;
	if (wslay_event_want_write(ws->ctx))
		ev |= POLLOUT;
	return ev;
}

int websocket_io(struct websocket *ws, short revents)
{
	bool kick = ws->read_kick;
	ws->read_kick = false;
	if (((revents & (POLLIN | POLLHUP | POLLERR)) || ws->extra_len || kick) &&
	    !ws->read_paused) {
		if (wslay_event_want_read(ws->ctx) && wslay_event_recv(ws->ctx) != 0) {
			if (ws->io_errno)
				return -ws->io_errno;
			/* A protocol violation: wslay queued a close, sent if it can go at once. */
			wslay_event_send(ws->ctx);
			return -EPROTO;
		}
	}
	for (;;) {
		if (wslay_event_want_write(ws->ctx) && wslay_event_send(ws->ctx) != 0)
			return -(ws->io_errno ? ws->io_errno : EPROTO);
		if (!ws->close_pending || wslay_event_get_queued_msg_count(ws->ctx))
			return 0;
		/* The messages before it are out: now the close (refused only when one was
		 * already sent, which ends the conversation as well). */
		if (close_now(ws) == -ENOMEM)
			return -ENOMEM;
	}
}

bool websocket_backlogged(const struct websocket *ws)
{
	return backlog_over(ws, 1);
}

int64_t websocket_heard_ms(const struct websocket *ws)
{
	return ws->heard_ms;
}

bool websocket_closing(const struct websocket *ws)
{
	return ws->close_pending || wslay_event_get_close_sent(ws->ctx) ||
	       wslay_event_get_close_received(ws->ctx);
}

void websocket_read_pause(struct websocket *ws, bool paused)
{
	if (ws->read_paused && !paused)
		ws->read_kick = true;
	ws->read_paused = paused;
}
