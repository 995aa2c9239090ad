/* Input for a process: bytes a client sends (STDIN frames) written to a non-blocking fd (a
 * pipe to the command's stdin, a PTY's master) through the epoll loop, never blocking PID 1.
 *
 * What the process has not taken yet waits in a buffer of at most FEED_MAX bytes; a client
 * that sends more than that gets -ENOBUFS (its connection is then dropped by the caller).
 * When the reader is gone (EPIPE, a hang-up), input is dropped silently. Every byte the fd
 * took, or that was dropped, is reported to taken (when set): the client's window. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "watch.h"

#define FEED_MAX (1u << 20)

struct feed {
	struct init_watch w; /* fd -1 when closed */
	unsigned char *buf;
	size_t len, off;
	bool closing; /* close the fd once the buffer is written */
	void (*taken)(struct feed *f, size_t n);
};

/* Take fd (made non-blocking here) and watch it; fd < 0 leaves f closed. 0 or -errno (fd
 * closed then). */
int feed_open(struct feed *f, int fd);
bool feed_is_open(const struct feed *f);
/* Queue bytes and write what the fd takes now: 0, -ENOBUFS when more than FEED_MAX would
 * wait, -EPIPE when closed (dropped). */
int feed_write(struct feed *f, const void *data, size_t len);
/* Report n bytes as taken (written, or dropped by the caller). */
void feed_taken(struct feed *f, size_t n);
/* Close once what waits has been written (STDIN_CLOSE). */
void feed_close(struct feed *f);
/* Close now, dropping what waits. */
void feed_drop(struct feed *f);
