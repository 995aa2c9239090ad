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
	char *buf, *block; /* what is being sent; its own SPLICE_BLOCK */
	size_t pos, len;
	bool eof;  /* from ended */
	bool done; /* and all of it went to `to`, now shut for writing */
	bool own;  /* buf is a block of its own (a first piece larger than SPLICE_BLOCK) */
	bool to_b; /* the direction from a to b */
	void (*moved)(bool to_b, size_t n);
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
		if (n > 0 && d->moved)
			d->moved(d->to_b, (size_t)n);
		if (n > 0)
			d->pos += (size_t)n;
		else if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
	}
	if (d->own && d->len == d->pos) {
		free(d->buf);
		d->buf = d->block;
		d->own = false;
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

/* Queue first (len bytes) into d's buffer (grown to hold it): it goes out before what d
 * reads. */
static int queue_first(struct dir *d, const char *first, size_t len)
{
	if (!len)
		return 0;
	if (len > SPLICE_BLOCK) {
		char *big = malloc(len);
		if (!big)
			return -ENOMEM;
		d->buf = big;
		d->own = true;
	}
	memcpy(d->buf, first, len);
	d->pos = 0;
	d->len = len;
	return 0;
}

/* poll's events for the two sockets this round, from what each direction wants. */
static void want(const struct dir d[2], struct pollfd p[2])
{
	for (int i = 0; i < 2; i++) {
		if (d[i].len == d[i].pos && !d[i].eof)
			p[i].events |= POLLIN;
		if (d[i].len > d[i].pos)
			p[1 - i].events |= POLLOUT;
	}
}

int cell_splice(int a, int b, const struct cell_splice_opts *o)
{
	static const struct cell_splice_opts none = {.stop_fd = -1};
	if (!o)
		o = &none;
	char *bufs = malloc(2 * SPLICE_BLOCK);
	if (!bufs)
		return -ENOMEM;
	nonblocking(a);
	nonblocking(b);
	struct dir d[2] = {
	    {.from = a, .to = b, .buf = bufs, .block = bufs, .to_b = true, .moved = o->moved},
	    {.from = b,
	     .to = a,
	     .buf = bufs + SPLICE_BLOCK,
	     .block = bufs + SPLICE_BLOCK,
	     .moved = o->moved}};
	int rc = queue_first(&d[0], o->a_first, o->a_first_len);
	if (!rc)
		rc = queue_first(&d[1], o->b_first, o->b_first_len);
	while (!rc && !(d[0].done && d[1].done)) {
		struct pollfd p[3] = {{.fd = a}, {.fd = b}, {.fd = o->stop_fd, .events = POLLIN}};
		want(d, p);
		int n = poll(p, 3, o->idle_ms > 0 ? o->idle_ms : -1);
		if (n < 0) {
			if (errno != EINTR)
				rc = -errno;
			continue;
		}
		if (n == 0) {
			rc = -ETIMEDOUT;
			break;
		}
		if (p[2].revents) {
			rc = -ECANCELED;
			break;
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
	for (int i = 0; i < 2; i++)
		if (d[i].own)
			free(d[i].buf);
	free(bufs);
	return rc;
}
