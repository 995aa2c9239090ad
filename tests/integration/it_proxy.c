/* The port proxy: ANY /v1/sandboxes/{id}/proxy/{port}/<rest> reaches 127.0.0.1:<port> in
 * the sandbox's own network namespace. A busybox httpd inside the sandbox serves files and
 * a CGI script that echoes the method, the query, the headers it got and its body. GET,
 * HEAD and POST through the proxy, the query and the path kept, the API key never reaching
 * the app, the X-Forwarded-* headers, a port with nothing listening (502), unknown
 * sandboxes and auth, a paused sandbox resumed first, the execd and egress ports unchanged,
 * 100 clients at once, a 100 MB download compared by SHA-256 inside and out (its
 * throughput printed), and the per-sandbox limit of open proxied requests (429).
 * WebSocket (case "websocket"): ws_echo_probe, a static echo server, in the sandbox and a
 * libwslay client here: the switch and its headers both ways, messages intact (100 clients
 * at once, 4 MiB in pieces), an app refusing the switch, open WebSockets counted by the
 * limit, clients vanishing mid-stream leaving no fd or thread behind in celld, and celld
 * stopping with a WebSocket open.
 * What crosses the proxy (case "crossing"): head_probe, an app answering with the request
 * head it got, behind a celld with an E2B listener too: no credential of celld's reaches
 * the app from either listener or a preview host, E2B's traffic token opens the sandbox's
 * ports and never envd, and no token of a sandbox is another. What of the app's answer
 * head reaches the client (case "answers", head_probe's answer crafted): no malformed
 * header, and the app's cookies only for its own host and prefix.
 *
 * The whole program runs in a network namespace of its own (main), so a sandbox with a
 * network ("public") can be proxied too without touching the host's network; every other
 * sandbox has network none (the harness's default): the proxy never needs one. */
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <wslay/wslay.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "harness.h"

#define PORT	  8080
#define N_CLIENTS 100
#define BIG_MB	  100

/* The CGI scripts: echo (method, query, the HTTP_* variables, the body), sink (the
 * body's SHA-256), hold (marks itself, then waits for /tmp/go). */
static const char cgi_echo[] = "#!/bin/sh\n"
			       "printf 'Content-Type: text/plain\\r\\n\\r\\n'\n"
			       "echo \"method=$REQUEST_METHOD\"\n"
			       "echo \"query=$QUERY_STRING\"\n"
			       "env | grep '^HTTP_' | sort\n"
			       "echo \"body=$(cat)\"\n";
static const char cgi_sink[] = "#!/bin/sh\n"
			       "printf 'Content-Type: text/plain\\r\\n\\r\\n'\n"
			       "cat > /tmp/up\n"
			       "sha256sum /tmp/up\n";
static const char cgi_hold[] = "#!/bin/sh\n"
			       "touch /tmp/held/$$\n"
			       "while [ ! -e /tmp/go ]; do usleep 20000; done\n"
			       "printf 'Content-Type: text/plain\\r\\n\\r\\ndone\\n'\n";

static void put_file(struct h_world *w, const char *id, const char *path, const char *text,
		     int mode)
{
	struct h_resp r;
	long st = h_world_upload(w, id, path, text, strlen(text), mode, &r);
	ck_assert_msg(st == 200, "upload %s: %ld %s", path, st, r.body);
	h_resp_free(&r);
}

static char *proxy_path(const char *id, unsigned port, const char *rest)
{
	return h_fmt("/v1/sandboxes/%s/proxy/%u%s", id, port, rest);
}

static long get(struct h_world *w, const char *id, const char *rest, enum h_via via,
		struct h_resp *resp)
{
	char *path = proxy_path(id, PORT, rest);
	struct h_req req = {.method = "GET", .path = path, .via = via};
	long st = h_world_request(w, &req, resp);
	free(path);
	return st;
}

/* Wait until the app just started in sandbox id of world w answers rest of port through
 * the proxy with 200 (bounded: it may take a moment to bind; 502 until it does). */
static void wait_for_app(struct h_world *w, const char *id, unsigned port, const char *rest)
{
	char *path = proxy_path(id, port, rest);
	for (int i = 0; i < 100; i++) {
		struct h_req req = {.method = "GET", .path = path, .via = H_TCP};
		struct h_resp r;
		long st = h_world_request(w, &req, &r);
		h_resp_free(&r);
		if (st == 200) {
			free(path);
			return;
		}
		ck_assert_msg(st == 502, "GET %s while the app starts: %ld", path, st);
		h_sleep_ms(50);
	}
	ck_abort_msg("the app never answered %s through the proxy", path);
}

/* httpd started in the sandbox of world w, answering through the proxy. */
static void start_httpd(struct h_world *w, const char *id)
{
	free(h_world_sh(w, id, "mkdir -p /www/cgi-bin /tmp/held"));
	put_file(w, id, "/www/index.html", "hello-from-the-app\n", 0644);
	put_file(w, id, "/www/cgi-bin/echo", cgi_echo, 0755);
	put_file(w, id, "/www/cgi-bin/sink", cgi_sink, 0755);
	put_file(w, id, "/www/cgi-bin/hold", cgi_hold, 0755);
	free(h_world_sh(w, id, "nohup httpd -f -p 127.0.0.1:8080 -h /www >/dev/null 2>&1 &"));
	wait_for_app(w, id, PORT, "/index.html");
}

static char *running_with_httpd(json_t *extra)
{
	char *id = h_create("busybox", extra);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	start_httpd(&H, id);
	return id;
}

/* ---- a raw HTTP/1.1 exchange over TCP (HEAD, headers the client library hides) ---- */

struct raw {
	int status;
	char head[8192];
	char body[16384]; /* its first bytes, NUL-terminated */
	size_t body_len;
};

/* request sent to the listener at listen ("127.0.0.1:<port>"), its whole answer read. */
static void raw_exchange_at(const char *listen, const char *request, struct raw *out)
{
	const char *colon = strrchr(listen, ':');
	ck_assert_ptr_nonnull(colon);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1))};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct timeval tv = {.tv_sec = 30};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(send(fd, request, strlen(request), MSG_NOSIGNAL),
			 (ssize_t)strlen(request));
	char *all = NULL;
	size_t len = 0;
	char buf[4096];
	ssize_t n;
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
		all = realloc(all, len + (size_t)n + 1);
		memcpy(all + len, buf, (size_t)n);
		len += (size_t)n;
		all[len] = '\0';
	}
	close(fd);
	ck_assert_msg(all, "no answer to %s", request);
	char *end = strstr(all, "\r\n\r\n");
	ck_assert_msg(end, "no end of head in %.300s", all);
	size_t hl = (size_t)(end - all) + 4;
	ck_assert_uint_lt(hl, sizeof(out->head));
	memcpy(out->head, all, hl);
	out->head[hl] = '\0';
	out->body_len = len - hl;
	size_t keep = out->body_len < sizeof(out->body) ? out->body_len : sizeof(out->body) - 1;
	memcpy(out->body, all + hl, keep);
	out->body[keep] = '\0';
	ck_assert_int_eq(sscanf(all, "HTTP/1.%*u %d", &out->status), 1);
	free(all);
}

static void raw_exchange(const char *request, struct raw *out)
{
	raw_exchange_at(H.listen, request, out);
}

/* ---- WebSocket through the proxy: ws_echo_probe in the sandbox, a wslay client here ---- */

#define WS_PORT	    8090
#define WS_HEAD_MAX 8192

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int read_full_fd(int fd, char *buf, size_t len)
{
	while (len) {
		ssize_t n = recv(fd, buf, len, 0);
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

struct ws {
	int fd;
	int status;		/* of the answer to the upgrade request */
	char head[WS_HEAD_MAX]; /* the answer's head */
	char body[1024];	/* its body when it is not a 101 (by Content-Length) */
	wslay_event_context_ptr ctx;
	unsigned char *msg; /* the last message received */
	size_t msg_len;
	int msg_op;
	bool got, closed;
	/* A message queued in pieces: src[src_pos, src_len), at most piece bytes a frame. */
	const unsigned char *src;
	size_t src_len, src_pos, piece;
	unsigned pieces;
};

static ssize_t ws_recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
			  void *user)
{
	(void)flags;
	struct ws *ws = user;
	ssize_t n = recv(ws->fd, buf, len, 0);
	if (n > 0)
		return n;
	wslay_event_set_error(ctx, n < 0 && (errno == EAGAIN || errno == EINTR)
				       ? WSLAY_ERR_WOULDBLOCK
				       : WSLAY_ERR_CALLBACK_FAILURE);
	return -1;
}

static ssize_t ws_send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
			  void *user)
{
	(void)flags;
	struct ws *ws = user;
	ssize_t n = send(ws->fd, data, len, MSG_NOSIGNAL);
	if (n >= 0)
		return n;
	wslay_event_set_error(ctx, errno == EAGAIN || errno == EINTR ? WSLAY_ERR_WOULDBLOCK
								     : WSLAY_ERR_CALLBACK_FAILURE);
	return -1;
}

static int ws_genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
	(void)ctx;
	(void)user;
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)random();
	return 0;
}

static void ws_msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
		      void *user)
{
	(void)ctx;
	struct ws *ws = user;
	if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
		ws->closed = true;
		return;
	}
	if (wslay_is_ctrl_frame(arg->opcode))
		return;
	free(ws->msg);
	ws->msg = malloc(arg->msg_length + 1);
	ck_assert_ptr_nonnull(ws->msg);
	memcpy(ws->msg, arg->msg, arg->msg_length);
	ws->msg[arg->msg_length] = '\0';
	ws->msg_len = arg->msg_length;
	ws->msg_op = arg->opcode;
	ws->got = true;
}

static ssize_t ws_piece_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
			   const union wslay_event_msg_source *source, int *eof, void *user)
{
	(void)ctx;
	(void)user;
	struct ws *ws = source->data;
	size_t n = ws->src_len - ws->src_pos;
	if (n > len)
		n = len;
	if (n > ws->piece)
		n = ws->piece;
	memcpy(buf, ws->src + ws->src_pos, n);
	ws->src_pos += n;
	ws->pieces++;
	if (ws->src_pos == ws->src_len)
		*eof = 1;
	return (ssize_t)n;
}

/* Sec-WebSocket-Accept for key (RFC 6455 4.2.2). */
static void ws_accept_for(const char *key, char out[64])
{
	char cat[128];
	snprintf(cat, sizeof(cat), "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
	unsigned char digest[SHA_DIGEST_LENGTH];
	SHA1((const unsigned char *)cat, strlen(cat), digest);
	EVP_EncodeBlock((unsigned char *)out, digest, SHA_DIGEST_LENGTH);
}

/* A socket to w's celld: its TCP listener, or its Unix socket. */
static int ws_dial(struct h_world *w, bool unix_socket)
{
	int fd;
	if (unix_socket) {
		struct sockaddr_un su = {.sun_family = AF_UNIX};
		ck_assert_uint_lt(strlen(w->socket), sizeof(su.sun_path));
		memcpy(su.sun_path, w->socket, strlen(w->socket) + 1);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(connect(fd, (struct sockaddr *)&su, sizeof(su)), 0);
	} else {
		const char *colon = strrchr(w->listen, ':');
		ck_assert_ptr_nonnull(colon);
		struct sockaddr_in sa = {.sin_family = AF_INET,
					 .sin_port = htons((uint16_t)atoi(colon + 1))};
		inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	return fd;
}

/* Ask w's celld to switch to WebSocket on path of port in sandbox id, with extra
 * header lines (each ending in CRLF) and early bytes sent right after the head in the
 * same write. ws->status is the answer's; on 101 the accept key is checked and the wslay
 * client is ready, else ws->body holds the answer's body. */
static void ws_open_ex(struct h_world *w, const char *id, unsigned port, const char *path,
		       bool unix_socket, const char *extra, const void *early, size_t early_len,
		       struct ws *ws)
{
	*ws = (struct ws){.fd = ws_dial(w, unix_socket)};
	unsigned char raw[16];
	for (size_t i = 0; i < sizeof(raw); i++)
		raw[i] = (unsigned char)random();
	char key[32];
	EVP_EncodeBlock((unsigned char *)key, raw, sizeof(raw));
	char *auth = unix_socket ? strdup("") : h_fmt("OPEN-SANDBOX-API-KEY: %s\r\n", w->key);
	char *req = h_fmt("GET /v1/sandboxes/%s/proxy/%u%s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
			  "Connection: Upgrade\r\nUpgrade: websocket\r\n"
			  "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n%s\r\n",
			  id, port, path, auth, key, extra ? extra : "");
	size_t req_len = strlen(req);
	char *all = malloc(req_len + early_len);
	ck_assert_ptr_nonnull(all);
	memcpy(all, req, req_len);
	if (early_len)
		memcpy(all + req_len, early, early_len);
	ck_assert_int_eq(send(ws->fd, all, req_len + early_len, MSG_NOSIGNAL),
			 (ssize_t)(req_len + early_len));
	free(all);
	free(req);
	free(auth);
	struct timeval tv = {.tv_sec = 30};
	setsockopt(ws->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* Byte by byte: what follows the head is the app's, for wslay. */
	size_t len = 0;
	while (len < 4 || memcmp(ws->head + len - 4, "\r\n\r\n", 4)) {
		ck_assert_uint_lt(len, sizeof(ws->head) - 1);
		ssize_t n = recv(ws->fd, ws->head + len, 1, 0);
		ck_assert_msg(n == 1, "the answer's head cut short after %zu bytes: %.*s", len,
			      (int)len, ws->head);
		len++;
	}
	ws->head[len] = '\0';
	ck_assert_int_eq(sscanf(ws->head, "HTTP/1.1 %d", &ws->status), 1);
	if (ws->status != 101) {
		const char *cl = strcasestr(ws->head, "\r\nContent-Length:");
		size_t want = cl ? strtoul(cl + 17, NULL, 10) : 0;
		ck_assert_uint_lt(want, sizeof(ws->body));
		ck_assert_int_eq(read_full_fd(ws->fd, ws->body, want), 0);
		ws->body[want] = '\0';
		return;
	}
	char accept[64], line[128];
	ws_accept_for(key, accept);
	snprintf(line, sizeof(line), "\r\nSec-WebSocket-Accept: %s\r\n", accept);
	ck_assert_msg(strcasestr(ws->head, line), "want %s in %s", accept, ws->head);
	ck_assert_msg(strcasestr(ws->head, "\r\nUpgrade: websocket\r\n"), "%s", ws->head);
	ck_assert_msg(strcasestr(ws->head, "\r\nConnection: Upgrade\r\n"), "%s", ws->head);
	int fl = fcntl(ws->fd, F_GETFL);
	ck_assert_int_eq(fcntl(ws->fd, F_SETFL, fl | O_NONBLOCK), 0);
	static const struct wslay_event_callbacks cbs = {.recv_callback = ws_recv_cb,
							 .send_callback = ws_send_cb,
							 .genmask_callback = ws_genmask_cb,
							 .on_msg_recv_callback = ws_msg_cb};
	ck_assert_int_eq(wslay_event_context_client_init(&ws->ctx, &cbs, ws), 0);
}

static void ws_open(struct h_world *w, const char *id, const char *path, struct ws *ws)
{
	ws_open_ex(w, id, WS_PORT, path, false, NULL, NULL, 0, ws);
}

/* Run the client until a message (or the close, when want_close) came: false on a
 * failure or after 60 s, why filled. */
static bool ws_wait(struct ws *ws, bool want_close, char *why, size_t why_len)
{
	int64_t end = now_ms() + 60000;
	ws->got = false;
	while (want_close ? !ws->closed : !ws->got) {
		int64_t left = end - now_ms();
		short ev = (short)((wslay_event_want_read(ws->ctx) ? POLLIN : 0) |
				   (wslay_event_want_write(ws->ctx) ? POLLOUT : 0));
		if (left <= 0 || !ev) {
			snprintf(why, why_len, left <= 0 ? "no answer in 60 s" : "nothing to do");
			return false;
		}
		struct pollfd pf = {.fd = ws->fd, .events = ev};
		int r = poll(&pf, 1, (int)left);
		if (r < 0 && errno != EINTR) {
			snprintf(why, why_len, "poll: %s", strerror(errno));
			return false;
		}
		if ((pf.revents & (POLLIN | POLLHUP | POLLERR)) && wslay_event_recv(ws->ctx)) {
			snprintf(why, why_len, "the connection failed while reading");
			return false;
		}
		if ((pf.revents & POLLOUT) && wslay_event_send(ws->ctx)) {
			snprintf(why, why_len, "the connection failed while writing");
			return false;
		}
	}
	return true;
}

/* Send data (in frames of at most piece bytes when piece > 0) and wait for it back: false
 * with why on a failure or a different answer. */
static bool ws_echo(struct ws *ws, int op, const void *data, size_t len, size_t piece, char *why,
		    size_t why_len)
{
	int rc;
	if (piece) {
		ws->src = data;
		ws->src_len = len;
		ws->src_pos = 0;
		ws->piece = piece;
		ws->pieces = 0;
		struct wslay_event_fragmented_msg fm = {
		    .opcode = (uint8_t)op, .source.data = ws, .read_callback = ws_piece_cb};
		rc = wslay_event_queue_fragmented_msg(ws->ctx, &fm);
	} else {
		struct wslay_event_msg m = {(uint8_t)op, data, len};
		rc = wslay_event_queue_msg(ws->ctx, &m);
	}
	if (rc) {
		snprintf(why, why_len, "queueing a message: %d", rc);
		return false;
	}
	if (!ws_wait(ws, false, why, why_len))
		return false;
	if (ws->msg_op != op || ws->msg_len != len || memcmp(ws->msg, data, len)) {
		snprintf(why, why_len, "sent %zu bytes (opcode %d), got %zu back (opcode %d)", len,
			 op, ws->msg_len, ws->msg_op);
		return false;
	}
	return true;
}

static void ws_close(struct ws *ws)
{
	if (ws->ctx)
		wslay_event_context_free(ws->ctx);
	if (ws->fd >= 0)
		close(ws->fd);
	free(ws->msg);
	*ws = (struct ws){.fd = -1};
}

/* ws_echo_probe started in sandbox id of world w, answering through the proxy. */
static void start_ws_echo(struct h_world *w, const char *id)
{
	h_world_upload_helper(w, id, "ws_echo_probe");
	free(h_world_sh(w, id, "nohup /root/ws_echo_probe 8090 >/dev/null 2>&1 &"));
	for (int i = 0; i < 100; i++) {
		struct ws ws;
		ws_open(w, id, "/", &ws);
		int st = ws.status;
		ws_close(&ws);
		if (st == 101)
			return;
		ck_assert_msg(st == 502, "a WebSocket while the echo server starts: %d", st);
		h_sleep_ms(50);
	}
	ck_abort_msg("the echo server never answered through the proxy");
}

/* Threads of ws_echo_probe in sandbox id (1 when it serves nobody). */
static int ws_echo_threads(struct h_world *w, const char *id)
{
	char *out = h_world_sh(w, id, "ls /proc/$(pidof ws_echo_probe)/task | wc -l");
	int n = atoi(out);
	free(out);
	return n;
}

/* ---- the tests ---- */

START_TEST(get_post_query_and_path)
{
	char *id = running_with_httpd(NULL);
	struct h_resp r;
	ck_assert_int_eq(get(&H, id, "/index.html", H_TCP, &r), 200);
	ck_assert_str_eq(r.body, "hello-from-the-app\n");
	h_resp_free(&r);
	/* The app's own 404 comes back as it is. */
	ck_assert_int_eq(get(&H, id, "/no/such/file", H_TCP, &r), 404);
	h_resp_free(&r);
	/* Without /v1, and over the Unix socket. */
	char *path = h_fmt("/sandboxes/%s/proxy/%u/index.html", id, PORT);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(r.body, "hello-from-the-app\n");
	h_resp_free(&r);
	free(path);

	ck_assert_int_eq(get(&H, id, "/cgi-bin/echo?a=1&b=x%20y", H_TCP, &r), 200);
	ck_assert_msg(strstr(r.body, "method=GET\n"), "%s", r.body);
	ck_assert_msg(strstr(r.body, "query=a=1&b=x%20y\n"), "%s", r.body);
	h_resp_free(&r);

	path = proxy_path(id, PORT, "/cgi-bin/echo?post=1");
	static const char body[] = "a body the app reads on its stdin";
	struct h_req req = {.method = "POST",
			    .path = path,
			    .body = body,
			    .content_type = "text/plain",
			    .via = H_TCP};
	ck_assert_int_eq(h_request(&req, &r), 200);
	ck_assert_msg(strstr(r.body, "method=POST\n"), "%s", r.body);
	ck_assert_msg(strstr(r.body, "query=post=1\n"), "%s", r.body);
	ck_assert_msg(strstr(r.body, "HTTP_CONTENT_TYPE=text/plain") ||
			  strstr(r.body, "body=a body the app reads on its stdin\n"),
		      "%s", r.body);
	ck_assert_msg(strstr(r.body, "body=a body the app reads on its stdin\n"), "%s", r.body);
	h_resp_free(&r);
	free(path);

	/* A bigger body (3 MiB), streamed to the app: what it read hashes the same. */
	size_t big = 3u << 20;
	unsigned char *data = malloc(big);
	ck_assert_ptr_nonnull(data);
	for (size_t i = 0; i < big; i++)
		data[i] = (unsigned char)(i * 2654435761u >> 13);
	char want[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(data, big, want);
	path = proxy_path(id, PORT, "/cgi-bin/sink");
	req = (struct h_req){.method = "POST",
			     .path = path,
			     .body = data,
			     .body_len = big,
			     .content_type = "application/octet-stream",
			     .via = H_TCP};
	ck_assert_int_eq(h_request(&req, &r), 200);
	ck_assert_msg(!strncmp(r.body, want, CELL_SHA256_HEX_LEN), "app got %.80s, sent %s", r.body,
		      want);
	h_resp_free(&r);
	free(path);
	free(data);
	free(id);
}
END_TEST

/* What reaches the app, byte for byte: nc in the sandbox records the request and answers a
 * fixed 200. A chunked body goes on chunked, the path and query as sent, no API key, one
 * connection per request. */
START_TEST(request_on_the_wire)
{
	char *id = h_create("busybox", NULL);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	free(h_sh(id, "printf 'HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nX-App: yes\\r\\n"
		      "Connection: close, X-Drop\\r\\nX-Drop: 1\\r\\n\\r\\nok' | "
		      "nohup nc -l -p 8081 > /tmp/raw 2>/dev/null & "
		      "i=0; while ! netstat -ltn | grep -q ':8081 ' && [ $i -lt 100 ]; do "
		      "usleep 50000; i=$((i+1)); done; netstat -ltn | grep -q ':8081 '"));
	static const char body[] = "a chunked body for the app";
	char *path = proxy_path(id, 8081, "/raw/path/?x=1&y=%2F");
	struct h_req req = {.method = "POST",
			    .path = path,
			    .body = body,
			    .content_type = "text/plain",
			    .chunked = true,
			    .via = H_TCP};
	struct h_resp r;
	ck_assert_int_eq(h_request(&req, &r), 200);
	ck_assert_str_eq(r.body, "ok");
	h_resp_free(&r);
	free(path);
	char *raw = h_sh(id, "i=0; while pidof nc >/dev/null && [ $i -lt 100 ]; do usleep 50000; "
			     "i=$((i+1)); done; cat /tmp/raw");
	static const char line[] = "POST /raw/path/?x=1&y=%2F HTTP/1.1\r\n";
	ck_assert_msg(!strncmp(raw, line, strlen(line)), "%s", raw);
	ck_assert_msg(strstr(raw, "\r\nTransfer-Encoding: chunked\r\n"), "%s", raw);
	ck_assert_msg(strstr(raw, "\r\nConnection: close\r\n"), "%s", raw);
	ck_assert_msg(!strcasestr(raw, "Content-Length"), "%s", raw);
	ck_assert_msg(!strstr(raw, H.key), "the key reached the app: %s", raw);
	/* The body, unchunked, is what was sent. */
	char *p = strstr(raw, "\r\n\r\n");
	ck_assert_ptr_nonnull(p);
	p += 4;
	char got[256] = "";
	size_t got_len = 0;
	for (;;) {
		char *end;
		unsigned long n = strtoul(p, &end, 16);
		ck_assert_msg(end != p && !strncmp(end, "\r\n", 2), "bad chunk at %s", p);
		p = end + 2;
		if (!n)
			break;
		ck_assert_uint_lt(got_len + n, sizeof(got));
		memcpy(got + got_len, p, n);
		got_len += n;
		p += n;
		ck_assert_msg(!strncmp(p, "\r\n", 2), "no CRLF after a chunk: %s", p);
		p += 2;
	}
	ck_assert_str_eq(p, "\r\n");
	got[got_len] = '\0';
	ck_assert_str_eq(got, body);
	free(raw);
	free(id);
}
END_TEST

START_TEST(head_request)
{
	char *id = running_with_httpd(NULL);
	char *req = h_fmt("HEAD /v1/sandboxes/%s/proxy/%u/index.html HTTP/1.1\r\nHost: x\r\n"
			  "OPEN-SANDBOX-API-KEY: %s\r\nConnection: close\r\n\r\n",
			  id, PORT, H.key);
	struct raw a;
	raw_exchange(req, &a);
	ck_assert_int_eq(a.status, 200);
	ck_assert_msg(strcasestr(a.head, "\r\nContent-Length: 19\r\n"), "%s", a.head);
	ck_assert_uint_eq(a.body_len, 0);
	free(req);
	free(id);
}
END_TEST

START_TEST(key_never_reaches_the_app)
{
	char *id = running_with_httpd(NULL);
	static const char *const hdrs[] = {"X-Forwarded-Prefix: /forged",
					   "X-Forwarded-For: 192.0.2.7",
					   "Connection: keep-alive, X-Hop",
					   "X-Hop: must-not-pass",
					   "Keep-Alive: timeout=5",
					   "X-Custom: passes",
					   NULL};
	char *path = proxy_path(id, PORT, "/cgi-bin/echo");
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP, .headers = hdrs};
	struct h_resp r;
	ck_assert_int_eq(h_request(&req, &r), 200);
	ck_assert_msg(!strstr(r.body, H.key), "the API key reached the app: %s", r.body);
	ck_assert_msg(!strcasestr(r.body, "API_KEY"), "%s", r.body);
	char *prefix = h_fmt("HTTP_X_FORWARDED_PREFIX=/v1/sandboxes/%s/proxy/%u\n", id, PORT);
	ck_assert_msg(strstr(r.body, prefix), "want %s in %s", prefix, r.body);
	ck_assert_msg(strstr(r.body, "HTTP_X_FORWARDED_PROTO=http\n"), "%s", r.body);
	ck_assert_msg(strstr(r.body, "HTTP_X_FORWARDED_FOR=192.0.2.7, 127.0.0.1\n"), "%s", r.body);
	ck_assert_msg(strstr(r.body, "HTTP_X_FORWARDED_HOST="), "%s", r.body);
	ck_assert_msg(strstr(r.body, "HTTP_X_CUSTOM=passes\n"), "%s", r.body);
	ck_assert_msg(!strstr(r.body, "forged"), "%s", r.body);
	ck_assert_msg(!strstr(r.body, "must-not-pass"), "%s", r.body);
	ck_assert_msg(!strstr(r.body, "HTTP_KEEP_ALIVE"), "%s", r.body);
	h_resp_free(&r);
	free(prefix);
	free(path);
	free(id);
}
END_TEST

START_TEST(errors_and_unchanged_ports)
{
	char *id = h_create("busybox", NULL);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	struct h_resp r;
	/* Nothing listens on 9: 502 naming the port. */
	char *path = proxy_path(id, 9, "/x");
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP};
	ck_assert_int_eq(h_request(&req, &r), 502);
	ck_assert_str_eq(h_err_code(&r), "PROXY_CONNECT_FAILED");
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "port 9"), "%s", r.body);
	h_resp_free(&r);
	/* No key, a wrong key: 401, as every route. */
	req.via = H_TCP_NOKEY;
	ck_assert_int_eq(h_request(&req, &r), 401);
	h_resp_free(&r);
	req.via = H_TCP_BADKEY;
	ck_assert_int_eq(h_request(&req, &r), 401);
	h_resp_free(&r);
	free(path);
	/* An unknown sandbox: 404. */
	path = proxy_path("no-such-sandbox", PORT, "/");
	req = (struct h_req){.method = "GET", .path = path, .via = H_TCP};
	ck_assert_int_eq(h_request(&req, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "SANDBOX_NOT_FOUND");
	h_resp_free(&r);
	free(path);
	/* Ports out of range. */
	for (int i = 0; i < 3; i++) {
		static const char *const bad[] = {"0", "65536", "http"};
		path = h_fmt("/v1/sandboxes/%s/proxy/%s/", id, bad[i]);
		req = (struct h_req){.method = "GET", .path = path, .via = H_TCP};
		ck_assert_int_eq(h_request(&req, &r), 400);
		ck_assert_msg(strstr(h_jstr(r.json, "message"), "port"), "%s", r.body);
		h_resp_free(&r);
		free(path);
	}
	/* execd's and egress's ports answer as before: their routes, 404 for a path they do
	 * not have, 405 for a method a path of theirs does not take. */
	path = proxy_path(id, 44772, "/ping");
	ck_assert_int_eq(h_http("GET", path, NULL, NULL), 200);
	ck_assert_int_eq(h_http("PUT", path, NULL, &r), 405);
	h_resp_free(&r);
	free(path);
	path = proxy_path(id, 44772, "/no-such-route");
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "NOT_FOUND");
	h_resp_free(&r);
	free(path);
	path = proxy_path(id, 18080, "/policy");
	ck_assert_int_eq(h_http("GET", path, NULL, NULL), 200);
	ck_assert_int_eq(h_http("POST", path, NULL, &r), 405);
	h_resp_free(&r);
	free(path);
	path = proxy_path(id, 18080, "/other");
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 404);
	h_resp_free(&r);
	free(path);
	/* Endpoints: every valid port names its proxy route. */
	unsigned ports[] = {8080, 44772, 18080, 1, 65535};
	for (size_t i = 0; i < sizeof(ports) / sizeof(ports[0]); i++) {
		path = h_fmt("/v1/sandboxes/%s/endpoints/%u", id, ports[i]);
		ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
		char *tail = h_fmt("/v1/sandboxes/%s/proxy/%u", id, ports[i]);
		const char *ep = h_jstr(r.json, "endpoint");
		ck_assert_msg(strlen(ep) > strlen(tail) &&
				  !strcmp(ep + strlen(ep) - strlen(tail), tail),
			      "endpoint %s", ep);
		h_resp_free(&r);
		free(tail);
		free(path);
	}
	free(id);
}
END_TEST

START_TEST(paused_sandbox_is_resumed)
{
	char *id = running_with_httpd(NULL);
	char *path = h_fmt("/v1/sandboxes/%s/pause", id);
	ck_assert_int_eq(h_http("POST", path, NULL, NULL), 202);
	free(path);
	ck_assert_str_eq(h_wait_state(id, "Paused", 30), "Paused");
	struct h_resp r;
	ck_assert_int_eq(get(&H, id, "/index.html", H_TCP, &r), 200);
	ck_assert_str_eq(r.body, "hello-from-the-app\n");
	h_resp_free(&r);
	path = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "status.state"), "Running");
	h_resp_free(&r);
	free(path);
	free(id);
}
END_TEST

START_TEST(public_network_sandbox)
{
	json_t *extra = json_pack("{s:{s:s}}", "extensions", "cell.network", "public");
	char *id = running_with_httpd(extra);
	json_decref(extra);
	struct h_resp r;
	ck_assert_int_eq(get(&H, id, "/cgi-bin/echo?n=public", H_TCP, &r), 200);
	ck_assert_msg(strstr(r.body, "query=n=public\n"), "%s", r.body);
	h_resp_free(&r);
	free(id);
}
END_TEST

struct client {
	struct h_world *w;
	const char *id;
	int n;
	long status;
	bool body_ok;
};

static void *client_run(void *arg)
{
	struct client *c = arg;
	char *rest = h_fmt("/cgi-bin/echo?client=%d", c->n);
	char *want = h_fmt("query=client=%d\n", c->n);
	struct h_resp r;
	c->status = get(c->w, c->id, rest, H_TCP, &r);
	c->body_ok = r.body && strstr(r.body, want) && strstr(r.body, "method=GET\n");
	h_resp_free(&r);
	free(rest);
	free(want);
	return NULL;
}

/* A celld of its own: the TCP gate closes a client's oldest connection past 64 that have
 * not yet sent their head (--tcp-pending-per-ip), and 100 connecting at once from one
 * address may be that many. */
START_TEST(hundred_clients)
{
	static const char *const flags[] = {"--tcp-pending-per-ip", "256", NULL};
	struct h_world *w =
	    h_world_add(&(struct h_world_opts){.name = "c", .tcp = true, .flags = flags});
	char *id = h_world_create(w, "busybox", NULL);
	ck_assert_str_eq(h_world_wait_state(w, id, "Running", 30), "Running");
	start_httpd(w, id);
	struct client cs[N_CLIENTS];
	pthread_t th[N_CLIENTS];
	for (int i = 0; i < N_CLIENTS; i++) {
		cs[i] = (struct client){.w = w, .id = id, .n = i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, client_run, &cs[i]), 0);
	}
	for (int i = 0; i < N_CLIENTS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N_CLIENTS; i++) {
		ck_assert_msg(cs[i].status == 200, "client %d: HTTP %ld", i, cs[i].status);
		ck_assert_msg(cs[i].body_ok, "client %d: wrong body", i);
	}
	free(id);
}
END_TEST

struct sink {
	unsigned char *data;
	size_t len, cap;
};

static size_t sink_write(char *p, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t len = size * n;
	if (s->len + len > s->cap)
		return 0;
	memcpy(s->data + s->len, p, len);
	s->len += len;
	return len;
}

START_TEST(big_download)
{
	char *id = running_with_httpd(NULL);
	char *out = h_sh(id, "dd if=/dev/urandom of=/www/big bs=1048576 count="
			     "100"
			     " 2>/dev/null && sha256sum /www/big");
	char inside[CELL_SHA256_HEX_LEN + 1];
	ck_assert_msg(strlen(out) > CELL_SHA256_HEX_LEN, "%s", out);
	memcpy(inside, out, CELL_SHA256_HEX_LEN);
	inside[CELL_SHA256_HEX_LEN] = '\0';
	free(out);

	struct sink s = {.cap = ((size_t)BIG_MB << 20) + 1};
	s.data = malloc(s.cap);
	ck_assert_ptr_nonnull(s.data);
	char *url = h_fmt("%s/v1/sandboxes/%s/proxy/%u/big", H.url, id, PORT);
	char *key = h_fmt("OPEN-SANDBOX-API-KEY: %s", H.key);
	CURL *c = curl_easy_init();
	ck_assert_ptr_nonnull(c);
	struct curl_slist *hl = curl_slist_append(NULL, key);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 300L);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CURLcode cc = curl_easy_perform(c);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	ck_assert_msg(cc == CURLE_OK, "download: %s", curl_easy_strerror(cc));
	ck_assert_int_eq(status, 200);
	ck_assert_uint_eq(s.len, (size_t)BIG_MB << 20);
	char got[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(s.data, s.len, got);
	ck_assert_str_eq(got, inside);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	fprintf(stderr, "it_proxy: %d MB through the proxy in %.2f s: %.0f MB/s\n", BIG_MB, secs,
		secs > 0 ? BIG_MB / secs : 0.0);
	/* Gone before the sandbox is: its pages are dropped, not written back while the
	 * sandbox's disk is unmounted. */
	free(h_sh(id, "rm /www/big"));
	free(s.data);
	free(url);
	free(key);
	free(id);
}
END_TEST

struct holder {
	struct h_world *w;
	const char *id;
	long status;
	char body[64];
};

static void *hold_run(void *arg)
{
	struct holder *h = arg;
	struct h_resp r;
	h->status = get(h->w, h->id, "/cgi-bin/hold", H_TCP, &r);
	snprintf(h->body, sizeof(h->body), "%s", r.body ? r.body : "");
	h_resp_free(&r);
	return NULL;
}

#define LIMIT 4

START_TEST(limit_per_sandbox)
{
	static const char *const flags[] = {"--proxy-max-connections", "4", NULL};
	struct h_world *w =
	    h_world_add(&(struct h_world_opts){.name = "b", .tcp = true, .flags = flags});
	char *id = h_world_create(w, "busybox", NULL);
	ck_assert_str_eq(h_world_wait_state(w, id, "Running", 30), "Running");
	start_httpd(w, id);
	struct holder hs[LIMIT];
	pthread_t th[LIMIT];
	for (int i = 0; i < LIMIT; i++) {
		hs[i] = (struct holder){.w = w, .id = id};
		ck_assert_int_eq(pthread_create(&th[i], NULL, hold_run, &hs[i]), 0);
	}
	/* All four are in the app (each marked itself) before the fifth is sent. */
	char *n = NULL;
	for (int i = 0; i < 200; i++) {
		free(n);
		n = h_world_sh(w, id, "ls /tmp/held | wc -l");
		if (atoi(n) == LIMIT)
			break;
		h_sleep_ms(50);
	}
	ck_assert_int_eq(atoi(n), LIMIT);
	free(n);
	struct h_resp r;
	ck_assert_int_eq(get(w, id, "/index.html", H_TCP, &r), 429);
	ck_assert_str_eq(h_err_code(&r), "TOO_MANY_CONNECTIONS");
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "4 proxied requests open"), "%s", r.body);
	h_resp_free(&r);
	free(h_world_sh(w, id, "touch /tmp/go"));
	for (int i = 0; i < LIMIT; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(hs[i].status, 200);
		ck_assert_str_eq(hs[i].body, "done\n");
	}
	/* The slots came back. */
	ck_assert_int_eq(get(w, id, "/index.html", H_TCP, &r), 200);
	h_resp_free(&r);
	free(id);
}
END_TEST

/* ---- what crosses the proxy: celld's credentials, the app's answer head ---- */

#define PROBE_PORT 8070
/* The E2B listeners of two tests' worlds: ports free when a test first asks (each test
 * runs in a process of its own), not fixed ones another process may hold. */
static const char *e2b_addr(int which)
{
	static char addr[2][32];
	if (!addr[which][0])
		snprintf(addr[which], sizeof(addr[which]), "127.0.0.1:%u", h_free_port());
	return addr[which];
}
enum { E2B_CREDS, E2B_TOKENS };
#define DOMAIN	   "preview.test"
#define E2B_DOMAIN "e2b.test"
#define ANSWER	   "/tmp/head_probe.answer"

/* A world (its name: unique in the case) with a preview domain and an E2B listener on
 * e2b_listen with E2B's domain, and a sandbox of it running head_probe on PROBE_PORT, answering
 * under the header lines answer (NULL: none). */
static struct h_world *probe_world(const char *name, const char *e2b_listen, char **id,
				   const char *answer)
{
	const char *const flags[] = {
	    "--e2b-listen", e2b_listen, "--preview-domain", DOMAIN, "--e2b-domain",
	    E2B_DOMAIN,	    NULL};
	struct h_world *w =
	    h_world_add(&(struct h_world_opts){.name = name, .tcp = true, .flags = flags});
	*id = h_world_create(w, "busybox", NULL);
	ck_assert_str_eq(h_world_wait_state(w, *id, "Running", 30), "Running");
	if (answer)
		put_file(w, *id, ANSWER, answer, 0644);
	h_world_upload_helper(w, *id, "head_probe");
	char *cmd = h_fmt("nohup /root/head_probe %u >/dev/null 2>&1 &", PROBE_PORT);
	free(h_world_sh(w, *id, cmd));
	free(cmd);
	wait_for_app(w, *id, PROBE_PORT, "/");
	return w;
}

/* A GET of target on listener listen with the header lines headers ("Name: v\r\n"...;
 * "Host: x" unless they start with a Host of their own). */
static void raw_get(const char *listen, const char *target, const char *headers, struct raw *a)
{
	const char *host = strncasecmp(headers, "Host:", 5) ? "Host: x\r\n" : "";
	char *rq = h_fmt("GET %s HTTP/1.1\r\n%s%sConnection: close\r\n\r\n", target, host, headers);
	raw_exchange_at(listen, rq, a);
	free(rq);
}

/* A string member of a JSON body, copied into out (64 bytes). */
static void json_member(const char *body, const char *name, char out[64])
{
	json_t *j = json_loads(body, 0, NULL);
	const char *v = json_string_value(json_object_get(j, name));
	ck_assert_msg(v && strlen(v) < 64, "no %s in %s", name, body);
	snprintf(out, 64, "%s", v);
	json_decref(j);
}

/* Sandbox id's E2B tokens, as E2B's SDK gets them: the envdAccessToken of its detail and
 * the trafficAccessToken of a connect. */
static void e2b_tokens(struct h_world *w, const char *listen, const char *id, char envd[64],
		       char traffic[64])
{
	struct raw a;
	char *target = h_fmt("/sandboxes/%s", id);
	char *key = h_fmt("X-API-Key: %s\r\n", w->key);
	raw_get(listen, target, key, &a);
	ck_assert_msg(a.status == 200, "%s", a.head);
	json_member(a.body, "envdAccessToken", envd);
	char *rq = h_fmt("POST /sandboxes/%s/connect HTTP/1.1\r\nHost: x\r\n%sContent-Type: "
			 "application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
			 id, key);
	raw_exchange_at(listen, rq, &a);
	ck_assert_msg(a.status == 200 || a.status == 201, "%s%s", a.head, a.body);
	json_member(a.body, "trafficAccessToken", traffic);
	free(rq);
	free(key);
	free(target);
}

/* The preview token of a port (the endpoint answer's header). */
static void preview_token_of(struct h_world *w, const char *id, unsigned port, char out[64])
{
	char *path = h_fmt("/v1/sandboxes/%s/endpoints/%u", id, port);
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP};
	struct h_resp r;
	ck_assert_int_eq(h_world_request(w, &req, &r), 200);
	const char *t = json_string_value(
	    json_object_get(json_object_get(r.json, "headers"), "X-Cell-Preview-Token"));
	ck_assert_msg(t && strlen(t) < 64, "no token in %s", r.body);
	snprintf(out, 64, "%s", t);
	h_resp_free(&r);
	free(path);
}

/* Every credential celld knows, each valid, sent to the app by either listener, by a
 * preview host and by an E2B host name: none reaches it (what it got is the probe's answer), the
 * app's own Authorization and cookies do. */
START_TEST(credentials_never_reach_the_app)
{
	char *id;
	struct h_world *w = probe_world("creds", e2b_addr(E2B_CREDS), &id, NULL);
	char envd[64], traffic[64], preview[64];
	e2b_tokens(w, e2b_addr(E2B_CREDS), id, envd, traffic);
	preview_token_of(w, id, PROBE_PORT, preview);
	char *creds = h_fmt("OPEN-SANDBOX-API-KEY: %s\r\nX-API-Key: %s\r\nX-Access-Token: %s\r\n"
			    "E2B-Traffic-Access-Token: %s\r\nX-Cell-Preview-Token: %s\r\n"
			    "Cookie: app=1; cell_preview=%s; other=2\r\n"
			    "Authorization: Bearer the-apps-own\r\n",
			    w->key, w->key, envd, traffic, preview, preview);
	char *e2b =
	    h_fmt("E2b-Sandbox-Id: %s\r\nE2b-Sandbox-Port: %u\r\n%s", id, PROBE_PORT, creds);
	char *host = h_fmt("Host: %u-%s." DOMAIN "\r\n%s", PROBE_PORT, id, creds);
	char *e2b_host = h_fmt("Host: %u-%s." E2B_DOMAIN "\r\n%s", PROBE_PORT, id, creds);
	char *path = proxy_path(id, PROBE_PORT, "/x");
	struct {
		const char *listen, *target, *headers;
	} const ways[] = {{w->listen, path, creds},
			  {e2b_addr(E2B_CREDS), "/x", e2b},
			  {w->listen, "/x", host},
			  {e2b_addr(E2B_CREDS), "/x", e2b_host}};
	static const char *const names[] = {"OPEN-SANDBOX-API-KEY", "X-API-Key",
					    "X-Access-Token",	    "E2B-Traffic-Access-Token",
					    "X-Cell-Preview-Token", "cell_preview"};
	const char *secrets[] = {w->key, envd, traffic, preview};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(ways); i++) {
		struct raw a;
		raw_get(ways[i].listen, ways[i].target, ways[i].headers, &a);
		ck_assert_msg(a.status == 200, "way %zu: %s%s", i, a.head, a.body);
		for (size_t k = 0; k < CELL_ARRAY_SIZE(names); k++)
			ck_assert_msg(!strcasestr(a.body, names[k]),
				      "way %zu: %s reached the app: %s", i, names[k], a.body);
		for (size_t k = 0; k < CELL_ARRAY_SIZE(secrets); k++)
			ck_assert_msg(!strstr(a.body, secrets[k]),
				      "way %zu: a secret reached the app: %s", i, a.body);
		ck_assert_msg(strstr(a.body, "\r\nCookie: app=1; other=2\r\n"), "way %zu: %s", i,
			      a.body);
		ck_assert_msg(strstr(a.body, "\r\nAuthorization: Bearer the-apps-own\r\n"),
			      "way %zu: %s", i, a.body);
	}
	free(path);
	free(e2b_host);
	free(host);
	free(e2b);
	free(creds);
	free(id);
}
END_TEST

/* E2B's status of GET target on the E2B listener of e2b_tokens_kept_apart for sandbox id, port
 * port, with one more header line. */
static int e2b_status(const char *id, unsigned port, const char *target, const char *line)
{
	char *headers =
	    h_fmt("E2b-Sandbox-Id: %s\r\nE2b-Sandbox-Port: %u\r\n%s\r\n", id, port, line);
	struct raw a;
	raw_get(e2b_addr(E2B_TOKENS), target, headers, &a);
	free(headers);
	return a.status;
}

/* The same through the E2B host name of sandbox id's port. */
static int e2b_host_status(const char *id, unsigned port, const char *line)
{
	char *headers = h_fmt("Host: %u-%s." E2B_DOMAIN "\r\n%s\r\n", port, id, line);
	struct raw a;
	raw_get(e2b_addr(E2B_TOKENS), "/x", headers, &a);
	free(headers);
	return a.status;
}

/* E2B's three tokens are three: the trafficAccessToken opens the sandbox's ports and never
 * envd (commands as root), the envdAccessToken is not the preview token of envd's port
 * (which the OpenSandbox endpoint answer hands out to whoever may view a port), and a token
 * goes in its own header only. */
START_TEST(e2b_tokens_kept_apart)
{
	char *id;
	struct h_world *w = probe_world("tokens", e2b_addr(E2B_TOKENS), &id, NULL);
	char envd[64], traffic[64], preview[64];
	e2b_tokens(w, e2b_addr(E2B_TOKENS), id, envd, traffic);
	preview_token_of(w, id, 49983, preview);
	ck_assert_uint_eq(strlen(envd), 43);
	ck_assert_uint_eq(strlen(traffic), 43);
	ck_assert_str_ne(envd, traffic);
	ck_assert_str_ne(envd, preview);
	char *as_envd[] = {h_fmt("X-Access-Token: %s", envd), h_fmt("X-Access-Token: %s", traffic),
			   h_fmt("X-Access-Token: %s", preview),
			   h_fmt("E2B-Traffic-Access-Token: %s", traffic),
			   h_fmt("E2B-Traffic-Access-Token: %s", envd)};
	/* envd: its own token, nothing else. */
	ck_assert_int_eq(e2b_status(id, 49983, "/envs", as_envd[0]), 200);
	for (size_t i = 1; i < 5; i++)
		ck_assert_msg(e2b_status(id, 49983, "/envs", as_envd[i]) == 401, "%s opened envd",
			      as_envd[i]);
	/* A port: the traffic token in its header, or envd's in its own; else E2B's proxy's
	 * 403. */
	ck_assert_int_eq(e2b_status(id, PROBE_PORT, "/x", as_envd[3]), 200);
	ck_assert_int_eq(e2b_status(id, PROBE_PORT, "/x", as_envd[0]), 200);
	ck_assert_int_eq(e2b_status(id, PROBE_PORT, "/x", as_envd[1]), 403);
	ck_assert_int_eq(e2b_status(id, PROBE_PORT, "/x", as_envd[4]), 403);
	/* Through its host name, E2B's rule: the traffic token and nothing else. */
	ck_assert_int_eq(e2b_host_status(id, PROBE_PORT, as_envd[3]), 200);
	for (size_t i = 0; i < 5; i++)
		if (i != 3)
			ck_assert_msg(e2b_host_status(id, PROBE_PORT, as_envd[i]) == 403,
				      "%s opened a port by its host name", as_envd[i]);
	char *key = h_fmt("X-API-Key: %s", w->key);
	ck_assert_int_eq(e2b_host_status(id, PROBE_PORT, key), 403);
	free(key);
	for (size_t i = 0; i < 5; i++)
		free(as_envd[i]);
	free(id);
}
END_TEST

/* An app's answer header whose name is not an RFC 9110 token, or whose value holds a
 * control character other than a tab, never reaches the client; the others do. */
START_TEST(answer_header_names_checked)
{
	static const char answer[] = "X-Ok: 1\r\n"
				     "X\001Ctl: 2\r\n"
				     "X Blank: 3\r\n"
				     "X(Paren): 4\r\n"
				     "\303\251t\303\251: 5\r\n"
				     "X-Val-Ctl: a\001b\r\n"
				     "X-Val-Del: a\177b\r\n"
				     "X-Tab: a\tb\r\n"
				     "X-Last: 9\r\n";
	char *id;
	struct h_world *w = probe_world("names", e2b_addr(E2B_CREDS), &id, answer);
	char *path = proxy_path(id, PROBE_PORT, "/x");
	char *key = h_fmt("OPEN-SANDBOX-API-KEY: %s\r\n", w->key);
	struct raw a;
	raw_get(w->listen, path, key, &a);
	ck_assert_int_eq(a.status, 200);
	ck_assert_msg(strstr(a.head, "\r\nX-Ok: 1\r\n"), "%s", a.head);
	ck_assert_msg(strstr(a.head, "\r\nX-Tab: a\tb\r\n"), "%s", a.head);
	ck_assert_msg(strstr(a.head, "\r\nX-Last: 9\r\n"), "%s", a.head);
	static const char *const gone[] = {"Ctl", "Blank", "Paren", "\303", "X-Val-"};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(gone); i++)
		ck_assert_msg(!strstr(a.head, gone[i]), "%s passed: %s", gone[i], a.head);
	free(key);
	free(path);
	free(id);
}
END_TEST

/* A client that leaves while its app is silent: the proxy lets go of the app at once, both
 * while the app has sent nothing (before its head) and while it streams a body it has paused
 * (a long computation's output, a code interpreter's run). The app learns its client left
 * when its connection closes: long before PROXY_IDLE_MS (120 s), the old wait. The bound
 * below is a deadline for the test, not a measure. */
static void leave_silent_app(struct h_world *w, const char *id, const char *mode)
{
	free(h_world_sh(w, id, "rm -f /tmp/head_probe.gone /tmp/head_probe.got"));
	put_file(w, id, "/tmp/head_probe.silent", mode, 0644);
	const char *colon = strrchr(w->listen, ':');
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1))};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	char *path = proxy_path(id, PROBE_PORT, "/run");
	char *rq =
	    h_fmt("GET %s HTTP/1.1\r\nHost: x\r\nOPEN-SANDBOX-API-KEY: %s\r\n\r\n", path, w->key);
	ck_assert_int_eq(send(fd, rq, strlen(rq), MSG_NOSIGNAL), (ssize_t)strlen(rq));
	if (*mode) { /* the app's head and first bytes reach the client first */
		char got[1024] = "";
		size_t len = 0;
		struct timeval tv = {.tv_sec = 30};
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		while (!strstr(got, "first\n") && len < sizeof(got) - 1) {
			ssize_t n = recv(fd, got + len, sizeof(got) - 1 - len, 0);
			ck_assert_msg(n > 0, "the app's start never came: %s", got);
			len += (size_t)n;
			got[len] = '\0';
		}
		ck_assert_msg(!strncmp(got, "HTTP/1.1 200", 12), "%s", got);
	}
	/* The request is in the app (in mode "": no answer will come). */
	char *got = NULL;
	for (int i = 0; i < 300 && !(got && strstr(got, "got")); i++, h_sleep_ms(100)) {
		free(got);
		got = h_world_sh(w, id, "test -e /tmp/head_probe.got && echo got; true");
	}
	ck_assert_msg(strstr(got, "got"), "the request never reached the app");
	free(got);
	close(fd); /* the client leaves */
	char *gone = NULL;
	for (int i = 0; i < 300; i++, h_sleep_ms(100)) {
		free(gone);
		gone = h_world_sh(w, id, "test -e /tmp/head_probe.gone && echo gone; true");
		if (strstr(gone, "gone"))
			break;
	}
	ck_assert_msg(strstr(gone, "gone"),
		      "the app's side stayed open 30 s after its client left (mode '%s')", mode);
	free(gone);
	free(rq);
	free(path);
}

START_TEST(client_gone_ends_the_app_side)
{
	char *id;
	struct h_world *w = probe_world("gone", e2b_addr(E2B_CREDS), &id, NULL);
	leave_silent_app(w, id, "head");
	leave_silent_app(w, id, "");
	free(id);
}
END_TEST

/* An app's cookies stay the app's: no Domain attribute (which would set them for every
 * preview host under the domain, a cookie bomb answering 431 to all), none of celld's own
 * cookie, and through the path route a Path under the app's prefix (else they are the
 * whole API host's). Through a host route the Path is the app's own. */
START_TEST(app_cookies_stay_with_the_app)
{
	char *id = NULL;
	char *answer = h_fmt("Set-Cookie: bomb=1; Domain=" DOMAIN "; Path=/\r\n"
			     "Set-Cookie: dot=2; domain = .PREVIEW.test\r\n"
			     "Set-Cookie: own=3; Path=/; Domain=%u-%%s." DOMAIN "\r\n"
			     "Set-Cookie: plain=4; path=/app; HttpOnly\r\n"
			     "Set-Cookie: cell_preview=forged; Path=/\r\n"
			     "Set-Cookie: nopath=5\r\n",
			     PROBE_PORT);
	/* The sandbox's id is in a line: the answer is written after the create. */
	struct h_world *w = probe_world("cookies", e2b_addr(E2B_TOKENS), &id, NULL);
	char *full = h_fmt(answer, id);
	put_file(w, id, ANSWER, full, 0644);
	char *prefix = h_fmt("/v1/sandboxes/%s/proxy/%u", id, PROBE_PORT);
	char *path = h_fmt("%s/x", prefix);
	char *key = h_fmt("OPEN-SANDBOX-API-KEY: %s\r\n", w->key);
	char *host = h_fmt("Host: %u-%s." DOMAIN "\r\n%s", PROBE_PORT, id, key);
	struct raw a;
	/* A preview host: Domain gone, the rest as the app sent it. */
	raw_get(w->listen, "/x", host, &a);
	ck_assert_int_eq(a.status, 200);
	static const char *const by_host[] = {
	    "Set-Cookie: bomb=1; Path=/\r\n", "Set-Cookie: dot=2\r\n",
	    "Set-Cookie: own=3; Path=/\r\n", "Set-Cookie: plain=4; path=/app; HttpOnly\r\n",
	    "Set-Cookie: nopath=5\r\n"};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(by_host); i++)
		ck_assert_msg(strstr(a.head, by_host[i]), "want %s in %s", by_host[i], a.head);
	ck_assert_msg(!strcasestr(a.head, "domain"), "%s", a.head);
	ck_assert_msg(!strstr(a.head, "forged"), "%s", a.head);
	/* The path route: every Path below the app's prefix too. */
	raw_get(w->listen, path, key, &a);
	ck_assert_int_eq(a.status, 200);
	char *by_path[] = {h_fmt("Set-Cookie: bomb=1; Path=%s/\r\n", prefix),
			   h_fmt("Set-Cookie: dot=2\r\n"),
			   h_fmt("Set-Cookie: own=3; Path=%s/\r\n", prefix),
			   h_fmt("Set-Cookie: plain=4; path=%s/app; HttpOnly\r\n", prefix),
			   h_fmt("Set-Cookie: nopath=5\r\n")};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(by_path); i++) {
		ck_assert_msg(strstr(a.head, by_path[i]), "want %s in %s", by_path[i], a.head);
		free(by_path[i]);
	}
	ck_assert_msg(!strcasestr(a.head, "domain"), "%s", a.head);
	ck_assert_msg(!strstr(a.head, "forged"), "%s", a.head);
	free(host);
	free(key);
	free(path);
	free(prefix);
	free(full);
	free(answer);
	free(id);
}
END_TEST

/* A WebSocket through the proxy to ws_echo_probe in a sandbox with network none: the app's
 * 101 headers (accept key, subprotocol, its own) come back, the request the app got
 * (Upgrade, Connection, Sec-WebSocket-*, X-Forwarded-*, never the key, the app's bytes
 * after its 101), messages of every length encoding, a 4 MiB message in 16 KiB pieces, a
 * frame sent in the same write as the request head, the Unix socket, and the close. */
START_TEST(websocket_echo)
{
	char *id = h_create("busybox", NULL);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	start_ws_echo(&H, id);
	char why[256];
	struct ws ws;
	ws_open_ex(&H, id, WS_PORT, "/head?q=1", false,
		   "Sec-WebSocket-Protocol: chat, superchat\r\nX-Custom: passes\r\n", NULL, 0, &ws);
	ck_assert_int_eq(ws.status, 101);
	ck_assert_msg(strcasestr(ws.head, "\r\nSec-WebSocket-Protocol: chat\r\n"), "%s", ws.head);
	ck_assert_msg(strcasestr(ws.head, "\r\nX-Echo-App: yes\r\n"), "%s", ws.head);
	/* The app's first message, sent with its 101: the head it got. */
	ck_assert_msg(ws_wait(&ws, false, why, sizeof(why)), "%s", why);
	const char *got = (const char *)ws.msg;
	ck_assert_msg(!strncmp(got, "GET /head?q=1 HTTP/1.1\r\n", 24), "%s", got);
	ck_assert_msg(strstr(got, "\r\nUpgrade: websocket\r\n"), "%s", got);
	ck_assert_msg(strstr(got, "\r\nConnection: Upgrade\r\n"), "%s", got);
	ck_assert_msg(strstr(got, "\r\nSec-WebSocket-Version: 13\r\n"), "%s", got);
	ck_assert_msg(strstr(got, "\r\nSec-WebSocket-Key: "), "%s", got);
	ck_assert_msg(strstr(got, "\r\nSec-WebSocket-Protocol: chat, superchat\r\n"), "%s", got);
	ck_assert_msg(strstr(got, "\r\nX-Custom: passes\r\n"), "%s", got);
	ck_assert_msg(strstr(got, "\r\nX-Forwarded-For: 127.0.0.1\r\n"), "%s", got);
	char *prefix = h_fmt("\r\nX-Forwarded-Prefix: /v1/sandboxes/%s/proxy/%u\r\n", id, WS_PORT);
	ck_assert_msg(strstr(got, prefix), "want %s in %s", prefix, got);
	free(prefix);
	ck_assert_msg(!strstr(got, H.key), "the API key reached the app: %s", got);
	ck_assert_msg(!strcasestr(got, "Connection: close"), "%s", got);
	/* Every length encoding, text and binary. */
	static const size_t sizes[] = {0, 1, 125, 126, 127, 4096, 65535, 65536, 200000};
	unsigned char *data = malloc(4u << 20);
	ck_assert_ptr_nonnull(data);
	for (size_t i = 0; i < (4u << 20); i++)
		data[i] = (unsigned char)(i * 2654435761u >> 13);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		ck_assert_msg(ws_echo(&ws, WSLAY_BINARY_FRAME, data, sizes[i], 0, why, sizeof(why)),
			      "%zu bytes: %s", sizes[i], why);
		ck_assert_msg(
		    ws_echo(&ws, WSLAY_TEXT_FRAME, "hello, proxy", 12, 0, why, sizeof(why)),
		    "text: %s", why);
	}
	/* 4 MiB in pieces of 16 KiB, echoed piece by piece, whole at the end. */
	ck_assert_msg(ws_echo(&ws, WSLAY_BINARY_FRAME, data, 4u << 20, 16u << 10, why, sizeof(why)),
		      "4 MiB: %s", why);
	ck_assert_uint_gt(ws.pieces, 64);
	/* Closed by the client: the app answers the close and the proxy ends the connection. */
	ck_assert_int_eq(wslay_event_queue_close(ws.ctx, 1000, NULL, 0), 0);
	ck_assert_msg(ws_wait(&ws, true, why, sizeof(why)), "close: %s", why);
	int fl = fcntl(ws.fd, F_GETFL);
	fcntl(ws.fd, F_SETFL, fl & ~O_NONBLOCK);
	char c;
	ck_assert_int_eq(recv(ws.fd, &c, 1, 0), 0);
	ws_close(&ws);

	/* A frame in the same write as the head: the first thing the app gets. */
	static const unsigned char early[] = {0x81,    0x85,	1,	 2,	  3,	  4,
					      'e' ^ 1, 'a' ^ 2, 'r' ^ 3, 'l' ^ 4, 'y' ^ 1};
	ws_open_ex(&H, id, WS_PORT, "/", false, NULL, early, sizeof(early), &ws);
	ck_assert_int_eq(ws.status, 101);
	ck_assert_msg(ws_wait(&ws, false, why, sizeof(why)), "%s", why);
	ck_assert_uint_eq(ws.msg_len, 5);
	ck_assert_str_eq((const char *)ws.msg, "early");
	ck_assert_msg(ws_echo(&ws, WSLAY_TEXT_FRAME, "after", 5, 0, why, sizeof(why)), "%s", why);
	ws_close(&ws);

	/* Over the Unix socket. */
	ws_open_ex(&H, id, WS_PORT, "/", true, NULL, NULL, 0, &ws);
	ck_assert_int_eq(ws.status, 101);
	ck_assert_msg(ws_echo(&ws, WSLAY_BINARY_FRAME, data, 100000, 0, why, sizeof(why)), "%s",
		      why);
	ws_close(&ws);
	free(data);
	free(id);
}
END_TEST

/* The app refusing the switch: its answer comes back as a normal one. Nothing listening:
 * 502, as for any request. */
START_TEST(websocket_refused)
{
	char *id = h_create("busybox", NULL);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	start_ws_echo(&H, id);
	struct ws ws;
	ws_open(&H, id, "/refuse", &ws);
	ck_assert_int_eq(ws.status, 403);
	ck_assert_str_eq(ws.body, "no websocket here\n");
	ck_assert_msg(strcasestr(ws.head, "\r\nX-Echo-App: refused\r\n"), "%s", ws.head);
	ck_assert_msg(!strcasestr(ws.head, "\r\nUpgrade:"), "%s", ws.head);
	ws_close(&ws);
	ws_open_ex(&H, id, 9, "/", false, NULL, NULL, 0, &ws);
	ck_assert_int_eq(ws.status, 502);
	ck_assert_msg(strstr(ws.body, "PROXY_CONNECT_FAILED"), "%s", ws.body);
	ws_close(&ws);
	free(id);
}
END_TEST

struct ws_client {
	struct h_world *w;
	const char *id;
	int n;
	char why[256];
	bool ok;
};

#define WS_MESSAGES 20

static void *ws_client_run(void *arg)
{
	struct ws_client *c = arg;
	struct ws ws;
	ws_open(c->w, c->id, "/", &ws);
	if (ws.status != 101) {
		snprintf(c->why, sizeof(c->why), "HTTP %d: %.200s", ws.status, ws.body);
		ws_close(&ws);
		return NULL;
	}
	unsigned char *buf = malloc(70000);
	for (int m = 0; m < WS_MESSAGES; m++) {
		size_t len = (size_t)((c->n * 7919 + m * 104729) % 70000);
		for (size_t i = 0; i < len; i++)
			buf[i] = (unsigned char)(c->n + m + i * 31);
		char why[200];
		if (!ws_echo(&ws, WSLAY_BINARY_FRAME, buf, len, 0, why, sizeof(why))) {
			snprintf(c->why, sizeof(c->why), "message %d (%zu bytes): %s", m, len, why);
			free(buf);
			ws_close(&ws);
			return NULL;
		}
	}
	free(buf);
	ws_close(&ws);
	c->ok = true;
	return NULL;
}

/* 100 WebSockets at once, each echoing 20 messages of its own (the TCP gate raised as in
 * hundred_clients). */
START_TEST(hundred_websockets)
{
	static const char *const flags[] = {"--tcp-pending-per-ip", "256", NULL};
	struct h_world *w =
	    h_world_add(&(struct h_world_opts){.name = "w", .tcp = true, .flags = flags});
	char *id = h_world_create(w, "busybox", NULL);
	ck_assert_str_eq(h_world_wait_state(w, id, "Running", 30), "Running");
	start_ws_echo(w, id);
	struct ws_client cs[N_CLIENTS];
	pthread_t th[N_CLIENTS];
	for (int i = 0; i < N_CLIENTS; i++) {
		cs[i] = (struct ws_client){.w = w, .id = id, .n = i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, ws_client_run, &cs[i]), 0);
	}
	for (int i = 0; i < N_CLIENTS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N_CLIENTS; i++)
		ck_assert_msg(cs[i].ok, "client %d: %s", i, cs[i].why);
	free(id);
}
END_TEST

/* Open WebSockets hold their slots of --proxy-max-connections: the fifth request is 429
 * (a WebSocket or not) until one closes. */
START_TEST(websocket_limit)
{
	static const char *const flags[] = {"--proxy-max-connections", "4", NULL};
	struct h_world *w =
	    h_world_add(&(struct h_world_opts){.name = "l", .tcp = true, .flags = flags});
	char *id = h_world_create(w, "busybox", NULL);
	ck_assert_str_eq(h_world_wait_state(w, id, "Running", 30), "Running");
	start_ws_echo(w, id);
	char why[256];
	struct ws ws[LIMIT];
	for (int i = 0; i < LIMIT; i++) {
		ws_open(w, id, "/", &ws[i]);
		ck_assert_int_eq(ws[i].status, 101);
		ck_assert_msg(ws_echo(&ws[i], WSLAY_TEXT_FRAME, "x", 1, 0, why, sizeof(why)), "%s",
			      why);
	}
	struct ws more;
	ws_open(w, id, "/", &more);
	ck_assert_int_eq(more.status, 429);
	ck_assert_msg(strstr(more.body, "TOO_MANY_CONNECTIONS"), "%s", more.body);
	ws_close(&more);
	char *path = h_fmt("/v1/sandboxes/%s/proxy/%u/", id, WS_PORT);
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP};
	struct h_resp r;
	ck_assert_int_eq(h_world_request(w, &req, &r), 429);
	h_resp_free(&r);
	free(path);
	/* The ones open still work; one closed gives its slot back. */
	ck_assert_msg(ws_echo(&ws[3], WSLAY_TEXT_FRAME, "y", 1, 0, why, sizeof(why)), "%s", why);
	ws_close(&ws[0]);
	int st = 0;
	for (int i = 0; i < 200 && st != 101; i++) {
		ws_open(w, id, "/", &more);
		st = more.status;
		if (st == 101)
			ck_assert_msg(ws_echo(&more, WSLAY_TEXT_FRAME, "z", 1, 0, why, sizeof(why)),
				      "%s", why);
		else
			ck_assert_int_eq(st, 429);
		ws_close(&more);
		if (st != 101)
			h_sleep_ms(50);
	}
	ck_assert_int_eq(st, 101);
	for (int i = 1; i < LIMIT; i++)
		ws_close(&ws[i]);
	free(id);
}
END_TEST

/* celld's open fds and threads (/proc/PID). */
static void celld_counts(pid_t pid, int *fds, int *threads)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	*fds = 0;
	for (struct dirent *e; (e = readdir(d));)
		*fds += e->d_name[0] != '.';
	closedir(d);
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	char line[256];
	*threads = -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Threads:", 8))
			*threads = atoi(line + 8);
	fclose(f);
}

#define VANISHING 24

/* Clients that vanish mid-stream (before the 101 arrived, half-way through a frame, with
 * the echo of a large message unread, with a reset): celld closes both sides and its fds
 * and threads come back to where they were, the app's connections end. */
START_TEST(websocket_clients_vanish)
{
	char *id = h_create("busybox", NULL);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	start_ws_echo(&H, id);
	for (int i = 0; i < 100 && ws_echo_threads(&H, id) != 1; i++)
		h_sleep_ms(50);
	ck_assert_int_eq(ws_echo_threads(&H, id), 1);
	pid_t pid = h_celld_pid();
	int fds0, threads0;
	h_sleep_ms(200);
	celld_counts(pid, &fds0, &threads0);
	unsigned char *big = calloc(1, 4u << 20);
	ck_assert_ptr_nonnull(big);
	struct ws ws[VANISHING];
	for (int i = 0; i < VANISHING; i++) {
		int kind = i % 4;
		if (kind == 0) {
			/* Gone right after the request: maybe before the 101 went out. */
			int fd = ws_dial(&H, false);
			char *req = h_fmt("GET /v1/sandboxes/%s/proxy/%u/ HTTP/1.1\r\nHost: x\r\n"
					  "OPEN-SANDBOX-API-KEY: %s\r\nConnection: Upgrade\r\n"
					  "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
					  "Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==\r\n\r\n",
					  id, WS_PORT, H.key);
			ck_assert_int_eq(send(fd, req, strlen(req), MSG_NOSIGNAL),
					 (ssize_t)strlen(req));
			free(req);
			struct linger lg = {.l_onoff = 1, .l_linger = 0};
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			close(fd);
			ws[i] = (struct ws){.fd = -1};
			continue;
		}
		ws_open(&H, id, "/", &ws[i]);
		ck_assert_int_eq(ws[i].status, 101);
		if (kind == 1) {
			/* Half a frame: a header for 1000 bytes, 10 of them. */
			static const unsigned char half[] = {
			    0x82, 0x80 | 126, 0x03, 0xe8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
			ck_assert_int_eq(send(ws[i].fd, half, sizeof(half), MSG_NOSIGNAL),
					 (ssize_t)sizeof(half));
		} else {
			/* A large message whose echo is never read: both sides' buffers full. */
			struct wslay_event_msg m = {WSLAY_BINARY_FRAME, big, 4u << 20};
			ck_assert_int_eq(wslay_event_queue_msg(ws[i].ctx, &m), 0);
			for (int k = 0; k < 50 && wslay_event_want_write(ws[i].ctx); k++) {
				if (wslay_event_send(ws[i].ctx))
					break;
				h_sleep_ms(5);
			}
			if (kind == 3) {
				struct linger lg = {.l_onoff = 1, .l_linger = 0};
				setsockopt(ws[i].fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			}
		}
	}
	h_sleep_ms(100);
	for (int i = 0; i < VANISHING; i++)
		ws_close(&ws[i]);
	free(big);
	int fds = 0, threads = 0;
	for (int i = 0; i < 200; i++) {
		celld_counts(pid, &fds, &threads);
		if (fds <= fds0 && threads <= threads0)
			break;
		h_sleep_ms(50);
	}
	ck_assert_msg(fds <= fds0, "celld has %d fds, %d before", fds, fds0);
	ck_assert_msg(threads <= threads0, "celld has %d threads, %d before", threads, threads0);
	int app = 0;
	for (int i = 0; i < 100 && (app = ws_echo_threads(&H, id)) != 1; i++)
		h_sleep_ms(50);
	ck_assert_msg(app == 1, "the app still serves %d connections", app - 1);
	/* And the proxy still works. */
	char why[256];
	ws_open(&H, id, "/", &ws[0]);
	ck_assert_int_eq(ws[0].status, 101);
	ck_assert_msg(ws_echo(&ws[0], WSLAY_TEXT_FRAME, "still", 5, 0, why, sizeof(why)), "%s",
		      why);
	ws_close(&ws[0]);
	free(id);
}
END_TEST

/* celld stopping (SIGTERM) ends its open WebSockets itself: it exits without waiting for
 * its shutdown watchdog, and the client sees the end. The sandbox keeps running (the
 * teardown restarts this celld to delete it). */
START_TEST(websocket_celld_stops)
{
	struct h_world *w = h_world_add(&(struct h_world_opts){.name = "s", .tcp = true});
	char *id = h_world_create(w, "busybox", NULL);
	ck_assert_str_eq(h_world_wait_state(w, id, "Running", 30), "Running");
	start_ws_echo(w, id);
	char why[256];
	struct ws ws;
	ws_open(w, id, "/", &ws);
	ck_assert_int_eq(ws.status, 101);
	ck_assert_msg(ws_echo(&ws, WSLAY_TEXT_FRAME, "before", 6, 0, why, sizeof(why)), "%s", why);
	ck_assert_int_eq(kill(h_world_pid(w), SIGTERM), 0);
	for (int i = 0; i < 400 && h_world_alive(w); i++)
		h_sleep_ms(50);
	ck_assert_msg(!h_world_alive(w), "celld still runs 20 s after SIGTERM");
	char *log = NULL;
	size_t len = 0;
	ck_assert_int_eq(cell_read_file_at(AT_FDCWD, w->log, 16u << 20, &log, &len, NULL), 0);
	ck_assert_msg(!strstr(log, "did not finish"), "celld waited for its connections: %s", log);
	ck_assert_msg(!strstr(log, "was not closed"), "an upgraded connection was still open: %s",
		      log);
	free(log);
	int fl = fcntl(ws.fd, F_GETFL);
	fcntl(ws.fd, F_SETFL, fl & ~O_NONBLOCK);
	char c;
	ck_assert_int_le(recv(ws.fd, &c, 1, 0), 0);
	ws_close(&ws);
	free(id);
}
END_TEST

static Suite *proxy_suite(void)
{
	Suite *s = suite_create("proxy");
	TCase *tc = h_tcase(s, "proxy", 300);
	tcase_add_test(tc, get_post_query_and_path);
	tcase_add_test(tc, request_on_the_wire);
	tcase_add_test(tc, head_request);
	tcase_add_test(tc, key_never_reaches_the_app);
	tcase_add_test(tc, errors_and_unchanged_ports);
	tcase_add_test(tc, paused_sandbox_is_resumed);
	tcase_add_test(tc, public_network_sandbox);
	tcase_add_test(tc, hundred_clients);
	tcase_add_test(tc, big_download);
	tcase_add_test(tc, limit_per_sandbox);
	tc = h_tcase(s, "crossing", 300);
	tcase_add_test(tc, credentials_never_reach_the_app);
	tcase_add_test(tc, e2b_tokens_kept_apart);
	/* Another case: at most three worlds of a case at once. */
	tc = h_tcase(s, "answers", 300);
	tcase_add_test(tc, answer_header_names_checked);
	tcase_add_test(tc, app_cookies_stay_with_the_app);
	tcase_add_test(tc, client_gone_ends_the_app_side);
	/* A case of its own: the worlds of the first are gone by then. */
	tc = h_tcase(s, "websocket", 300);
	tcase_add_test(tc, websocket_echo);
	tcase_add_test(tc, websocket_refused);
	tcase_add_test(tc, hundred_websockets);
	tcase_add_test(tc, websocket_limit);
	tcase_add_test(tc, websocket_clients_vanish);
	tcase_add_test(tc, websocket_celld_stops);
	return s;
}

int main(void)
{
	/* This program, its celld and everything they start live in a network namespace of
	 * their own, with only a loopback. */
	int r = h_netns_enter_private();
	if (r < 0) {
		fprintf(stderr, "%s: a private network namespace: %s\n", "it_proxy", strerror(-r));
		return 1;
	}
	return h_main(proxy_suite());
}
