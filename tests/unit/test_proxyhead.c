/* What crosses the port proxy (src/celld/http/proxyhead.c): every credential celld takes,
 * whichever API it belongs to, dropped from a request in any case of its name; the preview
 * cookie taken out of the app's cookies; everything else passed as it is. Of an app's
 * answer: malformed names and values dropped, cookies kept to the app's own host and
 * prefix, celld's cookie never set by it. */
#include <stdlib.h>
#include <string.h>

#include "../../src/celld/credentials.h"
#include "../../src/celld/http/proxyhead.h"
#include "unit.h"

START_TEST(credentials_dropped)
{
	static const char *const creds[] = {"OPEN-SANDBOX-API-KEY",
					    "open-sandbox-api-key",
					    "X-API-Key",
					    "x-api-key",
					    "X-Access-Token",
					    "X-ACCESS-TOKEN",
					    "E2B-Traffic-Access-Token",
					    "e2b-traffic-access-token",
					    "X-Cell-Preview-Token",
					    "x-cell-preview-token"};
	for (size_t i = 0; i < sizeof(creds) / sizeof(creds[0]); i++) {
		char *out = (char *)"untouched";
		ck_assert_msg(proxyhead_request(creds[i], "secret", &out) == PROXYHEAD_DROP, "%s",
			      creds[i]);
		ck_assert_ptr_null(out);
	}
	/* The names the APIs use are the list's. */
	static const char *const named[] = {CREDENTIALS_OPENSANDBOX_KEY, CREDENTIALS_E2B_KEY,
					    CREDENTIALS_E2B_ENVD, CREDENTIALS_E2B_TRAFFIC,
					    PREVIEW_HEADER};
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		char *out;
		ck_assert_int_eq(proxyhead_request(named[i], "v", &out), PROXYHEAD_DROP);
	}
	/* The app's own: its Authorization, the E2B routing headers, a look-alike name. */
	static const char *const apps[] = {"Authorization",  "E2b-Sandbox-Id", "E2b-Sandbox-Port",
					   "X-API-Key-Hint", "X-Access",       "Accept"};
	for (size_t i = 0; i < sizeof(apps) / sizeof(apps[0]); i++) {
		char *out;
		ck_assert_msg(proxyhead_request(apps[i], "v", &out) == PROXYHEAD_PASS, "%s",
			      apps[i]);
		ck_assert_ptr_null(out);
	}
}
END_TEST

START_TEST(preview_cookie_taken_out)
{
	char *out;
	ck_assert_int_eq(proxyhead_request("Cookie", "a=1; cell_preview=tok; b=2", &out),
			 PROXYHEAD_REWRITE);
	ck_assert_str_eq(out, "a=1; b=2");
	free(out);
	ck_assert_int_eq(proxyhead_request("cookie", "cell_preview=x;cell_preview=y", &out),
			 PROXYHEAD_DROP);
	ck_assert_ptr_null(out);
	ck_assert_int_eq(proxyhead_request("Cookie", "app=1", &out), PROXYHEAD_REWRITE);
	ck_assert_str_eq(out, "app=1");
	free(out);
	/* A cookie whose name only starts like it is the app's. */
	ck_assert_int_eq(proxyhead_request("Cookie", "cell_preview_x=1", &out), PROXYHEAD_REWRITE);
	ck_assert_str_eq(out, "cell_preview_x=1");
	free(out);
}
END_TEST

/* An answer header whose name is not a token or whose value holds a control character
 * (a tab aside) is dropped; obs-text passes. */
START_TEST(answer_names_and_values_checked)
{
	static const char *const good[] = {"X-Ok", "!#$%&'*+-.^_`|~09azAZ", "a"};
	static const char *const bad[] = {"",	 "X Blank", "X\001", "X(",    "\303\251t\303\251",
					  "X:Y", "X/Y",	    "X@",    "X\177", "X\t"};
	char *out;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(proxyhead_answer(good[i], "v", NULL, &out) == PROXYHEAD_PASS, "%s",
			      good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(proxyhead_answer(bad[i], "v", NULL, &out) == PROXYHEAD_DROP, "'%s'",
			      bad[i]);
	ck_assert_int_eq(proxyhead_answer("X", "a\tb c", NULL, &out), PROXYHEAD_PASS);
	ck_assert_int_eq(proxyhead_answer("X", "\200\377", NULL, &out), PROXYHEAD_PASS);
	ck_assert_int_eq(proxyhead_answer("X", "", NULL, &out), PROXYHEAD_PASS);
	ck_assert_int_eq(proxyhead_answer("X", "a\001b", NULL, &out), PROXYHEAD_DROP);
	ck_assert_int_eq(proxyhead_answer("X", "a\177b", NULL, &out), PROXYHEAD_DROP);
	ck_assert_int_eq(proxyhead_answer("X", "a\rb", NULL, &out), PROXYHEAD_DROP);
	ck_assert_int_eq(proxyhead_answer("Set-Cookie", "a=\001", NULL, &out), PROXYHEAD_DROP);
}
END_TEST

#define PREFIX "/v1/sandboxes/abc/proxy/8080"

/* What a Set-Cookie becomes (NULL: dropped; the value itself when passed). */
static void cookie_is(const char *value, const char *prefix, const char *want)
{
	char *out;
	enum proxyhead_verdict v = proxyhead_answer("Set-Cookie", value, prefix, &out);
	if (!want) {
		ck_assert_msg(v == PROXYHEAD_DROP, "%s kept", value);
		return;
	}
	ck_assert_msg(v != PROXYHEAD_DROP, "%s dropped", value);
	ck_assert_str_eq(v == PROXYHEAD_REWRITE ? out : value, want);
	ck_assert(v == PROXYHEAD_PASS ? !strcmp(value, want) : strcmp(value, want) != 0);
	free(out);
}

START_TEST(cookies_kept_to_the_app)
{
	/* Domain goes, whatever its case, blanks and value. */
	cookie_is("a=1; Domain=preview.test; Path=/", NULL, "a=1; Path=/");
	cookie_is("a=1;domain = .PREVIEW.test", NULL, "a=1");
	cookie_is("a=1; Path=/; DOMAIN=8080-abc.preview.test; Secure", NULL, "a=1; Path=/; Secure");
	/* Untouched: the app's bytes as they are. */
	cookie_is("a=1;HttpOnly;  Max-Age=5", NULL, "a=1;HttpOnly;  Max-Age=5");
	cookie_is("a=1; Path=/x", NULL, "a=1; Path=/x");
	cookie_is("=v", NULL, "=v");
	/* celld's cookie is not the app's to set. */
	cookie_is("cell_preview=forged; Path=/", NULL, NULL);
	cookie_is(" cell_preview =x", PREFIX, NULL);
	cookie_is("cell_preview_x=1", NULL, "cell_preview_x=1");
	/* Under a prefix every Path goes below it, unless it is there already. */
	cookie_is("a=1; Path=/", PREFIX, "a=1; Path=" PREFIX "/");
	cookie_is("a=1; path=/app; HttpOnly", PREFIX, "a=1; path=" PREFIX "/app; HttpOnly");
	cookie_is("a=1; Path=" PREFIX "/y", PREFIX, "a=1; Path=" PREFIX "/y");
	cookie_is("a=1; Path=" PREFIX, PREFIX, "a=1; Path=" PREFIX);
	cookie_is("a=1; Path=" PREFIX "0/y", PREFIX, "a=1; Path=" PREFIX PREFIX "0/y");
	cookie_is("a=1; Path=/a; Path=/b", PREFIX, "a=1; Path=" PREFIX "/a; Path=" PREFIX "/b");
	/* A Path a browser ignores (not absolute) stays: its default is below the prefix. */
	cookie_is("a=1; Path=rel", PREFIX, "a=1; Path=rel");
	cookie_is("a=1; Path=", PREFIX, "a=1; Path=");
	cookie_is("a=1; Domain=x; Path=/", PREFIX, "a=1; Path=" PREFIX "/");
	/* Every attribute rewritten at once fits the bound. */
	cookie_is("a=1;Path=/;Path=/;Path=/", PREFIX,
		  "a=1; Path=" PREFIX "/; Path=" PREFIX "/; Path=" PREFIX "/");
}
END_TEST

static Suite *proxyhead_suite(void)
{
	Suite *s = suite_create("proxyhead");
	TCase *tc = tcase_create("proxyhead");
	tcase_add_test(tc, credentials_dropped);
	tcase_add_test(tc, preview_cookie_taken_out);
	tcase_add_test(tc, answer_names_and_values_checked);
	tcase_add_test(tc, cookies_kept_to_the_app);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(proxyhead_suite());
}
