/* The audit log's write budget (audit_budget.c): a bucket's refill, cap and forced take; a
 * principal's drops tallied and summed up after a quiet second or every 10 s of a flood,
 * security records passing; the policy file's checks. */
#include <errno.h>
#include <string.h>

#include "audit_budget.h"
#include "unit.h"

static const struct audit_budget_policy small = {
    .records_per_second = 2, .records_burst = 5, .bytes_per_second = 1000, .bytes_burst = 3000};

START_TEST(bucket_refills_to_its_burst)
{
	struct audit_bucket b = {.records = 5, .bytes = 3000, .last_ms = 1000};
	for (int i = 0; i < 5; i++)
		ck_assert(audit_bucket_take(&b, &small, 1000, 100, false));
	ck_assert(!audit_bucket_take(&b, &small, 1000, 100, false));
	/* Half a second: one record's worth. */
	ck_assert(audit_bucket_take(&b, &small, 1500, 100, false));
	ck_assert(!audit_bucket_take(&b, &small, 1500, 100, false));
	/* An hour later: the burst, never more. */
	for (int i = 0; i < 5; i++)
		ck_assert(audit_bucket_take(&b, &small, 3601500, 10, false));
	ck_assert(!audit_bucket_take(&b, &small, 3601500, 10, false));
	/* A clock set back takes nothing away and gives nothing. */
	ck_assert(!audit_bucket_take(&b, &small, 1000, 10, false));
	/* Bytes bound too: 3000 of them, whatever the records. */
	struct audit_bucket c = {.records = 5, .bytes = 3000, .last_ms = 0};
	ck_assert(audit_bucket_take(&c, &small, 0, 2000, false));
	ck_assert(!audit_bucket_take(&c, &small, 0, 2000, false));
	/* A forced take passes and spends what is left, down to 0. */
	ck_assert(audit_bucket_take(&c, &small, 0, 2000, true));
	ck_assert(c.bytes == 0);
	ck_assert(!audit_bucket_take(&c, &small, 0, 1, false));
}
END_TEST

START_TEST(drops_tallied_and_summed_up)
{
	struct audit_budget b = {.policy = small};
	struct audit_drops due;
	bool has;
	int kept = 0, dropped = 0;
	/* 50 records at once: the burst passes, the rest are dropped. */
	for (int i = 0; i < 50; i++) {
		bool ok = audit_budget_admit(&b, "key:aa", i % 2 ? "exec" : "file.write", 10, false,
					     10000, &due, &has);
		ck_assert(!has);
		ok ? kept++ : dropped++;
	}
	ck_assert_int_eq(kept, 5);
	ck_assert_int_eq(dropped, 45);
	/* A security record passes over budget. */
	ck_assert(audit_budget_admit(&b, "key:aa", "delete", 10, true, 10000, &due, &has));
	ck_assert(!has);
	/* Another principal has a bucket of its own. */
	ck_assert(audit_budget_admit(&b, "key:bb", "exec", 10, false, 10000, &due, &has));
	/* After a quiet second the next record brings the summary. */
	ck_assert(audit_budget_admit(&b, "key:aa", "exec", 10, false, 11000, &due, &has));
	ck_assert(has);
	ck_assert_str_eq(due.principal, "key:aa");
	ck_assert_uint_eq(due.count, 45);
	ck_assert_uint_eq(due.bytes, 450);
	ck_assert_int_eq(due.first_ms, 10000);
	ck_assert_int_eq(due.last_ms, 10000);
	json_t *j = audit_drops_json(&due);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "count")), 45);
	json_t *acts = json_object_get(j, "actions");
	ck_assert_int_eq(json_integer_value(json_object_get(acts, "exec")) +
			     json_integer_value(json_object_get(acts, "file.write")),
			 45);
	ck_assert_str_eq(json_string_value(json_object_get(j, "first")),
			 "1970-01-01T00:00:10.000Z");
	json_decref(j);
	ck_assert(!audit_budget_take_pending(&b, &due));
	audit_budget_free(&b);
}
END_TEST

START_TEST(flood_summed_up_every_ten_seconds)
{
	struct audit_budget b = {.policy = small};
	struct audit_drops due;
	bool has;
	int summaries = 0;
	uint64_t kept = 0, dropped = 0;
	/* 100 records a second for 35 s: no quiet second, a summary every 10 s. */
	for (int64_t t = 0; t < 35000; t += 10) {
		if (audit_budget_admit(&b, "key:cc", "exec", 1, false, t, &due, &has))
			kept++;
		if (has) {
			summaries++;
			dropped += due.count;
			ck_assert_int_le(due.last_ms - due.first_ms, AUDIT_SUMMARY_EVERY_MS);
		}
	}
	ck_assert_int_eq(summaries, 3);
	/* What is left is taken at a read or at shutdown. */
	ck_assert(audit_budget_take_pending(&b, &due));
	dropped += due.count;
	ck_assert(!audit_budget_take_pending(&b, &due));
	ck_assert_uint_eq(kept + dropped, 3500);
	ck_assert_uint_le(kept, 5 + 2 * 35 + 1);
	audit_budget_free(&b);
}
END_TEST

START_TEST(many_actions_named_then_other)
{
	struct audit_drops d = {0};
	char name[16];
	for (int i = 0; i < AUDIT_DROP_ACTIONS + 3; i++) {
		snprintf(name, sizeof(name), "act%d", i);
		audit_drops_add(&d, name, 1, i);
	}
	ck_assert_uint_eq(d.count, AUDIT_DROP_ACTIONS + 3);
	ck_assert_uint_eq(d.nactions, AUDIT_DROP_ACTIONS);
	ck_assert_uint_eq(d.other, 3);
}
END_TEST

static int parse(const char *text, struct audit_budget_policy *p, struct cell_error *err)
{
	json_t *root = json_loads(text, 0, NULL);
	ck_assert_ptr_nonnull(root);
	*p = audit_budget_default;
	int r = audit_budget_parse(root, "budget.json", p, err);
	json_decref(root);
	return r;
}

START_TEST(policy_checked_by_field)
{
	struct audit_budget_policy p;
	struct cell_error err = {0};
	ck_assert_int_eq(parse("{}", &p, &err), 0);
	ck_assert_uint_eq(p.records_per_second, audit_budget_default.records_per_second);
	ck_assert_int_eq(parse("{\"recordsPerSecond\": 5, \"recordsBurst\": 50, "
			       "\"bytesPerSecond\": 4096, \"bytesBurst\": 65536}",
			       &p, &err),
			 0);
	ck_assert_uint_eq(p.records_per_second, 5);
	ck_assert_uint_eq(p.records_burst, 50);
	ck_assert_uint_eq(p.bytes_per_second, 4096);
	ck_assert_uint_eq(p.bytes_burst, 65536);
	static const char *const bad[][2] = {
	    {"{\"recordsPerSecond\": 0}", "recordsPerSecond"},
	    {"{\"recordsPerSecond\": \"5\"}", "recordsPerSecond"},
	    {"{\"recordsBurst\": 1}", "recordsBurst"},
	    {"{\"bytesBurst\": 1000}", "bytesBurst"},
	    {"{\"bytesPerSecond\": -1}", "bytesPerSecond"},
	    {"{\"bytesPerSecond\": 1000000, \"bytesBurst\": 65536}", "bytesBurst"},
	    {"{\"recordsPerMinute\": 5}", "recordsPerMinute"},
	    {"[]", "object"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		ck_assert_int_eq(parse(bad[i][0], &p, &err), -EINVAL);
		ck_assert_msg(strstr(err.msg, bad[i][1]) && strstr(err.msg, "budget.json"),
			      "%s: %s", bad[i][0], err.msg);
	}
}
END_TEST

static Suite *budget_suite(void)
{
	Suite *s = suite_create("audit_budget");
	TCase *tc = tcase_create("audit_budget");
	tcase_add_test(tc, bucket_refills_to_its_burst);
	tcase_add_test(tc, drops_tallied_and_summed_up);
	tcase_add_test(tc, flood_summed_up_every_ten_seconds);
	tcase_add_test(tc, many_actions_named_then_other);
	tcase_add_test(tc, policy_checked_by_field);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(budget_suite());
}
