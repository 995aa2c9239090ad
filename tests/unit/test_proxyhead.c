/* What crosses the port proxy (src/celld/proxyhead.c): every credential celld takes,
 * whichever API it belongs to, dropped from a request in any case of its name; the preview
 * cookie taken out of the app's cookies; everything else passed as it is. Of an app's
 * answer: malformed names and values dropped. */
#include <stdlib.h>
#include <string.h>

#include "../../src/celld/credentials.h"
#include "../../src/celld/proxyhead.h"
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
		ck_assert_msg(proxyhead_answer(good[i], "v", &out) == PROXYHEAD_PASS, "%s",
			      good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(proxyhead_answer(bad[i], "v", &out) == PROXYHEAD_DROP, "'%s'",
			      bad[i]);
	ck_assert_int_eq(proxyhead_answer("X", "a\tb c", &out), PROXYHEAD_PASS);
	ck_assert_int_eq(proxyhead_answer("X", "\200\377", &out), PROXYHEAD_PASS);
	ck_assert_int_eq(proxyhead_answer("X", "", &out), PROXYHEAD_PASS);
	ck_assert_int_eq(proxyhead_answer("X", "a\001b", &out), PROXYHEAD_DROP);
	ck_assert_int_eq(proxyhead_answer("X", "a\177b", &out), PROXYHEAD_DROP);
	ck_assert_int_eq(proxyhead_answer("X", "a\rb", &out), PROXYHEAD_DROP);
	ck_assert_int_eq(proxyhead_answer("Set-Cookie", "a=\001", &out), PROXYHEAD_DROP);
}
END_TEST

static Suite *proxyhead_suite(void)
{
	Suite *s = suite_create("proxyhead");
	TCase *tc = tcase_create("proxyhead");
	tcase_add_test(tc, credentials_dropped);
	tcase_add_test(tc, preview_cookie_taken_out);
	tcase_add_test(tc, answer_names_and_values_checked);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(proxyhead_suite());
}
