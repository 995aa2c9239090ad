/* Pulls (image_pull.h). One pull: the reference's candidates (a short name's search
 * registries), each one's endpoints (mirrors first), the manifest (an index resolved to
 * the host's platform), the config, then the layers the store lacks, a few at once, each
 * blob downloaded to partial/, verified, unpacked bottom first by store_layer_add_over and
 * removed; last the image record and its name. store_hold keeps prune away from layers not
 * yet named. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cell/version.h"
#include "image_policy.h"
#include "image_events.h"
#include "image_pull.h"

#define ERRBODY_MAX   4096	  /* bytes of an error answer kept for the message */
#define TOKEN_MAX     (64u << 10) /* a token server's answer */
#define TOKENS_MAX    64	  /* cached tokens */
#define LISTENERS_MAX 32	  /* progress listeners of one pull */
#define BLOBS_BUSY    64	  /* blobs downloading at once (all pulls) */
#define CA_MAX	      (4u << 20)  /* bytes of one registry's CA files */
#define SYSTEM_CA     "/etc/ssl/certs/ca-certificates.crt"

static struct {
	char partial_dir[4096];
	int partial; /* <images>/.store/partial */
	struct image_pull_config cfg;
	pthread_mutex_t lock; /* tokens, busy blobs, flights */
	pthread_cond_t cond;
	char busy[BLOBS_BUSY][OCI_DIGEST_MAX];
	struct flight *flights;
} g = {.partial = -1, .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

/* ---- tokens: per realm, service, scope and credentials, until they expire ---- */

struct token {
	char key[CELL_SHA256_HEX_LEN + 1]; /* sha256 of realm, service, scope, credentials */
	char *value;
	time_t expires;
};
static struct token tokens[TOKENS_MAX];

static void token_key(const char *realm, const char *service, const char *scope,
		      const char *creds_id, char key[CELL_SHA256_HEX_LEN + 1])
{
	_cleanup_free_ char *s = NULL;
	if (asprintf(&s, "%s\n%s\n%s\n%s", realm, service, scope, creds_id) < 0) {
		key[0] = '\0';
		return;
	}
	cell_sha256_hex(s, strlen(s), key);
}

/* A cached token (malloc'd) or NULL. */
static char *token_get(const char *key)
{
	char *v = NULL;
	time_t now = time(NULL);
	pthread_mutex_lock(&g.lock);
	for (int i = 0; i < TOKENS_MAX && key[0]; i++)
		if (tokens[i].value && !strcmp(tokens[i].key, key) && tokens[i].expires > now) {
			v = strdup(tokens[i].value);
			break;
		}
	pthread_mutex_unlock(&g.lock);
	return v;
}

static void token_put(const char *key, const char *value, time_t expires)
{
	if (!key[0])
		return;
	pthread_mutex_lock(&g.lock);
	int slot = 0;
	for (int i = 0; i < TOKENS_MAX; i++) {
		if (!tokens[i].value || !strcmp(tokens[i].key, key)) {
			slot = i;
			break;
		}
		if (tokens[i].expires < tokens[slot].expires)
			slot = i; /* the soonest to expire makes room */
	}
	char *v = strdup(value);
	if (v) {
		free(tokens[slot].value);
		tokens[slot].value = v;
		tokens[slot].expires = expires;
		snprintf(tokens[slot].key, sizeof(tokens[slot].key), "%s", key);
	}
	pthread_mutex_unlock(&g.lock);
}

/* ---- one registry endpoint as a pull talks to it ---- */

struct endpoint {
	struct oci_endpoint ep;
	bool https;	   /* else plain HTTP (insecure registries only) */
	bool scheme_known; /* an answer came over it */
	char *ca;	   /* the registry's own CAs and the host's, or NULL */
	size_t ca_len;
	bool has_creds;
	struct oci_creds creds;
	char creds_id[CELL_SHA256_HEX_LEN + 1];	  /* "anon", or a hash of the credentials */
	bool basic;				  /* the registry asked for Basic */
	char scope[OCI_NAME_MAX + 32];		  /* repository:PATH:pull */
	char bearer_key[CELL_SHA256_HEX_LEN + 1]; /* the token this endpoint uses, if any */
};

static void endpoint_free(struct endpoint *e)
{
	free(e->ca);
	e->ca = NULL;
	explicit_bzero(&e->creds, sizeof(e->creds));
}

/* Append a file's bytes (at most what is left of CA_MAX) to *buf. */
static void append_file(const char *path, char **buf, size_t *len)
{
	char *text = NULL;
	size_t n = 0;
	if (*len >= CA_MAX || cell_read_file_at(AT_FDCWD, path, CA_MAX - *len, &text, &n, NULL) < 0)
		return;
	char *b = realloc(*buf, *len + n + 2);
	if (b) {
		memcpy(b + *len, text, n);
		*len += n;
		b[(*len)++] = '\n';
		b[*len] = '\0';
		*buf = b;
	}
	free(text);
}

/* certs.d: <dir>/<host[:port]>/ *.crt are CAs for that registry, on top of the host's. */
static void load_cas(struct endpoint *e)
{
	const char *host = e->ep.registry;
	if (!host[0] || strchr(host, '/') || host[0] == '.')
		return;
	_cleanup_free_ char *dir = NULL;
	if (asprintf(&dir, "%s/%s", g.cfg.certs_dir, host) < 0)
		return;
	_cleanup_closedir_ DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	char *buf = NULL;
	size_t len = 0;
	bool any = false;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		if (n < 5 || strcmp(de->d_name + n - 4, ".crt") || de->d_name[0] == '.')
			continue;
		if (!any)
			append_file(SYSTEM_CA, &buf, &len);
		any = true;
		_cleanup_free_ char *p = NULL;
		if (asprintf(&p, "%s/%s", dir, de->d_name) >= 0)
			append_file(p, &buf, &len);
	}
	e->ca = buf;
	e->ca_len = len;
}

static int endpoint_setup(struct endpoint *e, const struct oci_endpoint *ep,
			  const struct oci_creds *creds, struct cell_error *err)
{
	memset(e, 0, sizeof(*e));
	e->ep = *ep;
	e->https = true;
	snprintf(e->scope, sizeof(e->scope), "repository:%s:pull", ep->path);
	if (creds) {
		e->has_creds = true;
		e->creds = *creds;
	} else {
		/* The operator's auth file: the first of the flag, $REGISTRY_AUTH_FILE,
		 * /run/containers/0/auth.json, root's ~/.docker/config.json that exists. */
		const char *file = g.cfg.auth_file;
		char home_cfg[4200];
		const char *env = getenv("REGISTRY_AUTH_FILE");
		if (!file && env && env[0])
			file = env;
		if (!file && access("/run/containers/0/auth.json", F_OK) == 0)
			file = "/run/containers/0/auth.json";
		if (!file) {
			struct passwd *pw = getpwuid(0);
			snprintf(home_cfg, sizeof(home_cfg), "%s/.docker/config.json",
				 pw && pw->pw_dir ? pw->pw_dir : "/root");
			file = home_cfg;
		}
		int r = oci_authfile_load(file, ep->registry, ep->path, &e->creds, err);
		if (r < 0)
			return cell_err_wrap(err, "auth file %s", file);
		e->has_creds = r > 0;
	}
	if (e->has_creds) {
		char both[sizeof(e->creds.user) + sizeof(e->creds.pass) + 2];
		snprintf(both, sizeof(both), "%s:%s", e->creds.user, e->creds.pass);
		cell_sha256_hex(both, strlen(both), e->creds_id);
		explicit_bzero(both, sizeof(both));
	} else {
		snprintf(e->creds_id, sizeof(e->creds_id), "anon");
	}
	load_cas(e);
	return 0;
}

/* ---- one HTTP exchange ---- */

struct xfer {
	long status;
	char content_type[128];
	char www_auth[2048];
	char docker_digest[160];
	int64_t content_length; /* -1: not sent */
	int64_t range_start;	/* from Content-Range, -1: none */
	bool body_started;
	/* Where a 2xx body goes: memory (up to max) or a blob file. */
	char *buf;
	size_t len, max;
	int fd;
	uint64_t off;	    /* bytes in the file */
	uint64_t resume_at; /* asked Range from here (0: none) */
	uint64_t expect;    /* the blob's size from the manifest */
	struct oci_digester *dctx;
	const struct oci_digest *want; /* the blob's digest (a Docker-Content-Digest must agree) */
	const char *what;	       /* "blob sha256:…" for messages */
	char errbody[ERRBODY_MAX];
	size_t errlen;
	bool refused;
	char why[384];
	/* progress */
	void (*on_bytes)(void *cls, uint64_t done);
	void *on_bytes_cls;
	uint64_t fetched;
};

static void xfer_reset(struct xfer *x)
{
	x->status = 0;
	x->content_type[0] = x->www_auth[0] = x->docker_digest[0] = '\0';
	x->content_length = x->range_start = -1;
	x->body_started = false;
	x->errlen = 0;
}

static void header_value(char *dst, size_t size, const char *v, size_t n)
{
	while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
		n--;
	while (n && *v == ' ')
		v++, n--;
	if (n >= size)
		n = size - 1;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

static size_t header_cb(char *data, size_t size, size_t nitems, void *cls)
{
	struct xfer *x = cls;
	size_t n = size * nitems;
	if (n >= 5 && !memcmp(data, "HTTP/", 5)) {
		/* Each response of a redirect chain starts afresh. */
		xfer_reset(x);
		const char *sp = memchr(data, ' ', n);
		if (sp)
			x->status = strtol(sp + 1, NULL, 10);
		return n;
	}
	const char *colon = memchr(data, ':', n);
	if (!colon)
		return n;
	size_t kn = (size_t)(colon - data);
	const char *v = colon + 1;
	size_t vn = n - kn - 1;
	char tmp[64];
#define IS(name) (kn == strlen(name) && !strncasecmp(data, name, kn))
	if (IS("Content-Type"))
		header_value(x->content_type, sizeof(x->content_type), v, vn);
	else if (IS("WWW-Authenticate"))
		header_value(x->www_auth, sizeof(x->www_auth), v, vn);
	else if (IS("Docker-Content-Digest"))
		header_value(x->docker_digest, sizeof(x->docker_digest), v, vn);
	else if (IS("Content-Length")) {
		header_value(tmp, sizeof(tmp), v, vn);
		char *end;
		long long l = strtoll(tmp, &end, 10);
		if (end != tmp && !*end && l >= 0)
			x->content_length = l;
	} else if (IS("Content-Range")) {
		header_value(tmp, sizeof(tmp), v, vn);
		unsigned long long a;
		if (sscanf(tmp, "bytes %llu-", &a) == 1)
			x->range_start = (int64_t)a;
	}
#undef IS
	return n;
}

static size_t refuse(struct xfer *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t refuse(struct xfer *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->why, sizeof(x->why), fmt, ap);
	va_end(ap);
	x->refused = true;
	return 0; /* libcurl stops the transfer */
}

static bool is_html(const char *ct)
{
	return !strncasecmp(ct, "text/html", 9);
}

/* The first bytes of a 2xx body: what the headers said, checked before anything is kept. */
static size_t body_start(struct xfer *x)
{
	x->body_started = true;
	if (is_html(x->content_type))
		return refuse(x, "the registry answered an HTML page (%s), not the %s",
			      x->content_type, x->what);
	if (x->want && x->docker_digest[0] && strcmp(x->docker_digest, x->want->text))
		return refuse(x, "the registry says the %s is %.140s", x->what, x->docker_digest);
	if (x->fd < 0)
		return 1;
	if (x->status == 206) {
		if (x->range_start < 0 || (uint64_t)x->range_start != x->resume_at)
			return refuse(x, "the registry resumed the %s at the wrong offset",
				      x->what);
		if (x->content_length >= 0 &&
		    (uint64_t)x->content_length != x->expect - x->resume_at)
			return refuse(x, "the %s has the wrong Content-Length: %lld, expected %llu",
				      x->what, (long long)x->content_length,
				      (unsigned long long)(x->expect - x->resume_at));
		return 1;
	}
	/* A 200: the whole blob, from its first byte whatever was asked. */
	if (x->content_length >= 0 && (uint64_t)x->content_length != x->expect)
		return refuse(x,
			      "the %s has the wrong Content-Length: %lld, the manifest says %llu",
			      x->what, (long long)x->content_length, (unsigned long long)x->expect);
	if (x->off) {
		enum oci_digest_alg alg = x->dctx->alg;
		oci_digest_abandon(x->dctx);
		if (ftruncate(x->fd, 0) < 0 || oci_digest_init(x->dctx, alg) < 0)
			return refuse(x, "restarting the %s: %s", x->what, strerror(errno));
		x->off = 0;
	}
	return 1;
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *cls)
{
	struct xfer *x = cls;
	size_t n = size * nmemb;
	if (x->status < 200 || x->status >= 300) {
		size_t room = sizeof(x->errbody) - 1 - x->errlen;
		size_t k = n < room ? n : room;
		memcpy(x->errbody + x->errlen, data, k);
		x->errlen += k;
		x->errbody[x->errlen] = '\0';
		return n;
	}
	if (!x->body_started && !body_start(x))
		return 0;
	x->fetched += n;
	if (x->fd < 0) {
		if (x->len + n > x->max)
			return refuse(x, "the %s is larger than %zu bytes", x->what, x->max);
		char *b = realloc(x->buf, x->len + n + 1);
		if (!b)
			return refuse(x, "out of memory");
		memcpy(b + x->len, data, n);
		x->buf = b;
		x->len += n;
		b[x->len] = '\0';
		return n;
	}
	if (x->off + n > x->expect)
		return refuse(x, "the %s is larger than the manifest's %llu bytes", x->what,
			      (unsigned long long)x->expect);
	if (pwrite(x->fd, data, n, (off_t)x->off) != (ssize_t)n)
		return refuse(x, "writing the %s: %s", x->what, strerror(errno ? errno : EIO));
	if (oci_digest_update(x->dctx, data, n) < 0)
		return refuse(x, "hashing the %s", x->what);
	x->off += n;
	if (x->on_bytes)
		x->on_bytes(x->on_bytes_cls, x->off);
	return n;
}

static void set_common(CURL *h, const struct endpoint *e, char *errbuf)
{
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "cell/" CELL_VERSION);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	/* https → http only where plain HTTP is allowed at all. */
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, e->ep.insecure ? "http,https" : "https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, (long)PULL_REDIRECTS_MAX);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)g.cfg.stall_timeout_s);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)g.cfg.stall_timeout_s);
	if (e->ep.insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	} else if (e->ca) {
		struct curl_blob blob = {.data = e->ca, .len = e->ca_len, .flags = CURL_BLOB_COPY};
		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
	}
}

/* GET a token for the challenge (the endpoint's credentials, if any, as Basic). */
static int fetch_token(struct endpoint *e, const struct oci_challenge *ch, char **token,
		       time_t *expires, struct cell_error *err)
{
	if (strncmp(ch->realm, "https://", 8) &&
	    !(e->ep.insecure && !strncmp(ch->realm, "http://", 7)))
		return cell_err_msg(err, EACCES,
				    "registry %s: its token realm '%.200s' is not https (only an "
				    "insecure registry may use a plain HTTP one)",
				    e->ep.registry, ch->realm);
	CURL *h = curl_easy_init();
	if (!h)
		return cell_err(err, ENOMEM, "token request");
	char *svc = curl_easy_escape(h, ch->service, 0);
	char *scope = curl_easy_escape(h, ch->scope[0] ? ch->scope : e->scope, 0);
	_cleanup_free_ char *url = NULL;
	int r = 0;
	if (!svc || !scope ||
	    asprintf(&url, "%s%sservice=%s&scope=%s", ch->realm, strchr(ch->realm, '?') ? "&" : "?",
		     svc, scope) < 0)
		r = cell_err(err, ENOMEM, "token request");
	curl_free(svc);
	curl_free(scope);
	char errbuf[CURL_ERROR_SIZE] = "";
	struct xfer x = {.fd = -1, .max = TOKEN_MAX, .what = "token"};
	xfer_reset(&x);
	if (r == 0) {
		set_common(h, e, errbuf);
		curl_easy_setopt(h, CURLOPT_URL, url);
		curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
		curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
		if (e->has_creds) {
			curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
			curl_easy_setopt(h, CURLOPT_USERNAME, e->creds.user);
			curl_easy_setopt(h, CURLOPT_PASSWORD, e->creds.pass);
		}
		CURLcode c = curl_easy_perform(h);
		if (c != CURLE_OK)
			r = x.refused ? cell_err_msg(err, EPROTO, "token server of %s: %s",
						     e->ep.registry, x.why)
				      : cell_err_msg(err, EHOSTUNREACH, "token server of %s: %s",
						     e->ep.registry,
						     errbuf[0] ? errbuf : curl_easy_strerror(c));
		else if (x.status == 401 || x.status == 403)
			r = cell_err_msg(
			    err, EACCES, "registry %s: the token server refused %s (HTTP %ld)",
			    e->ep.registry, e->has_creds ? "the credentials" : "an anonymous pull",
			    x.status);
		else if (x.status != 200)
			r = cell_err_msg(err, EPROTO, "token server of %s: HTTP %ld",
					 e->ep.registry, x.status);
	}
	curl_easy_cleanup(h);
	if (r == 0) {
		json_t *o = json_loadb(x.buf ? x.buf : "", x.len, 0, NULL);
		const char *t = json_string_value(json_object_get(o, "token"));
		if (!t || !t[0])
			t = json_string_value(json_object_get(o, "access_token"));
		json_int_t ttl = json_integer_value(json_object_get(o, "expires_in"));
		if (ttl < 60)
			ttl = 60; /* the distribution spec's default */
		if (!t || !t[0] || strlen(t) > TOKEN_MAX)
			r = cell_err_msg(err, EPROTO, "token server of %s: no token in its answer",
					 e->ep.registry);
		else if (!(*token = strdup(t)))
			r = cell_err(err, ENOMEM, "token");
		*expires = time(NULL) + ttl - 10;
		json_decref(o);
	}
	free(x.buf);
	return r;
}

/* What a 401's challenge asks: a token fetched (or Basic noted). 0 to retry, or -errno. */
static int answer_challenge(struct endpoint *e, const char *header, struct cell_error *err)
{
	struct oci_challenge ch[OCI_CHALLENGES_MAX];
	int n = oci_www_auth_parse(header, ch, OCI_CHALLENGES_MAX, err);
	if (n < 0)
		return cell_err_wrap(err, "registry %s: WWW-Authenticate", e->ep.registry);
	for (int i = 0; i < n; i++) {
		if (ch[i].scheme == OCI_AUTH_BEARER && ch[i].realm[0]) {
			char key[CELL_SHA256_HEX_LEN + 1];
			token_key(ch[i].realm, ch[i].service,
				  ch[i].scope[0] ? ch[i].scope : e->scope, e->creds_id, key);
			_cleanup_free_ char *t = token_get(key);
			if (!t) {
				time_t exp = 0;
				int r = fetch_token(e, &ch[i], &t, &exp, err);
				if (r < 0)
					return r;
				token_put(key, t, exp);
			}
			snprintf(e->bearer_key, sizeof(e->bearer_key), "%s", key);
			return 0;
		}
	}
	for (int i = 0; i < n; i++)
		if (ch[i].scheme == OCI_AUTH_BASIC) {
			if (!e->has_creds)
				return cell_err_msg(err, EACCES,
						    "registry %s asks for credentials (Basic) and "
						    "none were given for it",
						    e->ep.registry);
			if (e->basic)
				return cell_err_msg(err, EACCES,
						    "registry %s refused the credentials of '%s'",
						    e->ep.registry, e->creds.user);
			e->basic = true;
			return 0;
		}
	return cell_err_msg(err, EACCES, "registry %s: HTTP 401 with no challenge cell speaks",
			    e->ep.registry);
}

/* GET path (below /v2/) of the endpoint into x, with the auth the registry asks for. */
static int http_get(struct endpoint *e, const char *path, const char *accept, struct xfer *x,
		    struct cell_error *err)
{
	int r = 0;
	bool bearer_fresh = false;
	for (int attempt = 0; attempt < 3; attempt++) {
		_cleanup_free_ char *url = NULL;
		if (asprintf(&url, "%s://%s/v2/%s", e->https ? "https" : "http",
			     oci_registry_host(e->ep.registry), path) < 0)
			return cell_err(err, ENOMEM, "url");
		CURL *h = curl_easy_init();
		if (!h)
			return cell_err(err, ENOMEM, "curl");
		char errbuf[CURL_ERROR_SIZE] = "";
		set_common(h, e, errbuf);
		curl_easy_setopt(h, CURLOPT_URL, url);
		struct curl_slist *hdrs = NULL, *t;
		_cleanup_free_ char *acc = NULL, *auth = NULL, *range = NULL;
		if (accept && asprintf(&acc, "Accept: %s", accept) >= 0 &&
		    (t = curl_slist_append(hdrs, acc)))
			hdrs = t;
		_cleanup_free_ char *tok = e->bearer_key[0] ? token_get(e->bearer_key) : NULL;
		if (tok && asprintf(&auth, "Authorization: Bearer %s", tok) >= 0 &&
		    (t = curl_slist_append(hdrs, auth)))
			hdrs = t;
		if (tok)
			explicit_bzero(tok, strlen(tok));
		if (!tok && e->basic && e->has_creds) {
			curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
			curl_easy_setopt(h, CURLOPT_USERNAME, e->creds.user);
			curl_easy_setopt(h, CURLOPT_PASSWORD, e->creds.pass);
		}
		if (x->fd >= 0 && x->resume_at &&
		    asprintf(&range, "Range: bytes=%llu-", (unsigned long long)x->resume_at) >= 0 &&
		    (t = curl_slist_append(hdrs, range)))
			hdrs = t;
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
		curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
		curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
		xfer_reset(x);
		x->refused = false;
		CURLcode c = curl_easy_perform(h);
		curl_slist_free_all(hdrs);
		if (auth)
			explicit_bzero(auth, strlen(auth));
		curl_easy_cleanup(h);
		if (c != CURLE_OK) {
			if (x->refused)
				return cell_err_msg(err, EPROTO, "registry %s: %s", e->ep.registry,
						    x->why);
			/* An insecure registry may speak plain HTTP: tried once TLS fails. */
			if (e->ep.insecure && e->https && !e->scheme_known &&
			    (c == CURLE_SSL_CONNECT_ERROR || c == CURLE_RECV_ERROR ||
			     c == CURLE_GOT_NOTHING || c == CURLE_COULDNT_CONNECT)) {
				e->https = false;
				attempt--;
				continue;
			}
			int code =
			    c == CURLE_OPERATION_TIMEDOUT   ? ETIMEDOUT
			    : c == CURLE_TOO_MANY_REDIRECTS ? ELOOP
			    : c == CURLE_PEER_FAILED_VERIFICATION || c == CURLE_SSL_CACERT_BADFILE
				? EACCES
				: EHOSTUNREACH;
			return cell_err_msg(err, code, "registry %s: %s: %s%s", e->ep.registry,
					    x->what, errbuf[0] ? errbuf : curl_easy_strerror(c),
					    c == CURLE_OPERATION_TIMEDOUT
						? " (stalled: no bytes for the stall timeout)"
						: "");
		}
		e->scheme_known = true;
		if (x->status == 401 && attempt < 2 && !(bearer_fresh && e->bearer_key[0])) {
			if (!x->www_auth[0])
				break;
			/* A cached token the registry no longer takes: fetch anew once. */
			e->bearer_key[0] = '\0';
			if ((r = answer_challenge(e, x->www_auth, err)) < 0)
				return r;
			bearer_fresh = e->bearer_key[0] != '\0';
			continue;
		}
		break;
	}
	return 0;
}

/* A non-2xx answer as an error: the registry's own message when it sends one. */
static int http_status_error(const struct endpoint *e, const struct xfer *x, const char *what,
			     struct cell_error *err)
{
	char detail[300] = "";
	json_t *o = json_loadb(x->errbody, x->errlen, 0, NULL);
	json_t *first = json_array_get(json_object_get(o, "errors"), 0);
	const char *code = json_string_value(json_object_get(first, "code"));
	const char *msg = json_string_value(json_object_get(first, "message"));
	if (code || msg)
		snprintf(detail, sizeof(detail), ": %s%s%.200s", code ? code : "",
			 code && msg ? " " : "", msg ? msg : "");
	else if (is_html(x->content_type))
		snprintf(detail, sizeof(detail), " (an HTML page)");
	json_decref(o);
	int errnum = x->status == 404			    ? ENOENT
		     : x->status == 401 || x->status == 403 ? EACCES
		     : x->status == 429			    ? EAGAIN
							    : EPROTO;
	return cell_err_msg(err, errnum, "registry %s: %s: HTTP %ld%s", e->ep.registry, what,
			    x->status, detail);
}

/* ---- manifests and configs ---- */

static const char ACCEPT_ALL[] = "application/vnd.oci.image.index.v1+json, "
				 "application/vnd.docker.distribution.manifest.list.v2+json, "
				 "application/vnd.oci.image.manifest.v1+json, "
				 "application/vnd.docker.distribution.manifest.v2+json";

/* A manifest or index by tag or digest: its bytes, verified against want (a digest) or the
 * registry's Docker-Content-Digest; *digest is what they hash to. */
static int get_manifest(struct endpoint *e, const char *ref, const struct oci_digest *want,
			char **body, size_t *len, char *ctype, size_t ctsize,
			struct oci_digest *digest, struct cell_error *err)
{
	_cleanup_free_ char *path = NULL;
	char what[OCI_NAME_MAX + 160];
	snprintf(what, sizeof(what), "manifest %s:%s", e->ep.path, ref);
	if (asprintf(&path, "%s/manifests/%s", e->ep.path, ref) < 0)
		return cell_err(err, ENOMEM, "url");
	struct xfer x = {.fd = -1, .max = OCI_MANIFEST_MAX, .what = what};
	int r = http_get(e, path, ACCEPT_ALL, &x, err);
	if (r == 0 && x.status != 200)
		r = http_status_error(e, &x, what, err);
	enum oci_digest_alg alg = want ? want->alg : OCI_DIGEST_SHA256;
	if (r == 0 && oci_digest_of(x.buf ? x.buf : "", x.len, alg, digest) < 0)
		r = cell_err(err, ENOMEM, "digest");
	if (r == 0 && want && !oci_digest_equal(want, digest))
		r = cell_err_msg(err, EBADMSG,
				 "registry %s: %s: digest mismatch: expected %s, got %s",
				 e->ep.registry, what, want->text, digest->text);
	if (r == 0 && x.docker_digest[0]) {
		struct oci_digest hd, mine;
		if (oci_digest_parse(x.docker_digest, &hd, NULL) == 0 &&
		    oci_digest_of(x.buf ? x.buf : "", x.len, hd.alg, &mine) == 0 &&
		    !oci_digest_equal(&hd, &mine))
			r = cell_err_msg(err, EBADMSG,
					 "registry %s: %s: digest mismatch: the registry says %s, "
					 "its bytes are %s",
					 e->ep.registry, what, hd.text, mine.text);
	}
	if (r < 0) {
		free(x.buf);
		return r;
	}
	*body = x.buf ? x.buf : strdup("");
	*len = x.len;
	snprintf(ctype, ctsize, "%s", x.content_type);
	return *body ? 0 : cell_err(err, ENOMEM, "manifest");
}

static int get_small_blob(struct endpoint *e, const struct oci_descriptor *d, size_t max,
			  char **body, size_t *len, struct cell_error *err)
{
	char what[160];
	snprintf(what, sizeof(what), "config %s", d->digest.text);
	if (d->size < 0 || (uint64_t)d->size > max)
		return cell_err_msg(err, EFBIG, "%s: %lld bytes, more than %zu", what,
				    (long long)d->size, max);
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "%s/blobs/%s", e->ep.path, d->digest.text) < 0)
		return cell_err(err, ENOMEM, "url");
	struct xfer x = {.fd = -1, .max = max, .what = what, .want = &d->digest};
	int r = http_get(e, path, NULL, &x, err);
	if (r == 0 && x.status != 200)
		r = http_status_error(e, &x, what, err);
	struct oci_digest got;
	if (r == 0 && oci_digest_of(x.buf ? x.buf : "", x.len, d->digest.alg, &got) < 0)
		r = cell_err(err, ENOMEM, "digest");
	if (r == 0 && !oci_digest_equal(&got, &d->digest))
		r = cell_err_msg(err, EBADMSG, "registry %s: %s: digest mismatch: got %s",
				 e->ep.registry, what, got.text);
	if (r < 0) {
		free(x.buf);
		return r;
	}
	*body = x.buf ? x.buf : strdup("");
	*len = x.len;
	return *body ? 0 : cell_err(err, ENOMEM, "config");
}

/* ---- flights: one pull per reference and credentials, others waiting for it ---- */

struct listener {
	image_pull_progress_fn *fn;
	void *cls;
};

struct flight {
	char key[OCI_NAME_MAX * 2 + CELL_SHA256_HEX_LEN + 4];
	char reference[STORE_NAME_MAX * 2]; /* normalized, as its events name it */
	bool done;
	int rc;
	struct cell_error err;
	struct image_pull_result res;
	unsigned refs;
	struct listener ls[LISTENERS_MAX];
	struct flight *next;
};

static void emit(struct flight *f, const struct image_pull_progress *p)
{
	pthread_mutex_lock(&g.lock);
	for (unsigned i = 0; i < LISTENERS_MAX; i++)
		if (f->ls[i].fn)
			f->ls[i].fn(f->ls[i].cls, p);
	pthread_mutex_unlock(&g.lock);
}

static int listen_locked(struct flight *f, image_pull_progress_fn *fn, void *cls)
{
	for (int i = 0; fn && i < LISTENERS_MAX; i++)
		if (!f->ls[i].fn) {
			f->ls[i] = (struct listener){fn, cls};
			return i;
		}
	return -1;
}

static void flight_unref_locked(struct flight *f)
{
	if (--f->refs)
		return;
	for (struct flight **p = &g.flights; *p; p = &(*p)->next)
		if (*p == f) {
			*p = f->next;
			break;
		}
	free(f);
}

/* ---- layers ---- */

struct layer_job {
	const struct oci_descriptor *desc;
	const char *diff_id;
	unsigned index;
	uint64_t last_emit_ms;
};

struct pull {
	struct flight *flight;
	struct endpoint *e;
	const struct oci_manifest *m;
	const struct oci_config *c;
	struct layer_job *jobs;
	unsigned n_jobs, next;
	pthread_mutex_t lock;
	/* Layers are fetched a few at once but unpacked bottom first: each over the ones below
	 * it (store_layer_add_over), done[i] once layer i is in the store. */
	pthread_cond_t below;
	bool *done;
	int rc;
	struct cell_error err;
	uint64_t fetched;
	unsigned layers_fetched;
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void progress(struct pull *p, const struct layer_job *j, enum image_pull_state s,
		     uint64_t done)
{
	struct image_pull_progress pp = {.digest = j->desc->digest.text,
					 .index = j->index,
					 .count = p->m->n_layers,
					 .state = s,
					 .done = done,
					 .total = (uint64_t)j->desc->size};
	emit(p->flight, &pp);
	if (s == PULL_LAYER_DONE || s == PULL_LAYER_EXISTS)
		image_event_layer(p->flight->reference, pp.digest, pp.index, pp.count,
				  image_pull_state_name(s), pp.total);
}

struct bytes_cls {
	struct pull *p;
	struct layer_job *j;
};

static void on_bytes(void *cls, uint64_t done)
{
	struct bytes_cls *b = cls;
	uint64_t t = now_ms();
	if (t - b->j->last_emit_ms < 200)
		return;
	b->j->last_emit_ms = t;
	progress(b->p, b->j, PULL_LAYER_DOWNLOADING, done);
}

/* Claim a blob for download (waiting while another pull downloads it): its slot. */
static int blob_claim(const char *digest)
{
	pthread_mutex_lock(&g.lock);
	int slot;
	for (;;) {
		slot = -1;
		bool busy = false;
		for (int i = 0; i < BLOBS_BUSY; i++) {
			if (!g.busy[i][0] && slot < 0)
				slot = i;
			busy |= !strcmp(g.busy[i], digest);
		}
		if (!busy && slot >= 0)
			break;
		pthread_cond_wait(&g.cond, &g.lock);
	}
	snprintf(g.busy[slot], OCI_DIGEST_MAX, "%s", digest);
	pthread_mutex_unlock(&g.lock);
	return slot;
}

static void blob_release(int slot)
{
	pthread_mutex_lock(&g.lock);
	g.busy[slot][0] = '\0';
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
}

/* Hash what a partial blob holds already into ctx: its length, or -errno. */
static int64_t rehash(int fd, struct oci_digester *ctx, struct cell_error *err)
{
	char buf[1 << 16];
	int64_t total = 0;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)total);
		if (n < 0)
			return cell_err(err, errno, "reading a partial blob");
		if (n == 0)
			return total;
		if (oci_digest_update(ctx, buf, (size_t)n) < 0)
			return cell_err_msg(err, ENOMEM, "hashing a partial blob");
		total += n;
	}
}

/* Download one blob into partial/<hex> (resuming what is there), verified. 0 with *fd_out
 * open on it, or -errno (a wrong blob's partial removed). */
static int download(struct pull *p, struct endpoint *ep, struct layer_job *j, int *fd_out,
		    uint64_t *fetched, struct cell_error *err)
{
	const struct oci_descriptor *d = j->desc;
	const char *hex = oci_digest_hex(&d->digest);
	char what[160];
	snprintf(what, sizeof(what), "blob %s", d->digest.text);
	_cleanup_close_ int fd =
	    openat(g.partial, hex, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return cell_err(err, errno, "opening %s/%s", g.partial_dir, hex);
	struct oci_digester ctx;
	int r = oci_digest_init(&ctx, d->digest.alg);
	if (r < 0)
		return cell_err(err, -r, "hashing the %s", what);
	int64_t have = rehash(fd, &ctx, err);
	if (have < 0 || (uint64_t)have > (uint64_t)d->size) {
		/* Longer than the blob: not resumable. */
		oci_digest_abandon(&ctx);
		if (have < 0)
			return (int)have;
		if (ftruncate(fd, 0) < 0)
			return cell_err(err, errno, "truncating %s/%s", g.partial_dir, hex);
		if ((r = oci_digest_init(&ctx, d->digest.alg)) < 0)
			return cell_err(err, -r, "hashing the %s", what);
		have = 0;
	}
	struct bytes_cls bc = {p, j};
	struct xfer x = {.fd = fd,
			 .off = (uint64_t)have,
			 .resume_at = (uint64_t)have,
			 .expect = (uint64_t)d->size,
			 .dctx = &ctx,
			 .want = &d->digest,
			 .what = what,
			 .on_bytes = on_bytes,
			 .on_bytes_cls = &bc};
	if ((uint64_t)have < (uint64_t)d->size) {
		if (have)
			log_info("pull: resuming %s at %lld of %lld bytes", what, (long long)have,
				 (long long)d->size);
		progress(p, j, PULL_LAYER_DOWNLOADING, (uint64_t)have);
		_cleanup_free_ char *path = NULL;
		if (asprintf(&path, "%s/blobs/%s", ep->ep.path, d->digest.text) < 0)
			r = cell_err(err, ENOMEM, "url");
		else
			r = http_get(ep, path, NULL, &x, err);
		if (r == 0 && x.status != 200 && x.status != 206)
			r = http_status_error(ep, &x, what, err);
		if (r == 0 && x.off != (uint64_t)d->size)
			r = cell_err_msg(
			    err, EPROTO, "registry %s: %s is truncated: %llu of %lld bytes",
			    ep->ep.registry, what, (unsigned long long)x.off, (long long)d->size);
	}
	*fetched = x.fetched;
	if (r < 0) {
		oci_digest_abandon(&ctx);
		/* A refusal means the bytes are not the blob's: no use resuming them. What
		 * came before a cut (a prefix, checked whole at the end) stays to resume;
		 * an empty file is not kept. */
		if ((x.refused || x.off == 0) && unlinkat(g.partial, hex, 0) < 0 && errno != ENOENT)
			log_warn("pull: removing %s/%s: %s", g.partial_dir, hex, strerror(errno));
		return r;
	}
	if ((r = oci_digest_verify(&ctx, &d->digest, err)) < 0) {
		cell_err_wrap(err, "%s: ", what);
		if (unlinkat(g.partial, hex, 0) < 0 && errno != ENOENT)
			log_warn("pull: removing %s/%s: %s", g.partial_dir, hex, strerror(errno));
		if (have > 0) {
			/* The kept bytes may be what failed (a host that crashed with the file's
			 * size written and not all its data): the blob once more, whole. */
			log_warn("pull: %s resumed at %lld is not the blob (%s); fetching it whole",
				 what, (long long)have, err->msg);
			cell_err_clear(err);
			uint64_t again = 0;
			r = download(p, ep, j, fd_out, &again, err);
			*fetched += again;
			return r;
		}
		return cell_err_wrap(err, "registry %s", ep->ep.registry);
	}
	if (lseek(fd, 0, SEEK_SET) < 0)
		return cell_err(err, errno, "rewinding %s", what);
	*fd_out = move_fd(fd);
	return 0;
}

/* Wait until every layer below j is in the store (or one failed: then -ECANCELED). */
static int wait_below(struct pull *p, const struct layer_job *j, struct cell_error *err)
{
	pthread_mutex_lock(&p->lock);
	for (;;) {
		unsigned k = 0;
		while (k < j->index && p->done[k])
			k++;
		if (k == j->index || p->rc < 0)
			break;
		pthread_cond_wait(&p->below, &p->lock);
	}
	int r = p->rc < 0 ? -ECANCELED : 0;
	pthread_mutex_unlock(&p->lock);
	return r < 0 ? cell_err_msg(err, ECANCELED, "a layer below failed") : 0;
}

static int do_layer(struct pull *p, struct layer_job *j, struct cell_error *err)
{
	const struct oci_descriptor *d = j->desc;
	enum oci_compression comp;
	int r = oci_layer_compression(d->media_type, &comp, err);
	if (r < 0)
		return cell_err_wrap(err, "layer %s", d->digest.text);
	int slot = blob_claim(d->digest.text);
	if (store_has_layer(j->diff_id)) {
		blob_release(slot);
		progress(p, j, PULL_LAYER_EXISTS, (uint64_t)d->size);
		return 0;
	}
	int fd = -1;
	uint64_t fetched = 0;
	/* A copy of the endpoint per layer: a re-authentication writes to it. */
	struct endpoint e = *p->e;
	r = download(p, &e, j, &fd, &fetched, err);
	explicit_bzero(&e.creds, sizeof(e.creds));
	/* The claim guards the partial file while it is written; held while waiting for the
	 * layers below, two pulls naming shared layers in other orders could wait on each
	 * other. Another pull of the blob now finds it whole (or it gone, and the layer in the
	 * store). */
	blob_release(slot);
	pthread_mutex_lock(&p->lock);
	p->fetched += fetched;
	p->layers_fetched += fetched > 0;
	pthread_mutex_unlock(&p->lock);
	bool downloaded = r == 0;
	if (r == 0)
		r = wait_below(p, j, err);
	if (r == 0) {
		progress(p, j, PULL_LAYER_EXTRACTING, (uint64_t)d->size);
		char got[STORE_DIGEST_MAX];
		const char *parents[OCI_LAYERS_MAX];
		for (unsigned k = 0; k < j->index && k < OCI_LAYERS_MAX; k++)
			parents[k] = p->jobs[j->index - 1 - k].diff_id; /* top first */
		r = store_layer_add_over(fd,
					 d->digest.alg == OCI_DIGEST_SHA256 ? d->digest.text : NULL,
					 j->diff_id, parents, j->index, got, err);
	}
	if (fd >= 0)
		close(fd);
	if (downloaded) {
		if (r < 0)
			cell_err_wrap(err, "layer %s", d->digest.text);
		/* Unpacked, refused or given up (a layer below failed), the blob goes: the
		 * store keeps the layer, not its archive, and a refused one would be refused
		 * again. */
		if (unlinkat(g.partial, oci_digest_hex(&d->digest), 0) < 0 && errno != ENOENT)
			log_warn("pull: removing %s/%s: %s", g.partial_dir,
				 oci_digest_hex(&d->digest), strerror(errno));
	}
	if (r == 0)
		progress(p, j, PULL_LAYER_DONE, (uint64_t)d->size);
	return r;
}

static void *worker(void *arg)
{
	struct pull *p = arg;
	for (;;) {
		pthread_mutex_lock(&p->lock);
		if (p->rc < 0 || p->next >= p->n_jobs) {
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		struct layer_job *j = &p->jobs[p->next++];
		pthread_mutex_unlock(&p->lock);
		struct cell_error e = {0};
		int r = do_layer(p, j, &e);
		pthread_mutex_lock(&p->lock);
		if (r == 0)
			p->done[j->index] = true;
		else if (p->rc == 0 && r != -ECANCELED) {
			p->rc = r;
			p->err = e;
		}
		pthread_cond_broadcast(&p->below);
		pthread_mutex_unlock(&p->lock);
	}
}

static int pull_layers(struct pull *p, struct cell_error *err)
{
	unsigned n = g.cfg.parallel < p->n_jobs ? g.cfg.parallel : p->n_jobs;
	pthread_t th[16];
	unsigned started = 0;
	if (n > CELL_ARRAY_SIZE(th))
		n = CELL_ARRAY_SIZE(th);
	for (unsigned i = 1; i < n; i++)
		if (pthread_create(&th[started], NULL, worker, p) == 0)
			started++;
	worker(p); /* this thread is one of them */
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (p->rc < 0) {
		*err = p->err;
		return p->rc;
	}
	return 0;
}

/* ---- one pull from one endpoint ---- */

/* Pull ref from the endpoint e. *final: the failure is the image's, not the endpoint's (a
 * digest mismatch, a bound, another platform): no other endpoint is tried. */
/* The image store's bounds (policies/images/limits.json): layers of one image, its
 * compressed bytes, and what the store may hold in all (its layers unpack to at least as
 * many bytes as they take compressed: counted so, before any is fetched). */
static int within_policy(const char *name, const struct oci_manifest *m, uint64_t total,
			 struct cell_error *err)
{
	const struct image_policy *p = image_policy();
	if (m->n_layers > p->max_layers)
		return cell_err_msg(err, EFBIG,
				    "%s: %u layers, more than the %u a pull takes "
				    "(maxLayers)",
				    name, m->n_layers, p->max_layers);
	if (total > p->max_image_bytes)
		return cell_err_msg(
		    err, EFBIG,
		    "%s: its layers are %llu bytes, more than the %llu a pull takes "
		    "(maxImageBytes)",
		    name, (unsigned long long)total, (unsigned long long)p->max_image_bytes);
	uint64_t used = store_used_bytes();
	if (used + total > p->max_store_bytes)
		return cell_err_msg(err, ENOSPC,
				    "%s: the image store holds %llu bytes of its %llu "
				    "(maxStoreBytes): remove images and prune first",
				    name, (unsigned long long)used,
				    (unsigned long long)p->max_store_bytes);
	return 0;
}

static int pull_from(struct endpoint *e, const struct oci_ref *ref, const char *name,
		     struct flight *f, struct image_pull_result *res, bool *final,
		     struct cell_error *err)
{
	*final = false;
	struct oci_platform host;
	int r = oci_platform_host(&host, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *body = NULL;
	size_t len = 0;
	char ctype[128];
	struct oci_digest digest;
	r = get_manifest(e, ref->has_digest ? ref->digest.text : ref->tag,
			 ref->has_digest ? &ref->digest : NULL, &body, &len, ctype, sizeof(ctype),
			 &digest, err);
	if (r < 0)
		return r;
	enum oci_media kind;
	if ((r = oci_doc_media(body, len, ctype, NULL, &kind, err)) < 0) {
		*final = true;
		return cell_err_wrap(err, "registry %s: %s", e->ep.registry, e->ep.path);
	}
	if (oci_media_is_index(kind)) {
		struct oci_descriptor chosen;
		r = oci_index_choose(body, len, ctype, &host, NULL, &chosen, err);
		if (r < 0) {
			*final = true;
			return cell_err_wrap(err, "%s: ", name);
		}
		free(body);
		body = NULL;
		if (chosen.size > (int64_t)OCI_MANIFEST_MAX) {
			*final = true;
			return cell_err_msg(err, EFBIG, "%s: its manifest is too large", name);
		}
		r = get_manifest(e, chosen.digest.text, &chosen.digest, &body, &len, ctype,
				 sizeof(ctype), &digest, err);
		if (r < 0)
			return r;
	}
	struct oci_manifest m = {0};
	if ((r = oci_manifest_parse(body, len, ctype, NULL, &m, err)) < 0) {
		*final = true;
		return cell_err_wrap(err, "registry %s: %s", e->ep.registry, e->ep.path);
	}
	struct oci_config c = {0};
	_cleanup_free_ char *cbody = NULL;
	size_t clen = 0;
	json_t *cjson = NULL;
	struct layer_job *jobs = NULL;
	uint64_t total = 0;
	for (unsigned i = 0; i < m.n_layers; i++)
		total += m.layers[i].size > 0 ? (uint64_t)m.layers[i].size : 0;
	if ((r = within_policy(name, &m, total, err)) < 0) {
		*final = true;
		goto out;
	}
	if (total > g.cfg.image_max) {
		*final = true;
		r = cell_err_msg(err, EFBIG,
				 "%s: its layers are %llu bytes, more than the %llu a "
				 "pull takes",
				 name, (unsigned long long)total,
				 (unsigned long long)g.cfg.image_max);
		goto out;
	}
	if ((r = get_small_blob(e, &m.config, PULL_CONFIG_MAX, &cbody, &clen, err)) < 0)
		goto out;
	if ((r = oci_config_parse(cbody, clen, NULL, &c, err)) < 0 ||
	    (r = oci_config_check_layers(&c, &m, err)) < 0 ||
	    (r = oci_config_check_platform(&c, &host, err)) < 0) {
		*final = true;
		cell_err_wrap(err, "%s: ", name);
		goto out;
	}
	if (!(cjson = json_loadb(cbody, clen, 0, NULL)) ||
	    !(jobs = calloc(m.n_layers ? m.n_layers : 1, sizeof(*jobs)))) {
		r = cell_err(err, ENOMEM, "image config");
		goto out;
	}
	bool *done = calloc(m.n_layers ? m.n_layers : 1, sizeof(*done));
	if (!done) {
		r = cell_err(err, ENOMEM, "image layers");
		goto out;
	}
	struct pull p = {.flight = f,
			 .e = e,
			 .m = &m,
			 .c = &c,
			 .jobs = jobs,
			 .n_jobs = m.n_layers,
			 .done = done};
	pthread_mutex_init(&p.lock, NULL);
	pthread_cond_init(&p.below, NULL);
	for (unsigned i = 0; i < m.n_layers; i++) {
		jobs[i] = (struct layer_job){
		    .desc = &m.layers[i], .diff_id = c.diff_ids[i].text, .index = i};
		progress(&p, &jobs[i],
			 store_has_layer(jobs[i].diff_id) ? PULL_LAYER_EXISTS : PULL_LAYER_WAITING,
			 0);
	}
	r = pull_layers(&p, err);
	pthread_mutex_destroy(&p.lock);
	pthread_cond_destroy(&p.below);
	free(done);
	res->fetched = p.fetched;
	res->layers = m.n_layers;
	res->layers_fetched = p.layers_fetched;
	if (r < 0)
		goto out;
	struct store_image img = {.config = cjson, .n_layers = m.n_layers};
	snprintf(img.digest, sizeof(img.digest), "%.71s", digest.text);
	snprintf(img.config_digest, sizeof(img.config_digest), "%.71s", m.config.digest.text);
	img.layers = calloc(m.n_layers ? m.n_layers : 1, sizeof(*img.layers));
	if (!img.layers) {
		r = cell_err(err, ENOMEM, "image");
		goto out;
	}
	for (unsigned i = 0; i < m.n_layers; i++) {
		snprintf(img.layers[i], STORE_DIGEST_MAX, "%.71s", c.diff_ids[i].text);
		img.bytes += store_layer_bytes(c.diff_ids[i].text);
	}
	r = store_image_put(name, &img, err);
	free(img.layers);
	if (r == 0) {
		snprintf(res->name, sizeof(res->name), "%s", name);
		snprintf(res->digest, sizeof(res->digest), "%.71s", digest.text);
		log_info("pull: %s is %s (%u layers, %u downloaded, %llu bytes fetched)", name,
			 digest.text, m.n_layers, res->layers_fetched,
			 (unsigned long long)res->fetched);
	}
out:
	free(jobs);
	json_decref(cjson);
	oci_config_free(&c);
	oci_manifest_free(&m);
	return r;
}

/* The candidates of a reference: itself, or a short name in each search registry
 * (docker.io when registries.conf lists none). */
static int candidates(const struct oci_ref *ref, const struct oci_regconf *conf,
		      struct oci_ref *out, unsigned max, struct cell_error *err)
{
	if (!ref->short_name) {
		out[0] = *ref;
		return 1;
	}
	if (!conf->has_search)
		return oci_ref_qualify(ref, "docker.io", &out[0], err) < 0 ? -EINVAL : 1;
	unsigned n = 0;
	for (unsigned i = 0; i < conf->n_search && n < max; i++) {
		struct cell_error e = {0};
		if (oci_ref_qualify(ref, conf->search[i], &out[n], &e) == 0)
			n++;
		else
			log_warn("pull: search registry %s: %s", conf->search[i], e.msg);
	}
	if (!n)
		return cell_err_msg(err, ENOENT,
				    "'%.200s' is a short name and registries.conf's "
				    "unqualified-search-registries is empty: name the registry",
				    ref->short_path);
	return (int)n;
}

/* registries.conf, read again for every pull: --registries-conf alone, else
 * $CONTAINERS_REGISTRIES_CONF alone, else the default file and the drop-in dir. */
static int load_conf(struct oci_regconf **conf, struct cell_error *err)
{
	const char *env = getenv("CONTAINERS_REGISTRIES_CONF");
	const char *override = g.cfg.registries_conf ? g.cfg.registries_conf
			       : env && env[0]	     ? env
						     : NULL;
	int r =
	    oci_regconf_load(PULL_REGCONF_DEFAULT, g.cfg.registries_conf_dir, override, conf, err);
	return r < 0 ? cell_err_wrap(err, "registries.conf") : 0;
}

static bool final_error(int r)
{
	/* A lie or a bound is the image's: another mirror would not make it right, and a
	 * layer refused is refused everywhere. */
	return r == -EBADMSG || r == -EFBIG || r == -ENOEXEC || r == -EINVAL;
}

static int pull_ref(const struct oci_ref *ref, const struct oci_creds *creds, struct flight *f,
		    struct image_pull_result *res, struct cell_error *err)
{
	struct oci_regconf *conf = NULL;
	int r = load_conf(&conf, err);
	if (r < 0)
		return r;
	struct oci_ref cands[OCI_REGCONF_SEARCH_MAX];
	int nc = candidates(ref, conf, cands, OCI_REGCONF_SEARCH_MAX, err);
	r = nc < 0 ? nc : -ENOENT;
	struct cell_error first = {0};
	int first_r = 0;
	for (int ci = 0; ci < nc; ci++) {
		char name[STORE_NAME_MAX];
		if (oci_ref_format(&cands[ci], name, sizeof(name)) < 0) {
			r = cell_err_msg(err, ENAMETOOLONG, "the reference is too long");
			continue;
		}
		struct oci_endpoint eps[OCI_ENDPOINTS_MAX];
		cell_err_clear(err);
		int ne = oci_regconf_endpoints(conf, &cands[ci], eps, err);
		if (ne < 0) {
			r = ne;
			cell_err_wrap(err, "%s: ", name);
			continue;
		}
		for (int ei = 0; ei < ne; ei++) {
			struct endpoint e;
			bool final = false;
			cell_err_clear(err);
			r = endpoint_setup(&e, &eps[ei], creds, err);
			if (r == 0)
				r = pull_from(&e, &cands[ci], name, f, res, &final, err);
			endpoint_free(&e);
			if (r == 0)
				goto done;
			if (final || final_error(r))
				goto done;
			if (ei + 1 < ne)
				log_info("pull: %s from %s: %s; trying the next endpoint", name,
					 eps[ei].registry, err->msg);
		}
		/* A short name tried in the next search registry: what the first said, unless
		 * it only lacked the image, is what the caller hears at the end. */
		if (!first_r || (first_r == -ENOENT && r != -ENOENT)) {
			first_r = r;
			first = *err;
		}
	}
	if (first_r && r < 0) {
		r = first_r;
		*err = first;
	}
done:
	free(conf);
	return r;
}

int image_pull(const char *reference, const struct oci_creds *creds, image_pull_progress_fn *fn,
	       void *cls, struct image_pull_result *out, struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	if (g.partial < 0)
		return cell_err_msg(err, ENOENT, "pulls are not set up");
	struct oci_ref ref;
	int r = oci_ref_parse(reference, &ref, err);
	if (r < 0)
		return r;
	char key[sizeof(((struct flight *)0)->key)], norm[STORE_NAME_MAX * 2];
	oci_ref_format(&ref, norm, sizeof(norm));
	char cid[CELL_SHA256_HEX_LEN + 1] = "-";
	if (creds) {
		char both[sizeof(creds->user) + sizeof(creds->pass) + 2];
		snprintf(both, sizeof(both), "%s:%s", creds->user, creds->pass);
		cell_sha256_hex(both, strlen(both), cid);
		explicit_bzero(both, sizeof(both));
	}
	snprintf(key, sizeof(key), "%s %s", norm, cid);

	pthread_mutex_lock(&g.lock);
	struct flight *f = g.flights;
	while (f && (f->done || strcmp(f->key, key)))
		f = f->next;
	if (f) {
		f->refs++;
		int slot = listen_locked(f, fn, cls);
		while (!f->done)
			pthread_cond_wait(&g.cond, &g.lock);
		if (slot >= 0)
			f->ls[slot].fn = NULL;
		r = f->rc;
		*out = f->res;
		out->joined = true;
		if (r < 0 && err)
			*err = f->err;
		flight_unref_locked(f);
		pthread_mutex_unlock(&g.lock);
		return r;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		pthread_mutex_unlock(&g.lock);
		return cell_err(err, ENOMEM, "pull");
	}
	snprintf(f->key, sizeof(f->key), "%s", key);
	snprintf(f->reference, sizeof(f->reference), "%s", norm);
	f->refs = 1;
	listen_locked(f, fn, cls);
	f->next = g.flights;
	g.flights = f;
	pthread_mutex_unlock(&g.lock);

	struct cell_error e = {0};
	image_event("pull.started", json_pack("{s:s}", "reference", norm));
	store_hold();
	r = pull_ref(&ref, creds, f, out, &e);
	store_unhold();
	if (r < 0 && !e.code)
		cell_err_msg(&e, -r, "pulling %s", norm);
	if (r < 0)
		image_event("pull.failed",
			    json_pack("{s:s, s:s}", "reference", norm, "error", e.msg));
	else
		image_event("pull.done", json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "reference",
						   norm, "name", out->name, "digest", out->digest,
						   "layers", (json_int_t)out->layers,
						   "layersFetched", (json_int_t)out->layers_fetched,
						   "bytesFetched", (json_int_t)out->fetched));

	pthread_mutex_lock(&g.lock);
	f->done = true;
	f->rc = r;
	f->err = e;
	f->res = *out;
	memset(f->ls, 0, sizeof(f->ls));
	pthread_cond_broadcast(&g.cond);
	flight_unref_locked(f);
	pthread_mutex_unlock(&g.lock);
	if (r < 0 && err)
		*err = e;
	return r;
}

const char *image_pull_state_name(enum image_pull_state s)
{
	static const char *const names[] = {"waiting", "downloading", "extracting", "done",
					    "exists"};
	return (unsigned)s < CELL_ARRAY_SIZE(names) ? names[s] : "?";
}

/* Partial blobs nobody resumed for PULL_PARTIAL_MAX_AGE_S go. */
static void sweep_partials(void)
{
	int fd = openat(g.partial, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *de;
	time_t now = time(NULL);
	while ((de = readdir(d))) {
		struct stat s;
		if (de->d_name[0] == '.' ||
		    fstatat(g.partial, de->d_name, &s, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (!S_ISREG(s.st_mode) || now - s.st_mtime > PULL_PARTIAL_MAX_AGE_S)
			if (unlinkat(g.partial, de->d_name, 0) < 0)
				log_warn("pull: removing %s/%s: %s", g.partial_dir, de->d_name,
					 strerror(errno));
	}
	closedir(d);
}

int image_pull_init(const char *images_dir, const struct image_pull_config *cfg,
		    struct cell_error *err)
{
	g.cfg = *cfg;
	if (!g.cfg.certs_dir)
		g.cfg.certs_dir = PULL_CERTS_DIR_DEFAULT;
	if (!g.cfg.registries_conf_dir)
		g.cfg.registries_conf_dir = PULL_REGCONF_DIR_DEFAULT;
	if (!g.cfg.stall_timeout_s)
		g.cfg.stall_timeout_s = PULL_STALL_DEFAULT_S;
	if (!g.cfg.parallel)
		g.cfg.parallel = PULL_PARALLEL_DEFAULT;
	if (!g.cfg.image_max)
		g.cfg.image_max = PULL_IMAGE_MAX_DEFAULT;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return cell_err_msg(err, EIO, "libcurl's global init failed");
	if ((size_t)snprintf(g.partial_dir, sizeof(g.partial_dir), "%s/.store/partial",
			     images_dir) >= sizeof(g.partial_dir))
		return cell_err(err, ENAMETOOLONG, "images dir %s", images_dir);
	if (mkdir(g.partial_dir, 0700) < 0 && errno != EEXIST)
		return cell_err(err, errno, "making %s", g.partial_dir);
	g.partial = open(g.partial_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (g.partial < 0)
		return cell_err(err, errno, "opening %s", g.partial_dir);
	sweep_partials();
	return 0;
}
