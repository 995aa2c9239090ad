/* The registry test lab (registry_lab.h): docker-registry on 127.0.0.1, a token server
 * thread, and images built with umoci and pushed with skopeo. */
#include <arpa/inet.h>
#include <crypt.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cell/codec.h"
#include "cell/error.h"
#include "cell/fsutil.h"
#include "registry_lab.h"

#define LAB_ENV_MAX 16

static struct lab {
	bool started;
	enum rl_mode mode;
	char dir[H_PATH];
	char name[32]; /* rlab-XXXXXX under H.dir */
	unsigned port;
	pid_t pid;
	char url[64], host[32], token_url[96];
	char ca[H_PATH + 32], cert_dir[H_PATH + 32], log[H_PATH + 32];
	char *env[LAB_ENV_MAX];
	unsigned builds;
	/* the token server */
	int token_fd, stop[2];
	pthread_t token_thread;
	EVP_PKEY *token_key;
	char *token_x5c;			  /* base64 DER of its certificate */
	char big_sha256[CELL_SHA256_HEX_LEN + 1]; /* of the last big layer's file */
} lab = {.token_fd = -1, .stop = {-1, -1}};

/* ---- small helpers ---- */

static char *lab_path(const char *rel)
{
	return h_fmt("%s/%s", lab.dir, rel);
}

static void lab_mkdir(const char *rel, mode_t mode)
{
	char *p = lab_path(rel);
	ck_assert_msg(mkdir(p, mode) == 0 || errno == EEXIST, "mkdir %s: %s", p, strerror(errno));
	free(p);
}

/* Run argv with the lab's environment; asserts it exits 0 (output in the message). */
static void lab_run(char *const argv[], int timeout_s)
{
	struct h_proc p;
	h_run(argv, lab.env, timeout_s, &p);
	ck_assert_msg(p.status == 0, "%s %s failed (%d): %s%s", argv[0], argv[1] ? argv[1] : "",
		      p.status, p.out, p.err);
	h_proc_free(&p);
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(in >= 0, "open %s: %s", from, strerror(errno));
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ck_assert_msg(out >= 0, "create %s: %s", to, strerror(errno));
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		ck_assert_int_eq(write(out, buf, (size_t)n), n);
	ck_assert_int_eq(n, 0);
	close(in);
	ck_assert_int_eq(fchmod(out, mode), 0);
	close(out);
}

/* base64url without padding, of len bytes (malloc'd). */
static char *b64url(const void *data, size_t len)
{
	char *s = cell_base64_encode(data, len);
	ck_assert_ptr_nonnull(s);
	size_t n = 0;
	for (char *p = s; *p; p++) {
		if (*p == '=')
			break;
		s[n++] = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	}
	s[n] = '\0';
	return s;
}

/* ---- the token server ---- */

static char *sign_jwt(const char *sub, json_t *access)
{
	time_t now = time(NULL);
	unsigned char rnd[12];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ck_assert_int_eq(read(fd, rnd, sizeof(rnd)), (ssize_t)sizeof(rnd));
	close(fd);
	char jti[32];
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(jti + 2 * i, 3, "%02x", rnd[i]);
	json_t *hdr =
	    json_pack("{s:s, s:s, s:[s]}", "typ", "JWT", "alg", "RS256", "x5c", lab.token_x5c);
	json_t *claims =
	    json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:O}", "iss", RL_ISSUER, "sub", sub,
		      "aud", RL_SERVICE, "exp", (json_int_t)now + 300, "nbf", (json_int_t)now - 10,
		      "iat", (json_int_t)now - 10, "jti", jti, "access", access);
	char *h = json_dumps(hdr, JSON_COMPACT), *c = json_dumps(claims, JSON_COMPACT);
	char *hb = b64url(h, strlen(h)), *cb = b64url(c, strlen(c));
	char *input = h_fmt("%s.%s", hb, cb);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char sig[1024];
	size_t siglen = sizeof(sig);
	ck_assert(md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, lab.token_key) == 1 &&
		  EVP_DigestSign(md, sig, &siglen, (unsigned char *)input, strlen(input)) == 1);
	EVP_MD_CTX_free(md);
	char *sb = b64url(sig, siglen);
	char *jwt = h_fmt("%s.%s", input, sb);
	free(sb);
	free(input);
	free(hb);
	free(cb);
	free(h);
	free(c);
	json_decref(hdr);
	json_decref(claims);
	return jwt;
}

static int unhex(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* Percent-decode s in place ('+' a space). */
static void query_unescape(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (*s == '%' && unhex(s[1]) >= 0 && unhex(s[2]) >= 0) {
			*o++ = (char)(unhex(s[1]) * 16 + unhex(s[2]));
			s += 2;
		} else {
			*o++ = *s == '+' ? ' ' : *s;
		}
	}
	*o = '\0';
}

/* "repository:NAME:pull,push" into access entries granting what was asked. */
static void grant(json_t *access, const char *scope)
{
	char *copy = strdup(scope);
	char *type = copy, *name = strchr(copy, ':'),
	     *actions = name ? strrchr(name + 1, ':') : NULL;
	if (name && actions) {
		*name++ = '\0';
		*actions++ = '\0';
		json_t *list = json_array();
		for (char *save = NULL, *a = strtok_r(actions, ",", &save); a;
		     a = strtok_r(NULL, ",", &save))
			json_array_append_new(list, json_string(a));
		json_array_append_new(access, json_pack("{s:s, s:s, s:o}", "type", type, "name",
							name, "actions", list));
	}
	free(copy);
}

static void answer(int fd, int status, const char *reason, const char *extra, const char *body)
{
	char *head = h_fmt("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: "
			   "%zu\r\nConnection: close\r\n%s\r\n",
			   status, reason, strlen(body), extra);
	if (write(fd, head, strlen(head)) < 0 || write(fd, body, strlen(body)) < 0)
		fprintf(stderr, "registry lab: token server: writing an answer: %s\n",
			strerror(errno));
	free(head);
}

static void token_request(int fd)
{
	char req[16384];
	size_t n = 0;
	while (n < sizeof(req) - 1) {
		ssize_t k = read(fd, req + n, sizeof(req) - 1 - n);
		if (k <= 0)
			return;
		n += (size_t)k;
		req[n] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[n] = '\0';
	char *sp = strchr(req, ' '), *sp2 = sp ? strchr(sp + 1, ' ') : NULL;
	if (strncmp(req, "GET ", 4) || !sp2) {
		answer(fd, 400, "Bad Request", "", "{\"error\":\"GET only\"}");
		return;
	}
	*sp2 = '\0';
	char *target = sp + 1, *headers = sp2 + 1;
	/* credentials: none (anonymous), right, or wrong (401) */
	const char *who = "";
	char *auth = strcasestr(headers, "\r\nAuthorization: Basic ");
	if (auth) {
		auth += strlen("\r\nAuthorization: Basic ");
		size_t alen = strcspn(auth, "\r\n");
		uint8_t *raw = NULL;
		size_t rlen = 0;
		bool ok = cell_base64_decode(auth, alen, &raw, &rlen) == 0 &&
			  rlen == strlen(RL_USER ":" RL_PASS) &&
			  !memcmp(raw, RL_USER ":" RL_PASS, rlen);
		free(raw);
		if (!ok) {
			answer(fd, 401, "Unauthorized",
			       "WWW-Authenticate: Basic realm=\"cell-lab-token\"\r\n",
			       "{\"errors\":[{\"code\":\"UNAUTHORIZED\"}]}");
			return;
		}
		who = RL_USER;
	}
	char *q = strchr(target, '?');
	if (strncmp(target, "/token", 6) || (target[6] && target[6] != '?')) {
		answer(fd, 404, "Not Found", "", "{\"error\":\"no such path\"}");
		return;
	}
	json_t *access = json_array();
	bool service_ok = false;
	char *save = NULL;
	for (char *kv = q ? strtok_r(q + 1, "&", &save) : NULL; kv;
	     kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq)
			continue;
		*eq = '\0';
		query_unescape(eq + 1);
		if (!strcmp(kv, "service"))
			service_ok = !strcmp(eq + 1, RL_SERVICE);
		else if (!strcmp(kv, "scope") && *who)
			grant(access, eq + 1);
	}
	if (!service_ok) {
		json_decref(access);
		answer(fd, 400, "Bad Request", "", "{\"error\":\"service\"}");
		return;
	}
	char *jwt = sign_jwt(who, access);
	json_decref(access);
	char *body =
	    h_fmt("{\"token\":\"%s\",\"access_token\":\"%s\",\"expires_in\":300}", jwt, jwt);
	answer(fd, 200, "OK", "", body);
	free(body);
	free(jwt);
}

static void *token_thread(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p[2] = {{.fd = lab.token_fd, .events = POLLIN},
				      {.fd = lab.stop[0], .events = POLLIN}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		int c = accept4(lab.token_fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		struct timeval tv = {.tv_sec = 5};
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		token_request(c);
		close(c);
	}
	return NULL;
}

static void token_server_start(void)
{
	/* its key and certificate: the registry trusts the certificate (rootcertbundle), the
	 * JWTs carry it (x5c) */
	char *key = lab_path("token.key"), *crt = lab_path("token.crt");
	char *const gen[] = {"/usr/bin/openssl",
			     "req",
			     "-x509",
			     "-newkey",
			     "rsa:2048",
			     "-nodes",
			     "-keyout",
			     key,
			     "-out",
			     crt,
			     "-days",
			     "2",
			     "-subj",
			     "/CN=cell-lab-token",
			     NULL};
	lab_run(gen, 60);
	FILE *f = fopen(key, "re");
	ck_assert_ptr_nonnull(f);
	lab.token_key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	ck_assert_ptr_nonnull(lab.token_key);
	f = fopen(crt, "re");
	ck_assert_ptr_nonnull(f);
	X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	ck_assert_ptr_nonnull(x);
	unsigned char *der = NULL;
	int dlen = i2d_X509(x, &der);
	ck_assert_int_gt(dlen, 0);
	lab.token_x5c = cell_base64_encode(der, (size_t)dlen);
	OPENSSL_free(der);
	X509_free(x);
	free(key);
	free(crt);

	lab.token_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	ck_assert_int_ge(lab.token_fd, 0);
	ck_assert_int_eq(bind(lab.token_fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(lab.token_fd, (struct sockaddr *)&a, &al), 0);
	ck_assert_int_eq(listen(lab.token_fd, 64), 0);
	snprintf(lab.token_url, sizeof(lab.token_url), "http://127.0.0.1:%u/token",
		 ntohs(a.sin_port));
	ck_assert_int_eq(pipe2(lab.stop, O_CLOEXEC), 0);
	ck_assert_int_eq(pthread_create(&lab.token_thread, NULL, token_thread, NULL), 0);
}

static void token_server_stop(void)
{
	if (lab.stop[1] >= 0) {
		ssize_t w = write(lab.stop[1], "x", 1);
		(void)w; /* an empty pipe: it cannot fail */
		pthread_join(lab.token_thread, NULL);
		close(lab.stop[0]);
		close(lab.stop[1]);
		lab.stop[0] = lab.stop[1] = -1;
	}
	if (lab.token_fd >= 0)
		close(lab.token_fd);
	lab.token_fd = -1;
	EVP_PKEY_free(lab.token_key);
	lab.token_key = NULL;
	free(lab.token_x5c);
	lab.token_x5c = NULL;
}

/* ---- TLS and htpasswd ---- */

static void make_tls(void)
{
	char *cakey = lab_path("ca.key"), *srvkey = lab_path("server.key");
	char *csr = lab_path("server.csr"), *crt = lab_path("server.crt");
	char *ext = lab_path("server.ext");
	snprintf(lab.ca, sizeof(lab.ca), "%s/ca.crt", lab.dir);
	char *const ca[] = {"/usr/bin/openssl",
			    "req",
			    "-x509",
			    "-newkey",
			    "ec",
			    "-pkeyopt",
			    "ec_paramgen_curve:prime256v1",
			    "-nodes",
			    "-keyout",
			    cakey,
			    "-out",
			    lab.ca,
			    "-days",
			    "2",
			    "-subj",
			    "/CN=cell-lab-ca",
			    NULL};
	lab_run(ca, 60);
	char *const req[] = {"/usr/bin/openssl",
			     "req",
			     "-newkey",
			     "ec",
			     "-pkeyopt",
			     "ec_paramgen_curve:prime256v1",
			     "-nodes",
			     "-keyout",
			     srvkey,
			     "-out",
			     csr,
			     "-subj",
			     "/CN=127.0.0.1",
			     NULL};
	lab_run(req, 60);
	h_write_file(ext,
		     "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
		     "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
		     0600);
	char *const sign[] = {
	    "/usr/bin/openssl", "x509", "-req", "-in",	 csr, "-CA",	  lab.ca, "-CAkey", cakey,
	    "-CAcreateserial",	"-out", crt,	"-days", "2", "-extfile", ext,	  NULL};
	lab_run(sign, 60);
	snprintf(lab.cert_dir, sizeof(lab.cert_dir), "%s/certs", lab.dir);
	lab_mkdir("certs", 0755);
	char *cacopy = h_fmt("%s/ca.crt", lab.cert_dir);
	copy_file(lab.ca, cacopy, 0644);
	free(cacopy);
	free(cakey);
	free(srvkey);
	free(csr);
	free(crt);
	free(ext);
}

static void make_htpasswd(void)
{
	char salt[64];
	ck_assert_ptr_nonnull(crypt_gensalt_rn("$2b$", 5, NULL, 0, salt, sizeof(salt)));
	struct crypt_data cd;
	memset(&cd, 0, sizeof(cd));
	const char *hash = crypt_r(RL_PASS, salt, &cd);
	ck_assert_msg(hash && hash[0] == '$', "bcrypt by crypt(): %s", hash ? hash : "NULL");
	char *line = h_fmt("%s:%s\n", RL_USER, hash), *p = lab_path("htpasswd");
	h_write_file(p, line, 0600);
	free(line);
	free(p);
}

/* ---- start, stop ---- */

static void lab_env(void)
{
	static const char *const dirs[] = {
	    "home",	   "home/.config", "home/.local", "home/.local/share",
	    "home/.cache", "run",	   "tmp",	  "registries.d"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		lab_mkdir(dirs[i], 0700);
	int n = 0;
	lab.env[n++] = h_fmt("HOME=%s/home", lab.dir);
	lab.env[n++] = h_fmt("XDG_CONFIG_HOME=%s/home/.config", lab.dir);
	lab.env[n++] = h_fmt("XDG_DATA_HOME=%s/home/.local/share", lab.dir);
	lab.env[n++] = h_fmt("XDG_CACHE_HOME=%s/home/.cache", lab.dir);
	lab.env[n++] = h_fmt("XDG_RUNTIME_DIR=%s/run", lab.dir);
	lab.env[n++] = h_fmt("TMPDIR=%s/tmp", lab.dir);
	/* a uid other than 0: the blob-info cache goes under XDG_DATA_HOME, not /var/lib */
	lab.env[n++] = h_fmt("_CONTAINERS_ROOTLESS_UID=%d", RL_SANDBOX_UID);
	lab.env[n++] = h_fmt("CONTAINERS_REGISTRIES_CONF=%s/registries.conf", lab.dir);
	lab.env[n++] = h_fmt("REGISTRY_AUTH_FILE=%s/auth.json", lab.dir);
	lab.env[n++] = h_fmt("CONTAINERS_CONF=%s/containers.conf", lab.dir);
	lab.env[n] = NULL;
	char *p = lab_path("registries.conf");
	char *text = h_fmt("[[registry]]\nlocation = \"%s\"\ninsecure = %s\n", lab.host,
			   lab.mode == RL_TLS ? "false" : "true");
	h_write_file(p, text, 0644);
	free(text);
	free(p);
	p = lab_path("auth.json");
	h_write_file(p, "{\"auths\":{}}\n", 0600);
	free(p);
	p = lab_path("containers.conf");
	h_write_file(p, "", 0644);
	free(p);
	p = lab_path("policy.json");
	h_write_file(p, "{\"default\":[{\"type\":\"insecureAcceptAnything\"}]}\n", 0644);
	free(p);
}

static void write_config(void)
{
	char *auth = NULL;
	if (lab.mode == RL_BASIC)
		auth = h_fmt("auth:\n  htpasswd:\n    realm: cell-lab\n    path: %s/htpasswd\n",
			     lab.dir);
	else if (lab.mode == RL_TOKEN)
		auth = h_fmt("auth:\n  token:\n    realm: %s\n    service: %s\n    issuer: %s\n"
			     "    rootcertbundle: %s/token.crt\n",
			     lab.token_url, RL_SERVICE, RL_ISSUER, lab.dir);
	char *tls = lab.mode == RL_TLS ? h_fmt("  tls:\n    certificate: %s/server.crt\n"
					       "    key: %s/server.key\n",
					       lab.dir, lab.dir)
				       : strdup("");
	char *cfg = h_fmt("version: 0.1\n"
			  "log:\n  level: info\n  accesslog:\n    disabled: false\n"
			  "storage:\n  filesystem:\n    rootdirectory: %s/storage\n"
			  "  delete:\n    enabled: true\n"
			  "  maintenance:\n    uploadpurging:\n      enabled: false\n"
			  "http:\n  addr: %s\n  secret: cell-lab-secret\n%s"
			  "  headers:\n    X-Content-Type-Options: [nosniff]\n"
			  "%s",
			  lab.dir, lab.host, tls, auth ? auth : "");
	char *p = lab_path("config.yml");
	h_write_file(p, cfg, 0600);
	free(p);
	free(cfg);
	free(tls);
	free(auth);
}

static size_t discard(char *ptr, size_t size, size_t nmemb, void *ud)
{
	(void)ptr;
	(void)ud;
	return size * nmemb;
}

/* Until GET /v2/ gets any answer (at most 20 s), the registry still running. */
static void wait_ready(void)
{
	char *url = h_fmt("%s/v2/", lab.url);
	for (int i = 0;; i++) {
		ck_assert_msg(h_pid_alive(lab.pid), "docker-registry exited: %s", rl_log_tail());
		CURL *c = curl_easy_init();
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
		if (lab.mode == RL_TLS)
			curl_easy_setopt(c, CURLOPT_CAINFO, lab.ca);
		CURLcode rc = curl_easy_perform(c);
		long status = 0;
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_cleanup(c);
		if (rc == CURLE_OK && status)
			break;
		ck_assert_msg(i < 200, "docker-registry never answered on %s: %s", url,
			      rl_log_tail());
		h_sleep_ms(100);
	}
	free(url);
}

void rl_start(enum rl_mode mode)
{
	ck_assert_msg(!lab.started, "a registry lab is running already");
	memset(&lab, 0, sizeof(lab));
	lab.token_fd = -1;
	lab.stop[0] = lab.stop[1] = -1;
	lab.mode = mode;
	ck_assert_uint_lt(strlen(H.dir) + sizeof("/rlab-XXXXXX"), sizeof(lab.dir));
	memcpy(lab.dir, H.dir, strlen(H.dir) + 1);
	strcat(lab.dir, "/rlab-XXXXXX");
	ck_assert_msg(mkdtemp(lab.dir), "mkdtemp %s: %s", lab.dir, strerror(errno));
	snprintf(lab.name, sizeof(lab.name), "%s", strrchr(lab.dir, '/') + 1);
	ck_assert_int_eq(chmod(lab.dir, 0700), 0);
	lab.started = true;
	lab.port = h_free_port();
	snprintf(lab.host, sizeof(lab.host), "127.0.0.1:%u", lab.port);
	snprintf(lab.url, sizeof(lab.url), "%s://%s", mode == RL_TLS ? "https" : "http", lab.host);
	snprintf(lab.log, sizeof(lab.log), "%s/registry.log", lab.dir);
	lab_mkdir("storage", 0700);
	lab_env();
	if (mode == RL_TLS)
		make_tls();
	if (mode == RL_BASIC)
		make_htpasswd();
	if (mode == RL_TOKEN)
		token_server_start();
	write_config();
	char *cfg = lab_path("config.yml");
	char *const argv[] = {"/usr/bin/docker-registry", "serve", cfg, NULL};
	lab.pid = h_spawn_log(argv, lab.log);
	free(cfg);
	wait_ready();
}

void rl_stop(void)
{
	if (!lab.started)
		return;
	if (lab.pid > 0) {
		kill(lab.pid, SIGTERM);
		for (int i = 0; i < 50 && waitpid(lab.pid, NULL, WNOHANG) == 0; i++)
			h_sleep_ms(20);
		if (kill(lab.pid, SIGKILL) == 0)
			waitpid(lab.pid, NULL, 0);
	}
	token_server_stop();
	for (int i = 0; lab.env[i]; i++)
		free(lab.env[i]);
	/* the lab dir only: a name mkdtemp made, under the suite's dir */
	ck_assert_msg(!strncmp(lab.name, "rlab-", 5) && !strchr(lab.name, '/') &&
			  strlen(lab.name) == strlen("rlab-XXXXXX"),
		      "lab dir name '%s'", lab.name);
	int pfd = open(H.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct cell_error err = {0};
	ck_assert_msg(pfd >= 0 && cell_remove_tree_at(pfd, lab.name, &err) == 0,
		      "removing the registry lab %s: %s", lab.dir, err.msg);
	close(pfd);
	pid_t pid = lab.pid;
	memset(&lab, 0, sizeof(lab));
	lab.pid = pid; /* rl_pid() still names the process that was, for a test's check */
	lab.token_fd = -1;
	lab.stop[0] = lab.stop[1] = -1;
}

/* ---- accessors ---- */

static void need_lab(void)
{
	ck_assert_msg(lab.started, "no registry lab: rl_start first");
}

enum rl_mode rl_mode(void)
{
	return lab.mode;
}
pid_t rl_pid(void)
{
	return lab.pid;
}
unsigned rl_port(void)
{
	need_lab();
	return lab.port;
}
const char *rl_dir(void)
{
	need_lab();
	return lab.dir;
}
const char *rl_url(void)
{
	need_lab();
	return lab.url;
}
const char *rl_host(void)
{
	need_lab();
	return lab.host;
}
const char *rl_creds(void)
{
	need_lab();
	return lab.mode == RL_BASIC || lab.mode == RL_TOKEN ? RL_USER ":" RL_PASS : NULL;
}
const char *rl_ca_path(void)
{
	need_lab();
	return lab.mode == RL_TLS ? lab.ca : NULL;
}
const char *rl_cert_dir(void)
{
	need_lab();
	return lab.mode == RL_TLS ? lab.cert_dir : NULL;
}
const char *rl_token_url(void)
{
	need_lab();
	return lab.mode == RL_TOKEN ? lab.token_url : NULL;
}

const char *rl_log_tail(void)
{
	static char buf[4096];
	buf[0] = '\0';
	int fd = open(lab.log, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return "(no registry log)";
	off_t end = lseek(fd, 0, SEEK_END);
	off_t from = end > (off_t)sizeof(buf) - 1 ? end - (off_t)sizeof(buf) + 1 : 0;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, from);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/* ---- HTTP ---- */

struct grow {
	char *data;
	size_t len;
};

static size_t grow_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct grow *g = ud;
	size_t n = size * nmemb;
	g->data = realloc(g->data, g->len + n + 1);
	ck_assert_ptr_nonnull(g->data);
	memcpy(g->data + g->len, ptr, n);
	g->len += n;
	g->data[g->len] = '\0';
	return n;
}

static size_t header_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct rl_resp *r = ud;
	size_t n = size * nmemb;
	static const struct {
		const char *name;
		size_t off;
	} keep[] = {{"content-type:", offsetof(struct rl_resp, content_type)},
		    {"www-authenticate:", offsetof(struct rl_resp, www_authenticate)},
		    {"docker-content-digest:", offsetof(struct rl_resp, digest)}};
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		size_t kl = strlen(keep[i].name);
		if (n <= kl || strncasecmp(ptr, keep[i].name, kl))
			continue;
		const char *v = ptr + kl;
		size_t vl = n - kl;
		while (vl && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		char **dst = (char **)((char *)r + keep[i].off);
		free(*dst); /* a later answer (a redirect's) replaces */
		*dst = strndup(v, vl);
	}
	return n;
}

char *rl_token(const char *scope, const char *user, const char *pass, long *status)
{
	need_lab();
	ck_assert_msg(lab.mode == RL_TOKEN, "rl_token outside RL_TOKEN");
	CURL *c = curl_easy_init();
	char *esc = scope ? curl_easy_escape(c, scope, 0) : NULL;
	char *url = h_fmt("%s?service=%s%s%s", lab.token_url, RL_SERVICE, esc ? "&scope=" : "",
			  esc ? esc : "");
	curl_free(esc);
	struct grow g = {0};
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, grow_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &g);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	if (user) {
		curl_easy_setopt(c, CURLOPT_USERNAME, user);
		curl_easy_setopt(c, CURLOPT_PASSWORD, pass);
	}
	CURLcode rc = curl_easy_perform(c);
	*status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(c);
	free(url);
	char *token = NULL;
	if (rc == CURLE_OK && *status == 200) {
		json_t *j = json_loadb(g.data, g.len, 0, NULL);
		const char *t = json_string_value(json_object_get(j, "token"));
		token = t ? strdup(t) : NULL;
		json_decref(j);
	}
	free(g.data);
	return token;
}

/* The repository a /v2/NAME/(manifests|blobs|tags)/… path names, into buf ("" for none). */
static void path_repo(const char *path, char *buf, size_t size)
{
	buf[0] = '\0';
	if (strncmp(path, "/v2/", 4))
		return;
	const char *name = path + 4;
	static const char *const marks[] = {"/manifests/", "/blobs/", "/tags/"};
	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
		const char *m = strstr(name, marks[i]);
		if (m) {
			snprintf(buf, size, "%.*s", (int)(m - name), name);
			return;
		}
	}
}

long rl_http(const char *method, const char *path, const struct rl_http_opts *o, struct rl_resp *r)
{
	need_lab();
	static const struct rl_http_opts none;
	if (!o)
		o = &none;
	memset(r, 0, sizeof(*r));
	CURL *c = curl_easy_init();
	char *url = h_fmt("%s%s", lab.url, path);
	struct grow g = {0};
	struct curl_slist *hdrs = NULL;
	char *bearer = NULL;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, grow_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &g);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 3L);
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	if (lab.mode == RL_TLS && !o->no_ca)
		curl_easy_setopt(c, CURLOPT_CAINFO, lab.ca);
	if (o->body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, o->body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)(o->len ? o->len : strlen(o->body)));
	}
	char *ct = h_fmt("Content-Type: %s", o->content_type ? o->content_type : "");
	if (o->content_type)
		hdrs = curl_slist_append(hdrs, ct);
	char *accept = h_fmt(
	    "Accept: %s", o->accept ? o->accept
				    : "application/vnd.oci.image.index.v1+json, "
				      "application/vnd.oci.image.manifest.v1+json, "
				      "application/vnd.docker.distribution.manifest.list.v2+json, "
				      "application/vnd.docker.distribution.manifest.v2+json");
	hdrs = curl_slist_append(hdrs, accept);
	const char *user = o->user ? o->user : RL_USER, *pass = o->pass ? o->pass : RL_PASS;
	if (!o->anonymous && lab.mode == RL_BASIC) {
		curl_easy_setopt(c, CURLOPT_USERNAME, user);
		curl_easy_setopt(c, CURLOPT_PASSWORD, pass);
	} else if (o->token) {
		bearer = h_fmt("Authorization: Bearer %s", o->token);
		hdrs = curl_slist_append(hdrs, bearer);
	} else if (!o->anonymous && lab.mode == RL_TOKEN) {
		char repo[256], *scope = NULL;
		path_repo(path, repo, sizeof(repo));
		if (repo[0])
			scope = h_fmt("repository:%s:pull,push", repo);
		long st;
		char *token = rl_token(scope, user, pass, &st);
		free(scope);
		if (token) {
			bearer = h_fmt("Authorization: Bearer %s", token);
			hdrs = curl_slist_append(hdrs, bearer);
			free(token);
		}
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	CURLcode rc = curl_easy_perform(c);
	r->curl_code = (int)rc;
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	r->body = g.data ? g.data : strdup("");
	r->len = g.len;
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	free(url);
	free(ct);
	free(accept);
	free(bearer);
	return r->status;
}

void rl_resp_free(struct rl_resp *r)
{
	free(r->body);
	free(r->content_type);
	free(r->www_authenticate);
	free(r->digest);
	memset(r, 0, sizeof(*r));
}

/* ---- skopeo ---- */

int rl_skopeo(struct h_proc *res, const char *const *args)
{
	need_lab();
	char *argv[48];
	int n = 0;
	char *policy = lab_path("policy.json"), *regd = lab_path("registries.d");
	argv[n++] = "/usr/bin/skopeo";
	argv[n++] = "--policy";
	argv[n++] = policy;
	argv[n++] = "--registries.d";
	argv[n++] = regd;
	for (size_t i = 0; args[i]; i++) {
		ck_assert_int_lt(n, 47);
		argv[n++] = (char *)args[i];
	}
	argv[n] = NULL;
	h_run(argv, lab.env, 120, res);
	free(policy);
	free(regd);
	return res->status;
}

/* ---- images ---- */

static const char *host_busybox(void)
{
	static const char *const where[] = {"/bin/busybox", "/usr/bin/busybox"};
	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
		if (access(where[i], X_OK) == 0)
			return where[i];
	ck_abort_msg("no busybox on the host (busybox-static)");
	return NULL;
}

/* The root filesystem of layer 1 into root (umoci's unpacked bundle's rootfs). */
static void fill_rootfs(const char *root, unsigned build)
{
	static const struct {
		const char *path;
		mode_t mode;
	} dirs[] = {{"bin", 0755},	    {"dev", 0755},	   {"etc", 0755},
		    {"etc/cell-lab", 0755}, {"home", 0755},	   {"opt", 0755},
		    {"opt/lab", 0755},	    {"proc", 0755},	   {"root", 0700},
		    {"sys", 0755},	    {"tmp", 01777},	   {"usr", 0755},
		    {"usr/bin", 0755},	    {"home/sandbox", 0755}};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char *p = h_fmt("%s/%s", root, dirs[i].path);
		ck_assert_msg(mkdir(p, dirs[i].mode) == 0 || errno == EEXIST, "mkdir %s", p);
		ck_assert_int_eq(chmod(p, dirs[i].mode), 0);
		free(p);
	}
	const char *bb = host_busybox();
	char *p = h_fmt("%s/bin/busybox", root);
	copy_file(bb, p, 0755);
	free(p);
	char *const list[] = {(char *)bb, "--list", NULL};
	struct h_proc out;
	h_run(list, NULL, 30, &out);
	ck_assert_int_eq(out.status, 0);
	for (char *save = NULL, *a = strtok_r(out.out, "\n", &save); a;
	     a = strtok_r(NULL, "\n", &save)) {
		if (!strcmp(a, "busybox") || strchr(a, '/'))
			continue;
		p = h_fmt("%s/bin/%s", root, a);
		ck_assert_msg(symlink("busybox", p) == 0 || errno == EEXIST, "symlink %s", p);
		free(p);
	}
	h_proc_free(&out);
	static const struct {
		const char *path, *text;
		mode_t mode;
	} files[] = {
	    {"etc/passwd",
	     "root:x:0:0:root:/root:/bin/sh\n"
	     "sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\n",
	     0644},
	    {"etc/group", "root:x:0:\nsandbox:x:1000:\n", 0644},
	    {"etc/cell-lab/removed", "removed by the second layer\n", 0644},
	    {"opt/lab/old", "hidden by the opaque layer\n", 0644},
	    {"home/sandbox/entrypoint.sh",
	     "#!/bin/sh\necho \"entrypoint as $(id -u) in $(pwd)\"\nexec \"$@\"\n", 0755},
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		p = h_fmt("%s/%s", root, files[i].path);
		h_write_file(p, files[i].text, files[i].mode);
		free(p);
	}
	/* what makes each build's base layer its own blob */
	p = h_fmt("%s/etc/cell-lab/build", root);
	char *stamp = h_fmt("build %u of lab %s\n", build, lab.name);
	h_write_file(p, stamp, 0644);
	free(stamp);
	free(p);
	char *home = h_fmt("%s/home/sandbox", root);
	char *ep = h_fmt("%s/home/sandbox/entrypoint.sh", root);
	ck_assert_int_eq(chown(home, RL_SANDBOX_UID, RL_SANDBOX_UID), 0);
	ck_assert_int_eq(chown(ep, RL_SANDBOX_UID, RL_SANDBOX_UID), 0);
	free(home);
	free(ep);
}

/* The flavour's changes to a filled rootfs. */
static void flavour_rootfs(const char *root, enum rl_flavour flavour)
{
	if (flavour == RL_UBUNTU_LIKE) {
		static const char *const files[][2] = {
		    {"etc/os-release", "PRETTY_NAME=\"Ubuntu 24.04 LTS\"\nNAME=\"Ubuntu\"\n"
				       "VERSION_ID=\"24.04\"\nID=ubuntu\nID_LIKE=debian\n"},
		    {"etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"
				   "sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\n"
				   "ubuntu:x:1001:1001:Ubuntu:/home/ubuntu:/bin/sh\n"},
		    {"etc/group", "root:x:0:\nsandbox:x:1000:\nubuntu:x:1001:\n"}};
		for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
			char *p = h_fmt("%s/%s", root, files[i][0]);
			h_write_file(p, files[i][1], 0644);
			free(p);
		}
		char *home = h_fmt("%s/home/ubuntu", root);
		ck_assert_int_eq(mkdir(home, 0750), 0);
		ck_assert_int_eq(chown(home, RL_UBUNTU_UID, RL_UBUNTU_UID), 0);
		free(home);
	}
	if (flavour == RL_DISTROLESS) {
		static const char *const gone[] = {"bin/sh", "etc/passwd", "etc/group"};
		for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
			char *p = h_fmt("%s/%s", root, gone[i]);
			ck_assert_msg(unlink(p) == 0, "unlink %s: %s", p, strerror(errno));
			free(p);
		}
	}
}

/* An mtime of this build's own, so that layers 2 and 3 are blobs of their own too (a push
 * must never find them in the registry already, or skopeo reuses them as they are). */
static time_t build_mtime(unsigned build)
{
	return 1600000000 + (time_t)(getpid() % 100000) * 1000 + build;
}

static void set_mtime(const char *path, time_t t)
{
	struct timespec ts[2] = {{.tv_sec = t}, {.tv_sec = t}};
	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

/* Layer 3: RL_OPAQUE_DIR opaque with RL_OPAQUE_NEW, as a tar umoci adds verbatim. */
static void add_opaque_layer(const char *image, const char *work, unsigned build)
{
	char *stage = h_fmt("%s/opaque", work);
	char *dir = h_fmt("%s/opt/lab", stage), *opt = h_fmt("%s/opt", stage);
	ck_assert_int_eq(mkdir(stage, 0755), 0);
	ck_assert_int_eq(mkdir(opt, 0755), 0);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	char *marker = h_fmt("%s/.wh..wh..opq", dir), *newf = h_fmt("%s/new", dir);
	h_write_file(marker, "", 0644);
	h_write_file(newf, "the only file of the opaque dir\n", 0644);
	char *tar = h_fmt("%s/opaque.tar", work),
	     *mtime = h_fmt("--mtime=@%lld", (long long)build_mtime(build));
	char *const mk[] = {"/usr/bin/tar", "--numeric-owner",
			    "--owner=0",    "--group=0",
			    "--sort=name",  mtime,
			    "-C",	    stage,
			    "-cf",	    tar,
			    "opt",	    NULL};
	lab_run(mk, 60);
	char *const add[] = {"/usr/bin/umoci", "raw", "add-layer", "--image",
			     (char *)image,    tar,   NULL};
	lab_run(add, 60);
	free(stage);
	free(dir);
	free(opt);
	free(marker);
	free(newf);
	free(tar);
	free(mtime);
}

/* path made and filled with n random bytes; their sha256 kept for rl_big_sha256. */
static void random_file(const char *path, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	ck_assert(ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1);
	static unsigned char buf[1 << 16];
	for (size_t done = 0; done < n;) {
		size_t k = n - done < sizeof(buf) ? n - done : sizeof(buf);
		ck_assert_int_eq(RAND_bytes(buf, (int)k), 1);
		ck_assert_int_eq(write(fd, buf, k), (ssize_t)k);
		ck_assert_int_eq(EVP_DigestUpdate(ctx, buf, k), 1);
		done += k;
	}
	ck_assert_int_eq(close(fd), 0);
	unsigned char md[32];
	unsigned mdlen = 0;
	ck_assert_int_eq(EVP_DigestFinal_ex(ctx, md, &mdlen), 1);
	EVP_MD_CTX_free(ctx);
	for (unsigned i = 0; i < mdlen; i++)
		snprintf(lab.big_sha256 + 2 * i, 3, "%02x", md[i]);
}

const char *rl_big_sha256(void)
{
	return lab.big_sha256;
}

/* One more layer on top: RL_BIG_FILE of size random bytes. Added raw: a repack would start
 * again from the bundle's image and drop a raw layer below it. */
static void add_big_layer(const char *image, const char *work, size_t size)
{
	char *stage = h_fmt("%s/big", work), *opt = h_fmt("%s/opt", stage),
	     *dir = h_fmt("%s/opt/big", stage), *file = h_fmt("%s%s", stage, RL_BIG_FILE);
	ck_assert_int_eq(mkdir(stage, 0755), 0);
	ck_assert_int_eq(mkdir(opt, 0755), 0);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	random_file(file, size);
	char *tar = h_fmt("%s/big.tar", work);
	char *const mk[] = {"/usr/bin/tar", "--numeric-owner",
			    "--owner=0",    "--group=0",
			    "-C",	    stage,
			    "-cf",	    tar,
			    "opt",	    NULL};
	lab_run(mk, 120);
	char *const add[] = {"/usr/bin/umoci", "raw", "add-layer", "--image",
			     (char *)image,    tar,   NULL};
	lab_run(add, 120);
	ck_assert_int_eq(unlink(tar), 0);
	free(stage);
	free(opt);
	free(dir);
	free(file);
	free(tar);
}

static void add_opt(char **argv, int *n, char **owned, int *n_owned, const char *flag,
		    const char *value)
{
	ck_assert_int_lt(*n, 60);
	argv[(*n)++] = owned[(*n_owned)++] = h_fmt("%s=%s", flag, value);
}

static void add_config(const char *image, const struct rl_image_spec *spec, const char *arch)
{
	char *argv[64];
	int n = 0;
	char *owned[64];
	int n_owned = 0;
	argv[n++] = "/usr/bin/umoci";
	argv[n++] = "config";
	argv[n++] = "--image";
	argv[n++] = (char *)image;
	argv[n++] = "--os";
	argv[n++] = "linux";
	argv[n++] = "--architecture";
	argv[n++] = (char *)arch;
	for (size_t i = 0; spec->env && spec->env[i]; i++)
		add_opt(argv, &n, owned, &n_owned, "--config.env", spec->env[i]);
	if (spec->workdir)
		add_opt(argv, &n, owned, &n_owned, "--config.workingdir", spec->workdir);
	if (spec->user)
		add_opt(argv, &n, owned, &n_owned, "--config.user", spec->user);
	for (size_t i = 0; spec->entrypoint && spec->entrypoint[i]; i++)
		add_opt(argv, &n, owned, &n_owned, "--config.entrypoint", spec->entrypoint[i]);
	for (size_t i = 0; spec->cmd && spec->cmd[i]; i++)
		add_opt(argv, &n, owned, &n_owned, "--config.cmd", spec->cmd[i]);
	argv[n] = NULL;
	lab_run(argv, 60);
	for (int i = 0; i < n_owned; i++)
		free(owned[i]);
}

/* Build one image (for arch) in a layout of its own and push it as name:tag; its manifest's
 * digest (malloc'd). */
/* An image built into the OCI layout <work>/layout as its tag "img" (work: lab.dir/
 * build-N, malloc'd into *work_out). */
static char *build_layout(const struct rl_image_spec *spec, const char *arch, char **work_out)
{
	unsigned build = ++lab.builds;
	char *work = h_fmt("%s/build-%u", lab.dir, build);
	ck_assert_int_eq(mkdir(work, 0700), 0);
	char *layout = h_fmt("%s/layout", work), *bundle = h_fmt("%s/bundle", work);
	char *image = h_fmt("%s:img", layout);
	char *const init[] = {"/usr/bin/umoci", "init", "--layout", layout, NULL};
	lab_run(init, 60);
	char *const new_img[] = {"/usr/bin/umoci", "new", "--image", image, NULL};
	lab_run(new_img, 60);
	char *const unpack[] = {"/usr/bin/umoci", "unpack", "--image", image, bundle, NULL};
	lab_run(unpack, 60);
	char *root = h_fmt("%s/rootfs", bundle);
	fill_rootfs(root, build);
	flavour_rootfs(root, spec->flavour);
	char *const repack[] = {"/usr/bin/umoci", "repack", "--refresh-bundle", "--image", image,
				bundle,		  NULL};
	lab_run(repack, 120);
	if (spec->multi_layer) {
		char *removed = h_fmt("%s%s", root, RL_REMOVED),
		     *added = h_fmt("%s%s", root, RL_ADDED);
		ck_assert_int_eq(unlink(removed), 0);
		h_write_file(added, RL_ADDED_TEXT, 0644);
		set_mtime(added, build_mtime(build));
		lab_run(repack, 120);
		free(removed);
		free(added);
		add_opaque_layer(image, work, build);
	}
	if (spec->big_layer)
		add_big_layer(image, work, spec->big_layer);
	add_config(image, spec, arch);
	free(bundle);
	free(root);
	free(layout);
	*work_out = work;
	return image;
}

char *rl_build_layout(const struct rl_image_spec *spec)
{
	need_lab();
	char *work;
	char *image = build_layout(spec, spec->arch ? spec->arch : "amd64", &work);
	free(image);
	char *layout = h_fmt("%s/layout", work);
	free(work);
	return layout;
}

static char *build_and_push(const char *name, const char *tag, const struct rl_image_spec *spec,
			    const char *arch)
{
	char *work;
	char *image = build_layout(spec, arch, &work);
	char *src = h_fmt("oci:%s", image), *dst = h_fmt("docker://%s/%s:%s", lab.host, name, tag);
	char *digestfile = h_fmt("%s/digest", work);
	const char *args[24];
	int n = 0;
	args[n++] = "copy";
	args[n++] = "--quiet";
	args[n++] = "--dest-tls-verify=false";
	args[n++] = "--digestfile";
	args[n++] = digestfile;
	if (rl_creds()) {
		args[n++] = "--dest-creds";
		args[n++] = rl_creds();
	}
	if (spec->docker_format) {
		args[n++] = "--format";
		args[n++] = "v2s2";
	} else {
		args[n++] = "--format";
		args[n++] = "oci";
	}
	if (spec->zstd) {
		args[n++] = "--dest-compress-format";
		args[n++] = "zstd";
	}
	args[n++] = src;
	args[n++] = dst;
	args[n] = NULL;
	struct h_proc p;
	rl_skopeo(&p, args);
	ck_assert_msg(p.status == 0, "skopeo copy %s %s (%d): %s%s\nregistry: %s", src, dst,
		      p.status, p.out, p.err, rl_log_tail());
	h_proc_free(&p);
	char *digest = h_trim(h_read_file(digestfile));
	ck_assert_msg(!strncmp(digest, "sha256:", 7), "skopeo's digest '%s'", digest);

	/* the build's files go, the pushed image stays in the registry */
	int wfd = open(lab.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct cell_error err = {0};
	char *wname = strrchr(work, '/') + 1;
	ck_assert_msg(wfd >= 0 && !strncmp(wname, "build-", 6) &&
			  cell_remove_tree_at(wfd, wname, &err) == 0,
		      "removing %s: %s", work, err.msg);
	close(wfd);
	free(work);
	free(image);
	free(src);
	free(dst);
	free(digestfile);
	return digest;
}

/* PUT an index of the per-arch images at name:tag; its digest. */
static char *push_index(const char *name, const char *tag, const struct rl_image_spec *spec,
			char **digests)
{
	const char *list_type = spec->docker_format
				    ? "application/vnd.docker.distribution.manifest.list.v2+json"
				    : "application/vnd.oci.image.index.v1+json";
	json_t *manifests = json_array();
	for (size_t i = 0; spec->archs[i]; i++) {
		char *path = h_fmt("/v2/%s/manifests/%s", name, digests[i]);
		struct rl_resp r;
		rl_http("GET", path, NULL, &r);
		ck_assert_msg(r.status == 200, "GET %s: %ld %s", path, r.status, r.body);
		json_t *plat =
		    json_pack("{s:s, s:s}", "architecture", spec->archs[i], "os", "linux");
		if (!strcmp(spec->archs[i], "arm64"))
			json_object_set_new(plat, "variant", json_string("v8"));
		json_array_append_new(manifests,
				      json_pack("{s:s, s:s, s:I, s:o}", "mediaType", r.content_type,
						"digest", digests[i], "size", (json_int_t)r.len,
						"platform", plat));
		rl_resp_free(&r);
		free(path);
	}
	json_t *idx = json_pack("{s:i, s:s, s:o}", "schemaVersion", 2, "mediaType", list_type,
				"manifests", manifests);
	char *body = json_dumps(idx, JSON_COMPACT);
	json_decref(idx);
	char *path = h_fmt("/v2/%s/manifests/%s", name, tag);
	struct rl_resp r;
	rl_http("PUT", path, &(struct rl_http_opts){.body = body, .content_type = list_type}, &r);
	ck_assert_msg(r.status == 201, "PUT %s: %ld %s\n%s", path, r.status, r.body, rl_log_tail());
	ck_assert_ptr_nonnull(r.digest);
	char *digest = strdup(r.digest);
	rl_resp_free(&r);
	free(path);
	free(body);
	return digest;
}

char *rl_push_image(const char *name, const char *tag, const struct rl_image_spec *spec)
{
	need_lab();
	ck_assert_msg(!(spec->zstd && spec->docker_format), "Docker schema 2 has no zstd layers");
	if (!spec->archs)
		return build_and_push(name, tag, spec, spec->arch ? spec->arch : "amd64");
	char *digests[16];
	size_t n = 0;
	for (; spec->archs[n]; n++) {
		ck_assert_uint_lt(n, 15);
		char *t = h_fmt("%s-%s", tag, spec->archs[n]);
		digests[n] = build_and_push(name, t, spec, spec->archs[n]);
		free(t);
	}
	char *digest = push_index(name, tag, spec, digests);
	for (size_t i = 0; i < n; i++)
		free(digests[i]);
	return digest;
}
