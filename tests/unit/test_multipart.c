/* celld's streaming multipart/form-data parser (src/celld/http/multipart.c): the same parts
 * whatever way the body is cut into feeds (a boundary split across two), a body without
 * its closing boundary refused, part headers over the limit refused, and a boundary the
 * Content-Type must carry. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/celld/http/multipart.h"
#include "unit.h"

/* What the callbacks saw: "name=data;" per part. */
struct seen {
	char text[1 << 16];
	size_t len;
	int begins, ends;
	int fail_at_begin; /* part_begin returns -EPERM for this part (1-based), 0: never */
};

static void seen_add(struct seen *s, const char *data, size_t len)
{
	ck_assert_uint_lt(s->len + len, sizeof(s->text));
	memcpy(s->text + s->len, data, len);
	s->len += len;
	s->text[s->len] = '\0';
}

static int on_begin(void *cls, const char *name)
{
	struct seen *s = cls;
	s->begins++;
	if (s->fail_at_begin == s->begins)
		return -EPERM;
	seen_add(s, name, strlen(name));
	seen_add(s, "=", 1);
	return 0;
}

static int on_data(void *cls, const char *data, size_t len)
{
	seen_add(cls, data, len);
	return 0;
}

static int on_end(void *cls)
{
	struct seen *s = cls;
	s->ends++;
	seen_add(s, ";", 1);
	return 0;
}

static const struct multipart_ops ops = {on_begin, on_data, on_end};

#define CT "multipart/form-data; boundary=XyZ"
#define BODY                                                                                       \
	"preamble\r\n"                                                                             \
	"--XyZ\r\n"                                                                                \
	"Content-Disposition: form-data; name=\"metadata\"\r\n"                                    \
	"Content-Type: application/json\r\n\r\n"                                                   \
	"{\"path\":\"/a\"}\r\n"                                                                    \
	"--XyZ\r\n"                                                                                \
	"Content-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n"                    \
	"line1\r\n--XyNot a boundary\r\n-\r\nend\r\n"                                              \
	"--XyZ--\r\n"                                                                              \
	"epilogue"
#define WANT "metadata={\"path\":\"/a\"};file=line1\r\n--XyNot a boundary\r\n-\r\nend;"

/* Parse body fed in pieces of step bytes; returns feed's/finish's result. */
static int parse_in_steps(const char *ct, const char *body, size_t len, size_t step, struct seen *s,
			  struct cell_error *err)
{
	struct multipart *mp = multipart_new(ct, &ops, s, err);
	ck_assert_msg(mp, "multipart_new: %s", err->msg);
	int r = 0;
	for (size_t off = 0; r == 0 && off < len; off += step)
		r = multipart_feed(mp, body + off, len - off < step ? len - off : step, err);
	if (r == 0)
		r = multipart_finish(mp, err);
	multipart_free(mp);
	return r;
}

START_TEST(every_split_gives_the_same_parts)
{
	size_t len = strlen(BODY);
	for (size_t step = 1; step <= len; step++) {
		struct seen s = {0};
		struct cell_error err = {0};
		int r = parse_in_steps(CT, BODY, len, step, &s, &err);
		ck_assert_msg(r == 0, "feeds of %zu bytes: %d %s", step, r, err.msg);
		ck_assert_msg(!strcmp(s.text, WANT), "feeds of %zu bytes gave '%s'", step, s.text);
		ck_assert_int_eq(s.begins, 2);
		ck_assert_int_eq(s.ends, 2);
	}
}
END_TEST

/* The delimiter cut at each position between two feeds. */
START_TEST(boundary_split_across_two_feeds)
{
	const char *body = BODY;
	const char *second = strstr(body + 20, "\r\n--XyZ\r\n");
	ck_assert_ptr_nonnull(second);
	for (size_t cut = 0; cut <= 9; cut++) {
		size_t at = (size_t)(second - body) + cut;
		struct seen s = {0};
		struct cell_error err = {0};
		struct multipart *mp = multipart_new(CT, &ops, &s, &err);
		ck_assert_int_eq(multipart_feed(mp, body, at, &err), 0);
		ck_assert_int_eq(multipart_feed(mp, body + at, strlen(body) - at, &err), 0);
		ck_assert_int_eq(multipart_finish(mp, &err), 0);
		ck_assert_str_eq(s.text, WANT);
		multipart_free(mp);
	}
}
END_TEST

START_TEST(missing_closing_boundary_refused)
{
	static const char *const cut[] = {
	    "--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\ndata",
	    "--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\ndata\r\n--XyZ",
	    "--XyZ\r\nContent-Disposition: form-data; name=\"fi",
	    "",
	};
	for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
		struct seen s = {0};
		struct cell_error err = {0};
		int r = parse_in_steps(CT, cut[i], strlen(cut[i]), 7, &s, &err);
		ck_assert_msg(r == -EINVAL, "body %zu: %d", i, r);
		ck_assert_msg(strstr(err.msg, "closing boundary"), "body %zu: %s", i, err.msg);
	}
}
END_TEST

START_TEST(oversized_headers_refused)
{
	size_t n = 9000; /* over the 8 KiB header limit, without the blank line that ends them */
	char *body = malloc(n + 64);
	ck_assert_ptr_nonnull(body);
	int len = sprintf(body, "--XyZ\r\nX-Pad: ");
	memset(body + len, 'a', n);
	len += (int)n;
	for (size_t step = 100; step <= 10000; step *= 10) {
		struct seen s = {0};
		struct cell_error err = {0};
		int r = parse_in_steps(CT, body, (size_t)len, step, &s, &err);
		ck_assert_msg(r == -EINVAL && strstr(err.msg, "headers too long"),
			      "step %zu: %d %s", step, r, err.msg);
		ck_assert_int_eq(s.begins, 0);
	}
	free(body);
}
END_TEST

START_TEST(malformed_parts_refused)
{
	struct seen s = {0};
	struct cell_error err = {0};
	const char *noname = "--XyZ\r\nContent-Type: text/plain\r\n\r\nx\r\n--XyZ--";
	ck_assert_int_eq(parse_in_steps(CT, noname, strlen(noname), 5, &s, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "Content-Disposition"), "%s", err.msg);
	const char *junk = "--XyZjunk\r\n";
	ck_assert_int_eq(parse_in_steps(CT, junk, strlen(junk), 64, &s, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "after a boundary"), "%s", err.msg);
	const char *nul = "--XyZ\r\nContent-Disposition: form-data; name=\"a\0b\"\r\n\r\n";
	ck_assert_int_eq(parse_in_steps(CT, nul, 60, 64, &s, &err), -EINVAL);
}
END_TEST

START_TEST(callback_error_stops_the_parser)
{
	struct seen s = {.fail_at_begin = 2};
	struct cell_error err = {0};
	ck_assert_int_eq(parse_in_steps(CT, BODY, strlen(BODY), 4096, &s, &err), -EPERM);
	ck_assert_int_eq(s.begins, 2);
	ck_assert_int_eq(s.ends, 1);
}
END_TEST

START_TEST(content_type_needs_a_boundary)
{
	static const char *const bad[] = {
	    NULL,
	    "application/json",
	    "multipart/form-data",
	    "multipart/form-data; boundary=",
	    "multipart/form-data; boundary=\"unclosed",
	    "multipart/form-data; boundary="
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* 71 */
	};
	struct seen s = {0};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cell_error err = {0};
		struct multipart *mp = multipart_new(bad[i], &ops, &s, &err);
		ck_assert_msg(!mp, "Content-Type '%s' accepted", bad[i] ? bad[i] : "(null)");
		ck_assert_msg(strstr(err.msg, "boundary"), "%s", err.msg);
	}
	/* quoted, case-insensitive, among other parameters */
	const char *body =
	    "--a b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n--a b--";
	struct cell_error err = {0};
	ck_assert_int_eq(parse_in_steps("Multipart/Form-Data; charset=utf-8; BOUNDARY=\"a b\"",
					body, strlen(body), 3, &s, &err),
			 0);
	ck_assert_str_eq(s.text, "f=x;");
}
END_TEST

/* Each part's filename: quoted, with a ';' and spaces kept, after other parameters; a part
 * without one says "". */
struct names {
	struct multipart *mp;
	char seen[512];
};

static int names_begin(void *cls, const char *name)
{
	struct names *n = cls;
	size_t len = strlen(n->seen);
	snprintf(n->seen + len, sizeof(n->seen) - len, "%s:%s|", name, multipart_filename(n->mp));
	return 0;
}

static int names_data(void *cls, const char *data, size_t len)
{
	(void)cls;
	(void)data;
	(void)len;
	return 0;
}

static int names_end(void *cls)
{
	(void)cls;
	return 0;
}

START_TEST(part_filenames)
{
	static const struct multipart_ops nops = {names_begin, names_data, names_end};
	const char *body =
	    "--B\r\n"
	    "Content-Disposition: form-data; name=\"file\"; filename=\"/tmp/a;b c.txt\"\r\n"
	    "\r\nx\r\n--B\r\n"
	    "content-disposition: form-data; filename=rel/p.txt; name=file\r\n"
	    "\r\ny\r\n--B\r\n"
	    "Content-Disposition: form-data; name=\"meta;data\"\r\n"
	    "\r\nz\r\n--B--";
	struct names n = {0};
	struct cell_error err = {0};
	n.mp = multipart_new("multipart/form-data; boundary=B", &nops, &n, &err);
	ck_assert_ptr_nonnull(n.mp);
	ck_assert_int_eq(multipart_feed(n.mp, body, strlen(body), &err), 0);
	ck_assert_int_eq(multipart_finish(n.mp, &err), 0);
	ck_assert_str_eq(n.seen, "file:/tmp/a;b c.txt|file:rel/p.txt|meta;data:|");
	multipart_free(n.mp);
}
END_TEST

static Suite *multipart_suite(void)
{
	Suite *s = suite_create("multipart");
	TCase *tc = tcase_create("multipart");
	tcase_add_test(tc, every_split_gives_the_same_parts);
	tcase_add_test(tc, boundary_split_across_two_feeds);
	tcase_add_test(tc, missing_closing_boundary_refused);
	tcase_add_test(tc, oversized_headers_refused);
	tcase_add_test(tc, malformed_parts_refused);
	tcase_add_test(tc, callback_error_stops_the_parser);
	tcase_add_test(tc, content_type_needs_a_boundary);
	tcase_add_test(tc, part_filenames);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(multipart_suite());
}
