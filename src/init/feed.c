/* Input for a process through the epoll loop (feed.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "feed.h"
#include "watch.h"

void feed_taken(struct feed *f, size_t n)
{
	if (n && f->taken)
		f->taken(f, n);
}

bool feed_is_open(const struct feed *f)
{
	return f->w.fd >= 0 && !f->closing;
}

void feed_drop(struct feed *f)
{
	size_t dropped = f->len - f->off;
	if (f->w.fd >= 0) {
		init_watch_del(&f->w);
		close(f->w.fd);
		f->w.fd = -1;
	}
	free(f->buf);
	f->buf = NULL;
	f->len = f->off = 0;
	f->closing = false;
	feed_taken(f, dropped);
}

/* Write what waits; the watch wants EPOLLOUT only while something does. */
static void feed_flush(struct feed *f)
{
	while (f->w.fd >= 0 && f->off < f->len) {
		ssize_t n = write(f->w.fd, f->buf + f->off, f->len - f->off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			init_watch_mod(&f->w, EPOLLOUT);
			return;
		}
		if (n < 0) {
			feed_drop(f); /* EPIPE, EIO: nobody reads any more */
			return;
		}
		f->off += (size_t)n;
		feed_taken(f, (size_t)n);
	}
	free(f->buf);
	f->buf = NULL;
	f->len = f->off = 0;
	if (f->w.fd < 0)
		return;
	if (f->closing)
		feed_drop(f);
	else
		init_watch_mod(&f->w, 0);
}

static void feed_event(struct init_watch *w, uint32_t events)
{
	struct feed *f = init_container_of(w, struct feed, w);
	/* Reported whatever the mask: the read end is closed (a pipe), or the terminal hung
	 * up (a PTY's master). Nobody will read what waits. */
	if (events & (EPOLLERR | EPOLLHUP))
		feed_drop(f);
	else
		feed_flush(f);
}

int feed_open(struct feed *f, int fd)
{
	*f = (struct feed){.w = {.fn = feed_event, .fd = -1}, .taken = f->taken};
	if (fd < 0)
		return 0;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	f->w.fd = fd;
	int r = init_watch_add(&f->w, 0);
	if (r < 0) {
		close(fd);
		f->w.fd = -1;
	}
	return r;
}

int feed_write(struct feed *f, const void *data, size_t len)
{
	if (f->w.fd < 0 || f->closing) {
		feed_taken(f, len); /* dropped: nobody reads it */
		return -EPIPE;
	}
	if (!len)
		return 0;
	size_t waiting = f->len - f->off;
	if (waiting + len > FEED_MAX)
		return -ENOBUFS;
	if (!waiting) {
		/* Nothing queued: straight to the fd, the rest (if any) into the buffer. */
		ssize_t n;
		do
			n = write(f->w.fd, data, len);
		while (n < 0 && errno == EINTR);
		if (n < 0 && errno != EAGAIN) {
			feed_drop(f);
			feed_taken(f, len);
			return -EPIPE;
		}
		if (n > 0) {
			data = (const unsigned char *)data + n;
			len -= (size_t)n;
			feed_taken(f, (size_t)n);
		}
		if (!len)
			return 0;
		free(f->buf);
		f->buf = NULL;
		f->len = f->off = 0;
	}
	if (f->off) {
		memmove(f->buf, f->buf + f->off, waiting);
		f->len = waiting;
		f->off = 0;
	}
	unsigned char *nb = realloc(f->buf, f->len + len);
	if (!nb)
		return -ENOBUFS;
	memcpy(nb + f->len, data, len);
	f->buf = nb;
	f->len += len;
	init_watch_mod(&f->w, EPOLLOUT);
	return 0;
}

void feed_close(struct feed *f)
{
	if (f->w.fd < 0 || f->closing)
		return;
	f->closing = true;
	if (f->off >= f->len)
		feed_drop(f);
}
