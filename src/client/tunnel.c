/* The TCP tunnel to a port inside a sandbox (cell forward): POST
 * /v1/sandboxes/{id}/ports/{port}/tunnel with "Upgrade: cell-tcp" on a socket of its own.
 * Not through libcurl: after the 101 the connection is no longer HTTP, and a handshake of
 * one request head and one answer head is smaller written out than driven through
 * CURLOPT_CONNECT_ONLY. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "internal.h"

#define TUNNEL_HEAD_MAX (16u << 10)

/* A socket connected to celld (its Unix socket, or the host and port of c->url). */
static int connect_celld(const struct cell_client *c, struct cell_error *err)
{
	if (c->socket) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		if (strlen(c->socket) >= sizeof(sa.sun_path))
			return cell_err(err, ENAMETOOLONG, "celld socket path %s", c->socket);
		strcpy(sa.sun_path, c->socket);
		_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return cell_err(err, errno, "socket");
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			return cell_err(err, errno, "cannot reach celld at %s", c->socket);
		return move_fd(fd);
	}
	char host[256], port[16];
	const char *u = c->url ? c->url : "";
	if (strncmp(u, "http://", 7) || sscanf(u + 7, "%255[^:/]:%15[0-9]", host, port) != 2)
		return cell_err(err, EINVAL, "celld URL '%s': expected http://HOST:PORT", u);
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	int g = getaddrinfo(host, port, &hints, &ai);
	if (g)
		return cell_err(err, EHOSTUNREACH, "celld at %s: %s", u, gai_strerror(g));
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int e = fd < 0 ? errno : 0;
	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		e = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd >= 0 ? fd : cell_err(err, e, "cannot reach celld at %s", u);
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Wait at most ms for fd to be readable: 0, or -ETIMEDOUT / -errno. */
static int wait_readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int r;
	while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	return r < 0 ? -errno : r == 0 ? -ETIMEDOUT : 0;
}

/* The answer's head, taken off the socket exactly: byte by byte, so nothing after it (the
 * app's first bytes) is read. Its length in head (NUL-terminated), or -errno. */
static ssize_t read_head(int fd, char *head, size_t size, int ms)
{
	size_t len = 0;
	while (len < 4 || memcmp(head + len - 4, "\r\n\r\n", 4)) {
		if (len + 1 >= size)
			return -E2BIG;
		int r = wait_readable(fd, ms);
		if (r < 0)
			return r;
		ssize_t n = recv(fd, head + len, 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		len++;
	}
	head[len] = '\0';
	return (ssize_t)len;
}

int cell_client_tunnel(const struct cell_client *c, const char *id, unsigned port,
		       struct cell_error *err)
{
	_cleanup_close_ int fd = connect_celld(c, err);
	if (fd < 0)
		return fd;
	_cleanup_free_ char *req = NULL;
	if (asprintf(&req,
		     "POST /v1/sandboxes/%s/ports/%u/tunnel HTTP/1.1\r\n"
		     "Host: localhost\r\n"
		     "Connection: Upgrade\r\n"
		     "Upgrade: cell-tcp\r\n"
		     "Content-Length: 0\r\n"
		     "%s%s%s"
		     "\r\n",
		     id, port, c->api_key ? CELL_CLIENT_KEY_HEADER ": " : "",
		     c->api_key ? c->api_key : "", c->api_key ? "\r\n" : "") < 0)
		return cell_err(err, ENOMEM, "tunnel request");
	int r = send_all(fd, req, strlen(req));
	if (r < 0)
		return cell_err(err, -r, "sending the tunnel request to celld");
	int ms = c->connect_timeout_s > 0 ? (int)c->connect_timeout_s * 1000 : 10000;
	_cleanup_free_ char *head = malloc(TUNNEL_HEAD_MAX);
	if (!head)
		return cell_err(err, ENOMEM, "tunnel answer");
	ssize_t hl = read_head(fd, head, TUNNEL_HEAD_MAX, ms);
	if (hl < 0)
		return cell_err(err, (int)-hl, "tunnel to port %u of %s: reading celld's answer",
				port, id);
	long status = 0;
	if (sscanf(head, "HTTP/1.%*u %ld", &status) != 1)
		return cell_err_msg(err, EPROTO, "tunnel to port %u of %s: not an HTTP answer",
				    port, id);
	if (status == 101)
		return move_fd(fd);
	/* An error: its body (bounded by Content-Length) names why. */
	struct cell_client_buf body = {0};
	const char *cl = strcasestr(head, "\r\nContent-Length:");
	long want = cl ? strtol(cl + 17, NULL, 10) : 0;
	if (want < 0 || want > (long)CELL_CLIENT_ERRBODY_MAX)
		want = CELL_CLIENT_ERRBODY_MAX;
	char buf[4096];
	while ((long)body.len < want && wait_readable(fd, ms) == 0) {
		size_t room = (size_t)want - body.len;
		ssize_t n = recv(fd, buf, room < sizeof(buf) ? room : sizeof(buf), 0);
		if (n <= 0 ||
		    cell_client_buf_append(&body, buf, (size_t)n, CELL_CLIENT_ERRBODY_MAX) < 0)
			break;
	}
	char what[96];
	snprintf(what, sizeof(what), "tunnel to port %u of %s", port, id);
	r = cell_client_status_error(status, &body, what, NULL, 0, err);
	cell_client_buf_free(&body);
	return r;
}
