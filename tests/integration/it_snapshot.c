/* Snapshots and fork: POST /v1/sandboxes/{id}/snapshots of a running, a paused and a
 * stopped sandbox, a create with snapshotId whose writable layer starts as the snapshot's
 * (owners and modes as seen inside, a setuid file, a file deleted in the upper layer (a
 * whiteout), an opaque dir, a symlink), isolation both ways between the source, the fork
 * and the snapshot, a snapshot outliving its source, delete, the refusals, and the CLI
 * (cell snapshot, cell fork).
 *
 * Every sandbox has a disk quota (policies/resources/default.json; the API refuses a disk
 * below 16 MiB). On this harness's state dir (no project quotas) it is a loop-mounted ext4
 * image, which a snapshot copies whole and a fork's start shifts inside; on a filesystem
 * with project quotas the layer is a tree the snapshot copies (ids shifted when a fork
 * starts), which these tests check too when the state dir has them. The tree copy itself
 * (shift, setuid, whiteouts, opaque dirs, xattrs, bounds, hostile symlinks) is covered
 * by tests/unit/test_layercopy.c. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* Files of every kind the layer keeps, written by the sandbox: owners, modes, setuid, a
 * whiteout (/etc/hosts is the image's), an opaque dir (/usr/sbin is the image's), a
 * symlink, a hole. */
#define WRITE_FILES                                                                                \
	"set -e; mkdir -p /s/d; echo a > /s/a; chown 1234:5678 /s/a; chmod 640 /s/a; "             \
	"echo x > /s/su; chmod 4755 /s/su; echo y > /s/d/y; chown 7:8 /s/d; chmod 711 /s/d; "      \
	"ln -s /s/a /s/ln; rm /etc/hosts; rm -rf /usr/sbin; mkdir /usr/sbin; "                     \
	"echo n > /usr/sbin/new; dd if=/dev/zero of=/s/sparse bs=1 count=1 seek=1048575 "          \
	"2>/dev/null"

#define CHECK_FILES                                                                                \
	"stat -c %u:%g:%a /s/a /s/su /s/d /s/d/y; readlink /s/ln; cat /s/a; "                      \
	"test -e /etc/hosts && echo hosts-back || echo no-hosts; ls /usr/sbin; "                   \
	"stat -c %s /s/sparse"

#define EXPECT_FILES "1234:5678:640\n0:0:4755\n7:8:711\n0:0:644\n/s/a\na\nno-hosts\nnew\n1048576"

static char *create_src(void)
{
	return h_create("busybox", NULL);
}

/* POST a snapshot: its id (asserting 202 and Ready). */
static char *snapshot(const char *id, const char *body)
{
	char *path = h_fmt("/v1/sandboxes/%s/snapshots", id);
	struct h_resp r;
	long st = h_http("POST", path, body, &r);
	ck_assert_msg(st == 202, "snapshot of %s: %ld %s\n%s", id, st, r.body, h_celld_log_tail());
	ck_assert_str_eq(h_jstr(r.json, "status.state"), "Ready");
	ck_assert_str_eq(h_jstr(r.json, "sandboxId"), id);
	ck_assert(h_jstr(r.json, "createdAt")[0]);
	char *sid = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	free(path);
	return sid;
}

static long create_from(const char *snap, const char *extra_json, struct h_resp *r)
{
	char *body = h_fmt("{\"snapshotId\":\"%s\"%s%s}", snap, extra_json ? "," : "",
			   extra_json ? extra_json : "");
	long st = h_http("POST", "/v1/sandboxes", body, r);
	free(body);
	if (st == 202)
		h_track_sandbox(h_jstr(r->json, "id"));
	return st;
}

static char *fork_of(const char *snap)
{
	struct h_resp r;
	long st = create_from(snap, NULL, &r);
	ck_assert_msg(st == 202, "create from %s: %ld %s\n%s", snap, st, r.body,
		      h_celld_log_tail());
	char *id = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	ck_assert_str_eq(h_wait_state(id, "Running", 60), "Running");
	/* Its record names the snapshot (the spec's Sandbox.snapshotId). */
	char *path = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "snapshotId"), snap);
	h_resp_free(&r);
	free(path);
	return id;
}

static long del_snapshot(const char *snap)
{
	char *path = h_fmt("/v1/snapshots/%s", snap);
	long st = h_http("DELETE", path, NULL, NULL);
	free(path);
	return st;
}

static void expect_files(const char *id)
{
	char *out = h_trim(h_sh(id, CHECK_FILES));
	ck_assert_msg(!strcmp(out, EXPECT_FILES), "files in %s:\n%s\nwanted:\n%s", id, out,
		      EXPECT_FILES);
	free(out);
}

static const char *state_of(const char *id)
{
	static char buf[32];
	json_t *ins = h_inspect(id);
	snprintf(buf, sizeof(buf), "%s", h_jstr(ins, "state"));
	json_decref(ins);
	return buf;
}

/* A running source: captured, still running after; the fork has its files, in its own uid
 * range; writes never cross between source, fork, a second fork and the snapshot. */
START_TEST(running)
{
	char *src = create_src();
	free(h_sh(src, WRITE_FILES));
	char *snap = snapshot(src, "{\"name\":\"first\"}");
	ck_assert_str_eq(state_of(src), "Running");
	ck_assert_int_eq(h_sh_code(src, "cat /s/a"), 0); /* thawed */
	char *fork = fork_of(snap);
	expect_files(fork);
	json_t *a = h_inspect(src), *b = h_inspect(fork);
	ck_assert_int_ne(h_jint(a, "uidMap.hostStart"), h_jint(b, "uidMap.hostStart"));
	json_decref(a);
	json_decref(b);
	/* Isolation both ways, and the snapshot keeps what it had. */
	free(h_sh(fork, "echo f > /s/a; echo new > /s/fork-only"));
	free(h_sh(src, "echo p > /s/src-only; rm /s/su"));
	ck_assert_str_eq(h_trim(h_sh(src, "cat /s/a; test -e /s/fork-only || echo none")),
			 "a\nnone");
	ck_assert_str_eq(h_trim(h_sh(fork, "test -e /s/src-only || echo none; stat -c %a /s/su")),
			 "none\n4755");
	char *fork2 = fork_of(snap);
	expect_files(fork2);
	ck_assert_int_eq(h_sh_code(fork2, "test -e /s/fork-only"), 1);
	ck_assert_int_eq(h_delete(fork2), 204);
	ck_assert_int_eq(h_delete(fork), 204);
	ck_assert_int_eq(h_delete(src), 204);
	ck_assert_int_eq(del_snapshot(snap), 204);
	free(fork2);
	free(fork);
	free(snap);
	free(src);
}
END_TEST

static long post(const char *id, const char *verb)
{
	char *path = h_fmt("/v1/sandboxes/%s/%s", id, verb);
	long st = h_http("POST", path, NULL, NULL);
	free(path);
	return st;
}

/* A paused source stays paused, a stopped one stopped; both snapshots fork with the files. */
START_TEST(paused_and_stopped)
{
	{
		char *src = create_src();
		free(h_sh(src, WRITE_FILES));
		ck_assert_int_lt(post(src, "pause"), 300);
		char *s1 = snapshot(src, NULL);
		ck_assert_str_eq(state_of(src), "Paused");
		ck_assert_int_lt(post(src, "stop"), 300);
		char *s2 = snapshot(src, "{}");
		ck_assert_str_eq(state_of(src), "Stopped");
		char *f1 = fork_of(s1), *f2 = fork_of(s2);
		expect_files(f1);
		expect_files(f2);
		ck_assert_int_eq(h_delete(f1), 204);
		ck_assert_int_eq(h_delete(f2), 204);
		ck_assert_int_eq(h_delete(src), 204);
		ck_assert_int_eq(del_snapshot(s1), 204);
		ck_assert_int_eq(del_snapshot(s2), 204);
		free(f1);
		free(f2);
		free(s1);
		free(s2);
		free(src);
	}
}
END_TEST

/* A snapshot outlives its source; GET, list (filters, pages) and DELETE; its dir goes. */
START_TEST(outlives_source_and_deletes)
{
	char *src = create_src();
	free(h_sh(src, "mkdir -p /s && echo kept > /s/k"));
	char *snap = snapshot(src, "{\"name\":\"keep\"}");
	char *other = snapshot(src, NULL);
	ck_assert_int_eq(h_delete(src), 204);
	struct h_resp r;
	char *path = h_fmt("/v1/snapshots/%s", snap);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "name"), "keep");
	ck_assert_str_eq(h_jstr(r.json, "status.state"), "Ready");
	h_resp_free(&r);
	char *q = h_fmt("/v1/snapshots?sandboxId=%s&state=Ready&pageSize=1", src);
	ck_assert_int_eq(h_http("GET", q, NULL, &r), 200);
	ck_assert_int_eq(h_jint(r.json, "pagination.totalItems"), 2);
	ck_assert_int_eq(json_array_size(h_jget(r.json, "items")), 1);
	ck_assert(json_is_true(h_jget(r.json, "pagination.hasNextPage")));
	h_resp_free(&r);
	free(q);
	ck_assert_int_eq(h_http("GET", "/v1/snapshots?state=Failed", NULL, &r), 200);
	ck_assert_int_eq(h_jint(r.json, "pagination.totalItems"), 0);
	h_resp_free(&r);
	char *fork = fork_of(snap);
	ck_assert_str_eq(h_trim(h_sh(fork, "cat /s/k")), "kept");
	ck_assert_int_eq(h_delete(fork), 204);
	char *dir = h_fmt("%s/snapshots/%s", h_state_dir(), snap);
	struct stat st;
	ck_assert_int_eq(stat(dir, &st), 0);
	ck_assert_int_eq(del_snapshot(snap), 204);
	ck_assert(stat(dir, &st) < 0 && errno == ENOENT);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "SNAPSHOT_NOT_FOUND");
	h_resp_free(&r);
	ck_assert_int_eq(del_snapshot(snap), 404);
	ck_assert_int_eq(del_snapshot(other), 204);
	free(dir);
	free(path);
	free(fork);
	free(other);
	free(snap);
	free(src);
}
END_TEST

/* Snapshots survive a celld restart (killed); what an interrupted capture or delete left
 * under a dot name is removed at start. */
START_TEST(survives_restart)
{
	char *src = create_src();
	free(h_sh(src, "mkdir -p /s && echo r > /s/r"));
	char *snap = snapshot(src, NULL);
	char *before = fork_of(snap);
	char *tmp = h_fmt("%s/snapshots/.tmp-leftover", h_state_dir());
	char *del = h_fmt("%s/snapshots/.del-leftover", h_state_dir());
	ck_assert_int_eq(mkdir(tmp, 0700), 0);
	ck_assert_int_eq(mkdir(del, 0700), 0);
	char *meta = h_fmt("%s/meta.json", tmp);
	h_write_file(meta, "{", 0600);
	free(meta);
	h_celld_kill();
	h_celld_start();
	struct stat st;
	ck_assert(stat(tmp, &st) < 0 && errno == ENOENT);
	ck_assert(stat(del, &st) < 0 && errno == ENOENT);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", "/v1/snapshots", NULL, &r), 200);
	ck_assert_int_eq(h_jint(r.json, "pagination.totalItems"), 1);
	ck_assert_str_eq(h_jstr(json_array_get(h_jget(r.json, "items"), 0), "id"), snap);
	h_resp_free(&r);
	char *fork = fork_of(snap);
	ck_assert_str_eq(h_trim(h_sh(fork, "cat /s/r")), "r");
	/* A fork made before the restart keeps its files and its snapshotId. */
	char *path = h_fmt("/v1/sandboxes/%s", before);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "snapshotId"), snap);
	h_resp_free(&r);
	ck_assert_str_eq(h_trim(h_sh(before, "cat /s/r")), "r");
	ck_assert_int_eq(h_delete(before), 204);
	ck_assert_int_eq(h_delete(fork), 204);
	ck_assert_int_eq(h_delete(src), 204);
	ck_assert_int_eq(del_snapshot(snap), 204);
	free(path);
	free(before);
	free(fork);
	free(del);
	free(tmp);
	free(snap);
	free(src);
}
END_TEST

/* A layer deeper than the walk's bound (a sandbox's own making) is refused by name where
 * it is walked (a loop disk: when a sandbox is made from it), and the refused create leaves
 * no sandbox behind; the source runs on. */
START_TEST(deep_layer_refused)
{
	char *src = create_src();
	free(h_sh(src, "mkdir -p /s && cd /s && for i in $(seq 140); do mkdir d && cd d; done"));
	int before = h_sandbox_count();
	char *path = h_fmt("/v1/sandboxes/%s/snapshots", src);
	struct h_resp r;
	long st = h_http("POST", path, NULL, &r);
	char *snap = NULL;
	if (st == 202) {
		snap = strdup(h_jstr(r.json, "id"));
		h_resp_free(&r);
		st = create_from(snap, NULL, &r);
	}
	ck_assert_msg(st >= 400 && st < 500, "HTTP %ld: %s\n%s", st, r.body, h_celld_log_tail());
	ck_assert_msg(strstr(r.body, "directories deep"), "%s", r.body);
	h_resp_free(&r);
	ck_assert_int_eq(h_sandbox_count(), before);
	ck_assert_str_eq(state_of(src), "Running");
	ck_assert_int_eq(h_sh_code(src, "test -d /s/d/d"), 0);
	if (snap)
		ck_assert_int_eq(del_snapshot(snap), 204);
	ck_assert_int_eq(h_delete(src), 204);
	free(snap);
	free(path);
	free(src);
}
END_TEST

struct snap_job {
	const char *id;
	long status;
	int done; /* atomic */
};

static void *snap_thread(void *arg)
{
	struct snap_job *job = arg;
	char *path = h_fmt("/v1/sandboxes/%s/snapshots", job->id);
	struct h_resp r;
	job->status = h_http("POST", path, NULL, &r);
	if (job->status == 202) {
		char *del = h_fmt("/v1/snapshots/%s", h_jstr(r.json, "id"));
		h_resp_free(&r);
		__atomic_store_n(&job->done, 1, __ATOMIC_RELEASE);
		h_http("DELETE", del, NULL, NULL);
		free(del);
	} else {
		h_resp_free(&r);
		__atomic_store_n(&job->done, 1, __ATOMIC_RELEASE);
	}
	free(path);
	return NULL;
}

/* A command sent to a running sandbox while it is being captured waits for the copy and
 * runs (it is not refused as busy). The copy of 400 MB takes long enough for the command
 * to arrive during it; an attempt where it did not is tried again. */
START_TEST(exec_waits_for_a_snapshot)
{
	char *src = create_src();
	free(h_sh(src, "dd if=/dev/zero of=/big bs=1M count=400 2>/dev/null; sync"));
	int during = 0;
	for (int attempt = 0; attempt < 4 && during < 1; attempt++) {
		struct snap_job job = {.id = src};
		pthread_t t;
		ck_assert_int_eq(pthread_create(&t, NULL, snap_thread, &job), 0);
		h_sleep_ms(30);
		bool busy = !__atomic_load_n(&job.done, __ATOMIC_ACQUIRE);
		int code = h_sh_code(src, "echo ok");
		pthread_join(t, NULL);
		ck_assert_int_eq(job.status, 202);
		ck_assert_msg(code == 0, "a command during a snapshot: exit %d", code);
		during += busy;
	}
	ck_assert_msg(during, "no command was sent while a snapshot ran");
	ck_assert_int_eq(h_delete(src), 204);
	free(src);
}
END_TEST

static void expect_status(const char *method, const char *path, const char *body, long want,
			  const char *code)
{
	struct h_resp r;
	long st = h_http(method, path, body, &r);
	ck_assert_msg(st == want && !strcmp(h_err_code(&r), code), "%s %s %s: %ld %s", method, path,
		      body ? body : "", st, r.body);
	h_resp_free(&r);
}

START_TEST(refusals)
{
	char *src = create_src();
	char *path = h_fmt("/v1/sandboxes/%s/snapshots", src);
	expect_status("POST", path, "{\"name\":5}", 400, "INVALID_ARGUMENT");
	expect_status("POST", path, "{\"name\":\"\"}", 400, "INVALID_ARGUMENT");
	expect_status("POST", path, "{\"other\":1}", 400, "INVALID_ARGUMENT");
	expect_status("POST", path, "[]", 400, "INVALID_ARGUMENT");
	expect_status("POST", "/v1/sandboxes/nosuchsandbox/snapshots", NULL, 404,
		      "SANDBOX_NOT_FOUND");
	expect_status("GET", "/v1/snapshots/nosuchsnapshot", NULL, 404, "SNAPSHOT_NOT_FOUND");
	expect_status("DELETE", "/v1/snapshots/nosuchsnapshot", NULL, 404, "SNAPSHOT_NOT_FOUND");
	expect_status("GET", "/v1/snapshots/Bad!Id", NULL, 400, "INVALID_ID");
	expect_status("GET", "/v1/snapshots?state=Bogus", NULL, 400, "INVALID_ARGUMENT");
	expect_status("GET", "/v1/snapshots?pageSize=0", NULL, 400, "INVALID_ARGUMENT");
	/* A bad argument of the create, as an unknown image is (the spec lists no 404 there). */
	expect_status("POST", "/v1/sandboxes", "{\"snapshotId\":\"nosuchsnapshot\"}", 400,
		      "SNAPSHOT_NOT_FOUND");
	expect_status("POST", "/v1/sandboxes", "{\"snapshotId\":7}", 400, "INVALID_ARGUMENT");
	char *snap = snapshot(src, NULL);
	char *both = h_fmt("{\"snapshotId\":\"%s\",\"image\":{\"uri\":\"busybox\"},"
			   "\"entrypoint\":[\"sleep\",\"1\"]}",
			   snap);
	expect_status("POST", "/v1/sandboxes", both, 400, "INVALID_ARGUMENT");
	expect_status("POST", "/v1/sandboxes", "{\"entrypoint\":[\"sleep\",\"1\"]}", 400,
		      "INVALID_ARGUMENT");
	/* A loop disk is the snapshot's: another size is refused by name. */
	struct h_resp r;
	ck_assert_int_eq(create_from(snap, "\"resourceLimits\":{\"disk\":\"1Gi\"}", &r), 400);
	ck_assert_ptr_nonnull(strstr(r.body, "resourceLimits.disk"));
	h_resp_free(&r);
	/* A Failed or deleted source cannot be captured; nothing is left of a refusal. */
	ck_assert_int_eq(h_delete(src), 204);
	expect_status("POST", path, NULL, 404, "SANDBOX_NOT_FOUND");
	ck_assert_int_eq(del_snapshot(snap), 204);
	ck_assert_int_eq(h_http("GET", "/v1/snapshots", NULL, &r), 200);
	ck_assert_int_eq(h_jint(r.json, "pagination.totalItems"), 0);
	h_resp_free(&r);
	free(both);
	free(snap);
	free(path);
	free(src);
}
END_TEST

/* cell snapshot / snapshot ls / snapshot rm / fork. */
START_TEST(cli)
{
	char *src = create_src();
	free(h_sh(src, "mkdir -p /s && echo cli > /s/c"));
	struct h_proc p;
	ck_assert_msg(h_cell(&p, "snapshot", src, "--name", "n1", NULL) == 0, "%s", p.err);
	char *snap = strdup(h_trim(p.out));
	h_proc_free(&p);
	ck_assert_msg(h_cell(&p, "snapshot", "ls", NULL) == 0, "%s", p.err);
	ck_assert_ptr_nonnull(strstr(p.out, snap));
	ck_assert_ptr_nonnull(strstr(p.out, "n1"));
	h_proc_free(&p);
	ck_assert_msg(h_cell(&p, "fork", src, NULL) == 0, "%s", p.err);
	char *fork = strdup(h_trim(p.out));
	h_proc_free(&p);
	h_track_sandbox(fork);
	ck_assert_str_eq(h_trim(h_sh(fork, "cat /s/c")), "cli");
	ck_assert_int_eq(h_delete(fork), 204);
	ck_assert_msg(h_cell(&p, "snapshot", "rm", snap, NULL) == 0, "%s", p.err);
	h_proc_free(&p);
	ck_assert_int_ne(h_cell(&p, "snapshot", "rm", snap, NULL), 0);
	h_proc_free(&p);
	ck_assert_int_ne(h_cell(&p, "fork", "nosuchsandbox", NULL), 0);
	h_proc_free(&p);
	/* cell fork made a snapshot of its own: it is listed, and removed here. */
	json_t *all;
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", "/v1/snapshots", NULL, &r), 200);
	all = h_jget(r.json, "items");
	ck_assert_int_eq(json_array_size(all), 1);
	char *left = strdup(h_jstr(json_array_get(all, 0), "id"));
	h_resp_free(&r);
	ck_assert_int_eq(del_snapshot(left), 204);
	ck_assert_int_eq(h_delete(src), 204);
	free(left);
	free(fork);
	free(snap);
	free(src);
}
END_TEST

static Suite *snapshot_suite(void)
{
	Suite *s = suite_create("snapshot");
	tcase_add_test(h_tcase(s, "running", 240), running);
	tcase_add_test(h_tcase(s, "paused_and_stopped", 300), paused_and_stopped);
	tcase_add_test(h_tcase(s, "outlives_source_and_deletes", 180), outlives_source_and_deletes);
	tcase_add_test(h_tcase(s, "survives_restart", 180), survives_restart);
	tcase_add_test(h_tcase(s, "refusals", 120), refusals);
	tcase_add_test(h_tcase(s, "deep_layer_refused", 120), deep_layer_refused);
	tcase_add_test(h_tcase(s, "exec_waits_for_a_snapshot", 240), exec_waits_for_a_snapshot);
	tcase_add_test(h_tcase(s, "cli", 180), cli);
	return s;
}

int main(void)
{
	return h_main(snapshot_suite());
}
