/* Sandbox ids reach host paths (<state>/sandboxes/<id>) and cgroup names, so anything that
 * could traverse ("/", "..", "%2e", NUL) or alias (upper case) must be refused. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "cell/codec.h"
#include "cell/id.h"
#include "unit.h"

static const char *const valid_ids[] = {
    "a",
    "0",
    "abc-123",
    "a-",
    "0123456789abcdef",
    "a--b",
    /* exactly CELL_ID_MAX (64) characters */
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
};

static const char *const invalid_ids[] = {
    "",
    "-",
    "-a",
    "A",
    "aBc",
    "ABCDEF0123456789",
    "a/b",
    "/",
    "/abc",
    ".",
    "..",
    "../etc",
    "a..b",
    "a.b",
    "%2e",
    "%2e%2e",
    "%2f",
    "a b",
    "a\n",
    "a\tb",
    "a_b",
    "a:b",
    "a;b",
    "a\\b",
    "a*",
    "\xc3\xa9", /* é in UTF-8 */
    "a\x01",
    "\x7f",
    /* 65 characters */
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
};

START_TEST(id_valid)
{
	ck_assert_msg(cell_id_valid(valid_ids[_i]), "'%s' refused", valid_ids[_i]);
}
END_TEST

START_TEST(id_invalid)
{
	ck_assert_msg(!cell_id_valid(invalid_ids[_i]), "'%s' accepted", invalid_ids[_i]);
}
END_TEST

START_TEST(id_null_and_lengths)
{
	ck_assert(!cell_id_valid(NULL));
	char buf[CELL_ID_MAX + 10];
	for (size_t n = 1; n < sizeof(buf); n++) {
		memset(buf, 'z', n);
		buf[n] = '\0';
		ck_assert_msg(cell_id_valid(buf) == (n <= CELL_ID_MAX), "length %zu", n);
	}
	/* A valid 64-char prefix followed by an invalid character is still refused. */
	memset(buf, 'a', CELL_ID_MAX);
	buf[CELL_ID_MAX] = '/';
	buf[CELL_ID_MAX + 1] = '\0';
	ck_assert(!cell_id_valid(buf));
}
END_TEST

START_TEST(id_random_format)
{
	char a[CELL_ID_RANDOM_LEN + 1], b[CELL_ID_RANDOM_LEN + 1];
	ck_assert_int_eq(cell_id_random(a), 0);
	ck_assert_int_eq(cell_id_random(b), 0);
	ck_assert_uint_eq(strlen(a), CELL_ID_RANDOM_LEN);
	ck_assert_uint_eq(strspn(a, "0123456789abcdef"), CELL_ID_RANDOM_LEN);
	ck_assert(cell_id_valid(a));
	ck_assert_str_ne(a, b);
}
END_TEST

/* create-or-resume: id = first 16 hex digits of SHA-256(key). */
START_TEST(id_from_session_key)
{
	char id[CELL_ID_RANDOM_LEN + 1];
	cell_id_from_session_key("abc", 3, id);
	ck_assert_str_eq(id, "ba7816bf8f01cfea");
	cell_id_from_session_key("", 0, id);
	ck_assert_str_eq(id, "e3b0c44298fc1c14");

	const char *key = "appId-userId-chatId";
	char hex[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(key, strlen(key), hex);
	cell_id_from_session_key(key, strlen(key), id);
	ck_assert_int_eq(strncmp(id, hex, CELL_ID_RANDOM_LEN), 0);
	ck_assert_uint_eq(strlen(id), CELL_ID_RANDOM_LEN);
	ck_assert(cell_id_valid(id));

	/* The whole key counts, NUL bytes and all; hostile keys still give valid ids. */
	char id2[CELL_ID_RANDOM_LEN + 1];
	cell_id_from_session_key("a\0b", 3, id);
	cell_id_from_session_key("a\0c", 3, id2);
	ck_assert_str_ne(id, id2);
	cell_id_from_session_key("../../etc/passwd", 16, id);
	ck_assert(cell_id_valid(id));
}
END_TEST

static Suite *id_suite(void)
{
	Suite *s = suite_create("id");
	TCase *tc = tcase_create("id");
	tcase_add_loop_test(tc, id_valid, 0, (int)(sizeof(valid_ids) / sizeof(valid_ids[0])));
	tcase_add_loop_test(tc, id_invalid, 0, (int)(sizeof(invalid_ids) / sizeof(invalid_ids[0])));
	tcase_add_test(tc, id_null_and_lengths);
	tcase_add_test(tc, id_random_format);
	tcase_add_test(tc, id_from_session_key);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(id_suite());
}
