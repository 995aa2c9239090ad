/* Provisioning at each start of a sandbox (cell.startupScript, cell.packages, cell.skills)
 * and the skills registry (POST/GET/DELETE /v1/skills). A start again is a Failed sandbox
 * resumed on its kept disk (its init killed from the host): what ran before is recorded
 * inside the sandbox and skipped, a change runs again, and a failure, a timeout or a
 * corrupt record never fails the start but is reported in the sandbox's status. Offline:
 * package managers cannot reach a mirror, so the package step is shown failing, then a
 * stand-in apt-get put into the sandbox succeeds once and is never asked again. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "archive_gen.h"
#include "harness.h"

#define BOUNDARY "cellskillboundary7d1e4f0a9b"

/* ---- helpers ---- */

static json_t *ext(const char *k1, const char *v1, const char *k2, const char *v2)
{
	json_t *e = json_object();
	json_object_set_new(e, k1, json_string(v1));
	if (k2)
		json_object_set_new(e, k2, json_string(v2));
	return json_pack("{s:o}", "extensions", e);
}

static json_t *get_sandbox(const char *id)
{
	struct h_resp r;
	char *path = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	free(path);
	json_t *o = json_incref(r.json);
	h_resp_free(&r);
	return o;
}

/* The last provisioning's step i (inspect's provision.last.steps[i]), a new reference. */
static json_t *step(const char *id, size_t i)
{
	json_t *ins = h_inspect(id);
	json_t *s = json_array_get(h_jget(ins, "provision.last.steps"), i);
	ck_assert_msg(s, "no step %zu in %s", i, json_dumps(h_jget(ins, "provision"), 0));
	json_incref(s);
	json_decref(ins);
	return s;
}

static void expect_step(const char *id, size_t i, const char *kind, const char *status)
{
	json_t *s = step(id, i);
	ck_assert_msg(!strcmp(h_jstr(s, "step"), kind) && !strcmp(h_jstr(s, "status"), status),
		      "step %zu: want %s %s: %s", i, kind, status, json_dumps(s, 0));
	json_decref(s);
}

/* Its init killed from the host (Failed), then resumed: a cold start on its kept disk. */
static void start_again(const char *id)
{
	json_t *ins = h_inspect(id);
	pid_t pid = (pid_t)h_jint(ins, "pid");
	json_decref(ins);
	ck_assert_int_gt(pid, 1);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_str_eq(h_wait_state(id, "Failed", 30), "Failed");
	struct h_resp r;
	char *path = h_fmt("/v1/sandboxes/%s/resume", id);
	long st = h_http("POST", path, NULL, &r);
	ck_assert_msg(st / 100 == 2, "resume: HTTP %ld: %s", st, r.body);
	h_resp_free(&r);
	free(path);
	ck_assert_str_eq(h_wait_state(id, "Running", 60), "Running");
}

static int lines(const char *id, const char *file)
{
	char *cmd = h_fmt("cat %s 2>/dev/null | wc -l", file);
	char *out = h_sh(id, cmd);
	int n = atoi(out);
	free(out);
	free(cmd);
	return n;
}

/* POST /v1/skills via (headers: a tenant's key, for H_TCP_NOKEY). */
static long post_skill_as(enum h_via via, const char *const *headers, const char *name,
			  const char *version, const char *file, struct h_resp *r)
{
	FILE *f = fopen(file, "rb");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *head = h_fmt("--" BOUNDARY "\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\n"
			   "%s\r\n--" BOUNDARY "\r\nContent-Disposition: form-data; "
			   "name=\"version\"\r\n\r\n%s\r\n--" BOUNDARY "\r\nContent-Disposition: "
			   "form-data; name=\"file\"; filename=\"skill\"\r\nContent-Type: "
			   "application/octet-stream\r\n\r\n",
			   name, version);
	const char *tail = "\r\n--" BOUNDARY "--\r\n";
	size_t hl = strlen(head), tl = strlen(tail), len = hl + (size_t)size + tl;
	char *body = malloc(len);
	memcpy(body, head, hl);
	ck_assert_uint_eq(fread(body + hl, 1, (size_t)size, f), (size_t)size);
	memcpy(body + hl + size, tail, tl);
	fclose(f);
	struct h_req req = {.method = "POST",
			    .path = "/v1/skills",
			    .body = body,
			    .body_len = len,
			    .content_type = "multipart/form-data; boundary=" BOUNDARY,
			    .via = via,
			    .headers = headers};
	long st = h_request(&req, r);
	free(body);
	free(head);
	return st;
}

static long post_skill(const char *name, const char *version, const char *file, struct h_resp *r)
{
	return post_skill_as(H_TCP, NULL, name, version, file, r);
}

static char *tmpfile_path(const char *name)
{
	return h_fmt("%s/%s", H.dir, name);
}

/* A good skill: <top>/entrypoint.sh (appends to /root/skill-ran, records its directory and
 * the data file it ships), <top>/data/msg.txt. */
static char *make_skill(const char *file, const char *top)
{
	char *path = tmpfile_path(file);
	gzFile gz = gzopen(path, "wb");
	ck_assert_ptr_nonnull(gz);
	static const char ep[] = "echo ran >> /root/skill-ran\n"
				 "echo \"$CELL_SKILL_DIR $(pwd)\" > /root/skill-dir\n"
				 "cat data/msg.txt > /root/skill-msg\n";
	char *dirname = h_fmt("%s/", top), *e = h_fmt("%s/entrypoint.sh", top),
	     *dd = h_fmt("%s/data/", top), *m = h_fmt("%s/data/msg.txt", top);
	agen_tar_entry(gz, dirname, '5', NULL, 0, 0755, NULL);
	agen_tar_entry(gz, e, '0', ep, strlen(ep), 0755, NULL);
	agen_tar_entry(gz, dd, '5', NULL, 0, 0755, NULL);
	agen_tar_entry(gz, m, '0', "shipped\n", 8, 0644, NULL);
	agen_tar_end(gz);
	gzclose(gz);
	free(dirname);
	free(e);
	free(dd);
	free(m);
	return path;
}

static void delete_skill(const char *name)
{
	char *p = h_fmt("/v1/skills/%s", name);
	h_http("DELETE", p, NULL, NULL);
	free(p);
}

/* ---- startup script ---- */

START_TEST(startup_script_runs_once_per_content)
{
	json_t *extra = ext("cell.startupScript",
			    "echo run >> /workspace/count; pwd; id -u; echo to-stderr >&2",
			    "cell.sessionKey", "provision-once");
	char *id = h_create("busybox", extra);
	ck_assert_int_eq(lines(id, "/workspace/count"), 1);
	json_t *sb = get_sandbox(id);
	ck_assert_str_eq(h_jstr(sb, "status.state"), "Running");
	ck_assert_msg(!h_jget(sb, "status.reason"), "a reason after a good run: %s",
		      json_dumps(sb, 0));
	json_decref(sb);
	json_t *s = step(id, 0);
	ck_assert_str_eq(h_jstr(s, "status"), "ok");
	ck_assert_int_eq(h_jint(s, "exitCode"), 0);
	ck_assert_str_eq(h_jstr(s, "output"), "/workspace\n0\nto-stderr\n");
	json_decref(s);

	/* The same session key: the same sandbox, nothing runs. */
	struct h_resp r;
	ck_assert_int_eq(h_create_ex("busybox", extra, H_UNIX, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "id"), id);
	h_resp_free(&r);
	ck_assert_int_eq(lines(id, "/workspace/count"), 1);

	/* Started again on its disk: unchanged, skipped. */
	start_again(id);
	ck_assert_int_eq(lines(id, "/workspace/count"), 1);
	expect_step(id, 0, "startup", "skipped");

	/* The record inside says another script ran: this one runs again. */
	char *o = h_sh(id, "sed -i 's/\"startup\":\"[0-9a-f]*\"/\"startup\":\"00\"/' "
			   "/root/.cell/provision.json && cat /root/.cell/provision.json");
	ck_assert_msg(strstr(o, "\"startup\":\"00\""), "state file: %s", o);
	free(o);
	start_again(id);
	ck_assert_int_eq(lines(id, "/workspace/count"), 2);
	expect_step(id, 0, "startup", "ok");

	/* A corrupt record counts as empty: it runs again, the start does not fail. */
	free(h_sh(id, "echo '{corrupt' > /root/.cell/provision.json"));
	start_again(id);
	ck_assert_int_eq(lines(id, "/workspace/count"), 3);
	json_t *ins = h_inspect(id);
	ck_assert_msg(strstr(h_jstr(ins, "provision.last.note"), "corrupt"), "no note: %s",
		      json_dumps(h_jget(ins, "provision"), 0));
	ck_assert_int_eq(h_jint(ins, "provision.startupScript.size"),
			 (long long)strlen("echo run >> /workspace/count; pwd; id -u; echo "
					   "to-stderr >&2"));
	json_decref(ins);
	/* ... and is whole again afterwards. */
	o = h_sh(id, "cat /root/.cell/provision.json");
	ck_assert_msg(strstr(o, "\"startup\":\""), "state file not rewritten: %s", o);
	free(o);
	json_decref(extra);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
}
END_TEST

/* The session's app edited its startup script: the next create-or-resume runs the new one
 * before it answers, once; whether the sandbox was running, paused or stopped. */
START_TEST(a_changed_script_runs_on_create_or_resume)
{
	json_t *a = ext("cell.startupScript", "echo a >> /workspace/ran", "cell.sessionKey",
			"provision-edit");
	char *id = h_create("busybox", a);
	ck_assert_int_eq(lines(id, "/workspace/ran"), 1);
	static const char *const before[] = {"", "pause", "stop"};
	for (int i = 0; i < 3; i++) {
		if (before[i][0]) {
			char *path = h_fmt("/v1/sandboxes/%s/%s", id, before[i]);
			ck_assert_int_eq(h_http("POST", path, NULL, NULL), 202);
			free(path);
		}
		char *script = h_fmt("echo b%d >> /workspace/ran", i);
		json_t *b = ext("cell.startupScript", script, "cell.sessionKey", "provision-edit");
		struct h_resp r;
		ck_assert_int_eq(h_create_ex("busybox", b, H_UNIX, &r), 200);
		ck_assert_str_eq(h_jstr(r.json, "id"), id);
		ck_assert_str_eq(h_jstr(r.json, "status.state"), "Running");
		h_resp_free(&r);
		ck_assert_int_eq(lines(id, "/workspace/ran"), 2 + i);
		/* The same again: skipped. */
		ck_assert_int_eq(h_create_ex("busybox", b, H_UNIX, &r), 200);
		h_resp_free(&r);
		ck_assert_int_eq(lines(id, "/workspace/ran"), 2 + i);
		json_decref(b);
		free(script);
	}
	char *out = h_sh(id, "cat /workspace/ran");
	ck_assert_str_eq(out, "a\nb0\nb1\nb2\n");
	free(out);
	/* Each run was told as a "provision" event as it ended: four, one a start or change. */
	char *path = h_fmt("/v1/sandboxes/%s/events?follow=false", id);
	struct h_resp ev;
	ck_assert_int_eq(h_http("GET", path, NULL, &ev), 200);
	int told = 0;
	for (const char *at = ev.body;
	     at && (at = strstr(at, "\"step\":\"startup\",\"status\":\"ok\"")); at++)
		told++;
	ck_assert_msg(told == 4, "%d provision events of the startup script in: %.2000s", told,
		      ev.body ? ev.body : "");
	h_resp_free(&ev);
	free(path);
	json_decref(a);
	free(id);
}
END_TEST

START_TEST(failures_reported_without_failing_the_create)
{
	json_t *extra = ext("cell.startupScript", "echo before; exit 3", NULL, NULL);
	char *id = h_create("busybox", extra);
	json_decref(extra);
	json_t *sb = get_sandbox(id);
	ck_assert_str_eq(h_jstr(sb, "status.state"), "Running");
	ck_assert_str_eq(h_jstr(sb, "status.reason"), "StartupScriptFailed");
	ck_assert_str_eq(h_jstr(sb, "status.message"), "startup script exited with 3");
	json_decref(sb);
	json_t *s = step(id, 0);
	ck_assert_str_eq(h_jstr(s, "status"), "failed");
	ck_assert_int_eq(h_jint(s, "exitCode"), 3);
	ck_assert_str_eq(h_jstr(s, "output"), "before\n");
	json_decref(s);
	/* A failed script is not recorded: the next start tries it again. */
	char *o = h_sh(id, "cat /root/.cell/provision.json 2>/dev/null; true");
	ck_assert_msg(!strstr(o, "startup"), "a failure recorded: %s", o);
	free(o);
	/* The outcome is in state.json: a restarted celld still reports it. */
	h_celld_kill();
	h_celld_start();
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	sb = get_sandbox(id);
	ck_assert_str_eq(h_jstr(sb, "status.reason"), "StartupScriptFailed");
	json_decref(sb);
	json_t *ins = h_inspect(id);
	ck_assert_int_eq(h_jint(json_array_get(h_jget(ins, "provision.last.steps"), 0), "exitCode"),
			 3);
	json_decref(ins);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);

	/* Over its timeout: killed with its process group, 8 KiB of output kept. */
	extra = ext("cell.startupScript",
		    "i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done; sleep 300 & "
		    "sleep 200",
		    "cell.startupTimeout", "1");
	int64_t t0 = time(NULL);
	id = h_create("busybox", extra);
	json_decref(extra);
	int64_t took = time(NULL) - t0;
	ck_assert_msg(took < 20, "the create took %lld s with a 1 s startup timeout",
		      (long long)took);
	sb = get_sandbox(id);
	ck_assert_str_eq(h_jstr(sb, "status.state"), "Running");
	ck_assert_str_eq(h_jstr(sb, "status.reason"), "StartupScriptFailed");
	ck_assert_str_eq(h_jstr(sb, "status.message"), "startup script timed out");
	json_decref(sb);
	s = step(id, 0);
	ck_assert_str_eq(h_jstr(s, "status"), "timeout");
	ck_assert_str_eq(h_jstr(s, "exitCode"), "timeout");
	ck_assert_uint_eq(strlen(h_jstr(s, "output")), 8192);
	ck_assert(json_is_true(h_jget(s, "outputTruncated")));
	ck_assert_msg(strstr(h_jstr(s, "output"), "line-2999\n"), "the tail is not kept");
	json_decref(s);
	o = h_sh(id, "pidof sleep; true");
	ck_assert_msg(!strcmp(h_trim(o), ""), "the script's sleeps survived: %s", o);
	free(o);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
}
END_TEST

static void refused(json_t *extra, const char *code, const char *needle)
{
	struct h_resp r;
	long st = h_create_ex("busybox", extra, H_UNIX, &r);
	ck_assert_msg(st == 400, "HTTP %ld (want 400 %s): %s", st, needle, r.body);
	ck_assert_str_eq(h_err_code(&r), code);
	ck_assert_msg(strstr(h_jstr(r.json, "message"), needle), "'%s' not in %s", needle, r.body);
	h_resp_free(&r);
	json_decref(extra);
}

START_TEST(bad_extensions_refused)
{
	refused(ext("cell.startupTimeout", "soon", NULL, NULL), "INVALID_ARGUMENT",
		"cell.startupTimeout");
	char *big = malloc(17 * 1024);
	memset(big, '#', 17 * 1024 - 1);
	big[17 * 1024 - 1] = '\0';
	refused(ext("cell.startupScript", big, NULL, NULL), "INVALID_ARGUMENT",
		"cell.startupScript");
	free(big);
	refused(ext("cell.packages", "{\"apt\":[\"curl;reboot\"]}", NULL, NULL), "INVALID_ARGUMENT",
		"cell.packages.apt[0]");
	refused(ext("cell.packages", "{\"apt\":[\"$(id)\"]}", NULL, NULL), "INVALID_ARGUMENT",
		"cell.packages.apt[0]");
	refused(ext("cell.packages", "{\"pip\":[\"ok\", \"--index-url=x\"]}", NULL, NULL),
		"INVALID_ARGUMENT", "cell.packages.pip[1]");
	refused(ext("cell.packages", "{\"brew\":[\"x\"]}", NULL, NULL), "INVALID_ARGUMENT",
		"cell.packages.brew");
	refused(ext("cell.packages", "apt install x", NULL, NULL), "INVALID_ARGUMENT",
		"cell.packages");
	refused(ext("cell.skills", "nosuch@1.0", NULL, NULL), "SKILL_NOT_FOUND", "nosuch@1.0");
	refused(ext("cell.skills", "../x@1", NULL, NULL), "INVALID_ARGUMENT", "cell.skills");
	refused(ext("cell.skills", "noversion", NULL, NULL), "INVALID_ARGUMENT", "cell.skills");
	/* A clamped timeout is not an error. */
	char *id = h_create("busybox", ext("cell.startupTimeout", "100000", NULL, NULL));
	json_t *ins = h_inspect(id);
	ck_assert_int_eq(h_jint(ins, "provision.startupTimeout"), 600);
	json_decref(ins);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
}
END_TEST

/* ---- packages ---- */

START_TEST(packages_failure_reported_then_deduplicated)
{
	json_t *extra = ext("cell.packages", "{\"apt\":[\"bash\"]}", NULL, NULL);
	char *id = h_create("busybox", extra);
	json_decref(extra);
	json_t *sb = get_sandbox(id);
	ck_assert_str_eq(h_jstr(sb, "status.state"), "Running");
	ck_assert_str_eq(h_jstr(sb, "status.reason"), "PackagesFailed");
	json_decref(sb);
	json_t *s = step(id, 0);
	ck_assert_str_eq(h_jstr(s, "status"), "failed");
	ck_assert_int_eq(h_jint(s, "exitCode"), 127);
	ck_assert_msg(strstr(h_jstr(s, "output"), "apt-get"), "output: %s", h_jstr(s, "output"));
	json_decref(s);

	/* A stand-in apt-get (offline: no mirror): the failure was not recorded, so the next
	 * start tries again, succeeds, and records it; the one after asks nothing. */
	static const char fake[] = "#!/bin/sh\necho \"$@\" >> /root/apt-calls\n";
	struct h_resp r;
	ck_assert_int_eq(h_upload(id, "/usr/local/bin/apt-get", fake, strlen(fake), 0755, &r), 200);
	h_resp_free(&r);
	start_again(id);
	expect_step(id, 0, "packages", "ok");
	char *o = h_sh(id, "cat /root/apt-calls");
	ck_assert_str_eq(o, "install -y -q bash\n");
	free(o);
	sb = get_sandbox(id);
	ck_assert_msg(!h_jget(sb, "status.reason"), "%s", json_dumps(sb, 0));
	json_decref(sb);
	start_again(id);
	expect_step(id, 0, "packages", "skipped");
	ck_assert_int_eq(lines(id, "/root/apt-calls"), 1);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
}
END_TEST

/* ---- skills ---- */

START_TEST(skills_registry_api)
{
	char *good = make_skill("good.tar.gz", "tool");
	struct h_resp r;
	ck_assert_int_eq(post_skill("tool", "1.0", good, &r), 201);
	ck_assert_str_eq(h_jstr(r.json, "name"), "tool");
	ck_assert_str_eq(h_jstr(r.json, "version"), "1.0");
	ck_assert_uint_eq(strlen(h_jstr(r.json, "sha256")), 64);
	ck_assert_str_eq(h_jstr(r.json, "format"), "tar.gz");
	h_resp_free(&r);
	/* Immutable. */
	ck_assert_int_eq(post_skill("tool", "1.0", good, &r), 409);
	ck_assert_str_eq(h_err_code(&r), "SKILL_EXISTS");
	h_resp_free(&r);
	/* A zip as version 2. */
	char *zip = tmpfile_path("good.zip");
	struct agen_zip z = {.f = fopen(zip, "wb")};
	agen_zip_entry(&z, "entrypoint.sh", "true\n", 5, S_IFREG | 0644, true, 0);
	agen_zip_finish(&z);
	ck_assert_int_eq(post_skill("tool", "2", zip, &r), 201);
	ck_assert_str_eq(h_jstr(r.json, "format"), "zip");
	h_resp_free(&r);

	ck_assert_int_eq(h_http("GET", "/v1/skills", NULL, &r), 200);
	json_t *items = json_object_get(r.json, "items");
	ck_assert_uint_eq(json_array_size(items), 2);
	ck_assert_str_eq(h_jstr(json_array_get(items, 0), "version"), "1.0");
	ck_assert_str_eq(h_jstr(json_array_get(items, 1), "version"), "2");
	ck_assert_str_ne(h_jstr(json_array_get(items, 1), "createdAt"), "");
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", "/v1/skills/tool", NULL, &r), 200);
	ck_assert_uint_eq(json_array_size(json_object_get(r.json, "versions")), 2);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", "/v1/skills/nosuch", NULL, &r), 404);
	h_resp_free(&r);

	/* Hostile archives and names are refused, naming the entry or field. */
	char *evil = tmpfile_path("evil.tar.gz");
	gzFile gz = gzopen(evil, "wb");
	agen_tar_entry(gz, "entrypoint.sh", '0', "true\n", 5, 0755, NULL);
	agen_tar_entry(gz, "etc", '2', NULL, 0, 0777, "/etc");
	agen_tar_end(gz);
	gzclose(gz);
	ck_assert_int_eq(post_skill("evil", "1", evil, &r), 400);
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "'etc': a symbolic link"), "%s", r.body);
	h_resp_free(&r);
	gz = gzopen(evil, "wb");
	agen_tar_entry(gz, "entrypoint.sh", '0', "true\n", 5, 0755, NULL);
	agen_tar_entry(gz, "../../root/.ssh/authorized_keys", '0', "k", 1, 0644, NULL);
	agen_tar_end(gz);
	gzclose(gz);
	ck_assert_int_eq(post_skill("evil", "1", evil, &r), 400);
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "'..'"), "%s", r.body);
	h_resp_free(&r);
	ck_assert_int_eq(post_skill(".hidden", "1", good, &r), 400);
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "name"), "%s", r.body);
	h_resp_free(&r);
	ck_assert_int_eq(post_skill("tool", "a/b", good, &r), 400);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", "/v1/skills/evil", NULL, &r), 404);
	h_resp_free(&r);
	/* Over 64 MiB: 413, nothing kept. */
	char *huge = tmpfile_path("huge.tar.gz");
	FILE *hf = fopen(huge, "wb");
	ck_assert_ptr_nonnull(hf);
	ck_assert_int_eq(ftruncate(fileno(hf), (64 << 20) + 1), 0);
	fclose(hf);
	ck_assert_int_eq(post_skill("huge", "1", huge, &r), 413);
	h_resp_free(&r);
	unlink(huge);
	free(huge);
	/* Nothing of the refused uploads is left in the registry; files are root-only. */
	char *reg = h_fmt("%s/skills", H.state);
	struct stat st;
	ck_assert_int_eq(stat(reg, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	char *cmd = h_fmt("ls -A %s | grep -v -e '^tool$' -e '^.pins$' | wc -l", reg);
	FILE *p = popen(cmd, "r");
	char buf[64] = "";
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), p));
	pclose(p);
	ck_assert_int_eq(atoi(buf), 0);
	free(cmd);
	char *arch = h_fmt("%s/tool/1.0/archive", reg);
	ck_assert_int_eq(stat(arch, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	free(arch);

	ck_assert_int_eq(h_http("DELETE", "/v1/skills/tool/1.0", NULL, &r), 204);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("DELETE", "/v1/skills/tool/1.0", NULL, &r), 404);
	ck_assert_str_eq(h_err_code(&r), "SKILL_NOT_FOUND");
	h_resp_free(&r);
	ck_assert_int_eq(h_http("DELETE", "/v1/skills/tool", NULL, &r), 204);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("GET", "/v1/skills", NULL, &r), 200);
	ck_assert_uint_eq(json_array_size(json_object_get(r.json, "items")), 0);
	h_resp_free(&r);

	/* What a celld killed mid-upload or mid-registration left is removed by the next. */
	h_celld_kill();
	char *up = h_fmt("%s/upload-AbC123", reg), *half = h_fmt("%s/tool/.tmp-9-abc", reg);
	char *tooldir = h_fmt("%s/tool", reg);
	h_write_file(up, "partial", 0600);
	ck_assert_int_eq(mkdir(tooldir, 0700), 0);
	ck_assert_int_eq(mkdir(half, 0700), 0);
	h_celld_start();
	ck_assert_int_eq(h_http("GET", "/v1/skills", NULL, &r), 200);
	ck_assert_uint_eq(json_array_size(json_object_get(r.json, "items")), 0);
	h_resp_free(&r);
	ck_assert_msg(access(up, F_OK) != 0 && access(half, F_OK) != 0, "leftovers kept");
	free(up);
	free(half);
	free(tooldir);
	free(reg);
	free(evil);
	free(zip);
	free(good);
}
END_TEST

START_TEST(skill_installed_once_per_version)
{
	char *good = make_skill("skill.tar.gz", "my-skill");
	struct h_resp r;
	ck_assert_int_eq(post_skill("my-skill", "0.1", good, &r), 201);
	h_resp_free(&r);
	json_t *extra =
	    ext("cell.skills", "my-skill@0.1", "cell.startupScript", "echo script >> /root/order");
	char *id = h_create("busybox", extra);
	json_decref(extra);
	const char *vdir = "/root/.cell/skills/my-skill/0.1";
	json_t *sb = get_sandbox(id);
	ck_assert_msg(!h_jget(sb, "status.reason"), "%s", json_dumps(sb, 0));
	json_decref(sb);
	expect_step(id, 0, "startup", "ok");
	expect_step(id, 1, "skill", "ok");
	ck_assert_int_eq(lines(id, "/root/skill-ran"), 1);
	char *o = h_sh(id, "cat /root/skill-dir /root/skill-msg");
	char *want = h_fmt("%s %s\nshipped\n", vdir, vdir);
	ck_assert_str_eq(o, want);
	free(want);
	free(o);
	o = h_sh(id, "ls -A /root/.cell/skills/my-skill; ls -A /root/.cell/skills/my-skill/0.1");
	ck_assert_str_eq(o, "0.1\ndata\nentrypoint.sh\n");
	free(o);

	/* Started again: installed, not run again. */
	start_again(id);
	expect_step(id, 1, "skill", "skipped");
	ck_assert_int_eq(lines(id, "/root/skill-ran"), 1);

	/* Without its record and its directory, with a leftover of an extraction cut short:
	 * the leftover goes, the skill is extracted and run again. */
	free(h_sh(id, "rm -rf /root/.cell/provision.json /root/.cell/skills/my-skill/0.1 && "
		      "mkdir -p /root/.cell/skills/my-skill/.tmp-0.1-old/partial"));
	start_again(id);
	expect_step(id, 1, "skill", "ok");
	ck_assert_int_eq(lines(id, "/root/skill-ran"), 2);
	o = h_sh(id, "ls -A /root/.cell/skills/my-skill");
	ck_assert_str_eq(o, "0.1\n");
	free(o);

	/* A failing entrypoint is reported, not fatal. */
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
	char *bad = tmpfile_path("bad.tar.gz");
	gzFile gz = gzopen(bad, "wb");
	agen_tar_entry(gz, "entrypoint.sh", '0', "echo nope; exit 7\n", 18, 0644, NULL);
	agen_tar_end(gz);
	gzclose(gz);
	ck_assert_int_eq(post_skill("bad", "1", bad, &r), 201);
	h_resp_free(&r);
	id = h_create("busybox", ext("cell.skills", "bad@1", NULL, NULL));
	sb = get_sandbox(id);
	ck_assert_str_eq(h_jstr(sb, "status.state"), "Running");
	ck_assert_str_eq(h_jstr(sb, "status.reason"), "SkillFailed");
	ck_assert_str_eq(h_jstr(sb, "status.message"), "skill bad@1's entrypoint exited with 7");
	json_decref(sb);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
	delete_skill("bad");
	delete_skill("my-skill");
	free(bad);
	free(good);
}
END_TEST

/* A skill larger than the sandbox's disk quota: that skill fails cleanly (reported, its
 * temporary directory gone), the create does not. */
START_TEST(skill_over_the_disk_quota_fails_cleanly)
{
	char *path = tmpfile_path("big.tar.gz");
	gzFile gz = gzopen(path, "wb1");
	ck_assert_ptr_nonnull(gz);
	agen_tar_entry(gz, "entrypoint.sh", '0', "echo ran > /root/big-ran\n", 24, 0644, NULL);
	size_t n = 48u << 20;
	char *rnd = malloc(n);
	FILE *u = fopen("/dev/urandom", "rb");
	ck_assert_uint_eq(fread(rnd, 1, n, u), n);
	fclose(u);
	agen_tar_entry(gz, "blob", '0', rnd, n, 0644, NULL);
	agen_tar_end(gz);
	gzclose(gz);
	free(rnd);
	struct h_resp r;
	ck_assert_int_eq(post_skill("big", "1", path, &r), 201);
	h_resp_free(&r);
	json_t *extra = json_pack("{s:{s:s}, s:{s:s}}", "resourceLimits", "disk", "32Mi",
				  "extensions", "cell.skills", "big@1");
	char *id = h_create("busybox", extra);
	json_decref(extra);
	json_t *sb = get_sandbox(id);
	ck_assert_str_eq(h_jstr(sb, "status.state"), "Running");
	ck_assert_str_eq(h_jstr(sb, "status.reason"), "SkillFailed");
	ck_assert_msg(strstr(h_jstr(sb, "status.message"), "extraction failed"), "%s",
		      json_dumps(sb, 0));
	json_decref(sb);
	expect_step(id, 0, "skill", "failed");
	char *o = h_sh(id, "ls -A /root/.cell/skills/big; test ! -e /root/big-ran && echo not-run");
	ck_assert_str_eq(o, "not-run\n");
	free(o);
	/* The space is free again: the sandbox goes on. */
	o = h_sh(id, "dd if=/dev/zero of=/root/f bs=1M count=8 2>/dev/null && echo wrote");
	ck_assert_str_eq(o, "wrote\n");
	free(o);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
	delete_skill("big");
	unlink(path);
	free(path);
}
END_TEST

/* The CLI: cell skill add/ls/rm, cell run --startup-script/--skill. */
START_TEST(cli_skill_and_create_options)
{
	char *good = make_skill("cli.tar.gz", "cli-skill");
	struct h_proc p;
	ck_assert_int_eq(h_cell(&p, "skill", "add", "cli-skill", "3.1", good, NULL), 0);
	ck_assert_msg(!strncmp(p.out, "cli-skill@3.1 ", 14), "%s", p.out);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "skill", "add", "cli-skill", "3.1", good, NULL), 1);
	ck_assert_msg(strstr(p.err, "already registered"), "%s", p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "skill", "ls", NULL), 0);
	ck_assert_msg(strstr(p.out, "cli-skill") && strstr(p.out, "3.1"), "%s", p.out);
	h_proc_free(&p);

	char *script = tmpfile_path("startup.sh");
	h_write_file(script, "echo from-script > /root/from-script\n", 0644);
	ck_assert_int_eq(h_cell(&p, "run", "--rm", "--image", "busybox", "--startup-script", script,
				"--startup-timeout", "5", "--skill", "cli-skill@3.1", "--", "cat",
				"/root/from-script", "/root/skill-msg", NULL),
			 0);
	ck_assert_str_eq(p.out, "from-script\nshipped\n");
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "create", "--image", "busybox", "--skill", "nosuch@1", NULL),
			 1);
	ck_assert_msg(strstr(p.err, "nosuch@1"), "%s", p.err);
	h_proc_free(&p);

	ck_assert_int_eq(h_cell(&p, "skill", "rm", "cli-skill@3.1", NULL), 0);
	h_proc_free(&p);
	ck_assert_int_ne(h_cell(&p, "skill", "rm", "cli-skill", NULL), 0);
	h_proc_free(&p);
	ck_assert_int_eq(h_cell(&p, "skill", "--help", NULL), 0);
	h_proc_free(&p);
	free(script);
	free(good);
}
END_TEST

/* ---- who owns a skill, and what a version's content is for good ---- */

/* A GET of path as the default key (H_TCP). */
static long get_as_key(const char *path, struct h_resp *r)
{
	struct h_req req = {.method = "GET", .path = path, .via = H_TCP};
	return h_request(&req, r);
}

static long delete_as_key(const char *path, struct h_resp *r)
{
	struct h_req req = {.method = "DELETE", .path = path, .via = H_TCP};
	return h_request(&req, r);
}

static char *file_sha(const char *file)
{
	char *cmd = h_fmt("sha256sum %s", file);
	FILE *p = popen(cmd, "r");
	char buf[128] = "";
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), p));
	pclose(p);
	free(cmd);
	buf[64] = '\0';
	return strdup(buf);
}

START_TEST(a_skill_version_is_pinned_for_good)
{
	char *one = make_skill("pin-one.tar.gz", "pinned"),
	     *two = make_skill("pin-two.tar.gz", "x");
	char *sha1 = file_sha(one), *sha2 = file_sha(two);
	ck_assert_str_ne(sha1, sha2);
	struct h_resp r;
	ck_assert_int_eq(post_skill("pinned", "1", one, &r), 201);
	ck_assert_str_eq(h_jstr(r.json, "sha256"), sha1);
	h_resp_free(&r);
	/* Deleted, its name@version still means those bytes: other bytes are refused, naming
	 * the digest to the one who may use it. */
	ck_assert_int_eq(h_http("DELETE", "/v1/skills/pinned", NULL, &r), 204);
	h_resp_free(&r);
	long st = post_skill("pinned", "1", two, &r);
	ck_assert_msg(st == 409, "other bytes after a delete: HTTP %ld %s", st, r.body);
	ck_assert_str_eq(h_err_code(&r), "SKILL_VERSION_PINNED");
	ck_assert_msg(strstr(r.body, sha1), "%s", r.body);
	h_resp_free(&r);
	char *pin = h_fmt("%s/skills/.pins/pinned@1", H.state);
	json_t *pj = json_load_file(pin, 0, NULL);
	ck_assert_msg(pj, "no pin %s", pin);
	ck_assert_str_eq(h_jstr(pj, "sha256"), sha1);
	ck_assert_str_ne(h_jstr(pj, "pinnedAt"), "");
	json_decref(pj);
	/* The same after a restart; a pin half written by a killed celld goes. */
	h_celld_kill();
	char *half = h_fmt("%s/skills/.pins/.tmp-AbC123", H.state);
	h_write_file(half, "{", 0600);
	h_celld_start();
	ck_assert_int_eq(post_skill("pinned", "1", two, &r), 409);
	ck_assert_str_eq(h_err_code(&r), "SKILL_VERSION_PINNED");
	h_resp_free(&r);
	ck_assert_msg(access(half, F_OK) != 0, "%s kept", half);
	/* The same bytes are that version again. */
	ck_assert_int_eq(post_skill("pinned", "1", one, &r), 201);
	ck_assert_str_eq(h_jstr(r.json, "owner"), "default");
	h_resp_free(&r);
	/* A version registered before pins gets its pin when it is deleted. */
	ck_assert_int_eq(post_skill("pinned", "0", two, &r), 201);
	h_resp_free(&r);
	char *old = h_fmt("%s/skills/.pins/pinned@0", H.state);
	ck_assert_int_eq(unlink(old), 0);
	ck_assert_int_eq(h_http("DELETE", "/v1/skills/pinned/0", NULL, &r), 204);
	h_resp_free(&r);
	pj = json_load_file(old, 0, NULL);
	ck_assert_msg(pj, "no pin %s after the delete", old);
	ck_assert_str_eq(h_jstr(pj, "sha256"), sha2);
	json_decref(pj);
	ck_assert_int_eq(post_skill("pinned", "0", one, &r), 409);
	ck_assert_str_eq(h_err_code(&r), "SKILL_VERSION_PINNED");
	h_resp_free(&r);
	/* An archive changed on disk is never installed: the sandbox records the digest. */
	char *arch = h_fmt("%s/skills/pinned/1/archive", H.state);
	char *cp = h_fmt("cp %s %s", two, arch);
	ck_assert_int_eq(system(cp), 0);
	char *id = h_create("busybox", ext("cell.skills", "pinned@1", NULL, NULL));
	json_t *ins = h_inspect(id);
	ck_assert_str_eq(h_jstr(json_array_get(h_jget(ins, "provision.skills"), 0), "sha256"),
			 sha1);
	json_decref(ins);
	json_t *s = step(id, 0);
	ck_assert_str_eq(h_jstr(s, "status"), "failed");
	ck_assert_msg(strstr(h_jstr(s, "error"), sha1) && strstr(h_jstr(s, "error"), sha2), "%s",
		      json_dumps(s, 0));
	json_decref(s);
	char *o = h_sh(id, "ls /root/.cell/skills/pinned 2>&1; test -e /root/skill-ran || echo no");
	ck_assert_msg(strstr(o, "no") && !strstr(o, "1\n"), "%s", o);
	free(o);
	ck_assert_int_eq(h_delete(id), 204);
	delete_skill("pinned");
	free(id);
	free(cp);
	free(arch);
	free(old);
	free(half);
	free(pin);
	free(sha1);
	free(sha2);
	free(one);
	free(two);
}
END_TEST

/* A create as a tenant naming skills; its status (the id tracked when it made one). */
static long create_with_skills(const char *const *headers, const char *skills, char **id,
			       struct h_resp *r)
{
	char *body = h_fmt(
	    "{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.skills\":\"%s\"}}", skills);
	long st = h_as(headers, "POST", "/v1/sandboxes", body, r);
	free(body);
	*id = NULL;
	if (st / 100 == 2) {
		*id = strdup(h_jstr(r->json, "id"));
		h_track_sandbox(*id);
	}
	return st;
}

static void expect_answer(long got, long want, struct h_resp *r, const char *code, const char *what)
{
	ck_assert_msg(got == want, "%s: HTTP %ld (want %ld): %s", what, got, want, r->body);
	if (code)
		ck_assert_msg(!strcmp(h_err_code(r), code), "%s: %s", what, r->body);
	h_resp_free(r);
}

START_TEST(skills_are_each_tenants_own)
{
	h_two_tenants();
	char *op = make_skill("own-op.tar.gz", "catalogue"),
	     *al = make_skill("own-al.tar.gz", "al"), *bo = make_skill("own-bo.tar.gz", "bo");
	struct h_resp r;
	ck_assert_int_eq(post_skill_as(H_UNIX, NULL, "catalogue", "1", op, &r), 201);
	h_resp_free(&r);
	ck_assert_int_eq(post_skill_as(H_TCP_NOKEY, h_alice, "alices", "1", al, &r), 201);
	h_resp_free(&r);
	/* bob neither sees, lists, gets, deletes, uses nor adds to alice's */
	expect_answer(h_as(h_bob, "GET", "/v1/skills/alices", NULL, &r), 404, &r, "SKILL_NOT_FOUND",
		      "bob gets alice's");
	ck_assert(!h_listed(h_bob, "/v1/skills", "alices"));
	ck_assert(h_listed(h_alice, "/v1/skills", "alices"));
	ck_assert(h_listed(NULL, "/v1/skills", "alices"));
	ck_assert_int_eq(h_as(h_alice, "GET", "/v1/skills/alices", NULL, &r), 200);
	ck_assert_str_eq(h_jstr(json_array_get(json_object_get(r.json, "versions"), 0), "owner"),
			 "alice");
	h_resp_free(&r);
	expect_answer(h_as(h_bob, "DELETE", "/v1/skills/alices/1", NULL, &r), 404, &r,
		      "SKILL_NOT_FOUND", "bob deletes alice's version");
	expect_answer(h_as(h_bob, "DELETE", "/v1/skills/alices", NULL, &r), 404, &r,
		      "SKILL_NOT_FOUND", "bob deletes alice's");
	long st = post_skill_as(H_TCP_NOKEY, h_bob, "alices", "2", bo, &r);
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "name"), "%s", r.body);
	expect_answer(st, 409, &r, "SKILL_NAME_TAKEN", "bob adds to alice's");
	char *id = NULL;
	expect_answer(create_with_skills(h_bob, "alices@1", &id, &r), 400, &r, "SKILL_NOT_FOUND",
		      "bob uses alice's");
	ck_assert_ptr_null(id);
	/* neither key deletes or replaces the operator's; both see it */
	const char *const *keys[] = {h_alice, h_bob};
	for (size_t i = 0; i < 2; i++) {
		expect_answer(h_as(keys[i], "DELETE", "/v1/skills/catalogue", NULL, &r), 403, &r,
			      "SKILL_SHARED", "a key deletes the operator's");
		expect_answer(h_as(keys[i], "DELETE", "/v1/skills/catalogue/1", NULL, &r), 403, &r,
			      "SKILL_SHARED", "a key deletes the operator's version");
		expect_answer(post_skill_as(H_TCP_NOKEY, keys[i], "catalogue", "2", bo, &r), 409,
			      &r, "SKILL_NAME_TAKEN", "a key adds to the operator's");
		ck_assert_int_eq(h_as(keys[i], "GET", "/v1/skills/catalogue", NULL, &r), 200);
		ck_assert_str_eq(
		    h_jstr(json_array_get(json_object_get(r.json, "versions"), 0), "owner"),
		    "operator");
		h_resp_free(&r);
		ck_assert(h_listed(keys[i], "/v1/skills", "catalogue"));
	}
	/* both use it, alice her own with it */
	char *a = NULL, *b = NULL;
	st = create_with_skills(h_alice, "alices@1,catalogue@1", &a, &r);
	ck_assert_msg(st / 100 == 2, "%s", r.body);
	h_resp_free(&r);
	expect_step(a, 0, "skill", "ok");
	expect_step(a, 1, "skill", "ok");
	st = create_with_skills(h_bob, "catalogue@1", &b, &r);
	ck_assert_msg(st / 100 == 2, "%s", r.body);
	h_resp_free(&r);
	expect_step(b, 0, "skill", "ok");
	/* deleted, alice's name stays hers (its pins keep it) */
	expect_answer(h_as(h_alice, "DELETE", "/v1/skills/alices", NULL, &r), 204, &r, NULL,
		      "alice deletes hers");
	expect_answer(post_skill_as(H_TCP_NOKEY, h_bob, "alices", "1", bo, &r), 409, &r,
		      "SKILL_NAME_TAKEN", "bob takes alice's deleted name");
	ck_assert_int_eq(h_delete(a), 204);
	ck_assert_int_eq(h_delete(b), 204);
	delete_skill("catalogue");
	free(a);
	free(b);
	free(op);
	free(al);
	free(bo);
}
END_TEST

START_TEST(one_key_shares_skills_with_the_operator)
{
	/* the suite's celld: one key */
	char *f1 = make_skill("share-1.tar.gz", "shared"), *f2 = make_skill("share-2.tar.gz", "k");
	struct h_resp r;
	ck_assert_int_eq(post_skill_as(H_UNIX, NULL, "shared-op", "1", f1, &r), 201);
	h_resp_free(&r);
	ck_assert_int_eq(get_as_key("/v1/skills/shared-op", &r), 200);
	ck_assert_str_eq(h_jstr(json_array_get(json_object_get(r.json, "versions"), 0), "owner"),
			 "operator");
	h_resp_free(&r);
	/* the key adds to the operator's and removes, as it always did */
	ck_assert_int_eq(post_skill("shared-op", "2", f2, &r), 201);
	ck_assert_str_eq(h_jstr(r.json, "owner"), "operator");
	h_resp_free(&r);
	ck_assert_int_eq(delete_as_key("/v1/skills/shared-op/2", &r), 204);
	h_resp_free(&r);
	/* the key's own: the operator sees and removes it */
	ck_assert_int_eq(post_skill("keys-own", "1", f2, &r), 201);
	ck_assert_str_eq(h_jstr(r.json, "owner"), "default");
	h_resp_free(&r);
	ck_assert(h_listed(NULL, "/v1/skills", "keys-own"));
	ck_assert_int_eq(h_http("DELETE", "/v1/skills/keys-own", NULL, &r), 204);
	h_resp_free(&r);
	ck_assert_int_eq(delete_as_key("/v1/skills/shared-op", &r), 204);
	h_resp_free(&r);
	free(f1);
	free(f2);
}
END_TEST

static Suite *provision_suite(void)
{
	Suite *s = suite_create("provision");
	tcase_add_test(h_tcase(s, "a_changed_script_runs_on_create_or_resume", 240),
		       a_changed_script_runs_on_create_or_resume);
	tcase_add_test(h_tcase(s, "startup_script_runs_once_per_content", 240),
		       startup_script_runs_once_per_content);
	tcase_add_test(h_tcase(s, "failures_reported_without_failing_the_create", 180),
		       failures_reported_without_failing_the_create);
	tcase_add_test(h_tcase(s, "bad_extensions_refused", 120), bad_extensions_refused);
	tcase_add_test(h_tcase(s, "packages_failure_reported_then_deduplicated", 240),
		       packages_failure_reported_then_deduplicated);
	tcase_add_test(h_tcase(s, "skills_registry_api", 120), skills_registry_api);
	tcase_add_test(h_tcase(s, "skill_installed_once_per_version", 240),
		       skill_installed_once_per_version);
	tcase_add_test(h_tcase(s, "skill_over_the_disk_quota_fails_cleanly", 240),
		       skill_over_the_disk_quota_fails_cleanly);
	tcase_add_test(h_tcase(s, "a_skill_version_is_pinned_for_good", 120),
		       a_skill_version_is_pinned_for_good);
	tcase_add_test(h_tcase(s, "skills_are_each_tenants_own", 120), skills_are_each_tenants_own);
	tcase_add_test(h_tcase(s, "one_key_shares_skills_with_the_operator", 60),
		       one_key_shares_skills_with_the_operator);
	tcase_add_test(h_tcase(s, "cli_skill_and_create_options", 180),
		       cli_skill_and_create_options);
	return s;
}

int main(void)
{
	return h_main(provision_suite());
}
