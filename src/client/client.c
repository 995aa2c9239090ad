/* The client library's handle: one libcurl easy handle kept for the life of a
 * `struct cell_client`, so create → exec → delete reuse one connection to celld. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "cell/cleanup.h"
#include "internal.h"

void cell_client_init(struct cell_client *c, const char *socket)
{
	memset(c, 0, sizeof(*c));
	c->socket = socket;
	/* A celld whose accept queue is full must not hang a client forever. */
	c->connect_timeout_s = 10;
}

void cell_client_close(struct cell_client *c)
{
	if (!c->curl_)
		return;
	curl_easy_cleanup(c->curl_);
	c->curl_ = NULL;
	curl_slist_free_all(c->json_headers_);
	c->json_headers_ = NULL;
	curl_global_cleanup();
}

const char *cell_client_endpoint(const struct cell_client *c)
{
	return c->socket ? c->socket : c->url ? c->url : "(no endpoint)";
}

unsigned long long cell_client_received(struct cell_client *c)
{
	curl_off_t n = 0;
	if (c->curl_)
		curl_easy_getinfo(c->curl_, CURLINFO_SIZE_DOWNLOAD_T, &n);
	return n > 0 ? (unsigned long long)n : 0;
}

char *cell_client_urlencode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1);
	if (!out)
		return NULL;
	char *o = out;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char ch = *p;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '~' ||
		    ch == '/') {
			*o++ = (char)ch;
		} else {
			*o++ = '%';
			*o++ = hex[ch >> 4];
			*o++ = hex[ch & 15];
		}
	}
	*o = '\0';
	return out;
}

struct curl_slist *cell_client_headers(const struct cell_client *c, const char *first,
				       const char *const *extra)
{
	struct curl_slist *h = NULL, *n;
	if (first && !(h = curl_slist_append(h, first)))
		return NULL;
	if (!(n = curl_slist_append(h, "Expect:")))
		goto fail;
	h = n;
	if (c->api_key) {
		_cleanup_free_ char *line = NULL;
		if (asprintf(&line, CELL_CLIENT_KEY_HEADER ": %s", c->api_key) < 0 ||
		    !(n = curl_slist_append(h, line)))
			goto fail;
		h = n;
	}
	for (const char *const *e = extra; e && *e; e++) {
		if (!(n = curl_slist_append(h, *e)))
			goto fail;
		h = n;
	}
	return h;
fail:
	curl_slist_free_all(h);
	return NULL;
}

static int progress_cb(void *data, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct cell_client *c = data;
	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return c->abortable_ && c->interrupt && *c->interrupt ? 1 : 0;
}

static int handle_open(struct cell_client *c, struct cell_error *err)
{
	/* Plain HTTP over a Unix socket only: skipping the TLS library's initialisation saves
	 * about a millisecond on every `cell` invocation. */
	long flags = c->socket ? CURL_GLOBAL_NOTHING : CURL_GLOBAL_DEFAULT;
	if (curl_global_init(flags) != CURLE_OK)
		return cell_err(err, 0, "initialising libcurl failed");
	c->curl_ = curl_easy_init();
	if (!c->curl_) {
		curl_global_cleanup();
		return cell_err(err, ENOMEM, "initialising libcurl");
	}
	c->json_headers_ = cell_client_headers(c, "Content-Type: application/json", NULL);
	if (!c->json_headers_) {
		cell_client_close(c);
		return cell_err(err, ENOMEM, "initialising libcurl");
	}
	return 0;
}

CURL *cell_client_begin(struct cell_client *c, const char *path, struct cell_error *err)
{
	if (c->socket && strlen(c->socket) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return cell_err(err, ENAMETOOLONG, "celld socket path %s", c->socket), NULL;
	if (!c->socket && !c->url)
		return cell_err_msg(err, EINVAL, "no celld endpoint (socket or URL)"), NULL;
	if (!c->curl_) {
		if (handle_open(c, err) < 0)
			return NULL;
	} else {
		curl_easy_reset(c->curl_); /* keeps the open connection */
	}
	CURL *h = c->curl_;
	_cleanup_free_ char *url = NULL;
	if (asprintf(&url, "%s%s", c->socket ? "http://localhost" : c->url, path) < 0)
		return cell_err(err, ENOMEM, "building URL"), NULL;
	c->errbuf_[0] = '\0';
	if (c->socket)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->socket);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (c->connect_timeout_s > 0)
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, c->connect_timeout_s);
	if (c->timeout_s > 0)
		curl_easy_setopt(h, CURLOPT_TIMEOUT, c->timeout_s);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf_);
	if (c->user_agent)
		curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
	if (c->no_proxy) {
		curl_easy_setopt(h, CURLOPT_PROXY, "");
		curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	}
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress_cb);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->json_headers_);
	return h;
}

CURLcode cell_client_perform(struct cell_client *c, bool abortable)
{
	c->abortable_ = abortable;
	c->unreachable = false;
	CURLcode rc = curl_easy_perform(c->curl_);
	c->abortable_ = false;
	return rc;
}

long cell_client_status(struct cell_client *c)
{
	long st = 0;
	curl_easy_getinfo(c->curl_, CURLINFO_RESPONSE_CODE, &st);
	return st;
}

int cell_client_transport_error(struct cell_client *c, CURLcode rc, const char *what,
				struct cell_error *err)
{
	if (rc == CURLE_COULDNT_CONNECT) {
		long os_errno = 0;
		curl_easy_getinfo(c->curl_, CURLINFO_OS_ERRNO, &os_errno);
		int e = os_errno > 0 ? (int)os_errno : ECONNREFUSED;
		c->unreachable = true;
		const char *hint = e == EACCES ? " (run as root or as a member of group 'cell')"
					       : " (is celld running?)";
		cell_err(err, 0, "cannot reach celld at %s: %s%s", cell_client_endpoint(c),
			 strerror(e), hint);
		if (err)
			err->code = e;
		return -e;
	}
	if (rc == CURLE_ABORTED_BY_CALLBACK)
		return cell_err_msg(err, EINTR, "%s: interrupted", what);
	if (rc == CURLE_GOT_NOTHING)
		return cell_err_msg(err, ECONNRESET,
				    "%s: celld closed the connection without answering", what);
	return cell_err(err, 0, "%s: request to celld at %s failed: %s", what,
			cell_client_endpoint(c),
			c->errbuf_[0] ? c->errbuf_ : curl_easy_strerror(rc));
}

static int status_errno(long status)
{
	switch (status) {
	case 400:
		return EINVAL;
	case 401:
	case 403:
		return EACCES;
	case 404:
		return ENOENT;
	case 409:
		return EEXIST;
	case 413:
		return EFBIG;
	case 503:
		return EAGAIN;
	default:
		return EIO;
	}
}

int cell_client_status_error(long status, const struct cell_client_buf *body, const char *what,
			     char *code, size_t code_size, struct cell_error *err)
{
	int e = status_errno(status);
	json_t *j = body->len ? json_loadb(body->data, body->len, 0, NULL) : NULL;
	const char *jc = j ? json_string_value(json_object_get(j, "code")) : NULL;
	const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;
	if (code && code_size)
		snprintf(code, code_size, "%s", jc ? jc : "");
	if (m)
		cell_err(err, 0, "%s: %s (%s)", what, m, jc ? jc : "error");
	else if (body->len)
		cell_err(err, 0, "%s: celld answered HTTP %ld: %.200s", what, status, body->data);
	else
		cell_err(err, 0, "%s: celld answered HTTP %ld", what, status);
	if (err)
		err->code = e;
	json_decref(j);
	return -e;
}

size_t cell_client_collect(char *ptr, size_t size, size_t nmemb, void *data)
{
	size_t n = size * nmemb;
	return cell_client_buf_append(data, ptr, n, CELL_CLIENT_BODY_MAX) < 0 ? 0 : n;
}
