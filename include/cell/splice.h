/* Two connected sockets joined: what one sends goes to the other, both ways, as it comes,
 * each end-of-stream passed on as a half-close. The TCP tunnel's two ends: celld's (the
 * client's connection and the app's) and `cell forward`'s (a local connection and celld's). */
#pragma once

#include <stddef.h>

/* Copy between a and b until both directions have ended (or either connection fails);
 * first (first_len bytes, may be 0) goes to b before anything else. Blocks; makes both
 * non-blocking. 0 when both ended cleanly, else -errno. Closes neither. */
int cell_splice(int a, int b, const char *first, size_t first_len);
