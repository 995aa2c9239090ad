/* Lifecycle: create/get/list/delete, endpoints, create-or-resume by session key, celld
 * restart re-adopting a sandbox, delete leaving nothing behind, a sandbox whose init dies. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/codec.h"
#include "cell/id.h"
#include "harness.h"

static bool is_rfc3339_utc(const char *s)
{
	int y, mo, d, h, mi, sec;
	char z = 0;
	return sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &sec, &z) == 7 &&
	       (z == 'Z' || z == '.') && s[strlen(s) - 1] == 'Z';
}

static int count_in_list(const char *query, const char *id)
{
	char *path = h_fmt("/v1/sandboxes%s", query);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	json_t *items = json_object_get(r.json, "items");
	ck_assert_msg(json_is_array(items), "list without items: %s", r.body);
	int n = 0;
	for (size_t i = 0; i < json_array_size(items); i++)
		if (!strcmp(h_jstr(json_array_get(items, i), "id"), id))
			n++;
	h_resp_free(&r);
	free(path);
	return n;
}

/* After DELETE: nothing of the sandbox is left on the host. */
static void expect_nothing_left(const char *id, json_t *ins)
{
	char *path = h_fmt("/v1/sandboxes/%s", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "SANDBOX_NOT_FOUND");
	h_resp_free(&r);
	free(path);

	const char *dir = h_jstr(ins, "dir");
	ck_assert_msg(*dir, "inspect has no dir");
	ck_assert_msg(!h_mountinfo_mentions(dir), "a mount under %s is left", dir);
	ck_assert_msg(!h_mountinfo_mentions(H.dir), "a mount under %s is left", H.dir);
	char where[1024];
	ck_assert_msg(!h_cgroup_exists(id, where, sizeof(where)), "cgroup %s is left", where);
	const char *cg = h_jstr(ins, "cgroup.path");
	struct stat st;
	ck_assert_msg(!*cg || stat(cg, &st) < 0, "cgroup %s is left", cg);
	pid_t first = 0;
	int n = h_procs_in_uid_range((uint32_t)h_jint(ins, "uidMap.hostStart"), 65536, &first);
	ck_assert_msg(n == 0, "%d processes of the sandbox's uid range left (pid %d)", n,
		      (int)first);
	ck_assert_msg(!h_pid_alive((pid_t)h_jint(ins, "pid")), "init %lld still alive",
		      h_jint(ins, "pid"));
	ck_assert_msg(stat(dir, &st) < 0 && errno == ENOENT, "state dir %s is left", dir);
}

START_TEST(create_get_list_delete)
{
	struct h_resp r;
	json_t *extra = json_pack("{s:{s:s}}", "metadata", "team", "cell-it");
	long st = h_create_ex("busybox", extra, H_UNIX, &r);
	json_decref(extra);
	ck_assert_msg(st == 202, "create: HTTP %ld: %s", st, r.body);
	ck_assert_msg(r.request_id && *r.request_id, "no X-Request-ID");
	char *id = strdup(h_jstr(r.json, "id"));
	ck_assert_msg(cell_id_valid(id) && strlen(id) == 16, "id '%s'", id);
	ck_assert_str_eq(h_jstr(r.json, "status.state"), "Running");
	ck_assert_msg(is_rfc3339_utc(h_jstr(r.json, "createdAt")), "createdAt '%s'",
		      h_jstr(r.json, "createdAt"));
	ck_assert_str_eq(h_jstr(r.json, "metadata.team"), "cell-it");
	h_resp_free(&r);

	char *path = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "id"), id);
	ck_assert_str_eq(h_jstr(r.json, "status.state"), "Running");
	ck_assert_str_eq(h_jstr(r.json, "image.uri"), "busybox");
	h_resp_free(&r);

	ck_assert_int_eq(count_in_list("", id), 1);
	ck_assert_int_eq(count_in_list("?state=Running", id), 1);
	ck_assert_int_eq(count_in_list("?state=Paused", id), 0);
	ck_assert_int_eq(count_in_list("?metadata=team%3Dcell-it", id), 1);
	ck_assert_int_eq(count_in_list("?metadata=team%3Dother", id), 0);

	json_t *ins = h_inspect(id);
	ck_assert_str_eq(h_jstr(ins, "id"), id);
	ck_assert_msg(!strncmp(h_jstr(ins, "dir"), H.state, strlen(H.state)), "dir %s",
		      h_jstr(ins, "dir"));
	ck_assert_msg(json_array_size(json_object_get(ins, "pids")) >= 1, "no pids");

	ck_assert_int_eq(h_delete(id), 204);
	expect_nothing_left(id, ins);
	ck_assert_int_eq(h_delete(id), 404);
	ck_assert_int_eq(count_in_list("", id), 0);
	json_decref(ins);
	free(path);
	free(id);
}
END_TEST

START_TEST(endpoints_ping_info)
{
	char *id = h_create("busybox", NULL);
	char *path = h_fmt("/v1/sandboxes/%s/endpoints/44772", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	char *want = h_fmt("localhost/v1/sandboxes/%s/proxy/44772", id);
	ck_assert_str_eq(h_jstr(r.json, "endpoint"), want);
	h_resp_free(&r);
	free(want);

	/* over TCP the endpoint names the address the client used */
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP};
	ck_assert_int_eq(h_request(&req, &r), 200);
	want = h_fmt("%s/v1/sandboxes/%s/proxy/44772", H.listen, id);
	ck_assert_str_eq(h_jstr(r.json, "endpoint"), want);
	h_resp_free(&r);
	free(want);
	free(path);

	path = h_fmt("/v1/sandboxes/%s/endpoints/18080", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_msg(strstr(h_jstr(r.json, "endpoint"), "/proxy/18080"), "%s", r.body);
	h_resp_free(&r);
	free(path);

	path = h_fmt("/v1/sandboxes/%s/proxy/44772/ping", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	h_resp_free(&r);
	free(path);
	/* the execd routes are also served without the leading /v1 */
	path = h_fmt("/sandboxes/%s/proxy/44772/ping", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	h_resp_free(&r);
	free(path);

	ck_assert_int_eq(h_http("GET", "/v1/info", NULL, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "stateDir"), H.state);
	ck_assert_str_eq(h_jstr(r.json, "imagesDir"), H.images);
	const char *cg = h_jstr(r.json, "cgroup");
	ck_assert_msg(!strcmp(cg, "v2") || !strcmp(cg, "v1-hybrid") || !strcmp(cg, "v1"),
		      "cgroup '%s'", cg);
	ck_assert_int_ge(h_jint(r.json, "sandboxes"), 1);
	ck_assert_msg(*h_jstr(r.json, "version"), "no version");
	h_resp_free(&r);

	ck_assert_int_eq(h_http("POST", "/v1/metrics/events", "{\"name\":\"create\"}", &r), 204);
	h_resp_free(&r);
	free(id);
}
END_TEST

static json_t *session_extra(const char *key)
{
	return json_pack("{s:{s:s}}", "extensions", "cell.sessionKey", key);
}

struct racer {
	const char *key;
	long status;
	char id[80];
};

static void *race_create(void *arg)
{
	struct racer *rc = arg;
	json_t *extra = session_extra(rc->key);
	struct h_resp r;
	rc->status = h_create_ex("busybox", extra, H_UNIX, &r);
	snprintf(rc->id, sizeof(rc->id), "%s", h_jstr(r.json, "id"));
	h_resp_free(&r);
	json_decref(extra);
	return NULL;
}

START_TEST(session_key_create_or_resume)
{
	char rnd[CELL_ID_RANDOM_LEN + 1], want[CELL_ID_RANDOM_LEN + 1];
	ck_assert_int_eq(cell_id_random(rnd), 0);
	char *key = h_fmt("app-user-chat-%s", rnd);
	cell_id_from_session_key(key, strlen(key), want);

	json_t *extra = session_extra(key);
	struct h_resp r;
	ck_assert_int_eq(h_create_ex("busybox", extra, H_UNIX, &r), 202);
	ck_assert_str_eq(h_jstr(r.json, "id"), want);
	h_resp_free(&r);
	free(h_sh(want, "echo remembered > /workspace/note"));
	ck_assert_int_eq(h_create_ex("busybox", extra, H_UNIX, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "id"), want);
	h_resp_free(&r);
	char *out = h_sh(want, "cat /workspace/note");
	ck_assert_str_eq(out, "remembered\n");
	free(out);
	ck_assert_int_eq(count_in_list("?pageSize=1000", want), 1);
	json_t *ins = h_inspect(want);
	ck_assert_str_eq(h_jstr(ins, "sessionKey"), key);
	json_decref(ins);

	/* deleted, the same key makes a fresh sandbox */
	ck_assert_int_eq(h_delete(want), 204);
	ck_assert_int_eq(h_create_ex("busybox", extra, H_UNIX, &r), 202);
	h_resp_free(&r);
	ck_assert_int_ne(h_sh_code(want, "test -e /workspace/note"), 0);
	json_decref(extra);

	/* racing creates with a new key get one sandbox */
	ck_assert_int_eq(cell_id_random(rnd), 0);
	char *key2 = h_fmt("race-%s", rnd);
	enum { RACERS = 6 };
	struct racer rs[RACERS];
	pthread_t th[RACERS];
	for (int i = 0; i < RACERS; i++) {
		rs[i] = (struct racer){.key = key2};
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_create, &rs[i]), 0);
	}
	int created = 0;
	for (int i = 0; i < RACERS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_msg(rs[i].status == 202 || rs[i].status == 200, "racer %d: HTTP %ld", i,
			      rs[i].status);
		ck_assert_str_eq(rs[i].id, rs[0].id);
		created += rs[i].status == 202;
	}
	ck_assert_int_eq(created, 1);
	ck_assert_int_eq(count_in_list("?pageSize=1000", rs[0].id), 1);
	out = h_sh(rs[0].id, "echo one");
	ck_assert_str_eq(out, "one\n");
	free(out);
	free(key2);
	free(key);
}
END_TEST

/* celld dies (SIGKILL: no chance to clean up) and comes back: it re-adopts the running
 * sandbox, with its files and its background process. */
START_TEST(restart_readopts_sandbox)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, H_NOHUP "echo survived > /workspace/f; nohup sleep 4321 >/dev/null 2>&1 &"));
	char *out = h_sh(id, H_WAIT_PIDOF("sleep", 1) "pidof sleep >/dev/null && echo sleeping");
	ck_assert_str_eq(out, "sleeping\n");
	free(out);
	json_t *before = h_inspect(id);
	pid_t init_pid = (pid_t)h_jint(before, "pid");

	h_celld_kill();
	ck_assert_msg(h_pid_alive(init_pid), "the sandbox died with celld");
	h_celld_start();

	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	out = h_sh(id, "cat /workspace/f; pidof sleep >/dev/null && echo sleeping");
	ck_assert_str_eq(out, "survived\nsleeping\n");
	free(out);
	json_t *after = h_inspect(id);
	ck_assert_int_eq(h_jint(after, "pid"), init_pid);
	ck_assert_int_eq(h_jint(after, "uidMap.hostStart"), h_jint(before, "uidMap.hostStart"));
	ck_assert_int_eq(count_in_list("", id), 1);

	/* the adopted sandbox's uid slot stays reserved */
	char *other = h_create("busybox", NULL);
	json_t *io = h_inspect(other);
	ck_assert_int_ne(h_jint(io, "uidMap.hostStart"), h_jint(before, "uidMap.hostStart"));
	json_decref(io);

	ck_assert_int_eq(h_delete(id), 204);
	expect_nothing_left(id, after);
	json_decref(after);
	json_decref(before);
	free(other);
	free(id);
}
END_TEST

START_TEST(second_celld_same_state_dir_refused)
{
	char *id = h_create("busybox", NULL);
	char *sock = h_fmt("%s/second.sock", H.dir);
	char *celld = h_fmt("%s/celld", H.bin);
	char *init = h_fmt("%s/cell-init", H.bin);
	char *argv[] = {celld, "--state-dir", H.state,	"--images", H.images, "--socket",
			sock,  "--no-tcp",    "--init", init,	    NULL};
	struct h_proc p = {0};
	h_run(argv, NULL, 30, &p);
	ck_assert_msg(p.status != 0, "a second celld on %s started", H.state);
	ck_assert_msg(p.err && strstr(p.err, "another celld") && strstr(p.err, H.state),
		      "unclear refusal: %s", p.err ? p.err : "");
	ck_assert_msg(access(sock, F_OK) != 0, "the refused celld left its socket %s", sock);
	h_proc_free(&p);
	/* the first one still owns and serves the sandbox */
	char *out = h_sh(id, "echo still");
	ck_assert_str_eq(out, "still\n");
	free(out);
	ck_assert_int_eq(h_delete(id), 204);
	free(init);
	free(celld);
	free(sock);
	free(id);
}
END_TEST

START_TEST(delete_leaves_nothing)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, H_NOHUP
		  "nohup sleep 1234 >/dev/null 2>&1 & echo x > /workspace/x; "
		  "mkdir -p /workspace/locked/in && chmod 000 /workspace/locked/in "
		  "/workspace/locked; ln -s / /workspace/rootlink; mkfifo /workspace/fifo"));
	json_t *ins = h_inspect(id);
	ck_assert_int_gt(
	    h_procs_in_uid_range((uint32_t)h_jint(ins, "uidMap.hostStart"), 65536, NULL), 1);
	char where[1024];
	ck_assert_msg(h_cgroup_exists(id, where, sizeof(where)), "no cgroup %s/%s found",
		      H.cg_instance, id);
	ck_assert_int_eq(h_delete(id), 204);
	expect_nothing_left(id, ins);
	json_decref(ins);
	free(id);
}
END_TEST

/* The sandbox's init is killed from the host: celld notices, reports Failed, keeps serving,
 * and delete still cleans everything. */
START_TEST(init_killed_from_host)
{
	char *id = h_create("busybox", NULL);
	char *keep = h_create("busybox", NULL);
	json_t *ins = h_inspect(id);
	pid_t pid = (pid_t)h_jint(ins, "pid");
	ck_assert_int_gt(pid, 1);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);

	ck_assert_str_eq(h_wait_state(id, "Failed", 30), "Failed");
	struct h_exec r;
	h_exec(id, "echo hi", NULL, &r);
	ck_assert_msg(!r.complete, "exec in a dead sandbox completed");
	ck_assert_msg(r.status >= 400 || r.errored, "exec in a dead sandbox: HTTP %ld", r.status);
	h_exec_free(&r);

	/* celld and the other sandbox are fine */
	ck_assert(h_celld_alive());
	char *out = h_sh(keep, "echo still-here");
	ck_assert_str_eq(out, "still-here\n");
	free(out);

	ck_assert_int_eq(h_delete(id), 204);
	expect_nothing_left(id, ins);
	json_decref(ins);
	free(keep);
	free(id);
}
END_TEST

static size_t dir_entries(const char *path)
{
	DIR *d = opendir(path);
	size_t n = 0;
	if (!d)
		return 0;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* An entrypoint the image does not have is the client's error: 400 naming it, and the
 * create leaves nothing behind (no sandbox, state dir, mount, cgroup or process). */
START_TEST(missing_entrypoint_refused)
{
	char *sdir = h_fmt("%s/sandboxes", H.state);
	size_t before = dir_entries(sdir);
	static const char *const eps[] = {"/no/such/entrypoint", "no-such-program-xyz",
					  "/etc/passwd"};
	for (size_t i = 0; i < sizeof(eps) / sizeof(eps[0]); i++) {
		json_t *extra = json_pack("{s:[s,s]}", "entrypoint", eps[i], "arg");
		struct h_resp r;
		long st = h_create_ex("busybox", extra, H_UNIX, &r);
		json_decref(extra);
		ck_assert_msg(st == 400, "entrypoint %s: HTTP %ld: %s", eps[i], st, r.body);
		ck_assert_str_eq(h_err_code(&r), "INVALID_ARGUMENT");
		ck_assert_msg(strstr(r.body, eps[i]) && strstr(r.body, "entrypoint"),
			      "the answer does not name the entrypoint: %s", r.body);
		h_resp_free(&r);
	}
	ck_assert_uint_eq(dir_entries(sdir), before);
	struct h_resp lr;
	ck_assert_int_eq(h_http("GET", "/v1/sandboxes", NULL, &lr), 200);
	ck_assert_uint_eq(json_array_size(json_object_get(lr.json, "items")), before);
	h_resp_free(&lr);
	ck_assert_msg(!h_mountinfo_mentions(H.dir), "a mount under %s is left", H.dir);
	free(sdir);
	/* A good one still starts. */
	json_t *extra = json_pack("{s:[s,s]}", "entrypoint", "sleep", "1000");
	char *id = h_create("busybox", extra);
	json_decref(extra);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
}
END_TEST

/* ---- under a service manager that delegates a subgroup ---- */

/* Move this process into the cgroup v2 dir (absolute); false when the kernel refuses. */
static bool join_cgroup(const char *dir)
{
	char *procs = h_fmt("%s/cgroup.procs", dir);
	FILE *f = fopen(procs, "we");
	bool ok = f && fprintf(f, "%d\n", (int)getpid()) > 0;
	ok = f && fclose(f) == 0 && ok;
	free(procs);
	return ok;
}

/* A process's cgroup v2 path ("/a/b"), from /proc/<pid>/cgroup. */
static char *cgroup_of(pid_t pid)
{
	char *text = h_read_file(h_fmt("/proc/%d/cgroup", (int)pid));
	char *line = strstr(text, "0::");
	ck_assert_msg(line, "no cgroup v2 line in /proc/%d/cgroup: %s", (int)pid, text);
	char *path = strndup(line + 3, strcspn(line + 3, "\n"));
	free(text);
	return path;
}

/* systemd's DelegateSubgroup=celld starts celld in the leaf <unit>/celld of its delegated
 * unit cgroup, every time. celld must nest its sandboxes in <unit> and leave the leaf
 * without controllers: otherwise the next start into that leaf is refused while
 * sandboxes run (cgroup v2 places no process beside controlled children), and a restart
 * loses them. The test makes a unit cgroup of its own and starts celld in its leaf twice,
 * as the service manager would. */
START_TEST(restart_in_delegated_leaf)
{
	struct stat st;
	if (stat("/sys/fs/cgroup/cgroup.subtree_control", &st) < 0)
		h_skip_host("cgroup-v2", "cgroup v1 host: no delegation of a v2 subgroup");
	char *was = cgroup_of(getpid());
	char *unit = h_fmt("/sys/fs/cgroup/it-delegate-%d", (int)getpid());
	char *leaf = h_fmt("%s/celld", unit);
	ck_assert_msg(mkdir(unit, 0755) == 0 && mkdir(leaf, 0755) == 0, "mkdir %s: %s", leaf,
		      strerror(errno));
	char *ctl = h_read_file(h_fmt("%s/cgroup.controllers", unit));
	if (!strstr(ctl, "memory") || !strstr(ctl, "pids")) {
		rmdir(leaf);
		rmdir(unit);
		h_skip_host("cgroup-v2-delegation", "the root hands no memory/pids to %s", unit);
	}
	ck_assert_msg(join_cgroup(leaf), "joining %s: %s", leaf, strerror(errno));

	struct h_world *w = h_world_add(&(struct h_world_opts){.name = "delegate"});
	char *own = cgroup_of(h_world_pid(w));
	ck_assert_str_eq(own, leaf + strlen("/sys/fs/cgroup"));
	char *id = h_world_create(w, "busybox", NULL);
	char *nested = h_fmt("%s/%s/%s", unit, w->cg_instance, id);
	ck_assert_msg(stat(nested, &st) == 0, "sandbox %s not nested at %s", id, nested);
	char *sub = h_read_file(h_fmt("%s/cgroup.subtree_control", leaf));
	ck_assert_msg(!sub[0] || sub[0] == '\n', "celld's leaf has controllers: %s", sub);

	/* The service manager's next start: into the same leaf, sandboxes running. */
	h_world_kill(w);
	h_world_start(w);
	free(own);
	own = cgroup_of(h_world_pid(w));
	ck_assert_str_eq(own, leaf + strlen("/sys/fs/cgroup"));
	ck_assert_str_eq(h_world_wait_state(w, id, "Running", 30), "Running");
	char *out = h_world_sh(w, id, "echo adopted");
	ck_assert_str_eq(out, "adopted\n");

	ck_assert_int_eq(h_world_delete(w, id), 204);
	ck_assert_msg(stat(nested, &st) < 0, "%s left behind", nested);
	h_world_kill(w);
	ck_assert(join_cgroup(h_fmt("/sys/fs/cgroup%s", was)));
	rmdir(h_fmt("%s/%s", unit, w->cg_instance));
	ck_assert_msg(rmdir(leaf) == 0 && rmdir(unit) == 0, "rmdir %s: %s", unit, strerror(errno));
	free(out);
	free(sub);
	free(nested);
	free(id);
	free(own);
	free(ctl);
	free(leaf);
	free(unit);
	free(was);
}
END_TEST

static Suite *lifecycle_suite(void)
{
	Suite *s = suite_create("lifecycle");
	tcase_add_test(h_tcase(s, "create_get_list_delete", 120), create_get_list_delete);
	tcase_add_test(h_tcase(s, "endpoints_ping_info", 120), endpoints_ping_info);
	tcase_add_test(h_tcase(s, "session_key_create_or_resume", 180),
		       session_key_create_or_resume);
	tcase_add_test(h_tcase(s, "restart_readopts_sandbox", 180), restart_readopts_sandbox);
	tcase_add_test(h_tcase(s, "second_celld_same_state_dir_refused", 120),
		       second_celld_same_state_dir_refused);
	tcase_add_test(h_tcase(s, "delete_leaves_nothing", 120), delete_leaves_nothing);
	tcase_add_test(h_tcase(s, "init_killed_from_host", 120), init_killed_from_host);
	tcase_add_test(h_tcase(s, "missing_entrypoint_refused", 120), missing_entrypoint_refused);
	tcase_add_test(h_tcase(s, "restart_in_delegated_leaf", 180), restart_in_delegated_leaf);
	return s;
}

int main(void)
{
	return h_main(lifecycle_suite());
}
