/* The network policy file (policies/network/public.json's format): the blocked ranges, merged,
 * and the operator's exceptions cut out of them (cell_nft_policy_load). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cell/nft.h"

static char path[64];

static int load(const char *json, struct cell_nft_range **r, size_t *n, struct cell_error *err)
{
	snprintf(path, sizeof(path), "/tmp/test_nft_policy.XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
	close(fd);
	int rc = cell_nft_policy_load(path, r, n, err);
	unlink(path);
	return rc;
}

#define E(c) "{\"cidr\":\"" c "\",\"name\":\"n\",\"why\":\"w\"}"

static void expect(const struct cell_nft_range *r, size_t i, uint32_t first, uint32_t last)
{
	ck_assert_msg(r[i].first == first && r[i].last == last,
		      "range %zu is %08x-%08x, expected %08x-%08x", i, r[i].first, r[i].last, first,
		      last);
}

START_TEST(blocked_ranges_merge)
{
	struct cell_nft_range *r;
	size_t n;
	struct cell_error err = {0};
	ck_assert_int_eq(load("{\"blocked\":[" E("10.0.0.0/8") "," E("10.1.0.0/16") "," E(
				  "11.0.0.0/8") "," E("127.0.0.0/8") "]}",
			      &r, &n, &err),
			 0);
	ck_assert_uint_eq(n, 2);
	expect(r, 0, 0x0a000000, 0x0bffffff);
	expect(r, 1, 0x7f000000, 0x7fffffff);
	free(r);
}
END_TEST

START_TEST(exceptions_cut_holes)
{
	struct cell_nft_range *r;
	size_t n;
	struct cell_error err = {0};
	/* a mirror inside 10/8 splits it; an exception covering 127/8 whole removes it; one
	 * at the start of 192.168/16 trims it */
	ck_assert_int_eq(load("{\"blocked\":[" E("10.0.0.0/8") "," E("127.0.0.0/8") "," E(
				  "192.168.0.0/16") "],"
						    "\"allowed\":[" E("10.1.2.0/24") "," E(
							"126.0.0.0/7") "," E("192.168.0.0/24") "]}",
			      &r, &n, &err),
			 0);
	ck_assert_uint_eq(n, 3);
	expect(r, 0, 0x0a000000, 0x0a0101ff);
	expect(r, 1, 0x0a010300, 0x0affffff);
	expect(r, 2, 0xc0a80100, 0xc0a8ffff);
	free(r);
}
END_TEST

START_TEST(bad_entries_are_named)
{
	struct cell_nft_range *r;
	size_t n;
	struct cell_error err = {0};
	ck_assert_int_lt(load("{\"blocked\":[" E("10.0.0.1/8") "]}", &r, &n, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "blocked[0].cidr"));
	ck_assert_int_lt(
	    load("{\"blocked\":[],\"allowed\":[{\"cidr\":\"10.0.0.0/8\"}]}", &r, &n, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "allowed[0]"));
	ck_assert_int_lt(load("{\"blocked\":[],\"allowed\":{}}", &r, &n, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "allowed"));
}
END_TEST

START_TEST(shipped_policy_loads)
{
	struct cell_nft_range *r;
	size_t n;
	struct cell_error err = {0};
	char *src = getenv("CELL_TEST_SRC");
	char p[4096];
	snprintf(p, sizeof(p), "%s/policies/network/public.json", src ? src : ".");
	ck_assert_msg(cell_nft_policy_load(p, &r, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_gt(n, 5);
	/* TEST-NET-2 stays reachable, 169.254.169.254 does not */
	bool metadata = false, testnet = false;
	for (size_t i = 0; i < n; i++) {
		metadata = metadata || (r[i].first <= 0xa9fea9fe && 0xa9fea9fe <= r[i].last);
		testnet = testnet || (r[i].first <= 0xc633640a && 0xc633640a <= r[i].last);
	}
	ck_assert(metadata && !testnet);
	free(r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nft_policy");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, blocked_ranges_merge);
	tcase_add_test(tc, exceptions_cut_holes);
	tcase_add_test(tc, bad_entries_are_named);
	tcase_add_test(tc, shipped_policy_loads);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
