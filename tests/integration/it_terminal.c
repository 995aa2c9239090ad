/* Terminals through celld: execd's /pty routes and their WebSocket (a small client here on
 * libwslay's client side, over celld's TCP listener with the API key), and cell's stdin
 * route for commands that are not terminals. Relay-level tests of the terminals are
 * it_pty's. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <wslay/wslay.h>

#include "cell/codec.h"

#include "harness.h"

#define EXECD	"/v1/sandboxes/%s/proxy/44772"
#define WAIT_MS 20000

/* ---- a WebSocket client ---- */

struct msg {
	uint8_t opcode;
	uint8_t *data; /* NUL-terminated */
	size_t len;
	struct msg *next;
};

struct wsc {
	int fd;
	wslay_event_context_ptr ctx;
	struct msg *head, **tail;
	bool closed; /* a close frame came */
	uint16_t close_code;
	char close_reason[128];
	bool eof;
	uint8_t extra[4096]; /* bytes read past the response head */
	size_t extra_len, extra_off;
	/* Output of channels 0x01 and 0x02 seen so far (wsc_wait). */
	char *out;
	size_t out_len;
};

static ssize_t c_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
	(void)flags;
	struct wsc *c = user;
	if (c->extra_off < c->extra_len) {
		size_t n = c->extra_len - c->extra_off;
		if (n > len)
			n = len;
		memcpy(buf, c->extra + c->extra_off, n);
		c->extra_off += n;
		return (ssize_t)n;
	}
	ssize_t n = recv(c->fd, buf, len, MSG_DONTWAIT);
	if (n > 0)
		return n;
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	c->eof = true;
	wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
	return -1;
}

static ssize_t c_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
		      void *user)
{
	(void)flags;
	struct wsc *c = user;
	ssize_t n = send(c->fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n >= 0)
		return n;
	wslay_event_set_error(ctx,
			      errno == EAGAIN ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
	return -1;
}

static int c_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
	(void)ctx;
	(void)user;
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)rand();
	return 0;
}

static void c_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
		  void *user)
{
	(void)ctx;
	struct wsc *c = user;
	if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
		c->closed = true;
		c->close_code = arg->status_code;
		size_t n = arg->msg_length > 2 ? arg->msg_length - 2 : 0;
		if (n >= sizeof(c->close_reason))
			n = sizeof(c->close_reason) - 1;
		memcpy(c->close_reason, arg->msg + 2, n);
		c->close_reason[n] = '\0';
		return;
	}
	if (arg->opcode != WSLAY_TEXT_FRAME && arg->opcode != WSLAY_BINARY_FRAME)
		return;
	struct msg *m = calloc(1, sizeof(*m));
	ck_assert_ptr_nonnull(m);
	m->opcode = arg->opcode;
	m->data = malloc(arg->msg_length + 1);
	ck_assert_ptr_nonnull(m->data);
	memcpy(m->data, arg->msg, arg->msg_length);
	m->data[arg->msg_length] = '\0';
	m->len = arg->msg_length;
	*c->tail = m;
	c->tail = &m->next;
}

static int connect_to(enum h_via via)
{
	if (via == H_UNIX) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		ck_assert_uint_lt(strlen(H.socket), sizeof(sa.sun_path));
		memcpy(sa.sun_path, H.socket, strlen(H.socket) + 1);
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		return fd;
	}
	struct sockaddr_in sa = {.sin_family = AF_INET};
	sa.sin_port = htons((uint16_t)atoi(strrchr(H.listen, ':') + 1));
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Send head (a whole request head) and read the answer's head: its status; *rest gets what
 * followed (for a 101) or the body (up to 4 KiB) of an error. */
static int raw_request(int fd, const char *head, char *resp, size_t size, size_t *head_len)
{
	ck_assert_int_eq(write(fd, head, strlen(head)), (ssize_t)strlen(head));
	size_t got = 0;
	char *end = NULL;
	while (!end && got < size - 1) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ck_assert_msg(poll(&p, 1, WAIT_MS) == 1, "no answer to %.60s", head);
		ssize_t n = recv(fd, resp + got, size - 1 - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
		resp[got] = '\0';
		end = strstr(resp, "\r\n\r\n");
	}
	ck_assert_msg(end, "no response head: %s", resp);
	*head_len = (size_t)(end + 4 - resp);
	int status = 0;
	sscanf(resp, "HTTP/1.1 %d", &status);
	/* An error's body may follow later: give it a moment to arrive. */
	if (status != 101) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		while (got < size - 1 && poll(&p, 1, 500) == 1) {
			ssize_t n = recv(fd, resp + got, size - 1 - got, 0);
			if (n <= 0)
				break;
			got += (size_t)n;
			resp[got] = '\0';
		}
	}
	return (int)got;
}

static const char *ws_key = "dGhlIHNhbXBsZSBub25jZQ==";

/* Open path as a WebSocket (via TCP with the key); NULL when the answer is not 101:
 * *status and body (may be NULL) say what it was. extra: more header lines. */
static struct wsc *wsc_open_ex(enum h_via via, const char *path, const char *extra, int *status,
			       char **body)
{
	int fd = connect_to(via);
	char *key = via == H_TCP ? h_fmt("OPEN-SANDBOX-API-KEY: %s\r\n", H.key) : strdup("");
	char *head = h_fmt("GET %s HTTP/1.1\r\nHost: cell\r\n%s%s\r\n", path, key,
			   extra ? extra
				 : "Upgrade: websocket\r\nConnection: Upgrade\r\n"
				   "Sec-WebSocket-Version: 13\r\n"
				   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n");
	static char resp[8192];
	size_t head_len = 0;
	int got = raw_request(fd, head, resp, sizeof(resp), &head_len);
	free(head);
	free(key);
	*status = 0;
	sscanf(resp, "HTTP/1.1 %d", status);
	if (*status != 101) {
		if (body)
			*body = strdup(resp + head_len);
		close(fd);
		return NULL;
	}
	/* RFC 6455 4.2.2's example: this key's accept is s3pPLMBiTxaQ9kYGzzhZRbK+xOo=. */
	ck_assert_msg(strcasestr(resp, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"),
		      "bad accept: %.*s", (int)head_len, resp);
	ck_assert_msg(strcasestr(resp, "Upgrade: websocket\r\n"), "no Upgrade: %s", resp);
	ck_assert_msg(strcasestr(resp, "Connection: Upgrade\r\n"), "no Connection: %s", resp);
	(void)ws_key;
	struct wsc *c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	c->fd = fd;
	c->tail = &c->head;
	c->extra_len = (size_t)got - head_len;
	ck_assert_uint_le(c->extra_len, sizeof(c->extra));
	memcpy(c->extra, resp + head_len, c->extra_len);
	static const struct wslay_event_callbacks cbs = {.recv_callback = c_recv,
							 .send_callback = c_send,
							 .genmask_callback = c_genmask,
							 .on_msg_recv_callback = c_msg};
	ck_assert_int_eq(wslay_event_context_client_init(&c->ctx, &cbs, c), 0);
	return c;
}

static struct wsc *wsc_open(const char *path, int *status)
{
	return wsc_open_ex(H_TCP, path, NULL, status, NULL);
}

static void wsc_flush(struct wsc *c)
{
	while (wslay_event_want_write(c->ctx)) {
		struct pollfd p = {.fd = c->fd, .events = POLLOUT};
		ck_assert_int_eq(poll(&p, 1, WAIT_MS), 1);
		if (wslay_event_send(c->ctx) != 0)
			break;
	}
}

static void wsc_send(struct wsc *c, uint8_t opcode, const void *data, size_t len)
{
	struct wslay_event_msg m = {.opcode = opcode, .msg = data, .msg_length = len};
	ck_assert_int_eq(wslay_event_queue_msg(c->ctx, &m), 0);
	wsc_flush(c);
}

static void wsc_text(struct wsc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wsc_text(struct wsc *c, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	wsc_send(c, WSLAY_TEXT_FRAME, buf, strlen(buf));
}

/* Typed input: binary 0x00 + bytes. */
static void wsc_type(struct wsc *c, const char *s)
{
	size_t n = strlen(s);
	uint8_t *b = malloc(n + 1);
	b[0] = 0x00;
	memcpy(b + 1, s, n);
	wsc_send(c, WSLAY_BINARY_FRAME, b, n + 1);
	free(b);
}

static int64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The next message (the caller frees it and its data), NULL once closed or after timeout. */
static struct msg *wsc_next(struct wsc *c, int timeout_ms)
{
	int64_t until = ms_now() + timeout_ms;
	for (;;) {
		if (c->head) {
			struct msg *m = c->head;
			c->head = m->next;
			if (!c->head)
				c->tail = &c->head;
			return m;
		}
		if (c->closed || c->eof)
			return NULL;
		int64_t left = until - ms_now();
		if (left <= 0)
			return NULL;
		if (c->extra_off >= c->extra_len) {
			struct pollfd p = {.fd = c->fd, .events = POLLIN};
			if (poll(&p, 1, (int)left) != 1)
				return NULL;
		}
		if (wslay_event_recv(c->ctx) != 0)
			c->eof = true;
		wsc_flush(c); /* pongs, the close reply */
	}
}

static void msg_free(struct msg *m)
{
	if (m)
		free(m->data);
	free(m);
}

/* Read until the output (channels 1 and 2) holds needle; asserts. Text frames other than
 * the ones listed are a failure. */
static void wsc_wait(struct wsc *c, const char *needle)
{
	int64_t until = ms_now() + WAIT_MS;
	size_t nlen = strlen(needle), from = 0; /* only new bytes are searched */
	while (!c->out || !memmem(c->out + from, c->out_len - from, needle, nlen)) {
		from = c->out_len > nlen ? c->out_len - nlen : 0;
		int64_t left = until - ms_now();
		ck_assert_msg(left > 0, "no '%s' in the output: %.*s", needle, (int)c->out_len,
			      c->out ? c->out : "");
		struct msg *m = wsc_next(c, (int)left);
		ck_assert_msg(m, "closed (%u %s) before '%s' came: %.*s", c->close_code,
			      c->close_reason, needle, (int)c->out_len, c->out ? c->out : "");
		if (m->opcode == WSLAY_BINARY_FRAME && m->len &&
		    (m->data[0] == 1 || m->data[0] == 2)) {
			c->out = realloc(c->out, c->out_len + m->len);
			memcpy(c->out + c->out_len, m->data + 1, m->len - 1);
			c->out_len += m->len - 1;
		}
		msg_free(m);
	}
}

/* The output after the last needle seen, cleared up to there. */
static char *wsc_take(struct wsc *c)
{
	char *s = strndup(c->out ? c->out : "", c->out_len);
	free(c->out);
	c->out = NULL;
	c->out_len = 0;
	return s;
}

/* The next text message, parsed, skipping binary ones (NULL when none came). */
static json_t *wsc_json(struct wsc *c)
{
	for (;;) {
		struct msg *m = wsc_next(c, WAIT_MS);
		if (!m)
			return NULL;
		if (m->opcode == WSLAY_TEXT_FRAME) {
			json_t *o = json_loads((const char *)m->data, 0, NULL);
			ck_assert_msg(o, "not JSON: %s", m->data);
			msg_free(m);
			return o;
		}
		msg_free(m);
	}
}

/* Wait until the server closes; returns its code. */
static uint16_t wsc_closed(struct wsc *c)
{
	int64_t until = ms_now() + WAIT_MS;
	while (!c->closed && !c->eof && ms_now() < until)
		msg_free(wsc_next(c, 1000));
	ck_assert_msg(c->closed, "the server did not close");
	return c->close_code;
}

static void wsc_free(struct wsc *c)
{
	if (!c)
		return;
	while (c->head)
		msg_free(wsc_next(c, 0));
	wslay_event_context_free(c->ctx);
	close(c->fd);
	free(c->out);
	free(c);
}

/* A client's own close: close frame, then the socket. */
static void wsc_bye(struct wsc *c)
{
	wslay_event_queue_close(c->ctx, 1000, NULL, 0);
	wsc_flush(c);
	wsc_free(c);
}

/* ---- helpers ---- */

static char *pty_new(const char *id, const char *body)
{
	struct h_resp r;
	char *path = h_fmt(EXECD "/pty", id);
	ck_assert_int_eq(h_http("POST", path, body, &r), 201);
	char *sid = strdup(h_jstr(r.json, "session_id"));
	ck_assert_msg(sid[0], "no session_id: %s", r.body);
	h_resp_free(&r);
	free(path);
	return sid;
}

static struct wsc *pty_open(const char *id, const char *sid, const char *query)
{
	char *path = h_fmt(EXECD "/pty/%s/ws%s%s", id, sid, query ? "?" : "", query ? query : "");
	int status;
	struct wsc *c = wsc_open(path, &status);
	ck_assert_msg(c, "GET %s: %d", path, status);
	free(path);
	return c;
}

static void expect_connected(struct wsc *c, const char *sid, const char *mode)
{
	json_t *o = wsc_json(c);
	ck_assert_msg(o, "no connected frame");
	ck_assert_str_eq(h_jstr(o, "type"), "connected");
	ck_assert_str_eq(h_jstr(o, "session_id"), sid);
	ck_assert_str_eq(h_jstr(o, "mode"), mode);
	json_decref(o);
}

/* "rows cols" as stty prints them, read after a marker the shell computes (the typed line
 * is echoed, the computed marker is not in it). */
static void expect_size(struct wsc *c, int rows, int cols)
{
	wsc_take(c);
	wsc_type(c, "stty size; echo SZ$((40+2))\n");
	wsc_wait(c, "SZ42");
	char *out = wsc_take(c);
	char want[32];
	snprintf(want, sizeof(want), "%d %d", rows, cols);
	ck_assert_msg(strstr(out, want), "stty size: want %s in %s", want, out);
	free(out);
}

static long pty_status(const char *id, const char *sid, json_t **out)
{
	struct h_resp r;
	char *path = h_fmt(EXECD "/pty/%s", id, sid);
	long st = h_http("GET", path, NULL, &r);
	*out = r.json ? json_incref(r.json) : NULL;
	h_resp_free(&r);
	free(path);
	return st;
}

static long long info_int(const char *path)
{
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", "/v1/info", NULL, &r), 200);
	long long v = h_jint(r.json, path);
	h_resp_free(&r);
	return v;
}

static void wait_info(const char *path, long long want)
{
	for (int i = 0; i < 300 && info_int(path) != want; i++)
		h_sleep_ms(50);
	ck_assert_int_eq(info_int(path), want);
}

/* ---- tests ---- */

/* A terminal: its size from the query, resize, a prompt answered, ^C as a signal to a
 * foreground sleep while the shell lives on. */
START_TEST(terminal_size_prompt_signal)
{
	char *id = h_create("busybox", NULL);
	char *sid = pty_new(id, NULL); /* no body at all */
	json_t *st;
	ck_assert_int_eq(pty_status(id, sid, &st), 200);
	ck_assert_str_eq(h_jstr(st, "session_id"), sid);
	ck_assert_msg(json_is_false(json_object_get(st, "running")), "running before attach");
	json_decref(st);
	struct wsc *c = pty_open(id, sid, "cols=100&rows=30");
	expect_connected(c, sid, "pty");
	expect_size(c, 30, 100);
	wsc_text(c, "{\"type\":\"resize\",\"cols\":120,\"rows\":40}");
	expect_size(c, 40, 120);
	/* Wider than cell-init keeps: its largest, not a refusal. */
	wsc_text(c, "{\"type\":\"resize\",\"cols\":4000,\"rows\":40}");
	expect_size(c, 40, 1000);
	/* A prompt the typed line does not contain. */
	wsc_type(c, "read -p \"$(echo Q)$((6*7))? \" ans; echo got-$ans-done\n");
	wsc_wait(c, "Q42? ");
	wsc_type(c, "yes\n");
	wsc_wait(c, "got-yes-done");
	wsc_take(c);
	wsc_type(c, "sleep 100; echo after-$((1+1))\n");
	h_sleep_ms(500);
	int64_t t0 = ms_now();
	wsc_text(c, "{\"type\":\"signal\",\"signal\":\"SIGINT\"}");
	wsc_type(c, "echo alive-$((2+3))\n");
	wsc_wait(c, "alive-5");
	/* Hang guard, not a timing: the sleep was cut short, not waited out. */
	ck_assert_int_lt(ms_now() - t0, 60000);
	ck_assert_int_eq(pty_status(id, sid, &st), 200);
	ck_assert_msg(json_is_true(json_object_get(st, "running")), "the shell died");
	ck_assert_int_gt(h_jint(st, "output_offset"), 0);
	json_decref(st);
	wsc_bye(c);
	free(sid);
	free(id);
}
END_TEST

/* Detach, reconnect with since=: the missed output comes as 0x03 with its offset. */
START_TEST(reconnect_replays)
{
	char *id = h_create("busybox", NULL);
	char *sid = pty_new(id, NULL);
	struct wsc *c = pty_open(id, sid, NULL);
	expect_connected(c, sid, "pty");
	wsc_type(c, "echo first-$((6*7))\n");
	wsc_wait(c, "first-42");
	wsc_bye(c);
	json_t *st;
	ck_assert_int_eq(pty_status(id, sid, &st), 200);
	long long off = h_jint(st, "output_offset");
	json_decref(st);
	ck_assert_int_gt(off, 10);
	/* No since is 0 (as execd); since=N starts there. */
	for (int pass = 0; pass < 2; pass++) {
		long long since = pass ? off - 4 : 0;
		char *q = pass ? h_fmt("since=%lld", since) : NULL;
		c = pty_open(id, sid, q);
		free(q);
		expect_connected(c, sid, "pty");
		struct msg *m = wsc_next(c, WAIT_MS);
		ck_assert_msg(m && m->opcode == WSLAY_BINARY_FRAME && m->len >= 9 &&
				  m->data[0] == 0x03,
			      "no replay frame");
		uint64_t at = 0;
		for (int i = 1; i <= 8; i++)
			at = at << 8 | m->data[i];
		ck_assert_uint_eq(at, (uint64_t)since);
		ck_assert_uint_eq(m->len - 9, (size_t)(off - since));
		if (!pass)
			ck_assert_msg(memmem(m->data + 9, m->len - 9, "first-42", 8),
				      "replay lacks the output: %s", m->data + 9);
		msg_free(m);
		wsc_bye(c);
	}
	free(sid);
	free(id);
}
END_TEST

/* One client at a time: a second gets 409, one with takeover=1 evicts the first (4001). */
START_TEST(second_client_and_takeover)
{
	char *id = h_create("busybox", NULL);
	char *sid = pty_new(id, "{}");
	struct wsc *a = pty_open(id, sid, NULL);
	expect_connected(a, sid, "pty");
	char *path = h_fmt(EXECD "/pty/%s/ws", id, sid);
	int status;
	char *body = NULL;
	ck_assert_ptr_null(wsc_open_ex(H_TCP, path, NULL, &status, &body));
	ck_assert_int_eq(status, 409);
	ck_assert_msg(strstr(body, "ALREADY_CONNECTED"), "409 body: %s", body);
	free(body);
	free(path);
	/* A WebSocket over TCP is one of the key's open streams while it lasts. */
	wait_info("quotas.streams.used", 1);
	struct wsc *b = pty_open(id, sid, "takeover=1");
	expect_connected(b, sid, "pty");
	ck_assert_uint_eq(wsc_closed(a), 4001);
	ck_assert_str_eq(a->close_reason, "TAKEN_OVER");
	wsc_type(b, "echo mine-$((3*3))\n");
	wsc_wait(b, "mine-9");
	wsc_free(a);
	wsc_bye(b);
	wait_info("quotas.streams.used", 0);
	free(sid);
	free(id);
}
END_TEST

/* Pipe mode: no terminal, stderr apart on 0x02. */
START_TEST(pipe_mode_splits_stderr)
{
	char *id = h_create("busybox", NULL);
	char *sid = pty_new(id, NULL);
	struct wsc *c = pty_open(id, sid, "pty=0");
	expect_connected(c, sid, "pipe");
	wsc_type(c, "echo to-err-$((1+2)) >&2; echo to-out-$((2+2))\n");
	bool err_seen = false, out_seen = false;
	int64_t until = ms_now() + WAIT_MS;
	while (!(err_seen && out_seen) && ms_now() < until) {
		struct msg *m = wsc_next(c, 1000);
		if (m && m->opcode == WSLAY_BINARY_FRAME && m->len > 1) {
			if (m->data[0] == 0x02 && strstr((char *)m->data + 1, "to-err-3"))
				err_seen = true;
			if (m->data[0] == 0x01 && strstr((char *)m->data + 1, "to-out-4"))
				out_seen = true;
			ck_assert_msg(
			    !(m->data[0] == 0x01 && strstr((char *)m->data + 1, "to-err")),
			    "stderr on stdout's channel");
		}
		msg_free(m);
	}
	ck_assert_msg(err_seen && out_seen, "stderr %d stdout %d", err_seen, out_seen);
	wsc_bye(c);
	free(sid);
	free(id);
}
END_TEST

/* Output of megabytes comes whole and in order through the relay's frames and the
 * WebSocket's queue, also to a client that reads nothing for a while: celld stops reading
 * the relay while 1 MiB waits for the client, and the process is held back, not cut. */
START_TEST(large_output_intact)
{
	char *id = h_create("busybox", NULL);
	char *sid = pty_new(id, NULL);
	struct wsc *c = pty_open(id, sid, "pty=0");
	expect_connected(c, sid, "pipe");
	wsc_type(c, "seq 1 600000; echo END$((1+1))\n");
	h_sleep_ms(3000);
	wsc_wait(c, "END2");
	char *out = wsc_take(c);
	long want = 1;
	for (char *p = out; *p && want <= 600000; want++) {
		char *end;
		long v = strtol(p, &end, 10);
		ck_assert_msg(v == want && *end == '\n', "line %ld: %.20s", want, p);
		p = end + 1;
	}
	ck_assert_int_eq(want, 600001);
	free(out);
	wsc_bye(c);
	free(sid);
	free(id);
}
END_TEST

/* Input faster than the process takes it: 3 MiB sent while it sleeps all arrive, and the
 * client is held back meanwhile (celld reads it only while cell-init's window has room),
 * not dropped by cell-init's bound. */
START_TEST(large_input_waits_for_the_reader)
{
	char *id = h_create("busybox", NULL);
	char *sid = pty_new(id, "{\"command\":\"sleep 3; head -c 3145728 | wc -c; "
				"echo END$((1+1))\"}");
	struct wsc *c = pty_open(id, sid, "pty=0");
	expect_connected(c, sid, "pipe");
	static uint8_t chunk[1 + (64 << 10)];
	chunk[0] = 0x00;
	memset(chunk + 1, 'x', sizeof(chunk) - 1);
	int64_t t0 = ms_now();
	for (int i = 0; i < 48; i++)
		wsc_send(c, WSLAY_BINARY_FRAME, chunk, sizeof(chunk));
	wsc_wait(c, "END2");
	char *out = wsc_take(c);
	ck_assert_msg(strstr(out, "3145728\n"), "wc -c said: %s", out);
	/* the sends waited for the sleeping reader: the window held them back */
	ck_assert_msg(ms_now() - t0 >= 2000, "3 MiB went in %lld ms", (long long)(ms_now() - t0));
	free(out);
	wsc_bye(c);
	free(sid);
	free(id);
}
END_TEST

/* exit 3: an exit frame with 3, then close 1000; DELETE ends a session (then 404). */
START_TEST(exit_frame_and_delete)
{
	char *id = h_create("busybox", NULL);
	char *sid = pty_new(id, NULL);
	struct wsc *c = pty_open(id, sid, NULL);
	expect_connected(c, sid, "pty");
	wsc_type(c, "exit 3\n");
	json_t *o = wsc_json(c);
	ck_assert_msg(o, "no exit frame");
	ck_assert_str_eq(h_jstr(o, "type"), "exit");
	ck_assert_int_eq(h_jint(o, "exit_code"), 3);
	json_decref(o);
	ck_assert_uint_eq(wsc_closed(c), 1000);
	wsc_free(c);
	free(sid);

	sid = pty_new(id, "{\"cwd\":\"/tmp\"}");
	c = pty_open(id, sid, NULL);
	expect_connected(c, sid, "pty");
	wsc_type(c, "pwd; echo P$((1+1))\n");
	wsc_wait(c, "P2");
	char *out = wsc_take(c);
	ck_assert_msg(strstr(out, "/tmp"), "cwd: %s", out);
	free(out);
	char *path = h_fmt(EXECD "/pty/%s", id, sid);
	ck_assert_int_eq(h_http("DELETE", path, NULL, NULL), 200);
	/* The attached client sees the end. */
	wsc_closed(c);
	wsc_free(c);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "CONTEXT_NOT_FOUND");
	h_resp_free(&r);
	ck_assert_int_eq(h_http("DELETE", path, NULL, &r), 404);
	h_resp_free(&r);
	free(path);
	free(sid);

	/* A command instead of the shell. */
	sid = pty_new(id, "{\"command\":\"echo cmd-$((5*5)); exit 7\"}");
	c = pty_open(id, sid, NULL);
	expect_connected(c, sid, "pty");
	wsc_wait(c, "cmd-25");
	o = wsc_json(c);
	ck_assert_msg(o && !strcmp(h_jstr(o, "type"), "exit"), "no exit frame");
	ck_assert_int_eq(h_jint(o, "exit_code"), 7);
	json_decref(o);
	wsc_free(c);
	free(sid);
	free(id);
}
END_TEST

/* Everything before the upgrade is HTTP: 401 without the key, 404 unknown, 400 for a bad
 * handshake or query; after it, bad frames get INVALID_FRAME and a message over 1 MiB
 * closes with 1009. */
START_TEST(bad_requests)
{
	char *id = h_create("busybox", NULL);
	char *sid = pty_new(id, NULL);
	char *path = h_fmt(EXECD "/pty/%s/ws", id, sid);
	int status;
	char *body = NULL;
	const char *bad_bodies[] = {"{\"cwd\":\"tmp\"}", "{\"command\":5}", "[1]", "{"};
	char *create = h_fmt(EXECD "/pty", id);
	for (size_t i = 0; i < sizeof(bad_bodies) / sizeof(bad_bodies[0]); i++) {
		struct h_resp r;
		ck_assert_int_eq(h_http("POST", create, bad_bodies[i], &r), 400);
		h_resp_free(&r);
	}
	free(create);
	ck_assert_ptr_null(wsc_open_ex(H_TCP_NOKEY, path, NULL, &status, &body));
	ck_assert_int_eq(status, 401);
	free(body);
	const char *bad[] = {
	    "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
	    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
	    "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 8\r\n"
	    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
	    "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
	    "Sec-WebSocket-Key: short\r\n",
	    "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n",
	    "",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		body = NULL;
		ck_assert_ptr_null(wsc_open_ex(H_TCP, path, bad[i], &status, &body));
		ck_assert_msg(status == 400, "handshake %zu: %d", i, status);
		ck_assert_msg(strstr(body, "BAD_HANDSHAKE"), "handshake %zu: %s", i, body);
		free(body);
	}
	char *q = h_fmt("%s?since=-1", path);
	ck_assert_ptr_null(wsc_open_ex(H_TCP, q, NULL, &status, NULL));
	ck_assert_int_eq(status, 400);
	free(q);
	char *unknown = h_fmt(EXECD "/pty/nosuchsession/ws", id);
	body = NULL;
	ck_assert_ptr_null(wsc_open_ex(H_TCP, unknown, NULL, &status, &body));
	ck_assert_int_eq(status, 404);
	ck_assert_msg(strstr(body, "CONTEXT_NOT_FOUND"), "404 body: %s", body);
	free(body);
	free(unknown);

	/* The Unix socket's listener upgrades too (no key there). */
	struct wsc *c = wsc_open_ex(H_UNIX, path, NULL, &status, NULL);
	ck_assert_msg(c, "over the Unix socket: %d", status);
	expect_connected(c, sid, "pty");
	wsc_bye(c);

	/* celld may not have seen that client's close yet (a slow machine): take over rather
	 * than race it; one client at a time is second_client_and_takeover's. */
	c = pty_open(id, sid, "takeover=1");
	expect_connected(c, sid, "pty");
	wsc_text(c, "{\"type\":\"ping\"}");
	json_t *o = wsc_json(c);
	ck_assert_str_eq(h_jstr(o, "type"), "pong");
	json_decref(o);
	const char *frames[] = {"{\"type\":\"dance\"}", "not json",
				"{\"type\":\"resize\",\"cols\":0,\"rows\":5}",
				"{\"type\":\"signal\",\"signal\":\"SIGNOPE\"}"};
	for (size_t i = 0; i < sizeof(frames) / sizeof(frames[0]); i++) {
		wsc_text(c, "%s", frames[i]);
		o = wsc_json(c);
		ck_assert_msg(o, "no answer to %s", frames[i]);
		ck_assert_str_eq(h_jstr(o, "type"), "error");
		ck_assert_str_eq(h_jstr(o, "code"), "INVALID_FRAME");
		json_decref(o);
	}
	size_t big = (1u << 20) + 16;
	uint8_t *b = calloc(1, big);
	wsc_send(c, WSLAY_BINARY_FRAME, b, big);
	free(b);
	ck_assert_uint_eq(wsc_closed(c), 1009);
	wsc_free(c);
	free(path);
	free(sid);
	free(id);
}
END_TEST

static void stdin_post(const char *id, const char *cmd, const char *query, const void *data,
		       size_t len, long want)
{
	char *path = h_fmt(EXECD "/command/%s/stdin%s", id, cmd, query ? query : "");
	struct h_req req = {.method = "POST",
			    .path = path,
			    .body = len ? data : "",
			    .body_len = len,
			    .content_type = "application/octet-stream"};
	struct h_resp r;
	if (!len)
		req.body = NULL;
	long st = h_request(&req, &r);
	ck_assert_msg(st == want, "POST %s: %ld (want %ld): %s", path, st, want, r.body);
	h_resp_free(&r);
	free(path);
}

/* cell's stdin extension: bodies, then close; wc -c counts them. */
START_TEST(command_stdin)
{
	char *id = h_create("busybox", NULL);
	struct h_resp r;
	char *path = h_fmt(EXECD "/command", id);
	ck_assert_int_eq(
	    h_http("POST", path,
		   "{\"command\":\"sleep 2; wc -c\",\"stdin\":true,\"background\":true}", &r),
	    200);
	const char *p = strstr(r.body, "\"text\":\"");
	ck_assert_msg(p, "no init event: %s", r.body);
	char *cmd = strndup(p + 8, strcspn(p + 8, "\""));
	h_resp_free(&r);
	char *chunk = malloc(100000);
	memset(chunk, 'x', 100000);
	/* 1.5 MB to a command that reads nothing for 2 s: past the 1 MiB that may wait in
	 * the sandbox the requests wait for it to read instead of overflowing. */
	stdin_post(id, cmd, NULL, "abc", 3, 200);
	for (int i = 0; i < 15; i++)
		stdin_post(id, cmd, NULL, chunk, 100000, 200);
	stdin_post(id, cmd, NULL, "de\n", 3, 200);
	stdin_post(id, cmd, "?close=true", NULL, 0, 200);
	json_t *status = h_command_wait(id, cmd, 30);
	ck_assert_int_eq(h_jint(status, "exit_code"), 0);
	json_decref(status);
	char *logs = h_fmt(EXECD "/command/%s/logs?cursor=0", id, cmd);
	ck_assert_int_eq(h_http("GET", logs, NULL, &r), 200);
	ck_assert_msg(strstr(r.body, "1500006"), "wc -c said: %s", r.body);
	h_resp_free(&r);
	free(logs);
	/* Ended (and closed): 409; unknown: 404; a command without stdin: 409. */
	stdin_post(id, cmd, NULL, "more", 4, 409);
	stdin_post(id, "nosuchcommand", NULL, "x", 1, 404);
	ck_assert_int_eq(h_http("POST", path, "{\"command\":\"sleep 30\",\"background\":true}", &r),
			 200);
	p = strstr(r.body, "\"text\":\"");
	char *cmd2 = strndup(p + 8, strcspn(p + 8, "\""));
	h_resp_free(&r);
	stdin_post(id, cmd2, NULL, "x", 1, 409);
	stdin_post(id, cmd2, "?close=maybe", "x", 1, 400);
	char *huge = calloc(1, (1u << 20) + 1);
	stdin_post(id, cmd2, NULL, huge, (1u << 20) + 1, 413);
	free(huge);
	free(cmd2);
	free(chunk);
	free(cmd);
	free(path);
	free(id);
}
END_TEST

/* A client that stops answering (no pong to the pings of every 30 s) is dropped after 60 s
 * of silence; its terminal runs on, free for the next client. */
START_TEST(silent_client_dropped)
{
	char *id = h_create("busybox", NULL);
	char *sid = pty_new(id, NULL);
	struct wsc *c = pty_open(id, sid, NULL);
	expect_connected(c, sid, "pty");
	/* Read nothing, answer nothing, for longer than celld waits. */
	h_sleep_ms(66000);
	int64_t until = ms_now() + WAIT_MS;
	while (!c->eof && !c->closed && ms_now() < until)
		msg_free(wsc_next(c, 1000));
	ck_assert_msg(c->eof || c->closed, "a silent client was not dropped");
	wsc_free(c);
	json_t *st;
	ck_assert_int_eq(pty_status(id, sid, &st), 200);
	ck_assert_msg(json_is_true(json_object_get(st, "running")), "the shell died with it");
	json_decref(st);
	c = pty_open(id, sid, NULL); /* no takeover needed: the old one is gone */
	expect_connected(c, sid, "pty");
	wsc_bye(c);
	free(sid);
	free(id);
}
END_TEST

/* A client that sends pings and never reads their pongs is cut off: celld queues for a
 * client at most four times its backlog (websocket.h), never its memory's worth. 32 MiB of
 * pings is far past that and past every socket buffer between the two. The terminal lives
 * on, detached. */
START_TEST(pinging_client_that_never_reads_is_cut_off)
{
	char *id = h_create("busybox", NULL);
	char *sid = pty_new(id, NULL);
	struct wsc *c = pty_open(id, sid, NULL);
	expect_connected(c, sid, "pty");
	/* Its receive window as small as the kernel allows: the pongs wait in celld. */
	int small = 4096;
	setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	/* 1-byte pings, masked (with a zero mask) as a client's frames must be. */
	static const uint8_t ping[] = {0x89, 0x81, 0, 0, 0, 0, 'x'};
	uint8_t burst[sizeof(ping) * 1024];
	for (size_t i = 0; i < 1024; i++)
		memcpy(burst + i * sizeof(ping), ping, sizeof(ping));
	size_t sent = 0;
	bool cut = false;
	while (!cut && sent < (32u << 20)) {
		struct pollfd p = {.fd = c->fd, .events = POLLOUT};
		if (poll(&p, 1, WAIT_MS) != 1)
			break;
		ssize_t n = send(c->fd, burst, sizeof(burst), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0)
			sent += (size_t)n;
		else if (n < 0 && errno != EAGAIN && errno != EINTR)
			cut = true;
	}
	ck_assert_msg(cut, "celld took %zu bytes of pings from a client that reads nothing", sent);
	wsc_free(c);
	json_t *st;
	ck_assert_int_eq(pty_status(id, sid, &st), 200);
	ck_assert_msg(json_is_true(json_object_get(st, "running")), "the shell died with it");
	json_decref(st);
	free(sid);
	free(id);
}
END_TEST

/* celld stopping closes a terminal's WebSocket with 1001 at once; the terminal lives in the
 * sandbox and is there after the restart, its output kept. */
START_TEST(celld_restart_keeps_terminal)
{
	char *id = h_create("busybox", NULL);
	char *sid = pty_new(id, NULL);
	struct wsc *c = pty_open(id, sid, NULL);
	expect_connected(c, sid, "pty");
	wsc_type(c, "x=kept-$((7*6)); echo $x\n");
	wsc_wait(c, "kept-42");
	pid_t pid = h_celld_pid();
	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	ck_assert_uint_eq(wsc_closed(c), 1001);
	wsc_free(c);
	for (int i = 0; i < 400 && h_world_alive(&H); i++)
		h_sleep_ms(50);
	ck_assert_msg(!h_world_alive(&H), "celld did not stop");
	h_celld_start();
	json_t *st;
	ck_assert_int_eq(pty_status(id, sid, &st), 200);
	ck_assert_msg(json_is_true(json_object_get(st, "running")), "the shell died with celld");
	json_decref(st);
	c = pty_open(id, sid, NULL);
	expect_connected(c, sid, "pty");
	wsc_type(c, "echo again-$x\n");
	wsc_wait(c, "again-kept-42");
	wsc_bye(c);
	free(sid);
	free(id);
}
END_TEST

static Suite *terminal_suite(void)
{
	Suite *s = suite_create("terminal");
	tcase_add_test(h_tcase(s, "terminal_size_prompt_signal", 120), terminal_size_prompt_signal);
	tcase_add_test(h_tcase(s, "reconnect_replays", 120), reconnect_replays);
	tcase_add_test(h_tcase(s, "second_client_and_takeover", 120), second_client_and_takeover);
	tcase_add_test(h_tcase(s, "pipe_mode_splits_stderr", 120), pipe_mode_splits_stderr);
	tcase_add_test(h_tcase(s, "exit_frame_and_delete", 120), exit_frame_and_delete);
	tcase_add_test(h_tcase(s, "large_output_intact", 120), large_output_intact);
	tcase_add_test(h_tcase(s, "large_input_waits_for_the_reader", 120),
		       large_input_waits_for_the_reader);
	tcase_add_test(h_tcase(s, "bad_requests", 120), bad_requests);
	tcase_add_test(h_tcase(s, "command_stdin", 120), command_stdin);
	tcase_add_test(h_tcase(s, "silent_client_dropped", 180), silent_client_dropped);
	tcase_add_test(h_tcase(s, "pinging_client_that_never_reads_is_cut_off", 120),
		       pinging_client_that_never_reads_is_cut_off);
	tcase_add_test(h_tcase(s, "celld_restart_keeps_terminal", 120),
		       celld_restart_keeps_terminal);
	return s;
}

int main(void)
{
	return h_main(terminal_suite());
}
