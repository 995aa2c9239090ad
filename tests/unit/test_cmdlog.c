/* A command's kept output (src/celld/cmdlog.c): the newest CMD_LOG_MAX bytes in a buffer
 * that grows by doubling up to that bound, the oldest bytes dropped a quarter of the window
 * at a time, offsets that count everything ever written (dropping moves only the start),
 * reads that move a stale cursor up to the oldest kept byte, halving (trim) and dropping
 * whole with the capacity they give back; the time index (marks bounded, coarsened when
 * full, dropped with the bytes) and the offsets of "since" and "tail". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/celld/cmdlog.h"
#include "unit.h"

/* The byte at offset off of everything written: a pattern that tells offsets apart. */
static char byte_at(uint64_t off)
{
	return (char)(off * 7 + off / 251);
}

/* Append len bytes that continue the pattern at l's end, the way commands.c does (fit,
 * then append with the growth fit asked for); returns the capacity added. */
static size_t put(struct cmdlog *l, size_t len)
{
	char *data = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(data);
	uint64_t end = cmdlog_end(l);
	for (size_t i = 0; i < len; i++)
		data[i] = byte_at(end + i);
	const char *p = data;
	size_t n = len;
	size_t grow = cmdlog_fit(l, &p, &n);
	size_t added = cmdlog_append(l, p, n, grow);
	ck_assert_uint_eq(added, grow);
	ck_assert_uint_eq(cmdlog_end(l), end + len);
	free(data);
	return added;
}

/* Everything kept is the pattern, from start to end, within the window and the buffer. */
static void ck_kept(const struct cmdlog *l)
{
	ck_assert_uint_le(l->len, l->cap);
	ck_assert_uint_le(l->cap, CMD_LOG_MAX);
	for (size_t i = 0; i < l->len; i++)
		if (l->buf[i] != byte_at(l->start + i))
			ck_abort_msg("byte %zu (offset %llu) is wrong", i,
				     (unsigned long long)(l->start + i));
}

/* Read [pos, end) in pieces of at most piece bytes; returns the bytes, *n their count. */
static char *read_all(const struct cmdlog *l, uint64_t *pos, size_t piece, size_t *n)
{
	uint64_t end = cmdlog_end(l);
	char *out = malloc(CMD_LOG_MAX + 1);
	ck_assert_ptr_nonnull(out);
	*n = 0;
	/* Checked once after the loop: every ck_assert records its place (a write). */
	size_t got, most = 0;
	while (*n <= CMD_LOG_MAX) {
		size_t room = CMD_LOG_MAX + 1 - *n;
		got = cmdlog_read(l, pos, end, out + *n, piece < room ? piece : room);
		if (!got)
			break;
		most = got > most ? got : most;
		*n += got;
	}
	ck_assert_uint_le(most, piece);
	ck_assert_uint_le(*n, CMD_LOG_MAX);
	ck_assert_uint_eq(*pos, end);
	return out;
}

START_TEST(empty_log)
{
	struct cmdlog l = {0};
	char buf[16];
	uint64_t pos = 0;
	ck_assert_uint_eq(cmdlog_end(&l), 0);
	ck_assert_uint_eq(cmdlog_read(&l, &pos, cmdlog_end(&l), buf, sizeof(buf)), 0);
	ck_assert_uint_eq(pos, 0);
	ck_assert_uint_eq(put(&l, 0), 0); /* an empty append takes no buffer */
	ck_assert_ptr_null(l.buf);
	cmdlog_free(&l);
}
END_TEST

START_TEST(appends_within_window)
{
	struct cmdlog l = {0};
	ck_assert_uint_eq(put(&l, 10), 4096); /* the first buffer */
	ck_assert_uint_eq(put(&l, 4086), 0);  /* fills it exactly */
	ck_assert_uint_eq(put(&l, 1), 4096);  /* doubles */
	ck_assert_uint_eq(l.start, 0);
	ck_assert_uint_eq(l.len, 4097);
	ck_assert_uint_eq(l.cap, 8192);
	ck_kept(&l);
	size_t n;
	uint64_t pos = 0;
	char *all = read_all(&l, &pos, SIZE_MAX, &n);
	ck_assert_uint_eq(n, 4097);
	ck_assert_int_eq(memcmp(all, l.buf, n), 0);
	free(all);
	cmdlog_free(&l);
}
END_TEST

START_TEST(quarter_drop_past_window)
{
	struct cmdlog l = {0};
	put(&l, CMD_LOG_MAX);
	ck_assert_uint_eq(l.len, CMD_LOG_MAX);
	ck_assert_uint_eq(l.start, 0);
	/* One byte past the window drops a quarter of it, not one byte. */
	ck_assert_uint_eq(put(&l, 1), 0);
	ck_assert_uint_eq(l.start, CMD_LOG_MAX / 4);
	ck_assert_uint_eq(l.len, CMD_LOG_MAX - CMD_LOG_MAX / 4 + 1);
	ck_kept(&l);
	/* The next small appends fit in the room that made. */
	uint64_t start = l.start;
	put(&l, CMD_LOG_MAX / 4 - 1);
	ck_assert_uint_eq(l.start, start);
	ck_assert_uint_eq(l.len, CMD_LOG_MAX);
	/* More than a quarter past: exactly what does not fit goes. */
	put(&l, CMD_LOG_MAX / 2);
	ck_assert_uint_eq(l.start, start + CMD_LOG_MAX / 2);
	ck_assert_uint_eq(l.len, CMD_LOG_MAX);
	ck_assert_uint_eq(cmdlog_end(&l), CMD_LOG_MAX + CMD_LOG_MAX / 4 + CMD_LOG_MAX / 2);
	ck_kept(&l);
	cmdlog_free(&l);
}
END_TEST

START_TEST(huge_append_keeps_newest)
{
	struct cmdlog l = {0};
	put(&l, 1000);
	put(&l, CMD_LOG_MAX + 12345);
	ck_assert_uint_eq(l.len, CMD_LOG_MAX);
	ck_assert_uint_eq(l.cap, CMD_LOG_MAX);
	ck_assert_uint_eq(cmdlog_end(&l), 1000 + CMD_LOG_MAX + 12345);
	ck_assert_uint_eq(l.start, 1000 + 12345);
	ck_kept(&l);
	/* Exactly the window in one piece replaces everything kept. */
	put(&l, CMD_LOG_MAX);
	ck_assert_uint_eq(l.len, CMD_LOG_MAX);
	ck_assert_uint_eq(l.start, 1000 + 12345 + CMD_LOG_MAX);
	ck_kept(&l);
	cmdlog_free(&l);
}
END_TEST

START_TEST(offsets_monotonic)
{
	struct cmdlog l = {0};
	uint64_t end = 0, start = 0, written = 0;
	srand(9);
	for (int i = 0; i < 150; i++) {
		size_t len = (size_t)rand() % (CMD_LOG_MAX / 8);
		if (i % 50 == 49)
			len = CMD_LOG_MAX + (size_t)rand() % 4096;
		put(&l, len);
		written += len;
		if (i % 37 == 36)
			cmdlog_trim(&l);
		if (i % 61 == 60)
			cmdlog_drop(&l, false);
		ck_assert_uint_ge(cmdlog_end(&l), end);
		ck_assert_uint_ge(l.start, start);
		end = cmdlog_end(&l);
		start = l.start;
		ck_assert_uint_eq(end, written);
		if (i % 10 == 0)
			ck_kept(&l);
	}
	ck_kept(&l);
	cmdlog_free(&l);
}
END_TEST

START_TEST(stale_cursor_moves_up)
{
	struct cmdlog l = {0};
	put(&l, CMD_LOG_MAX);
	put(&l, CMD_LOG_MAX / 2); /* drops the oldest half */
	ck_assert_uint_eq(l.start, CMD_LOG_MAX / 2);
	char buf[64];
	uint64_t pos = 10; /* older than anything kept */
	size_t n = cmdlog_read(&l, &pos, cmdlog_end(&l), buf, sizeof(buf));
	ck_assert_uint_eq(n, sizeof(buf));
	ck_assert_uint_eq(pos, l.start + sizeof(buf));
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(buf[i], byte_at(l.start + i));
	/* A read stops at end, and at the end of what was written. */
	pos = cmdlog_end(&l) - 5;
	ck_assert_uint_eq(cmdlog_read(&l, &pos, cmdlog_end(&l) + 100, buf, sizeof(buf)), 5);
	ck_assert_uint_eq(cmdlog_read(&l, &pos, cmdlog_end(&l), buf, sizeof(buf)), 0);
	pos = l.start + 100;
	ck_assert_uint_eq(cmdlog_read(&l, &pos, l.start + 103, buf, sizeof(buf)), 3);
	ck_assert_uint_eq(pos, l.start + 103);
	cmdlog_free(&l);
}
END_TEST

START_TEST(pieces_equal_whole)
{
	struct cmdlog l = {0};
	put(&l, CMD_LOG_MAX - 3);
	put(&l, 777777); /* past the window: a quarter dropped */
	size_t whole_n, piece_n;
	uint64_t pos = 0;
	char *whole = read_all(&l, &pos, SIZE_MAX, &whole_n);
	ck_assert_uint_eq(whole_n, l.len);
	const size_t pieces[] = {1, 7, 4096, 65537, CMD_LOG_MAX / 3};
	for (size_t i = 0; i < sizeof(pieces) / sizeof(*pieces); i++) {
		pos = 0;
		char *got = read_all(&l, &pos, pieces[i], &piece_n);
		ck_assert_uint_eq(piece_n, whole_n);
		ck_assert_int_eq(memcmp(got, whole, whole_n), 0);
		free(got);
	}
	free(whole);
	cmdlog_free(&l);
}
END_TEST

START_TEST(trim_keeps_newest_half)
{
	struct cmdlog l = {0};
	put(&l, 3001); /* len 3001 in a 4096 buffer */
	uint64_t end = cmdlog_end(&l);
	ck_assert_uint_eq(cmdlog_trim(&l), 4096 - 1500);
	ck_assert_uint_eq(l.len, 1500);
	ck_assert_uint_eq(l.cap, 1500);
	ck_assert_uint_eq(l.start, 1501);
	ck_assert_uint_eq(cmdlog_end(&l), end);
	ck_assert(!l.dropped);
	ck_kept(&l);
	/* Appends go on after a trim, the buffer doubling from its trimmed size. */
	ck_assert_uint_eq(put(&l, 1), 1500);
	ck_assert_uint_eq(l.cap, 3000);
	ck_kept(&l);
	/* Halving one byte keeps nothing: the whole buffer goes, the end stays. */
	cmdlog_drop(&l, false);
	put(&l, 1);
	end = cmdlog_end(&l);
	ck_assert_uint_eq(cmdlog_trim(&l), 4096);
	ck_assert_uint_eq(l.len, 0);
	ck_assert_uint_eq(l.cap, 0);
	ck_assert_ptr_null(l.buf);
	ck_assert_uint_eq(cmdlog_end(&l), end);
	ck_assert(!l.dropped);
	cmdlog_free(&l);
}
END_TEST

START_TEST(drop_keeps_end)
{
	struct cmdlog l = {0};
	put(&l, 5000);
	uint64_t end = cmdlog_end(&l);
	ck_assert_uint_eq(cmdlog_drop(&l, true), 8192);
	ck_assert(l.dropped);
	ck_assert_uint_eq(cmdlog_end(&l), end);
	ck_assert_uint_eq(l.start, end);
	ck_assert_uint_eq(l.cap, 0);
	ck_assert_ptr_null(l.buf);
	/* Reading after the drop returns nothing, from any cursor. */
	char buf[64];
	const uint64_t cursors[] = {0, 4999, end};
	for (size_t i = 0; i < 3; i++) {
		uint64_t pos = cursors[i];
		ck_assert_uint_eq(cmdlog_read(&l, &pos, cmdlog_end(&l), buf, sizeof(buf)), 0);
		ck_assert_uint_eq(pos, end);
	}
	/* Dropping again frees nothing; new output follows the old end. */
	ck_assert_uint_eq(cmdlog_drop(&l, true), 0);
	put(&l, 10);
	ck_assert_uint_eq(l.start, end);
	ck_kept(&l);
	cmdlog_free(&l);
}
END_TEST

START_TEST(drop_notes_only_a_buffer)
{
	struct cmdlog l = {0};
	ck_assert_uint_eq(cmdlog_drop(&l, true), 0);
	ck_assert(!l.dropped); /* nothing was kept, nothing to tell */
	put(&l, 1);
	ck_assert_uint_eq(cmdlog_drop(&l, false), 4096);
	ck_assert(!l.dropped);
	cmdlog_free(&l);
}
END_TEST

START_TEST(lose_moves_end)
{
	struct cmdlog l = {0};
	put(&l, 100);
	cmdlog_lose(&l, 50);
	ck_assert_uint_eq(cmdlog_end(&l), 150);
	ck_assert_uint_eq(l.start, 150);
	ck_assert_uint_eq(l.len, 0);
	ck_assert_uint_eq(l.cap, 4096); /* the buffer stays */
	ck_assert_uint_eq(put(&l, 10), 0);
	ck_kept(&l);
	cmdlog_free(&l);
}
END_TEST

START_TEST(growth_bounded)
{
	struct cmdlog l = {0};
	size_t cap = 0, total = 0;
	for (int i = 0; i < 64; i++) {
		total += put(&l, 300000);
		ck_assert_uint_eq(total, l.cap);
		ck_assert_uint_le(l.cap, CMD_LOG_MAX);
		ck_assert_uint_ge(l.cap, l.len);
		/* Doubling from 4096: a power of two, or the bound. */
		ck_assert(l.cap == CMD_LOG_MAX || !(l.cap & (l.cap - 1)));
		ck_assert_uint_ge(l.cap, cap);
		cap = l.cap;
	}
	ck_assert_uint_eq(l.cap, CMD_LOG_MAX);
	ck_kept(&l);
	cmdlog_free(&l);
}
END_TEST

/* put, the bytes written at ms (marked first, as commands.c does). */
static void put_at(struct cmdlog *l, size_t len, int64_t ms)
{
	cmdlog_mark(l, ms);
	put(l, len);
}

/* Append text as it is (for the line tests). */
static void put_text(struct cmdlog *l, const char *text)
{
	const char *p = text;
	size_t n = strlen(text);
	size_t grow = cmdlog_fit(l, &p, &n);
	cmdlog_append(l, p, n, grow);
}

START_TEST(since_first_mark_at_or_after)
{
	struct cmdlog l = {0};
	ck_assert_uint_eq(cmdlog_since(&l, 0), 0); /* nothing written: the end */
	put_at(&l, 10, 1000);
	put_at(&l, 10, 1000 + CMDLOG_MARK_GAP_MS - 1); /* within the gap: the first mark's */
	put_at(&l, 5, 3000);
	ck_assert_uint_eq(l.n_marks, 2);
	ck_assert_uint_eq(cmdlog_since(&l, 0), 0);
	ck_assert_uint_eq(cmdlog_since(&l, 1000), 0);
	ck_assert_uint_eq(cmdlog_since(&l, 1001), 20);
	ck_assert_uint_eq(cmdlog_since(&l, 3000), 20);
	ck_assert_uint_eq(cmdlog_since(&l, 3001), 25); /* after everything: the end */
	cmdlog_free(&l);
}
END_TEST

START_TEST(mark_without_bytes_redated)
{
	struct cmdlog l = {0};
	cmdlog_mark(&l, 1000);
	cmdlog_mark(&l, 5000); /* nothing was written at 1000: the mark moves */
	put(&l, 7);
	ck_assert_uint_eq(l.n_marks, 1);
	ck_assert_uint_eq(cmdlog_since(&l, 2000), 0);
	ck_assert_uint_eq(cmdlog_since(&l, 5001), 7);
	cmdlog_free(&l);
}
END_TEST

START_TEST(index_bounded_and_coarsened)
{
	struct cmdlog l = {0};
	/* One byte a second for an hour: byte k written at k seconds. */
	for (int64_t k = 0; k < 3600; k++) {
		put_at(&l, 1, k * 1000);
		ck_assert_uint_le(l.n_marks, CMDLOG_MARKS);
	}
	ck_assert_int_gt(l.gap_ms, CMDLOG_MARK_GAP_MS);
	uint64_t widest = 0;
	for (unsigned i = 1; i < l.n_marks; i++) {
		ck_assert_uint_gt(l.marks[i].off, l.marks[i - 1].off);
		ck_assert_int_gt(l.marks[i].ms, l.marks[i - 1].ms);
		if (l.marks[i].off - l.marks[i - 1].off > widest)
			widest = l.marks[i].off - l.marks[i - 1].off;
	}
	/* The hour is indexed evenly: no interval wider than four times an even share. */
	ck_assert_uint_le(widest, 4 * 3600 / CMDLOG_MARKS);
	/* Never a byte older than asked for, and at most one interval's bytes left out. */
	for (int64_t t = 0; t < 3600; t += 7) {
		uint64_t off = cmdlog_since(&l, t * 1000);
		ck_assert_uint_ge(off, (uint64_t)t);
		ck_assert_uint_le(off, (uint64_t)t + widest);
	}
	cmdlog_free(&l);
}
END_TEST

START_TEST(marks_go_with_their_bytes)
{
	struct cmdlog l = {0};
	put_at(&l, CMD_LOG_MAX / 2, 1000);
	put_at(&l, CMD_LOG_MAX / 2, 2000);
	put_at(&l, CMD_LOG_MAX / 2, 3000); /* the first half's bytes are dropped */
	ck_assert_uint_eq(l.start, CMD_LOG_MAX / 2);
	ck_assert_uint_eq(l.n_marks, 2);
	ck_assert_uint_eq(l.marks[0].off, l.start);
	/* Older than anything kept: from the oldest kept byte. */
	ck_assert_uint_eq(cmdlog_since(&l, 0), l.start);
	ck_assert_uint_eq(cmdlog_since(&l, 2500), CMD_LOG_MAX);
	/* Halved: the second mark's bytes are gone with it; the third's mark stays. */
	cmdlog_trim(&l);
	ck_assert_uint_eq(l.n_marks, 1);
	ck_assert_uint_eq(l.marks[0].off, l.start);
	ck_assert_uint_eq(cmdlog_since(&l, 1500), l.start);
	/* A drop keeps no byte: every time asked for is at the end. */
	cmdlog_drop(&l, true);
	ck_assert_uint_le(l.n_marks, 1);
	ck_assert_uint_eq(cmdlog_since(&l, 0), cmdlog_end(&l));
	/* A piece larger than the window: its mark is at the oldest byte kept of it. */
	put_at(&l, CMD_LOG_MAX + 100, 4000);
	ck_assert_uint_eq(cmdlog_since(&l, 4000), l.start);
	ck_kept(&l);
	cmdlog_free(&l);
}
END_TEST

START_TEST(tail_lines)
{
	struct cmdlog l = {0};
	ck_assert_uint_eq(cmdlog_tail(&l, 3), 0);
	put_text(&l, "one\ntwo\nthree\n");
	ck_assert_uint_eq(cmdlog_tail(&l, 0), 14);
	ck_assert_uint_eq(cmdlog_tail(&l, 1), 8); /* "three\n" */
	ck_assert_uint_eq(cmdlog_tail(&l, 2), 4); /* "two\nthree\n" */
	ck_assert_uint_eq(cmdlog_tail(&l, 3), 0);
	ck_assert_uint_eq(cmdlog_tail(&l, 99), 0); /* fewer kept: all of them */
	put_text(&l, "four");			   /* a last line without its newline */
	ck_assert_uint_eq(cmdlog_tail(&l, 1), 14);
	ck_assert_uint_eq(cmdlog_tail(&l, 2), 8);
	put_text(&l, "\n\n"); /* an empty line is a line */
	ck_assert_uint_eq(cmdlog_tail(&l, 1), 19);
	ck_assert_uint_eq(cmdlog_tail(&l, 2), 14);
	cmdlog_free(&l);
}
END_TEST

START_TEST(tail_within_kept)
{
	struct cmdlog l = {0};
	put_text(&l, "old line\n");
	put(&l, CMD_LOG_MAX); /* the pattern, then the window full of it */
	ck_assert_uint_ge(cmdlog_tail(&l, UINT64_MAX), l.start);
	ck_assert_uint_le(cmdlog_tail(&l, UINT64_MAX), cmdlog_end(&l));
	cmdlog_drop(&l, false);
	ck_assert_uint_eq(cmdlog_tail(&l, 5), cmdlog_end(&l));
	cmdlog_free(&l);
}
END_TEST

static Suite *cmdlog_suite(void)
{
	Suite *s = suite_create("cmdlog");
	TCase *tc = tcase_create("cmdlog");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, empty_log);
	tcase_add_test(tc, appends_within_window);
	tcase_add_test(tc, quarter_drop_past_window);
	tcase_add_test(tc, huge_append_keeps_newest);
	tcase_add_test(tc, offsets_monotonic);
	tcase_add_test(tc, stale_cursor_moves_up);
	tcase_add_test(tc, pieces_equal_whole);
	tcase_add_test(tc, trim_keeps_newest_half);
	tcase_add_test(tc, drop_keeps_end);
	tcase_add_test(tc, drop_notes_only_a_buffer);
	tcase_add_test(tc, lose_moves_end);
	tcase_add_test(tc, growth_bounded);
	tcase_add_test(tc, since_first_mark_at_or_after);
	tcase_add_test(tc, mark_without_bytes_redated);
	tcase_add_test(tc, index_bounded_and_coarsened);
	tcase_add_test(tc, marks_go_with_their_bytes);
	tcase_add_test(tc, tail_lines);
	tcase_add_test(tc, tail_within_kept);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(cmdlog_suite());
}
