/* The router (src/celld/http/router.c): captures, the optional prefix, ids checked, a last
 * segment "*" that takes any rest, and the method "*" that takes any method, but only on a
 * path no route before it in the table knows (so a known path with another method stays a
 * 405, as the port proxy needs for the execd routes under /proxy/44772/). */
#include <string.h>

#include "../../src/celld/http/router.h"
#include "unit.h"

static int h_ping(struct http_req *r)
{
	(void)r;
	return 0;
}

static int h_any(struct http_req *r)
{
	(void)r;
	return 0;
}

static const struct route routes[] = {
    {"GET", "sandboxes/{id}/proxy/44772/ping", ROUTE_BODY_NONE, ROUTE_SHORT, h_ping, NULL, NULL},
    {"*", "sandboxes/{id}/proxy/{port}/*", ROUTE_BODY_STREAM, ROUTE_STREAMED, h_any, NULL, NULL},
};
static const struct route_table table = {routes, 2, "v1"};

static enum router_result route(const char *method, const char *path, struct router_match *m)
{
	return router_route(&table, method, path, m);
}

START_TEST(specific_route_first)
{
	struct router_match m;
	ck_assert_int_eq(route("GET", "/v1/sandboxes/abc/proxy/44772/ping", &m), ROUTER_MATCH);
	ck_assert_ptr_eq(m.route, &routes[0]);
	ck_assert_str_eq(m.params[0], "abc");
	router_match_free(&m);
}
END_TEST

START_TEST(known_path_other_method_is_405)
{
	struct router_match m;
	ck_assert_int_eq(route("PUT", "/v1/sandboxes/abc/proxy/44772/ping", &m), ROUTER_NO_METHOD);
	router_match_free(&m);
}
END_TEST

START_TEST(wildcard_takes_any_method_and_rest)
{
	static const char *const paths[] = {
	    "/v1/sandboxes/abc/proxy/8080", "/v1/sandboxes/abc/proxy/8080/",
	    "/sandboxes/abc/proxy/8080/a/b/c", "/v1/sandboxes/abc/proxy/44772/other",
	    "/v1/sandboxes/abc/proxy/8080/a/../b"};
	static const char *const methods[] = {"GET", "POST", "DELETE", "PROPFIND"};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		for (size_t j = 0; j < sizeof(methods) / sizeof(methods[0]); j++) {
			struct router_match m;
			ck_assert_msg(route(methods[j], paths[i], &m) == ROUTER_MATCH, "%s %s",
				      methods[j], paths[i]);
			ck_assert_ptr_eq(m.route, &routes[1]);
			ck_assert_uint_eq(m.n_params, 2);
			ck_assert_str_eq(m.params[0], "abc");
			router_match_free(&m);
		}
	}
}
END_TEST

START_TEST(wildcard_needs_its_fixed_part)
{
	struct router_match m;
	ck_assert_int_eq(route("GET", "/v1/sandboxes/abc/proxy", &m), ROUTER_NO_PATH);
	router_match_free(&m);
	ck_assert_int_eq(route("GET", "/v1/sandboxes/abc/other/8080/x", &m), ROUTER_NO_PATH);
	router_match_free(&m);
	ck_assert_int_eq(route("GET", "/v1/sandboxes/Not_An_Id/proxy/8080/x", &m), ROUTER_BAD_ID);
	router_match_free(&m);
	ck_assert_int_eq(route("GET", "/v1/sandboxes/abc/proxy/8080//x", &m), ROUTER_BAD_PATH);
	router_match_free(&m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("router");
	TCase *tc = tcase_create("router");
	tcase_add_test(tc, specific_route_first);
	tcase_add_test(tc, known_path_other_method_is_405);
	tcase_add_test(tc, wildcard_takes_any_method_and_rest);
	tcase_add_test(tc, wildcard_needs_its_fixed_part);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
