/* Command event JSON for execd's text/event-stream ("{...}\n\n"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sse_utf8 {
	uint8_t carry[4]; /* incomplete UTF-8 sequence held back from the previous chunk */
	size_t n;
};

/* Events not yet handed to the client: data[off..len) is unread. */
struct sse_buf {
	char *data;
	size_t off, len, cap;
};

/* Append len bytes (an event from the builders below). 0 or -ENOMEM. */
int sse_buf_add(struct sse_buf *b, const char *data, size_t len);
void sse_buf_free(struct sse_buf *b);
/* Up to max unread bytes of b copied to out and consumed: how many; 0 when b has none left
 * (it is then emptied for the next events). A stream's content reader hands them on so. */
size_t sse_buf_take(struct sse_buf *b, char *out, size_t max);
/* The stdout/stderr event(s) for data, appended to b; the rules of sse_output. */
int sse_output_add(struct sse_buf *b, const char *type, struct sse_utf8 *u, const uint8_t *data,
		   size_t n, bool final);

/* Output as execd sends it: one event per line, without its ending. A line ends at '\n'
 * or '\r' ("\r\n" is one ending); an empty line is an event whose text is "\n"; a line
 * longer than SSE_LINE_MAX goes out in pieces of at most that (never splitting a UTF-8
 * character); the last line without an ending is held until more comes or final. Each
 * event is text when its bytes are UTF-8, else base64 with "encoding":"base64". */
#define SSE_LINE_MAX (64u << 10)
struct sse_lines {
	uint8_t *buf; /* the current line so far (< SSE_LINE_MAX bytes), allocated when needed */
	size_t len;
	bool cr;  /* the last ending was '\r': a '\n' right after it ends nothing */
	bool mid; /* a piece of the current line was sent already */
};
/* Appends the events for data to b; final flushes a last partial line. 0 or -ENOMEM. */
int sse_lines_add(struct sse_buf *b, const char *type, struct sse_lines *l, const uint8_t *data,
		  size_t n, bool final);
void sse_lines_free(struct sse_lines *l);

char *sse_init(const char *cmd_id, size_t *len);
char *sse_ping(size_t *len);
/* stdout/stderr event into *out (NULL when there is nothing to send yet); bytes that are
 * not UTF-8 go out base64 with "encoding":"base64". A multi-byte character split across
 * chunks is held back in u; final flushes it. 0 or -ENOMEM. */
int sse_output(const char *type, struct sse_utf8 *u, const uint8_t *data, size_t n, bool final,
	       char **out, size_t *len);
char *sse_complete(int64_t execution_ms, size_t *len);
char *sse_error(int exit_code, const char *traceback, size_t *len);
