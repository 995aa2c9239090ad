/* GET /v1/stats and GET /v1/sandboxes/{id}/top, and the CLI's `cell stats` and `cell top`
 * on them: the counters move when a sandbox burns CPU, takes memory, forks and writes to its
 * disk; a paused sandbox is measured, a stopped one has only its disk; top lists a process
 * with the pid the sandbox sees and its command line, a control character escaped; unknown
 * and malformed ids are refused, naming them; a networked sandbox's bytes move. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

/* The stats object of id in world w, through GET /v1/stats?id=id (asserting 200 and the
 * answer's shape); new reference. */
static json_t *world_stats_of(struct h_world *w, const char *id)
{
	struct h_resp r;
	char *path = h_fmt("/v1/stats?id=%s", id);
	long st = h_world_http(w, "GET", path, NULL, &r);
	ck_assert_msg(st == 200, "GET %s: %ld %s", path, st, r.body);
	json_t *list = json_object_get(r.json, "sandboxes");
	ck_assert_msg(json_is_integer(json_object_get(r.json, "timestamp")), "%s", r.body);
	ck_assert_msg(json_array_size(list) == 1, "%s", r.body);
	json_t *one = json_incref(json_array_get(list, 0));
	ck_assert_str_eq(h_jstr(one, "id"), id);
	h_resp_free(&r);
	free(path);
	return one;
}

static json_t *stats_of(const char *id)
{
	return world_stats_of(&H, id);
}

static bool all_moved(const char *id, json_t *before)
{
	json_t *now = stats_of(id);
	bool moved = h_jint(now, "cpuUsageUsec") >= h_jint(before, "cpuUsageUsec") + 200000 &&
		     h_jint(now, "memoryBytes") >= h_jint(before, "memoryBytes") + (16 << 20) &&
		     h_jint(now, "pidsCurrent") >= h_jint(before, "pidsCurrent") + 3 &&
		     h_jint(now, "diskUsedBytes") >= h_jint(before, "diskUsedBytes") + (6 << 20);
	json_decref(now);
	return moved;
}

START_TEST(counters_move)
{
	char *id = h_create("busybox", NULL);
	json_t *before = stats_of(id);
	ck_assert_str_eq(h_jstr(before, "state"), "Running");
	static const char *const members[] = {"timestamp",	  "cpuUsageUsec",  "memoryBytes",
					      "memoryLimitBytes", "pidsCurrent",   "pidsLimit",
					      "diskUsedBytes",	  "diskLimitBytes"};
	for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++)
		ck_assert_msg(h_jint(before, members[i]) >= 0, "no %s", members[i]);
	ck_assert_msg(h_jint(before, "memoryLimitBytes") > 0 && h_jint(before, "pidsLimit") > 0,
		      "limits not reported");
	/* Network none: no interface, no network counters. */
	ck_assert(!json_object_get(before, "networkRxBytes"));

	/* CPU (a busy loop), memory (tail -n 1 holds its one long line until its input ends), pids
	 * (those and a sleep) and disk (8 MiB written to the writable layer). */
	ck_assert_int_eq(h_sh_code(id, "dd if=/dev/zero of=/big bs=1M count=8 2>/dev/null && "
				       "sync"),
			 0);
	ck_assert_int_eq(h_sh_code(id, "(while :; do :; done) >/dev/null 2>&1 & "
				       "(head -c 33554432 /dev/zero; sleep 600) | tail -n 1 "
				       ">/dev/null 2>&1 & "
				       "sleep 600 >/dev/null 2>&1 &"),
			 0);
	bool moved = false;
	for (int i = 0; i < 300 && !(moved = all_moved(id, before)); i++)
		h_sleep_ms(100);
	json_t *now = stats_of(id);
	ck_assert_msg(moved, "counters did not move: before %s, now %s",
		      json_dumps(before, JSON_COMPACT), json_dumps(now, JSON_COMPACT));
	ck_assert_int_ge(h_jint(now, "timestamp"), h_jint(before, "timestamp"));
	json_decref(now);
	json_decref(before);

	/* Without ids: every sandbox the caller sees, this one among them. */
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", "/v1/stats", NULL, &r), 200);
	bool listed = false;
	size_t i;
	json_t *one;
	json_array_foreach(json_object_get(r.json, "sandboxes"), i, one) listed |=
	    !strcmp(h_jstr(one, "id"), id);
	ck_assert_msg(listed, "%s not in %s", id, r.body);
	h_resp_free(&r);
	free(id);
}
END_TEST

START_TEST(paused_and_stopped)
{
	char *id = h_create("busybox", NULL);
	ck_assert_int_eq(h_http("POST", h_fmt("/v1/sandboxes/%s/pause", id), NULL, NULL), 202);
	h_wait_state(id, "Paused", 30);
	json_t *s = stats_of(id);
	ck_assert_str_eq(h_jstr(s, "state"), "Paused");
	ck_assert_msg(h_jint(s, "pidsCurrent") >= 1, "a paused sandbox keeps its cgroup");
	json_decref(s);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", h_fmt("/v1/sandboxes/%s/top", id), NULL, &r), 200);
	ck_assert_msg(json_array_size(json_object_get(r.json, "processes")) >= 1, "%s", r.body);
	h_resp_free(&r);

	long st = h_http("POST", h_fmt("/v1/sandboxes/%s/stop", id), NULL, NULL);
	ck_assert_msg(st == 202 || st == 200 || st == 204, "stop: %ld", st);
	h_wait_state(id, "Paused", 30); /* the API reports Stopped as Paused */
	for (int i = 0; i < 100; i++) {
		s = stats_of(id);
		if (!strcmp(h_jstr(s, "state"), "Stopped"))
			break;
		json_decref(s);
		s = NULL;
		h_sleep_ms(100);
	}
	ck_assert_msg(s, "stats never said Stopped");
	/* No cgroup: no CPU, memory or pids; the disk is still there. */
	ck_assert(!json_object_get(s, "cpuUsageUsec"));
	ck_assert(!json_object_get(s, "memoryBytes"));
	ck_assert(!json_object_get(s, "pidsCurrent"));
	ck_assert_int_ge(h_jint(s, "diskUsedBytes"), 0);
	json_decref(s);
	ck_assert_int_eq(h_http("GET", h_fmt("/v1/sandboxes/%s/top", id), NULL, &r), 409);
	ck_assert_str_eq(h_err_code(&r), "SANDBOX_NOT_RUNNING");
	h_resp_free(&r);
	free(id);
}
END_TEST

/* The process of top whose command is cmd, or NULL. */
static json_t *process_named(json_t *top, const char *cmd)
{
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(top, "processes"), i,
			   p) if (!strcmp(h_jstr(p, "command"), cmd)) return p;
	return NULL;
}

START_TEST(top_lists_processes)
{
	char *id = h_create("busybox", NULL);
	char *pid = h_sh(id, "sleep 777 >/dev/null 2>&1 & echo $!");
	h_trim(pid);
	/* A command line carrying an escape sequence and a byte past ASCII. */
	ck_assert_int_eq(h_sh_code(id, "sh -c 'sleep 778; :' \"$(printf 'x\\033[2J\\001\\303')\" "
				       ">/dev/null 2>&1 &"),
			 0);
	/* A process put in the background is a copy of its shell until its execve: asked
	 * again until both have theirs. */
	struct h_resp r;
	for (int i = 0;; i++) {
		ck_assert_int_eq(h_http("GET", h_fmt("/v1/sandboxes/%s/top", id), NULL, &r), 200);
		if (i == 100 || (process_named(r.json, "sleep 777") &&
				 process_named(r.json, "sh -c sleep 778; : x\\x1b[2J\\x01\\xc3")))
			break;
		h_resp_free(&r);
		h_sleep_ms(100);
	}
	ck_assert_msg(!json_is_true(json_object_get(r.json, "truncated")), "%s", r.body);
	json_t *p = process_named(r.json, "sleep 777");
	ck_assert_msg(p, "no 'sleep 777' in %s", r.body);
	ck_assert_int_eq(h_jint(p, "pid"), atoll(pid));
	ck_assert_int_eq(h_jint(p, "uid"), 0);
	ck_assert_msg(strchr("SR", h_jstr(p, "state")[0]), "state %s", h_jstr(p, "state"));
	ck_assert_int_ge(h_jint(p, "rssBytes"), 1);
	/* Unix ms, not ticks since boot: after the sandbox was made, not after now. */
	long long now_ms = (long long)time(NULL) * 1000;
	ck_assert_int_ge(h_jint(p, "startedAt"), now_ms - 600000);
	ck_assert_int_le(h_jint(p, "startedAt"), now_ms + 60000);
	ck_assert_int_ge(h_jint(p, "cpuUsec"), 0);
	/* cell-init is the sandbox's pid 1. */
	ck_assert_msg(process_named(r.json, "cell-init"), "%s", r.body);
	ck_assert_int_eq(h_jint(process_named(r.json, "cell-init"), "pid"), 1);
	ck_assert_msg(process_named(r.json, "sh -c sleep 778; : x\\x1b[2J\\x01\\xc3"),
		      "the control characters are not escaped: %s", r.body);
	ck_assert_msg(!memchr(r.body, 0x1b, r.len), "a raw ESC in %s", r.body);
	h_resp_free(&r);

	struct h_proc c;
	h_cell(&c, "top", id, NULL);
	ck_assert_msg(c.status == 0, "top: %d %s", c.status, c.err);
	ck_assert_msg(strstr(c.out, "PID") && strstr(c.out, "COMMAND") &&
			  strstr(c.out, "sleep 777") && strstr(c.out, "x\\x1b[2J"),
		      "%s", c.out);
	ck_assert_msg(!memchr(c.out, 0x1b, c.out_len), "a raw ESC in %s", c.out);
	h_proc_free(&c);
	free(pid);
	free(id);
}
END_TEST

START_TEST(unknown_and_bad_ids)
{
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", "/v1/stats?id=0123456789abcdef", NULL, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "SANDBOX_NOT_FOUND");
	ck_assert_msg(strstr(r.body, "0123456789abcdef"), "%s", r.body);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", "/v1/stats?id=..%2Fx", NULL, &r), 400);
	ck_assert_msg(strstr(r.body, "../x"), "%s", r.body);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", "/v1/sandboxes/0123456789abcdef/top", NULL, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "SANDBOX_NOT_FOUND");
	h_resp_free(&r);
	/* More ids than one request takes. */
	char *many = h_fmt("/v1/stats?id=a");
	for (int i = 0; i < 1024; i++) {
		char *more = h_fmt("%s&id=a", many);
		free(many);
		many = more;
	}
	ck_assert_int_eq(h_http("GET", many, NULL, &r), 400);
	ck_assert_msg(strstr(r.body, "id: at most"), "%s", r.body);
	h_resp_free(&r);
	free(many);

	struct h_proc c;
	h_cell(&c, "stats", "--no-stream", "nosuch", NULL);
	ck_assert_msg(c.status != 0 && strstr(c.err, "nosuch"), "%d %s", c.status, c.err);
	h_proc_free(&c);
	h_cell(&c, "top", "nosuch", NULL);
	ck_assert_msg(c.status != 0 && strstr(c.err, "nosuch"), "%d %s", c.status, c.err);
	h_proc_free(&c);
	h_cell(&c, "stats", "--format", "yaml", NULL);
	ck_assert_msg(c.status == 2 && strstr(c.err, "--format"), "%d %s", c.status, c.err);
	h_proc_free(&c);
}
END_TEST

START_TEST(cli_json_shape)
{
	char *id = h_create("busybox", NULL);
	ck_assert_int_eq(h_sh_code(id, "(while :; do :; done) >/dev/null 2>&1 &"), 0);
	struct h_proc c;
	h_cell(&c, "stats", "--no-stream", "--format", "json", id, NULL);
	ck_assert_msg(c.status == 0, "stats: %d %s", c.status, c.err);
	json_t *all = json_loads(c.out, 0, NULL);
	ck_assert_msg(json_is_array(all) && json_array_size(all) == 1, "%s", c.out);
	json_t *one = json_array_get(all, 0);
	ck_assert_str_eq(h_jstr(one, "id"), id);
	ck_assert_str_eq(h_jstr(one, "state"), "Running");
	json_t *pct = json_object_get(one, "cpuPercent");
	ck_assert_msg(json_is_number(pct) && json_number_value(pct) > 0, "%s", c.out);
	ck_assert_int_ge(h_jint(one, "memoryBytes"), 1);
	json_decref(all);
	h_proc_free(&c);

	/* The table: a header and the sandbox's row, by its id. */
	h_cell(&c, "stats", "--no-stream", id, NULL);
	ck_assert_msg(c.status == 0 && strstr(c.out, "CPU %") && strstr(c.out, id), "%s %s", c.out,
		      c.err);
	h_proc_free(&c);
	free(id);
}
END_TEST

/* A networked sandbox's bytes, its veth's counters: they move with a DNS query to its
 * resolver on the host side (a celld in a private network namespace whose upstream is its
 * own loopback: nothing leaves the machine). */
START_TEST(network_bytes)
{
	struct h_netns ns;
	h_netns_hold(&ns);
	const char *flags[] = {"--network-default", "public", "--dns-upstream", "127.0.0.1:53",
			       NULL};
	struct h_world *w =
	    h_world_add(&(struct h_world_opts){.name = "net", .flags = flags, .netns_fd = ns.fd});
	char *id = h_world_create(w, "busybox", NULL);
	json_t *before = world_stats_of(w, id);
	ck_assert_msg(json_object_get(before, "networkRxBytes") &&
			  json_object_get(before, "networkTxBytes"),
		      "no network counters: %s", json_dumps(before, JSON_COMPACT));
	h_world_sh_code(w, id, "nslookup stats.test >/dev/null 2>&1");
	json_t *now = world_stats_of(w, id);
	ck_assert_int_gt(h_jint(now, "networkTxBytes"), h_jint(before, "networkTxBytes"));
	ck_assert_int_gt(h_jint(now, "networkRxBytes"), h_jint(before, "networkRxBytes"));
	json_decref(now);
	json_decref(before);
	ck_assert_int_eq(h_world_delete(w, id), 204);
	free(id);
	h_netns_release(&ns);
}
END_TEST

static Suite *stats_suite(void)
{
	Suite *s = suite_create("stats");
	tcase_add_test(h_tcase(s, "counters_move", 120), counters_move);
	tcase_add_test(h_tcase(s, "paused_and_stopped", 120), paused_and_stopped);
	tcase_add_test(h_tcase(s, "top_lists_processes", 60), top_lists_processes);
	tcase_add_test(h_tcase(s, "unknown_and_bad_ids", 60), unknown_and_bad_ids);
	tcase_add_test(h_tcase(s, "cli_json_shape", 60), cli_json_shape);
	tcase_add_test(h_tcase(s, "network_bytes", 120), network_bytes);
	return s;
}

int main(void)
{
	return h_main(stats_suite());
}
