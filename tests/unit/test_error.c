/* The one error idiom: cell_err() fills a message naming what failed and returns -errno;
 * cell_err_wrap() prefixes context. Messages reach clients, so they are always
 * NUL-terminated and bounded, whatever the caller formats into them. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cell/error.h"
#include "unit.h"

START_TEST(err_formats_with_strerror)
{
	struct cell_error err = {0};
	int r = cell_err(&err, ENOENT, "opening %s", "/x/y");
	ck_assert_int_eq(r, -ENOENT);
	ck_assert_int_eq(err.code, ENOENT);
	char want[CELL_ERROR_MSG_MAX];
	snprintf(want, sizeof(want), "opening /x/y: %s", strerror(ENOENT));
	ck_assert_str_eq(err.msg, want);
}
END_TEST

START_TEST(err_negative_errno_accepted)
{
	struct cell_error err = {0};
	ck_assert_int_eq(cell_err(&err, -EACCES, "chmod %d", 5), -EACCES);
	ck_assert_int_eq(err.code, EACCES);
	ck_assert_ptr_nonnull(strstr(err.msg, "chmod 5: "));
	ck_assert_ptr_nonnull(strstr(err.msg, strerror(EACCES)));
}
END_TEST

START_TEST(err_zero_errno_is_eio_without_suffix)
{
	struct cell_error err = {0};
	ck_assert_int_eq(cell_err(&err, 0, "field '%s' must be a string", "image.uri"), -EIO);
	ck_assert_int_eq(err.code, EIO);
	ck_assert_str_eq(err.msg, "field 'image.uri' must be a string");
}
END_TEST

START_TEST(err_null_is_safe)
{
	ck_assert_int_eq(cell_err(NULL, EPERM, "x %s", "y"), -EPERM);
	ck_assert_int_eq(cell_err(NULL, 0, "x"), -EIO);
	ck_assert_int_eq(cell_err_wrap(NULL, "ctx: "), -EIO);
	cell_err_clear(NULL);
}
END_TEST

START_TEST(err_long_message_truncated)
{
	struct cell_error err;
	memset(&err, 'Z', sizeof(err));
	char big[4 * CELL_ERROR_MSG_MAX];
	memset(big, 'p', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert_int_eq(cell_err(&err, ENOSPC, "writing %s", big), -ENOSPC);
	ck_assert_int_eq(err.code, ENOSPC);
	ck_assert_uint_eq(strnlen(err.msg, sizeof(err.msg)), sizeof(err.msg) - 1);
	ck_assert_int_eq(strncmp(err.msg, "writing ppp", 11), 0);
}
END_TEST

START_TEST(err_wrap_prefixes_and_keeps_code)
{
	struct cell_error err = {0};
	cell_err(&err, ENOENT, "opening %s", "/x");
	ck_assert_int_eq(cell_err_wrap(&err, "creating sandbox %s: ", "ab12"), -ENOENT);
	ck_assert_int_eq(err.code, ENOENT);
	char want[CELL_ERROR_MSG_MAX];
	snprintf(want, sizeof(want), "creating sandbox ab12: opening /x: %s", strerror(ENOENT));
	ck_assert_str_eq(err.msg, want);

	/* Wrapping twice nests outermost first. */
	cell_err_wrap(&err, "POST /v1/sandboxes: ");
	ck_assert_int_eq(strncmp(err.msg, "POST /v1/sandboxes: creating sandbox ab12: ", 43), 0);
}
END_TEST

START_TEST(err_wrap_cleared_gets_eio)
{
	struct cell_error err;
	cell_err_clear(&err);
	ck_assert_int_eq(err.code, 0);
	ck_assert_str_eq(err.msg, "");
	ck_assert_int_eq(cell_err_wrap(&err, "ctx"), -EIO);
	ck_assert_int_eq(err.code, EIO);
	ck_assert_str_eq(err.msg, "ctx");
}
END_TEST

START_TEST(err_wrap_truncates)
{
	struct cell_error err = {0};
	char big[CELL_ERROR_MSG_MAX];
	memset(big, 'o', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	cell_err(&err, 0, "%s", big);
	ck_assert_int_eq(cell_err_wrap(&err, "prefix: "), -EIO);
	ck_assert_uint_eq(strnlen(err.msg, sizeof(err.msg)), sizeof(err.msg) - 1);
	ck_assert_int_eq(strncmp(err.msg, "prefix: ooo", 11), 0);

	/* A prefix longer than the whole buffer still leaves a terminated message. */
	char huge[3 * CELL_ERROR_MSG_MAX];
	memset(huge, 'h', sizeof(huge) - 1);
	huge[sizeof(huge) - 1] = '\0';
	cell_err_wrap(&err, "%s", huge);
	ck_assert_uint_eq(strnlen(err.msg, sizeof(err.msg)), sizeof(err.msg) - 1);
	ck_assert_int_eq(err.msg[0], 'h');
}
END_TEST

START_TEST(err_msg_has_no_errno_suffix)
{
	struct cell_error err = {0};
	ck_assert_int_eq(cell_err_msg(&err, EUSERS, "quota %s is %d", "sandboxes", 3), -EUSERS);
	ck_assert_int_eq(err.code, EUSERS);
	ck_assert_str_eq(err.msg, "quota sandboxes is 3");
	ck_assert_int_eq(cell_err_msg(&err, -EINVAL, "negative accepted"), -EINVAL);
	ck_assert_int_eq(cell_err_msg(&err, 0, "no code"), -EIO);
	ck_assert_int_eq(err.code, EIO);
	ck_assert_int_eq(cell_err_msg(NULL, ENOENT, "no error object"), -ENOENT);
}
END_TEST

START_TEST(err_drop_clears_and_is_null_safe)
{
	struct cell_error err = {0};
	cell_err(&err, EPERM, "removing %s", "/x");
	cell_err_drop(&err, "best-effort cleanup");
	ck_assert_int_eq(err.code, 0);
	ck_assert_str_eq(err.msg, "");
	cell_err_drop(&err, "nothing to drop");
	cell_err_drop(NULL, "no error object");
	ck_assert_int_eq(err.code, 0);
}
END_TEST

static Suite *error_suite(void)
{
	Suite *s = suite_create("error");
	TCase *tc = tcase_create("error");
	tcase_add_test(tc, err_formats_with_strerror);
	tcase_add_test(tc, err_negative_errno_accepted);
	tcase_add_test(tc, err_zero_errno_is_eio_without_suffix);
	tcase_add_test(tc, err_null_is_safe);
	tcase_add_test(tc, err_long_message_truncated);
	tcase_add_test(tc, err_wrap_prefixes_and_keeps_code);
	tcase_add_test(tc, err_wrap_cleared_gets_eio);
	tcase_add_test(tc, err_wrap_truncates);
	tcase_add_test(tc, err_msg_has_no_errno_suffix);
	tcase_add_test(tc, err_drop_clears_and_is_null_safe);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(error_suite());
}
