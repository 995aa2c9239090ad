/* The client library's event-stream framer (src/client/sse.c): an event is a bare JSON line
 * or the joined "data:" lines of a block; blocks end at a blank line ("\n\n" or "\r\n\r\n");
 * comments and other fields are skipped; the same events come out wherever the stream is
 * cut into pieces; an event larger than the bound is refused, not buffered. */
#include <errno.h>
#include <string.h>

#include "cell/client.h"
#include "unit.h"

#define EVENTS_MAX 16

struct seen {
	char ev[EVENTS_MAX][128];
	int n;
	int stop_at; /* return 1 (done) on this event, 1-based; 0: never */
	int fail_at; /* return -EPIPE on this event, 1-based; 0: never */
};

static int on_event(void *ctx, const char *data, size_t len)
{
	struct seen *s = ctx;
	ck_assert_int_lt(s->n, EVENTS_MAX);
	ck_assert_uint_lt(len, sizeof(s->ev[0]));
	memcpy(s->ev[s->n], data, len);
	s->ev[s->n][len] = '\0';
	s->n++;
	if (s->n == s->fail_at)
		return -EPIPE;
	return s->n == s->stop_at ? 1 : 0;
}

static struct cell_client_sse framer(struct seen *s, size_t max_event, struct cell_error *err)
{
	return (struct cell_client_sse){
	    .on_event = on_event, .ctx = s, .max_event = max_event, .err = err};
}

/* Feed text in pieces cut at the offsets cuts[0..ncuts) (ascending), then finish. */
static void feed_cut(struct seen *s, const char *text, const size_t *cuts, size_t ncuts)
{
	struct cell_client_sse f = framer(s, 0, NULL);
	size_t at = 0, len = strlen(text);
	for (size_t i = 0; i <= ncuts; i++) {
		size_t to = i < ncuts ? cuts[i] : len;
		ck_assert_int_eq(cell_client_sse_feed(&f, text + at, to - at), 0);
		at = to;
	}
	ck_assert_int_eq(cell_client_sse_finish(&f), 0);
	cell_client_sse_free(&f);
}

static void assert_same(const struct seen *a, const struct seen *b, const char *how)
{
	ck_assert_msg(a->n == b->n, "%s: %d events, not %d", how, b->n, a->n);
	for (int i = 0; i < a->n; i++)
		ck_assert_msg(!strcmp(a->ev[i], b->ev[i]), "%s: event %d is '%s', not '%s'", how, i,
			      b->ev[i], a->ev[i]);
}

/* Every kind of block at once: bare JSON, two JSON lines in one block, data lines (with
 * and without the space), a comment, other fields, CRLF line ends, a blank line first. */
static const char mixed[] = "\n{\"type\":\"init\",\"text\":\"c1\"}\n\n"
			    "{\"a\":1}\n{\"b\":2}\n\n"
			    ": keep-alive\n\n"
			    "event: output\nid: 7\ndata: {\"c\":3}\n\n"
			    "data:x\ndata: y\n\n"
			    "data: {\"d\":4}\r\n\r\n"
			    "{\"type\":\"execution_complete\"}\n\n";
static const char *const mixed_events[] = {
    "{\"type\":\"init\",\"text\":\"c1\"}",
    "{\"a\":1}",
    "{\"b\":2}",
    "{\"c\":3}",
    "x\ny",
    "{\"d\":4}",
    "{\"type\":\"execution_complete\"}",
};

START_TEST(kinds_of_blocks)
{
	struct seen s = {0};
	feed_cut(&s, mixed, NULL, 0);
	ck_assert_int_eq(s.n, (int)(sizeof(mixed_events) / sizeof(mixed_events[0])));
	for (int i = 0; i < s.n; i++)
		ck_assert_str_eq(s.ev[i], mixed_events[i]);
}
END_TEST

START_TEST(split_at_every_byte)
{
	struct seen whole = {0};
	feed_cut(&whole, mixed, NULL, 0);
	size_t len = strlen(mixed);
	for (size_t i = 0; i <= len; i++) {
		for (size_t j = i; j <= len; j += 7) {
			struct seen s = {0};
			size_t cuts[] = {i, j};
			feed_cut(&s, mixed, cuts, 2);
			char how[64];
			snprintf(how, sizeof(how), "cut at %zu and %zu", i, j);
			assert_same(&whole, &s, how);
		}
	}
	/* One byte at a time. */
	size_t cuts[sizeof(mixed)];
	for (size_t i = 0; i < len; i++)
		cuts[i] = i + 1;
	struct seen s = {0};
	feed_cut(&s, mixed, cuts, len - 1);
	assert_same(&whole, &s, "byte by byte");
}
END_TEST

/* A block ends at its blank line as it arrives, CRLF or not: no event waits for the next
 * one (an exec's output is shown as it comes). */
START_TEST(events_handed_on_at_their_end)
{
	static const char *const streams[] = {"data: a\n\ndata: b\n\n",
					      "data: a\r\n\r\ndata: b\r\n\r\n",
					      "{\"a\":1}\r\n\r\n{\"b\":2}\n\n"};
	for (size_t k = 0; k < sizeof(streams) / sizeof(streams[0]); k++) {
		struct seen s = {0};
		struct cell_client_sse f = framer(&s, 0, NULL);
		const char *t = streams[k];
		const char *second = strchr(t, 'b') - (t[0] == '{' ? 2 : 6);
		ck_assert_int_eq(cell_client_sse_feed(&f, t, (size_t)(second - t)), 0);
		ck_assert_msg(s.n == 1, "stream %zu: %d events after the first block", k, s.n);
		ck_assert_int_eq(cell_client_sse_feed(&f, second, strlen(second)), 0);
		ck_assert_msg(s.n == 2, "stream %zu: %d events after the second block", k, s.n);
		ck_assert_int_eq(cell_client_sse_finish(&f), 0);
		ck_assert_int_eq(s.n, 2);
		cell_client_sse_free(&f);
	}
}
END_TEST

/* CR alone is not a line end; "\r\n" lines inside a block lose their CR. */
START_TEST(crlf_lines)
{
	struct seen s = {0};
	feed_cut(&s, "data: one\r\ndata: two\r\n: note\r\n\r\n", NULL, 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_str_eq(s.ev[0], "one\ntwo");
}
END_TEST

/* Only comments, other fields and blank lines: no event. */
START_TEST(comments_only)
{
	struct seen s = {0};
	feed_cut(&s, ": a\n\n:b\n\n\n\nevent: x\nretry: 5\n\n", NULL, 0);
	ck_assert_int_eq(s.n, 0);
}
END_TEST

/* What is left without a blank line is one last block when the stream ends. */
START_TEST(finish_hands_on_the_rest)
{
	struct seen s = {0};
	struct cell_client_sse f = framer(&s, 0, NULL);
	ck_assert_int_eq(cell_client_sse_feed(&f, "data: a\n\ndata: tail", 19), 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_int_eq(cell_client_sse_finish(&f), 0);
	ck_assert_int_eq(s.n, 2);
	ck_assert_str_eq(s.ev[1], "tail");
	cell_client_sse_free(&f);
}
END_TEST

/* The callback's 1 ends the stream: later events, in the same chunk or after, are dropped. */
START_TEST(done_stops_delivery)
{
	struct seen s = {.stop_at = 2};
	struct cell_client_sse f = framer(&s, 0, NULL);
	const char *t = "{\"a\":1}\n\n{\"b\":2}\n{\"c\":3}\n\n{\"d\":4}\n\n";
	ck_assert_int_eq(cell_client_sse_feed(&f, t, strlen(t)), 1);
	ck_assert(cell_client_sse_done(&f));
	ck_assert_int_eq(cell_client_sse_feed(&f, t, strlen(t)), 0);
	ck_assert_int_eq(cell_client_sse_finish(&f), 0);
	ck_assert_int_eq(s.n, 2);
	cell_client_sse_free(&f);
}
END_TEST

START_TEST(callback_error_returned)
{
	struct seen s = {.fail_at = 1};
	struct cell_client_sse f = framer(&s, 0, NULL);
	ck_assert_int_eq(cell_client_sse_feed(&f, "data: a\n\n", 9), -EPIPE);
	cell_client_sse_free(&f);
}
END_TEST

/* An event over the bound is refused (-EMSGSIZE, err says why), whether it arrives in one
 * piece or grows over several feeds, complete or not; one of exactly the bound passes. */
START_TEST(oversized_event_refused)
{
	char big[64];
	memset(big, 'x', sizeof(big));
	struct cell_error err = {0};

	struct seen s = {0};
	struct cell_client_sse f = framer(&s, 32, &err);
	ck_assert_int_eq(cell_client_sse_feed(&f, big, 33), -EMSGSIZE);
	ck_assert_int_eq(err.code, EMSGSIZE);
	ck_assert_msg(strstr(err.msg, "larger than 32"), "message: %s", err.msg);
	cell_client_sse_free(&f);

	err = (struct cell_error){0};
	f = framer(&s, 32, &err);
	ck_assert_int_eq(cell_client_sse_feed(&f, big, 20), 0);
	ck_assert_int_eq(cell_client_sse_feed(&f, big, 20), -EMSGSIZE);
	ck_assert_int_eq(err.code, EMSGSIZE);
	cell_client_sse_free(&f);

	char block[64];
	memcpy(block, "data: ", 6);
	memset(block + 6, 'y', 40);
	memcpy(block + 46, "\n\n", 2);
	f = framer(&s, 32, &err);
	ck_assert_int_eq(cell_client_sse_feed(&f, block, 48), -EMSGSIZE);
	cell_client_sse_free(&f);

	s = (struct seen){0};
	f = framer(&s, 32, &err);
	memcpy(block, "data: ", 6);
	memset(block + 6, 'z', 26); /* a block of exactly 32 bytes */
	memcpy(block + 32, "\n\n", 2);
	ck_assert_int_eq(cell_client_sse_feed(&f, block, 34), 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(strlen(s.ev[0]), 26);
	cell_client_sse_free(&f);
}
END_TEST

/* Many small events in one chunk larger than the bound are not one large event. */
START_TEST(many_small_events_in_one_chunk)
{
	char text[EVENTS_MAX * 9 + 1] = "";
	for (int i = 0; i < EVENTS_MAX; i++)
		strcat(text, "data: e\n\n"); /* 9 bytes each, 144 in all */
	struct seen s = {0};
	struct cell_error err = {0};
	struct cell_client_sse f = framer(&s, 32, &err);
	ck_assert_int_eq(cell_client_sse_feed(&f, text, strlen(text)), 0);
	ck_assert_int_eq(cell_client_sse_finish(&f), 0);
	ck_assert_int_eq(s.n, EVENTS_MAX);
	cell_client_sse_free(&f);
}
END_TEST

static Suite *client_sse_suite(void)
{
	Suite *s = suite_create("client_sse");
	TCase *tc = tcase_create("framer");
	tcase_add_test(tc, kinds_of_blocks);
	tcase_add_test(tc, split_at_every_byte);
	tcase_add_test(tc, events_handed_on_at_their_end);
	tcase_add_test(tc, crlf_lines);
	tcase_add_test(tc, comments_only);
	tcase_add_test(tc, finish_hands_on_the_rest);
	tcase_add_test(tc, done_stops_delivery);
	tcase_add_test(tc, callback_error_returned);
	tcase_add_test(tc, oversized_event_refused);
	tcase_add_test(tc, many_small_events_in_one_chunk);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(client_sse_suite());
}
