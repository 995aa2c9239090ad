/* Two connected sockets joined: what one sends goes to the other, both ways, as it comes,
 * each end-of-stream passed on as a half-close. celld's upgraded connections (the port
 * proxy's WebSockets, the TCP tunnel: the client's connection and the app's) and
 * `cell forward`'s (a local connection and celld's). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct cell_splice_opts {
	const char *a_first; /* bytes to b before anything else (a sent them already) */
	size_t a_first_len;
	const char *b_first; /* bytes to a before anything else */
	size_t b_first_len;
	int stop_fd; /* readable: stop at once (-1: none) */
	int idle_ms; /* nothing moved either way this long: stop (<= 0: never) */
	/* Told of every write: n bytes went to b (to_b) or to a (NULL: nobody is told). */
	void (*moved)(bool to_b, size_t n);
};

/* Copy between a and b until both directions have ended, either connection fails, stop_fd
 * becomes readable or idle_ms passed in silence (o may be NULL: none of these). Blocks;
 * makes both non-blocking. 0 when both ended cleanly, -ECANCELED (stopped), -ETIMEDOUT
 * (idle), else -errno. Closes neither. */
int cell_splice(int a, int b, const struct cell_splice_opts *o);
