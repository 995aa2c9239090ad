/* A sandbox's logs: its entrypoint's output and exit (GET /v1/sandboxes/{id},
 * entrypointStatus; cell ls), `cell logs` with --tail, --since and -f, a background
 * command's output (cell run -d), refused parameters, and sandboxes stopped, deleted, or
 * with nothing to show. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cell/id.h"
#include "harness.h"

/* A busybox sandbox whose entrypoint is sh -c script (tracked). */
static char *create_with_entrypoint(const char *script)
{
	json_t *extra = json_pack("{s:[s, s, s]}", "entrypoint", "sh", "-c", script);
	char *id = h_create("busybox", extra);
	json_decref(extra);
	return id;
}

/* GET /v1/sandboxes/{id} of w until its entrypoint is running (or, not running, has
 * ended) with another command id than not_id (may be NULL); its entrypointStatus (a new
 * reference). */
static json_t *wait_entrypoint_in(struct h_world *w, const char *id, bool running,
				  const char *not_id)
{
	char *path = h_fmt("/v1/sandboxes/%s", id);
	json_t *ep = NULL;
	for (int i = 0; i < 300 && !ep; i++) {
		struct h_resp r;
		ck_assert_int_eq(h_world_http(w, "GET", path, NULL, &r), 200);
		json_t *st = json_object_get(r.json, "entrypointStatus");
		ck_assert_msg(json_is_object(st), "no entrypointStatus: %s", r.body);
		const char *cmd = json_string_value(json_object_get(st, "commandId"));
		if (json_is_boolean(json_object_get(st, "running")) &&
		    json_is_true(json_object_get(st, "running")) == running &&
		    (!not_id || (cmd && strcmp(cmd, not_id))))
			ep = json_incref(st);
		h_resp_free(&r);
		if (!ep)
			h_sleep_ms(100);
	}
	free(path);
	ck_assert_msg(ep, "the entrypoint of %s did not come to running=%d", id, running);
	return ep;
}

static json_t *wait_entrypoint_ended(const char *id)
{
	return wait_entrypoint_in(&H, id, false, NULL);
}

/* `cell logs ARGS... ID` must succeed: its stdout (malloc'd); its stderr into *err_out
 * when not NULL. */
static char *logs_ok(const char *id, const char *a1, const char *a2, char **err_out)
{
	struct h_proc p;
	if (a2)
		h_cell(&p, "logs", a1, a2, id, NULL);
	else if (a1)
		h_cell(&p, "logs", a1, id, NULL);
	else
		h_cell(&p, "logs", id, NULL);
	ck_assert_msg(p.status == 0, "cell logs %s %s: exit %d: %s", a1 ? a1 : "", a2 ? a2 : "",
		      p.status, p.err);
	char *out = strdup(p.out);
	if (err_out)
		*err_out = strdup(p.err);
	h_proc_free(&p);
	return out;
}

/* `cell logs ARGS... ID` must print want. */
static void ck_logs(const char *id, const char *a1, const char *a2, const char *want)
{
	char *out = logs_ok(id, a1, a2, NULL);
	ck_assert_msg(!strcmp(out, want), "cell logs %s %s: '%s', want '%s'", a1 ? a1 : "",
		      a2 ? a2 : "", out, want);
	free(out);
}

START_TEST(entrypoint_output_exit_and_ls)
{
	char *id = create_with_entrypoint("echo one; echo two; echo three >&2; exit 3");
	json_t *ep = wait_entrypoint_ended(id);
	ck_assert_int_eq(h_jint(ep, "exitCode"), 3);
	ck_assert_msg(cell_id_valid(h_jstr(ep, "commandId")), "commandId: %s",
		      h_jstr(ep, "commandId"));
	ck_assert_str_ne(h_jstr(ep, "startedAt"), "");
	ck_assert_str_ne(h_jstr(ep, "finishedAt"), "");
	json_decref(ep);

	/* stdout and stderr together, byte-exact; the exit on stderr */
	char *err;
	char *out = logs_ok(id, NULL, NULL, &err);
	ck_assert_str_eq(out, "one\ntwo\nthree\n");
	ck_assert_msg(strstr(err, "cell: entrypoint exited with status 3\n"), "stderr: %s", err);
	free(out);
	free(err);
	ck_logs(id, "--tail", "2", "two\nthree\n");
	ck_logs(id, "--tail", "0", "");
	ck_logs(id, "--tail", "all", "one\ntwo\nthree\n");
	/* an ended command is not followed: -f returns at once */
	ck_logs(id, "-f", NULL, "one\ntwo\nthree\n");

	/* ls says it: the table, a template, and the JSON's field */
	struct h_proc p;
	h_cell(&p, "ls", NULL);
	ck_assert_msg(p.status == 0 && strstr(p.out, "Running (entrypoint exited 3)"), "ls: %s",
		      p.out);
	h_proc_free(&p);
	h_cell(&p, "ls", "--format", "{{.ID}} {{.State}}", NULL);
	char *want = h_fmt("%s Running (entrypoint exited 3)\n", id);
	ck_assert_msg(p.status == 0 && strstr(p.out, want), "ls --format: %s", p.out);
	h_proc_free(&p);
	free(want);
	h_cell(&p, "ls", "--json", NULL);
	json_t *all = json_loads(p.out, 0, NULL);
	ck_assert_msg(json_is_array(all), "ls --json: %s", p.out);
	size_t i;
	json_t *sb;
	long long code = -1;
	json_array_foreach(all, i, sb) if (!strcmp(h_jstr(sb, "id"), id)) code =
	    h_jint(sb, "entrypointStatus.exitCode");
	ck_assert_int_eq(code, 3);
	json_decref(all);
	h_proc_free(&p);
	h_cell(&p, "inspect", id, NULL);
	json_t *j = json_loads(p.out, 0, NULL);
	ck_assert_int_eq(h_jint(j, "entrypointStatus.exitCode"), 3);
	json_decref(j);
	h_proc_free(&p);

	/* a stopped sandbox's logs are what its entrypoint wrote; it is not started */
	h_cell(&p, "stop", id, NULL);
	ck_assert_msg(p.status == 0, "stop: %s", p.err);
	h_proc_free(&p);
	out = logs_ok(id, NULL, NULL, &err);
	ck_assert_str_eq(out, "one\ntwo\nthree\n");
	ck_assert_msg(strstr(err, "exited with status 3"), "stderr: %s", err);
	ck_assert_str_eq(h_wait_state(id, "Paused", 1), "Paused"); /* Stopped, as OpenSandbox */
	free(out);
	free(err);

	/* a deleted one is no sandbox */
	ck_assert_int_eq(h_delete(id), 204);
	h_cell(&p, "logs", id, NULL);
	ck_assert_msg(p.status == 1 && strstr(p.err, id), "deleted: exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	struct h_resp r;
	char *path = h_fmt("/v1/sandboxes/%s/logs", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "SANDBOX_NOT_FOUND");
	h_resp_free(&r);
	free(path);
	free(id);
}
END_TEST

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* `cell logs ID` until its output holds needle (polled every 50 ms, 30 s at most): the
 * output then (malloc'd). */
static char *wait_logs(const char *id, const char *needle)
{
	for (int i = 0; i < 600; i++) {
		char *out = logs_ok(id, NULL, NULL, NULL);
		if (strstr(out, needle))
			return out;
		free(out);
		h_sleep_ms(50);
	}
	ck_abort_msg("the logs of %s never showed '%s'", id, needle);
	return NULL;
}

START_TEST(since_a_time)
{
	char *id = create_with_entrypoint("echo first; sleep 2; echo second; sleep 1000");
	/* When "first" is seen, it was written already; "second" comes 2 s after it. */
	free(wait_logs(id, "first"));
	double first_seen = now_s();
	char *out = wait_logs(id, "second");
	ck_assert_str_eq(out, "first\nsecond\n");
	free(out);
	/* Since a second after "first" was seen: only "second" (Unix seconds, a fraction). */
	char *since = h_fmt("%.3f", first_seen + 1.0);
	ck_logs(id, "--since", since, "second\n");
	free(since);
	/* A duration before now (from a second before "first" was seen: both lines), and an
	 * RFC 3339 time before everything */
	char *ago = h_fmt("%ds", (int)(now_s() - first_seen) + 2);
	ck_logs(id, "--since", ago, "first\nsecond\n");
	free(ago);
	ck_logs(id, "--since", "1h", "first\nsecond\n");
	ck_logs(id, "--since", "2020-01-01T00:00:00Z", "first\nsecond\n");
	/* A time after everything: nothing */
	since = h_fmt("%.3f", now_s() + 5);
	ck_logs(id, "--since", since, "");
	free(since);
	/* since and tail together: the later start */
	struct h_proc p;
	h_cell(&p, "logs", "--since", "1h", "--tail", "1", id, NULL);
	ck_assert_str_eq(p.out, "second\n");
	ck_assert_msg(!strstr(p.err, "exited"), "a running entrypoint: %s", p.err);
	h_proc_free(&p);
	free(id);
}
END_TEST

/* `cell logs -f ID` in the background, its stdout and stderr into files of H.dir. */
static pid_t follow(const char *id, char **out_file, char **err_file)
{
	char rnd[CELL_ID_RANDOM_LEN + 1];
	ck_assert_int_eq(cell_id_random(rnd), 0);
	*out_file = h_fmt("%s/logs-out-%s", H.dir, rnd);
	*err_file = h_fmt("%s/logs-err-%s", H.dir, rnd);
	char *cell = h_fmt("%s/cell", H.bin);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int o = open(*out_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(*err_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(127);
		execl(cell, cell, "--socket", H.socket, "logs", "-f", id, (char *)NULL);
		_exit(127);
	}
	free(cell);
	return pid;
}

/* Wait at most 60 s for pid: its exit status, -1 when it did not end (then killed). */
static int wait_exit(pid_t pid)
{
	int st;
	for (int i = 0; i < 600; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		h_sleep_ms(100);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

START_TEST(follow_background_command)
{
	/* cell run -d: no entrypoint, so its logs are the background command's */
	struct h_proc p;
	h_cell(&p, "run", "-d", "-I", "busybox", "--", "sh", "-c",
	       "echo bg-start; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo bg-end; exit 4",
	       NULL);
	ck_assert_msg(p.status == 0, "run -d: exit %d: %s", p.status, p.err);
	char *id = strdup(h_trim(p.out));
	h_track_sandbox(id);
	h_proc_free(&p);

	char *out_file, *err_file;
	pid_t pid = follow(id, &out_file, &err_file);
	char *got = NULL;
	for (int i = 0; i < 300; i++) {
		free(got);
		got = h_read_file(out_file);
		if (got && strstr(got, "bg-start"))
			break;
		h_sleep_ms(100);
	}
	ck_assert_msg(got && !strcmp(got, "bg-start\n"), "followed: %s", got ? got : "(none)");
	free(got);
	/* still following: the command waits for /tmp/go */
	ck_assert_int_eq(waitpid(pid, NULL, WNOHANG), 0);
	h_cell(&p, "exec", id, "--", "touch", "/tmp/go", NULL);
	ck_assert_msg(p.status == 0, "exec: %s", p.err);
	h_proc_free(&p);
	int code = wait_exit(pid);
	ck_assert_msg(code == 0, "cell logs -f: exit %d", code);
	got = h_read_file(out_file);
	ck_assert_str_eq(got, "bg-start\nbg-end\n");
	free(got);
	got = h_read_file(err_file);
	ck_assert_msg(strstr(got, "cell: command ") && strstr(got, " exited with status 4\n"),
		      "stderr: %s", got);
	free(got);
	/* the list: the background command, then the exec's */
	h_cell(&p, "logs", "--list", id, NULL);
	ck_assert_msg(p.status == 0, "--list: exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.out, "COMMAND") && strstr(p.out, " background ") &&
			  strstr(p.out, " exited 4 ") && strstr(p.out, "sh -c echo bg-start;") &&
			  strstr(p.out, " command ") && strstr(p.out, "touch /tmp/go"),
		      "--list: %s", p.out);
	h_proc_free(&p);
	h_cell(&p, "logs", "--list", "--json", id, NULL);
	json_t *items = json_loads(p.out, 0, NULL);
	ck_assert_msg(json_array_size(items) == 2, "--list --json: %s", p.out);
	ck_assert_str_eq(h_jstr(json_array_get(items, 0), "kind"), "background");
	ck_assert_int_eq(h_jint(json_array_get(items, 0), "exitCode"), 4);
	ck_assert_str_eq(h_jstr(json_array_get(items, 1), "kind"), "command");
	/* and its output by id, the same */
	ck_logs(id, "--command", h_jstr(json_array_get(items, 0), "commandId"),
		"bg-start\nbg-end\n");
	json_decref(items);
	h_proc_free(&p);
	h_cell(&p, "logs", "--list", "-f", id, NULL);
	ck_assert_msg(p.status == 2 && strstr(p.err, "--list"), "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	/* the sandbox has no entrypoint: nothing of one in its JSON, nor in ls */
	char *path = h_fmt("/v1/sandboxes/%s", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_ptr_null(json_object_get(r.json, "entrypointStatus"));
	h_resp_free(&r);
	unlink(out_file);
	unlink(err_file);
	free(out_file);
	free(err_file);
	free(path);
	free(id);
}
END_TEST

START_TEST(nothing_to_show_and_bad_parameters)
{
	struct h_proc p;
	h_cell(&p, "create", "-I", "busybox", NULL);
	ck_assert_msg(p.status == 0, "create: %s", p.err);
	char *id = strdup(h_trim(p.out));
	h_track_sandbox(id);
	h_proc_free(&p);
	/* no entrypoint, no background command: said so */
	h_cell(&p, "logs", id, NULL);
	ck_assert_msg(p.status == 1 && strstr(p.err, "no entrypoint or background command"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "logs", "--command", "nosuch", id, NULL);
	ck_assert_msg(p.status == 1 && strstr(p.err, "no command nosuch"), "exit %d: %s", p.status,
		      p.err);
	h_proc_free(&p);

	/* the API: 400 naming the parameter, whatever else the request says */
	static const struct {
		const char *query, *names;
	} bad[] = {
	    {"tail=-1", "tail"},
	    {"tail=ten", "tail"},
	    {"tail=99999999999", "tail"},
	    {"since=yesterday", "since"},
	    {"since=-5", "since"},
	    {"since=1.", "since"},
	    {"since=99999999999999999999", "since"},
	    {"follow=maybe", "follow"},
	    {"command=..%2Fx", "command"},
	    {"command=A", "command"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char *path = h_fmt("/v1/sandboxes/%s/logs?%s", id, bad[i].query);
		struct h_resp r;
		long st = h_http("GET", path, NULL, &r);
		ck_assert_msg(st == 400, "%s: %ld %s", bad[i].query, st, r.body);
		const char *msg = h_jstr(r.json, "message");
		ck_assert_msg(!strncmp(msg, bad[i].names, strlen(bad[i].names)), "%s: %s",
			      bad[i].query, msg);
		h_resp_free(&r);
		free(path);
	}
	/* the CLI names its flags */
	h_cell(&p, "logs", "--tail", "x", id, NULL);
	ck_assert_msg(p.status == 2 && strstr(p.err, "--tail"), "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "logs", "--since", "soon", id, NULL);
	ck_assert_msg(p.status == 2 && strstr(p.err, "--since"), "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "logs", "--since", "5x", id, NULL);
	ck_assert_msg(p.status == 2 && strstr(p.err, "--since"), "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "logs", NULL);
	ck_assert_msg(p.status == 2, "no id: exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	free(id);
}
END_TEST

/* Output from inside is the command's own, passed through; the CLI's status line has no
 * control characters of the sandbox's choosing. */
START_TEST(hostile_output_raw_status_escaped)
{
	char *id = create_with_entrypoint("printf '\\033]0;title\\007\\001\\n'; kill -9 $$");
	json_t *ep = wait_entrypoint_ended(id);
	ck_assert_int_eq(h_jint(ep, "exitCode"), 137);
	json_decref(ep);
	struct h_proc p;
	h_cell(&p, "logs", id, NULL);
	ck_assert_int_eq(p.status, 0);
	ck_assert_int_eq(p.out_len, 12);
	ck_assert_int_eq(memcmp(p.out, "\033]0;title\007\001\n", 12), 0);
	ck_assert_msg(strstr(p.err, "entrypoint exited with status 137 (killed by signal 9)"),
		      "stderr: %s", p.err);
	for (size_t i = 0; i < p.err_len; i++)
		ck_assert_msg(p.err[i] == '\n' || (unsigned char)p.err[i] >= 0x20,
			      "control character in stderr: %s", p.err);
	h_proc_free(&p);
	free(id);
}
END_TEST

/* Each start runs the entrypoint again: the latest run is the one shown. */
START_TEST(a_new_start_runs_it_again)
{
	char *id = create_with_entrypoint("echo run; sleep 1000");
	json_t *ep = wait_entrypoint_in(&H, id, true, NULL);
	char *first = strdup(h_jstr(ep, "commandId"));
	json_decref(ep);
	free(wait_logs(id, "run\n"));
	struct h_proc p;
	/* No grace (cell stop's default sends SIGTERM first, and the shell would exit 143). */
	h_cell(&p, "stop", "-t", "0", id, NULL);
	ck_assert_msg(p.status == 0, "stop: %s", p.err);
	h_proc_free(&p);
	/* killed under it: ended, with no exit code of its own, and said so */
	ep = wait_entrypoint_ended(id);
	ck_assert_str_eq(h_jstr(ep, "commandId"), first);
	ck_assert_ptr_null(json_object_get(ep, "exitCode"));
	ck_assert_str_ne(h_jstr(ep, "error"), "");
	json_decref(ep);
	char *err;
	char *out = logs_ok(id, NULL, NULL, &err);
	ck_assert_str_eq(out, "run\n");
	ck_assert_msg(strstr(err, "cell: entrypoint ended: "), "stderr: %s", err);
	free(out);
	free(err);
	/* a Stopped sandbox's STATE is Stopped, whatever its entrypoint did */
	h_cell(&p, "ls", "--format", "{{.ID}} {{.State}}", NULL);
	char *want = h_fmt("%s Stopped\n", id);
	ck_assert_msg(strstr(p.out, want), "ls: %s", p.out);
	h_proc_free(&p);
	free(want);
	h_cell(&p, "resume", id, NULL);
	ck_assert_msg(p.status == 0, "resume: %s", p.err);
	h_proc_free(&p);
	ep = wait_entrypoint_in(&H, id, true, first);
	ck_assert_str_ne(h_jstr(ep, "commandId"), first);
	json_decref(ep);
	h_cell(&p, "ls", "--format", "{{.ID}} {{.State}}", NULL);
	want = h_fmt("%s Running\n", id);
	ck_assert_msg(strstr(p.out, want), "ls: %s", p.out);
	h_proc_free(&p);
	free(want);
	/* the first run's output is still there, by its id; both runs are listed */
	ck_logs(id, "--command", first, "run\n");
	h_cell(&p, "logs", "--list", "--json", id, NULL);
	json_t *items = json_loads(p.out, 0, NULL);
	ck_assert_msg(json_array_size(items) == 2, "--list --json: %s", p.out);
	ck_assert_str_eq(h_jstr(json_array_get(items, 0), "commandId"), first);
	for (size_t i = 0; i < 2; i++)
		ck_assert_str_eq(h_jstr(json_array_get(items, i), "kind"), "entrypoint");
	json_decref(items);
	h_proc_free(&p);
	free(first);
	free(id);
}
END_TEST

/* A sandbox remembers its latest 256 commands; its entrypoint's latest run is never the one
 * forgotten to make room. */
START_TEST(the_entrypoint_outlasts_other_commands)
{
	char *id = create_with_entrypoint("echo ran; exit 3");
	json_decref(wait_entrypoint_ended(id));
	for (int i = 0; i < 260; i++)
		ck_assert_int_eq(h_sh_code(id, "true"), 0);
	json_t *ep = wait_entrypoint_ended(id);
	ck_assert_int_eq(h_jint(ep, "exitCode"), 3);
	json_decref(ep);
	ck_logs(id, NULL, NULL, "ran\n");
	free(id);
}
END_TEST

/* Output that went to celld's output budget is said to be gone, not shown as empty. */
START_TEST(dropped_output_is_said)
{
	struct h_world *w = h_world_add(&(struct h_world_opts){
	    .name = "budget", .flags = (const char *const[]){"--output-budget", "16Mi", NULL}});
	enum { N = 4 };
	char *ids[N];
	for (int i = 0; i < N; i++) {
		json_t *extra = json_pack("{s:[s, s, s]}", "entrypoint", "sh", "-c",
					  "head -c 6000000 /dev/zero");
		ids[i] = h_world_create(w, "busybox", extra);
		json_decref(extra);
		json_decref(wait_entrypoint_in(w, ids[i], false, NULL));
	}
	/* the oldest finished entrypoint's output went first */
	char *path = h_fmt("/v1/sandboxes/%s", ids[0]);
	struct h_resp r;
	ck_assert_int_eq(h_world_http(w, "GET", path, NULL, &r), 200);
	ck_assert_msg(json_is_true(h_jget(r.json, "entrypointStatus.logDropped")), "%s", r.body);
	h_resp_free(&r);
	char *cell = h_fmt("%s/cell", H.bin);
	char *argv[] = {cell, "--socket", w->socket, "logs", ids[0], NULL};
	struct h_proc p;
	h_run(argv, NULL, 60, &p);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	ck_assert_uint_eq(p.out_len, 0);
	ck_assert_msg(strstr(p.err, "cell: the output of entrypoint was dropped"), "stderr: %s",
		      p.err);
	ck_assert_msg(strstr(p.err, "cell: entrypoint exited with status 0"), "stderr: %s", p.err);
	h_proc_free(&p);
	/* the newest is whole */
	argv[4] = ids[N - 1];
	h_run(argv, NULL, 60, &p);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	ck_assert_uint_eq(p.out_len, 6000000);
	ck_assert_msg(!strstr(p.err, "dropped"), "stderr: %s", p.err);
	h_proc_free(&p);
	for (int i = 0; i < N; i++)
		free(ids[i]);
	free(cell);
	free(path);
}
END_TEST

/* Threads of process pid. */
static int thread_count(pid_t pid)
{
	char *path = h_fmt("/proc/%d/status", (int)pid);
	char *st = h_read_file(path);
	ck_assert_ptr_nonnull(st);
	const char *t = strstr(st, "\nThreads:");
	ck_assert_ptr_nonnull(t);
	int n = atoi(t + strlen("\nThreads:"));
	free(st);
	free(path);
	return n;
}

/* Threads of pid once the harness's own connections are gone: the fewest seen in a
 * second (a closed connection's thread ends a moment after its client left). */
static int settled_threads(pid_t pid)
{
	int least = thread_count(pid);
	for (int i = 0; i < 20; i++) {
		h_sleep_ms(50);
		int n = thread_count(pid);
		least = n < least ? n : least;
	}
	return least;
}

/* A follower whose client leaves while its command is silent is let go: celld's thread for
 * it ends without the command writing or ending. */
START_TEST(a_follower_that_leaves_is_let_go)
{
	struct h_world *w = h_world_add(&(struct h_world_opts){.name = "follow"});
	json_t *extra = json_pack("{s:[s, s, s]}", "entrypoint", "sh", "-c", "echo hi; sleep 1000");
	char *id = h_world_create(w, "busybox", extra);
	json_decref(extra);
	json_decref(wait_entrypoint_in(w, id, true, NULL));
	pid_t celld = h_world_pid(w);
	int before = settled_threads(celld);
	char *cell = h_fmt("%s/cell", H.bin);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
			_exit(127);
		execl(cell, cell, "--socket", w->socket, "logs", "-f", id, (char *)NULL);
		_exit(127);
	}
	int following = 0;
	for (int i = 0; i < 300 && following <= before; i++) {
		following = thread_count(celld);
		if (following <= before)
			h_sleep_ms(50);
	}
	ck_assert_msg(following > before, "no thread follows (%d, %d before)", following, before);
	ck_assert_int_eq(waitpid(pid, NULL, WNOHANG), 0); /* still following */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	int after = following;
	for (int i = 0; i < 300 && after > before; i++) {
		h_sleep_ms(50);
		after = thread_count(celld);
	}
	ck_assert_msg(after <= before, "celld still has %d threads (%d before the follower)", after,
		      before);
	free(cell);
	free(id);
}
END_TEST

static Suite *logs_suite(void)
{
	Suite *s = suite_create("logs");
	tcase_add_test(h_tcase(s, "entrypoint_output_exit_and_ls", 180),
		       entrypoint_output_exit_and_ls);
	tcase_add_test(h_tcase(s, "since_a_time", 180), since_a_time);
	tcase_add_test(h_tcase(s, "follow_background_command", 180), follow_background_command);
	tcase_add_test(h_tcase(s, "nothing_to_show_and_bad_parameters", 120),
		       nothing_to_show_and_bad_parameters);
	tcase_add_test(h_tcase(s, "hostile_output_raw_status_escaped", 120),
		       hostile_output_raw_status_escaped);
	tcase_add_test(h_tcase(s, "a_new_start_runs_it_again", 180), a_new_start_runs_it_again);
	tcase_add_test(h_tcase(s, "dropped_output_is_said", 180), dropped_output_is_said);
	tcase_add_test(h_tcase(s, "the_entrypoint_outlasts_other_commands", 180),
		       the_entrypoint_outlasts_other_commands);
	tcase_add_test(h_tcase(s, "a_follower_that_leaves_is_let_go", 120),
		       a_follower_that_leaves_is_let_go);
	return s;
}

int main(void)
{
	return h_main(logs_suite());
}
