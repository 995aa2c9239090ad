/* A Failed sandbox (its init died) started again on its kept disk: POST .../resume (and
 * `cell resume`) brings it back Running from its record, with the files its writable
 * layer held; the same after a celld restart that adopted it as Failed; a resume while it
 * is being deleted is refused (409), never started. */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static long post(const char *id, const char *verb, struct h_resp *r)
{
	char *path = h_fmt("/v1/sandboxes/%s/%s", id, verb);
	long st = h_http("POST", path, NULL, r);
	free(path);
	return st;
}

static pid_t init_pid(const char *id)
{
	json_t *ins = h_inspect(id);
	pid_t pid = (pid_t)h_jint(ins, "pid");
	json_decref(ins);
	return pid;
}

/* A sandbox with a file in its writable layer. */
static char *create_with_file(void)
{
	char *id = h_create("busybox", NULL);
	ck_assert_int_eq(h_sh_code(id, "echo kept > /root/keep && mkdir -p /srv/d"), 0);
	return id;
}

/* SIGKILL its cell-init from the host. */
static void kill_init(const char *id)
{
	pid_t pid = init_pid(id);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
}

static void expect_failed(const char *id)
{
	ck_assert_str_eq(h_wait_state(id, "Failed", 30), "Failed");
	struct h_resp r;
	char *path = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_msg(*h_jstr(r.json, "status.reason") || *h_jstr(r.json, "status.message"),
		      "a Failed sandbox says why");
	h_resp_free(&r);
	free(path);
}

/* Resumed: Running, a new init, the file still there, commands run. */
static void expect_started_again(const char *id, pid_t old_init)
{
	struct h_resp r;
	long st = post(id, "resume", &r);
	ck_assert_msg(st == 202 || st == 200, "resume answered %ld: %s", st, r.body);
	h_resp_free(&r);
	ck_assert_str_eq(h_wait_state(id, "Running", 5), "Running");
	pid_t pid = init_pid(id);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_ne(pid, old_init);
	char *out = h_sh(id, "cat /root/keep; test -d /srv/d && echo dir");
	ck_assert_str_eq(out, "kept\ndir\n");
	free(out);
	out = h_sh(id, "echo again");
	ck_assert_str_eq(out, "again\n");
	free(out);
}

START_TEST(failed_resumes_on_its_disk)
{
	char *id = create_with_file();
	pid_t old = init_pid(id);
	kill_init(id);
	expect_failed(id);
	/* exec on a Failed sandbox stays refused: only resume starts it. */
	struct h_exec e;
	ck_assert_int_eq(h_exec(id, "true", NULL, &e), 0);
	ck_assert_int_eq(e.status, 409);
	h_exec_free(&e);
	expect_started_again(id, old);
	/* Running again: a second resume keeps today's answer. */
	struct h_resp r;
	ck_assert_int_eq(post(id, "resume", &r), 409);
	ck_assert_str_eq(h_err_code(&r), "DOCKER::SANDBOX_NOT_PAUSED");
	h_resp_free(&r);
	/* And it can fail and come back once more. */
	old = init_pid(id);
	kill_init(id);
	expect_failed(id);
	expect_started_again(id, old);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
}
END_TEST

START_TEST(failed_resumes_after_celld_restart)
{
	char *id = create_with_file();
	pid_t old = init_pid(id);
	kill_init(id);
	expect_failed(id);
	h_celld_kill();
	h_celld_start();
	expect_failed(id); /* adopted as Failed */
	expect_started_again(id, old);
	free(id);
}
END_TEST

START_TEST(init_died_while_celld_was_down)
{
	char *id = create_with_file();
	pid_t old = init_pid(id);
	h_celld_kill();
	ck_assert_int_eq(kill(old, SIGKILL), 0);
	h_celld_start();
	expect_failed(id);
	expect_started_again(id, old);
	/* Its start again is in its record: a restart adopts it Running. */
	h_celld_kill();
	h_celld_start();
	ck_assert_str_eq(h_wait_state(id, "Running", 5), "Running");
	char *out = h_sh(id, "cat /root/keep");
	ck_assert_str_eq(out, "kept\n");
	free(out);
	free(id);
}
END_TEST

/* A sandbox whose record an older celld wrote (its access choices under "e2b", as
 * before they were named the core's own): adopted Running after the upgrade, and its
 * record written anew under "access" at its next change, the choices kept. */
START_TEST(an_older_record_is_adopted_and_written_anew)
{
	char *id = h_create("busybox", NULL);
	h_celld_kill();
	char *path = h_fmt("%s/sandboxes/%s/state.json", h_state_dir(), id);
	json_error_t jerr;
	json_t *rec = json_load_file(path, 0, &jerr);
	ck_assert_msg(rec, "%s: %s", path, jerr.text);
	json_object_del(rec, "access");
	json_object_set_new(rec, "e2b",
			    json_pack("{s:b, s:b}", "manualResume", 1, "publicPorts", 1));
	ck_assert_int_eq(json_dump_file(rec, path, JSON_INDENT(2)), 0);
	json_decref(rec);
	h_celld_start();
	ck_assert_str_eq(h_wait_state(id, "Running", 10), "Running");
	char *out = h_sh(id, "echo adopted");
	ck_assert_str_eq(out, "adopted\n");
	free(out);
	char *meta = h_fmt("/v1/sandboxes/%s/metadata", id);
	ck_assert_int_eq(h_http("PATCH", meta, "{\"upgraded\": \"yes\"}", NULL), 200);
	rec = json_load_file(path, 0, &jerr);
	ck_assert_msg(rec, "%s: %s", path, jerr.text);
	ck_assert_ptr_null(json_object_get(rec, "e2b"));
	json_t *access = json_object_get(rec, "access");
	ck_assert(json_is_true(json_object_get(access, "manualResume")));
	ck_assert(json_is_true(json_object_get(access, "publicPorts")));
	json_decref(rec);
	ck_assert_int_eq(h_delete(id), 204);
	free(meta);
	free(path);
	free(id);
}
END_TEST

START_TEST(cli_resume_starts_a_failed_sandbox)
{
	char *id = create_with_file();
	kill_init(id);
	expect_failed(id);
	struct h_proc p;
	ck_assert_int_eq(h_cell(&p, "resume", id, NULL), 0);
	ck_assert_str_eq(h_trim(p.out), id);
	h_proc_free(&p);
	ck_assert_str_eq(h_wait_state(id, "Running", 5), "Running");
	char *out = h_sh(id, "cat /root/keep");
	ck_assert_str_eq(out, "kept\n");
	free(out);
	free(id);
}
END_TEST

struct deleter {
	const char *id;
	long status;
};

static void *delete_thread(void *arg)
{
	struct deleter *d = arg;
	d->status = h_delete(d->id);
	return NULL;
}

/* One race of a resume against a running delete of a Failed sandbox. Every answer must be
 * a refusal (409) or "gone" (404), except a resume that began before the delete did (then
 * it started the sandbox, and the delete waited for it). true when a resume was refused
 * because the delete was running. */
static bool race_resume_against_delete(long delay_us)
{
	char *id = h_create("busybox", NULL);
	kill_init(id);
	expect_failed(id);
	struct deleter d = {.id = id};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, delete_thread, &d), 0);
	if (delay_us)
		h_sleep_ms(delay_us / 1000);
	bool refused = false, first = true;
	for (int i = 0; i < 2000; i++) {
		struct h_resp r;
		long st = post(id, "resume", &r);
		if (st == 409) {
			ck_assert_str_eq(h_err_code(&r), "DOCKER::SANDBOX_NOT_PAUSED");
			if (strstr(r.body, "being deleted"))
				refused = true;
		} else if (st != 404) {
			ck_assert_msg(first && (st == 202 || st == 200), "resume answered %ld: %s",
				      st, r.body);
		}
		h_resp_free(&r);
		first = false;
		if (st == 404)
			break;
	}
	pthread_join(th, NULL);
	ck_assert_int_eq(d.status, 204);
	free(id);
	return refused;
}

START_TEST(resume_while_deleting_conflicts)
{
	bool seen = false;
	for (int round = 0; round < 12 && !seen; round++)
		seen = race_resume_against_delete((round % 4) * 1000);
	ck_assert_msg(seen, "no resume ran into a delete in 12 rounds");
}
END_TEST

/* A name is kept in the record: a restarted celld still refuses it to another create. */
START_TEST(a_name_outlives_a_celld_restart)
{
	json_t *ext = json_pack("{s:{s:s}}", "extensions", "cell.name", "kept-name");
	char *id = h_create("busybox", ext);
	json_decref(ext);
	h_celld_kill();
	h_celld_start();
	struct h_resp r;
	char *path = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "name"), "kept-name");
	h_resp_free(&r);
	ck_assert_int_eq(h_http("POST", "/v1/sandboxes",
				"{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.name\":"
				"\"kept-name\"}}",
				NULL),
			 409);
	ck_assert_int_eq(h_delete(id), 204);
	free(path);
	free(id);
}
END_TEST

static Suite *restart_suite(void)
{
	Suite *s = suite_create("restart");
	tcase_add_test(h_tcase(s, "failed_resumes_on_its_disk", 180), failed_resumes_on_its_disk);
	tcase_add_test(h_tcase(s, "failed_resumes_after_celld_restart", 180),
		       failed_resumes_after_celld_restart);
	tcase_add_test(h_tcase(s, "init_died_while_celld_was_down", 180),
		       init_died_while_celld_was_down);
	tcase_add_test(h_tcase(s, "an_older_record_is_adopted_and_written_anew", 180),
		       an_older_record_is_adopted_and_written_anew);
	tcase_add_test(h_tcase(s, "cli_resume_starts_a_failed_sandbox", 120),
		       cli_resume_starts_a_failed_sandbox);
	tcase_add_test(h_tcase(s, "resume_while_deleting_conflicts", 300),
		       resume_while_deleting_conflicts);
	tcase_add_test(h_tcase(s, "a_name_outlives_a_celld_restart", 120),
		       a_name_outlives_a_celld_restart);
	return s;
}

int main(void)
{
	return h_main(restart_suite());
}
