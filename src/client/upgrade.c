/* Connection upgrade: a request answered with 101 Switching Protocols leaves a raw byte
 * stream (a WebSocket, a TCP tunnel). libcurl makes the connection (Unix socket, TCP or
 * TLS, proxies as configured) with CONNECT_ONLY; the request head is written and the
 * answer's head read here, since libcurl of this vintage hands over no upgraded stream. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cell/cleanup.h"
#include "internal.h"

#define HEAD_MAX (16u << 10) /* the answer's head, at most */
#define BODY_MAX (64u << 10) /* a refusal's body kept for its message, at most */

struct cell_client_upgraded {
	CURL *h; /* the client's handle, now this stream's */
	curl_socket_t fd;
	char *pending; /* bytes after the answer's head, handed out first */
	size_t pending_len, pending_off;
};

/* Wait until fd is ready for events (POLLIN/POLLOUT), up to ms (-1: forever). */
static int wait_fd(curl_socket_t fd, short events, int ms)
{
	struct pollfd p = {.fd = fd, .events = events};
	int n;
	do
		n = poll(&p, 1, ms);
	while (n < 0 && errno == EINTR);
	return n > 0 ? 0 : n == 0 ? -ETIMEDOUT : -errno;
}

ssize_t cell_client_upgraded_send(struct cell_client_upgraded *u, const void *data, size_t len)
{
	size_t sent = 0;
	CURLcode rc = curl_easy_send(u->h, data, len, &sent);
	if (rc == CURLE_AGAIN)
		return -EAGAIN;
	if (rc != CURLE_OK)
		return -EPIPE;
	return (ssize_t)sent;
}

ssize_t cell_client_upgraded_recv(struct cell_client_upgraded *u, void *buf, size_t len)
{
	if (u->pending_off < u->pending_len) {
		size_t n = u->pending_len - u->pending_off;
		if (n > len)
			n = len;
		memcpy(buf, u->pending + u->pending_off, n);
		u->pending_off += n;
		return (ssize_t)n;
	}
	size_t got = 0;
	CURLcode rc = curl_easy_recv(u->h, buf, len, &got);
	if (rc == CURLE_AGAIN)
		return -EAGAIN;
	if (rc != CURLE_OK)
		return -ECONNRESET;
	return (ssize_t)got; /* 0: the peer closed */
}

bool cell_client_upgraded_buffered(const struct cell_client_upgraded *u)
{
	return u->pending_off < u->pending_len;
}

int cell_client_upgraded_fd(const struct cell_client_upgraded *u)
{
	return (int)u->fd;
}

void cell_client_upgraded_free(struct cell_client_upgraded *u)
{
	if (!u)
		return;
	free(u->pending);
	free(u);
}

/* Write all of data, waiting for the socket when it is full (a bounded wait). */
static int send_all(struct cell_client_upgraded *u, const char *data, size_t len)
{
	while (len) {
		ssize_t n = cell_client_upgraded_send(u, data, len);
		if (n == -EAGAIN) {
			int rc = wait_fd(u->fd, POLLOUT, 30000);
			if (rc < 0)
				return rc;
			continue;
		}
		if (n < 0)
			return (int)n;
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

static char *request_head(struct cell_client *c, const char *method, const char *path,
			  const char *protocol, const char *const *headers)
{
	struct cell_client_buf b = {0};
	char *line = NULL;
	int rc =
	    asprintf(&line, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: %s\r\n",
		     method, path, c->socket ? "localhost" : "celld", protocol);
	if (rc < 0)
		return NULL;
	rc = cell_client_buf_append(&b, line, strlen(line), HEAD_MAX);
	free(line);
	if (rc == 0 && c->api_key) {
		const char *k = CELL_CLIENT_KEY_HEADER ": ";
		rc = cell_client_buf_append(&b, k, strlen(k), HEAD_MAX);
		if (rc == 0)
			rc = cell_client_buf_append(&b, c->api_key, strlen(c->api_key), HEAD_MAX);
		if (rc == 0)
			rc = cell_client_buf_append(&b, "\r\n", 2, HEAD_MAX);
	}
	for (size_t i = 0; rc == 0 && headers && headers[i]; i++) {
		rc = cell_client_buf_append(&b, headers[i], strlen(headers[i]), HEAD_MAX);
		if (rc == 0)
			rc = cell_client_buf_append(&b, "\r\n", 2, HEAD_MAX);
	}
	if (rc == 0)
		rc = cell_client_buf_append(&b, "\r\n", 2, HEAD_MAX);
	if (rc < 0) {
		cell_client_buf_free(&b);
		return NULL;
	}
	return b.data;
}

/* Read until the end of the answer's head; what follows it stays in u->pending. */
static int read_head(struct cell_client_upgraded *u, struct cell_client_buf *in, size_t *head_len)
{
	for (;;) {
		char *end = in->data ? strstr(in->data, "\r\n\r\n") : NULL;
		if (end) {
			*head_len = (size_t)(end - in->data) + 4;
			return 0;
		}
		if (in->len >= HEAD_MAX)
			return -EMSGSIZE;
		char buf[4096];
		ssize_t n = cell_client_upgraded_recv(u, buf, sizeof(buf));
		if (n == -EAGAIN) {
			int rc = wait_fd(u->fd, POLLIN, 30000);
			if (rc < 0)
				return rc;
			continue;
		}
		if (n <= 0)
			return n == 0 ? -ECONNRESET : (int)n;
		int rc = cell_client_buf_append(in, buf, (size_t)n, HEAD_MAX + sizeof(buf));
		if (rc < 0)
			return rc;
	}
}

char *cell_client_head_header(const char *head, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
		if (strncasecmp(p + 2, name, n) || p[2 + n] != ':')
			continue;
		const char *v = p + 3 + n, *e = strstr(v, "\r\n");
		while (*v == ' ' || *v == '\t')
			v++;
		size_t len = e ? (size_t)(e - v) : strlen(v);
		while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
			len--;
		return strndup(v, len);
	}
	return NULL;
}

static long long head_content_length(const char *head)
{
	_cleanup_free_ char *v = cell_client_head_header(head, "Content-Length");
	return v ? strtoll(v, NULL, 10) : -1;
}

/* A refusal: its body (up to its Content-Length or BODY_MAX, or what came before the
 * close) for the error message. */
static void read_body(struct cell_client_upgraded *u, struct cell_client_buf *body, long long len)
{
	char buf[4096];
	while (body->len < BODY_MAX && (len < 0 || (long long)body->len < len)) {
		ssize_t n = cell_client_upgraded_recv(u, buf, sizeof(buf));
		if (n == -EAGAIN) {
			if (wait_fd(u->fd, POLLIN, 10000) < 0)
				return;
			continue;
		}
		if (n <= 0 || cell_client_buf_append(body, buf, (size_t)n, BODY_MAX) < 0)
			return;
	}
}

int cell_client_upgrade(struct cell_client *c, const char *method, const char *path,
			const char *protocol, const char *const *headers, const char *what,
			struct cell_client_upgraded **out, char **head, struct cell_error *err)
{
	*out = NULL;
	if (head)
		*head = NULL;
	CURL *h = cell_client_begin(c, path, err);
	if (!h)
		return -(err && err->code ? err->code : EINVAL);
	curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 1L);
	CURLcode crc = cell_client_perform(c, false);
	if (crc != CURLE_OK)
		return cell_client_transport_error(c, crc, what, err);
	struct cell_client_upgraded *u = calloc(1, sizeof(*u));
	if (!u)
		return cell_err(err, ENOMEM, "%s", what), -ENOMEM;
	u->h = h;
	if (curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &u->fd) != CURLE_OK ||
	    u->fd == CURL_SOCKET_BAD) {
		free(u);
		return cell_err_msg(err, EIO, "%s: no connection to celld", what), -EIO;
	}
	_cleanup_free_ char *req = request_head(c, method, path, protocol, headers);
	struct cell_client_buf in = {0};
	size_t head_len = 0;
	int rc = req ? send_all(u, req, strlen(req)) : -ENOMEM;
	if (rc == 0)
		rc = read_head(u, &in, &head_len);
	if (rc < 0) {
		cell_client_buf_free(&in);
		cell_client_upgraded_free(u);
		cell_client_close(c);
		return cell_err(err, -rc, "%s: upgrading the connection to celld at %s", what,
				cell_client_endpoint(c)),
		       rc;
	}
	long status = 0;
	if (sscanf(in.data, "HTTP/1.%*d %ld", &status) != 1)
		status = 0;
	in.data[head_len - 2] = '\0'; /* the head alone, ending with its last "\r\n" */
	u->pending_len = in.len - head_len;
	if (status != 101) {
		struct cell_client_buf body = {0};
		cell_client_buf_append(&body, in.data + head_len, in.len - head_len, BODY_MAX);
		long long clen = head_content_length(in.data);
		u->pending_len = 0;
		read_body(u, &body, clen);
		cell_client_buf_free(&in);
		cell_client_upgraded_free(u);
		cell_client_close(c);
		rc = cell_client_status_error(status, &body, what, NULL, 0, err);
		cell_client_buf_free(&body);
		return rc < 0 ? rc : -EPROTO;
	}
	if (head && !(*head = strdup(in.data))) {
		cell_client_buf_free(&in);
		cell_client_upgraded_free(u);
		cell_client_close(c);
		return cell_err(err, ENOMEM, "%s", what), -ENOMEM;
	}
	if (u->pending_len) {
		memmove(in.data, in.data + head_len, u->pending_len);
		u->pending = in.data;
	} else {
		free(in.data);
	}
	*out = u;
	return 0;
}
