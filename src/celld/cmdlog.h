/* cmdlog.c: one command's kept output, a byte log bounded to its newest CMD_LOG_MAX bytes.
 * Pure (no locks, no table, no budget): the caller serialises access and accounts the
 * buffer capacity each change reports. Unit suites link it alone.
 *
 * Offsets count everything ever written: start is the offset of buf[0], start + len the
 * end. Dropping bytes only moves start up, never the end, so a reader's cursor stays a
 * valid offset whatever was dropped meanwhile. A zeroed struct cmdlog is an empty log. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CMD_LOG_MAX (8u << 20) /* combined output kept: 4 MiB per stream */

/* The time index: which offset was written when, for a reader's "since". A mark says that
 * the bytes from off on were written at ms or later (and before the next mark's ms). Marks
 * are at least gap_ms apart; a full index keeps every other mark and doubles the gap, so
 * a long log is indexed coarser, never longer. */
#define CMDLOG_MARKS	   32
#define CMDLOG_MARK_GAP_MS 100 /* the finest resolution: a fresh log's gap */

struct cmdlog_mark {
	uint64_t off;
	int64_t ms;
};

struct cmdlog {
	char *buf; /* the newest output, at most CMD_LOG_MAX bytes */
	size_t len, cap;
	uint64_t start; /* offset of buf[0] in everything ever written */
	bool dropped;	/* the whole log went to a cap outside its own window */
	struct cmdlog_mark marks[CMDLOG_MARKS]; /* oldest first, offsets increasing */
	unsigned n_marks;
	int64_t gap_ms; /* 0: CMDLOG_MARK_GAP_MS */
};

/* Make room for an append of *len bytes at *p within l's own window: a tail longer than
 * CMD_LOG_MAX is cut to its newest bytes (*p, *len moved), and the oldest kept bytes go,
 * at least a quarter of the window at a time. Returns the capacity the append must add
 * (0 when it fits the buffer as is), never past CMD_LOG_MAX in all. */
size_t cmdlog_fit(struct cmdlog *l, const char **p, size_t *len);
/* Append len bytes (after cmdlog_fit), growing the buffer by grow first. Returns the
 * capacity added; 0 as well when the buffer cannot grow: then what was kept and these
 * bytes are lost (cmdlog_lose). */
size_t cmdlog_append(struct cmdlog *l, const char *p, size_t len, size_t grow);
/* What was kept and len more bytes are lost: the log restarts empty at the end of
 * everything written. The buffer stays. */
void cmdlog_lose(struct cmdlog *l, size_t len);
/* Keep the newest half and give the rest of the buffer back. Returns the capacity freed
 * (all of it when the half is empty or the buffer cannot shrink: the log is dropped). */
size_t cmdlog_trim(struct cmdlog *l);
/* Free the whole buffer; the end offset stays. noted: mark it dropped (when it held a
 * buffer), for its status to say so. Returns the capacity freed. */
size_t cmdlog_drop(struct cmdlog *l, bool noted);
/* Free the buffer of a log no longer used. */
void cmdlog_free(struct cmdlog *l);
/* The end offset of everything written (monotonic). */
uint64_t cmdlog_end(const struct cmdlog *l);
/* Note that the bytes appended next (from the end on) are written at now_ms (the caller's
 * clock, milliseconds, not going back). Bounded: see CMDLOG_MARKS. */
void cmdlog_mark(struct cmdlog *l, int64_t now_ms);
/* The offset of the oldest kept byte written at ms or later, to the index's resolution (a
 * byte written after ms but before the mark that follows it is left out); the end when
 * none. */
uint64_t cmdlog_since(const struct cmdlog *l, int64_t ms);
/* The offset where the last `lines` lines of what is kept begin (a last line without its
 * newline counts); the oldest kept byte when fewer are kept, the end for 0. */
uint64_t cmdlog_tail(const struct cmdlog *l, uint64_t lines);
/* Copy up to max bytes from *pos (moved up to the oldest kept byte when older ones are
 * gone) up to end into buf, advancing *pos; 0 once *pos reaches end. */
size_t cmdlog_read(const struct cmdlog *l, uint64_t *pos, uint64_t end, char *buf, size_t max);
