/* celld's typed access to request JSON (src/celld/fields.c): each field_* function's answer
 * for a field that is present and valid (1), absent or null (0), or invalid (-EINVAL with a
 * message naming the field), and the caps on what a client stores in a record. */
#include <errno.h>
#include <string.h>

#include "../../src/celld/fields.h"
#include "unit.h"

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, JSON_ALLOW_NUL, &jerr);
	ck_assert_msg(j, "%s: %s", text, jerr.text);
	return j;
}

/* -EINVAL with a message holding needle. */
#define ck_refused(call, err, needle)                                                              \
	do {                                                                                       \
		(err).msg[0] = '\0';                                                               \
		ck_assert_int_eq((call), -EINVAL);                                                 \
		ck_assert_msg(strstr((err).msg, (needle)), "message '%s' lacks '%s'", (err).msg,   \
			      (needle));                                                           \
	} while (0)

START_TEST(string_field)
{
	json_t *o = parse("{\"a\":\"x\",\"n\":null,\"i\":3,\"z\":\"a\\u0000b\"}");
	struct cell_error err = {0};
	const char *v = NULL;
	ck_assert_int_eq(field_string(o, "a", "a", true, &v, &err), 1);
	ck_assert_str_eq(v, "x");
	v = "kept";
	ck_assert_int_eq(field_string(o, "missing", "missing", false, &v, &err), 0);
	ck_assert_int_eq(field_string(o, "n", "n", false, &v, &err), 0);
	ck_assert_str_eq(v, "kept");
	ck_refused(field_string(o, "missing", "body.missing", true, &v, &err), err, "body.missing");
	ck_refused(field_string(o, "i", "body.i", false, &v, &err), err, "body.i");
	ck_refused(field_string(o, "z", "body.z", false, &v, &err), err, "NUL");
	json_decref(o);
}
END_TEST

START_TEST(int_field)
{
	json_t *o = parse("{\"t\":30,\"s\":\"30\",\"neg\":-1,\"big\":1000,\"n\":null}");
	struct cell_error err = {0};
	int64_t v = 7;
	ck_assert_int_eq(field_int(o, "t", "timeout", 0, 100, &v, &err), 1);
	ck_assert_int_eq(v, 30);
	v = 7;
	ck_assert_int_eq(field_int(o, "missing", "x", 0, 100, &v, &err), 0);
	ck_assert_int_eq(field_int(o, "n", "x", 0, 100, &v, &err), 0);
	ck_assert_int_eq(v, 7);
	ck_refused(field_int(o, "s", "timeout", 0, 100, &v, &err), err, "timeout");
	ck_refused(field_int(o, "neg", "neg", 0, 100, &v, &err), err, "neg");
	ck_refused(field_int(o, "big", "big", 0, 100, &v, &err), err, "big");
	ck_assert_int_eq(field_int(o, "big", "big", 0, 1000, &v, &err), 1); /* bounds inclusive */
	ck_assert_int_eq(v, 1000);
	json_decref(o);
}
END_TEST

START_TEST(bool_field)
{
	json_t *o = parse("{\"t\":true,\"f\":false,\"s\":\"true\",\"i\":1}");
	struct cell_error err = {0};
	bool v = false;
	ck_assert_int_eq(field_bool(o, "t", "t", &v, &err), 1);
	ck_assert(v);
	ck_assert_int_eq(field_bool(o, "f", "f", &v, &err), 1);
	ck_assert(!v);
	ck_assert_int_eq(field_bool(o, "missing", "m", &v, &err), 0);
	ck_refused(field_bool(o, "s", "background", &v, &err), err, "background");
	ck_refused(field_bool(o, "i", "i", &v, &err), err, "boolean");
	json_decref(o);
}
END_TEST

START_TEST(string_map_field)
{
	json_t *o = parse("{\"env\":{\"A\":\"1\",\"B\":\"\"},\"bad\":{\"A\":1},"
			  "\"nul\":{\"A\":\"x\\u0000\"},\"arr\":[\"x\"]}");
	struct cell_error err = {0};
	json_t *out = NULL;
	ck_assert_int_eq(field_string_map(o, "env", "env", &out, &err), 1);
	ck_assert_ptr_eq(out, json_object_get(o, "env"));
	json_decref(out); /* a new reference */
	out = NULL;
	ck_assert_int_eq(field_string_map(o, "missing", "m", &out, &err), 0);
	ck_assert_ptr_null(out);
	ck_refused(field_string_map(o, "bad", "envs", &out, &err), err, "envs.A");
	ck_refused(field_string_map(o, "nul", "envs", &out, &err), err, "NUL");
	ck_refused(field_string_map(o, "arr", "envs", &out, &err), err, "object");
	json_decref(o);
}
END_TEST

START_TEST(string_array_field)
{
	json_t *o = parse("{\"argv\":[\"a\",\"b\"],\"bad\":[\"a\",2],\"nul\":[\"\\u0000\"],"
			  "\"obj\":{}}");
	struct cell_error err = {0};
	json_t *out = NULL;
	ck_assert_int_eq(field_string_array(o, "argv", "argv", &out, &err), 1);
	ck_assert_int_eq(json_array_size(out), 2);
	json_decref(out);
	ck_assert_int_eq(field_string_array(o, "missing", "m", &out, &err), 0);
	ck_refused(field_string_array(o, "bad", "entrypoint", &out, &err), err, "entrypoint[1]");
	ck_refused(field_string_array(o, "nul", "entrypoint", &out, &err), err, "NUL");
	ck_refused(field_string_array(o, "obj", "entrypoint", &out, &err), err, "array");
	json_decref(o);
}
END_TEST

static const struct field_caps caps = {.items = 3, .key_len = 4, .value_len = 5, .total = 12};

START_TEST(map_caps)
{
	struct cell_error err = {0};
	json_t *m = parse("{\"a\":\"12345\",\"bb\":\"1\"}");
	ck_assert_int_eq(field_check_map_caps(m, "metadata", &caps, &err), 0);
	json_decref(m);
	m = parse("{\"a\":\"1\",\"b\":\"1\",\"c\":\"1\",\"d\":\"1\"}");
	ck_refused(field_check_map_caps(m, "metadata", &caps, &err), err, "entries");
	json_decref(m);
	m = parse("{\"\":\"1\"}");
	ck_refused(field_check_map_caps(m, "metadata", &caps, &err), err, "key");
	json_decref(m);
	m = parse("{\"long1\":\"1\"}");
	ck_refused(field_check_map_caps(m, "metadata", &caps, &err), err, "1-4 bytes");
	json_decref(m);
	m = parse("{\"k\":\"123456\"}");
	ck_refused(field_check_map_caps(m, "metadata", &caps, &err), err, "metadata.k");
	json_decref(m);
	/* 4 + 5 + 4 + 5 = 18 bytes > 12 */
	m = parse("{\"aaaa\":\"12345\",\"bbbb\":\"12345\"}");
	ck_refused(field_check_map_caps(m, "metadata", &caps, &err), err, "more than 12");
	json_decref(m);
}
END_TEST

START_TEST(array_caps)
{
	struct cell_error err = {0};
	json_t *a = parse("[\"12345\",\"1234\",\"\"]");
	ck_assert_int_eq(field_check_array_caps(a, "entrypoint", &caps, &err), 0);
	json_decref(a);
	a = parse("[\"\",\"\",\"\",\"\"]");
	ck_refused(field_check_array_caps(a, "entrypoint", &caps, &err), err, "entries");
	json_decref(a);
	a = parse("[\"1\",\"123456\"]");
	ck_refused(field_check_array_caps(a, "entrypoint", &caps, &err), err, "entrypoint[1]");
	json_decref(a);
	a = parse("[\"12345\",\"12345\",\"123\"]");
	ck_refused(field_check_array_caps(a, "entrypoint", &caps, &err), err, "more than 12");
	json_decref(a);
}
END_TEST

START_TEST(int64_text)
{
	int64_t v = 5;
	ck_assert_int_eq(parse_int64("42", 0, 100, &v), 0);
	ck_assert_int_eq(v, 42);
	ck_assert_int_eq(parse_int64("-3", -10, 10, &v), 0);
	ck_assert_int_eq(v, -3);
	static const char *const bad[] = {"", " 1", "+1", "1 ", "1x", "0x10", "101", "-1"};
	v = 5;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(parse_int64(bad[i], 0, 100, &v) == -EINVAL, "'%s' accepted", bad[i]);
	ck_assert_int_eq(parse_int64(NULL, 0, 100, &v), -EINVAL);
	ck_assert_int_eq(parse_int64("99999999999999999999", 0, INT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(v, 5);
}
END_TEST

START_TEST(fail_helpers)
{
	struct cell_error err = {0};
	ck_assert_int_eq(field_fail(&err, "x %d", 1), -EINVAL);
	ck_assert_str_eq(err.msg, "x 1");
	ck_assert_int_eq(cell_err_msg(&err, ENOSPC, "full"), -ENOSPC);
	ck_assert_str_eq(err.msg, "full");
}
END_TEST

static Suite *fields_suite(void)
{
	Suite *s = suite_create("fields");
	TCase *tc = tcase_create("fields");
	tcase_add_test(tc, string_field);
	tcase_add_test(tc, int_field);
	tcase_add_test(tc, bool_field);
	tcase_add_test(tc, string_map_field);
	tcase_add_test(tc, string_array_field);
	tcase_add_test(tc, map_caps);
	tcase_add_test(tc, array_caps);
	tcase_add_test(tc, int64_text);
	tcase_add_test(tc, fail_helpers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(fields_suite());
}
