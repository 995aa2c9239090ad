/* Stopped and the idle timers: stop ends every process and frees the cgroup but keeps the
 * files; resume, an exec or a create with the session key start it again on that disk; a
 * Stopped sandbox is reported Paused with reason Stopped and survives a celld restart;
 * the timers (seconds here) pause an idle sandbox, stop a paused one and delete a stopped
 * one, leaving nothing; keepalive holds the idle pause off; only a client's use counts (a
 * foreground command's reader, an attached terminal, an open proxied WebSocket), never
 * what runs inside by itself (an entrypoint, background commands); the expiry can stop
 * instead of delete; activeSeconds and lastActivityAt; bad timer values are refused naming
 * the field; `cell stop` and `cell keepalive`; the CLI's timer flags (in the record, in
 * effect, a bad value a usage error naming the flag). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static long post(const char *id, const char *verb, struct h_resp *r)
{
	char *path = h_fmt("/v1/sandboxes/%s/%s", id, verb);
	long st = h_http("POST", path, NULL, r);
	free(path);
	return st;
}

static void post_ok(const char *id, const char *verb, long want)
{
	struct h_resp r;
	ck_assert_int_eq(post(id, verb, &r), want);
	h_resp_free(&r);
}

/* "Running", "Paused", "Stopped" (reported as Paused with reason Stopped), or "HTTP 404". */
static const char *state_of(const char *id)
{
	static char buf[64];
	char *path = h_fmt("/v1/sandboxes/%s", id);
	struct h_resp r;
	long st = h_http("GET", path, NULL, &r);
	if (st != 200)
		snprintf(buf, sizeof(buf), "HTTP %ld", st);
	else if (!strcmp(h_jstr(r.json, "status.reason"), "Stopped"))
		snprintf(buf, sizeof(buf), "Stopped");
	else
		snprintf(buf, sizeof(buf), "%s", h_jstr(r.json, "status.state"));
	h_resp_free(&r);
	free(path);
	return buf;
}

static const char *wait_for(const char *id, const char *want, int timeout_s)
{
	const char *st = state_of(id);
	for (int i = 0; i < timeout_s * 10 && strcmp(st, want); i++) {
		h_sleep_ms(100);
		st = state_of(id);
	}
	return st;
}

/* A busybox sandbox made with extra (a create body's other members, dropped here). */
static char *create_with(json_t *extra)
{
	char *id = h_create("busybox", extra);
	json_decref(extra);
	return id;
}

static json_t *timers(const char *idle, const char *stop, const char *reclaim)
{
	json_t *ext = json_object();
	if (idle)
		json_object_set_new(ext, "cell.idleTimeout", json_string(idle));
	if (stop)
		json_object_set_new(ext, "cell.stopAfter", json_string(stop));
	if (reclaim)
		json_object_set_new(ext, "cell.reclaimAfter", json_string(reclaim));
	return json_pack("{s:o}", "extensions", ext);
}

/* Nothing of the sandbox runs: no process in its uid range, no cgroup. */
static void assert_nothing_runs(const char *id, uint32_t base)
{
	pid_t first = 0;
	ck_assert_int_eq(h_procs_in_uid_range(base, 65536, &first), 0);
	char where[512];
	ck_assert_msg(!h_cgroup_exists(id, where, sizeof(where)), "cgroup %s is left", where);
}

static uint32_t uid_base(const char *id)
{
	json_t *ins = h_inspect(id);
	uint32_t base = (uint32_t)h_jint(ins, "uidMap.hostStart");
	json_decref(ins);
	return base;
}

static long list_count(const char *query)
{
	char *path = h_fmt("/v1/sandboxes?%s", query);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	long n = (long)h_jint(r.json, "pagination.totalItems");
	h_resp_free(&r);
	free(path);
	return n;
}

START_TEST(stop_keeps_the_disk_and_an_exec_starts_it)
{
	char *id = h_create("busybox", NULL);
	uint32_t base = uid_base(id);
	free(h_sh(id, "echo kept > /root/f; (sleep 1000 &)"));
	post_ok(id, "stop", 202);
	ck_assert_str_eq(state_of(id), "Stopped");
	struct h_resp r;
	char *path = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	/* What an OpenSandbox client sees: Paused, and why. */
	ck_assert_str_eq(h_jstr(r.json, "status.state"), "Paused");
	ck_assert_msg(strstr(h_jstr(r.json, "status.message"), "disk is kept"), "%s",
		      h_jstr(r.json, "status.message"));
	ck_assert_int_ge(h_jint(r.json, "usage.activeSeconds"), 0);
	h_resp_free(&r);
	json_t *ins = h_inspect(id);
	ck_assert_str_eq(h_jstr(ins, "state"), "Stopped");
	ck_assert(json_is_null(h_jget(ins, "pid")));
	json_decref(ins);
	assert_nothing_runs(id, base);
	ck_assert_int_eq(list_count("state=Stopped"), 1);
	ck_assert_int_eq(list_count("state=Paused"), 1);
	ck_assert_int_eq(list_count("state=Running"), 0);
	post_ok(id, "stop", 409);

	/* Cold start by use: the file is there, the process of before is not (busybox has
	 * pidof, not pgrep). */
	char *out = h_sh(id, "cat /root/f; pidof sleep || echo no-sleep");
	ck_assert_str_eq(out, "kept\nno-sleep\n");
	free(out);
	ck_assert_str_eq(state_of(id), "Running");
	free(path);
	free(id);
}
END_TEST

START_TEST(resume_starts_a_stopped_one_and_a_paused_one_stops)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "echo 1 > /root/n"));
	post_ok(id, "pause", 202);
	post_ok(id, "stop", 202); /* a paused sandbox stops as it is */
	ck_assert_str_eq(state_of(id), "Stopped");
	post_ok(id, "resume", 202);
	ck_assert_str_eq(state_of(id), "Running");
	post_ok(id, "resume", 409);
	char *out = h_sh(id, "cat /root/n");
	ck_assert_str_eq(out, "1\n");
	free(out);
	free(id);
}
END_TEST

START_TEST(stopped_survives_celld_restart)
{
	char *id = h_create("busybox", NULL);
	uint32_t base = uid_base(id);
	free(h_sh(id, "echo before > /root/f"));
	post_ok(id, "stop", 202);
	h_celld_kill();
	h_celld_start();
	ck_assert_str_eq(state_of(id), "Stopped");
	assert_nothing_runs(id, base);
	char *out = h_sh(id, "cat /root/f");
	ck_assert_str_eq(out, "before\n");
	free(out);
	free(id);
}
END_TEST

START_TEST(session_key_create_starts_a_stopped_one)
{
	json_t *extra =
	    json_pack("{s:{s:s}}", "extensions", "cell.sessionKey", "idle-test-session");
	char *id = h_create("busybox", extra);
	free(h_sh(id, "echo mine > /root/f"));
	post_ok(id, "stop", 202);
	struct h_resp r;
	long st = h_create_ex("busybox", extra, H_UNIX, &r);
	ck_assert_msg(st == 200 || st == 201 || st == 202, "create-or-resume: %ld", st);
	ck_assert_str_eq(h_jstr(r.json, "id"), id);
	ck_assert_str_eq(h_jstr(r.json, "status.state"), "Running");
	h_resp_free(&r);
	json_decref(extra);
	char *out = h_sh(id, "cat /root/f");
	ck_assert_str_eq(out, "mine\n");
	free(out);
	free(id);
}
END_TEST

START_TEST(idle_pauses_then_stops_then_deletes)
{
	char *id = create_with(timers("2", "2", "2"));
	uint32_t base = uid_base(id);
	json_t *ins = h_inspect(id);
	ck_assert_int_eq(h_jint(ins, "timers.idleTimeout"), 2);
	ck_assert_int_eq(h_jint(ins, "timers.reclaimAfter"), 2);
	json_decref(ins);
	ck_assert_str_eq(wait_for(id, "Paused", 60), "Paused");
	ck_assert_str_eq(wait_for(id, "Stopped", 60), "Stopped");
	assert_nothing_runs(id, base);
	ck_assert_str_eq(wait_for(id, "HTTP 404", 60), "HTTP 404");
	/* The audit log says who did it: celld itself, each step by its timer. */
	char *path = h_fmt("/v1/audit?sandbox=%s", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	const char *want[] = {"pause", "stop", "delete"};
	size_t k = 0, i;
	json_t *rec;
	json_array_foreach(h_jget(r.json, "records"), i, rec)
	{
		if (k < 3 && !strcmp(h_jstr(rec, "action"), want[k])) {
			ck_assert_str_eq(h_jstr(rec, "who"), "celld");
			k++;
		}
	}
	ck_assert_msg(k == 3, "audit records of the timers' steps: %zu of 3 in %s", k, r.body);
	h_resp_free(&r);
	free(path);
	char *dir = h_fmt("%s/sandboxes/%s", h_state_dir(), id);
	struct stat st;
	ck_assert_msg(stat(dir, &st) < 0, "%s is left", dir);
	free(dir);
	free(id);
}
END_TEST

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

START_TEST(keepalive_holds_off_the_pause)
{
	char *id = create_with(timers("5", "0", "0"));
	/* Keepalives every second for 8 s: still Running. A look that came more than 3 s
	 * after its keepalive (a slow machine) proves nothing and is not counted. */
	int looked = 0;
	for (int i = 0; i < 8; i++) {
		struct h_resp r;
		int64_t sent = mono_ms();
		ck_assert_int_eq(post(id, "keepalive", &r), 200);
		ck_assert_int_eq(h_jint(r.json, "timers.idleTimeout"), 5);
		ck_assert_str_ne(h_jstr(r.json, "lastActivityAt"), "");
		h_resp_free(&r);
		h_sleep_ms(1000);
		const char *st = state_of(id);
		if (mono_ms() - sent < 3000) {
			ck_assert_str_eq(st, "Running");
			looked++;
		}
	}
	ck_assert_int_gt(looked, 0);
	/* Then it is idle, and paused. */
	ck_assert_str_eq(wait_for(id, "Paused", 60), "Paused");
	post_ok("0123456789abcdef", "keepalive", 404);
	free(id);
}
END_TEST

/* ---- what counts as use: a client's, never what runs inside by itself ---- */

#define EXECD "/v1/sandboxes/%s/proxy/44772"
#define WS_UPGRADE                                                                                 \
	"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"               \
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
/* Idle after 2 s, stopped 3 s later, never reclaimed. */
#define IDLE_FAST timers("2", "3", "0")
/* How long a held sandbox is watched (well past idleTimeout and a tick of the timers), and
 * the bound for reaching a state once nothing holds it. */
#define HOLD_S	8
#define REACH_S 60

/* Running all the while, looked at every second for HOLD_S seconds. */
static void stays_running(const char *id, const char *while_what)
{
	for (int i = 0; i < HOLD_S; i++) {
		h_sleep_ms(1000);
		ck_assert_msg(!strcmp(state_of(id), "Running"), "%s, after %d s: %s", while_what,
			      i + 1, state_of(id));
	}
}

/* A busybox sandbox with the idle timers of IDLE_FAST and entrypoint (a JSON array, or
 * NULL for none). */
static char *create_idling(const char *entrypoint)
{
	json_t *extra = IDLE_FAST;
	if (entrypoint)
		json_object_set_new(extra, "entrypoint", json_loads(entrypoint, 0, NULL));
	return create_with(extra);
}

/* An entrypoint that runs is no use: a sandbox with one idles, pauses and stops as one
 * without does, and its next start runs the entrypoint again. */
START_TEST(a_running_entrypoint_idles)
{
	static const char *const eps[] = {NULL, "[\"tail\", \"-f\", \"/dev/null\"]",
					  "[\"sleep\", \"infinity\"]"};
	char *ids[3];
	for (size_t i = 0; i < 3; i++)
		ids[i] = create_idling(eps[i]);
	char *out = h_sh(ids[2], "pidof sleep >/dev/null && echo runs");
	ck_assert_str_eq(out, "runs\n");
	free(out);
	for (size_t i = 0; i < 3; i++)
		ck_assert_msg(!strcmp(wait_for(ids[i], "Stopped", REACH_S), "Stopped"),
			      "entrypoint %s: %s after %d s", eps[i] ? eps[i] : "none",
			      state_of(ids[i]), REACH_S);
	/* The audit log shows the way it went: paused by the timer, then stopped. */
	char *path = h_fmt("/v1/audit?sandbox=%s", ids[2]);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_msg(strstr(r.body, "\"pause\"") && strstr(r.body, "\"stop\""), "%s", r.body);
	h_resp_free(&r);
	free(path);
	/* A use cold-starts it, and the entrypoint runs again. */
	out = h_sh(ids[2], "pidof sleep >/dev/null && echo runs again");
	ck_assert_str_eq(out, "runs again\n");
	free(out);
	for (size_t i = 0; i < 3; i++)
		free(ids[i]);
}
END_TEST

/* Background commands, started through the API or by a shell, are no use either: the
 * sandbox pauses with them frozen, and the next use finds them where they were. */
START_TEST(background_commands_idle)
{
	char *id = create_idling(NULL);
	struct h_exec e;
	struct h_exec_opts bg = {.background = true};
	ck_assert_int_eq(h_exec(id, "sleep 1000", &bg, &e), 0);
	h_exec_free(&e);
	free(h_sh(id, "nohup sleep 1001 >/dev/null 2>&1 &"));
	ck_assert_str_eq(wait_for(id, "Paused", REACH_S), "Paused");
	char *out = h_sh(id, "pidof sleep | wc -w");
	ck_assert_str_eq(h_trim(out), "2");
	free(out);
	free(id);
}
END_TEST

/* A foreground command holds the sandbox while its client reads the events; once the
 * client has gone, the command runs on and the sandbox idles. */
START_TEST(a_foreground_command_holds_while_its_client_reads)
{
	char *id = create_idling(NULL);
	char *path = h_fmt(EXECD "/command", id);
	long st;
	int fd = h_open_request(H_UNIX, "POST", path, NULL, "{\"command\": \"sleep 1000\"}", &st);
	ck_assert_int_eq(st, 200);
	stays_running(id, "a foreground command's client reading");
	close(fd);
	ck_assert_str_eq(wait_for(id, "Paused", REACH_S), "Paused");
	char *out = h_sh(id, "pidof sleep >/dev/null && echo still runs");
	ck_assert_str_eq(out, "still runs\n");
	free(out);
	free(path);
	free(id);
}
END_TEST

/* An attached terminal holds it; the detached terminal's shell, still running, does not. */
START_TEST(an_attached_terminal_holds)
{
	char *id = create_idling(NULL);
	struct h_resp r;
	char *path = h_fmt(EXECD "/pty", id);
	ck_assert_int_eq(h_http("POST", path, NULL, &r), 201);
	char *ws = h_fmt(EXECD "/pty/%s/ws", id, h_jstr(r.json, "session_id"));
	h_resp_free(&r);
	long st;
	int fd = h_open_request(H_UNIX, "GET", ws, WS_UPGRADE, NULL, &st);
	ck_assert_int_eq(st, 101);
	stays_running(id, "a terminal attached");
	close(fd);
	ck_assert_str_eq(wait_for(id, "Paused", REACH_S), "Paused");
	free(ws);
	free(path);
	free(id);
}
END_TEST

/* An open WebSocket through the port proxy holds it; the app serving it, left alone, does
 * not. */
START_TEST(an_open_proxied_websocket_holds)
{
	char *id = create_idling(NULL);
	h_upload_helper(id, "ws_echo_probe");
	free(h_sh(id, "nohup /root/ws_echo_probe 8090 >/dev/null 2>&1 &"));
	char *path = h_fmt("/v1/sandboxes/%s/proxy/8090/", id);
	long st = 0;
	int fd = -1;
	for (int i = 0; i < 100 && st != 101; i++) {
		if (fd >= 0) {
			close(fd);
			h_sleep_ms(50);
		}
		fd = h_open_request(H_UNIX, "GET", path, WS_UPGRADE, NULL, &st);
		ck_assert_msg(st == 101 || st == 502, "a WebSocket to the app: %ld", st);
	}
	ck_assert_int_eq(st, 101);
	stays_running(id, "a proxied WebSocket open");
	close(fd);
	ck_assert_str_eq(wait_for(id, "Paused", REACH_S), "Paused");
	free(path);
	free(id);
}
END_TEST

START_TEST(expiry_stops_with_on_timeout_stop)
{
	json_t *extra = timers(NULL, NULL, NULL);
	json_object_set_new(json_object_get(extra, "extensions"), "cell.onTimeout",
			    json_string("stop"));
	char *id = create_with(extra);
	free(h_sh(id, "echo x > /root/f"));
	char when[64];
	time_t t = time(NULL) + 4;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	char *body = h_fmt("{\"expiresAt\": \"%s\"}", when);
	char *path = h_fmt("/v1/sandboxes/%s/renew-expiration", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("POST", path, body, &r), 200);
	h_resp_free(&r);
	ck_assert_str_eq(wait_for(id, "Stopped", 60), "Stopped");
	char *get = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", get, NULL, &r), 200);
	ck_assert_ptr_null(h_jget(r.json, "expiresAt")); /* spent */
	h_resp_free(&r);
	char *out = h_sh(id, "cat /root/f");
	ck_assert_str_eq(out, "x\n");
	free(out);
	free(get);
	free(path);
	free(body);
	free(id);
}
END_TEST

START_TEST(active_seconds_count_running_time_only)
{
	char *id = h_create("busybox", NULL);
	h_sleep_ms(2200);
	post_ok(id, "stop", 202);
	char *path = h_fmt("/v1/sandboxes/%s", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	long long a = h_jint(r.json, "usage.activeSeconds");
	ck_assert_int_ge(a, 2);
	ck_assert_str_ne(h_jstr(r.json, "usage.lastActivityAt"), "");
	h_resp_free(&r);
	h_sleep_ms(2200); /* stopped: not billable */
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_int_eq(h_jint(r.json, "usage.activeSeconds"), a);
	h_resp_free(&r);
	/* Kept across a restart of celld. */
	h_celld_kill();
	h_celld_start();
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_int_eq(h_jint(r.json, "usage.activeSeconds"), a);
	h_resp_free(&r);
	free(path);
	free(id);
}
END_TEST

START_TEST(bad_timer_values_are_refused)
{
	static const char *const bad[][2] = {
	    {"cell.idleTimeout", "abc"}, {"cell.idleTimeout", "-1"},
	    {"cell.stopAfter", "1e3"},	 {"cell.reclaimAfter", "999999999999"},
	    {"cell.onTimeout", "pause"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *extra = json_pack("{s:{s:s}}", "extensions", bad[i][0], bad[i][1]);
		struct h_resp r;
		ck_assert_int_eq(h_create_ex("busybox", extra, H_UNIX, &r), 400);
		json_decref(extra);
		ck_assert_msg(strstr(h_jstr(r.json, "message"), bad[i][0]), "%s: %s", bad[i][0],
			      h_jstr(r.json, "message"));
		h_resp_free(&r);
	}
	ck_assert_int_eq(h_sandbox_count(), 0);
}
END_TEST

START_TEST(cli_stop_keepalive_and_ls)
{
	char *id = h_create("busybox", NULL);
	struct h_proc p;
	ck_assert_int_eq(h_cell(&p, "stop", id, NULL), 0);
	ck_assert_str_eq(h_trim(p.out), id);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "ls", NULL), 0);
	ck_assert_msg(strstr(p.out, "Stopped"), "%s", p.out);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "stop", id, NULL), 1);
	ck_assert_msg(strstr(p.err, "already Stopped"), "%s", p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "keepalive", id, NULL), 0);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "resume", id, NULL), 0);
	h_proc_free(&p);
	ck_assert_str_eq(state_of(id), "Running");
	free(id);
}
END_TEST

/* ---- the CLI's timer flags (cell(1): --idle-timeout, --stop-after, --reclaim-after and
 * --on-timeout of create and run, the cell.* extensions of the same names) ---- */

/* `cell inspect id`'s timers: each must be what the flags asked. */
static void cli_timers_are(const char *id, long idle, long stop, long reclaim, const char *on)
{
	struct h_proc p;
	ck_assert_int_eq(h_cell(&p, "inspect", id, NULL), 0);
	json_t *ins = json_loads(p.out, 0, NULL);
	ck_assert_msg(ins, "cell inspect printed no JSON: %s", p.out);
	ck_assert_int_eq(h_jint(ins, "timers.idleTimeout"), idle);
	ck_assert_int_eq(h_jint(ins, "timers.stopAfter"), stop);
	ck_assert_int_eq(h_jint(ins, "timers.reclaimAfter"), reclaim);
	ck_assert_str_eq(h_jstr(ins, "timers.onTimeout"), on);
	json_decref(ins);
	h_proc_free(&p);
}

/* The id `cell run` names in its "sandbox ... kept" line on stderr, tracked. */
static char *run_kept_id(const struct h_proc *p)
{
	const char *k = p->err ? strstr(p->err, "cell: sandbox ") : NULL;
	char id[80] = "";
	ck_assert_msg(k && sscanf(k, "cell: sandbox %79s kept", id) == 1, "stderr: %s",
		      p->err ? p->err : "");
	h_track_sandbox(id);
	return strdup(id);
}

/* Each flag of create and run lands in the sandbox's timers as given: values that differ
 * from the shipped policy's defaults (300, 3600, 604800, delete), so a flag dropped on the
 * way shows. */
START_TEST(cli_timer_flags_reach_the_sandbox)
{
	struct h_proc p;
	ck_assert_int_eq(h_cell(&p, "create", "-I", "busybox", "--idle-timeout", "0",
				"--stop-after", "70", "--reclaim-after", "90", "--on-timeout",
				"stop", NULL),
			 0);
	char *id = strdup(h_trim(p.out));
	h_track_sandbox(id);
	h_proc_free(&p);
	cli_timers_are(id, 0, 70, 90, "stop");
	ck_assert_int_eq(h_cell(&p, "run", "-I", "busybox", "--idle-timeout", "50", "--stop-after",
				"0", "--reclaim-after", "0", "--on-timeout", "stop", "--", "true",
				NULL),
			 0);
	char *rid = run_kept_id(&p);
	h_proc_free(&p);
	cli_timers_are(rid, 50, 0, 0, "stop");
	free(rid);
	free(id);
}
END_TEST

/* What the flags ask happens: 1 s of each timer pauses, stops, then deletes a sandbox of
 * `cell create`; --on-timeout stop makes its expiry (brought near through the API) a stop
 * of one of `cell run`. The waits are hang guards. */
START_TEST(cli_timer_flags_take_effect)
{
	struct h_proc p;
	ck_assert_int_eq(h_cell(&p, "create", "-I", "busybox", "--idle-timeout", "1",
				"--stop-after", "1", "--reclaim-after", "1", NULL),
			 0);
	char *id = strdup(h_trim(p.out));
	h_track_sandbox(id);
	h_proc_free(&p);
	ck_assert_str_eq(wait_for(id, "Paused", 60), "Paused");
	ck_assert_str_eq(wait_for(id, "Stopped", 60), "Stopped");
	ck_assert_str_eq(wait_for(id, "HTTP 404", 60), "HTTP 404");
	free(id);

	ck_assert_int_eq(h_cell(&p, "run", "-I", "busybox", "--timeout", "60", "--idle-timeout",
				"0", "--on-timeout", "stop", "--", "true", NULL),
			 0);
	id = run_kept_id(&p);
	h_proc_free(&p);
	char when[64];
	time_t t = time(NULL) + 4;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	char *body = h_fmt("{\"expiresAt\": \"%s\"}", when);
	char *path = h_fmt("/v1/sandboxes/%s/renew-expiration", id);
	ck_assert_int_eq(h_http("POST", path, body, NULL), 200);
	ck_assert_str_eq(wait_for(id, "Stopped", 60), "Stopped");
	free(path);
	free(body);
	free(id);
}
END_TEST

/* A bad value is the command's usage error naming the flag (create: exit 2; run: 125, its
 * own failure), and no sandbox is made. */
START_TEST(cli_timer_flags_refuse_bad_values)
{
	static const char *const bad[][2] = {
	    {"--idle-timeout", "abc"},
	    {"--stop-after", "-1"},
	    {"--reclaim-after", "1.5"},
	    {"--on-timeout", "pause"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct h_proc p;
		h_cell(&p, "create", "-I", "busybox", bad[i][0], bad[i][1], NULL);
		ck_assert_msg(p.status == 2 && strstr(p.err, bad[i][0]),
			      "create %s %s: exit %d: %s", bad[i][0], bad[i][1], p.status, p.err);
		h_proc_free(&p);
		h_cell(&p, "run", "-I", "busybox", bad[i][0], bad[i][1], "--", "true", NULL);
		ck_assert_msg(p.status == 125 && strstr(p.err, bad[i][0]), "run %s %s: exit %d: %s",
			      bad[i][0], bad[i][1], p.status, p.err);
		h_proc_free(&p);
	}
	ck_assert_int_eq(h_sandbox_count(), 0);
}
END_TEST

static Suite *idle_suite(void)
{
	Suite *s = suite_create("idle");
	tcase_add_test(h_tcase(s, "stop_keeps_the_disk_and_an_exec_starts_it", 120),
		       stop_keeps_the_disk_and_an_exec_starts_it);
	tcase_add_test(h_tcase(s, "resume_starts_a_stopped_one_and_a_paused_one_stops", 120),
		       resume_starts_a_stopped_one_and_a_paused_one_stops);
	tcase_add_test(h_tcase(s, "stopped_survives_celld_restart", 120),
		       stopped_survives_celld_restart);
	tcase_add_test(h_tcase(s, "session_key_create_starts_a_stopped_one", 120),
		       session_key_create_starts_a_stopped_one);
	tcase_add_test(h_tcase(s, "idle_pauses_then_stops_then_deletes", 240),
		       idle_pauses_then_stops_then_deletes);
	tcase_add_test(h_tcase(s, "keepalive_holds_off_the_pause", 240),
		       keepalive_holds_off_the_pause);
	tcase_add_test(h_tcase(s, "a_running_entrypoint_idles", 240), a_running_entrypoint_idles);
	tcase_add_test(h_tcase(s, "background_commands_idle", 240), background_commands_idle);
	tcase_add_test(h_tcase(s, "a_foreground_command_holds_while_its_client_reads", 240),
		       a_foreground_command_holds_while_its_client_reads);
	tcase_add_test(h_tcase(s, "an_attached_terminal_holds", 240), an_attached_terminal_holds);
	tcase_add_test(h_tcase(s, "an_open_proxied_websocket_holds", 240),
		       an_open_proxied_websocket_holds);
	tcase_add_test(h_tcase(s, "expiry_stops_with_on_timeout_stop", 120),
		       expiry_stops_with_on_timeout_stop);
	tcase_add_test(h_tcase(s, "active_seconds_count_running_time_only", 120),
		       active_seconds_count_running_time_only);
	tcase_add_test(h_tcase(s, "bad_timer_values_are_refused", 120),
		       bad_timer_values_are_refused);
	tcase_add_test(h_tcase(s, "cli_stop_keepalive_and_ls", 120), cli_stop_keepalive_and_ls);
	tcase_add_test(h_tcase(s, "cli_timer_flags_reach_the_sandbox", 120),
		       cli_timer_flags_reach_the_sandbox);
	tcase_add_test(h_tcase(s, "cli_timer_flags_take_effect", 300), cli_timer_flags_take_effect);
	tcase_add_test(h_tcase(s, "cli_timer_flags_refuse_bad_values", 120),
		       cli_timer_flags_refuse_bad_values);
	return s;
}

int main(void)
{
	return h_main(idle_suite());
}
