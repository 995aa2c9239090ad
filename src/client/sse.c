/* The event-stream framer of the client library (see cell_client_sse in cell/client.h).
 *
 * Bytes are appended to one buffer; every complete block is handed on in place, and the
 * unfinished rest is moved to the front once per feed (a chunk holding thousands of small
 * events costs one memmove, not thousands). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cell/client.h"

static size_t max_event(const struct cell_client_sse *s)
{
	return s->max_event ? s->max_event : CELL_CLIENT_EVENT_MAX;
}

static int too_large(struct cell_client_sse *s, int r)
{
	if (r == -EMSGSIZE) {
		if (s->err) {
			s->err->code = EMSGSIZE;
			snprintf(s->err->msg, sizeof(s->err->msg),
				 "celld sent an event larger than %zu bytes", max_event(s));
		}
		return r;
	}
	if (s->err) {
		s->err->code = -r;
		snprintf(s->err->msg, sizeof(s->err->msg), "reading an event: %s", strerror(-r));
	}
	return r;
}

static int deliver(struct cell_client_sse *s, const char *data, size_t len)
{
	int r = s->on_event(s->ctx, data, len);
	if (r > 0)
		s->done_ = true;
	return r;
}

/* One block (the text between blank lines): lines starting with '{' are events of their
 * own; "data:" fields are joined with "\n" into one more; the rest is skipped. */
static int sse_block(struct cell_client_sse *s, char *block, size_t len)
{
	struct cell_client_buf data = {0};
	int r = 0;
	char *end = block + len;
	for (char *line = block; line < end && r == 0 && !s->done_;) {
		char *nl = memchr(line, '\n', (size_t)(end - line));
		char *le = nl ? nl : end;
		size_t ll = (size_t)(le - line);
		if (ll && line[ll - 1] == '\r')
			ll--;
		if (ll && line[0] == '{') {
			r = deliver(s, line, ll);
		} else if (ll >= 5 && !memcmp(line, "data:", 5)) {
			const char *v = line + 5;
			size_t vl = ll - 5;
			if (vl && *v == ' ')
				v++, vl--;
			if (data.len)
				r = cell_client_buf_append(&data, "\n", 1, max_event(s));
			if (r == 0)
				r = cell_client_buf_append(&data, v, vl, max_event(s));
			if (r < 0)
				r = too_large(s, r);
		}
		line = le + 1;
	}
	if (r == 0 && data.len && !s->done_)
		r = deliver(s, data.data, data.len);
	cell_client_buf_free(&data);
	return r;
}

/* The first blank line at or after p: "\n\n" or "\n\r\n", its length in *seplen; NULL when
 * there is none (yet). Events are JSON, which never holds a raw newline, so memchr for '\n'
 * skips a whole event at a time. */
static char *block_end(char *p, char *end, size_t *seplen)
{
	while (end - p >= 2) {
		char *nl = memchr(p, '\n', (size_t)(end - p - 1));
		if (!nl)
			return NULL;
		if (nl[1] == '\n') {
			*seplen = 2;
			return nl;
		}
		if (nl[1] == '\r') {
			if (end - nl < 3)
				return NULL; /* the '\n' that would end it has not arrived */
			if (nl[2] == '\n') {
				*seplen = 3;
				return nl;
			}
		}
		p = nl + 1;
	}
	return NULL;
}

static int drain(struct cell_client_sse *s, bool final)
{
	char *start = s->buf_.data;
	size_t pos = 0;
	int r = 0;
	while (r == 0 && !s->done_) {
		/* buf[pos..scanned) holds no blank line: start two bytes before its end (a
		 * "\n" or "\n\r" may end the old part and the rest begin the new one). */
		size_t from = s->scanned_ > pos + 2 ? s->scanned_ - 2 : pos;
		size_t seplen = 0;
		char *sep = block_end(start + from, start + s->buf_.len, &seplen);
		size_t len = sep ? (size_t)(sep - (start + pos)) : s->buf_.len - pos;
		if (len > max_event(s)) {
			r = too_large(s, -EMSGSIZE);
			break;
		}
		if (!sep) {
			s->scanned_ = s->buf_.len;
			if (final && len) {
				r = sse_block(s, start + pos, len);
				pos = s->buf_.len;
			}
			break;
		}
		r = sse_block(s, start + pos, len);
		pos += len + seplen;
	}
	if (s->done_) {
		s->buf_.len = s->scanned_ = 0;
	} else if (pos) {
		memmove(start, start + pos, s->buf_.len - pos);
		s->buf_.len -= pos;
		s->scanned_ = s->scanned_ > pos ? s->scanned_ - pos : 0;
	}
	return r;
}

int cell_client_sse_feed(struct cell_client_sse *s, const void *data, size_t len)
{
	if (s->done_)
		return 0;
	/* What is kept between feeds is at most one unfinished event (drain checks), so a
	 * chunk holding many small events never counts as one large one. */
	if (len > SIZE_MAX - max_event(s))
		return too_large(s, -EMSGSIZE);
	int r = cell_client_buf_append(&s->buf_, data, len, max_event(s) + len);
	if (r < 0)
		return too_large(s, r);
	return drain(s, false);
}

int cell_client_sse_finish(struct cell_client_sse *s)
{
	if (s->done_ || !s->buf_.len)
		return 0;
	return drain(s, true);
}

bool cell_client_sse_done(const struct cell_client_sse *s)
{
	return s->done_;
}

void cell_client_sse_free(struct cell_client_sse *s)
{
	cell_client_buf_free(&s->buf_);
	s->scanned_ = 0;
	s->done_ = false;
}
