/* What the relay to cell-init hands back, without its frames (relay.h, cell/proto.h): a
 * refusal, a file's stat, a request's budget. A leaf, so that the services below the API
 * fronts (sbfile.h, file_xfer.h) can name these values and the fronts include no frame. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cell/meta.h"

struct relay_error {
	int errnum; /* validated, 1..4095 */
	char message[256];
};

struct relay_stat {
	char type[16]; /* file, directory, symlink, other */
	int64_t size;
	uint32_t mode; /* permission bits */
	int64_t uid, gid;
	char owner[64], group[64];
	double mtime, ctime;
	char target[4096]; /* a symlink's text, "" when unknown */
	/* Its metadata (cell-init's "xattrs": user.e2b.<key> extended attributes) as
	 * "key\0value\0" pairs, meta_len bytes, bounded as cell/meta.h says; what does not fit is
	 * left out. */
	char meta[CELL_META_MAX];
	size_t meta_len;
};

/* What one API request may spend waiting on cell-init in its control steps (connect, send a
 * request, wait for its answer), all steps together: a file info over many paths, a ranged
 * download (a stat, then a read), the files of one upload, a command's start. A stalled or
 * hostile init pins a celld thread for this long at most, not for a fresh timeout per step.
 * Streamed bytes (command output, download and upload data) are paced by the client and
 * have only the socket's idle timeout per frame (RELAY_IO_TIMEOUT_MS, relay.c). */
#define RELAY_BUDGET_MS 30000
struct relay_budget {
	int64_t left_ms;
};
#define RELAY_BUDGET_INIT                                                                          \
	{                                                                                          \
		RELAY_BUDGET_MS                                                                    \
	}
