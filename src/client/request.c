/* Raw requests of the client library: any method, body and headers; the answer whatever its
 * status (what a test needs to check an error answer byte by byte). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cell/cleanup.h"
#include "internal.h"

#define HEADERS_MAX (64u << 10)

struct sink {
	struct cell_client_buf *buf;
	size_t max;
};

static size_t sink_cb(char *ptr, size_t size, size_t nmemb, void *data)
{
	struct sink *s = data;
	size_t n = size * nmemb;
	return cell_client_buf_append(s->buf, ptr, n, s->max) < 0 ? 0 : n;
}

struct source {
	const char *p;
	size_t left;
};

static size_t source_cb(char *buf, size_t size, size_t nitems, void *data)
{
	struct source *s = data;
	size_t n = size * nitems < s->left ? size * nitems : s->left;
	memcpy(buf, s->p, n);
	s->p += n;
	s->left -= n;
	return n;
}

static struct curl_slist *request_headers(const struct cell_client *c,
					  const struct cell_client_req *req)
{
	_cleanup_free_ char *ctype = NULL;
	if (req->body && asprintf(&ctype, "Content-Type: %s",
				  req->content_type ? req->content_type : "application/json") < 0)
		return NULL;
	struct curl_slist *h = cell_client_headers(c, ctype, req->headers);
	if (h && req->chunked) {
		struct curl_slist *n = curl_slist_append(h, "Transfer-Encoding: chunked");
		if (!n)
			curl_slist_free_all(h);
		h = n;
	}
	return h;
}

static void request_body(CURL *h, const struct cell_client_req *req, const char *method,
			 struct source *src)
{
	size_t len = req->body && !req->body_len ? strlen(req->body) : req->body_len;
	if (req->body && req->chunked) {
		*src = (struct source){.p = req->body, .left = len};
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, source_cb);
		curl_easy_setopt(h, CURLOPT_READDATA, src);
	} else if (req->body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	} else if (!strcmp(method, "POST")) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
	}
	/* A body makes libcurl send a POST: any other method with a body (a GET too) is named. */
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "POST") && (strcmp(method, "GET") || req->body))
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
}

int cell_client_request(struct cell_client *c, const struct cell_client_req *req,
			struct cell_client_resp *resp, struct cell_error *err)
{
	*resp = (struct cell_client_resp){0};
	const char *method = req->method ? req->method : "GET";
	CURL *h = cell_client_begin(c, req->path, err);
	if (!h)
		return -err->code;
	struct curl_slist *hdrs = request_headers(c, req);
	if (!hdrs)
		return cell_err(err, ENOMEM, "%s %s: building the request", method, req->path);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	/* The path as given: a test of the server sends "/../" and "%2e" on purpose. */
	curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
	struct source src;
	request_body(h, req, method, &src);
	struct sink body = {&resp->body, req->max_body ? req->max_body : CELL_CLIENT_BODY_MAX};
	struct sink head = {&resp->headers, HEADERS_MAX};
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, sink_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &head);
	CURLcode rc = cell_client_perform(c, req->abortable);
	resp->status = cell_client_status(c);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(hdrs);
	if (rc == CURLE_WRITE_ERROR)
		return cell_err_msg(err, EMSGSIZE, "%s %s: answer larger than %zu bytes", method,
				    req->path, body.max);
	if (rc != CURLE_OK) {
		_cleanup_free_ char *what = NULL;
		if (asprintf(&what, "%s %s", method, req->path) < 0)
			what = NULL;
		return cell_client_transport_error(c, rc, what ? what : method, err);
	}
	return 0;
}

char *cell_client_resp_header(const struct cell_client_resp *resp, const char *name)
{
	size_t nl = strlen(name);
	const char *p = resp->headers.data;
	const char *end = p ? p + resp->headers.len : NULL;
	while (p && p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *le = eol ? eol : end;
		if ((size_t)(le - p) > nl && p[nl] == ':' && !strncasecmp(p, name, nl)) {
			const char *v = p + nl + 1;
			while (v < le && (*v == ' ' || *v == '\t'))
				v++;
			const char *ve = le;
			while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			return strndup(v, (size_t)(ve - v));
		}
		p = eol ? eol + 1 : end;
	}
	return NULL;
}

void cell_client_resp_free(struct cell_client_resp *resp)
{
	cell_client_buf_free(&resp->body);
	cell_client_buf_free(&resp->headers);
	resp->status = 0;
}
