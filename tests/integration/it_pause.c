/* Pause and resume: every process frozen (a counter stops, then continues), a background
 * server serves again after resume, exec on a paused sandbox resumes it first, the 409
 * answers, a paused sandbox survives a celld restart as Paused, and deleting a paused
 * sandbox leaves nothing; a sandbox's boot id is its own, kept by a pause and new after a
 * stop and start (bootid.c). The counter is read from the host through /proc/<pid>/root, which
 * does not wake the sandbox the way an exec or a files call would. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

static long post(const char *id, const char *verb, struct h_resp *r)
{
	char *path = h_fmt("/v1/sandboxes/%s/%s", id, verb);
	long st = h_http("POST", path, NULL, r);
	free(path);
	return st;
}

static const char *state_of(const char *id)
{
	static char buf[32];
	char *path = h_fmt("/v1/sandboxes/%s", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	snprintf(buf, sizeof(buf), "%s", h_jstr(r.json, "status.state"));
	h_resp_free(&r);
	free(path);
	return buf;
}

static pid_t init_pid(const char *id)
{
	json_t *ins = h_inspect(id);
	pid_t pid = (pid_t)h_jint(ins, "pid");
	json_decref(ins);
	ck_assert_int_gt(pid, 0);
	return pid;
}

/* The counter the sandbox writes to its /tmp/c, read from the host. */
static long counter(pid_t pid)
{
	char *path = h_fmt("/proc/%d/root/tmp/c", (int)pid);
	char *text = h_read_file(path);
	free(path);
	long v = text ? atol(text) : -1;
	free(text);
	return v;
}

static char *start_counter(void)
{
	char *id = h_create("busybox", NULL);
	struct h_exec e;
	struct h_exec_opts bg = {.background = true};
	ck_assert_int_eq(h_exec(id,
				"i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; "
				"mv /tmp/c.new /tmp/c; usleep 20000; done",
				&bg, &e),
			 0);
	h_exec_free(&e);
	return id;
}

static void wait_counter_moves(pid_t pid, long from)
{
	for (int i = 0; i < 500 && counter(pid) <= from; i++)
		h_sleep_ms(10);
	ck_assert_int_gt(counter(pid), from);
}

START_TEST(counter_stops_and_continues)
{
	char *id = start_counter();
	pid_t pid = init_pid(id);
	wait_counter_moves(pid, 2);
	struct h_resp r;
	ck_assert_int_eq(post(id, "pause", &r), 202);
	h_resp_free(&r);
	ck_assert_str_eq(state_of(id), "Paused");
	long a = counter(pid);
	h_sleep_ms(600); /* ~30 increments if anything still ran */
	long b = counter(pid);
	ck_assert_int_eq(a, b);
	ck_assert_str_eq(state_of(id), "Paused"); /* GET does not wake it */

	ck_assert_int_eq(post(id, "resume", &r), 202);
	h_resp_free(&r);
	ck_assert_str_eq(state_of(id), "Running");
	wait_counter_moves(pid, b);
	free(id);
}
END_TEST

/* verb ("pause" or "stop"), then resume: each answered 202. */
static void then_resume(const char *id, const char *verb)
{
	struct h_resp r;
	ck_assert_int_eq(post(id, verb, &r), 202);
	h_resp_free(&r);
	ck_assert_int_eq(post(id, "resume", &r), 202);
	h_resp_free(&r);
}

/* The page, once the server answers (it may still be starting): up to 5 s. */
#define FETCH_RETRY                                                                                \
	H_FETCH "for i in $(seq 25); do o=$(fetch 8088 index.html); "                              \
		"[ -n \"$o\" ] && { echo \"$o\"; break; }; sleep 0.2; done"

START_TEST(server_serves_after_resume)
{
	char *id = h_create("busybox", NULL);
	h_sh(id, "mkdir -p /www && echo served > /www/index.html");
	struct h_exec e;
	struct h_exec_opts bg = {.background = true};
	ck_assert_int_eq(h_exec(id, "httpd -f -p 127.0.0.1:8088 -h /www", &bg, &e), 0);
	h_exec_free(&e);
	char *out = h_sh(id, FETCH_RETRY);
	ck_assert_str_eq(out, "served\n");
	free(out);
	then_resume(id, "pause");
	out = h_sh(id, FETCH_RETRY);
	ck_assert_str_eq(out, "served\n");
	free(out);
	free(id);
}
END_TEST

START_TEST(exec_and_files_resume_a_paused_sandbox)
{
	char *id = start_counter();
	pid_t pid = init_pid(id);
	struct h_resp r;
	ck_assert_int_eq(post(id, "pause", &r), 202);
	h_resp_free(&r);
	char *out = h_sh(id, "echo awake");
	ck_assert_str_eq(out, "awake\n");
	free(out);
	ck_assert_str_eq(state_of(id), "Running");
	wait_counter_moves(pid, counter(pid));

	ck_assert_int_eq(post(id, "pause", &r), 202);
	h_resp_free(&r);
	ck_assert_int_eq(h_file_info(id, "/tmp/c", &r), 200);
	h_resp_free(&r);
	ck_assert_str_eq(state_of(id), "Running");
	free(id);
}
END_TEST

START_TEST(conflicts_answered_409)
{
	char *id = h_create("busybox", NULL);
	struct h_resp r;
	ck_assert_int_eq(post(id, "resume", &r), 409);
	ck_assert_str_eq(h_err_code(&r), "DOCKER::SANDBOX_NOT_PAUSED");
	h_resp_free(&r);
	ck_assert_int_eq(post(id, "pause", &r), 202);
	h_resp_free(&r);
	ck_assert_int_eq(post(id, "pause", &r), 409);
	ck_assert_str_eq(h_err_code(&r), "DOCKER::SANDBOX_NOT_RUNNING");
	h_resp_free(&r);
	ck_assert_int_eq(post("0123456789abcdef", "pause", &r), 404);
	h_resp_free(&r);
	free(id);
}
END_TEST

START_TEST(paused_survives_celld_restart)
{
	char *id = start_counter();
	pid_t pid = init_pid(id);
	struct h_resp r;
	ck_assert_int_eq(post(id, "pause", &r), 202);
	h_resp_free(&r);
	long a = counter(pid);
	h_celld_kill();
	h_celld_start();
	ck_assert_str_eq(state_of(id), "Paused");
	ck_assert_int_eq(counter(pid), a);
	ck_assert_int_eq(post(id, "resume", &r), 202);
	h_resp_free(&r);
	wait_counter_moves(pid, a);
	char *out = h_sh(id, "echo back");
	ck_assert_str_eq(out, "back\n");
	free(out);
	free(id);
}
END_TEST

START_TEST(delete_paused_leaves_nothing)
{
	char *id = start_counter();
	json_t *ins = h_inspect(id);
	uint32_t base = (uint32_t)h_jint(ins, "uidMap.hostStart");
	char *cg = strdup(h_jstr(ins, "cgroup.path"));
	json_decref(ins);
	struct h_resp r;
	ck_assert_int_eq(post(id, "pause", &r), 202);
	h_resp_free(&r);
	ck_assert_int_eq(h_delete(id), 204);
	char *path = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 404);
	h_resp_free(&r);
	pid_t first = 0;
	ck_assert_int_eq(h_procs_in_uid_range(base, 65536, &first), 0);
	char where[512];
	ck_assert_msg(!h_cgroup_exists(id, where, sizeof(where)), "cgroup %s is left", where);
	struct stat st;
	ck_assert_msg(!*cg || stat(cg, &st) < 0, "cgroup %s is left", cg);
	free(cg);
	free(path);
	free(id);
}
END_TEST

START_TEST(cli_pause_resume)
{
	char *id = h_create("busybox", NULL);
	struct h_proc p;
	ck_assert_int_eq(h_cell(&p, "pause", id, NULL), 0);
	ck_assert_str_eq(h_trim(p.out), id);
	h_proc_free(&p);
	ck_assert_str_eq(state_of(id), "Paused");
	ck_assert_int_eq(h_cell(&p, "pause", id, NULL), 1);
	ck_assert_msg(strstr(p.err, "already Paused"), "%s", p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "resume", id, NULL), 0);
	h_proc_free(&p);
	ck_assert_str_eq(state_of(id), "Running");
	ck_assert_int_eq(h_cell(&p, "resume", id, NULL), 1);
	h_proc_free(&p);
	free(id);
}
END_TEST

/* The boot id is the sandbox's own (not the host kernel's), read-only, kept by a pause
 * (the same processes go on) and new after a stop and a start (a cold boot, as clients
 * that compare boot ids expect); the file it was made from is gone. */
START_TEST(boot_id_kept_by_pause_new_after_stop)
{
	static const char read_id[] = "cat /proc/sys/kernel/random/boot_id";
	char *host = h_read_file("/proc/sys/kernel/random/boot_id");
	ck_assert_ptr_nonnull(host);
	char *id = h_create("busybox", NULL);
	char *first = h_sh(id, read_id);
	ck_assert_uint_eq(strlen(first), 37);
	ck_assert_str_ne(first, host);
	char *out = h_sh(id, "echo x 2>/dev/null > /proc/sys/kernel/random/boot_id && echo "
			     "written; ls -a /dev | grep -c cell-boot-id; true");
	ck_assert_str_eq(out, "0\n");
	free(out);
	then_resume(id, "pause");
	out = h_sh(id, read_id);
	ck_assert_str_eq(out, first);
	free(out);
	then_resume(id, "stop");
	out = h_sh(id, read_id);
	ck_assert_uint_eq(strlen(out), 37);
	ck_assert_str_ne(out, first);
	ck_assert_str_ne(out, host);
	free(out);
	free(first);
	free(host);
	free(id);
}
END_TEST

static Suite *pause_suite(void)
{
	Suite *s = suite_create("pause");
	tcase_add_test(h_tcase(s, "counter_stops_and_continues", 120), counter_stops_and_continues);
	tcase_add_test(h_tcase(s, "server_serves_after_resume", 120), server_serves_after_resume);
	tcase_add_test(h_tcase(s, "exec_and_files_resume_a_paused_sandbox", 120),
		       exec_and_files_resume_a_paused_sandbox);
	tcase_add_test(h_tcase(s, "conflicts_answered_409", 120), conflicts_answered_409);
	tcase_add_test(h_tcase(s, "paused_survives_celld_restart", 120),
		       paused_survives_celld_restart);
	tcase_add_test(h_tcase(s, "delete_paused_leaves_nothing", 120),
		       delete_paused_leaves_nothing);
	tcase_add_test(h_tcase(s, "cli_pause_resume", 120), cli_pause_resume);
	tcase_add_test(h_tcase(s, "boot_id_kept_by_pause_new_after_stop", 120),
		       boot_id_kept_by_pause_new_after_stop);
	return s;
}

int main(void)
{
	return h_main(pause_suite());
}
