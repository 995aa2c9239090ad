/* A WebSocket client (RFC 6455) over an upgraded connection to celld: the handshake's key
 * and its check here, the framing (masking, fragments, control frames, close) by libwslay,
 * non-blocking, driven by the caller's poll loop. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <poll.h>

#include <openssl/rand.h>
#include <wslay/wslay.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "internal.h"

#define WS_MSG_MAX (8u << 20) /* largest message taken from celld */

struct cell_client_ws {
	struct cell_client_upgraded *u;
	wslay_event_context_ptr ctx;
	cell_client_ws_msg_fn *on_msg;
	void *msg_ctx;
	uint16_t close_code;
	bool closed; /* the peer's close arrived, or the stream ended */
};

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
	(void)flags;
	struct cell_client_ws *ws = user;
	ssize_t n = cell_client_upgraded_recv(ws->u, buf, len);
	if (n == -EAGAIN) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (n <= 0) {
		ws->closed = true;
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return n;
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
		       void *user)
{
	(void)flags;
	struct cell_client_ws *ws = user;
	ssize_t n = cell_client_upgraded_send(ws->u, data, len);
	if (n == -EAGAIN) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (n < 0) {
		ws->closed = true;
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return n;
}

static int ws_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
	(void)ctx, (void)user;
	return RAND_bytes(buf, (int)len) == 1 ? 0 : -1;
}

static void ws_on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
		      void *user)
{
	(void)ctx;
	struct cell_client_ws *ws = user;
	if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
		ws->close_code = arg->status_code;
		ws->closed = true;
		return;
	}
	if (arg->opcode != WSLAY_TEXT_FRAME && arg->opcode != WSLAY_BINARY_FRAME)
		return;
	if (ws->on_msg)
		ws->on_msg(ws->msg_ctx, arg->opcode == WSLAY_BINARY_FRAME, arg->msg,
			   arg->msg_length);
}

int cell_client_ws_open(struct cell_client *c, const char *path, cell_client_ws_msg_fn *on_msg,
			void *msg_ctx, const char *what, struct cell_client_ws **out,
			struct cell_error *err)
{
	*out = NULL;
	uint8_t nonce[16];
	if (RAND_bytes(nonce, sizeof(nonce)) != 1)
		return cell_err_msg(err, EIO, "%s: no random bytes for the key", what), -EIO;
	_cleanup_free_ char *key = cell_base64_encode(nonce, sizeof(nonce));
	_cleanup_free_ char *key_line = NULL;
	if (!key || asprintf(&key_line, "Sec-WebSocket-Key: %s", key) < 0)
		return cell_err(err, ENOMEM, "%s", what), -ENOMEM;
	const char *headers[] = {key_line, "Sec-WebSocket-Version: 13", NULL};
	struct cell_client_ws *ws = calloc(1, sizeof(*ws));
	if (!ws)
		return cell_err(err, ENOMEM, "%s", what), -ENOMEM;
	_cleanup_free_ char *head = NULL;
	int rc =
	    cell_client_upgrade(c, "GET", path, "websocket", headers, what, &ws->u, &head, err);
	if (rc < 0) {
		free(ws);
		return rc;
	}
	char want[CELL_WS_ACCEPT_LEN + 1];
	_cleanup_free_ char *got = cell_client_head_header(head, "Sec-WebSocket-Accept");
	if (cell_ws_accept(key, want) < 0 || !got || strcmp(want, got)) {
		cell_client_ws_free(ws);
		return cell_err_msg(err, EPROTO,
				    "%s: celld's WebSocket answer has a wrong accept key", what),
		       -EPROTO;
	}
	static const struct wslay_event_callbacks cbs = {
	    .recv_callback = ws_recv,
	    .send_callback = ws_send,
	    .genmask_callback = ws_genmask,
	    .on_msg_recv_callback = ws_on_msg,
	};
	if (wslay_event_context_client_init(&ws->ctx, &cbs, ws) != 0) {
		cell_client_ws_free(ws);
		return cell_err(err, ENOMEM, "%s", what), -ENOMEM;
	}
	wslay_event_config_set_max_recv_msg_length(ws->ctx, WS_MSG_MAX);
	ws->on_msg = on_msg;
	ws->msg_ctx = msg_ctx;
	*out = ws;
	return 0;
}

int cell_client_ws_fd(const struct cell_client_ws *ws)
{
	return cell_client_upgraded_fd(ws->u);
}

short cell_client_ws_events(const struct cell_client_ws *ws)
{
	short ev = 0;
	if (wslay_event_want_read(ws->ctx))
		ev |= POLLIN;
	if (wslay_event_want_write(ws->ctx))
		ev |= POLLOUT;
	return ev;
}

int cell_client_ws_send(struct cell_client_ws *ws, bool binary, const void *data, size_t len)
{
	struct wslay_event_msg m = {
	    .opcode = binary ? WSLAY_BINARY_FRAME : WSLAY_TEXT_FRAME,
	    .msg = data,
	    .msg_length = len,
	};
	return wslay_event_queue_msg(ws->ctx, &m) == 0 ? 0 : -EPIPE;
}

int cell_client_ws_pump(struct cell_client_ws *ws, short revents)
{
	if ((revents & (POLLIN | POLLHUP | POLLERR)) || cell_client_upgraded_buffered(ws->u))
		if (wslay_event_recv(ws->ctx) != 0)
			ws->closed = true;
	if (!ws->closed && wslay_event_want_write(ws->ctx) && wslay_event_send(ws->ctx) != 0)
		ws->closed = true;
	if (ws->closed || (!wslay_event_want_read(ws->ctx) && !wslay_event_want_write(ws->ctx)))
		return 1;
	return 0;
}

int cell_client_ws_close(struct cell_client_ws *ws, uint16_t code, const char *reason)
{
	if (wslay_event_queue_close(ws->ctx, code, (const uint8_t *)reason,
				    reason ? strlen(reason) : 0) != 0)
		return -EPIPE;
	wslay_event_send(ws->ctx);
	return 0;
}

uint16_t cell_client_ws_close_code(const struct cell_client_ws *ws)
{
	return ws->close_code;
}

void cell_client_ws_free(struct cell_client_ws *ws)
{
	if (!ws)
		return;
	if (ws->ctx)
		wslay_event_context_free(ws->ctx);
	cell_client_upgraded_free(ws->u);
	free(ws);
}
