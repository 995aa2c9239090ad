/* Resource quantities (include/cell/quantity.h): what resourceLimits and the resource policy
 * accept, and the mistakes they refuse. */
#include <errno.h>
#include <stdint.h>

#include "cell/quantity.h"
#include "unit.h"

START_TEST(cpu_forms)
{
	uint64_t v;
	ck_assert_int_eq(cell_parse_cpu("500m", &v), 0);
	ck_assert_uint_eq(v, 500);
	ck_assert_int_eq(cell_parse_cpu("2", &v), 0);
	ck_assert_uint_eq(v, 2000);
	ck_assert_int_eq(cell_parse_cpu("0.5", &v), 0);
	ck_assert_uint_eq(v, 500);
	ck_assert_int_eq(cell_parse_cpu("1.25", &v), 0);
	ck_assert_uint_eq(v, 1250);
	ck_assert_int_eq(cell_parse_cpu("0", &v), 0);
	ck_assert_uint_eq(v, 0);
}
END_TEST

START_TEST(cpu_refused)
{
	static const char *const bad[] = {"",	     " 1",   "1 ",   "-1",   "+1", "1e3",
					  "1.",	     ".5",   "1.5m", "m",    "1k", "1.2345",
					  "2 cores", "0x10", "1,5",  "500M", "1mm"};
	uint64_t v = 77;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(cell_parse_cpu(bad[i], &v) == -EINVAL, "cpu '%s' accepted", bad[i]);
	ck_assert_uint_eq(v, 77); /* untouched on failure */
	ck_assert_int_eq(cell_parse_cpu(NULL, &v), -EINVAL);
	ck_assert_int_eq(cell_parse_cpu("99999999999999999999", &v), -ERANGE);
	ck_assert_int_eq(cell_parse_cpu("18446744073709552", &v), -ERANGE);
}
END_TEST

START_TEST(bytes_forms)
{
	uint64_t v;
	ck_assert_int_eq(cell_parse_bytes("512Mi", &v), 0);
	ck_assert_uint_eq(v, 512ull << 20);
	ck_assert_int_eq(cell_parse_bytes("2Gi", &v), 0);
	ck_assert_uint_eq(v, 2ull << 30);
	ck_assert_int_eq(cell_parse_bytes("10G", &v), 0);
	ck_assert_uint_eq(v, 10000000000ull);
	ck_assert_int_eq(cell_parse_bytes("1k", &v), 0);
	ck_assert_uint_eq(v, 1000);
	ck_assert_int_eq(cell_parse_bytes("1Ki", &v), 0);
	ck_assert_uint_eq(v, 1024);
	ck_assert_int_eq(cell_parse_bytes("4096", &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(cell_parse_bytes("1.5Gi", &v), 0);
	ck_assert_uint_eq(v, 3ull << 29);
	ck_assert_int_eq(cell_parse_bytes("0.001Ki", &v), 0); /* 1.024 bytes, rounded up */
	ck_assert_uint_eq(v, 2);
	ck_assert_int_eq(cell_parse_bytes("8Ei", &v), 0);
	ck_assert_uint_eq(v, 8ull << 60);
}
END_TEST

START_TEST(bytes_refused)
{
	static const char *const bad[] = {"",	  "2GB",    "2gi",  "2 Gi",	     " 2Gi", "2Gi ",
					  "-1Gi", "1,5Gi",  "Gi",   "1.Gi",	     "2K",   "1m",
					  "1e9",  "0x1000", "2Gii", "1.0000000001Gi"};
	uint64_t v = 5;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(cell_parse_bytes(bad[i], &v) == -EINVAL, "bytes '%s' accepted",
			      bad[i]);
	ck_assert_uint_eq(v, 5);
	ck_assert_int_eq(cell_parse_bytes("16Ei", &v), -ERANGE);
	ck_assert_int_eq(cell_parse_bytes("18446744073709551616", &v), -ERANGE);
	ck_assert_int_eq(cell_parse_bytes("20E", &v), -ERANGE);
}
END_TEST

START_TEST(count_forms)
{
	uint64_t v;
	ck_assert_int_eq(cell_parse_count("1024", &v), 0);
	ck_assert_uint_eq(v, 1024);
	ck_assert_int_eq(cell_parse_count("1k", &v), -EINVAL);
	ck_assert_int_eq(cell_parse_count("1.5", &v), -EINVAL);
	ck_assert_int_eq(cell_parse_count("-3", &v), -EINVAL);
	ck_assert_int_eq(cell_parse_count("", &v), -EINVAL);
	ck_assert_int_eq(cell_parse_count("99999999999999999999999", &v), -ERANGE);
}
END_TEST

static Suite *limits_suite(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = tcase_create("quantities");
	tcase_add_test(tc, cpu_forms);
	tcase_add_test(tc, cpu_refused);
	tcase_add_test(tc, bytes_forms);
	tcase_add_test(tc, bytes_refused);
	tcase_add_test(tc, count_forms);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(limits_suite());
}
