/* cell-init against root inside its own sandbox: nothing a process there does may block
 * PID 1, make it dumpable, or get its own state out through the files API.
 *
 * - stop_loop_does_not_wedge_pid1: a loop of kill(-1, SIGSTOP) stops every command's child,
 *   before or after its execve; exec, files, ping and interrupt keep answering.
 * - pid1_stays_undumpable / celld_warns_about_suid_dumpable: with fs.suid_dumpable=1
 *   (set for the test, put back by the harness whatever happens), commands as another uid
 *   leave PID 1 out of ptrace's reach, and celld says at start what to set.
 * - files_api_never_serves_process_state: /proc/self, /proc/thread-self and /proc/1, spelled
 *   any way, answer 403 to every files operation. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define EXECD "/v1/sandboxes/%s/proxy/44772"

/* An exec that must end with an answer of cell-init's (output, its refusal, its timeout),
 * never a failure of the relay. */
static void exec_answers(const char *id, const char *cmd, int round)
{
	struct h_exec_opts o = {.timeout_ms = 2000, .max_seconds = 120};
	struct h_exec e;
	h_exec(id, cmd, &o, &e);
	char *body = e.body ? json_dumps(e.body, JSON_COMPACT) : NULL;
	ck_assert_msg(e.status == 200 && (e.complete || e.errored),
		      "exec %d while the stop loop runs: HTTP %ld %s", round, e.status,
		      body ? body : e.err);
	/* 125 is celld's own failure (the relay broke or timed out). */
	ck_assert_msg(e.complete || e.exit_code != 125, "exec %d: relay failure: %s", round,
		      h_jstr(e.error, "traceback"));
	free(body);
	h_exec_free(&e);
}

START_TEST(stop_loop_does_not_wedge_pid1)
{
	char *id = h_create("busybox", NULL);
	/* Root inside stops every process it may signal, again and again (PID 1 is exempt by
	 * the kernel's rule, the loop's own shell by kill(-1)'s). */
	struct h_exec_opts bg = {.background = true, .max_seconds = 60};
	struct h_exec loop;
	h_exec(id, "echo $$ > /tmp/stopper; while :; do kill -STOP -1; done", &bg, &loop);
	ck_assert_msg(loop.status == 200 && loop.cmd_id, "starting the stop loop: HTTP %ld",
		      loop.status);
	char *loop_id = strdup(loop.cmd_id);
	h_exec_free(&loop);
	/* It runs once its pid file is there (read through the files API: no process). */
	struct h_resp r = {0};
	bool running = false;
	for (int i = 0; i < 200 && !running; i++) {
		h_resp_free(&r);
		running = h_download(id, "/tmp/stopper", &r) == 200 && r.len > 1;
		if (!running)
			h_sleep_ms(50);
	}
	h_resp_free(&r);
	ck_assert_msg(running, "the stop loop did not start");

	char *ping = h_fmt(EXECD "/ping", id);
	for (int i = 0; i < 5; i++) {
		exec_answers(id, "echo hi", i);
		long st = h_http("GET", ping, NULL, &r);
		ck_assert_msg(st == 200, "ping %d: HTTP %ld %s", i, st, r.body);
		h_resp_free(&r);
		st = h_download(id, "/tmp/stopper", &r);
		ck_assert_msg(st == 200, "download %d: HTTP %ld %s", i, st, r.body);
		h_resp_free(&r);
		st = h_file_info(id, "/tmp/stopper", &r);
		ck_assert_msg(st == 200, "info %d: HTTP %ld %s", i, st, r.body);
		h_resp_free(&r);
		st = h_upload(id, "/tmp/uploaded", "x", 1, 0644, &r);
		ck_assert_msg(st == 200, "upload %d: HTTP %ld %s", i, st, r.body);
		h_resp_free(&r);
	}

	/* Interrupt reaches the loop: SIGTERM (and SIGCONT) to its process group. */
	char *del = h_fmt(EXECD "/command?id=%s", id, loop_id);
	long st = h_http("DELETE", del, NULL, &r);
	ck_assert_msg(st >= 200 && st < 300, "interrupt: HTTP %ld %s", st, r.body);
	h_resp_free(&r);
	json_t *status = h_command_wait(id, loop_id, 30);
	ck_assert_msg(json_is_false(json_object_get(status, "running")),
		      "the interrupted stop loop still runs");
	json_decref(status);
	/* And with the loop gone, commands run as ever. */
	char *out = h_sh(id, "echo after");
	ck_assert_str_eq(out, "after\n");
	free(out);
	free(del);
	free(ping);
	free(loop_id);
	free(id);
}
END_TEST

/* A command as another uid changes ids in its child; that child must not share PID 1's
 * memory, or the kernel makes PID 1 dumpable (fs.suid_dumpable=1) and root inside takes
 * its relay socket with pidfd_getfd. */
START_TEST(pid1_stays_undumpable)
{
	h_sysctl_set("/proc/sys/fs/suid_dumpable", "1");
	char *id = h_create("busybox", NULL);
	h_upload_helper(id, "pid1_probe");
	for (int i = 0; i < 3; i++) {
		struct h_exec_opts o = {.as_user = true, .uid = 1000, .gid = 1000};
		struct h_exec e;
		h_exec(id, "id -u", &o, &e);
		ck_assert_msg(e.complete && !strcmp(e.out, "1000\n"), "command as uid 1000: %s%s",
			      e.out, e.err);
		h_exec_free(&e);
	}
	json_t *p = h_sh_pairs(id, "/root/pid1_probe");
	ck_assert_msg(!strcmp(h_jstr(p, "getfd"), "EPERM"),
		      "pidfd_getfd of PID 1's relay socket from root inside: %s",
		      h_jstr(p, "getfd"));
	ck_assert_msg(!strcmp(h_jstr(p, "environ"), "EACCES"),
		      "PID 1's environment from root inside: %s", h_jstr(p, "environ"));
	json_decref(p);
	free(id);
}
END_TEST

START_TEST(celld_warns_about_suid_dumpable)
{
	h_sysctl_set("/proc/sys/fs/suid_dumpable", "1");
	char *before = h_read_file(H.log);
	size_t seen = before ? strlen(before) : 0;
	h_celld_kill();
	h_celld_start();
	char *log = h_read_file(H.log);
	ck_assert_ptr_nonnull(log);
	const char *start = strlen(log) >= seen ? log + seen : log;
	ck_assert_msg(strstr(start, "fs.suid_dumpable is 1") &&
			  strstr(start, "set fs.suid_dumpable=0"),
		      "no warning about fs.suid_dumpable=1 at start:\n%s", start);
	free(log);
	free(before);
}
END_TEST

static long download_as(const char *id, const char *path, const char *query, const char *range,
			struct h_resp *r)
{
	char *enc = h_urlencode(path);
	char *url = h_fmt(EXECD "/files/download?path=%s%s", id, enc, query);
	char *hdr = range ? h_fmt("Range: %s", range) : NULL;
	const char *const headers[] = {hdr, NULL};
	struct h_req req = {.method = "GET", .path = url, .headers = hdr ? headers : NULL};
	long st = h_request(&req, r);
	free(hdr);
	free(url);
	free(enc);
	return st;
}

/* 403 naming the path, and nothing of PID 1's maps, status or environment. */
static void refused(const char *what, const char *path, long st, const struct h_resp *r)
{
	const char *body = r->body ? r->body : "";
	ck_assert_msg(!strstr(body, "cell-init") && !strstr(body, "LANG=C.UTF-8"),
		      "%s %s gave PID 1's state: HTTP %ld %.300s", what, path, st, body);
	ck_assert_msg(st == 403 && strstr(body, path), "%s %s: HTTP %ld %.300s", what, path, st,
		      body);
}

START_TEST(files_api_never_serves_process_state)
{
	char *id = h_create("busybox", NULL);
	char *pid = h_trim(h_sh(id, "sleep 1000 >/dev/null 2>&1 & echo $!"));
	free(h_sh(id, "ln -s /proc/self /workspace/me && ln -s /proc/1 /workspace/one && "
		      "ln -s ../proc/1/maps /workspace/maps && "
		      "ln -s /proc/thread-self /workspace/thread"));
	char *other = h_fmt("/proc/%s/cmdline", pid);
	const char *const paths[] = {
	    "/proc/self/maps",
	    "/proc/self/environ",
	    "/proc/self/status",
	    "/proc/thread-self/status",
	    "/proc/1/maps",
	    "/proc/1/environ",
	    "/proc/1/task/1/status",
	    "/proc/self/task/1/maps",
	    "/proc/self/../1/environ",
	    "/proc/./self/net/../status",
	    "/workspace/me/maps",
	    "/workspace/one/environ",
	    "/workspace/maps",
	    "/workspace/thread/status",
	    "/workspace/../proc/self/status",
	    other, /* another process's state: its reads take that process's locks */
	};
	static const char *const modes[][2] = {
	    {"&offset=1", NULL},	    /* lines, from the first */
	    {"", NULL},			    /* bytes, whole file */
	    {"&offset=1&limit=1000", NULL}, /* lines, bounded */
	    {"", "bytes=0-4095"},	    /* a range */
	};
	struct h_resp r;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
			long st = download_as(id, paths[i], modes[m][0], modes[m][1], &r);
			refused("download", paths[i], st, &r);
			h_resp_free(&r);
		}
		/* Info does not follow a last-component link: it describes the link made
		 * inside, which is no process's state. */
		if (!strcmp(paths[i], "/workspace/maps"))
			continue;
		long st = h_file_info(id, paths[i], &r);
		refused("info", paths[i], st, &r);
		h_resp_free(&r);
	}
	/* The directories and links themselves. */
	static const char *const entries[] = {"/proc/self", "/proc/self/", "/proc/thread-self",
					      "/proc/1", "/workspace/one/"};
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
		long st = h_file_info(id, entries[i], &r);
		refused("info", entries[i], st, &r);
		h_resp_free(&r);
	}
	static const char *const writes[] = {"/proc/self/comm", "/proc/1/attr/x",
					     "/workspace/one/new/file"};
	for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
		long st = h_upload(id, writes[i], "x", 1, 0644, &r);
		ck_assert_msg(st == 403, "upload to %s: HTTP %ld %.300s", writes[i], st, r.body);
		h_resp_free(&r);
	}
	/* The rest of /proc is served as before. */
	long st = download_as(id, "/proc/version", "&offset=1", NULL, &r);
	ck_assert_msg(st == 200 && strstr(r.body, "Linux"), "/proc/version: HTTP %ld %.200s", st,
		      r.body);
	h_resp_free(&r);
	ck_assert_int_eq(h_file_info(id, "/proc/net", &r), 200); /* the link, not followed */
	h_resp_free(&r);
	free(other);
	free(pid);
	free(id);
}
END_TEST

static Suite *init_suite(void)
{
	Suite *s = suite_create("init");
	tcase_add_test(h_tcase(s, "stop_loop_does_not_wedge_pid1", 300),
		       stop_loop_does_not_wedge_pid1);
	tcase_add_test(h_tcase(s, "pid1_stays_undumpable", 120), pid1_stays_undumpable);
	tcase_add_test(h_tcase(s, "celld_warns_about_suid_dumpable", 120),
		       celld_warns_about_suid_dumpable);
	tcase_add_test(h_tcase(s, "files_api_never_serves_process_state", 180),
		       files_api_never_serves_process_state);
	return s;
}

int main(void)
{
	return h_main(init_suite());
}
