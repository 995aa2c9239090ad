/* Named volumes (a create's volumes[].pvc): celld keeps them in its state dir with their own
 * disk quota; they outlive the sandboxes that mount them, any sandbox's ids are its own on
 * them, one sandbox writes at a time, and a sandbox that shaped a volume's tree cannot make
 * a later mount reach outside it. Host paths in volumes[] stay a Unix-socket privilege unless
 * the operator names a --volume-root. Everything here goes over TCP, as a client would. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/id.h"
#include "harness.h"

/* A create with volumes (JSON text of the array) over via; the status, r filled. */
static long create_with(const char *volumes, enum h_via via, struct h_resp *r)
{
	json_error_t je;
	json_t *vols = json_loads(volumes, 0, &je);
	ck_assert_msg(vols, "%s: %s", volumes, je.text);
	json_t *extra = json_pack("{s:o}", "volumes", vols);
	long st = h_create_ex("busybox", extra, via, r);
	json_decref(extra);
	return st;
}

/* The same, which must succeed; the sandbox's id. */
static char *sandbox_with(const char *volumes)
{
	struct h_resp r;
	long st = create_with(volumes, H_TCP, &r);
	ck_assert_msg(st == 202, "create with %s: HTTP %ld %s", volumes, st, r.body);
	char *id = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	return id;
}

static char *pvc(const char *claim, const char *dest, bool ro, const char *more)
{
	return h_fmt("[{\"name\":\"v\",\"mountPath\":\"%s\",\"readOnly\":%s,\"pvc\":{\"claimName\":"
		     "\"%s\"%s%s}}]",
		     dest, ro ? "true" : "false", claim, more ? "," : "", more ? more : "");
}

static void expect_refused(const char *volumes, long want, const char *code, const char *says)
{
	struct h_resp r;
	long st = create_with(volumes, H_TCP, &r);
	if (st >= 200 && st < 300)
		h_delete(h_jstr(r.json, "id"));
	ck_assert_msg(st == want, "%s: HTTP %ld, not %ld: %s", volumes, st, want, r.body);
	ck_assert_msg(!code || !strcmp(h_err_code(&r), code), "%s: code %s, not %s", volumes,
		      h_err_code(&r), code);
	ck_assert_msg(strstr(r.body, says), "%s: the error does not say '%s': %s", volumes, says,
		      r.body);
	h_resp_free(&r);
}

/* GET /v1/volumes/{name}: its JSON (NULL on 404). */
static json_t *volume_get(const char *name)
{
	struct h_resp r;
	char *path = h_fmt("/v1/volumes/%s", name);
	long st = h_http("GET", path, NULL, &r);
	free(path);
	ck_assert_msg(st == 200 || st == 404, "GET volume %s: HTTP %ld %s", name, st, r.body);
	json_t *o = st == 200 ? json_incref(r.json) : NULL;
	h_resp_free(&r);
	return o;
}

static long volume_delete(const char *name, struct h_resp *r)
{
	char *path = h_fmt("/v1/volumes/%s", name);
	long st = h_http("DELETE", path, NULL, r);
	free(path);
	return st;
}

static bool state_has(const char *name)
{
	char *p = h_fmt("%s/volumes/%s", H.state, name);
	struct stat st;
	bool there = stat(p, &st) == 0;
	free(p);
	return there;
}

/* The files a sandbox writes, as root and as an ordinary id, are there for the next one,
 * whose uid range differs, with the same owners. */
START_TEST(outlives_its_sandboxes)
{
	char *v = pvc("keep", "/tmp", false, "\"storage\":\"64Mi\"");
	char *a = sandbox_with(v);
	struct h_exec res;
	struct h_exec_opts as_user = {.as_user = true, .uid = 1000, .gid = 1000};
	ck_assert_int_eq(h_exec(a, "echo mine > /tmp/user-file", &as_user, &res), 0);
	ck_assert_msg(res.complete, "user write: %s", res.err);
	h_exec_free(&res);
	free(h_sh(a, "echo root > /tmp/root-file; mkdir -p /tmp/dir/sub"));
	json_t *ins = h_inspect(a);
	long long base_a = h_jint(ins, "uidMap.hostStart");
	json_decref(ins);
	ck_assert_int_eq(h_delete(a), 204);
	json_t *vol = volume_get("keep");
	ck_assert_msg(vol, "the volume went with its sandbox");
	ck_assert_int_eq(h_jint(vol, "sizeBytes"), 64 << 20);
	ck_assert_int_eq(json_array_size(json_object_get(vol, "usedBy")), 0);
	json_decref(vol);

	/* A sandbox without the volume takes the freed uid range first: the next one that
	 * mounts the volume runs as other host ids than the one that wrote it. */
	char *filler = h_create("busybox", NULL);
	char *b = sandbox_with(v);
	ins = h_inspect(b);
	ck_assert_int_ne(h_jint(ins, "uidMap.hostStart"), base_a);
	json_decref(ins);
	char *out = h_sh(b, "cat /tmp/user-file /tmp/root-file; stat -c '%u:%g %n' "
			    "/tmp/user-file /tmp/root-file /tmp/dir/sub");
	ck_assert_str_eq(out, "mine\nroot\n1000:1000 /tmp/user-file\n0:0 /tmp/root-file\n"
			      "0:0 /tmp/dir/sub\n");
	free(out);
	vol = volume_get("keep");
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(vol, "usedBy"), 0)), b);
	json_decref(vol);
	free(filler);
	free(b);
	free(a);
	free(v);
}
END_TEST

/* ReadWriteOnce: a second writer is refused naming the first; readers share it and see its
 * writes, and cannot write themselves. */
START_TEST(one_writer_many_readers)
{
	char *rw = pvc("shared", "/data", false, NULL);
	char *ro = pvc("shared", "/data", true, NULL);
	char *a = sandbox_with(rw);
	free(h_sh(a, "echo from-a > /data/f"));
	expect_refused(rw, 409, "CONFLICT", a);
	char *c = sandbox_with(ro);
	char *out = h_sh(c, "cat /data/f");
	ck_assert_str_eq(out, "from-a\n");
	free(out);
	out = h_sh(c, "touch /data/g 2>&1; echo rc=$?");
	ck_assert_msg(strstr(out, "Read-only") && strstr(out, "rc=1"), "a reader wrote: %s", out);
	free(out);
	free(h_sh(a, "echo later > /data/f"));
	out = h_sh(c, "cat /data/f");
	ck_assert_str_eq(out, "later\n");
	free(out);
	/* Once the writer is gone, another may write. */
	ck_assert_int_eq(h_delete(a), 204);
	char *b = sandbox_with(rw);
	free(b);
	free(c);
	free(a);
	free(ro);
	free(rw);
}
END_TEST

/* DELETE /v1/volumes/{name}: 409 while a sandbox uses it (even paused), then 204, and
 * nothing of it is left. */
START_TEST(removed_only_when_unused)
{
	char *v = pvc("gone", "/data", false, NULL);
	char *a = sandbox_with(v);
	free(h_sh(a, "dd if=/dev/zero of=/data/blob bs=1M count=4 2>/dev/null"));
	struct h_resp r;
	char *pause = h_fmt("/v1/sandboxes/%s/pause", a);
	long st = h_http("POST", pause, NULL, &r);
	ck_assert_msg(st >= 200 && st < 300, "pause: HTTP %ld %s", st, r.body);
	h_resp_free(&r);
	ck_assert_int_eq(volume_delete("gone", &r), 409);
	ck_assert_str_eq(h_err_code(&r), "VOLUME_IN_USE");
	ck_assert_msg(strstr(r.body, a), "the refusal does not name the sandbox: %s", r.body);
	h_resp_free(&r);
	ck_assert(state_has("gone"));
	ck_assert_int_eq(h_delete(a), 204);
	ck_assert_int_eq(volume_delete("gone", &r), 204);
	h_resp_free(&r);
	ck_assert_ptr_null(volume_get("gone"));
	ck_assert(!state_has("gone"));
	ck_assert_int_eq(volume_delete("gone", &r), 404);
	ck_assert_str_eq(h_err_code(&r), "VOLUME_NOT_FOUND");
	h_resp_free(&r);
	free(pause);
	free(a);
	free(v);
}
END_TEST

/* pvc.storage is the volume's quota: a write past it fails inside, the host keeps the rest. */
START_TEST(storage_is_its_quota)
{
	char *v = pvc("small", "/data", false, "\"storage\":\"32Mi\"");
	char *a = sandbox_with(v);
	char *out = h_sh(a, "dd if=/dev/zero of=/data/big bs=1M count=64 2>&1; echo rc=$?");
	ck_assert_msg(strstr(out, "No space left") && !strstr(out, "rc=0"),
		      "a 64 MiB write into a 32 MiB volume: %s", out);
	free(out);
	out = h_sh(a, "df -k /data | tail -1 | awk '{print $2}'");
	ck_assert_msg(atol(out) <= 32 * 1024, "the volume has %s KiB", out);
	free(out);
	free(a);
	free(v);
}
END_TEST

/* A sandbox makes a subPath of its volume a symlink out (to /, to the host's view of
 * anything): a later mount of that subPath is refused, never followed; subPaths that do
 * not exist yet are made inside the volume. */
START_TEST(sub_path_never_follows_a_symlink)
{
	char *whole = pvc("tree", "/data", false, NULL);
	char *a = sandbox_with(whole);
	free(h_sh(a, "ln -s / /data/escape; mkdir /data/real; ln -s /data/real /data/inner; "
		     "echo inside > /data/real/f"));
	ck_assert_int_eq(h_delete(a), 204);
	const char *bad[] = {"escape", "inner", "real/../escape", "/real", "real/./f"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *v = h_fmt("[{\"name\":\"v\",\"mountPath\":\"/sub\",\"subPath\":\"%s\","
				"\"pvc\":{\"claimName\":\"tree\"}}]",
				bad[i]);
		struct h_resp r;
		long st = create_with(v, H_TCP, &r);
		if (st >= 200 && st < 300) {
			char *id = strdup(h_jstr(r.json, "id"));
			char *out = h_sh(id, "ls /sub");
			ck_abort_msg("subPath %s was mounted: ls shows %s", bad[i], out);
		}
		ck_assert_msg(st == 400, "subPath %s: HTTP %ld %s", bad[i], st, r.body);
		h_resp_free(&r);
		free(v);
	}
	char *v = h_fmt("[{\"name\":\"v\",\"mountPath\":\"/sub\",\"subPath\":\"real\","
			"\"pvc\":{\"claimName\":\"tree\"}},{\"name\":\"w\",\"mountPath\":\"/new\","
			"\"subPath\":\"made/here\",\"pvc\":{\"claimName\":\"tree\"}}]");
	char *b = sandbox_with(v);
	char *out = h_sh(b, "cat /sub/f; ls /sub; echo n > /new/x; stat -c %u /new");
	ck_assert_str_eq(out, "inside\nf\n0\n");
	free(out);
	ck_assert_int_eq(h_delete(b), 204);
	char *c = sandbox_with(whole);
	out = h_sh(c, "cat /data/made/here/x");
	ck_assert_str_eq(out, "n\n");
	free(out);
	free(c);
	free(b);
	free(v);
	free(a);
	free(whole);
}
END_TEST

/* What a create may ask of a named volume, and the clear 400 for the rest. */
START_TEST(bad_requests_change_nothing)
{
	const struct {
		const char *volumes, *says;
	} bad[] = {
	    {"[{\"name\":\"v\",\"mountPath\":\"/d\",\"pvc\":{\"claimName\":\"nope\","
	     "\"createIfNotExists\":false}}]",
	     "createIfNotExists"},
	    {"[{\"name\":\"v\",\"mountPath\":\"/d\",\"pvc\":{\"claimName\":\"Bad_Name\"}}]",
	     "volumes[0].pvc.claimName"},
	    {"[{\"name\":\"v\",\"mountPath\":\"/d\",\"pvc\":{\"claimName\":\"x\","
	     "\"storageClass\":\"fast\"}}]",
	     "volumes[0].pvc.storageClass"},
	    {"[{\"name\":\"v\",\"mountPath\":\"/d\",\"pvc\":{\"claimName\":\"x\","
	     "\"storage\":\"lots\"}}]",
	     "volumes[0].pvc.storage"},
	    {"[{\"name\":\"v\",\"mountPath\":\"/d\",\"pvc\":{\"claimName\":\"x\","
	     "\"accessModes\":[\"ReadWriteMany\"]}}]",
	     "--volume-shared-writers"},
	    {"[{\"name\":\"v\",\"mountPath\":\"/d\",\"pvc\":{\"claimName\":\"x\","
	     "\"accessModes\":[\"Sometimes\"]}}]",
	     "volumes[0].pvc.accessModes"},
	    {"[{\"name\":\"v\",\"mountPath\":\"/d\"}]", "exactly one of host, pvc and ossfs"},
	    {"[{\"name\":\"v\",\"mountPath\":\"/d\",\"pvc\":{\"claimName\":\"x\"},"
	     "\"host\":{\"path\":\"/tmp\"}}]",
	     "exactly one"},
	    {"[{\"name\":\"v\",\"mountPath\":\"/d\",\"ossfs\":{\"bucket\":\"b\"}}]",
	     "volumes[0].ossfs"},
	    {"[{\"name\":\"v\",\"mountPath\":\"d\",\"pvc\":{\"claimName\":\"x\"}}]",
	     "volumes[0].mountPath"},
	    {"[{\"name\":\"v\",\"mountPath\":\"/proc/x\",\"pvc\":{\"claimName\":\"x\"}}]",
	     "volumes[0].mountPath"},
	    {"[{\"name\":\"v\",\"mountPath\":\"/d\",\"subPath\":\"../up\",\"pvc\":{\"claimName\":"
	     "\"x\"}}]",
	     "volumes[0].subPath"},
	    {"[{\"name\":\"v\",\"mountPath\":\"/d\",\"pvc\":{\"claimName\":\"x\"}},"
	     "{\"name\":\"v\",\"mountPath\":\"/e\",\"pvc\":{\"claimName\":\"y\"}}]",
	     "volumes[1].name"},
	    {"[{\"name\":\"v\",\"mountPath\":\"/d\",\"pvc\":{\"claimName\":\"x\"}},"
	     "{\"name\":\"w\",\"mountPath\":\"/d\",\"pvc\":{\"claimName\":\"y\"}}]",
	     "volumes[1].mountPath"},
	    {"{\"name\":\"v\"}", "volumes must be an array"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_refused(bad[i].volumes, 400, NULL, bad[i].says);
	/* None of them made a volume. */
	const char *names[] = {"nope", "x", "y", "Bad_Name"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		json_t *vol = volume_get(names[i]);
		ck_assert_msg(!vol && !state_has(names[i]), "a refused create left volume %s",
			      names[i]);
	}
	/* ReadOnlyMany: read-only mounts only. */
	char *rox = pvc("rox", "/d", false, "\"accessModes\":[\"ReadOnlyMany\"]");
	expect_refused(rox, 400, NULL, "ReadOnlyMany");
	free(rox);
	rox = pvc("rox", "/d", true, "\"accessModes\":[\"ReadOnlyMany\"]");
	free(sandbox_with(rox));
	free(rox);
}
END_TEST

/* deleteOnSandboxTermination: a volume its create made goes with the sandbox; one that was
 * there before never does. */
START_TEST(delete_on_sandbox_termination)
{
	char *v = pvc("temp", "/d", false, "\"deleteOnSandboxTermination\":true");
	char *a = sandbox_with(v);
	ck_assert(state_has("temp"));
	ck_assert_int_eq(h_delete(a), 204);
	ck_assert_ptr_null(volume_get("temp"));
	ck_assert(!state_has("temp"));
	char *plain = pvc("kept", "/d", false, NULL);
	char *b = sandbox_with(plain);
	ck_assert_int_eq(h_delete(b), 204);
	char *flagged = pvc("kept", "/d", false, "\"deleteOnSandboxTermination\":true");
	char *c = sandbox_with(flagged);
	ck_assert_int_eq(h_delete(c), 204);
	json_t *vol = volume_get("kept");
	ck_assert_msg(vol, "a volume that existed before went with a sandbox");
	json_decref(vol);
	free(c);
	free(flagged);
	free(b);
	free(plain);
	free(a);
	free(v);
}
END_TEST

/* celld restarts while a sandbox has the volume mounted: the adopted sandbox keeps it, and a
 * new reader shares the same filesystem (a second attachment of the image would corrupt
 * it; the image is locked while attached). */
START_TEST(shared_across_a_restart)
{
	char *rw = pvc("across", "/data", false, NULL);
	char *a = sandbox_with(rw);
	free(h_sh(a, "echo before > /data/f"));
	h_celld_kill();
	h_celld_start();
	/* The list right after a start (the start read the volumes dir once already). */
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", "/v1/volumes", NULL, &r), 200);
	ck_assert_msg(strstr(r.body, "\"across\""), "a restarted celld lists no volume: %s",
		      r.body);
	h_resp_free(&r);
	free(h_sh(a, "echo after >> /data/f"));
	char *ro = pvc("across", "/data", true, NULL);
	char *b = sandbox_with(ro);
	char *out = h_sh(b, "cat /data/f");
	ck_assert_str_eq(out, "before\nafter\n");
	free(out);
	expect_refused(rw, 409, "CONFLICT", a);
	free(b);
	free(ro);
	free(a);
	free(rw);
}
END_TEST

/* volumes[].host: over TCP only below an operator's --volume-root (symlinks resolved first);
 * on the Unix socket as cell.volumes. */
START_TEST(host_paths_need_a_volume_root_over_tcp)
{
	char rnd[CELL_ID_RANDOM_LEN + 1];
	ck_assert_int_eq(cell_id_random(rnd), 0);
	char *root = h_fmt("%s/allowed-%s", H.dir, rnd);
	char *outside = h_fmt("%s/outside-%s", H.dir, rnd);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	ck_assert_int_eq(mkdir(outside, 0755), 0);
	char *sub = h_fmt("%s/sub", root);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	char *link = h_fmt("%s/link", root);
	ck_assert_int_eq(symlink(outside, link), 0);
	char *in = h_fmt("[{\"name\":\"h\",\"mountPath\":\"/h\",\"host\":{\"path\":\"%s\"}}]", sub);
	expect_refused(in, 400, NULL, "--volume-root");
	struct h_resp r;
	ck_assert_int_eq(create_with(in, H_UNIX, &r), 202);
	h_delete(h_jstr(r.json, "id"));
	h_resp_free(&r);

	const char *flags[] = {"--volume-root", root, NULL};
	h_celld_restart_with(flags);
	char *id = sandbox_with(in);
	free(h_sh(id, "ls /h"));
	free(id);
	char *via_link =
	    h_fmt("[{\"name\":\"h\",\"mountPath\":\"/h\",\"host\":{\"path\":\"%s\"}}]", link);
	expect_refused(via_link, 400, NULL, "--volume-root");
	char *out_json = h_fmt("[{\"name\":\"h\",\"mountPath\":\"/h\",\"host\":{\"path\":\"%s\"},"
			       "\"subPath\":\"../outside-%s\"}]",
			       root, rnd);
	expect_refused(out_json, 400, NULL, "volumes[0].subPath");
	free(out_json);
	free(via_link);
	free(in);
	free(link);
	free(sub);
	free(outside);
	free(root);
}
END_TEST

/* The CLI: -v NAME:DEST mounts a named volume (made on first use), cell volume ls shows it
 * with its user, cell volume rm removes it once unused. */
START_TEST(cli_volume_commands)
{
	struct h_proc p = {0};
	ck_assert_int_eq(h_cell(&p, "run", "--rm", "--image", "busybox", "-v", "cli-vol:/d", "--",
				"sh", "-c", "echo one >> /d/log", NULL),
			 0);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "create", "--image", "busybox", "-v", "cli-vol:/d:ro", NULL),
			 0);
	char *id = strdup(h_trim(p.out));
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "exec", id, "--", "cat", "/d/log", NULL), 0);
	ck_assert_str_eq(p.out, "one\n");
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "volume", "ls", NULL), 0);
	ck_assert_msg(strstr(p.out, "NAME") && strstr(p.out, "cli-vol") && strstr(p.out, id),
		      "cell volume ls: %s", p.out);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "volume", "rm", "cli-vol", NULL), 1);
	ck_assert_msg(strstr(p.err, id), "the refusal does not name the sandbox: %s", p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "rm", id, NULL), 0);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "volume", "rm", "cli-vol", NULL), 0);
	ck_assert_str_eq(p.out, "cli-vol\n");
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "--json", "volume", "ls", NULL), 0);
	ck_assert_msg(!strstr(p.out, "cli-vol"), "removed, still listed: %s", p.out);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "run", "--rm", "--image", "busybox", "-v", "Bad_Name:/d", "--",
				"true", NULL),
			 125);
	ck_assert_msg(strstr(p.err, "claimName"), "a bad name: %s", p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "run", "--rm", "--image", "busybox", "-v", "named:/d:map=owner",
				"--", "true", NULL),
			 125);
	ck_assert_msg(strstr(p.err, "map= is for host paths"), "map= on a name: %s", p.err);
	h_proc_free(&p);
	free(id);
}
END_TEST

static Suite *named_volumes_suite(void)
{
	Suite *s = suite_create("named_volumes");
	tcase_add_test(h_tcase(s, "outlives_its_sandboxes", 120), outlives_its_sandboxes);
	tcase_add_test(h_tcase(s, "one_writer_many_readers", 120), one_writer_many_readers);
	tcase_add_test(h_tcase(s, "removed_only_when_unused", 120), removed_only_when_unused);
	tcase_add_test(h_tcase(s, "storage_is_its_quota", 120), storage_is_its_quota);
	tcase_add_test(h_tcase(s, "sub_path_never_follows_a_symlink", 120),
		       sub_path_never_follows_a_symlink);
	tcase_add_test(h_tcase(s, "bad_requests_change_nothing", 120), bad_requests_change_nothing);
	tcase_add_test(h_tcase(s, "delete_on_sandbox_termination", 120),
		       delete_on_sandbox_termination);
	tcase_add_test(h_tcase(s, "shared_across_a_restart", 120), shared_across_a_restart);
	tcase_add_test(h_tcase(s, "host_paths_need_a_volume_root_over_tcp", 120),
		       host_paths_need_a_volume_root_over_tcp);
	tcase_add_test(h_tcase(s, "cli_volume_commands", 120), cli_volume_commands);
	return s;
}

int main(void)
{
	return h_main(named_volumes_suite());
}
