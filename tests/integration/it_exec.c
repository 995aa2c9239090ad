/* Commands: persistence between execs, background processes, exit codes, signals,
 * timeouts, large and binary output, concurrency. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include "cell/codec.h"

#include "harness.h"

/* Wall-clock guard only: a timeout must not wait for the command to finish by itself. */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* $HOME of a command run as uid (0: root), with extra "K", "V", ... envs. */
static char *home_of(const char *id, int uid, const char *const *envs)
{
	struct h_exec_opts o = {.as_user = uid != 0, .uid = uid, .gid = uid, .envs = envs};
	struct h_exec r;
	ck_assert_int_eq(h_exec(id, "echo \"$HOME\"", &o, &r), 0);
	ck_assert_msg(r.complete, "echo $HOME as %d: %s", uid, r.err);
	char *home = strdup(r.out);
	h_exec_free(&r);
	return home;
}

/* A command run as another user gets that user's home from the sandbox's passwd ("/" when
 * it names none, as login does), never root's; a HOME the client sets wins. */
START_TEST(home_follows_the_user)
{
	char *id = h_create("busybox", NULL);
	ck_assert_int_eq(h_sh_code(id, "mkdir -p /home/u && "
				       "echo 'u:x:2000:2000::/home/u:/bin/sh' >> /etc/passwd"),
			 0);
	char *home = home_of(id, 0, NULL);
	ck_assert_str_eq(home, "/root\n");
	free(home);
	home = home_of(id, 2000, NULL);
	ck_assert_str_eq(home, "/home/u\n");
	free(home);
	home = home_of(id, 4242, NULL);
	ck_assert_str_eq(home, "/\n");
	free(home);
	home = home_of(id, 2000, (const char *const[]){"HOME", "/tmp/h", NULL});
	ck_assert_str_eq(home, "/tmp/h\n");
	free(home);
	free(id);
}
END_TEST

/* id -u, id -g and id -G of a command run as uid (and gid, unless it is < 0). */
static char *ids_of(const char *id, int uid, int gid)
{
	struct h_exec_opts o = {.as_user = true, .uid = uid, .gid = gid};
	struct h_exec r;
	ck_assert_int_eq(h_exec(id, "id -u; id -g; id -G", &o, &r), 0);
	ck_assert_msg(r.complete, "id as %d:%d: %s", uid, gid, r.err);
	char *ids = strdup(r.out);
	h_exec_free(&r);
	return ids;
}

/* uid without gid runs with the user's primary group from the sandbox's passwd, as execd
 * does (group 0 when passwd does not name the user); a gid the client sends wins. */
START_TEST(uid_alone_takes_the_primary_group)
{
	char *id = h_create("busybox", NULL);
	ck_assert_int_eq(h_sh_code(id, "echo 'u:x:2000:3000::/tmp:/bin/sh' >> /etc/passwd"), 0);
	char *ids = ids_of(id, 2000, -1);
	ck_assert_str_eq(ids, "2000\n3000\n3000\n");
	free(ids);
	ids = ids_of(id, 2000, 2500);
	ck_assert_str_eq(ids, "2000\n2500\n2500\n");
	free(ids);
	ids = ids_of(id, 4242, -1);
	ck_assert_str_eq(ids, "4242\n0\n0\n");
	free(ids);
	free(id);
}
END_TEST

/* POST .../session for sandbox id: the new session's id (malloc'd), or NULL with *status
 * set to what celld answered. */
static char *session_new(const char *id, long *status)
{
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/session", id);
	struct h_resp resp;
	*status = h_http("POST", path, "{}", &resp);
	char *sid = *status == 200 ? strdup(h_jstr(resp.json, "session_id")) : NULL;
	if (*status != 200)
		ck_assert_str_eq(h_err_code(&resp), "TOO_MANY_SESSIONS");
	h_resp_free(&resp);
	free(path);
	return sid;
}

/* Bash sessions are bounded per sandbox (64, then 409 naming it), belong to their sandbox
 * (another sandbox's id is 404 there), and a session id in a path is checked as an id. */
START_TEST(bash_sessions_bounded_and_own)
{
	char *a = h_create("busybox", NULL), *b = h_create("busybox", NULL);
	char *sids[64];
	long st;
	for (int i = 0; i < 64; i++) {
		sids[i] = session_new(a, &st);
		ck_assert_msg(st == 200 && sids[i] && *sids[i], "session %d: HTTP %ld", i, st);
	}
	ck_assert_ptr_null(session_new(a, &st));
	ck_assert_int_eq(st, 409);

	/* a's session is unknown to b, for a run and for a delete */
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/session/%s/run", b, sids[0]);
	struct h_resp resp;
	ck_assert_int_eq(h_http("POST", path, "{\"command\":\"true\"}", &resp), 404);
	ck_assert_str_eq(h_err_code(&resp), "SESSION_NOT_FOUND");
	h_resp_free(&resp);
	free(path);
	path = h_fmt("/v1/sandboxes/%s/proxy/44772/session/%s", b, sids[0]);
	ck_assert_int_eq(h_http("DELETE", path, NULL, NULL), 404);
	free(path);
	/* a session id that is no id never reaches a lookup or the sandbox */
	path = h_fmt("/v1/sandboxes/%s/proxy/44772/session/..%%2Fx/run", a);
	ck_assert_int_eq(h_http("POST", path, "{\"command\":\"true\"}", NULL), 400);
	free(path);
	/* a run without a command is refused by name */
	path = h_fmt("/v1/sandboxes/%s/proxy/44772/session/%s/run", a, sids[0]);
	ck_assert_int_eq(h_http("POST", path, "{\"cwd\":\"/\"}", &resp), 400);
	ck_assert_msg(strstr(resp.body, "command"), "%s", resp.body);
	h_resp_free(&resp);
	free(path);

	/* one deleted makes room for one more */
	path = h_fmt("/v1/sandboxes/%s/proxy/44772/session/%s", a, sids[0]);
	ck_assert_int_eq(h_http("DELETE", path, NULL, NULL), 200);
	free(path);
	char *again = session_new(a, &st);
	ck_assert_int_eq(st, 200);
	free(again);
	for (int i = 0; i < 64; i++)
		free(sids[i]);
	free(a);
	free(b);
}
END_TEST

struct busy {
	const char *id, *sid, *cmd;
	struct h_exec r;
	pthread_mutex_t lock;
	char cmd_id[64]; /* the run's command id, once its init event came */
};

static void busy_init(const char *cmd_id, void *arg)
{
	struct busy *b = arg;
	pthread_mutex_lock(&b->lock);
	snprintf(b->cmd_id, sizeof(b->cmd_id), "%s", cmd_id);
	pthread_mutex_unlock(&b->lock);
}

static void *busy_run(void *arg)
{
	struct busy *b = arg;
	struct h_exec_opts o = {.session = b->sid,
				.lines = true,
				.max_seconds = 60,
				.on_init = busy_init,
				.on_init_arg = b};
	h_exec(b->id, b->cmd ? b->cmd : "touch /tmp/busy; sleep 3; echo done", &o, &b->r);
	return NULL;
}

/* Two sessions are two shells; a second run while one goes on is 409; DELETE kills the
 * shell and what it left running; sh stands in where the image has no bash. */
START_TEST(bash_sessions_apart_busy_and_deleted)
{
	char *id = h_create("busybox", NULL);
	char *s1 = h_session_open(id, NULL, "sh"), *s2 = h_session_open(id, "{}", "sh");
	/* a first directory that cannot be made or entered is the request's fault */
	struct h_resp resp;
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/session", id);
	ck_assert_int_eq(h_http("POST", path, "{\"cwd\":\"/proc/self/nope\"}", &resp), 400);
	ck_assert_msg(strstr(resp.body, "cwd"), "%s", resp.body);
	h_resp_free(&resp);
	free(path);
	char *p1 = h_session_ok(id, s1, "X=1; g() { echo g; }; echo $$");
	char *p2 = h_session_ok(id, s2, "echo $$");
	ck_assert_str_ne(p1, p2);
	char *out = h_session_ok(id, s2, "echo \"[$X]\"; type g >/dev/null 2>&1 || echo no-g");
	ck_assert_str_eq(out, "[]\nno-g\n");
	free(out);
	out = h_session_ok(id, s1, "g; echo \"[$X]\"");
	ck_assert_str_eq(out, "g\n[1]\n");
	free(out);

	/* output beyond what the relay holds at once: paced, none lost, then the next run */
	struct h_exec big;
	h_session_run(id, s1,
		      "dd if=/dev/zero bs=1M count=8 2>/dev/null | tr '\\0' a | fold -w 1024", 0,
		      &big);
	ck_assert_msg(big.complete, "exit %d", big.exit_code);
	size_t lines = 0, i;
	json_t *ev;
	json_array_foreach(big.events, i, ev) if (!strcmp(h_jstr(ev, "type"), "stdout"))
	{
		ck_assert_uint_eq(strlen(h_jstr(ev, "text")), 1024);
		lines++;
	}
	ck_assert_uint_eq(lines, 8192);
	h_exec_free(&big);
	out = h_session_ok(id, s1, "echo $X");
	ck_assert_str_eq(out, "1\n");
	free(out);

	/* busy: a run while s1's one sleeps (its start seen through a file) */
	struct busy b = {.id = id, .sid = s1, .lock = PTHREAD_MUTEX_INITIALIZER};
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, busy_run, &b), 0);
	ck_assert_int_eq(h_sh_code(id, "i=0; while [ ! -e /tmp/busy ] && [ $i -lt 300 ]; do "
				       "usleep 100000; i=$((i+1)); done; [ -e /tmp/busy ]"),
			 0);
	struct h_exec r;
	h_session_run(id, s1, "true", 0, &r);
	ck_assert_int_eq(r.status, 409);
	ck_assert_str_eq(h_jstr(r.body, "code"), "SESSION_BUSY");
	h_exec_free(&r);
	pthread_join(t, NULL);
	ck_assert_msg(b.r.complete, "the busy run: exit %d", b.r.exit_code);
	ck_assert_str_eq(b.r.out, "done");
	h_exec_free(&b.r);

	/* DELETE kills the shell and its background job */
	char *bg = h_session_ok(id, s1, "sleep 1000 >/dev/null 2>&1 & echo $!");
	ck_assert_int_eq(h_session_delete(id, s1), 200);
	p1[strcspn(p1, "\n")] = '\0';
	bg[strcspn(bg, "\n")] = '\0';
	char *check = h_fmt("for p in %s %s; do i=0; while [ -d /proc/$p ] && "
			    "! grep -q '^State:.*Z' /proc/$p/status 2>/dev/null && [ $i -lt 100 ]; "
			    "do usleep 50000; i=$((i+1)); done; "
			    "if [ -d /proc/$p ] && ! grep -q '^State:.*Z' /proc/$p/status; "
			    "then echo \"$p alive\"; fi; done",
			    p1, bg);
	out = h_sh(id, check);
	ck_assert_str_eq(out, "");
	free(out);
	free(check);
	free(bg);
	h_session_run(id, s1, "true", 0, &r);
	ck_assert_int_eq(r.status, 404);
	h_exec_free(&r);
	/* s2 is untouched, and outlives a restart of celld (its shell is cell-init's) */
	out = h_session_ok(id, s2, "Y=kept; echo $$");
	ck_assert_str_eq(out, p2);
	free(out);
	h_celld_kill();
	h_celld_start();
	out = h_session_ok(id, s2, "echo $$ $Y");
	p2[strcspn(p2, "\n")] = '\0';
	char *want = h_fmt("%s kept\n", p2);
	ck_assert_str_eq(out, want);
	free(out);

	/* an interrupt (DELETE .../command?id=) stops the run's sleep, not the shell */
	struct busy in = {
	    .id = id, .sid = s2, .cmd = "sleep 100", .lock = PTHREAD_MUTEX_INITIALIZER};
	ck_assert_int_eq(pthread_create(&t, NULL, busy_run, &in), 0);
	char cid[64] = "";
	for (int k = 0; k < 600 && !cid[0]; k++) {
		pthread_mutex_lock(&in.lock);
		snprintf(cid, sizeof(cid), "%s", in.cmd_id);
		pthread_mutex_unlock(&in.lock);
		if (!cid[0])
			usleep(50000);
	}
	ck_assert_msg(cid[0], "no init event for the run");
	/* sleep has started when the shell has a child */
	char *wait_child = h_fmt("i=0; while ! grep -q sleep /proc/[0-9]*/comm 2>/dev/null && "
				 "[ $i -lt 300 ]; do usleep 50000; i=$((i+1)); done");
	ck_assert_int_eq(h_sh_code(id, wait_child), 0);
	free(wait_child);
	char *ipath = h_fmt("/v1/sandboxes/%s/proxy/44772/command?id=%s", id, cid);
	ck_assert_int_eq(h_http("DELETE", ipath, NULL, NULL), 200);
	free(ipath);
	pthread_join(t, NULL);
	ck_assert_int_eq(in.r.status, 200);
	ck_assert_msg(!in.r.complete && in.r.exit_code == 143, "exit %d", in.r.exit_code);
	h_exec_free(&in.r);
	out = h_session_ok(id, s2, "echo $$ $Y");
	ck_assert_str_eq(out, want);
	free(out);
	free(want);

	/* a DELETE while a run goes on ends that run (137), at once */
	struct busy d = {.id = id,
			 .sid = s2,
			 .cmd = "touch /tmp/busy2; sleep 100; echo rest",
			 .lock = PTHREAD_MUTEX_INITIALIZER};
	ck_assert_int_eq(pthread_create(&t, NULL, busy_run, &d), 0);
	ck_assert_int_eq(h_sh_code(id, "i=0; while [ ! -e /tmp/busy2 ] && [ $i -lt 300 ]; do "
				       "usleep 100000; i=$((i+1)); done; [ -e /tmp/busy2 ]"),
			 0);
	ck_assert_int_eq(h_session_delete(id, s2), 200);
	pthread_join(t, NULL);
	ck_assert_int_eq(d.r.status, 200);
	ck_assert_msg(!d.r.complete && d.r.exit_code == 137, "exit %d", d.r.exit_code);
	ck_assert_str_eq(d.r.out, "");
	h_exec_free(&d.r);
	free(p1);
	free(p2);
	free(s1);
	free(s2);
	free(id);
}
END_TEST

START_TEST(files_persist_between_execs)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "echo kept > /workspace/a && mkdir -p /root/x && echo deep > /root/x/y"));
	char *out = h_sh(id, "cat /workspace/a /root/x/y");
	ck_assert_str_eq(out, "kept\ndeep\n");
	free(out);
	/* The image itself is writable per sandbox (overlay), without touching the image. */
	free(h_sh(id, "echo changed > /etc/cell-test-file"));
	out = h_sh(id, "cat /etc/cell-test-file");
	ck_assert_str_eq(out, "changed\n");
	free(out);
	char *img = h_fmt("%s/busybox/rootfs/etc/cell-test-file", H.images);
	ck_assert_msg(access(img, F_OK) != 0, "a sandbox wrote into the image");
	free(img);
	free(id);
}
END_TEST

START_TEST(background_process_survives)
{
	char *id = h_create("busybox", NULL);
	struct h_exec_opts o = {.max_seconds = 60};
	struct h_exec r;
	h_exec(id, H_NOHUP "nohup sleep 1000 >/dev/null 2>&1 &", &o, &r);
	ck_assert_msg(r.status == 200 && r.complete, "starting a background sleep: HTTP %ld, %s",
		      r.status, r.err);
	h_exec_free(&r);
	/* Also one that keeps the command's stdout open: the exec still ends. */
	h_exec(id, "sleep 999 & echo started", &o, &r);
	ck_assert_msg(r.status == 200 && r.complete, "sleep with inherited stdout: HTTP %ld",
		      r.status);
	ck_assert_str_eq(r.out, "started\n");
	h_exec_free(&r);
	char *out = h_sh(id, H_WAIT_PIDOF("sleep", 2) "pidof sleep | wc -w");
	ck_assert_str_eq(out, "2\n");
	free(out);
	free(id);
}
END_TEST

START_TEST(httpd_serves_across_execs)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "echo hello-from-httpd > /workspace/index.html && "
		      "httpd -p 127.0.0.1:8000 -h /workspace"));
	char *out = h_sh(id, H_FETCH "for i in 1 2 3 4 5 6 7 8 9 10; do "
				     "o=$(fetch 8000 index.html); [ -n \"$o\" ] && "
				     "{ echo \"$o\"; exit 0; }; sleep 0.3; done; exit 1");
	ck_assert_str_eq(out, "hello-from-httpd\n");
	free(out);
	out = h_sh(id, H_FETCH "fetch 8000 index.html");
	ck_assert_str_eq(out, "hello-from-httpd\n");
	free(out);
	free(id);
}
END_TEST

START_TEST(api_background_command)
{
	char *id = h_create("busybox", NULL);
	struct h_exec_opts o = {.background = true, .max_seconds = 30};
	struct h_exec r;
	h_exec(id, "echo bg-out; sleep 3; echo bg-done; exit 5", &o, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(r.cmd_id && *r.cmd_id, "no init event");
	/* As execd: init, then execution_complete at once, while the command runs on. */
	ck_assert_msg(r.complete && !r.errored, "background: no execution_complete");
	ck_assert_uint_eq(json_array_size(r.events), 2);
	ck_assert_str_eq(h_jstr(json_array_get(r.events, 0), "type"), "init");
	ck_assert_str_eq(h_jstr(json_array_get(r.events, 1), "type"), "execution_complete");
	char *cmd_id = strdup(r.cmd_id);
	struct h_resp st;
	char *spath = h_fmt("/v1/sandboxes/%s/proxy/44772/command/status/%s", id, cmd_id);
	ck_assert_int_eq(h_http("GET", spath, NULL, &st), 200);
	ck_assert_msg(json_is_true(json_object_get(st.json, "running")), "not running on: %s",
		      st.body);
	h_resp_free(&st);
	free(spath);
	h_exec_free(&r);

	json_t *status = h_command_wait(id, cmd_id, 30);
	ck_assert_msg(json_is_false(json_object_get(status, "running")), "still running");
	ck_assert_int_eq(h_jint(status, "exit_code"), 5);
	ck_assert_str_eq(h_jstr(status, "id"), cmd_id);
	json_decref(status);
	struct h_resp s;

	char *lpath = h_fmt("/v1/sandboxes/%s/proxy/44772/command/%s/logs?cursor=0", id, cmd_id);
	ck_assert_int_eq(h_http("GET", lpath, NULL, &s), 200);
	ck_assert_msg(strstr(s.body, "bg-out") && strstr(s.body, "bg-done"), "logs: %s", s.body);
	h_resp_free(&s);

	char *bad = h_fmt("/v1/sandboxes/%s/proxy/44772/command/status/nosuchcommand", id);
	ck_assert_int_eq(h_http("GET", bad, NULL, &s), 404);
	h_resp_free(&s);
	free(bad);
	free(lpath);
	free(cmd_id);
	free(id);
}
END_TEST

START_TEST(interrupt_command)
{
	char *id = h_create("busybox", NULL);
	struct h_exec_opts o = {.background = true, .max_seconds = 30};
	struct h_exec r;
	h_exec(id, "sleep 300", &o, &r);
	ck_assert_int_eq(r.status, 200);
	char *cmd_id = strdup(r.cmd_id ? r.cmd_id : "");
	h_exec_free(&r);
	char *dpath = h_fmt("/v1/sandboxes/%s/proxy/44772/command?id=%s", id, cmd_id);
	struct h_resp s;
	long st = h_http("DELETE", dpath, NULL, &s);
	ck_assert_msg(st >= 200 && st < 300, "interrupt: HTTP %ld: %s", st, s.body);
	h_resp_free(&s);
	json_t *status = h_command_wait(id, cmd_id, 20);
	ck_assert_msg(json_is_false(json_object_get(status, "running")), "not interrupted");
	long long code = h_jint(status, "exit_code");
	ck_assert_msg(code == 143 || code == 137, "interrupted exit code %lld", code);
	json_decref(status);
	free(dpath);
	free(cmd_id);
	free(id);
}
END_TEST

static const int exit_codes[] = {0, 3, 255};

START_TEST(exit_codes_reported)
{
	char *id = h_create("busybox", NULL);
	int want = exit_codes[_i];
	char *cmd = h_fmt("echo before; exit %d", want);
	struct h_exec r;
	h_exec(id, cmd, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(r.bad_events, 0);
	ck_assert_str_eq(r.out, "before\n");
	ck_assert_int_eq(r.exit_code, want);
	if (want == 0) {
		ck_assert(r.complete && !r.errored);
	} else {
		ck_assert_msg(r.errored && !r.complete, "exit %d: complete %d errored %d", want,
			      r.complete, r.errored);
		ck_assert_str_eq(h_jstr(r.error, "ename"), "CommandExecError");
		ck_assert(json_is_array(json_object_get(r.error, "traceback")));
	}
	/* exactly one terminal event, and it is the last one */
	size_t n = json_array_size(r.events);
	ck_assert_uint_ge(n, 2);
	ck_assert_str_eq(h_jstr(json_array_get(r.events, 0), "type"), "init");
	const char *last = h_jstr(json_array_get(r.events, n - 1), "type");
	ck_assert_str_eq(last, want ? "error" : "execution_complete");
	h_exec_free(&r);
	free(cmd);
	free(id);
}
END_TEST

static const struct {
	const char *cmd;
	int code;
} signal_cases[] = {
    {"kill -9 $$", 137},
    {"kill -TERM $$", 143},
    {"kill -INT $$; sleep 5", 130},
};

START_TEST(signals_reported)
{
	char *id = h_create("busybox", NULL);
	struct h_exec r;
	h_exec(id, signal_cases[_i].cmd, NULL, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(r.errored, "`%s`: no error event", signal_cases[_i].cmd);
	ck_assert_int_eq(r.exit_code, signal_cases[_i].code);
	h_exec_free(&r);
	free(id);
}
END_TEST

START_TEST(timeout_kills_command)
{
	char *id = h_create("busybox", NULL);
	struct h_exec_opts o = {.timeout_ms = 500, .max_seconds = 60};
	struct h_exec r;
	double t0 = now_s();
	h_exec(id, "echo started; sleep 30; echo never", &o, &r);
	double took = now_s() - t0;
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(took < 20, "a 500 ms timeout on sleep 30 took %.1f s", took);
	ck_assert(r.errored && !r.complete);
	ck_assert_int_eq(r.exit_code, 124);
	ck_assert_str_eq(r.out, "started\n");
	h_exec_free(&r);
	/* the whole process group went: no sleep left behind */
	int code = h_sh_code(id, "i=0; while [ $i -lt 50 ]; do pidof sleep >/dev/null || exit 0; "
				 "sleep 0.2; i=$((i+1)); done; exit 1");
	ck_assert_msg(code == 0, "the timed-out sleep survived");
	/* a command that finishes in time is not affected */
	o.timeout_ms = 20000;
	h_exec(id, "echo quick", &o, &r);
	ck_assert(r.complete);
	ck_assert_str_eq(r.out, "quick\n");
	h_exec_free(&r);
	free(id);
}
END_TEST

START_TEST(stdout_stderr_env_cwd)
{
	char *id = h_create("busybox", NULL);
	struct h_exec r;
	h_exec(id, "echo out; echo err >&2; echo out2; pwd; echo \"$HOME\"", NULL, &r);
	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_str_eq(r.out, "out\nout2\n/workspace\n/root\n");
	ck_assert_str_eq(r.err, "err\n");
	h_exec_free(&r);

	const char *envs[] = {"FOO", "bar baz", "EMPTY", "", NULL};
	struct h_exec_opts o = {.cwd = "/tmp", .envs = envs};
	h_exec(id,
	       "echo \"$FOO\"; echo \"[$EMPTY]\"; pwd; case $PATH in *"
	       "/usr/bin*) echo path-ok;; esac",
	       &o, &r);
	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_str_eq(r.out, "bar baz\n[]\n/tmp\npath-ok\n");
	h_exec_free(&r);

	/* argv mode: no shell, so no expansion */
	const char *argv[] = {"/bin/echo", "a  b", "$HOME", "*", NULL};
	struct h_exec_opts oa = {.argv = argv};
	h_exec(id, NULL, &oa, &r);
	ck_assert_msg(r.complete, "argv exec: HTTP %ld exit %d %s", r.status, r.exit_code, r.err);
	ck_assert_str_eq(r.out, "a  b $HOME *\n");
	h_exec_free(&r);
	free(id);
}
END_TEST

/* A command that cannot start is reported, and the sandbox carries on. */
START_TEST(cannot_start)
{
	char *id = h_create("busybox", NULL);
	const char *argv[] = {"/no/such/binary", NULL};
	struct h_exec_opts oa = {.argv = argv};
	struct h_exec r;
	h_exec(id, NULL, &oa, &r);
	ck_assert_msg((r.status >= 400 && r.status < 500) || (r.errored && r.exit_code != 0),
		      "missing binary: HTTP %ld, exit %d", r.status, r.exit_code);
	ck_assert(!r.complete);
	h_exec_free(&r);

	struct h_exec_opts oc = {.cwd = "/no/such/dir"};
	h_exec(id, "pwd", &oc, &r);
	ck_assert_msg((r.status >= 400 && r.status < 500) || (r.errored && r.exit_code != 0),
		      "bad cwd: HTTP %ld, exit %d", r.status, r.exit_code);
	ck_assert(!r.complete);
	h_exec_free(&r);

	ck_assert_int_eq(h_sh_code(id, "sh -c 'exit 127'"), 127);
	char *out = h_sh(id, "echo alive");
	ck_assert_str_eq(out, "alive\n");
	free(out);
	free(id);
}
END_TEST

/* Bytes that are not UTF-8 arrive exactly (celld sends them base64-encoded). */
START_TEST(binary_output_exact)
{
	char *id = h_create("busybox", NULL);
	struct h_exec r;
	h_exec(id,
	       "printf '\\000\\001\\377\\376abc\\303'; head -c 3000 /dev/zero; "
	       "printf '\\342\\202\\254 done'",
	       NULL, &r);
	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_int_eq(r.bad_events, 0);
	char want[3100];
	size_t n = 0;
	memcpy(want, "\0\1\377\376abc\303", 8);
	n = 8;
	memset(want + n, 0, 3000);
	n += 3000;
	memcpy(want + n, "\342\202\254 done", 8);
	n += 8;
	ck_assert_uint_eq(r.out_len, n);
	ck_assert_msg(!memcmp(r.out, want, n), "binary output differs");
	h_exec_free(&r);

	/* plain UTF-8 (incl. multibyte) comes through as text */
	h_exec(id, "printf 'h\\303\\251llo \\342\\202\\254\\n'", NULL, &r);
	ck_assert_str_eq(r.out, "h\303\251llo \342\202\254\n");
	h_exec_free(&r);
	free(id);
}
END_TEST

/* Output events as execd sends them: one per line without its ending ("\r\n" is one
 * ending, an empty line is "\n"), a last partial line at exit, bytes that are not UTF-8
 * base64; stdout and stderr each split on their own. */
START_TEST(output_events_per_line)
{
	char *id = h_create("busybox", NULL);
	struct h_exec_opts o = {.lines = true};
	struct h_exec r;
	h_exec(id,
	       "printf 'one\\ntwo\\r\\n\\nthr'; printf 'e1\\ne2' >&2; sleep 0.3; "
	       "printf 'ee\\n\\377\\376\\nlast'",
	       &o, &r);
	ck_assert_msg(r.complete, "exit %d: %s", r.exit_code, r.err);
	const char *want_out[] = {"one", "two", "\n", "three", "\377\376", "last"};
	const char *want_err[] = {"e1", "e2"};
	size_t no = 0, ne = 0;
	for (size_t i = 0; i < json_array_size(r.events); i++) {
		json_t *ev = json_array_get(r.events, i);
		const char *type = h_jstr(ev, "type");
		bool out = !strcmp(type, "stdout");
		if (!out && strcmp(type, "stderr"))
			continue;
		const char *text = h_jstr(ev, "text");
		const char *enc = json_string_value(json_object_get(ev, "encoding"));
		char *bytes = NULL;
		if (enc) {
			ck_assert_str_eq(enc, "base64");
			uint8_t *raw = NULL;
			size_t n = 0;
			ck_assert_int_eq(cell_base64_decode(text, strlen(text), &raw, &n), 0);
			bytes = strndup((char *)raw, n);
			free(raw);
		} else {
			bytes = strdup(text);
		}
		if (out) {
			ck_assert_uint_lt(no, 6);
			ck_assert_str_eq(bytes, want_out[no++]);
		} else {
			ck_assert_uint_lt(ne, 2);
			ck_assert_str_eq(bytes, want_err[ne++]);
		}
		free(bytes);
	}
	ck_assert_uint_eq(no, 6);
	ck_assert_uint_eq(ne, 2);
	h_exec_free(&r);

	/* A line of 200000 bytes comes in pieces of at most 64 KiB, nothing lost. */
	h_exec(id, "head -c 200000 /dev/zero | tr '\\0' x; echo", &o, &r);
	ck_assert(r.complete);
	ck_assert_uint_eq(r.out_len, 200000);
	size_t pieces = 0;
	for (size_t i = 0; i < json_array_size(r.events); i++) {
		json_t *ev = json_array_get(r.events, i);
		if (strcmp(h_jstr(ev, "type"), "stdout"))
			continue;
		ck_assert_uint_le(strlen(h_jstr(ev, "text")), 65536);
		pieces++;
	}
	ck_assert_uint_eq(pieces, 4);
	h_exec_free(&r);
	free(id);
}
END_TEST

#define BIG_BYTES 100000000ul

/* 100 MB of output arrives intact: the sha256 of what came over the stream equals that of
 * the same deterministic stream made here. */
START_TEST(output_100mb_intact)
{
	char *id = h_create("busybox", NULL);
	struct h_exec_opts o = {.hash_stdout = true, .max_seconds = 900};
	struct h_exec r;
	h_exec(id, "yes 0123456789abcdef | head -c 100000000", &o, &r);
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(r.complete, "no execution_complete (exit %d, bad events %d, stderr %s)",
		      r.exit_code, r.bad_events, r.err);
	ck_assert_int_eq(r.bad_events, 0);
	ck_assert_uint_eq(r.out_hashed, BIG_BYTES);

	static const char line[] = "0123456789abcdef\n";
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	char *block = malloc(17 * 4096);
	for (int i = 0; i < 4096; i++)
		memcpy(block + 17 * i, line, 17);
	for (size_t done = 0; done < BIG_BYTES;) {
		size_t n = BIG_BYTES - done < 17 * 4096 ? BIG_BYTES - done : 17 * 4096;
		EVP_DigestUpdate(md, block, n);
		done += n;
	}
	unsigned char dg[32];
	unsigned int dl;
	EVP_DigestFinal_ex(md, dg, &dl);
	EVP_MD_CTX_free(md);
	char hex[65];
	for (int i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", dg[i]);
	ck_assert_str_eq(r.out_sha256, hex);
	free(block);
	h_exec_free(&r);
	free(id);
}
END_TEST

#define N_CONCURRENT 50

struct conc {
	const char *id;
	int i;
	struct h_exec r;
};

static void *conc_worker(void *arg)
{
	struct conc *c = arg;
	char *cmd = h_fmt("echo start-%d; echo $((%d * %d)) >&2; sleep 0.%d; echo end-%d; "
			  "exit %d",
			  c->i, c->i, c->i, c->i % 5, c->i, c->i % 7);
	struct h_exec_opts o = {.max_seconds = 240};
	h_exec(c->id, cmd, &o, &c->r);
	free(cmd);
	return NULL;
}

START_TEST(concurrent_execs)
{
	char *id = h_create("busybox", NULL);
	static struct conc cs[N_CONCURRENT];
	pthread_t th[N_CONCURRENT];
	for (int i = 0; i < N_CONCURRENT; i++) {
		cs[i] = (struct conc){.id = id, .i = i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, conc_worker, &cs[i]), 0);
	}
	for (int i = 0; i < N_CONCURRENT; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N_CONCURRENT; i++) {
		struct h_exec *r = &cs[i].r;
		char want_out[64], want_err[32];
		snprintf(want_out, sizeof(want_out), "start-%d\nend-%d\n", i, i);
		snprintf(want_err, sizeof(want_err), "%d\n", i * i);
		ck_assert_msg(r->status == 200, "exec %d: HTTP %ld", i, r->status);
		ck_assert_msg(!strcmp(r->out, want_out), "exec %d stdout '%s'", i, r->out);
		ck_assert_msg(!strcmp(r->err, want_err), "exec %d stderr '%s'", i, r->err);
		ck_assert_msg(r->exit_code == i % 7, "exec %d exit %d", i, r->exit_code);
		ck_assert_int_eq(r->bad_events, 0);
		ck_assert_msg(r->cmd_id && *r->cmd_id, "exec %d: no command id", i);
		for (int j = 0; j < i; j++)
			ck_assert_str_ne(r->cmd_id, cs[j].r.cmd_id);
	}
	for (int i = 0; i < N_CONCURRENT; i++)
		h_exec_free(&cs[i].r);
	free(id);
}
END_TEST

static Suite *exec_suite(void)
{
	Suite *s = suite_create("exec");
	tcase_add_test(h_tcase(s, "files_persist_between_execs", 120), files_persist_between_execs);
	tcase_add_test(h_tcase(s, "background_process_survives", 120), background_process_survives);
	tcase_add_test(h_tcase(s, "httpd_serves_across_execs", 120), httpd_serves_across_execs);
	tcase_add_test(h_tcase(s, "api_background_command", 120), api_background_command);
	tcase_add_test(h_tcase(s, "output_events_per_line", 120), output_events_per_line);
	tcase_add_test(h_tcase(s, "interrupt_command", 120), interrupt_command);
	tcase_add_loop_test(h_tcase(s, "exit_codes_reported", 120), exit_codes_reported, 0,
			    (int)(sizeof(exit_codes) / sizeof(exit_codes[0])));
	tcase_add_loop_test(h_tcase(s, "signals_reported", 120), signals_reported, 0,
			    (int)(sizeof(signal_cases) / sizeof(signal_cases[0])));
	tcase_add_test(h_tcase(s, "timeout_kills_command", 120), timeout_kills_command);
	tcase_add_test(h_tcase(s, "stdout_stderr_env_cwd", 120), stdout_stderr_env_cwd);
	tcase_add_test(h_tcase(s, "cannot_start", 120), cannot_start);
	tcase_add_test(h_tcase(s, "binary_output_exact", 120), binary_output_exact);
	tcase_add_test(h_tcase(s, "output_100mb_intact", 900), output_100mb_intact);
	tcase_add_test(h_tcase(s, "concurrent_execs", 300), concurrent_execs);
	tcase_add_test(h_tcase(s, "home_follows_the_user", 120), home_follows_the_user);
	tcase_add_test(h_tcase(s, "uid_alone_takes_the_primary_group", 120),
		       uid_alone_takes_the_primary_group);
	tcase_add_test(h_tcase(s, "bash_sessions_bounded_and_own", 120),
		       bash_sessions_bounded_and_own);
	tcase_add_test(h_tcase(s, "bash_sessions_apart_busy_and_deleted", 180),
		       bash_sessions_apart_busy_and_deleted);
	return s;
}

int main(void)
{
	return h_main(exec_suite());
}
