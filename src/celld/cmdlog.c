/* One command's kept output: a byte log within its window of CMD_LOG_MAX newest bytes,
 * and the time index of what is kept. */
#include <stdlib.h>
#include <string.h>

#include "cmdlog.h"

/* The bytes before start are gone: so are the marks that only they followed. The oldest
 * mark left moves up to start (its time still bounds the bytes from there from below). */
static void forget_marks(struct cmdlog *l)
{
	unsigned gone = 0;
	while (gone + 1 < l->n_marks && l->marks[gone + 1].off <= l->start)
		gone++;
	if (gone) {
		memmove(l->marks, l->marks + gone, (l->n_marks - gone) * sizeof(*l->marks));
		l->n_marks -= gone;
	}
	if (l->n_marks && l->marks[0].off < l->start)
		l->marks[0].off = l->start;
}

/* A full index keeps every other mark, the oldest first, and its gap doubles. */
static void coarsen_marks(struct cmdlog *l)
{
	unsigned n = 0;
	for (unsigned i = 0; i < l->n_marks; i += 2)
		l->marks[n++] = l->marks[i];
	l->n_marks = n;
	l->gap_ms = (l->gap_ms ? l->gap_ms : CMDLOG_MARK_GAP_MS) * 2;
}

void cmdlog_mark(struct cmdlog *l, int64_t now_ms)
{
	uint64_t end = cmdlog_end(l);
	int64_t gap = l->gap_ms ? l->gap_ms : CMDLOG_MARK_GAP_MS;
	if (l->n_marks) {
		struct cmdlog_mark *last = &l->marks[l->n_marks - 1];
		if (last->off == end) {
			last->ms = now_ms; /* nothing was written since it: no byte is misdated */
			return;
		}
		if (now_ms - last->ms < gap)
			return;
	}
	if (l->n_marks == CMDLOG_MARKS)
		coarsen_marks(l);
	l->marks[l->n_marks++] = (struct cmdlog_mark){.off = end, .ms = now_ms};
}

uint64_t cmdlog_since(const struct cmdlog *l, int64_t ms)
{
	for (unsigned i = 0; i < l->n_marks; i++)
		if (l->marks[i].ms >= ms)
			return l->marks[i].off > l->start ? l->marks[i].off : l->start;
	return cmdlog_end(l);
}

uint64_t cmdlog_tail(const struct cmdlog *l, uint64_t lines)
{
	if (!lines)
		return cmdlog_end(l);
	size_t i = l->len;
	if (i && l->buf[i - 1] == '\n')
		i--; /* the last line's own newline */
	while (i) {
		const char *nl = memrchr(l->buf, '\n', i);
		if (!nl)
			break;
		if (--lines == 0)
			return l->start + (uint64_t)(nl - l->buf) + 1;
		i = (size_t)(nl - l->buf);
	}
	return l->start;
}

size_t cmdlog_fit(struct cmdlog *l, const char **p, size_t *len)
{
	if (*len >= CMD_LOG_MAX) {
		size_t skip = *len - CMD_LOG_MAX;
		l->start += l->len + skip;
		l->len = 0;
		*p += skip;
		*len -= skip;
	}
	/* Keep the newest CMD_LOG_MAX bytes; dropping at least a quarter at a time keeps the
	 * memmove cost amortised. */
	if (l->len + *len > CMD_LOG_MAX) {
		size_t drop = l->len + *len - CMD_LOG_MAX;
		size_t quarter = CMD_LOG_MAX / 4 < l->len ? CMD_LOG_MAX / 4 : l->len;
		if (drop < quarter)
			drop = quarter;
		memmove(l->buf, l->buf + drop, l->len - drop);
		l->len -= drop;
		l->start += drop;
	}
	forget_marks(l);
	if (l->len + *len <= l->cap)
		return 0;
	size_t cap = l->cap ? l->cap : 4096;
	while (cap < l->len + *len)
		cap *= 2;
	return (cap > CMD_LOG_MAX ? CMD_LOG_MAX : cap) - l->cap;
}

size_t cmdlog_append(struct cmdlog *l, const char *p, size_t len, size_t grow)
{
	char *nb = grow ? realloc(l->buf, l->cap + grow) : l->buf;
	if (!nb) {
		cmdlog_lose(l, len);
		return 0;
	}
	l->buf = nb;
	l->cap += grow;
	memcpy(l->buf + l->len, p, len);
	l->len += len;
	return grow;
}

void cmdlog_lose(struct cmdlog *l, size_t len)
{
	l->start += l->len + len;
	l->len = 0;
	forget_marks(l);
}

size_t cmdlog_trim(struct cmdlog *l)
{
	size_t keep = l->len / 2, drop = l->len - keep;
	char *nb = NULL;
	if (keep) {
		memmove(l->buf, l->buf + drop, keep);
		nb = realloc(l->buf, keep);
	}
	if (!nb)
		return cmdlog_drop(l, false);
	size_t freed = l->cap - keep;
	l->buf = nb;
	l->start += drop;
	l->len = keep;
	l->cap = keep;
	forget_marks(l);
	return freed;
}

size_t cmdlog_drop(struct cmdlog *l, bool noted)
{
	size_t freed = l->cap;
	if (l->cap && noted)
		l->dropped = true;
	l->start += l->len;
	l->len = 0;
	l->cap = 0;
	free(l->buf);
	l->buf = NULL;
	forget_marks(l);
	return freed;
}

void cmdlog_free(struct cmdlog *l)
{
	free(l->buf);
	l->buf = NULL;
}

uint64_t cmdlog_end(const struct cmdlog *l)
{
	return l->start + l->len;
}

size_t cmdlog_read(const struct cmdlog *l, uint64_t *pos, uint64_t end, char *buf, size_t max)
{
	uint64_t have = cmdlog_end(l);
	if (*pos < l->start)
		*pos = l->start; /* dropped meanwhile: what is left follows */
	if (end > have)
		end = have;
	size_t n = *pos < end ? (size_t)(end - *pos) : 0;
	if (n > max)
		n = max;
	if (n) /* a dropped log has no buffer */
		memcpy(buf, l->buf + (*pos - l->start), n);
	*pos += n;
	return n;
}
