/* celld --log-format json: whatever a message holds (quotes, backslashes, control bytes, a
 * client's invalid UTF-8, more than a line takes), each line stays one valid JSON object
 * with the text line's fields. */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell/log.h"
#include "unit.h"

/* What one cell_log call writes to stderr, as one JSON object (asserted). */
static json_t *logged(const char *msg)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	int saved = dup(STDERR_FILENO);
	dup2(p[1], STDERR_FILENO);
	cell_log_set_prefix("celld");
	cell_log_set_json(true);
	log_warn("%s", msg);
	cell_log_set_json(false);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(p[1]);
	static char buf[16384];
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_msg(buf[n - 1] == '\n' && !memchr(buf, '\n', (size_t)n - 1), "not one line: %s",
		      buf);
	json_error_t e;
	json_t *j = json_loads(buf, 0, &e);
	ck_assert_msg(j, "not JSON (%s): %s", e.text, buf);
	return j;
}

START_TEST(fields_of_the_text_line)
{
	json_t *j = logged("sandbox abc created");
	ck_assert_str_eq(json_string_value(json_object_get(j, "level")), "warn");
	ck_assert_str_eq(json_string_value(json_object_get(j, "program")), "celld");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "pid")), getpid());
	ck_assert_str_eq(json_string_value(json_object_get(j, "message")), "sandbox abc created");
	const char *t = json_string_value(json_object_get(j, "time"));
	ck_assert_msg(t && strlen(t) == 24 && t[10] == 'T' && t[23] == 'Z', "time %s", t);
	json_decref(j);
}
END_TEST

START_TEST(hostile_message_stays_one_object)
{
	json_t *j = logged("a \"quoted\" \\ back\tslash\x01\x1f \xc3\xa9 \xff\xfe end\n{\"x\":1}");
	ck_assert_str_eq(json_string_value(json_object_get(j, "message")),
			 "a \"quoted\" \\ back\tslash\x01\x1f \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd "
			 "end\n{\"x\":1}");
	json_decref(j);
	/* Longer than a line holds, every byte one that grows when escaped: cut, still JSON. */
	char big[4000];
	memset(big, '"', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	j = logged(big);
	ck_assert_int_gt(strlen(json_string_value(json_object_get(j, "message"))), 100);
	json_decref(j);
	memset(big, '\x01', sizeof(big) - 1);
	j = logged(big);
	json_decref(j);
	/* A UTF-8 character cut by the end of the message is U+FFFD, not half a character. */
	j = logged("cut \xe2\x82");
	ck_assert_str_eq(json_string_value(json_object_get(j, "message")),
			 "cut \xef\xbf\xbd\xef\xbf\xbd");
	json_decref(j);
}
END_TEST

/* cell-oci's --log-format json: the shape containerd's shim reads back from --log. */
START_TEST(runtime_shape_to_a_chosen_fd)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	cell_log_set_fd(p[1]);
	cell_log_set_runtime_json(true);
	log_warn("container %s: \"%s\"", "c1", "x");
	log_error("failed");
	cell_log_set_runtime_json(false);
	cell_log_set_fd(-1);
	close(p[1]);
	static char buf[4096];
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	char *second = strchr(buf, '\n');
	ck_assert_ptr_nonnull(second);
	*second++ = '\0';
	json_t *a = json_loads(buf, 0, NULL), *b = json_loads(second, 0, NULL);
	ck_assert_msg(a && b, "not JSON lines: %s / %s", buf, second);
	ck_assert_str_eq(json_string_value(json_object_get(a, "level")), "warning");
	ck_assert_str_eq(json_string_value(json_object_get(a, "msg")), "container c1: \"x\"");
	ck_assert_str_eq(json_string_value(json_object_get(b, "level")), "error");
	ck_assert_str_eq(json_string_value(json_object_get(b, "msg")), "failed");
	ck_assert_ptr_nonnull(json_string_value(json_object_get(b, "time")));
	ck_assert_ptr_null(json_object_get(b, "message"));
	json_decref(a);
	json_decref(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("json");
	tcase_add_test(tc, fields_of_the_text_line);
	tcase_add_test(tc, hostile_message_stays_one_object);
	tcase_add_test(tc, runtime_shape_to_a_chosen_fd);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
