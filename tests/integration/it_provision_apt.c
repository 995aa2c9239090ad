/* Declarative packages with the default (Debian) image's real apt-get, offline (the sandbox
 * has no network: cell.network none): a package the image has installs at once ("already the
 * newest version"), is recorded, and a start again on the same disk does not ask apt-get
 * again; one apt cannot find is reported (PackagesFailed) without failing the create. The
 * startup script runs by bash there. it_provision covers the rest on busybox. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static json_t *ext(const char *packages)
{
	return json_pack("{s:{s:s, s:s, s:s}}", "extensions", "cell.packages", packages,
			 "cell.network", "none", "cell.startupScript", "echo $0");
}

static json_t *inspect_steps(const char *id)
{
	json_t *ins = h_inspect(id);
	json_t *steps = json_incref(h_jget(ins, "provision.last.steps"));
	json_decref(ins);
	ck_assert_msg(json_array_size(steps) == 2, "steps: %s", json_dumps(steps, 0));
	return steps;
}

START_TEST(installed_package_recorded_and_skipped)
{
	json_t *extra = ext("{\"apt\":[\"bash\"]}");
	char *id = h_create("default", extra);
	json_decref(extra);
	json_t *steps = inspect_steps(id);
	json_t *p = json_array_get(steps, 0);
	ck_assert_str_eq(h_jstr(p, "status"), "ok");
	ck_assert_msg(strstr(h_jstr(p, "output"), "bash is already the newest version"), "%s",
		      h_jstr(p, "output"));
	ck_assert_str_eq(h_jstr(json_array_get(steps, 1), "output"), "/bin/bash\n");
	json_decref(steps);
	char *o = h_sh(id, "cat /root/.cell/provision.json");
	ck_assert_msg(strstr(o, "\"packages\":\""), "not recorded: %s", o);
	free(o);

	/* Started again on its disk: apt-get is not asked again. */
	json_t *ins = h_inspect(id);
	pid_t pid = (pid_t)h_jint(ins, "pid");
	json_decref(ins);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_str_eq(h_wait_state(id, "Failed", 30), "Failed");
	char *path = h_fmt("/v1/sandboxes/%s/resume", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("POST", path, NULL, &r) / 100, 2);
	h_resp_free(&r);
	free(path);
	ck_assert_str_eq(h_wait_state(id, "Running", 60), "Running");
	steps = inspect_steps(id);
	ck_assert_str_eq(h_jstr(json_array_get(steps, 0), "status"), "skipped");
	ck_assert_str_eq(h_jstr(json_array_get(steps, 1), "status"), "skipped");
	json_decref(steps);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
}
END_TEST

START_TEST(unknown_package_reported)
{
	json_t *extra = ext("{\"apt\":[\"no-such-package-cell-test\"]}");
	char *id = h_create("default", extra);
	json_decref(extra);
	char *path = h_fmt("/v1/sandboxes/%s", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "status.state"), "Running");
	ck_assert_str_eq(h_jstr(r.json, "status.reason"), "PackagesFailed");
	h_resp_free(&r);
	free(path);
	json_t *steps = inspect_steps(id);
	json_t *p = json_array_get(steps, 0);
	ck_assert_str_eq(h_jstr(p, "status"), "failed");
	ck_assert_int_ne(h_jint(p, "exitCode"), 0);
	ck_assert_msg(strstr(h_jstr(p, "output"), "no-such-package-cell-test"), "%s",
		      h_jstr(p, "output"));
	/* The startup script still ran. */
	ck_assert_str_eq(h_jstr(json_array_get(steps, 1), "status"), "ok");
	json_decref(steps);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("provision_apt");
	tcase_add_test(h_tcase(s, "installed_package_recorded_and_skipped", 240),
		       installed_package_recorded_and_skipped);
	tcase_add_test(h_tcase(s, "unknown_package_reported", 240), unknown_package_reported);
	return h_main_image(s, "default");
}
