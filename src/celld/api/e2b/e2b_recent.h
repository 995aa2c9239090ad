/* Which sandboxes a client used lately through the E2B listener, where a signed /files
 * URL's signer is looked for first (e2b_recent.c says why), and the host-wide bound on the
 * last resort, a scan of every sandbox. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "cell/id.h"
#include "http/peer.h"

#define E2B_RECENT_CLIENTS    1024 /* clients kept at once (a fixed table) */
#define E2B_RECENT_PER_CLIENT 4	   /* a client's sandboxes kept, the latest first */
#define E2B_SCANS_PER_SECOND  8	   /* scans of every sandbox, host-wide (a token bucket) */

/* client used sandbox id (the key or the sandbox's envd token, a create, a connect, a
 * signed URL found by a scan): it becomes the first of client's. */
void e2b_recent_note(const struct peer_key *client, const char *id);
/* The sandboxes client used, the latest first, into ids: how many (0: none kept). */
unsigned e2b_recent_of(const struct peer_key *client,
		       char ids[E2B_RECENT_PER_CLIENT][CELL_ID_MAX + 1]);

/* Whether sandbox id signed what cls holds (one signature check). */
typedef bool e2b_signer_fn(const char *id, const void *cls);
/* The sandbox whose signature signed_by accepts, asked only where it costs little: the one
 * named (named non-NULL: one check), else those client used (client non-NULL: at most
 * E2B_RECENT_PER_CLIENT checks). 0 with id; -EACCES when named and not by it (or named no
 * valid id); -ENOENT when nothing was named and none of client's signed it. */
int e2b_recent_find(const char *named, const struct peer_key *client, e2b_signer_fn *signed_by,
		    const void *cls, char id[CELL_ID_MAX + 1]);

/* A scan of every sandbox may begin at now_ms (monotonic): 0, and the caller calls
 * e2b_recent_scan_end when done; -EBUSY when another one runs (one at a time, host-wide),
 * -EAGAIN when E2B_SCANS_PER_SECOND were spent (a burst of as many, then one each
 * 1/E2B_SCANS_PER_SECOND s). */
int e2b_recent_scan_begin(int64_t now_ms);
void e2b_recent_scan_end(void);
