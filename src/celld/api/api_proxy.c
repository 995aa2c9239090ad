/* The port proxy: ANY /v1/sandboxes/{id}/proxy/{port}/<rest> forwarded over HTTP/1.1 to
 * 127.0.0.1:<port> inside the sandbox's own network namespace (portconn.c), so no host
 * port is ever opened and a sandbox with network "none" is reached as well. Ports 44772 and 18080
 * stay the execd and egress APIs.
 *
 * One connection to the app per request ("Connection: close"). The request head goes to
 * the app once the client's head is in, the body as it arrives (a route of kind
 * ROUTE_BODY_STREAM), and the answer comes back through a callback response: its status,
 * its headers, its body as the app sends it (by length, chunked, or until it closes). Bounded:
 * the heads (PROXY_HEAD_MAX), the connect (PORTCONN_CONNECT_MS), the silence of the app
 * (PROXY_IDLE_MS), and the connections one sandbox's proxy holds at once
 * (--proxy-max-connections, 429 past it).
 *
 * A request asking for a protocol switch (Connection: Upgrade, Upgrade: websocket or any
 * other) goes to the app with its Upgrade and "Connection: Upgrade" instead of "close". An
 * app answering 101 gets celld's 101 sent to the client with the app's headers
 * (Sec-WebSocket-Accept, -Protocol, -Extensions...), then the two sockets are joined byte
 * for byte on the connection's thread (splice_run) until both sides closed, either failed,
 * nothing moved for PROXY_SPLICE_MS, or celld stops (cell_splice, told by http.c's stop
 * signal). No framing:
 * whatever the app speaks passes. Any other answer goes back as a normal one. An upgraded
 * connection holds its slot of --proxy-max-connections for as long as it lives. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "metrics.h"
#include "cell/cleanup.h"
#include "cell/log.h"
#include "cell/splice.h"
#include "api/api_proxy.h"
#include "api/opensandbox/api.h"
#include "config.h"
#include "http/errors.h"
#include "fields.h"
#include "http/http.h"
#include "interpreter.h"
#include "portconn.h"
#include "http/proxyhead.h"
#include "sandbox.h"
#include "http/url.h"

#define PROXY_HEAD_MAX	  (64u << 10) /* the request head to the app; the answer's head */
#define PROXY_LINE_MAX	  4096	      /* a chunk-size or trailer line of a chunked answer */
#define PROXY_IDLE_MS	  120000      /* the app silent this long: the request fails */
#define PROXY_BLOCK	  (64u << 10)
#define PROXY_HEADERS_MAX 256
#define PROXY_SPLICE_MS	  (3600 * 1000) /* an upgraded connection silent both ways */
#define PORT_EXECD	  44772
#define PORT_EGRESS	  18080

enum body_kind { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_CLOSE };
enum chunk_state { CHUNK_SIZE, CHUNK_DATA, CHUNK_CRLF, CHUNK_DONE };

struct proxy {
	int refs; /* atomic: the request's state, and the response while it streams */
	struct sandbox *sb;
	bool counted; /* in sb->proxy_conns */
	int fd;	      /* to the app */
	int client;   /* the client's socket, only polled for its hangup (-1: unknown) */
	unsigned port;
	bool chunked_up;  /* the client's body goes to the app chunked */
	bool send_failed; /* the app stopped taking the body: its answer is still read */
	bool head_method;
	bool upgrade; /* the client asked for a protocol switch */
	/* What was read from the app and not used yet: buf[pos, len). */
	char *buf;
	size_t pos, len;
	enum body_kind body;
	enum chunk_state chunk;
	uint64_t left; /* BODY_LENGTH: bytes to come; BODY_CHUNKED: of the current chunk */
};

static void proxy_unref(void *cls)
{
	struct proxy *p = cls;
	if (!p || __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL))
		return;
	if (p->fd >= 0)
		close(p->fd);
	if (p->sb) {
		if (p->counted)
			__atomic_sub_fetch(&p->sb->proxy_conns, 1, __ATOMIC_RELAXED);
		sandbox_unref(p->sb);
	}
	free(p->buf);
	free(p);
}

/* poll fd for events for at most ms: 1 ready, 0 timed out, -errno. A client that hangs up
 * meanwhile (client >= 0) ends the wait at once with -ECONNRESET: the app's side is closed
 * then, so an app that streams nothing (a long computation's answer) learns the client is
 * gone now, not after PROXY_IDLE_MS. */
static int wait_fd(int fd, short events, int client, int ms)
{
	struct pollfd pfd[2] = {{.fd = fd, .events = events}, {.fd = client, .events = POLLRDHUP}};
	for (;;) {
		int r = poll(pfd, client >= 0 ? 2 : 1, ms);
		if (r > 0 && client >= 0 && (pfd[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
			return -ECONNRESET;
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

static int send_all(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			int r = wait_fd(fd, POLLOUT, -1, PROXY_IDLE_MS);
			if (r <= 0)
				return r ? r : -ETIMEDOUT;
			continue;
		}
		if (n < 0)
			return -errno;
		metrics_add(METRIC_PROXY_SENT, (size_t)n);
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Up to max bytes from p's app into out: how many (0 at its end), or -errno (-ECONNRESET
 * when the client hung up while the app was silent). */
static ssize_t recv_some(const struct proxy *p, char *out, size_t max)
{
	for (;;) {
		ssize_t n = recv(p->fd, out, max, 0);
		if (n > 0)
			metrics_add(METRIC_PROXY_RECEIVED, (size_t)n);
		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		int r = wait_fd(p->fd, POLLIN, p->client, PROXY_IDLE_MS);
		if (r <= 0)
			return r ? r : -ETIMEDOUT;
	}
}

/* ---- the request to the app ---- */

struct head {
	char *text;
	size_t len, cap;
	bool too_long;
};

static void head_add(struct head *h, const char *a, const char *b, const char *c)
{
	const char *parts[] = {a, b, c};
	for (size_t i = 0; i < 3; i++) {
		size_t n = parts[i] ? strlen(parts[i]) : 0;
		if (h->too_long || h->len + n + 1 > PROXY_HEAD_MAX) {
			h->too_long = true;
			return;
		}
		memcpy(h->text + h->len, parts[i], n);
		h->len += n;
	}
	h->text[h->len] = '\0';
}

static bool hop_by_hop(const char *name)
{
	static const char *const names[] = {"Connection",      "Keep-Alive",	    "TE",
					    "Trailer",	       "Transfer-Encoding", "Upgrade",
					    "Proxy-Connection"};
	if (!strncasecmp(name, "Proxy-", 6))
		return true;
	for (size_t i = 0; i < CELL_ARRAY_SIZE(names); i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

/* Whether name is one of the tokens of a Connection header's value list. */
static bool in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; *p;) {
		p += strspn(p, " \t,");
		size_t t = strcspn(p, " \t,");
		if (t == n && !strncasecmp(p, name, n))
			return true;
		p += t;
	}
	return false;
}

struct head_walk {
	struct head *h;
	char connection[1024]; /* every Connection value, joined */
	bool chunked_up;
	char xff[1024]; /* the client's X-Forwarded-For values, joined */
};

static bool collect_connection(void *cls, const char *name, const char *value)
{
	struct head_walk *w = cls;
	if (!strcasecmp(name, "Connection")) {
		size_t used = strlen(w->connection);
		snprintf(w->connection + used, sizeof(w->connection) - used, ",%s", value);
	}
	return true;
}

/* No CR or LF may reach the app inside a header (one more header, a second request). */
static bool one_line(const char *s)
{
	return !strpbrk(s, "\r\n");
}

static bool pass_header(void *cls, const char *name, const char *value)
{
	struct head_walk *w = cls;
	if (!one_line(name) || !one_line(value) || hop_by_hop(name) || in_list(w->connection, name))
		return true;
	/* celld's credentials, every listener's, are never the app's: their headers go, and
	 * the preview cookie leaves the app's own cookies. */
	char *rest;
	enum proxyhead_verdict v = proxyhead_request(name, value, &rest);
	if (v != PROXYHEAD_PASS) {
		if (v == PROXYHEAD_REWRITE) {
			head_add(w->h, name, ": ", rest);
			head_add(w->h, "\r\n", NULL, NULL);
		}
		free(rest);
		return true;
	}
	/* Set by the proxy below (Expect: the client's "100 Continue" came from celld). */
	if (!strcasecmp(name, "Host") || !strcasecmp(name, "Expect") ||
	    !strcasecmp(name, "X-Forwarded-Proto") || !strcasecmp(name, "X-Forwarded-Host") ||
	    !strcasecmp(name, "X-Forwarded-Prefix"))
		return true;
	if (!strcasecmp(name, "X-Forwarded-For")) {
		size_t used = strlen(w->xff);
		snprintf(w->xff + used, sizeof(w->xff) - used, "%s%s", used ? ", " : "", value);
		return true;
	}
	if (w->chunked_up && !strcasecmp(name, "Content-Length"))
		return true;
	head_add(w->h, name, ": ", value);
	head_add(w->h, "\r\n", NULL, NULL);
	return true;
}

/* The client's address for X-Forwarded-For: "" when it has none (the Unix socket). */
static void client_addr(struct http_req *r, char *out, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	out[0] = '\0';
	int fd = http_socket(r);
	if (!http_is_tcp(r) || fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return;
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, size);
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, out, size);
}

/* The raw path split at the end of ".../proxy/{port}": *prefix_len bytes of it, and the
 * rest (the app's path, "" for none). */
static const char *split_path(const char *raw, size_t *prefix_len)
{
	/* /v1 is optional: the router drops a first segment that decodes to it. */
	char first[8] = "";
	size_t n = strcspn(raw + 1, "/");
	if (n < sizeof(first)) {
		memcpy(first, raw + 1, n);
		first[n] = '\0';
		if (url_unescape(first, false) < 0)
			first[0] = '\0';
	}
	unsigned skip = !strcmp(first, "v1") ? 5 : 4;
	const char *p = raw;
	for (unsigned i = 0; i < skip && *p; i++)
		p = strchr(p + 1, '/') ? strchr(p + 1, '/') : p + strlen(p);
	*prefix_len = (size_t)(p - raw);
	return p;
}

/* The path the client sees the app under, ".../proxy/{port}" as it sent it, into out
 * (ROUTER_PATH_MAX bytes): out, or NULL when the request came by a host of the app's own (a
 * preview host, E2B's port headers) and the app is at its own "/". */
static const char *route_prefix(struct http_req *r, char *out)
{
	size_t prefix_len;
	split_path(http_raw_path(r), &prefix_len);
	snprintf(out, ROUTER_PATH_MAX, "%.*s", (int)prefix_len, http_raw_path(r));
	return http_rerouted(r) ? NULL : out;
}

/* Whether the app's request target may be sent as it is: no blank or control byte (the
 * request line is split on blanks). */
static bool target_ok(const char *s)
{
	for (; s && *s; s++)
		if ((unsigned char)*s <= 0x20 || *s == 0x7f)
			return false;
	return true;
}

static int send_head(struct http_req *r, struct proxy *p)
{
	struct head h = {.text = malloc(PROXY_HEAD_MAX)};
	if (!h.text)
		return -ENOMEM;
	size_t prefix_len;
	const char *raw = http_raw_path(r);
	const char *rest = split_path(raw, &prefix_len);
	const char *query = http_raw_query(r);
	head_add(&h, http_method(r), " ", rest[0] ? rest : "/");
	if (query)
		head_add(&h, "?", query, NULL);
	head_add(&h, " HTTP/1.1\r\n", NULL, NULL);
	const char *host = http_header(r, "Host");
	if (host && !one_line(host))
		host = NULL;
	char port_host[32];
	snprintf(port_host, sizeof(port_host), "127.0.0.1:%u", p->port);
	head_add(&h, "Host: ", host && host[0] ? host : port_host, "\r\n");
	struct head_walk w = {.h = &h};
	w.chunked_up = p->chunked_up;
	http_headers_each(r, collect_connection, &w);
	http_headers_each(r, pass_header, &w);
	char addr[INET6_ADDRSTRLEN];
	client_addr(r, addr, sizeof(addr));
	if (w.xff[0] || addr[0]) {
		head_add(&h, "X-Forwarded-For: ", w.xff[0] ? w.xff : addr, NULL);
		head_add(&h, w.xff[0] && addr[0] ? ", " : "", w.xff[0] ? addr : "", "\r\n");
	}
	head_add(&h, "X-Forwarded-Proto: http\r\n", NULL, NULL);
	if (host && host[0])
		head_add(&h, "X-Forwarded-Host: ", host, "\r\n");
	char prefix[ROUTER_PATH_MAX];
	if (route_prefix(r, prefix))
		head_add(&h, "X-Forwarded-Prefix: ", prefix, "\r\n");
	if (p->chunked_up)
		head_add(&h, "Transfer-Encoding: chunked\r\n", NULL, NULL);
	if (p->upgrade)
		head_add(&h, "Upgrade: ", http_header(r, "Upgrade"),
			 "\r\nConnection: Upgrade\r\n\r\n");
	else
		head_add(&h, "Connection: close\r\n\r\n", NULL, NULL);
	int rc = h.too_long ? -E2BIG : send_all(p->fd, h.text, h.len);
	free(h.text);
	return rc;
}

/* ---- the answer from the app ---- */

/* Read until buf[pos, len) holds a '\n': its offset, or -errno (-EPIPE when the app closed
 * first, -E2BIG past bound bytes of line, or past the buffer). compact: what is before pos
 * may go (a body's chunk lines); else it stays where it is (an answer's head, whose lines
 * are used in place). */
static ssize_t fill_line(struct proxy *p, size_t bound, bool compact)
{
	for (;;) {
		char *nl = memchr(p->buf + p->pos, '\n', p->len - p->pos);
		if (nl)
			return nl - p->buf;
		if (p->len - p->pos >= bound)
			return -E2BIG;
		if (compact && p->pos) {
			memmove(p->buf, p->buf + p->pos, p->len - p->pos);
			p->len -= p->pos;
			p->pos = 0;
		}
		if (p->len >= PROXY_HEAD_MAX)
			return -E2BIG;
		ssize_t n = recv_some(p, p->buf + p->len, PROXY_HEAD_MAX - p->len);
		if (n <= 0)
			return n ? n : -EPIPE;
		p->len += (size_t)n;
	}
}

/* The next line (its CR/LF cut), in place: NULL and *rc on failure. */
static char *next_line(struct proxy *p, size_t bound, bool compact, ssize_t *rc)
{
	ssize_t nl = fill_line(p, bound, compact);
	if (nl < 0) {
		*rc = nl;
		return NULL;
	}
	char *line = p->buf + p->pos;
	p->buf[nl] = '\0';
	if (nl > (ssize_t)p->pos && p->buf[nl - 1] == '\r')
		p->buf[nl - 1] = '\0';
	p->pos = (size_t)nl + 1;
	return line;
}

struct header {
	char *name, *value;
};

struct answer {
	unsigned status;
	struct header h[PROXY_HEADERS_MAX];
	size_t n;
	char connection[1024];
	const char *length, *te;
};

/* Read the answer's head (1xx interim answers are skipped). Lines point into p->buf,
 * which holds the whole head: nothing moves it until the body is read. */
static int read_answer(struct proxy *p, struct answer *a, const char **why)
{
	p->pos = p->len = 0;
	for (;;) {
		*a = (struct answer){0};
		ssize_t rc = 0;
		char *line = next_line(p, PROXY_HEAD_MAX, false, &rc);
		if (!line) {
			*why = rc == -E2BIG ? "an answer head too large" : "no answer";
			return (int)rc;
		}
		unsigned major, minor, status;
		if (sscanf(line, "HTTP/%u.%u %3u", &major, &minor, &status) != 3 || major != 1 ||
		    status < 100 || status > 599) {
			*why = "an answer that is not HTTP/1";
			return -EPROTO;
		}
		a->status = status;
		for (;;) {
			line = next_line(p, PROXY_HEAD_MAX, false, &rc);
			if (!line) {
				*why = rc == -E2BIG ? "an answer head too large"
						    : "an answer cut short";
				return (int)rc;
			}
			if (!line[0])
				break;
			char *colon = strchr(line, ':');
			if (!colon || colon == line || a->n == PROXY_HEADERS_MAX) {
				*why = colon ? "too many headers" : "a malformed header";
				return -EPROTO;
			}
			*colon = '\0';
			char *v = colon + 1;
			v += strspn(v, " \t");
			size_t vl = strlen(v);
			while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				v[--vl] = '\0';
			if (!strcasecmp(line, "Connection")) {
				size_t used = strlen(a->connection);
				snprintf(a->connection + used, sizeof(a->connection) - used, ",%s",
					 v);
			} else if (!strcasecmp(line, "Content-Length")) {
				a->length = v;
			} else if (!strcasecmp(line, "Transfer-Encoding")) {
				a->te = v;
			}
			a->h[a->n++] = (struct header){line, v};
		}
		if (status == 101 && !p->upgrade) {
			*why = "a protocol switch the request did not ask for";
			return -EPROTO;
		}
		if (status >= 200 || status == 101)
			return 0;
		/* An interim answer (100 Continue, 103): dropped, the next one read. */
		memmove(p->buf, p->buf + p->pos, p->len - p->pos);
		p->len -= p->pos;
		p->pos = 0;
	}
}

/* Up to max bytes of the body as it is sent: from what was read already, then the
 * socket. 0 at the app's end. */
static ssize_t take(struct proxy *p, char *out, size_t max)
{
	if (p->pos < p->len) {
		size_t n = p->len - p->pos < max ? p->len - p->pos : max;
		memcpy(out, p->buf + p->pos, n);
		p->pos += n;
		return (ssize_t)n;
	}
	return recv_some(p, out, max);
}

static ssize_t read_chunked(struct proxy *p, char *out, size_t max)
{
	ssize_t rc = 0;
	for (;;) {
		switch (p->chunk) {
		case CHUNK_SIZE: {
			char *line = next_line(p, PROXY_LINE_MAX, true, &rc);
			if (!line)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			char *end;
			errno = 0;
			unsigned long long size = strtoull(line, &end, 16);
			if (end == line || errno ||
			    (*end && *end != ';' && *end != ' ' && *end != '\t'))
				return MHD_CONTENT_READER_END_WITH_ERROR;
			p->left = size;
			p->chunk = size ? CHUNK_DATA : CHUNK_DONE;
			break;
		}
		case CHUNK_DATA: {
			ssize_t n = take(p, out, p->left < max ? (size_t)p->left : max);
			if (n <= 0)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			p->left -= (uint64_t)n;
			if (!p->left)
				p->chunk = CHUNK_CRLF;
			return n;
		}
		case CHUNK_CRLF: {
			char *line = next_line(p, PROXY_LINE_MAX, true, &rc);
			if (!line || line[0])
				return MHD_CONTENT_READER_END_WITH_ERROR;
			p->chunk = CHUNK_SIZE;
			break;
		}
		case CHUNK_DONE: {
			/* Trailers, dropped, up to the empty line. */
			char *line = next_line(p, PROXY_LINE_MAX, true, &rc);
			if (!line)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			if (!line[0])
				return MHD_CONTENT_READER_END_OF_STREAM;
			break;
		}
		}
	}
}

static ssize_t read_body(void *cls, uint64_t pos, char *out, size_t max)
{
	(void)pos;
	struct proxy *p = cls;
	ssize_t n;
	switch (p->body) {
	case BODY_NONE:
		return MHD_CONTENT_READER_END_OF_STREAM;
	case BODY_LENGTH:
		if (!p->left)
			return MHD_CONTENT_READER_END_OF_STREAM;
		n = take(p, out, p->left < max ? (size_t)p->left : max);
		if (n <= 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		p->left -= (uint64_t)n;
		return n;
	case BODY_CHUNKED:
		return read_chunked(p, out, max);
	case BODY_CLOSE:
		n = take(p, out, max);
		if (n < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		return n ? n : MHD_CONTENT_READER_END_OF_STREAM;
	}
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* ---- the route ---- */

static bool chunked_value(const char *te)
{
	return te && in_list(te, "chunked");
}

/* Connection: Upgrade and an Upgrade header: the client asks for a protocol switch. */
static bool wants_upgrade(struct http_req *r)
{
	const char *upgrade = http_header(r, "Upgrade");
	if (!upgrade || !upgrade[0] || !one_line(upgrade))
		return false;
	struct head_walk w = {0};
	http_headers_each(r, collect_connection, &w);
	return in_list(w.connection, "Upgrade");
}

int api_proxy_begin(struct http_req *r)
{
	int64_t port;
	if (parse_int64(http_param(r, 1), 1, 65535, &port) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "port '%.16s' must be a number between 1 and 65535",
				  http_param(r, 1));
	/* execd's and the egress sidecar's ports keep their own routes: a path neither has
	 * is what it was before the proxy, an unknown endpoint. */
	if (port == PORT_EXECD || port == PORT_EGRESS)
		return http_error(r, 404, "NOT_FOUND", "no such endpoint");
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	/* A preview token in the query: answered by a redirect that sets its cookie. */
	if (api_preview_begin(r, sb->id, (unsigned)port)) {
		sandbox_unref(sb);
		return 0;
	}
	struct proxy *p = calloc(1, sizeof(*p));
	if (!p) {
		sandbox_unref(sb);
		return http_no_memory(r);
	}
	p->refs = 1;
	p->sb = sb;
	p->fd = -1;
	p->client = http_socket(r);
	p->port = (unsigned)port;
	http_set_state(r, p, proxy_unref);
	p->counted = true;
	unsigned open = __atomic_add_fetch(&sb->proxy_conns, 1, __ATOMIC_RELAXED);
	if (open > celld.proxy_max)
		return http_fail(r, EUSERS, "TOO_MANY_CONNECTIONS",
				 "sandbox %s has %u proxied requests open, the most allowed "
				 "(--proxy-max-connections); try again when one ends",
				 sb->id, celld.proxy_max);
	p->buf = malloc(PROXY_HEAD_MAX + 1);
	if (!p->buf)
		return http_no_memory(r);
	if (!target_ok(http_raw_path(r)) || !target_ok(http_raw_query(r)))
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "the path and query for port %u must not contain blanks or "
				  "control characters",
				  p->port);
	p->chunked_up = http_header(r, "Transfer-Encoding") != NULL;
	p->upgrade = wants_upgrade(r);
	p->head_method = !strcmp(http_method(r), "HEAD");
	struct cell_error err = {0};
	/* The code interpreter's port: a sandbox that just started is given the moment its
	 * service takes to listen (interp_connect), as its client calls right after the
	 * create. */
	p->fd =
	    p->port == INTERP_PORT ? interp_connect(sb, &err) : portconn_open(sb, p->port, &err);
	if (p->fd == -ECONNREFUSED)
		return http_error(r, 502, "PROXY_CONNECT_FAILED",
				  "nothing listens on port %u in sandbox %s (127.0.0.1:%u in its "
				  "network namespace)",
				  p->port, sb->id, p->port);
	if (p->fd == -ETIMEDOUT)
		return http_error(r, 504, "PROXY_TIMEOUT",
				  "port %u in sandbox %s took longer than %d s to accept", p->port,
				  sb->id, PORTCONN_CONNECT_MS / 1000);
	/* No socket or thread to make it: celld's own failure, not the app's. */
	if (p->fd < 0 && errors_host_short(-p->fd))
		return http_internal(r, &err);
	if (p->fd < 0)
		return http_error(r, 502, "PROXY_CONNECT_FAILED", "port %u in sandbox %s: %s",
				  p->port, sb->id, err.msg);
	int rc = send_head(r, p);
	if (rc == -E2BIG)
		return http_error(r, 431, "HEADERS_TOO_LARGE",
				  "the request head for port %u is over %u bytes", p->port,
				  PROXY_HEAD_MAX);
	if (rc < 0 && errors_host_short(-rc))
		return http_fail(r, -rc, NULL, "sending the request to port %u in sandbox %s: %s",
				 p->port, sb->id, strerror(-rc));
	if (rc < 0)
		return http_error(r, 502, "PROXY_SEND_FAILED",
				  "sending the request to port %u in sandbox %s: %s", p->port,
				  sb->id, strerror(-rc));
	return 0;
}

int api_proxy_data(struct http_req *r, const char *data, size_t len)
{
	struct proxy *p = http_state(r);
	if (!p || p->fd < 0 || p->send_failed)
		return 0;
	int rc = 0;
	if (p->chunked_up) {
		char size[24];
		snprintf(size, sizeof(size), "%zx\r\n", len);
		rc = send_all(p->fd, size, strlen(size));
		if (rc == 0)
			rc = send_all(p->fd, data, len);
		if (rc == 0)
			rc = send_all(p->fd, "\r\n", 2);
	} else {
		rc = send_all(p->fd, data, len);
	}
	/* The app may answer without reading the whole body: its answer is still read. */
	if (rc < 0)
		p->send_failed = true;
	return 0;
}

static bool pass_answer_header(const struct answer *a, const char *name)
{
	return !hop_by_hop(name) && !in_list(a->connection, name) &&
	       strcasecmp(name, "Content-Length") && strcasecmp(name, "X-Request-ID");
}

/* The app's headers that go to the client, as name and value pairs into headers
 * (NULL-ended): those pass_answer_header keeps, as proxyhead_answer says (malformed ones
 * dropped, cookies kept to the app's own scope).
 * The values it rewrote are in owned[0, n), for the caller to free once the headers are
 * sent. */
struct answer_out {
	const char *headers[2 * PROXY_HEADERS_MAX + 1];
	char *owned[PROXY_HEADERS_MAX];
	size_t n;
};

static void answer_headers(struct http_req *r, const struct answer *a, struct answer_out *o)
{
	char buf[ROUTER_PATH_MAX];
	const char *prefix = route_prefix(r, buf);
	size_t k = 0;
	o->n = 0;
	for (size_t i = 0; i < a->n; i++) {
		const char *name = a->h[i].name, *value = a->h[i].value;
		char *rewritten;
		if (!strcasecmp(name, "Upgrade") || !pass_answer_header(a, name))
			continue;
		enum proxyhead_verdict v = proxyhead_answer(name, value, prefix, &rewritten);
		if (v == PROXYHEAD_DROP)
			continue;
		if (v == PROXYHEAD_REWRITE)
			value = o->owned[o->n++] = rewritten;
		o->headers[k++] = name;
		o->headers[k++] = value;
	}
	o->headers[k] = NULL;
}

static void answer_out_free(struct answer_out *o)
{
	for (size_t i = 0; i < o->n; i++)
		free(o->owned[i]);
}

/* ---- an upgraded connection: bytes both ways ---- */

static void splice_run(void *cls, int fd, const char *extra, size_t extra_len,
		       struct http_upgrade *handle)
{
	struct proxy *p = cls;
	/* What the client sent after its head goes to the app first, what the app sent after
	 * its 101 head to the client first. */
	struct cell_splice_opts o = {.a_first = extra,
				     .a_first_len = extra_len,
				     .b_first = p->buf + p->pos,
				     .b_first_len = p->len - p->pos,
				     .stop_fd = http_upgrades_stopping_fd(),
				     .idle_ms = PROXY_SPLICE_MS,
				     .moved = metrics_proxy_moved};
	int rc = cell_splice(fd, p->fd, &o);
	if (rc < 0 && rc != -ECANCELED)
		log_debug("upgraded connection to port %u of sandbox %s: %s", p->port, p->sb->id,
			  strerror(-rc));
	proxy_unref(p); /* the app's socket closed, the slot given back */
	http_upgrade_done(handle);
}

/* The app switched protocols: celld's 101 with the app's headers (hop-by-hop ones aside:
 * Upgrade and Connection are celld's), then splice_run once it went out. The request's
 * reference to p passes to the switch. */
static int switch_protocols(struct http_req *r, struct proxy *p, const struct answer *a)
{
	const char *protocol = NULL;
	for (size_t i = 0; i < a->n; i++)
		if (!strcasecmp(a->h[i].name, "Upgrade"))
			protocol = a->h[i].value;
	char *unused;
	if (!protocol || !protocol[0] ||
	    proxyhead_answer("Upgrade", protocol, NULL, &unused) != PROXYHEAD_PASS)
		return http_error(r, 502, "PROXY_BAD_ANSWER",
				  "port %u in sandbox %s switched protocols without a valid "
				  "Upgrade header",
				  p->port, p->sb->id);
	struct answer_out o;
	answer_headers(r, a, &o);
	int rc = http_upgrade_ex(r, protocol, o.headers, splice_run, p, proxy_unref);
	answer_out_free(&o);
	if (rc < 0)
		return http_fail(r, -rc, NULL, "switching protocols: %s", strerror(-rc));
	return 0;
}

int api_proxy(struct http_req *r)
{
	struct proxy *p = http_state(r);
	if (!p || p->fd < 0)
		return http_error(r, 500, "INTERNAL", "proxy state lost");
	if (p->chunked_up && !p->send_failed && send_all(p->fd, "0\r\n\r\n", 5) < 0)
		p->send_failed = true;
	struct answer a;
	const char *why = "";
	int rc = read_answer(p, &a, &why);
	if (rc == -ETIMEDOUT)
		return http_error(r, 504, "PROXY_TIMEOUT",
				  "port %u in sandbox %s sent no answer within %d s", p->port,
				  p->sb->id, PROXY_IDLE_MS / 1000);
	if (rc < 0)
		return http_error(r, 502, "PROXY_BAD_ANSWER", "port %u in sandbox %s sent %s",
				  p->port, p->sb->id, why);
	if (a.status == 101)
		return switch_protocols(r, p, &a);
	uint64_t size = MHD_SIZE_UNKNOWN;
	int64_t length = -1;
	if (a.length && parse_int64(a.length, 0, INT64_MAX, &length) < 0)
		return http_error(r, 502, "PROXY_BAD_ANSWER",
				  "port %u in sandbox %s sent a bad Content-Length", p->port,
				  p->sb->id);
	if (p->head_method || a.status == 204 || a.status == 304) {
		p->body = BODY_NONE;
		if (length >= 0 && p->head_method)
			size = (uint64_t)length;
	} else if (chunked_value(a.te)) {
		p->body = BODY_CHUNKED;
	} else if (a.te) {
		return http_error(r, 502, "PROXY_BAD_ANSWER",
				  "port %u in sandbox %s sent Transfer-Encoding '%.40s'", p->port,
				  p->sb->id, a.te);
	} else if (length >= 0) {
		p->body = BODY_LENGTH;
		p->left = (uint64_t)length;
		size = (uint64_t)length;
	} else {
		p->body = BODY_CLOSE;
	}
	struct MHD_Response *resp;
	if (p->body == BODY_NONE && size == MHD_SIZE_UNKNOWN) {
		resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	} else {
		__atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
		resp =
		    MHD_create_response_from_callback(size, PROXY_BLOCK, read_body, p, proxy_unref);
		if (!resp)
			proxy_unref(p);
	}
	if (!resp)
		return http_no_memory(r);
	struct answer_out o;
	answer_headers(r, &a, &o);
	for (size_t i = 0; o.headers[i]; i += 2)
		MHD_add_response_header(resp, o.headers[i], o.headers[i + 1]);
	answer_out_free(&o);
	return http_respond(r, a.status, resp);
}
