/* Preview tokens and preview host names (src/celld/preview.c): a token per sandbox and
 * port, stable for one secret and different for another, checked in constant time and
 * refused when cut, changed or made for another sandbox or port; a token of another purpose
 * (a label of its own) none of those nor another purpose's; the cookie and the query
 * parameter found among others and taken out of them; host names parsed strictly. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../src/celld/preview.h"
#include "unit.h"

static const unsigned char secret_a[PREVIEW_SECRET_LEN] = "0123456789abcdef0123456789abcdef";
static const unsigned char secret_b[PREVIEW_SECRET_LEN] = "fedcba9876543210fedcba9876543210";

START_TEST(tokens_per_sandbox_and_port)
{
	char t1[PREVIEW_TOKEN_LEN + 1], t2[PREVIEW_TOKEN_LEN + 1], t3[PREVIEW_TOKEN_LEN + 1];
	preview_secret_set(secret_a);
	ck_assert_int_eq(preview_token("abc", 8080, t1), 0);
	ck_assert_uint_eq(strlen(t1), PREVIEW_TOKEN_LEN);
	ck_assert_uint_eq(strspn(t1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				     "0123456789-_"),
			  PREVIEW_TOKEN_LEN);
	ck_assert_int_eq(preview_token("abc", 8080, t2), 0);
	ck_assert_str_eq(t1, t2); /* no state: made again, the same */
	ck_assert_int_eq(preview_token("abc", 8081, t2), 0);
	ck_assert_str_ne(t1, t2);
	ck_assert_int_eq(preview_token("abd", 8080, t3), 0);
	ck_assert_str_ne(t1, t3);
	ck_assert(preview_token_ok("abc", 8080, t1, strlen(t1)));
	ck_assert(!preview_token_ok("abc", 8081, t1, strlen(t1)));
	ck_assert(!preview_token_ok("abd", 8080, t1, strlen(t1)));
	ck_assert(!preview_token_ok("abc", 8080, t1, strlen(t1) - 1));
	ck_assert(!preview_token_ok("abc", 8080, "", 0));
	ck_assert(!preview_token_ok("abc", 8080, NULL, 0));
	t3[0] = '\0';
	memcpy(t3, t1, sizeof(t3));
	t3[5] = t3[5] == 'A' ? 'B' : 'A';
	ck_assert(!preview_token_ok("abc", 8080, t3, strlen(t3)));
	/* Another secret: every token changes (rotation revokes them). */
	preview_secret_set(secret_b);
	ck_assert_int_eq(preview_token("abc", 8080, t2), 0);
	ck_assert_str_ne(t1, t2);
	ck_assert(!preview_token_ok("abc", 8080, t1, strlen(t1)));
	ck_assert_int_eq(preview_token("Not-An-Id", 8080, t2), -EINVAL);
	ck_assert_int_eq(preview_token("abc", 0, t2), -EINVAL);
	ck_assert_int_eq(preview_token("abc", 65536, t2), -EINVAL);
}
END_TEST

/* A sandbox's token for a purpose of its own (E2B's envd and traffic tokens): stable, per
 * sandbox and per label, never a port's preview token (E2B's envd port 49983 included) nor
 * another label's, each check taking its own label's only. A preview's label or one that
 * could read as two lines is refused. */
START_TEST(tokens_per_purpose)
{
	static const char *const labels[] = {"cell-e2b-envd-v1", "cell-e2b-traffic-v1"};
	char t[2][PREVIEW_TOKEN_LEN + 1], again[PREVIEW_TOKEN_LEN + 1], port[PREVIEW_TOKEN_LEN + 1];
	preview_secret_set(secret_a);
	for (size_t i = 0; i < 2; i++) {
		ck_assert_int_eq(preview_sandbox_token(labels[i], "abc", t[i]), 0);
		ck_assert_uint_eq(strlen(t[i]), PREVIEW_TOKEN_LEN);
		ck_assert_int_eq(preview_sandbox_token(labels[i], "abc", again), 0);
		ck_assert_str_eq(t[i], again);
		ck_assert_int_eq(preview_sandbox_token(labels[i], "abd", again), 0);
		ck_assert_str_ne(t[i], again);
		ck_assert(preview_sandbox_token_ok(labels[i], "abc", t[i], strlen(t[i])));
		ck_assert(!preview_sandbox_token_ok(labels[i], "abd", t[i], strlen(t[i])));
		ck_assert(!preview_sandbox_token_ok(labels[i], "abc", t[i], strlen(t[i]) - 1));
		ck_assert(!preview_sandbox_token_ok(labels[i], "abc", NULL, 0));
		/* No port's preview token is it, and it opens no port. */
		static const unsigned ports[] = {49983, 49999, 8080, 1, 65535};
		for (size_t k = 0; k < sizeof(ports) / sizeof(ports[0]); k++) {
			ck_assert_int_eq(preview_token("abc", ports[k], port), 0);
			ck_assert_str_ne(t[i], port);
			ck_assert(!preview_sandbox_token_ok(labels[i], "abc", port, strlen(port)));
			ck_assert(!preview_token_ok("abc", ports[k], t[i], strlen(t[i])));
		}
	}
	ck_assert_str_ne(t[0], t[1]);
	ck_assert(!preview_sandbox_token_ok(labels[0], "abc", t[1], strlen(t[1])));
	ck_assert(!preview_sandbox_token_ok(labels[1], "abc", t[0], strlen(t[0])));
	/* Another secret: they change too. */
	preview_secret_set(secret_b);
	ck_assert(!preview_sandbox_token_ok(labels[0], "abc", t[0], strlen(t[0])));
	static const char *const bad[] = {"cell-preview-v1",
					  "cell-a\nb",
					  "cell-a b",
					  "other-v1",
					  "cell-",
					  "cell-0123456789012345678901234567",
					  NULL};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(preview_sandbox_token(bad[i], "abc", again), -EINVAL);
	ck_assert_int_eq(preview_sandbox_token(labels[0], "Not-An-Id", again), -EINVAL);
}
END_TEST

/* OpenSandbox's signed endpoint: "<expires in base 36>.<mac>", alive up to and including
 * its second, the expiry part of what is signed (changing it breaks the token), encoded as
 * OpenSandbox does (2000000000 is "x2qxvk"). */
START_TEST(expiring_tokens)
{
	char t[PREVIEW_TOKEN_MAX + 1], forever[PREVIEW_TOKEN_LEN + 1], bad[PREVIEW_TOKEN_MAX + 8];
	preview_secret_set(secret_a);
	ck_assert_int_eq(preview_token_until("abc", 8080, 2000000000u, t), 0);
	ck_assert_msg(!strncmp(t, "x2qxvk.", 7), "%s", t);
	ck_assert_uint_eq(strlen(t), 7 + PREVIEW_TOKEN_LEN);
	ck_assert_uint_eq(preview_token_expires(t, strlen(t)), 2000000000u);
	ck_assert(preview_token_ok_at("abc", 8080, t, strlen(t), 1999999999u));
	ck_assert(preview_token_ok_at("abc", 8080, t, strlen(t), 2000000000u));
	ck_assert(!preview_token_ok_at("abc", 8080, t, strlen(t), 2000000001u));
	ck_assert(!preview_token_ok_at("abc", 8081, t, strlen(t), 1));
	ck_assert(!preview_token_ok_at("abd", 8080, t, strlen(t), 1));
	/* the mac of a token that never expires is not one with an expiry put before it */
	ck_assert_int_eq(preview_token("abc", 8080, forever), 0);
	ck_assert_str_ne(t + 7, forever);
	snprintf(bad, sizeof(bad), "x2qxvk.%s", forever);
	ck_assert(!preview_token_ok_at("abc", 8080, bad, strlen(bad), 1));
	/* a later expiry with the same mac, a leading zero, upper case, no expiry text */
	snprintf(bad, sizeof(bad), "x2qxvl.%s", t + 7);
	ck_assert(!preview_token_ok_at("abc", 8080, bad, strlen(bad), 1));
	snprintf(bad, sizeof(bad), "0x2qxvk.%s", t + 7);
	ck_assert(!preview_token_ok_at("abc", 8080, bad, strlen(bad), 1));
	snprintf(bad, sizeof(bad), "X2QXVK.%s", t + 7);
	ck_assert(!preview_token_ok_at("abc", 8080, bad, strlen(bad), 1));
	snprintf(bad, sizeof(bad), ".%s", t + 7);
	ck_assert(!preview_token_ok_at("abc", 8080, bad, strlen(bad), 1));
	ck_assert_uint_eq(preview_token_expires(forever, strlen(forever)), 0);
	ck_assert_uint_eq(preview_token_expires("3w5e11264sgsf.x", 15), UINT64_MAX);
	ck_assert_uint_eq(preview_token_expires("3w5e11264sgsg.x", 15), 0); /* overflow */
	ck_assert_int_eq(preview_token_until("abc", 8080, 0, t), -EINVAL);
}
END_TEST

START_TEST(cookie_found_and_stripped)
{
	char tok[PREVIEW_TOKEN_LEN + 1], other[PREVIEW_TOKEN_LEN + 1], h[512], out[512];
	preview_secret_set(secret_a);
	ck_assert_int_eq(preview_token("abc", 8080, tok), 0);
	ck_assert_int_eq(preview_token("xyz", 8080, other), 0);
	snprintf(h, sizeof(h), "a=1; cell_preview=%s; b=2", tok);
	ck_assert(preview_cookie_ok(h, "abc", 8080));
	ck_assert(!preview_cookie_ok(h, "abc", 8081));
	ck_assert_int_eq(preview_cookie_strip(h, out, sizeof(out)), (int)strlen("a=1; b=2"));
	ck_assert_str_eq(out, "a=1; b=2");
	/* A wrong one first (another sandbox set it for the whole domain): the right one
	 * still counts, and both go. */
	snprintf(h, sizeof(h), "cell_preview=%s;cell_preview=%s", other, tok);
	ck_assert(preview_cookie_ok(h, "abc", 8080));
	ck_assert_int_eq(preview_cookie_strip(h, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "");
	snprintf(h, sizeof(h), "cell_preview=%s", other);
	ck_assert(!preview_cookie_ok(h, "abc", 8080));
	/* Names that only look alike stay. */
	ck_assert_int_eq(preview_cookie_strip("cell_previewx=1; xcell_preview=2", out, sizeof(out)),
			 (int)strlen("cell_previewx=1; xcell_preview=2"));
	ck_assert_int_eq(preview_cookie_strip("a=1; b=2", out, 4), -E2BIG);
}
END_TEST

START_TEST(query_found_and_stripped)
{
	const char *tok;
	size_t len;
	char out[256];
	ck_assert(preview_query_token("a=1&cell_token=XYZ&b=2", &tok, &len));
	ck_assert_uint_eq(len, 3);
	ck_assert(!strncmp(tok, "XYZ", 3));
	ck_assert(!preview_query_token("xcell_token=1&cell_tokens=2", &tok, &len));
	ck_assert(!preview_query_token(NULL, &tok, &len));
	ck_assert_int_eq(preview_query_strip("a=1&cell_token=XYZ&b=2", out, sizeof(out)), 7);
	ck_assert_str_eq(out, "a=1&b=2");
	ck_assert_int_eq(preview_query_strip("cell_token=XYZ", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(preview_query_strip("cell_token&x=1&cell_token=2", out, sizeof(out)), 3);
	ck_assert_str_eq(out, "x=1");
	ck_assert_int_eq(preview_query_strip(NULL, out, sizeof(out)), 0);
}
END_TEST

START_TEST(host_names)
{
	unsigned port = 0;
	char id[CELL_ID_MAX + 1];
	const char *d = "preview.example.com";
	ck_assert_int_eq(preview_host_parse("8080-abc-1.preview.example.com", d, &port, id), 1);
	ck_assert_uint_eq(port, 8080);
	ck_assert_str_eq(id, "abc-1");
	ck_assert_int_eq(preview_host_parse("1-ABC.Preview.Example.COM:8123", d, &port, id), 1);
	ck_assert_uint_eq(port, 1);
	ck_assert_str_eq(id, "abc");
	ck_assert_int_eq(preview_host_parse("65535-z.preview.example.com", d, &port, id), 1);
	/* Not under the domain: an ordinary request. */
	ck_assert_int_eq(preview_host_parse("127.0.0.1:8080", d, &port, id), 0);
	ck_assert_int_eq(preview_host_parse("8080-abc.xpreview.example.com", d, &port, id), 0);
	ck_assert_int_eq(preview_host_parse("8080-abc.preview.example.com.evil", d, &port, id), 0);
	ck_assert_int_eq(preview_host_parse(NULL, d, &port, id), 0);
	ck_assert_int_eq(preview_host_parse("8080-abc.preview.example.com", NULL, &port, id), 0);
	/* Under it, but naming no port of a sandbox. */
	const char *bad[] = {
	    "preview.example.com",
	    ".preview.example.com",
	    "abc.preview.example.com",
	    "0-abc.preview.example.com",
	    "08080-abc.preview.example.com",
	    "65536-abc.preview.example.com",
	    "123456-abc.preview.example.com",
	    "8080-.preview.example.com",
	    "8080abc.preview.example.com",
	    "8080-a_b.preview.example.com",
	    "8080-abc.x.preview.example.com",
	    "-8080-abc.preview.example.com",
	    "8080-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
	    "preview.example.com"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(preview_host_parse(bad[i], d, &port, id) == -EINVAL, "%s", bad[i]);
}
END_TEST

static Suite *preview_suite(void)
{
	Suite *s = suite_create("preview");
	TCase *tc = tcase_create("preview");
	tcase_add_test(tc, tokens_per_sandbox_and_port);
	tcase_add_test(tc, expiring_tokens);
	tcase_add_test(tc, tokens_per_purpose);
	tcase_add_test(tc, cookie_found_and_stripped);
	tcase_add_test(tc, query_found_and_stripped);
	tcase_add_test(tc, host_names);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(preview_suite());
}
