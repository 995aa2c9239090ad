/* Two sockets joined both ways (cell/splice.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cell/splice.h"

#define SPLICE_BLOCK (64u << 10)

/* One direction: what was read from `from` and not yet written to `to`. */
struct dir {
	int from, to;
	char *buf;
	size_t pos, len;
	bool eof;  /* from ended */
	bool done; /* and all of it went to `to`, now shut for writing */
};

/* Move what can move without blocking: -errno when a connection failed. */
static int pump(struct dir *d, short from_events)
{
	if (d->len == d->pos && !d->eof && (from_events & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t n = recv(d->from, d->buf, SPLICE_BLOCK, MSG_DONTWAIT);
		if (n > 0) {
			d->pos = 0;
			d->len = (size_t)n;
		} else if (n == 0) {
			d->eof = true;
		} else if (errno != EAGAIN && errno != EINTR) {
			return -errno;
		}
	}
	if (d->len > d->pos) {
		ssize_t n =
		    send(d->to, d->buf + d->pos, d->len - d->pos, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0)
			d->pos += (size_t)n;
		else if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
	}
	if (d->eof && d->len == d->pos && !d->done) {
		shutdown(d->to, SHUT_WR);
		d->done = true;
	}
	return 0;
}

static void nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int cell_splice(int a, int b, const char *first, size_t first_len)
{
	char *bufs = malloc(2 * SPLICE_BLOCK);
	if (!bufs)
		return -ENOMEM;
	nonblocking(a);
	nonblocking(b);
	struct dir d[2] = {{.from = a, .to = b, .buf = bufs},
			   {.from = b, .to = a, .buf = bufs + SPLICE_BLOCK}};
	int rc = 0;
	/* first goes out before anything else, block by block through d[0]'s buffer. */
	while (!rc && first_len) {
		size_t n = first_len < SPLICE_BLOCK ? first_len : SPLICE_BLOCK;
		memcpy(d[0].buf, first, n);
		d[0].pos = 0;
		d[0].len = n;
		first += n;
		first_len -= n;
		while (!rc && d[0].pos < d[0].len) {
			struct pollfd p = {.fd = b, .events = POLLOUT};
			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				rc = -errno;
			else if (p.revents & (POLLERR | POLLHUP))
				rc = -EPIPE;
			else
				rc = pump(&d[0], 0);
		}
	}
	while (!rc && !(d[0].done && d[1].done)) {
		struct pollfd p[2] = {{.fd = a}, {.fd = b}};
		if (d[0].len == d[0].pos && !d[0].eof)
			p[0].events |= POLLIN;
		if (d[0].len > d[0].pos)
			p[1].events |= POLLOUT;
		if (d[1].len == d[1].pos && !d[1].eof)
			p[1].events |= POLLIN;
		if (d[1].len > d[1].pos)
			p[0].events |= POLLOUT;
		if (poll(p, 2, -1) < 0) {
			if (errno != EINTR)
				rc = -errno;
			continue;
		}
		if ((p[0].revents | p[1].revents) & POLLERR) {
			rc = -ECONNRESET;
			break;
		}
		rc = pump(&d[0], p[0].revents);
		if (!rc)
			rc = pump(&d[1], p[1].revents);
		/* A peer gone both ways while there is still something to give it. */
		if (!rc && (((p[0].revents & POLLHUP) && d[1].len > d[1].pos) ||
			    ((p[1].revents & POLLHUP) && d[0].len > d[0].pos)))
			rc = -EPIPE;
	}
	free(bufs);
	return rc;
}
