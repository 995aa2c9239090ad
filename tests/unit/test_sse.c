/* celld's command events (src/celld/http/sse.c): one JSON object and a blank line each; output
 * as text when it is UTF-8 and escaping is not longer, else base64 (exact bytes); a UTF-8
 * character split across two chunks held back and sent whole; the held bytes flushed by
 * the final call; output split into lines as execd does (sse_lines). */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include "../../src/celld/http/sse.h"
#include "cell/codec.h"
#include "unit.h"

/* The one event in text[0..len): checks the framing, returns the object. */
static json_t *event(const char *text, size_t len)
{
	ck_assert_uint_ge(len, 3);
	ck_assert_msg(!memcmp(text + len - 2, "\n\n", 2), "no blank line ends '%.*s'", (int)len,
		      text);
	ck_assert_ptr_null(memchr(text, '\n', len - 2));
	json_error_t jerr;
	json_t *ev = json_loadb(text, len - 2, 0, &jerr);
	ck_assert_msg(json_is_object(ev), "'%.*s': %s", (int)len, text, jerr.text);
	ck_assert(json_is_integer(json_object_get(ev, "timestamp")));
	return ev;
}

/* The bytes an output event carries, decoded; *b64 tells whether it was base64. */
static char *output_bytes(json_t *ev, size_t *n, bool *b64)
{
	const char *text = json_string_value(json_object_get(ev, "text"));
	ck_assert_ptr_nonnull(text);
	json_t *enc = json_object_get(ev, "encoding");
	*b64 = enc != NULL;
	if (!enc) {
		*n = json_string_length(json_object_get(ev, "text"));
		char *out = malloc(*n + 1);
		memcpy(out, text, *n + 1);
		return out;
	}
	ck_assert_str_eq(json_string_value(enc), "base64");
	uint8_t *out = NULL;
	ck_assert_int_eq(cell_base64_decode(text, strlen(text), &out, n), 0);
	return (char *)out;
}

/* sse_output of data as one (non-final unless final) chunk; the decoded bytes, NULL when
 * no event came. */
static char *output(struct sse_utf8 *u, const char *data, size_t n, bool final, size_t *got,
		    bool *b64)
{
	char *out = NULL;
	size_t len = 0;
	ck_assert_int_eq(sse_output("stdout", u, (const uint8_t *)data, n, final, &out, &len), 0);
	if (!out) {
		ck_assert_uint_eq(len, 0);
		return NULL;
	}
	json_t *ev = event(out, len);
	ck_assert_str_eq(json_string_value(json_object_get(ev, "type")), "stdout");
	char *bytes = output_bytes(ev, got, b64);
	json_decref(ev);
	free(out);
	return bytes;
}

START_TEST(text_is_escaped_json)
{
	struct sse_utf8 u = {0};
	const char in[] = "plain \"quoted\" back\\slash\ttab\nnl\x01\x1f é 日本 😀";
	size_t n;
	bool b64;
	char *got = output(&u, in, sizeof(in) - 1, false, &n, &b64);
	ck_assert(!b64);
	ck_assert_uint_eq(n, sizeof(in) - 1);
	ck_assert(!memcmp(got, in, n));
	ck_assert_uint_eq(u.n, 0);
	free(got);
}
END_TEST

START_TEST(utf8_carried_across_chunks)
{
	const char *chars[] = {"é", "日", "😀"};
	for (size_t c = 0; c < 3; c++) {
		size_t clen = strlen(chars[c]);
		for (size_t cut = 1; cut < clen; cut++) {
			struct sse_utf8 u = {0};
			char first[16];
			size_t fl =
			    (size_t)snprintf(first, sizeof(first), "ab%.*s", (int)cut, chars[c]);
			size_t n;
			bool b64;
			char *a = output(&u, first, fl, false, &n, &b64);
			ck_assert_msg(a && !b64 && n == 2 && !memcmp(a, "ab", 2),
				      "char %zu cut at %zu: first event", c, cut);
			ck_assert_uint_eq(u.n, cut);
			free(a);
			char *b = output(&u, chars[c] + cut, clen - cut, false, &n, &b64);
			ck_assert_msg(b && !b64 && n == clen && !memcmp(b, chars[c], clen),
				      "char %zu cut at %zu: not sent whole", c, cut);
			ck_assert_uint_eq(u.n, 0);
			free(b);
		}
	}
	/* a chunk that is only the start of a character: no event yet */
	struct sse_utf8 u = {0};
	size_t n;
	bool b64;
	ck_assert_ptr_null(output(&u, "\xe6\x97", 2, false, &n, &b64));
	ck_assert_uint_eq(u.n, 2);
	char *b = output(&u, "\xa5", 1, false, &n, &b64);
	ck_assert(b && n == 3 && !memcmp(b, "日", 3));
	free(b);
}
END_TEST

START_TEST(final_flushes_held_bytes)
{
	struct sse_utf8 u = {0};
	size_t n;
	bool b64;
	free(output(&u, "x\xe6\x97", 3, false, &n, &b64));
	ck_assert_uint_eq(u.n, 2);
	/* the command ended: what was held goes out exactly, base64 (not UTF-8 on its own) */
	char *b = output(&u, NULL, 0, true, &n, &b64);
	ck_assert_ptr_nonnull(b);
	ck_assert(b64);
	ck_assert_uint_eq(n, 2);
	ck_assert(!memcmp(b, "\xe6\x97", 2));
	ck_assert_uint_eq(u.n, 0);
	free(b);
	/* a final chunk ending in a cut character is not held */
	struct sse_utf8 u2 = {0};
	b = output(&u2, "ok\xf0\x9f", 4, true, &n, &b64);
	ck_assert(b && b64 && n == 4 && !memcmp(b, "ok\xf0\x9f", 4));
	ck_assert_uint_eq(u2.n, 0);
	free(b);
}
END_TEST

START_TEST(binary_goes_base64_exactly)
{
	/* every length crosses the vector path (24-byte groups) and the tails */
	uint8_t data[300];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 151 + 7) | 0x80; /* never valid UTF-8 at the start */
	data[0] = 0xff;
	for (size_t n = 1; n <= sizeof(data); n++) {
		struct sse_utf8 u = {0};
		size_t got;
		bool b64;
		char *b = output(&u, (const char *)data, n, false, &got, &b64);
		ck_assert_msg(b && b64 && got == n && !memcmp(b, data, n), "%zu bytes", n);
		free(b);
	}
	/* NUL-heavy output is UTF-8, but escaping (\u0000) is longer than base64 */
	char zeros[64] = {0};
	struct sse_utf8 u = {0};
	size_t got;
	bool b64;
	char *b = output(&u, zeros, sizeof(zeros), false, &got, &b64);
	ck_assert(b && b64 && got == sizeof(zeros) && !memcmp(b, zeros, got));
	free(b);
}
END_TEST

START_TEST(other_events)
{
	size_t len;
	char *t = sse_init("cmd-1", &len);
	json_t *ev = event(t, len);
	ck_assert_str_eq(json_string_value(json_object_get(ev, "type")), "init");
	ck_assert_str_eq(json_string_value(json_object_get(ev, "text")), "cmd-1");
	json_decref(ev);
	free(t);
	t = sse_complete(1234, &len);
	ev = event(t, len);
	ck_assert_str_eq(json_string_value(json_object_get(ev, "type")), "execution_complete");
	ck_assert_int_eq(json_integer_value(json_object_get(ev, "execution_time")), 1234);
	json_decref(ev);
	free(t);
	t = sse_error(137, "killed", &len);
	ev = event(t, len);
	json_t *e = json_object_get(ev, "error");
	ck_assert_str_eq(json_string_value(json_object_get(e, "evalue")), "137");
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(e, "traceback"), 0)),
			 "killed");
	json_decref(ev);
	free(t);
	t = sse_ping(&len);
	ev = event(t, len);
	ck_assert_str_eq(json_string_value(json_object_get(ev, "type")), "ping");
	json_decref(ev);
	free(t);
}
END_TEST

/* The stream's buffer: events appended after unread ones, read ones dropped. */
START_TEST(buffer_appends_and_compacts)
{
	struct sse_buf b = {0};
	struct sse_utf8 u = {0};
	ck_assert_int_eq(sse_output_add(&b, "stderr", &u, (const uint8_t *)"one", 3, false), 0);
	size_t first = b.len;
	ck_assert_int_eq(sse_output_add(&b, "stdout", &u, (const uint8_t *)"two", 3, false), 0);
	json_t *ev = event(b.data, first);
	ck_assert_str_eq(json_string_value(json_object_get(ev, "type")), "stderr");
	json_decref(ev);
	ev = event(b.data + first, b.len - first);
	ck_assert_str_eq(json_string_value(json_object_get(ev, "text")), "two");
	json_decref(ev);
	b.off = b.len; /* all read */
	ck_assert_int_eq(sse_buf_add(&b, "xy", 2), 0);
	ck_assert_uint_eq(b.off, 0);
	ck_assert_uint_eq(b.len, 2);
	ck_assert(!memcmp(b.data, "xy", 2));
	/* Taken by a content reader in pieces of its size, then empty (and emptied). */
	char out[4];
	ck_assert_int_eq(sse_buf_add(&b, "zzz", 3), 0);
	ck_assert_uint_eq(sse_buf_take(&b, out, 4), 4);
	ck_assert(!memcmp(out, "xyzz", 4));
	ck_assert_uint_eq(sse_buf_take(&b, out, 4), 1);
	ck_assert_int_eq(out[0], 'z');
	ck_assert_uint_eq(sse_buf_take(&b, out, 4), 0);
	ck_assert_uint_eq(b.off, 0);
	ck_assert_uint_eq(b.len, 0);
	sse_buf_free(&b);
	ck_assert_ptr_null(b.data);
}
END_TEST

/* ---- lines ---- */

/* The events sse_lines_add appended to b, decoded: "text" or "b64:<bytes>", joined by '|'
 * (a test line never holds '|'); b is emptied. */
static char *lines_got(struct sse_buf *b, int *count)
{
	size_t cap = 1 << 20, used = 0;
	char *all = calloc(1, cap);
	*count = 0;
	size_t i = b->off;
	while (i < b->len) {
		const char *endp = memmem(b->data + i, b->len - i, "\n\n", 2);
		ck_assert_ptr_nonnull(endp);
		size_t evlen = (size_t)(endp - (b->data + i)) + 2;
		json_t *ev = event(b->data + i, evlen);
		ck_assert_str_eq(json_string_value(json_object_get(ev, "type")), "stdout");
		size_t n;
		bool b64;
		char *bytes = output_bytes(ev, &n, &b64);
		ck_assert_uint_lt(used + n + 8, cap);
		if (*count)
			all[used++] = '|';
		if (b64) {
			memcpy(all + used, "b64:", 4);
			used += 4;
		}
		memcpy(all + used, bytes, n);
		used += n;
		free(bytes);
		json_decref(ev);
		(*count)++;
		i += evlen;
	}
	b->off = b->len = 0;
	return all;
}

static void lines_feed(struct sse_buf *b, struct sse_lines *l, const char *s, size_t n, bool final)
{
	ck_assert_int_eq(sse_lines_add(b, "stdout", l, (const uint8_t *)s, n, final), 0);
}

#define CHECK_LINES(b, want, want_count)                                                           \
	do {                                                                                       \
		int cnt_;                                                                          \
		char *got_ = lines_got(b, &cnt_);                                                  \
		ck_assert_str_eq(got_, want);                                                      \
		ck_assert_int_eq(cnt_, want_count);                                                \
		free(got_);                                                                        \
	} while (0)

/* One event per line without its ending; \r\n is one ending, also split across chunks;
 * an empty line is "\n"; a last partial line waits for final. */
START_TEST(lines_split_as_execd)
{
	struct sse_buf b = {0};
	struct sse_lines l = {0};
	const char in[] = "a\nb\r\nc\rd\n\n\ne";
	lines_feed(&b, &l, in, strlen(in), false);
	CHECK_LINES(&b, "a|b|c|d|\n|\n", 6);
	lines_feed(&b, &l, "x\r", 2, false);
	CHECK_LINES(&b, "ex", 1); /* the held "e" joined "x" */
	lines_feed(&b, &l, "\ny\n", 3, false);
	CHECK_LINES(&b, "y", 1); /* the '\n' of a split "\r\n" is no empty line */
	lines_feed(&b, &l, "tail", 4, false);
	CHECK_LINES(&b, "", 0);
	lines_feed(&b, &l, NULL, 0, true);
	CHECK_LINES(&b, "tail", 1);
	lines_feed(&b, &l, NULL, 0, true);
	CHECK_LINES(&b, "", 0);
	sse_lines_free(&l);
	sse_buf_free(&b);
}
END_TEST

/* A line longer than SSE_LINE_MAX goes in pieces of that size, whether it comes in one
 * chunk or many; a line of exactly that size is one event (no empty line after it). */
START_TEST(lines_long_in_pieces)
{
	size_t n = 3 * SSE_LINE_MAX + 5;
	char *in = malloc(n + 1);
	memset(in, 'x', n);
	in[n] = '\n';
	for (int step = 0; step < 2; step++) {
		struct sse_buf b = {0};
		struct sse_lines l = {0};
		if (step == 0) {
			lines_feed(&b, &l, in, n + 1, false);
		} else {
			for (size_t off = 0; off < n + 1; off += 1000)
				lines_feed(&b, &l, in + off,
					   n + 1 - off < 1000 ? n + 1 - off : 1000, false);
		}
		int cnt;
		char *got = lines_got(&b, &cnt);
		ck_assert_int_eq(cnt, 4);
		ck_assert_uint_eq(strlen(got), n + 3);
		ck_assert_int_eq(got[SSE_LINE_MAX], '|');
		ck_assert_str_eq(got + 3 * (SSE_LINE_MAX + 1), "xxxxx");
		free(got);
		lines_feed(&b, &l, in, SSE_LINE_MAX, false);
		lines_feed(&b, &l, "\n", 1, true);
		got = lines_got(&b, &cnt);
		ck_assert_int_eq(cnt, 1);
		ck_assert_uint_eq(strlen(got), SSE_LINE_MAX);
		free(got);
		sse_lines_free(&l);
		sse_buf_free(&b);
	}
	free(in);
}
END_TEST

/* A piece never splits a UTF-8 character; a line that is not UTF-8 goes base64, alone. */
START_TEST(lines_utf8_and_binary)
{
	struct sse_buf b = {0};
	struct sse_lines l = {0};
	char *in = malloc(SSE_LINE_MAX + 8);
	memset(in, 'a', SSE_LINE_MAX - 1);
	memcpy(in + SSE_LINE_MAX - 1, "\xc3\xa9\n", 3); /* é across the cut */
	lines_feed(&b, &l, in, SSE_LINE_MAX + 2, false);
	int cnt;
	char *got = lines_got(&b, &cnt);
	ck_assert_int_eq(cnt, 2);
	ck_assert_str_eq(got + SSE_LINE_MAX - 1, "|\xc3\xa9");
	free(got);
	free(in);
	lines_feed(&b, &l, "ok\n\xff\xfe\nfin", 9, true);
	CHECK_LINES(&b, "ok|b64:\xff\xfe|fin", 3);
	sse_lines_free(&l);
	sse_buf_free(&b);
}
END_TEST

static Suite *sse_suite(void)
{
	Suite *s = suite_create("sse");
	TCase *tc = tcase_create("sse");
	tcase_add_test(tc, text_is_escaped_json);
	tcase_add_test(tc, utf8_carried_across_chunks);
	tcase_add_test(tc, final_flushes_held_bytes);
	tcase_add_test(tc, binary_goes_base64_exactly);
	tcase_add_test(tc, other_events);
	tcase_add_test(tc, buffer_appends_and_compacts);
	tcase_add_test(tc, lines_split_as_execd);
	tcase_add_test(tc, lines_long_in_pieces);
	tcase_add_test(tc, lines_utf8_and_binary);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(sse_suite());
}
