/* The registry test lab (registry_lab.h) proves itself: each of its four modes with skopeo
 * and libcurl (the auth modes answer 401 with their WWW-Authenticate, refuse no and wrong
 * credentials; TLS is refused without the test CA), the images it builds read back through
 * src/celld/oci_image.c (layers, whiteouts, opaque dirs, config, Docker schema 2, zstd, an
 * index of two architectures), the registry listening on 127.0.0.1 alone and gone after
 * rl_stop. */
#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/celld/oci_image.h"
#include "cell/codec.h"
#include "harness.h"
#include "registry_lab.h"

#define OCI_MANIFEST_TYPE    "application/vnd.oci.image.manifest.v1+json"
#define OCI_INDEX_TYPE	     "application/vnd.oci.image.index.v1+json"
#define DOCKER_MANIFEST_TYPE "application/vnd.docker.distribution.manifest.v2+json"

static const char *const lab_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LAB=1", NULL};
static const char *const lab_entrypoint[] = {RL_ENTRYPOINT_PATH, NULL};
static const char *const lab_cmd[] = {"sleep", "3600", NULL};
/* skopeo's flags */
static const char *const no_verify[] = {"--tls-verify=false", NULL};
static const char *const verify[] = {"--tls-verify=true", NULL};
static const char *const no_creds[] = {"--tls-verify=false", "--no-creds", NULL};
static const char *const wrong_creds[] = {"--tls-verify=false", "--creds", RL_USER ":wrong", NULL};
static const char *const lab_creds[] = {"--tls-verify=false", "--creds", RL_USER ":" RL_PASS, NULL};

/* ---- checks ---- */

/* GET path (a manifest or blob), asserting 200; the answer. */
static void get_ok(const char *path, struct rl_resp *r)
{
	rl_http("GET", path, NULL, r);
	ck_assert_msg(r->status == 200, "GET %s: %ld (curl %d) %s\n%s", path, r->status,
		      r->curl_code, r->body, rl_log_tail());
}

/* The manifest name:ref parsed by oci_image.c, its bytes checked against its digest. */
static void get_manifest(const char *name, const char *ref, struct oci_manifest *m, char **digest)
{
	char *path = h_fmt("/v2/%s/manifests/%s", name, ref);
	struct rl_resp r;
	get_ok(path, &r);
	struct cell_error err = {0};
	ck_assert_msg(oci_manifest_parse(r.body, r.len, r.content_type, NULL, m, &err) == 0,
		      "%s: %s", path, err.msg);
	struct oci_digest want, got;
	ck_assert_ptr_nonnull(r.digest);
	ck_assert_int_eq(oci_digest_parse(r.digest, &want, &err), 0);
	ck_assert_int_eq(oci_digest_of(r.body, r.len, OCI_DIGEST_SHA256, &got), 0);
	ck_assert_msg(oci_digest_equal(&want, &got), "%s: the bytes are %s, the header says %s",
		      path, got.text, want.text);
	if (digest)
		*digest = strdup(r.digest);
	rl_resp_free(&r);
	free(path);
}

/* A blob, verified by a streaming digest against d. */
static void get_blob(const char *name, const struct oci_descriptor *d, struct rl_resp *r)
{
	char *path = h_fmt("/v2/%s/blobs/%s", name, d->digest.text);
	get_ok(path, r);
	ck_assert_int_eq((int64_t)r->len, d->size);
	struct oci_digester v;
	struct cell_error err = {0};
	ck_assert_int_eq(oci_digest_init(&v, d->digest.alg), 0);
	for (size_t off = 0; off < r->len; off += 4096)
		ck_assert_int_eq(
		    oci_digest_update(&v, r->body + off, r->len - off < 4096 ? r->len - off : 4096),
		    0);
	ck_assert_msg(oci_digest_verify(&v, &d->digest, &err) == 0, "%s: %s", path, err.msg);
	free(path);
}

static void get_config(const char *name, const struct oci_manifest *m, struct oci_config *c)
{
	struct rl_resp r;
	get_blob(name, &m->config, &r);
	struct cell_error err = {0};
	ck_assert_msg(oci_config_parse(r.body, r.len, NULL, c, &err) == 0, "config: %s", err.msg);
	ck_assert_msg(oci_config_check_layers(c, m, &err) == 0, "%s", err.msg);
	rl_resp_free(&r);
}

/* The names of a layer's entries (`tar -tf`, which reads gzip by itself), one a line. */
static char *layer_listing(const char *name, const struct oci_descriptor *d)
{
	struct rl_resp r;
	get_blob(name, d, &r);
	char *file = h_fmt("%s/layer.tar.gz", rl_dir());
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, r.body, r.len), (ssize_t)r.len);
	close(fd);
	rl_resp_free(&r);
	char *const argv[] = {"/usr/bin/tar", "-tzf", file, NULL};
	struct h_proc p;
	h_run(argv, NULL, 30, &p);
	ck_assert_msg(p.status == 0, "tar -tzf: %s", p.err);
	unlink(file);
	free(file);
	char *out = h_fmt("\n%s", p.out);
	h_proc_free(&p);
	return out;
}

#define ck_lists(listing, entry)                                                                   \
	ck_assert_msg(strstr(listing, "\n" entry "\n"), "no '%s' in the layer:%s", entry, listing)

/* Every TCP and UDP socket the process has is a TCP listener on 127.0.0.1:port. */
static void ck_listens_on_loopback_only(pid_t pid, unsigned port)
{
	char *fddir = h_fmt("/proc/%d/fd", (int)pid);
	DIR *d = opendir(fddir);
	ck_assert_ptr_nonnull(d);
	unsigned long inodes[256];
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < 256) {
		char link[64], *p = h_fmt("%s/%s", fddir, e->d_name);
		ssize_t l = readlink(p, link, sizeof(link) - 1);
		free(p);
		if (l > 0) {
			link[l] = '\0';
			if (sscanf(link, "socket:[%lu]", &inodes[n]) == 1)
				n++;
		}
	}
	closedir(d);
	free(fddir);
	static const char *const tables[] = {"tcp", "tcp6", "udp", "udp6"};
	unsigned listeners = 0;
	for (size_t t = 0; t < 4; t++) {
		char *path = h_fmt("/proc/%d/net/%s", (int)pid, tables[t]);
		FILE *f = fopen(path, "re");
		ck_assert_ptr_nonnull(f);
		char line[512];
		ck_assert_ptr_nonnull(fgets(line, sizeof(line), f)); /* the header */
		while (fgets(line, sizeof(line), f)) {
			char local[64];
			unsigned st;
			unsigned long ino;
			if (sscanf(line, "%*s %63s %*s %x %*s %*s %*s %*s %*s %lu", local, &st,
				   &ino) != 3)
				continue;
			bool ours = false;
			for (size_t i = 0; i < n; i++)
				ours |= inodes[i] == ino;
			if (!ours || (t == 0 && st != 0x0A))
				continue; /* others' sockets; the registry's own connections */
			char want[32];
			snprintf(want, sizeof(want), "0100007F:%04X", port);
			ck_assert_msg(t == 0 && !strcmp(local, want),
				      "the registry has a %s socket on %s (state %x)", tables[t],
				      local, st);
			listeners++;
		}
		fclose(f);
		free(path);
	}
	ck_assert_uint_eq(listeners, 1);
}

static bool port_open(unsigned port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	bool open_ = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return open_;
}

static void ck_stops(void)
{
	pid_t pid = rl_pid();
	unsigned port = rl_port();
	char *dir = strdup(rl_dir());
	rl_stop();
	ck_assert_msg(!h_pid_alive(pid), "docker-registry %d outlived rl_stop", (int)pid);
	ck_assert_msg(!port_open(port), "127.0.0.1:%u still answers", port);
	struct stat st;
	ck_assert_msg(lstat(dir, &st) < 0 && errno == ENOENT, "%s left behind", dir);
	free(dir);
}

/* skopeo inspect of ref with extra flags (NULL-terminated); its exit status, output in *out
 * (malloc'd) when out is not NULL. */
static int inspect(const char *ref, const char *const *flags, char **out)
{
	const char *args[16] = {"inspect", "--raw"};
	int n = 2;
	for (size_t i = 0; flags && flags[i]; i++)
		args[n++] = flags[i];
	char *url = h_fmt("docker://%s/%s", rl_host(), ref);
	args[n++] = url;
	args[n] = NULL;
	struct h_proc p;
	int status = rl_skopeo(&p, args);
	if (out)
		*out = h_fmt("%s%s", p.out, p.err);
	h_proc_free(&p);
	free(url);
	return status;
}

/* skopeo reads ref with the lab's credentials, and not without them or with wrong ones. */
static void ck_skopeo_needs_creds(const char *ref)
{
	char *out = NULL;
	ck_assert_msg(inspect(ref, lab_creds, &out) == 0, "%s", out);
	free(out);
	ck_assert_int_ne(inspect(ref, no_creds, NULL), 0);
	ck_assert_int_ne(inspect(ref, wrong_creds, NULL), 0);
}

static char *www_authenticate(const char *path, struct oci_challenge *c)
{
	struct rl_resp r;
	rl_http("GET", path, &(struct rl_http_opts){.anonymous = true}, &r);
	ck_assert_msg(r.status == 401, "anonymous GET %s: %ld", path, r.status);
	ck_assert_ptr_nonnull(r.www_authenticate);
	struct cell_error err = {0};
	ck_assert_msg(oci_www_auth_parse(r.www_authenticate, c, 1, &err) == 1, "'%s': %s",
		      r.www_authenticate, err.msg);
	char *h = strdup(r.www_authenticate);
	rl_resp_free(&r);
	return h;
}

/* ---- tests ---- */

START_TEST(plain_multi_layer)
{
	rl_start(RL_PLAIN);
	ck_assert(!strncmp(rl_url(), "http://127.0.0.1:", 17));
	ck_assert_ptr_null(rl_creds());
	ck_listens_on_loopback_only(rl_pid(), rl_port());
	struct rl_image_spec spec = {.multi_layer = true,
				     .env = lab_env,
				     .workdir = RL_SANDBOX_HOME,
				     .user = "sandbox",
				     .entrypoint = lab_entrypoint,
				     .cmd = lab_cmd};
	char *digest = rl_push_image("lab/multi", "1", &spec);

	struct oci_manifest m;
	char *got;
	get_manifest("lab/multi", "1", &m, &got);
	ck_assert_str_eq(got, digest);
	ck_assert_int_eq(m.media, OCI_MEDIA_OCI_MANIFEST);
	ck_assert_int_eq(m.config.media, OCI_MEDIA_OCI_CONFIG);
	ck_assert_uint_eq(m.n_layers, 3);
	for (unsigned i = 0; i < m.n_layers; i++)
		ck_assert_int_eq(m.layers[i].media, OCI_MEDIA_OCI_LAYER_GZIP);
	/* by digest, too */
	struct oci_manifest m2;
	get_manifest("lab/multi", digest, &m2, NULL);
	oci_manifest_free(&m2);

	struct oci_config c;
	get_config("lab/multi", &m, &c);
	ck_assert_uint_eq(c.n_env, 2);
	ck_assert_str_eq(c.env[1], "LAB=1");
	ck_assert_str_eq(c.workdir, RL_SANDBOX_HOME);
	ck_assert_str_eq(c.user, "sandbox");
	ck_assert(c.has_entrypoint && c.n_entrypoint == 1);
	ck_assert_str_eq(c.entrypoint[0], RL_ENTRYPOINT_PATH);
	ck_assert(c.has_cmd && c.n_cmd == 2);
	ck_assert_str_eq(c.cmd[1], "3600");
	struct oci_platform amd64 = {"linux", "amd64", ""};
	struct cell_error err = {0};
	ck_assert_int_eq(oci_config_check_platform(&c, &amd64, &err), 0);
	oci_config_free(&c);

	char *l1 = layer_listing("lab/multi", &m.layers[0]);
	ck_lists(l1, "bin/busybox");
	ck_lists(l1, "bin/sh");
	ck_lists(l1, "etc/passwd");
	ck_lists(l1, "etc/cell-lab/removed");
	ck_lists(l1, "opt/lab/old");
	ck_lists(l1, "home/sandbox/entrypoint.sh");
	char *l2 = layer_listing("lab/multi", &m.layers[1]);
	ck_lists(l2, "etc/cell-lab/.wh.removed");
	ck_lists(l2, "etc/cell-lab/added");
	ck_assert_msg(!strstr(l2, "bin/busybox"), "layer 2 is no diff:%s", l2);
	char *l3 = layer_listing("lab/multi", &m.layers[2]);
	ck_lists(l3, "opt/lab/.wh..wh..opq");
	ck_lists(l3, "opt/lab/new");
	free(l1);
	free(l2);
	free(l3);
	oci_manifest_free(&m);

	/* the lab's registries.conf, read by cell's reader, says where and how */
	char *conf = h_fmt("%s/registries.conf", rl_dir());
	struct oci_regconf *rc = NULL;
	ck_assert_msg(oci_regconf_load(NULL, NULL, conf, &rc, &err) == 0, "%s", err.msg);
	char *refs = h_fmt("%s/lab/multi:1", rl_host());
	struct oci_ref ref;
	ck_assert_int_eq(oci_ref_parse(refs, &ref, &err), 0);
	struct oci_endpoint ep[OCI_ENDPOINTS_MAX];
	ck_assert_int_eq(oci_regconf_endpoints(rc, &ref, ep, &err), 1);
	ck_assert_str_eq(ep[0].registry, rl_host());
	ck_assert_str_eq(ep[0].path, "lab/multi");
	ck_assert(ep[0].insecure);
	free(rc);
	free(refs);
	free(conf);
	ck_assert_int_eq(inspect("lab/multi:1", no_verify, NULL), 0);
	free(got);
	free(digest);
	ck_stops();
}
END_TEST

START_TEST(docker_format_and_zstd)
{
	rl_start(RL_PLAIN);
	struct rl_image_spec docker = {.docker_format = true, .cmd = lab_cmd};
	free(rl_push_image("lab/docker", "1", &docker));
	struct oci_manifest m;
	get_manifest("lab/docker", "1", &m, NULL);
	ck_assert_int_eq(m.media, OCI_MEDIA_DOCKER_MANIFEST);
	ck_assert_int_eq(m.config.media, OCI_MEDIA_DOCKER_CONFIG);
	ck_assert_uint_eq(m.n_layers, 1);
	ck_assert_int_eq(m.layers[0].media, OCI_MEDIA_DOCKER_LAYER_GZIP);
	struct oci_config c;
	get_config("lab/docker", &m, &c);
	ck_assert(c.has_cmd && !strcmp(c.cmd[0], "sleep"));
	oci_config_free(&c);
	oci_manifest_free(&m);

	/* zstd: the media type says so and the bytes are zstd (magic 28 b5 2f fd), not a
	 * gzip blob a cache handed back */
	struct rl_image_spec zstd = {.multi_layer = true, .zstd = true};
	free(rl_push_image("lab/zstd", "1", &zstd));
	get_manifest("lab/zstd", "1", &m, NULL);
	ck_assert_uint_eq(m.n_layers, 3);
	for (unsigned i = 0; i < m.n_layers; i++) {
		enum oci_compression comp;
		struct cell_error err = {0};
		ck_assert_int_eq(oci_layer_compression(m.layers[i].media_type, &comp, &err), 0);
		ck_assert_int_eq(comp, OCI_COMPRESSION_ZSTD);
		struct rl_resp r;
		get_blob("lab/zstd", &m.layers[i], &r);
		ck_assert_msg(r.len > 4 && !memcmp(r.body, "\x28\xb5\x2f\xfd", 4),
			      "layer %u is not zstd: %02x %02x", i, (unsigned char)r.body[0],
			      (unsigned char)r.body[1]);
		rl_resp_free(&r);
	}
	oci_manifest_free(&m);
	ck_stops();
}
END_TEST

START_TEST(manifest_list)
{
	rl_start(RL_PLAIN);
	static const char *const archs[] = {"amd64", "arm64", NULL};
	struct rl_image_spec spec = {.archs = archs};
	char *digest = rl_push_image("lab/multiarch", "1", &spec);
	char *path = h_fmt("/v2/lab/multiarch/manifests/1");
	struct rl_resp r;
	get_ok(path, &r);
	ck_assert_str_eq(r.digest, digest);
	ck_assert_str_eq(r.content_type, OCI_INDEX_TYPE);
	struct cell_error err = {0};
	enum oci_media media;
	ck_assert_int_eq(oci_doc_media(r.body, r.len, r.content_type, NULL, &media, &err), 0);
	ck_assert_int_eq(media, OCI_MEDIA_OCI_INDEX);
	struct oci_platform amd64 = {"linux", "amd64", ""}, arm64 = {"linux", "arm64", ""};
	struct oci_platform s390x = {"linux", "s390x", ""};
	struct oci_descriptor d_amd, d_arm, d;
	ck_assert_msg(oci_index_choose(r.body, r.len, r.content_type, &amd64, NULL, &d_amd, &err) ==
			  0,
		      "%s", err.msg);
	ck_assert_int_eq(
	    oci_index_choose(r.body, r.len, r.content_type, &arm64, NULL, &d_arm, &err), 0);
	ck_assert_int_eq(oci_index_choose(r.body, r.len, r.content_type, &s390x, NULL, &d, &err),
			 -ENOENT);
	ck_assert_str_eq(err.msg, "no image for linux/s390x in the index; it offers: linux/amd64, "
				  "linux/arm64/v8");
	rl_resp_free(&r);
	free(path);

	const struct {
		const char *tag, *arch;
		const struct oci_descriptor *d;
	} each[] = {{"1-amd64", "amd64", &d_amd}, {"1-arm64", "arm64", &d_arm}};
	for (size_t i = 0; i < 2; i++) {
		struct oci_manifest m;
		char *dg;
		get_manifest("lab/multiarch", each[i].tag, &m, &dg);
		ck_assert_str_eq(dg, each[i].d->digest.text);
		struct oci_config c;
		get_config("lab/multiarch", &m, &c);
		ck_assert_str_eq(c.platform.arch, each[i].arch);
		ck_assert_int_eq(oci_config_check_platform(&c, i ? &arm64 : &amd64, &err), 0);
		ck_assert_int_eq(oci_config_check_platform(&c, i ? &amd64 : &arm64, &err),
				 -ENOEXEC);
		oci_config_free(&c);
		oci_manifest_free(&m);
		free(dg);
	}
	free(digest);
	ck_stops();
}
END_TEST

START_TEST(tls_with_test_ca)
{
	rl_start(RL_TLS);
	ck_assert(!strncmp(rl_url(), "https://127.0.0.1:", 18));
	ck_assert_ptr_nonnull(rl_ca_path());
	ck_listens_on_loopback_only(rl_pid(), rl_port());
	struct rl_resp r;
	ck_assert_int_eq(rl_http("GET", "/v2/", NULL, &r), 200);
	rl_resp_free(&r);
	/* without the CA: no answer at all, the certificate refused */
	rl_http("GET", "/v2/", &(struct rl_http_opts){.no_ca = true}, &r);
	ck_assert_int_eq(r.status, 0);
	ck_assert_int_eq(r.curl_code, CURLE_PEER_FAILED_VERIFICATION);
	rl_resp_free(&r);

	struct rl_image_spec spec = {.cmd = lab_cmd};
	free(rl_push_image("lab/tls", "1", &spec));
	char *certs = h_fmt("--cert-dir=%s", rl_cert_dir());
	char *out = NULL;
	const char *const with_ca[] = {"--tls-verify=true", certs, NULL};
	ck_assert_msg(inspect("lab/tls:1", with_ca, &out) == 0, "skopeo with the CA: %s", out);
	free(out);
	ck_assert_int_ne(inspect("lab/tls:1", verify, &out), 0);
	ck_assert_msg(strstr(out, "certificate") || strstr(out, "x509"),
		      "skopeo without the CA: %s", out);
	free(out);
	free(certs);
	struct oci_manifest m;
	get_manifest("lab/tls", "1", &m, NULL);
	oci_manifest_free(&m);
	ck_stops();
}
END_TEST

START_TEST(basic_auth)
{
	rl_start(RL_BASIC);
	ck_assert_str_eq(rl_creds(), RL_USER ":" RL_PASS);
	struct oci_challenge c;
	char *h = www_authenticate("/v2/", &c);
	ck_assert_msg(c.scheme == OCI_AUTH_BASIC && !strcmp(c.realm, "cell-lab"), "'%s'", h);
	free(h);
	struct rl_resp r;
	ck_assert_int_eq(rl_http("GET", "/v2/", &(struct rl_http_opts){.pass = "wrong"}, &r), 401);
	rl_resp_free(&r);
	ck_assert_int_eq(rl_http("GET", "/v2/", &(struct rl_http_opts){.user = "nobody"}, &r), 401);
	rl_resp_free(&r);
	ck_assert_int_eq(rl_http("GET", "/v2/", NULL, &r), 200);
	rl_resp_free(&r);

	struct rl_image_spec spec = {.cmd = lab_cmd};
	free(rl_push_image("lab/basic", "1", &spec));
	struct oci_manifest m;
	get_manifest("lab/basic", "1", &m, NULL);
	oci_manifest_free(&m);
	ck_assert_int_eq(rl_http("GET", "/v2/lab/basic/manifests/1",
				 &(struct rl_http_opts){.anonymous = true}, &r),
			 401);
	rl_resp_free(&r);
	ck_skopeo_needs_creds("lab/basic:1");
	ck_stops();
}
END_TEST

/* The claims of a JWT (its middle part), parsed. */
static json_t *jwt_claims(const char *jwt)
{
	const char *a = strchr(jwt, '.'), *b = a ? strchr(a + 1, '.') : NULL;
	ck_assert_ptr_nonnull(b);
	char *part = strndup(a + 1, (size_t)(b - a - 1));
	size_t n = strlen(part);
	char *std = calloc(1, n + 4);
	for (size_t i = 0; i < n; i++)
		std[i] = part[i] == '-' ? '+' : part[i] == '_' ? '/' : part[i];
	while (strlen(std) % 4)
		strcat(std, "=");
	uint8_t *raw = NULL;
	size_t rlen = 0;
	ck_assert_int_eq(cell_base64_decode(std, strlen(std), &raw, &rlen), 0);
	json_t *j = json_loadb((const char *)raw, rlen, 0, NULL);
	ck_assert_ptr_nonnull(j);
	free(raw);
	free(std);
	free(part);
	return j;
}

START_TEST(token_auth)
{
	rl_start(RL_TOKEN);
	ck_assert_ptr_nonnull(rl_token_url());
	struct oci_challenge c;
	char *h = www_authenticate("/v2/", &c);
	ck_assert_msg(c.scheme == OCI_AUTH_BEARER && !strcmp(c.realm, rl_token_url()) &&
			  !strcmp(c.service, RL_SERVICE),
		      "'%s'", h);
	free(h);

	struct rl_image_spec spec = {.multi_layer = true, .cmd = lab_cmd};
	free(rl_push_image("lab/token", "1", &spec));
	struct oci_manifest m;
	get_manifest("lab/token", "1", &m, NULL);
	oci_manifest_free(&m);
	h = www_authenticate("/v2/lab/token/manifests/1", &c);
	ck_assert_msg(!strcmp(c.scope, "repository:lab/token:pull"), "'%s'", h);
	free(h);

	/* an anonymous caller gets a token, with no access in it: the registry refuses it */
	long status;
	char *anon = rl_token("repository:lab/token:pull", NULL, NULL, &status);
	ck_assert_msg(anon, "anonymous token: %ld", status);
	json_t *claims = jwt_claims(anon);
	ck_assert_str_eq(json_string_value(json_object_get(claims, "iss")), RL_ISSUER);
	ck_assert_str_eq(json_string_value(json_object_get(claims, "aud")), RL_SERVICE);
	ck_assert_uint_eq(json_array_size(json_object_get(claims, "access")), 0);
	json_decref(claims);
	struct rl_resp r;
	ck_assert_int_eq(
	    rl_http("GET", "/v2/lab/token/manifests/1", &(struct rl_http_opts){.token = anon}, &r),
	    401);
	rl_resp_free(&r);
	ck_assert_int_eq(rl_http("GET", "/v2/", &(struct rl_http_opts){.token = anon}, &r), 200);
	rl_resp_free(&r);
	free(anon);
	/* wrong credentials get no token; a forged one is refused */
	ck_assert_ptr_null(rl_token("repository:lab/token:pull", RL_USER, "wrong", &status));
	ck_assert_int_eq(status, 401);
	char *mine = rl_token("repository:lab/token:pull", RL_USER, RL_PASS, &status);
	ck_assert_ptr_nonnull(mine);
	claims = jwt_claims(mine);
	ck_assert_str_eq(h_jstr(claims, "sub"), RL_USER);
	ck_assert_uint_eq(json_array_size(json_object_get(claims, "access")), 1);
	json_decref(claims);
	mine[strlen(mine) - 3] ^= 1; /* the signature no longer matches */
	ck_assert_int_eq(
	    rl_http("GET", "/v2/lab/token/manifests/1", &(struct rl_http_opts){.token = mine}, &r),
	    401);
	rl_resp_free(&r);
	free(mine);

	ck_skopeo_needs_creds("lab/token:1");
	ck_stops();
}
END_TEST

static Suite *registry_lab_suite(void)
{
	Suite *s = suite_create("registry_lab");
	tcase_add_test(h_tcase(s, "plain_multi_layer", 120), plain_multi_layer);
	tcase_add_test(h_tcase(s, "docker_format_and_zstd", 120), docker_format_and_zstd);
	tcase_add_test(h_tcase(s, "manifest_list", 120), manifest_list);
	tcase_add_test(h_tcase(s, "tls_with_test_ca", 120), tls_with_test_ca);
	tcase_add_test(h_tcase(s, "basic_auth", 120), basic_auth);
	tcase_add_test(h_tcase(s, "token_auth", 120), token_auth);
	return s;
}

int main(void)
{
	return h_main(registry_lab_suite());
}
