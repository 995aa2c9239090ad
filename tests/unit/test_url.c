/* celld's percent-decoding of URL text (src/celld/http/url.c): escapes of either case decoded,
 * '+' a space only in a query (plus_space), and refused: a '%' without two hex digits after
 * it, and "%00" (a NUL would cut the text short wherever it is used next). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "../../src/celld/http/url.h"
#include "unit.h"

/* url_unescape of a copy of in: its result, the text in out. */
static int unescape(const char *in, bool plus_space, char *out, size_t size)
{
	ck_assert_uint_lt(strlen(in), size);
	strcpy(out, in);
	return url_unescape(out, plus_space);
}

static void ck_decodes(const char *in, bool plus_space, const char *want)
{
	char buf[256];
	ck_assert_msg(unescape(in, plus_space, buf, sizeof(buf)) == 0, "'%s' refused", in);
	ck_assert_msg(!strcmp(buf, want), "'%s' decoded to '%s', not '%s'", in, buf, want);
}

static void ck_refused(const char *in)
{
	char buf[256];
	for (int plus = 0; plus < 2; plus++)
		ck_assert_msg(unescape(in, plus, buf, sizeof(buf)) == -EINVAL,
			      "'%s' accepted (plus_space %d)", in, plus);
}

START_TEST(plain_text_unchanged)
{
	ck_decodes("", false, "");
	ck_decodes("abc/def.txt", false, "abc/def.txt");
	ck_decodes("a-b_c~d", true, "a-b_c~d");
}
END_TEST

START_TEST(escapes_decoded)
{
	ck_decodes("%41%62c", false, "Abc");
	ck_decodes("%2f%2F", false, "//"); /* either case of hex digit */
	ck_decodes("a%20b", false, "a b");
	ck_decodes("%25", false, "%");	   /* an escaped '%' */
	ck_decodes("%2541", false, "%41"); /* decoded once, not twice */
	ck_decodes("%C3%A9t%C3%A9", false, "\xc3\xa9t\xc3\xa9");
	ck_decodes("%2e%2e/x", false, "../x"); /* no path meaning here: that is the caller's */
	ck_decodes("%01%7f%ff", false, "\x01\x7f\xff");
}
END_TEST

START_TEST(plus_handling)
{
	ck_decodes("a+b", true, "a b");
	ck_decodes("a+b", false, "a+b");
	ck_decodes("%2B", true, "+"); /* an escaped '+' stays a '+' */
	ck_decodes("%2b+%20", true, "+  ");
	ck_decodes("++", false, "++");
}
END_TEST

START_TEST(malformed_escapes_refused)
{
	ck_refused("%");
	ck_refused("abc%");
	ck_refused("%4");
	ck_refused("a%4");
	ck_refused("%G1");
	ck_refused("%4G");
	ck_refused("%%41");
	ck_refused("%-1");
	ck_refused("% 41");
	ck_refused("ok%2");
}
END_TEST

START_TEST(nul_refused)
{
	ck_refused("%00");
	ck_refused("a%00b");
	ck_refused("%41%00");
	ck_refused("%000");
}
END_TEST

static Suite *url_suite(void)
{
	Suite *s = suite_create("url");
	TCase *tc = tcase_create("url_unescape");
	tcase_add_test(tc, plain_text_unchanged);
	tcase_add_test(tc, escapes_decoded);
	tcase_add_test(tc, plus_handling);
	tcase_add_test(tc, malformed_escapes_refused);
	tcase_add_test(tc, nul_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(url_suite());
}
