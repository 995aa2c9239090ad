/* The files service's pure pieces (src/celld/sbfile_req.c): the user and group names and
 * the paths a caller may name, the text cell-init's requests can carry, the request of a
 * mkdir/chmod/write built from typed arguments, and the one audit record of a change,
 * whichever API asked: its request's fields, never a replace's texts, the acting user
 * (null when none is named) and whether it was done. */
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include <jansson.h>

#include "../../src/celld/sbfile_req.h"
#include "unit.h"

static bool name_ok(const char *s)
{
	return sbfile_name_ok(s, strlen(s));
}

START_TEST(names)
{
	ck_assert(name_ok("root"));
	ck_assert(name_ok("user"));
	ck_assert(name_ok("www-data"));
	ck_assert(name_ok("a.b_c"));
	ck_assert(name_ok("host$")); /* a machine account */
	ck_assert(name_ok("1000"));  /* digits: the front decides whether a name may be one */
	ck_assert(name_ok("abcdefghijklmnopqrstuvwxyz012345"));
	ck_assert(!name_ok("abcdefghijklmnopqrstuvwxyz0123456")); /* 33 bytes */
	ck_assert(!name_ok(""));
	ck_assert(!name_ok("-rf"));
	ck_assert(!name_ok("a$b"));
	ck_assert(!name_ok("a b"));
	ck_assert(!name_ok("a/b"));
	ck_assert(!name_ok("a:b"));
	ck_assert(!name_ok("\xc3\xa9"));
}
END_TEST

START_TEST(paths)
{
	ck_assert(sbfile_path_ok("/"));
	ck_assert(sbfile_path_ok("/tmp/x"));
	ck_assert(!sbfile_path_ok(NULL));
	ck_assert(!sbfile_path_ok(""));
	ck_assert(!sbfile_path_ok("tmp/x"));
	static char longp[PATH_MAX + 1];
	memset(longp, 'a', PATH_MAX);
	longp[0] = '/';
	ck_assert(!sbfile_path_ok(longp));
	longp[PATH_MAX - 1] = '\0';
	ck_assert(sbfile_path_ok(longp));
}
END_TEST

START_TEST(text)
{
	ck_assert(sbfile_text_ok(""));
	ck_assert(sbfile_text_ok("/tmp/\xc3\xa9t\xc3\xa9"));
	ck_assert(sbfile_text_ok("\xf0\x9f\x98\x80"));
	ck_assert(!sbfile_text_ok("\xff"));
	ck_assert(!sbfile_text_ok("\xc3"));		/* cut short */
	ck_assert(!sbfile_text_ok("\xc0\xaf"));		/* overlong '/' */
	ck_assert(!sbfile_text_ok("\xe0\x80\xaf"));	/* overlong */
	ck_assert(!sbfile_text_ok("\xed\xa0\x80"));	/* a surrogate */
	ck_assert(!sbfile_text_ok("\xf4\x90\x80\x80")); /* past U+10FFFF */
}
END_TEST

START_TEST(perm_request)
{
	struct sbfile_perm p = SBFILE_PERM_KEEP;
	json_t *req = sbfile_req_perm("/a", &p);
	ck_assert_ptr_nonnull(req);
	ck_assert_uint_eq(json_object_size(req), 1);
	ck_assert_str_eq(json_string_value(json_object_get(req, "path")), "/a");
	json_decref(req);

	p = (struct sbfile_perm){.mode = 0755, .user = {.id = 1000}, .group = {.id = 0}};
	req = sbfile_req_perm("/b", &p);
	ck_assert_int_eq(json_integer_value(json_object_get(req, "mode")), 0755);
	ck_assert_int_eq(json_integer_value(json_object_get(req, "uid")), 1000);
	ck_assert_int_eq(json_integer_value(json_object_get(req, "gid")), 0);
	ck_assert_ptr_null(json_object_get(req, "owner"));
	json_decref(req);

	p = SBFILE_PERM_KEEP;
	strcpy(p.user.name, "user");
	strcpy(p.group.name, "staff");
	req = sbfile_req_perm("/c", &p);
	ck_assert_ptr_null(json_object_get(req, "mode"));
	ck_assert_str_eq(json_string_value(json_object_get(req, "owner")), "user");
	ck_assert_str_eq(json_string_value(json_object_get(req, "group")), "staff");
	ck_assert_ptr_null(json_object_get(req, "uid"));
	json_decref(req);

	ck_assert_ptr_null(sbfile_req_perm("/\xff", &p)); /* JSON cannot carry it */
}
END_TEST

START_TEST(audit_record)
{
	json_t *req = json_pack("{s:s, s:s, s:s}", "path", "/f", "old", "secret", "new", "text");
	json_t *a = sbfile_req_audit(req, NULL, true);
	ck_assert_ptr_nonnull(a);
	ck_assert_str_eq(json_string_value(json_object_get(a, "path")), "/f");
	ck_assert_ptr_null(json_object_get(a, "old"));
	ck_assert_ptr_null(json_object_get(a, "new"));
	ck_assert(json_is_null(json_object_get(a, "user")));
	ck_assert(json_is_true(json_object_get(a, "ok")));
	/* The request is the caller's, unchanged. */
	ck_assert_str_eq(json_string_value(json_object_get(req, "old")), "secret");
	json_decref(a);

	a = sbfile_req_audit(req, "user", false);
	ck_assert_str_eq(json_string_value(json_object_get(a, "user")), "user");
	ck_assert(json_is_false(json_object_get(a, "ok")));
	json_decref(a);
	json_decref(req);
}
END_TEST

/* Either API's record of a change has the same members. */
START_TEST(same_shape_for_both_fronts)
{
	struct sbfile_perm p = {.mode = 0755, .user = {.id = 1000}, .group = {.id = 1000}};
	json_t *req = sbfile_req_perm("/d", &p);
	json_t *e2b = sbfile_req_audit(req, "user", true);
	json_t *os = sbfile_req_audit(req, NULL, true);
	const char *key;
	json_t *v;
	json_object_foreach(e2b, key, v) ck_assert_ptr_nonnull(json_object_get(os, key));
	ck_assert_uint_eq(json_object_size(e2b), json_object_size(os));
	json_decref(e2b);
	json_decref(os);
	json_decref(req);

	json_t *w = sbfile_req_audit_write("/w", 12, NULL, true);
	ck_assert_str_eq(json_string_value(json_object_get(w, "path")), "/w");
	ck_assert_int_eq(json_integer_value(json_object_get(w, "size")), 12);
	ck_assert(json_is_null(json_object_get(w, "user")));
	ck_assert(json_is_true(json_object_get(w, "ok")));
	json_decref(w);
	w = sbfile_req_audit_write("/w", 0, "user", false);
	ck_assert_str_eq(json_string_value(json_object_get(w, "user")), "user");
	ck_assert(json_is_false(json_object_get(w, "ok")));
	json_decref(w);
}
END_TEST

static Suite *sbfile_req_suite(void)
{
	Suite *s = suite_create("sbfile_req");
	TCase *tc = tcase_create("sbfile_req");
	tcase_add_test(tc, names);
	tcase_add_test(tc, paths);
	tcase_add_test(tc, text);
	tcase_add_test(tc, perm_request);
	tcase_add_test(tc, audit_record);
	tcase_add_test(tc, same_shape_for_both_fronts);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(sbfile_req_suite());
}
