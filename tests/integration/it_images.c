/* Image pulls (src/celld/image_pull.c) and the images API (src/celld/api/opensandbox/api_images.c)
 * against the registry lab (registry_lab.h): plain, TLS with a certs dir, htpasswd and token auth,
 * short names through the search list, a manifest list, Docker schema 2, zstd, shared
 * layers, one pull for two callers, partial blobs resumed or fetched whole, and registries
 * that lie or stall (a corrupted blob on the registry's disk, a server that never answers,
 * a redirect loop, an HTML page, a truncated and an over-long blob), each leaving the store
 * as it was. celld is restarted for each test with the lab's registries.conf, certs dir and
 * auth file, its store (<images>/.store) removed first. */
#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cell/codec.h"
#include "cell/error.h"
#include "cell/fsutil.h"
#include "harness.h"
#include "registry_lab.h"

#define OCI_MANIFEST_TYPE "application/vnd.oci.image.manifest.v1+json"

static const struct rl_image_spec multi = {.multi_layer = true};

/* ---- the store and celld's flags ---- */

/* <H.images>/.store/<rel> (malloc'd); H.images is checked to be an absolute path. */
static char *store_path(const char *rel)
{
	ck_assert_msg(H.images[0] == '/' && H.images[1], "images dir '%s'", H.images);
	return h_fmt("%s/.store/%s", H.images, rel);
}

/* Entries of a dir (-1 when it does not exist). */
static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* celld restarted with the lab's flags and an empty store. conf: registries.conf's text
 * (NULL: the lab's registry, insecure); auth: the auth file's text (NULL: none). */
static void pull_setup_with(const char *conf, const char *auth, const char *const *more)
{
	char *conf_file = h_fmt("%s/registries.conf", H.dir);
	char *certs = h_fmt("%s/certs.d", H.dir);
	char *auth_file = h_fmt("%s/auth.json", H.dir);
	char *dflt = h_fmt("[[registry]]\nlocation = \"%s\"\ninsecure = true\n", rl_host());
	h_write_file(conf_file, conf ? conf : dflt, 0644);
	mkdir(certs, 0755);
	if (auth)
		h_write_file(auth_file, auth, 0600);
	else
		unlink(auth_file);
	h_celld_kill();
	/* Only <images>/.store, by its explicit path under the checked images dir. */
	ck_assert_msg(H.images[0] == '/' && strlen(H.images) > 1, "images dir '%s'", H.images);
	int dfd = open(H.images, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dfd, 0);
	struct cell_error err = {0};
	ck_assert_msg(cell_remove_tree_at(dfd, ".store", &err) == 0, "%s", err.msg);
	close(dfd);
	const char *extra[H_EXTRA_FLAGS_MAX + 1] = {
	    "--registries-conf", conf_file, "--registry-certs-dir", certs,
	    "--auth-file",	 auth_file, "--pull-stall-timeout", "3"};
	size_t n = 8;
	for (size_t i = 0; more && more[i] && n < H_EXTRA_FLAGS_MAX; i++)
		extra[n++] = more[i];
	extra[n] = NULL;
	h_celld_restart_with(extra);
	free(dflt);
	free(conf_file);
	free(certs);
	free(auth_file);
}

static void pull_setup(const char *conf)
{
	pull_setup_with(conf, NULL, NULL);
}

/* ---- pulls ---- */

/* POST /v1/images/pull via; the last event (done or error), a new reference; *events_out:
 * the whole stream (malloc'd) when not NULL. */
static json_t *pull_via(enum h_via via, const char *ref, const char *user, const char *pass,
			char **events_out)
{
	json_t *body = json_pack("{s:s}", "image", ref);
	if (user)
		json_object_set_new(body, "auth",
				    json_pack("{s:s, s:s}", "username", user, "password", pass));
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	struct h_resp r;
	struct h_req q = {.method = "POST", .path = "/v1/images/pull", .body = text, .via = via};
	h_request(&q, &r);
	free(text);
	ck_assert_msg(r.status == 200, "pull %s: %ld %s", ref, r.status, r.body);
	json_t *last = NULL;
	for (char *line = r.body; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (!strncmp(line, "data: ", 6)) {
			json_t *o = json_loads(line + 6, 0, NULL);
			const char *t = h_jstr(o, "type");
			if (!strcmp(t, "done") || !strcmp(t, "error")) {
				json_decref(last);
				last = o;
			} else {
				json_decref(o);
			}
		}
		if (nl)
			*nl = '\n';
		line = nl ? nl + 1 : NULL;
	}
	ck_assert_msg(last, "pull %s: no end event in\n%s", ref, r.body);
	if (events_out)
		*events_out = strdup(r.body);
	h_resp_free(&r);
	return last;
}

static json_t *pull_ok(const char *ref, const char *user, const char *pass)
{
	json_t *e = pull_via(H_UNIX, ref, user, pass, NULL);
	ck_assert_msg(!strcmp(h_jstr(e, "type"), "done"), "pull %s: %s\n%s", ref, json_dumps(e, 0),
		      h_celld_log_tail());
	return e;
}

/* A pull that fails: its error event's message (malloc'd), which must hold needle. */
static char *pull_fails(const char *ref, const char *user, const char *pass, const char *code,
			const char *needle)
{
	json_t *e = pull_via(H_UNIX, ref, user, pass, NULL);
	ck_assert_msg(!strcmp(h_jstr(e, "type"), "error"), "pull %s: %s", ref, json_dumps(e, 0));
	char *msg = strdup(h_jstr(e, "message"));
	if (code)
		ck_assert_msg(!strcmp(h_jstr(e, "code"), code), "pull %s: %s, not %s", ref,
			      json_dumps(e, 0), code);
	if (needle)
		ck_assert_msg(strstr(msg, needle), "pull %s: '%s' has no '%s'", ref, msg, needle);
	json_decref(e);
	return msg;
}

/* The listed image of that name (a new reference) or NULL. */
static json_t *listed(const char *name)
{
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", "/v1/images", NULL, &r), 200);
	json_t *found = NULL;
	size_t i;
	json_t *o;
	json_array_foreach(r.json, i, o) if (!strcmp(h_jstr(o, "name"), name)) found =
	    json_incref(o);
	h_resp_free(&r);
	return found;
}

/* The store is as an empty one: no image record, no name, nothing in tmp/ or partial/. */
static void store_untouched(void)
{
	char *dirs[] = {store_path("images"), store_path("refs"), store_path("tmp"),
			store_path("partial")};
	for (int i = 0; i < 4; i++) {
		int n = count_dir(dirs[i]);
		ck_assert_msg(n <= 0, "%s holds %d entries", dirs[i], n);
		free(dirs[i]);
	}
}

/* The lab manifest name:tag (a new reference). */
static json_t *lab_manifest(const char *name, const char *tag)
{
	char *path = h_fmt("/v2/%s/manifests/%s", name, tag);
	struct rl_resp r;
	ck_assert_int_eq(rl_http("GET", path, NULL, &r), 200);
	json_t *m = json_loadb(r.body, r.len, 0, NULL);
	ck_assert_ptr_nonnull(m);
	rl_resp_free(&r);
	free(path);
	return m;
}

static long long layers_size(json_t *m, int from, int to)
{
	long long n = 0;
	for (int i = from; i < to; i++)
		n += h_jint(json_array_get(json_object_get(m, "layers"), (size_t)i), "size");
	return n;
}

/* ---- plain ---- */

START_TEST(plain_pull_list_inspect_remove)
{
	rl_start(RL_PLAIN);
	static const char *const env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LAB=1", NULL};
	static const char *const cmd[] = {"sleep", "3600", NULL};
	struct rl_image_spec spec = multi;
	spec.env = env;
	spec.cmd = cmd;
	spec.workdir = RL_SANDBOX_HOME;
	spec.user = "sandbox";
	char *digest = rl_push_image("lab/multi", "1", &spec);
	pull_setup(NULL);
	char *ref = h_fmt("%s/lab/multi:1", rl_host());
	json_t *m = lab_manifest("lab/multi", "1");

	json_t *done = pull_ok(ref, NULL, NULL);
	ck_assert_str_eq(h_jstr(done, "name"), ref);
	ck_assert_str_eq(h_jstr(done, "digest"), digest);
	ck_assert_int_eq(h_jint(done, "layers"), 3);
	ck_assert_int_eq(h_jint(done, "layersFetched"), 3);
	ck_assert_int_eq(h_jint(done, "fetchedBytes"), layers_size(m, 0, 3));
	json_decref(done);

	/* listed with its bytes, all of them its own */
	json_t *l = listed(ref);
	ck_assert_ptr_nonnull(l);
	ck_assert_str_eq(h_jstr(l, "digest"), digest);
	ck_assert_int_gt(h_jint(l, "bytes"), 0);
	ck_assert_int_eq(h_jint(l, "uniqueBytes"), h_jint(l, "bytes"));
	ck_assert_int_eq(h_jint(l, "sharedBytes"), 0);
	json_decref(l);

	/* inspected by its path, ?name= and its digest */
	char *by_path = h_fmt("/v1/images/%s", ref);
	char *enc = h_urlencode(ref);
	char *by_query = h_fmt("/v1/images/x?name=%s", enc);
	char *by_digest = h_fmt("/v1/images/%s", digest);
	const char *paths[] = {by_path, by_query, by_digest};
	for (int i = 0; i < 3; i++) {
		struct h_resp r;
		ck_assert_msg(h_http("GET", paths[i], NULL, &r) == 200, "%s: %s", paths[i], r.body);
		ck_assert_str_eq(h_jstr(r.json, "digest"), digest);
		ck_assert_str_eq(h_jstr(r.json, "config.WorkingDir"), RL_SANDBOX_HOME);
		ck_assert_str_eq(h_jstr(r.json, "config.User"), "sandbox");
		json_t *cfg = json_object_get(r.json, "config");
		ck_assert_str_eq(json_string_value(json_array_get(json_object_get(cfg, "Cmd"), 0)),
				 "sleep");
		ck_assert_str_eq(json_string_value(json_array_get(json_object_get(cfg, "Env"), 1)),
				 "LAB=1");
		ck_assert_uint_eq(json_array_size(json_object_get(r.json, "layers")), 3);
		h_resp_free(&r);
	}
	ck_assert_int_eq(h_http("GET", "/v1/images/nothing/here:1", NULL, NULL), 404);

	/* again: nothing fetched */
	done = pull_ok(ref, NULL, NULL);
	ck_assert_int_eq(h_jint(done, "fetchedBytes"), 0);
	ck_assert_int_eq(h_jint(done, "layersFetched"), 0);
	json_decref(done);

	/* a tag: another name, the same layers */
	char *tag_body = h_fmt("{\"source\": \"%s\", \"name\": \"lab/other:2\"}", ref);
	struct h_resp r;
	ck_assert_int_eq(h_http("POST", "/v1/images/tag", tag_body, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "name"), "docker.io/lab/other:2");
	h_resp_free(&r);
	l = listed("docker.io/lab/other:2");
	ck_assert_ptr_nonnull(l);
	ck_assert_str_eq(h_jstr(l, "digest"), digest);
	json_decref(l);

	/* removed on the Unix socket only */
	struct h_req del = {.method = "DELETE", .path = by_path, .via = H_TCP};
	ck_assert_int_eq(h_request(&del, &r), 403);
	h_resp_free(&r);
	struct h_req prune = {.method = "POST", .path = "/v1/images/prune", .via = H_TCP};
	ck_assert_int_eq(h_request(&prune, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(h_http("DELETE", by_path, NULL, NULL), 200);
	ck_assert_ptr_null(listed(ref));
	ck_assert_int_eq(h_http("DELETE", by_path, NULL, NULL), 404);
	/* the other name keeps the layers; once it goes, prune has nothing left to do */
	ck_assert_int_eq(h_http("DELETE", "/v1/images/docker.io/lab/other:2", NULL, NULL), 200);
	ck_assert_int_eq(h_http("POST", "/v1/images/prune", NULL, &r), 200);
	h_resp_free(&r);
	char *layers = store_path("layers");
	ck_assert_int_eq(count_dir(layers), 0);
	store_untouched();
	free(layers);
	free(tag_body);
	free(by_path);
	free(enc);
	free(by_query);
	free(by_digest);
	json_decref(m);
	free(ref);
	free(digest);
	rl_stop();
}
END_TEST

START_TEST(short_name_through_the_search_list)
{
	rl_start(RL_PLAIN);
	char *digest = rl_push_image("lab/short", "1", &(struct rl_image_spec){0});
	/* The first search registry has no such image (nothing listens there): the second. */
	unsigned dead = h_free_port();
	char *conf = h_fmt("unqualified-search-registries = [\"127.0.0.1:%u\", \"%s\"]\n"
			   "[[registry]]\nlocation = \"127.0.0.1:%u\"\ninsecure = true\n"
			   "[[registry]]\nlocation = \"%s\"\ninsecure = true\n",
			   dead, rl_host(), dead, rl_host());
	pull_setup(conf);
	json_t *done = pull_ok("lab/short:1", NULL, NULL);
	char *want = h_fmt("%s/lab/short:1", rl_host());
	ck_assert_str_eq(h_jstr(done, "name"), want);
	ck_assert_str_eq(h_jstr(done, "digest"), digest);
	json_decref(done);
	free(want);
	free(conf);
	free(digest);
	rl_stop();
}
END_TEST

/* ---- TLS, credentials ---- */

START_TEST(tls_with_a_certs_dir)
{
	rl_start(RL_TLS);
	char *digest = rl_push_image("lab/tls", "1", &(struct rl_image_spec){0});
	char *conf = h_fmt("[[registry]]\nlocation = \"%s\"\n", rl_host());
	pull_setup(conf);
	char *ref = h_fmt("%s/lab/tls:1", rl_host());
	free(pull_fails(ref, NULL, NULL, NULL, rl_host()));
	store_untouched();
	/* the lab's CA in certs.d/HOST:PORT/ */
	char *dir = h_fmt("%s/certs.d/%s", H.dir, rl_host());
	char *crt = h_fmt("%s/lab-ca.crt", dir);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	char *ca = h_read_file(rl_ca_path());
	h_write_file(crt, ca, 0644);
	json_t *done = pull_ok(ref, NULL, NULL);
	ck_assert_str_eq(h_jstr(done, "digest"), digest);
	json_decref(done);
	free(ca);
	free(crt);
	free(dir);
	free(ref);
	free(conf);
	free(digest);
	rl_stop();
}
END_TEST

/* No file of dir (recursively) holds needle. */
static void nowhere(const char *dir, const char *needle)
{
	char *const argv[] = {"/usr/bin/grep", "-rlF", "--", (char *)needle, (char *)dir, NULL};
	struct h_proc p;
	h_run(argv, NULL, 60, &p);
	ck_assert_msg(p.status == 1, "'%s' found under %s: %s", needle, dir, p.out);
	h_proc_free(&p);
}

START_TEST(basic_auth_from_the_request_and_the_auth_file)
{
	rl_start(RL_BASIC);
	char *digest = rl_push_image("lab/basic", "1", &(struct rl_image_spec){0});
	pull_setup(NULL);
	char *ref = h_fmt("%s/lab/basic:1", rl_host());
	free(pull_fails(ref, NULL, NULL, "REGISTRY_UNAUTHORIZED", rl_host()));
	free(pull_fails(ref, RL_USER, "wrong", "REGISTRY_UNAUTHORIZED", NULL));
	json_t *done = pull_ok(ref, RL_USER, RL_PASS);
	ck_assert_str_eq(h_jstr(done, "digest"), digest);
	json_decref(done);
	/* the password is nowhere celld writes */
	nowhere(H.images, RL_PASS);
	nowhere(H.state, RL_PASS);
	nowhere(H.log, RL_PASS);

	/* the operator's auth file */
	char *b64 = cell_base64_encode(RL_USER ":" RL_PASS, strlen(RL_USER ":" RL_PASS));
	char *auth = h_fmt("{\"auths\": {\"%s\": {\"auth\": \"%s\"}}}", rl_host(), b64);
	pull_setup_with(NULL, auth, NULL);
	done = pull_ok(ref, NULL, NULL);
	ck_assert_str_eq(h_jstr(done, "digest"), digest);
	json_decref(done);
	free(auth);
	free(b64);
	free(ref);
	free(digest);
	rl_stop();
}
END_TEST

START_TEST(token_auth)
{
	rl_start(RL_TOKEN);
	char *digest = rl_push_image("lab/token", "1", &(struct rl_image_spec){0});
	pull_setup(NULL);
	char *ref = h_fmt("%s/lab/token:1", rl_host());
	free(pull_fails(ref, NULL, NULL, "REGISTRY_UNAUTHORIZED", NULL));
	free(pull_fails(ref, RL_USER, "wrong", "REGISTRY_UNAUTHORIZED", NULL));
	json_t *done = pull_ok(ref, RL_USER, RL_PASS);
	ck_assert_str_eq(h_jstr(done, "digest"), digest);
	json_decref(done);
	nowhere(H.log, RL_PASS);
	free(ref);
	free(digest);
	rl_stop();
}
END_TEST

/* ---- formats ---- */

static long create_on(const char *const *headers, const char *image, bool auth, const char *extra,
		      struct h_resp *r);

START_TEST(manifest_list_picks_the_host_arch)
{
	rl_start(RL_PLAIN);
	static const char *const archs[] = {"amd64", "arm64", NULL};
	struct rl_image_spec spec = {.archs = archs};
	char *digest = rl_push_image("lab/list", "1", &spec);
	pull_setup(NULL);
	struct utsname u;
	ck_assert_int_eq(uname(&u), 0);
	bool arm = !strcmp(u.machine, "aarch64");
	const char *host = arm ? "arm64" : "amd64", *other = arm ? "amd64" : "arm64";
	char *ref = h_fmt("%s/lab/list:1", rl_host());
	json_t *done = pull_ok(ref, NULL, NULL);
	char *mine = h_fmt("%s/lab/list:1-%s", rl_host(), host);
	json_t *direct = pull_ok(mine, NULL, NULL);
	/* the index's choice is the host's own image */
	ck_assert_str_eq(h_jstr(done, "digest"), h_jstr(direct, "digest"));
	ck_assert_str_ne(h_jstr(done, "digest"), digest);
	char *theirs = h_fmt("%s/lab/list:1-%s", rl_host(), other);
	free(pull_fails(theirs, NULL, NULL, "IMAGE_PLATFORM", other));
	/* A create that names it: a clear 400, never a hang. */
	struct h_resp r;
	ck_assert_int_eq(create_on(NULL, theirs, false, NULL, &r), 400);
	ck_assert_str_eq(h_err_code(&r), "IMAGE_NOT_FOUND");
	ck_assert_msg(strstr(r.body, other), "%s", r.body);
	h_resp_free(&r);
	json_decref(done);
	json_decref(direct);
	free(theirs);
	free(mine);
	free(ref);
	free(digest);
	rl_stop();
}
END_TEST

START_TEST(docker_schema2_and_zstd)
{
	rl_start(RL_PLAIN);
	struct rl_image_spec d = multi, z = multi;
	d.docker_format = true;
	z.zstd = true;
	char *dd = rl_push_image("lab/docker", "1", &d);
	char *zd = rl_push_image("lab/zstd", "1", &z);
	pull_setup(NULL);
	char *dref = h_fmt("%s/lab/docker:1", rl_host()), *zref = h_fmt("%s/lab/zstd:1", rl_host());
	json_t *a = pull_ok(dref, NULL, NULL), *b = pull_ok(zref, NULL, NULL);
	ck_assert_str_eq(h_jstr(a, "digest"), dd);
	ck_assert_str_eq(h_jstr(b, "digest"), zd);
	ck_assert_int_eq(h_jint(b, "layers"), 3);
	json_decref(a);
	json_decref(b);
	free(dref);
	free(zref);
	free(dd);
	free(zd);
	rl_stop();
}
END_TEST

static size_t discard(char *p, size_t size, size_t n, void *cls)
{
	(void)p;
	(void)cls;
	return size * n;
}

/* name:tag in the lab: the first n layers of the lab's manifest of name:from (its config
 * cut to match), pushed as a manifest of its own. */
static void push_lower(const char *name, const char *from, const char *tag, size_t n)
{
	json_t *m = lab_manifest(name, from);
	json_t *layers = json_object_get(m, "layers");
	while (json_array_size(layers) > n)
		json_array_remove(layers, json_array_size(layers) - 1);
	const char *cd = h_jstr(m, "config.digest");
	char *cpath = h_fmt("/v2/%s/blobs/%s", name, cd);
	struct rl_resp r;
	ck_assert_int_eq(rl_http("GET", cpath, NULL, &r), 200);
	json_t *c = json_loadb(r.body, r.len, 0, NULL);
	rl_resp_free(&r);
	json_t *ids = json_object_get(json_object_get(c, "rootfs"), "diff_ids");
	while (json_array_size(ids) > n)
		json_array_remove(ids, json_array_size(ids) - 1);
	json_object_del(c, "history");
	char *ctext = json_dumps(c, JSON_COMPACT);
	char hex[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(ctext, strlen(ctext), hex);
	char *digest = h_fmt("sha256:%s", hex);
	/* an upload: POST for its Location, then PUT the bytes there with their digest */
	char *up = h_fmt("%s/v2/%s/blobs/uploads/", rl_url(), name);
	CURL *h = curl_easy_init();
	curl_easy_setopt(h, CURLOPT_URL, up);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	ck_assert_int_eq(curl_easy_perform(h), CURLE_OK);
	long code = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	ck_assert_int_eq(code, 202);
	struct curl_header *loc = NULL;
	ck_assert_int_eq(curl_easy_header(h, "Location", 0, CURLH_HEADER, -1, &loc), CURLHE_OK);
	char *put = h_fmt("%s%s%cdigest=%s", loc->value[0] == '/' ? rl_url() : "", loc->value,
			  strchr(loc->value, '?') ? '&' : '?', digest);
	curl_easy_cleanup(h);
	h = curl_easy_init();
	curl_easy_setopt(h, CURLOPT_URL, put);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, ctext);
	struct curl_slist *ct = curl_slist_append(NULL, "Content-Type: application/octet-stream");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, ct);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	ck_assert_int_eq(curl_easy_perform(h), CURLE_OK);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	ck_assert_msg(code == 201, "PUT %s: %ld", put, code);
	curl_easy_cleanup(h);
	curl_slist_free_all(ct);
	free(put);
	json_object_set_new(json_object_get(m, "config"), "digest", json_string(digest));
	json_object_set_new(json_object_get(m, "config"), "size",
			    json_integer((json_int_t)strlen(ctext)));
	char *mtext = json_dumps(m, JSON_COMPACT);
	char *mpath = h_fmt("/v2/%s/manifests/%s", name, tag);
	ck_assert_int_eq(rl_http("PUT", mpath,
				 &(struct rl_http_opts){.body = mtext,
							.len = strlen(mtext),
							.content_type = OCI_MANIFEST_TYPE},
				 &r),
			 201);
	rl_resp_free(&r);
	free(mpath);
	free(mtext);
	free(up);
	free(digest);
	free(ctext);
	json_decref(c);
	free(cpath);
	json_decref(m);
}

START_TEST(a_second_image_fetches_only_its_new_layers)
{
	rl_start(RL_PLAIN);
	char *digest = rl_push_image("lab/multi", "1", &multi);
	push_lower("lab/multi", "1", "base", 2);
	pull_setup(NULL);
	json_t *m = lab_manifest("lab/multi", "1");
	char *base = h_fmt("%s/lab/multi:base", rl_host()),
	     *top = h_fmt("%s/lab/multi:1", rl_host());
	json_t *a = pull_ok(base, NULL, NULL);
	ck_assert_int_eq(h_jint(a, "layersFetched"), 2);
	json_t *b = pull_ok(top, NULL, NULL);
	ck_assert_str_eq(h_jstr(b, "digest"), digest);
	ck_assert_int_eq(h_jint(b, "layersFetched"), 1);
	ck_assert_int_eq(h_jint(b, "fetchedBytes"), layers_size(m, 2, 3));
	/* listed: the two lower layers shared */
	json_t *l = listed(top);
	ck_assert_int_gt(h_jint(l, "sharedBytes"), 0);
	ck_assert_int_lt(h_jint(l, "uniqueBytes"), h_jint(l, "bytes"));
	json_decref(l);
	json_decref(a);
	json_decref(b);
	json_decref(m);
	free(base);
	free(top);
	free(digest);
	rl_stop();
}
END_TEST

struct bg_pull {
	const char *ref;
	json_t *last;
};

static void *bg_pull(void *arg)
{
	struct bg_pull *b = arg;
	b->last = pull_via(H_UNIX, b->ref, NULL, NULL, NULL);
	return NULL;
}

START_TEST(two_concurrent_pulls_download_once)
{
	rl_start(RL_PLAIN);
	char *digest = rl_push_image("lab/multi", "1", &multi);
	pull_setup(NULL);
	char *ref = h_fmt("%s/lab/multi:1", rl_host());
	struct bg_pull a = {.ref = ref}, b = {.ref = ref};
	pthread_t ta, tb;
	pthread_create(&ta, NULL, bg_pull, &a);
	pthread_create(&tb, NULL, bg_pull, &b);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	ck_assert_str_eq(h_jstr(a.last, "type"), "done");
	ck_assert_str_eq(h_jstr(b.last, "type"), "done");
	ck_assert_str_eq(h_jstr(a.last, "digest"), digest);
	ck_assert_str_eq(h_jstr(b.last, "digest"), digest);
	/* One pull downloaded; the other joined it, or (started after it ended) found every
	 * layer there: the layers were downloaded once either way. */
	bool aj = json_is_true(json_object_get(a.last, "joined"));
	bool bj = json_is_true(json_object_get(b.last, "joined"));
	long long fa = h_jint(a.last, "layersFetched"), fb = h_jint(b.last, "layersFetched");
	ck_assert_msg(aj != bj || (fa + fb == 3), "joined %d %d, fetched %lld %lld", aj, bj, fa,
		      fb);
	json_decref(a.last);
	json_decref(b.last);
	free(ref);
	free(digest);
	rl_stop();
}
END_TEST

/* ---- partial blobs ---- */

START_TEST(a_partial_blob_is_resumed_and_a_corrupt_one_fetched_whole)
{
	rl_start(RL_PLAIN);
	char *digest = rl_push_image("lab/multi", "1", &multi);
	pull_setup(NULL);
	json_t *m = lab_manifest("lab/multi", "1");
	json_t *bottom = json_array_get(json_object_get(m, "layers"), 0);
	const char *blob = h_jstr(bottom, "digest");
	long long size = h_jint(bottom, "size"), others = layers_size(m, 1, 3);
	char *bpath = h_fmt("/v2/lab/multi/blobs/%s", blob);
	struct rl_resp r;
	ck_assert_int_eq(rl_http("GET", bpath, NULL, &r), 200);
	ck_assert_int_eq((long long)r.len, size);
	char *dir = store_path("partial");
	char *dst = h_fmt("%s/%s", dir, blob + 7);
	int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, r.body, (size_t)(size / 2)), size / 2);
	close(fd);
	char *ref = h_fmt("%s/lab/multi:1", rl_host());
	json_t *done = pull_ok(ref, NULL, NULL);
	ck_assert_str_eq(h_jstr(done, "digest"), digest);
	ck_assert_int_eq(h_jint(done, "fetchedBytes"), others + (size - size / 2));
	ck_assert_int_eq(access(dst, F_OK), -1);
	json_decref(done);

	/* What a host crash may leave: the file's length, not its bytes. The resumed blob is
	 * not the blob; fetched once more, whole, the pull succeeds. */
	pull_setup(NULL);
	r.body[10] ^= 0xff;
	fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_eq(write(fd, r.body, (size_t)(size / 2)), size / 2);
	close(fd);
	done = pull_ok(ref, NULL, NULL);
	ck_assert_int_eq(h_jint(done, "fetchedBytes"), others + (size - size / 2) + size);
	ck_assert_msg(strstr(h_celld_log_tail(), "fetching it whole"), "%s", h_celld_log_tail());
	ck_assert_int_eq(access(dst, F_OK), -1);
	json_decref(done);
	rl_resp_free(&r);
	free(ref);
	free(dst);
	free(dir);
	free(bpath);
	json_decref(m);
	free(digest);
	rl_stop();
}
END_TEST

/* ---- registries that lie or stall ---- */

START_TEST(a_corrupted_blob_is_refused_and_the_store_unchanged)
{
	rl_start(RL_PLAIN);
	rl_push_image("lab/multi", "1", &multi);
	pull_setup(NULL);
	json_t *m = lab_manifest("lab/multi", "1");
	const char *blob = h_jstr(json_array_get(json_object_get(m, "layers"), 0), "digest");
	char *data = h_fmt("%s/storage/docker/registry/v2/blobs/sha256/%.2s/%s/data", rl_dir(),
			   blob + 7, blob + 7);
	int fd = open(data, O_RDWR);
	ck_assert_msg(fd >= 0, "%s", data);
	unsigned char c;
	ck_assert_int_eq(pread(fd, &c, 1, 100), 1);
	c ^= 0xff;
	ck_assert_int_eq(pwrite(fd, &c, 1, 100), 1);
	close(fd);
	char *ref = h_fmt("%s/lab/multi:1", rl_host());
	free(pull_fails(ref, NULL, NULL, "DIGEST_MISMATCH", blob));
	ck_assert_ptr_null(listed(ref));
	store_untouched();
	free(ref);
	free(data);
	json_decref(m);
	rl_stop();
}
END_TEST

/* A fake registry on 127.0.0.1: each route a path and what is answered to it. */
enum fake_lie { FAKE_ASIS, FAKE_SHORT, FAKE_LONG, FAKE_LONG_NOLEN, FAKE_SILENT };
struct fake_route {
	const char *path; /* "/v2/x/manifests/1" */
	int status;
	const char *ctype, *extra;
	const char *body;
	size_t len;
	enum fake_lie lie;
};
struct fake {
	int lfd, port;
	struct fake_route routes[16];
	int n;
	atomic_bool stop;
};

/* All of p onto fd; false when the peer went away. */
static bool write_all(int fd, const void *p, size_t n)
{
	const char *b = p;
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w <= 0)
			return false;
		b += w;
		n -= (size_t)w;
	}
	return true;
}

static void fake_write(int fd, const void *p, size_t n)
{
	(void)write_all(fd, p, n);
}

static void *fake_conn(void *arg)
{
	struct fake *f = ((void **)arg)[0];
	int fd = (int)(intptr_t)((void **)arg)[1];
	free(arg);
	char req[8192];
	size_t got = 0;
	while (got < sizeof(req) - 1) {
		ssize_t n = read(fd, req + got, sizeof(req) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		req[got] = '\0';
		if (strstr(req, "\r\n\r\n") || (unsigned char)req[0] == 0x16)
			break;
	}
	req[got] = '\0';
	/* A TLS ClientHello (an insecure registry is tried with TLS first): not spoken here. */
	if (got && (unsigned char)req[0] == 0x16) {
		close(fd);
		return NULL;
	}
	char path[2048] = "";
	sscanf(req, "%*s %2047s", path);
	const struct fake_route *rt = NULL;
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->routes[i].path, path))
			rt = &f->routes[i];
	if (!rt) {
		static const char nf[] = "HTTP/1.1 404 Not Found\r\nContent-Type: "
					 "application/json\r\nContent-Length: 2\r\nConnection: "
					 "close\r\n\r\n{}";
		fake_write(fd, nf, sizeof(nf) - 1);
	} else if (rt->lie == FAKE_SILENT) {
		while (!atomic_load(&f->stop))
			usleep(100000);
	} else {
		size_t cl = rt->lie == FAKE_LONG ? rt->len + 4096 : rt->len;
		char *head =
		    rt->lie == FAKE_LONG_NOLEN
			? h_fmt("HTTP/1.1 %d X\r\nContent-Type: %s\r\n%sConnection: close\r\n\r\n",
				rt->status, rt->ctype, rt->extra ? rt->extra : "")
			: h_fmt("HTTP/1.1 %d X\r\nContent-Type: %s\r\n%sContent-Length: "
				"%zu\r\nConnection: close\r\n\r\n",
				rt->status, rt->ctype, rt->extra ? rt->extra : "", cl);
		fake_write(fd, head, strlen(head));
		free(head);
		if (rt->lie == FAKE_SHORT) {
			fake_write(fd, rt->body, rt->len / 2);
		} else {
			fake_write(fd, rt->body, rt->len);
			if (rt->lie == FAKE_LONG || rt->lie == FAKE_LONG_NOLEN) {
				char junk[4096];
				memset(junk, 'x', sizeof(junk));
				fake_write(fd, junk, sizeof(junk));
			}
		}
	}
	close(fd);
	return NULL;
}

static void *fake_accept(void *arg)
{
	struct fake *f = arg;
	for (;;) {
		int cfd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0)
			return NULL;
		void **a = malloc(2 * sizeof(void *));
		a[0] = f;
		a[1] = (void *)(intptr_t)cfd;
		pthread_t t;
		pthread_create(&t, NULL, fake_conn, a);
		pthread_detach(t);
	}
}

/* A socket listening on 127.0.0.1 at a free port: its fd, *port filled. */
static int listen_loopback(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	socklen_t al = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &al);
	*port = ntohs(a.sin_port);
	ck_assert_int_eq(listen(fd, 64), 0);
	return fd;
}

static struct fake *fake_start(void)
{
	struct fake *f = calloc(1, sizeof(*f));
	f->lfd = listen_loopback(&f->port);
	pthread_t t;
	pthread_create(&t, NULL, fake_accept, f);
	pthread_detach(t);
	return f;
}

static void fake_route(struct fake *f, const char *path, int status, const char *ctype,
		       const char *extra, const char *body, size_t len, enum fake_lie lie)
{
	ck_assert_int_lt(f->n, 16);
	f->routes[f->n++] = (struct fake_route){path, status, ctype, extra, body, len, lie};
}

/* A blob or manifest from the lab (malloc'd body, its length). */
static char *lab_get(const char *path, size_t *len)
{
	struct rl_resp r;
	ck_assert_int_eq(rl_http("GET", path, NULL, &r), 200);
	char *b = malloc(r.len + 1);
	memcpy(b, r.body, r.len);
	b[r.len] = '\0';
	*len = r.len;
	rl_resp_free(&r);
	return b;
}

START_TEST(registries_that_lie_or_stall)
{
	rl_start(RL_PLAIN);
	rl_push_image("lab/one", "1", &(struct rl_image_spec){0});
	json_t *m = lab_manifest("lab/one", "1");
	const char *cd = h_jstr(m, "config.digest");
	const char *ld = h_jstr(json_array_get(json_object_get(m, "layers"), 0), "digest");
	size_t mlen, clen, llen;
	char *mb = lab_get("/v2/lab/one/manifests/1", &mlen);
	char *cpath = h_fmt("/v2/lab/one/blobs/%s", cd), *lpath = h_fmt("/v2/lab/one/blobs/%s", ld);
	char *cb = lab_get(cpath, &clen), *lb = lab_get(lpath, &llen);
	struct fake *f = fake_start();
	/* one repository per lie, each serving the lab's manifest and config */
	static const char *const repos[] = {"short", "long", "longnolen"};
	static const enum fake_lie lies[] = {FAKE_SHORT, FAKE_LONG, FAKE_LONG_NOLEN};
	char *paths[3][3];
	for (int i = 0; i < 3; i++) {
		paths[i][0] = h_fmt("/v2/x/%s/manifests/1", repos[i]);
		paths[i][1] = h_fmt("/v2/x/%s/blobs/%s", repos[i], cd);
		paths[i][2] = h_fmt("/v2/x/%s/blobs/%s", repos[i], ld);
		fake_route(f, paths[i][0], 200, OCI_MANIFEST_TYPE, NULL, mb, mlen, FAKE_ASIS);
		fake_route(f, paths[i][1], 200, "application/octet-stream", NULL, cb, clen,
			   FAKE_ASIS);
		fake_route(f, paths[i][2], 200, "application/octet-stream", NULL, lb, llen,
			   lies[i]);
	}
	fake_route(f, "/v2/x/loop/manifests/1", 302, "text/plain",
		   "Location: /v2/x/loop/manifests/1\r\n", "", 0, FAKE_ASIS);
	static const char html[] = "<html><body>Sign in</body></html>";
	fake_route(f, "/v2/x/html/manifests/1", 200, "text/html", NULL, html, sizeof(html) - 1,
		   FAKE_ASIS);
	fake_route(f, "/v2/x/stall/manifests/1", 200, "text/plain", NULL, "", 0, FAKE_SILENT);
	char *conf = h_fmt("[[registry]]\nlocation = \"127.0.0.1:%d\"\ninsecure = true\n", f->port);
	pull_setup(conf);
	char *host = h_fmt("127.0.0.1:%d", f->port);

	char *ref = h_fmt("%s/x/short:1", host);
	free(pull_fails(ref, NULL, NULL, NULL, ld));
	free(ref);
	ref = h_fmt("%s/x/long:1", host);
	free(pull_fails(ref, NULL, NULL, NULL, ld));
	free(ref);
	ref = h_fmt("%s/x/longnolen:1", host);
	free(pull_fails(ref, NULL, NULL, NULL, ld));
	free(ref);
	ref = h_fmt("%s/x/loop:1", host);
	free(pull_fails(ref, NULL, NULL, NULL, host));
	free(ref);
	ref = h_fmt("%s/x/html:1", host);
	free(pull_fails(ref, NULL, NULL, NULL, "HTML"));
	free(ref);
	ref = h_fmt("%s/x/stall:1", host);
	free(pull_fails(ref, NULL, NULL, "REGISTRY_TIMEOUT", host));
	free(ref);
	/* Nothing named, recorded or half unpacked (a truncated blob's prefix may stay in
	 * partial/ to be resumed: that is by design). */
	char *images = store_path("images"), *tmp = store_path("tmp"), *refs = store_path("refs");
	ck_assert_int_le(count_dir(images), 0);
	ck_assert_int_le(count_dir(tmp), 0);
	ck_assert_int_le(count_dir(refs), 0);
	atomic_store(&f->stop, true);
	free(images);
	free(tmp);
	free(refs);
	free(host);
	free(conf);
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++)
			free(paths[i][j]);
	free(mb);
	free(cb);
	free(lb);
	free(cpath);
	free(lpath);
	json_decref(m);
	rl_stop();
}
END_TEST

/* ---- the CLI ---- */

/* cell ARGS... (its output asserted free of escape codes: stdout is not a terminal). */
static char *cli_ok(const char *const *args)
{
	struct h_proc p;
	const char *argv[16] = {NULL};
	char *cell = h_fmt("%s/cell", H.bin);
	size_t n = 0;
	argv[n++] = cell;
	argv[n++] = "--socket";
	argv[n++] = H.socket;
	for (size_t i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	h_run((char *const *)argv, NULL, 120, &p);
	ck_assert_msg(p.status == 0, "cell %s %s: %d\n%s\n%s", args[0], args[1] ? args[1] : "",
		      p.status, p.out, p.err);
	ck_assert_msg(!strchr(p.out, '\033'), "escape codes in\n%s", p.out);
	char *out = strdup(p.out);
	h_proc_free(&p);
	free(cell);
	return out;
}

START_TEST(cli_pull_ls_inspect_tag_rm_prune)
{
	rl_start(RL_PLAIN);
	char *digest = rl_push_image("lab/multi", "1", &multi);
	pull_setup(NULL);
	char *ref = h_fmt("%s/lab/multi:1", rl_host());
	char *out = cli_ok((const char *const[]){"image", "pull", ref, NULL});
	ck_assert_msg(strstr(out, digest) && strstr(out, "pull complete") == NULL &&
			  strstr(out, ": done"),
		      "%s", out);
	free(out);
	out = cli_ok((const char *const[]){"image", "ls", NULL});
	ck_assert_msg(strstr(out, ref) && strstr(out, "UNIQUE"), "%s", out);
	free(out);
	out = cli_ok((const char *const[]){"image", "ls", "-q", NULL});
	ck_assert_msg(strstr(out, ref) && !strstr(out, "NAME"), "%s", out);
	free(out);
	out = cli_ok((const char *const[]){"image", "ls", "--format", "json", NULL});
	json_t *j = json_loads(out, 0, NULL);
	ck_assert_msg(json_is_array(j), "%s", out);
	json_decref(j);
	free(out);
	out = cli_ok((const char *const[]){"image", "inspect", ref, NULL});
	j = json_loads(out, 0, NULL);
	ck_assert_str_eq(h_jstr(j, "digest"), digest);
	json_decref(j);
	free(out);
	free(cli_ok((const char *const[]){"image", "tag", ref, "lab/again:2", NULL}));
	ck_assert_ptr_nonnull(listed("docker.io/lab/again:2"));
	free(cli_ok((const char *const[]){"image", "rm", ref, "lab/again:2", NULL}));
	ck_assert_ptr_null(listed(ref));
	out = cli_ok((const char *const[]){"image", "prune", NULL});
	ck_assert_msg(strstr(out, "freed"), "%s", out);
	free(out);
	free(ref);
	free(digest);
	rl_stop();
}
END_TEST

/* How often text holds needle. */
static int count_in(const char *text, const char *needle)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Finished pulls of name in celld's log (image_pull.c: "pull: NAME is DIGEST (...)") and
 * the registry's answers to a GET of its manifest (its access log). */
static void pulls_seen(const char *name, const char *manifest, int *logged, int *asked)
{
	char *log = h_read_file(H.log), *needle = h_fmt("pull: %s is ", name);
	*logged = count_in(log, needle);
	free(log);
	free(needle);
	char *rlog_path = h_fmt("%s/registry.log", rl_dir());
	char *rlog = h_read_file(rlog_path);
	needle = h_fmt("\"GET %s ", manifest);
	*asked = count_in(rlog, needle);
	free(rlog);
	free(rlog_path);
	free(needle);
}

/* cell run --rm of a registry image: pulled into a cold store, then run warm without a
 * pull; the command's output and exit status passed through; nothing left behind. */
START_TEST(cli_run_pulls_cold_then_warm)
{
	rl_start(RL_PLAIN);
	char *digest = rl_push_image("lab/x", "1", &multi);
	pull_setup(NULL);
	char *ref = h_fmt("%s/lab/x:1", rl_host());
	ck_assert_ptr_null(listed(ref));
	int logged, asked;
	struct h_proc p;
	h_cell(&p, "run", "--rm", "--image", ref, "--", "cat", RL_ADDED, NULL);
	ck_assert_msg(p.status == 0 && !strcmp(p.out, RL_ADDED_TEXT), "cold run: %d '%s' %s\n%s",
		      p.status, p.out, p.err, h_celld_log_tail());
	h_proc_free(&p);
	pulls_seen(ref, "/v2/lab/x/manifests/1", &logged, &asked);
	ck_assert_msg(logged == 1 && asked == 1, "cold: %d pulls logged, %d manifest GETs", logged,
		      asked);
	json_t *img = listed(ref);
	ck_assert_ptr_nonnull(img);
	ck_assert_str_eq(h_jstr(img, "digest"), digest);
	json_decref(img);
	/* Warm: the store has it; the exit status is the command's. */
	h_cell(&p, "run", "--rm", "--image", ref, "--", "sh", "-c", "cat " RL_ADDED "; exit 7",
	       NULL);
	ck_assert_msg(p.status == 7 && !strcmp(p.out, RL_ADDED_TEXT), "warm run: %d '%s' %s",
		      p.status, p.out, p.err);
	h_proc_free(&p);
	pulls_seen(ref, "/v2/lab/x/manifests/1", &logged, &asked);
	ck_assert_msg(logged == 1 && asked == 1, "warm: %d pulls logged, %d manifest GETs", logged,
		      asked);
	/* --rm left nothing: no sandbox listed, none on disk. */
	ck_assert_int_eq(h_sandbox_count(), 0);
	char *sbdir = h_fmt("%s/sandboxes", H.state);
	ck_assert_msg(count_dir(sbdir) <= 0, "%s holds %d entries", sbdir, count_dir(sbdir));
	free(sbdir);
	free(ref);
	free(digest);
	rl_stop();
}
END_TEST

/* ---- sandboxes on pulled images ---- */

static const char *const run_env[] = {"LAB=1", "PATH=/usr/local/bin:/usr/bin:/bin", NULL};
static const char *const run_cmd[] = {"echo", "from the lab", NULL};
static const struct rl_image_spec run_spec = {
    .multi_layer = true,
    .env = run_env,
    .workdir = RL_SANDBOX_HOME,
    .user = "sandbox",
    .cmd = run_cmd,
};

/* POST /v1/sandboxes of image as headers (NULL: the Unix socket); auth: with the lab's
 * credentials as image.auth; extra: more members of the body (",..." or NULL). */
static long create_on(const char *const *headers, const char *image, bool auth, const char *extra,
		      struct h_resp *r)
{
	char *body = h_fmt(
	    "{\"image\":{\"uri\":\"%s\"%s}%s}", image,
	    auth ? ",\"auth\":{\"username\":\"" RL_USER "\",\"password\":\"" RL_PASS "\"}" : "",
	    extra ? extra : "");
	long st = headers ? h_as(headers, "POST", "/v1/sandboxes", body, r)
			  : h_http("POST", "/v1/sandboxes", body, r);
	if (st == 202 || st == 200)
		h_track_sandbox(h_jstr(r->json, "id"));
	free(body);
	return st;
}

START_TEST(create_pulls_and_honours_the_config)
{
	rl_start(RL_PLAIN);
	char *digest = rl_push_image("lab/run", "1", &run_spec);
	pull_setup(NULL);
	char *ref = h_fmt("%s/lab/run:1", rl_host());
	/* Never: the store has none. */
	struct h_resp r;
	long st =
	    create_on(NULL, ref, false, ",\"extensions\":{\"cell.pullPolicy\":\"Never\"}", &r);
	ck_assert_msg(st == 400 && !strcmp(h_err_code(&r), "IMAGE_NOT_FOUND"), "%ld %s", st,
		      r.body);
	h_resp_free(&r);
	/* The first create pulls it. */
	st = create_on(NULL, ref, false, NULL, &r);
	ck_assert_msg(st == 202, "create on %s: %ld %s\n%s", ref, st, r.body, h_celld_log_tail());
	char *id = strdup(h_jstr(r.json, "id"));
	ck_assert_str_eq(json_string_value(json_array_get(h_jget(r.json, "entrypoint"), 0)),
			 "echo");
	h_resp_free(&r);
	json_t *in = h_inspect(id);
	ck_assert_str_eq(h_jstr(in, "imageDigest"), digest);
	json_decref(in);
	/* The config's user, directory and environment; the layers with their whiteout and
	 * opaque directory. */
	char *out = h_trim(h_sh(id, "id -un; pwd; echo $LAB; cat " RL_ADDED "; ls " RL_REMOVED
				    " 2>&1 | grep -c 'No such'; ls " RL_OPAQUE_DIR));
	ck_assert_msg(!strcmp(out, "sandbox\n" RL_SANDBOX_HOME "\n1\nadded by the second "
				   "layer\n1\nnew"),
		      "'%s'", out);
	free(out);
	/* A command's own uid still wins. */
	struct h_exec ex;
	struct h_exec_opts o = {.as_user = true, .uid = 0, .gid = 0};
	ck_assert_int_eq(h_exec(id, "id -u", &o, &ex), 0);
	char *uid = h_trim(h_out_lines(&ex));
	ck_assert_str_eq(uid, "0");
	free(uid);
	h_exec_free(&ex);
	/* In use: not removed; once the sandbox is gone, removed. */
	char *path = h_fmt("/v1/images/%s", ref);
	ck_assert_int_eq(h_http("DELETE", path, NULL, &r), 409);
	ck_assert_msg(strstr(r.body, id), "%s", r.body);
	h_resp_free(&r);
	ck_assert_int_eq(h_delete(id), 204);
	st = h_http("DELETE", path, NULL, NULL);
	ck_assert_msg(st == 200 || st == 204, "rm after: %ld", st);
	free(path);
	free(id);
	free(ref);
	free(digest);
	rl_stop();
}
END_TEST

/* An image pulled with a key's own credentials is that key's: another key must give
 * credentials the registry takes; the operator is the operator. */
START_TEST(private_image_kept_to_its_key)
{
	rl_start(RL_BASIC);
	char *digest = rl_push_image("lab/private", "2", &(struct rl_image_spec){0});
	char *keys = h_fmt("%s/api-keys", H.dir);
	h_write_file(keys, "alice " H_ALICE_KEY "\nbob " H_BOB_KEY "\n", 0600);
	const char *more[] = {"--api-keys-file", keys, NULL};
	pull_setup_with(NULL, NULL, more);
	char *ref = h_fmt("%s/lab/private:2", rl_host());
	struct h_resp r;
	ck_assert_int_eq(create_on(h_alice, ref, true, NULL, &r), 202);
	h_resp_free(&r);
	long st = create_on(h_bob, ref, false, NULL, &r);
	ck_assert_msg(st >= 400, "bob got alice's private image: %ld %s", st, r.body);
	h_resp_free(&r);
	ck_assert_int_eq(create_on(h_bob, ref, true, NULL, &r), 202);
	h_resp_free(&r);
	ck_assert_int_eq(create_on(NULL, ref, false, NULL, &r), 202);
	h_resp_free(&r);
	free(ref);
	free(keys);
	free(digest);
	rl_stop();
}
END_TEST

/* policies/images/limits.json bounds what a pull takes and what the store holds. */
START_TEST(store_bounds_from_the_policy)
{
	rl_start(RL_PLAIN);
	char *digest = rl_push_image("lab/bounds", "1", &multi);
	char *ref = h_fmt("%s/lab/bounds:1", rl_host());
	char *pol = h_policies_with("pol-layers", "images/limits.json", "{\"maxLayers\": 2}");
	const char *more[] = {"--policies", pol, NULL};
	pull_setup_with(NULL, NULL, more);
	free(pull_fails(ref, NULL, NULL, NULL, "maxLayers"));
	free(pol);
	pol = h_policies_with("pol-store", "images/limits.json", "{\"maxStoreBytes\": 4096}");
	const char *more2[] = {"--policies", pol, NULL};
	pull_setup_with(NULL, NULL, more2);
	free(pull_fails(ref, NULL, NULL, NULL, "maxStoreBytes"));
	char *layers = store_path("layers");
	ck_assert_int_eq(count_dir(layers), 0);
	free(layers);
	free(pol);
	/* A bad file refuses the start, naming the field. */
	pol = h_policies_with("pol-bad", "images/limits.json", "{\"maxLayers\": 0}");
	const char *flags[] = {"--policies", pol, NULL};
	struct h_world_opts wo = {.name = "bad", .flags = flags, .unstarted = true};
	struct h_world *w = h_world_add(&wo);
	char why[4096];
	ck_assert(!h_world_spawn(w, why, sizeof(why)));
	ck_assert_msg(strstr(why, "maxLayers"), "%s", why);
	free(pol);
	free(ref);
	free(digest);
	rl_stop();
}
END_TEST

/* The image store's events: of a create's pull as of the API's, its layers, a failure, a
 * tag and a removal; kept for a later reader (since=SEQ), the operator's alone. */
static json_t *image_events(const char *since)
{
	char *path =
	    h_fmt("/v1/images/events?follow=false%s%s", since ? "&since=" : "", since ? since : "");
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	json_t *all = json_array();
	for (char *line = r.body; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (!strncmp(line, "data: ", 6))
			json_array_append_new(all, json_loads(line + 6, 0, NULL));
		line = nl ? nl + 1 : NULL;
	}
	h_resp_free(&r);
	free(path);
	return all;
}

static size_t count_type(json_t *events, const char *type, const char *key, const char *value)
{
	size_t i, n = 0;
	json_t *o;
	json_array_foreach(events, i, o) if (!strcmp(h_jstr(o, "type"), type) &&
					     (!key || !strcmp(h_jstr(o, key), value))) n++;
	return n;
}

START_TEST(image_events_tell_what_the_store_did)
{
	rl_start(RL_PLAIN);
	char *digest = rl_push_image("lab/run", "1", &run_spec);
	pull_setup(NULL);
	char *ref = h_fmt("%s/lab/run:1", rl_host());
	struct h_resp r;
	ck_assert_int_eq(create_on(NULL, ref, false, NULL, &r), 202);
	char *id = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	json_t *ev = image_events(NULL);
	ck_assert_int_eq(count_type(ev, "pull.started", "reference", ref), 1);
	ck_assert_int_eq(count_type(ev, "pull.layer", "state", "done"), 3);
	ck_assert_int_eq(count_type(ev, "pull.done", "digest", digest), 1);
	size_t i;
	json_t *o;
	json_array_foreach(ev, i, o) if (!strcmp(h_jstr(o, "type"), "pull.done"))
	    ck_assert_int_eq(h_jint(o, "layersFetched"), 3);
	json_int_t last = h_jint(json_array_get(ev, json_array_size(ev) - 1), "seq");
	json_decref(ev);

	/* The next: a failed pull, a tag and a removal (only the tag: a sandbox uses the
	 * image), read from where the last left off. */
	char *missing = h_fmt("%s/lab/nothing:1", rl_host());
	free(pull_fails(missing, NULL, NULL, NULL, NULL));
	char *tag_body = h_fmt("{\"source\": \"%s\", \"name\": \"lab/ev:2\"}", ref);
	ck_assert_int_eq(h_http("POST", "/v1/images/tag", tag_body, NULL), 200);
	ck_assert_int_eq(h_http("DELETE", "/v1/images/docker.io/lab/ev:2?force=true", NULL, NULL),
			 200);
	char since[32];
	snprintf(since, sizeof(since), "%lld", (long long)last);
	ev = image_events(since);
	ck_assert_int_eq(count_type(ev, "pull.started", NULL, NULL), 1);
	ck_assert_int_eq(count_type(ev, "pull.failed", "reference", missing), 1);
	ck_assert_int_eq(count_type(ev, "image.tagged", "name", "docker.io/lab/ev:2"), 1);
	ck_assert_int_eq(count_type(ev, "image.removed", "name", "docker.io/lab/ev:2"), 1);
	ck_assert_int_eq(count_type(ev, "pull.done", NULL, NULL), 0);
	ck_assert_int_eq(h_jint(json_array_get(ev, 0), "seq"), last + 1);
	json_decref(ev);

	/* The CLI's reading; a TCP client's is refused (every tenant's pulls are in it). */
	char *out = cli_ok((const char *const[]){"events", "--images", "--since", since, NULL});
	ck_assert_msg(strstr(out, "pull.failed") && strstr(out, "image.removed"), "%s", out);
	free(out);
	struct h_req q = {.method = "GET", .path = "/v1/images/events?follow=false", .via = H_TCP};
	ck_assert_int_eq(h_request(&q, &r), 403);
	h_resp_free(&r);
	ck_assert_int_eq(h_delete(id), 204);
	free(tag_body);
	free(missing);
	free(id);
	free(ref);
	free(digest);
	rl_stop();
}
END_TEST

/* ---- mirrors ---- */

/* A port of 127.0.0.1 nothing listens on: a registry that refuses every connection. */
static int dead_port(void)
{
	int port;
	close(listen_loopback(&port));
	return port;
}

/* registries.conf's mirrors are tried first, in order: one that refuses connections falls
 * through to the next, which serves the image under the registry's own name. Everything
 * stays on 127.0.0.1: the registry itself refuses too, so nothing is asked elsewhere. */
START_TEST(mirrors_are_tried_first_in_order)
{
	rl_start(RL_PLAIN);
	char *digest = rl_push_image("lab/multi", "1", &multi);
	int origin = dead_port(), broken = dead_port();
	char *conf = h_fmt("[[registry]]\nlocation = \"127.0.0.1:%d\"\ninsecure = true\n"
			   "[[registry.mirror]]\nlocation = \"127.0.0.1:%d\"\ninsecure = true\n"
			   "[[registry.mirror]]\nlocation = \"%s\"\ninsecure = true\n",
			   origin, broken, rl_host());
	pull_setup(conf);
	char *ref = h_fmt("127.0.0.1:%d/lab/multi:1", origin);
	json_t *done = pull_ok(ref, NULL, NULL);
	ck_assert_str_eq(h_jstr(done, "name"), ref);
	ck_assert_str_eq(h_jstr(done, "digest"), digest);
	ck_assert_int_eq(h_jint(done, "layersFetched"), 3);
	json_decref(done);
	char *broken_host = h_fmt("127.0.0.1:%d", broken);
	ck_assert_msg(strstr(h_celld_log_tail(), broken_host),
		      "the broken mirror was not tried:\n%s", h_celld_log_tail());
	/* Without the serving mirror: every endpoint refuses, and the error says so. */
	char *conf2 = h_fmt("[[registry]]\nlocation = \"127.0.0.1:%d\"\ninsecure = true\n"
			    "[[registry.mirror]]\nlocation = \"127.0.0.1:%d\"\ninsecure = true\n",
			    origin, broken);
	pull_setup(conf2);
	char *msg = pull_fails(ref, NULL, NULL, NULL, NULL);
	char *origin_host = h_fmt("127.0.0.1:%d", origin);
	ck_assert_msg(strstr(msg, origin_host), "%s", msg);
	free(origin_host);
	free(msg);
	free(conf2);
	free(broken_host);
	free(ref);
	free(conf);
	free(digest);
	rl_stop();
}
END_TEST

/* ---- images unlike cell's own ---- */

/* All of an exec's answer as text: its error event or its non-200 body (malloc'd). */
static char *exec_failure(const struct h_exec *ex)
{
	char *e = ex->error ? json_dumps(ex->error, 0) : NULL;
	char *b = ex->body ? json_dumps(ex->body, 0) : NULL;
	char *all =
	    h_fmt("%ld %s %s %s", ex->status, e ? e : "", b ? b : "", ex->err ? ex->err : "");
	free(e);
	free(b);
	return all;
}

static const char *const bb_sleep[] = {"/bin/busybox", "sleep", "3600", NULL};

/* An Ubuntu-like image: its user (not root), its home, no sudo; a command's uid still wins. */
START_TEST(an_ubuntu_like_image_runs_as_its_user)
{
	rl_start(RL_PLAIN);
	struct rl_image_spec spec = {.flavour = RL_UBUNTU_LIKE,
				     .user = "ubuntu",
				     .workdir = "/home/ubuntu",
				     .cmd = bb_sleep};
	char *digest = rl_push_image("lab/ubuntu", "24.04", &spec);
	pull_setup(NULL);
	char *ref = h_fmt("%s/lab/ubuntu:24.04", rl_host());
	struct h_resp r;
	long st = create_on(NULL, ref, false, NULL, &r);
	ck_assert_msg(st == 202, "create on %s: %ld %s\n%s", ref, st, r.body, h_celld_log_tail());
	char *id = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	char *out = h_trim(h_sh(id, ". /etc/os-release; echo $ID $VERSION_ID; id -un; id -u; pwd; "
				    "command -v sudo || echo no sudo; touch /etc/x 2>&1 | "
				    "grep -c 'Permission denied'"));
	char *want = h_fmt("ubuntu 24.04\nubuntu\n%d\n/home/ubuntu\nno sudo\n1", RL_UBUNTU_UID);
	ck_assert_str_eq(out, want);
	struct h_exec ex;
	struct h_exec_opts o = {.as_user = true, .uid = 0, .gid = 0};
	ck_assert_int_eq(h_exec(id, "id -u; touch /etc/x && echo written", &o, &ex), 0);
	ck_assert_str_eq(ex.out, "0\nwritten\n");
	h_exec_free(&ex);
	ck_assert_int_eq(h_delete(id), 204);
	free(want);
	free(out);
	free(id);
	free(ref);
	free(digest);
	rl_stop();
}
END_TEST

/* A distroless image (no /bin/sh, no /etc/passwd): argv runs; a shell command and a user
 * name get errors that say why. */
START_TEST(a_distroless_image_runs_argv)
{
	rl_start(RL_PLAIN);
	struct rl_image_spec bare = {.flavour = RL_DISTROLESS, .cmd = bb_sleep};
	struct rl_image_spec named = {.flavour = RL_DISTROLESS, .cmd = bb_sleep, .user = "app"};
	char *d1 = rl_push_image("lab/bare", "1", &bare);
	char *d2 = rl_push_image("lab/bare", "named", &named);
	pull_setup(NULL);
	char *ref = h_fmt("%s/lab/bare:1", rl_host());
	struct h_resp r;
	long st = create_on(NULL, ref, false, NULL, &r);
	ck_assert_msg(st == 202, "create on %s: %ld %s\n%s", ref, st, r.body, h_celld_log_tail());
	char *id = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	static const char *const echo[] = {"/bin/busybox", "echo", "argv runs", NULL};
	struct h_exec ex;
	struct h_exec_opts o = {.argv = echo};
	ck_assert_int_eq(h_exec(id, NULL, &o, &ex), 0);
	ck_assert_str_eq(ex.out, "argv runs\n");
	h_exec_free(&ex);
	h_exec(id, "echo hi", NULL, &ex);
	char *why = exec_failure(&ex);
	ck_assert_msg(!ex.complete || ex.exit_code != 0, "a shell command ran: %s", why);
	ck_assert_msg(strstr(why, "no /bin/sh"), "%s", why);
	free(why);
	h_exec_free(&ex);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);

	/* Its user a name the image cannot look up: the create's entrypoint or the command
	 * says so. */
	char *ref2 = h_fmt("%s/lab/bare:named", rl_host());
	st = create_on(NULL, ref2, false, NULL, &r);
	if (st == 202) {
		id = strdup(h_jstr(r.json, "id"));
		h_exec(id, NULL, &o, &ex);
		why = exec_failure(&ex);
		ck_assert_msg(strstr(why, "'app' is not in the sandbox's /etc/passwd"), "%s", why);
		free(why);
		h_exec_free(&ex);
		ck_assert_int_eq(h_delete(id), 204);
		free(id);
	} else {
		ck_assert_msg(strstr(r.body, "'app' is not in the sandbox's /etc/passwd"), "%ld %s",
			      st, r.body);
	}
	h_resp_free(&r);
	free(ref2);
	free(ref);
	free(d1);
	free(d2);
	rl_stop();
}
END_TEST

/* ---- a pull cut by a celld killed mid-blob ---- */

/* A TCP proxy to the lab registry that passes at most hold_at bytes of any one answer and
 * then holds the rest until released: a big blob's download stops mid-way, where the test
 * wants it, however fast the machine. */
struct holdproxy {
	int lfd, port, upstream;
	uint64_t hold_at;
	atomic_bool released, holding;
};

struct hp_conn {
	struct holdproxy *hp;
	int cfd;
};

static void *hp_conn_serve(void *arg)
{
	struct hp_conn *c = arg;
	struct holdproxy *hp = c->hp;
	int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(0x7f000001),
				.sin_port = htons((uint16_t)hp->upstream)};
	uint64_t down = 0;
	enum { BUF = 1 << 16 };
	char *buf = malloc(BUF);
	if (u >= 0 && buf && connect(u, (struct sockaddr *)&a, sizeof(a)) == 0) {
		for (;;) {
			bool held = !atomic_load(&hp->released) && down >= hp->hold_at;
			if (held)
				atomic_store(&hp->holding, true);
			struct pollfd pf[2] = {{.fd = c->cfd, .events = POLLIN},
					       {.fd = held ? -1 : u, .events = POLLIN}};
			if (poll(pf, 2, held ? 50 : -1) < 0)
				break;
			if (pf[0].revents) {
				ssize_t n = read(c->cfd, buf, BUF);
				if (n <= 0 || !write_all(u, buf, (size_t)n))
					break;
			}
			if (pf[1].revents) {
				size_t want = BUF;
				if (!atomic_load(&hp->released) && hp->hold_at - down < want)
					want = (size_t)(hp->hold_at - down);
				ssize_t n = read(u, buf, want);
				if (n <= 0 || !write_all(c->cfd, buf, (size_t)n))
					break;
				down += (uint64_t)n;
			}
		}
	}
	if (u >= 0)
		close(u);
	close(c->cfd);
	free(buf);
	free(c);
	return NULL;
}

static void *hp_accept(void *arg)
{
	struct holdproxy *hp = arg;
	for (;;) {
		int cfd = accept4(hp->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0)
			return NULL;
		struct hp_conn *c = malloc(sizeof(*c));
		*c = (struct hp_conn){hp, cfd};
		pthread_t t;
		pthread_create(&t, NULL, hp_conn_serve, c);
		pthread_detach(t);
	}
}

static struct holdproxy *holdproxy_start(uint64_t hold_at)
{
	struct holdproxy *hp = calloc(1, sizeof(*hp));
	hp->hold_at = hold_at;
	hp->upstream = atoi(strrchr(rl_host(), ':') + 1);
	hp->lfd = listen_loopback(&hp->port);
	pthread_t t;
	pthread_create(&t, NULL, hp_accept, hp);
	pthread_detach(t);
	return hp;
}

static long long file_size(const char *path)
{
	struct stat s;
	return stat(path, &s) == 0 ? (long long)s.st_size : -1;
}

/* Every layer of the store is whole: its record written (a layer arrives by one rename of
 * a dir that has it), nothing left in tmp/. */
static void store_whole(void)
{
	char *tmp = store_path("tmp"), *layers = store_path("layers");
	DIR *t = opendir(tmp);
	for (struct dirent *de; t && (de = readdir(t));) {
		if (de->d_name[0] != '.')
			fprintf(stderr, "tmp/%s left; celld's log:\n%s\n", de->d_name,
				h_celld_log_tail());
		ck_assert_msg(de->d_name[0] == '.', "tmp/%s left", de->d_name);
	}
	if (t)
		closedir(t);
	DIR *d = opendir(layers);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char *rec = h_fmt("%s/%s/layer.json", layers, de->d_name);
		ck_assert_msg(access(rec, F_OK) == 0, "layer %s has no record", de->d_name);
		free(rec);
	}
	if (d)
		closedir(d);
	free(tmp);
	free(layers);
}

/* A pull whose celld is killed (SIGKILL) with a big blob half in partial/: the restarted
 * celld lists nothing of it, and the next pull resumes the blob with a Range (fetching
 * fewer bytes than it has) into an image whole in every layer. */
/* An image cell built may name, in its manifest.json, the entrypoint its sandboxes run when
 * a create names none (the code-interpreter image starts its service so): it runs; a
 * create's own entrypoint wins; a manifest whose entrypoint is no list of strings fails the
 * create naming the file, as celld's failure (500), not the client's. A world of its own
 * with a private images dir holding a copy of busybox under three manifests. */
static void built_image(const char *images, const char *name, const char *manifest)
{
	char *dir = h_fmt("%s/%s", images, name);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	char *src = h_fmt("%s/busybox/rootfs", H.images);
	char *dst = h_fmt("%s/rootfs", dir);
	char *const argv[] = {"/bin/cp", "-a", src, dst, NULL};
	struct h_proc p;
	ck_assert_msg(h_run(argv, NULL, 120, &p) == 0, "cp -a %s %s: %s", src, dst, p.err);
	h_proc_free(&p);
	char *m = h_fmt("%s/manifest.json", dir);
	h_write_file(m, manifest, 0644);
	free(m);
	free(dst);
	free(src);
	free(dir);
}

START_TEST(a_built_image_names_its_entrypoint)
{
	char *images = h_fmt("%s/own-images", H.dir);
	ck_assert_int_eq(mkdir(images, 0755), 0);
	built_image(images, "withep",
		    "{\"name\": \"withep\", \"entrypoint\": [\"/bin/sh\", \"-c\", "
		    "\"echo image-entrypoint > /tmp/ep; exec sleep 1000\"]}\n");
	built_image(images, "badep", "{\"name\": \"badep\", \"entrypoint\": \"/bin/true\"}\n");
	struct h_world *w = h_world_add(&(struct h_world_opts){.name = "ep", .images = images});
	char *id = h_world_create(w, "withep", NULL);
	ck_assert_str_eq(h_world_wait_state(w, id, "Running", 30), "Running");
	char *out = NULL;
	for (int i = 0; i < 100 && !(out && strstr(out, "image-entrypoint")); i++, h_sleep_ms(50)) {
		free(out);
		out = h_world_sh(w, id, "cat /tmp/ep 2>/dev/null; true");
	}
	ck_assert_msg(strstr(out, "image-entrypoint"), "the image's entrypoint did not run: %s",
		      out);
	free(out);
	free(id);

	json_t *own = json_pack("{s:[s,s,s]}", "entrypoint", "/bin/sh", "-c",
				"echo own > /tmp/ep; exec sleep 1000");
	id = h_world_create(w, "withep", own);
	ck_assert_str_eq(h_world_wait_state(w, id, "Running", 30), "Running");
	out = NULL;
	for (int i = 0; i < 100 && !(out && strstr(out, "own")); i++, h_sleep_ms(50)) {
		free(out);
		out = h_world_sh(w, id, "cat /tmp/ep 2>/dev/null; true");
	}
	ck_assert_msg(!strcmp(out, "own\n"), "the create's entrypoint did not win: %s", out);
	free(out);
	free(id);

	struct h_resp r;
	long st = h_world_create_ex(w, "badep", NULL, H_UNIX, &r);
	ck_assert_msg(st == 500, "a bad manifest: %ld %s", st, r.body);
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "badep/manifest.json"), "%s", r.body);
	h_resp_free(&r);
	free(images);
}
END_TEST

START_TEST(pull_survives_a_celld_restart)
{
	rl_start(RL_PLAIN);
	struct rl_image_spec spec = multi;
	spec.big_layer = 48u << 20;
	char *digest = rl_push_image("lab/big", "1", &spec);
	char *want_sha = strdup(rl_big_sha256());
	json_t *m = lab_manifest("lab/big", "1");
	json_t *layers = json_object_get(m, "layers");
	ck_assert_msg(json_array_size(layers) == 4, "%s", json_dumps(m, 0));
	const char *blob = h_jstr(json_array_get(layers, 3), "digest");
	long long size = h_jint(json_array_get(layers, 3), "size"), others = layers_size(m, 0, 3);
	ck_assert_int_gt(size, 40ll << 20);
	struct holdproxy *hp = holdproxy_start(8u << 20);
	char *c = h_fmt("[[registry]]\nlocation = \"127.0.0.1:%d\"\ninsecure = true\n", hp->port);
	pull_setup(c);
	char *ref = h_fmt("127.0.0.1:%d/lab/big:1", hp->port);
	char *rel = h_fmt("partial/%s", blob + 7);
	char *part = store_path(rel);

	/* The first pull, by a client that dies with its celld. */
	char *cell = h_fmt("%s/cell", H.bin), *log = h_fmt("%s/pull-1.log", H.dir);
	char *const argv[] = {cell, "--socket", H.socket, "image", "pull", ref, NULL};
	pid_t client = h_spawn_log(argv, log);
	for (int i = 0; i < 2400 && !(atomic_load(&hp->holding) && file_size(part) > 0); i++)
		usleep(50000);
	ck_assert_msg(atomic_load(&hp->holding) && file_size(part) > 0,
		      "the big blob never reached partial/\n%s", h_celld_log_tail());
	h_celld_kill();
	waitpid(client, NULL, 0);
	long long have = file_size(part);
	ck_assert_msg(have > 0 && have < size, "partial %lld of %lld", have, size);

	/* Restarted: the image is not listed, no half layer anywhere, the blob kept. */
	h_celld_start();
	ck_assert_ptr_null(listed(ref));
	store_whole();
	ck_assert_int_eq(file_size(part), have);

	/* Pulled again: the blob resumed where it stopped. */
	atomic_store(&hp->released, true);
	json_t *done = pull_ok(ref, NULL, NULL);
	ck_assert_str_eq(h_jstr(done, "digest"), digest);
	long long fetched = h_jint(done, "fetchedBytes");
	ck_assert_msg(fetched >= size - have && fetched <= size - have + others && fetched < size,
		      "fetched %lld: the blob is %lld, %lld of it was kept", fetched, size, have);
	char *resumed = h_fmt("resuming blob %s at %lld", blob, have);
	ck_assert_msg(strstr(h_celld_log_tail(), resumed), "no '%s' in\n%s", resumed,
		      h_celld_log_tail());
	ck_assert_int_eq(file_size(part), -1);
	store_whole();
	json_decref(done);

	/* Whole: a file of each layer, the big one by its digest. */
	char *id = h_create(ref, NULL);
	char *out =
	    h_trim(h_sh(id, "sha256sum " RL_BIG_FILE " | cut -d' ' -f1; cat " RL_ADDED
			    "; ls " RL_OPAQUE_DIR "; ls " RL_REMOVED " 2>&1 | grep -c 'No such'"));
	char *want = h_fmt("%s\nadded by the second layer\nnew\n1", want_sha);
	ck_assert_str_eq(out, want);
	ck_assert_int_eq(h_delete(id), 204);
	free(want);
	free(out);
	free(id);
	free(resumed);
	free(cell);
	free(log);
	free(part);
	free(rel);
	free(ref);
	free(c);
	json_decref(m);
	free(want_sha);
	free(digest);
	rl_stop();
}
END_TEST

static Suite *images_suite(void)
{
	Suite *s = suite_create("images");
	tcase_add_test(h_tcase(s, "plain_pull_list_inspect_remove", 300),
		       plain_pull_list_inspect_remove);
	tcase_add_test(h_tcase(s, "short_name_through_the_search_list", 300),
		       short_name_through_the_search_list);
	tcase_add_test(h_tcase(s, "tls_with_a_certs_dir", 300), tls_with_a_certs_dir);
	tcase_add_test(h_tcase(s, "basic_auth_from_the_request_and_the_auth_file", 300),
		       basic_auth_from_the_request_and_the_auth_file);
	tcase_add_test(h_tcase(s, "token_auth", 300), token_auth);
	tcase_add_test(h_tcase(s, "manifest_list_picks_the_host_arch", 300),
		       manifest_list_picks_the_host_arch);
	tcase_add_test(h_tcase(s, "docker_schema2_and_zstd", 300), docker_schema2_and_zstd);
	tcase_add_test(h_tcase(s, "a_second_image_fetches_only_its_new_layers", 300),
		       a_second_image_fetches_only_its_new_layers);
	tcase_add_test(h_tcase(s, "two_concurrent_pulls_download_once", 300),
		       two_concurrent_pulls_download_once);
	tcase_add_test(h_tcase(s, "a_partial_blob_is_resumed_and_a_corrupt_one_fetched_whole", 300),
		       a_partial_blob_is_resumed_and_a_corrupt_one_fetched_whole);
	tcase_add_test(h_tcase(s, "a_corrupted_blob_is_refused_and_the_store_unchanged", 300),
		       a_corrupted_blob_is_refused_and_the_store_unchanged);
	tcase_add_test(h_tcase(s, "registries_that_lie_or_stall", 300),
		       registries_that_lie_or_stall);
	tcase_add_test(h_tcase(s, "cli_pull_ls_inspect_tag_rm_prune", 300),
		       cli_pull_ls_inspect_tag_rm_prune);
	tcase_add_test(h_tcase(s, "cli_run_pulls_cold_then_warm", 240),
		       cli_run_pulls_cold_then_warm);
	tcase_add_test(h_tcase(s, "create_pulls_and_honours_the_config", 240),
		       create_pulls_and_honours_the_config);
	tcase_add_test(h_tcase(s, "private_image_kept_to_its_key", 240),
		       private_image_kept_to_its_key);
	tcase_add_test(h_tcase(s, "store_bounds_from_the_policy", 240),
		       store_bounds_from_the_policy);
	tcase_add_test(h_tcase(s, "image_events_tell_what_the_store_did", 240),
		       image_events_tell_what_the_store_did);
	tcase_add_test(h_tcase(s, "pull_survives_a_celld_restart", 300),
		       pull_survives_a_celld_restart);
	tcase_add_test(h_tcase(s, "mirrors_are_tried_first_in_order", 240),
		       mirrors_are_tried_first_in_order);
	tcase_add_test(h_tcase(s, "an_ubuntu_like_image_runs_as_its_user", 240),
		       an_ubuntu_like_image_runs_as_its_user);
	tcase_add_test(h_tcase(s, "a_distroless_image_runs_argv", 240),
		       a_distroless_image_runs_argv);
	tcase_add_test(h_tcase(s, "a_built_image_names_its_entrypoint", 240),
		       a_built_image_names_its_entrypoint);
	return s;
}

int main(void)
{
	return h_main(images_suite());
}
