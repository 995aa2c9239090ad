/* bench-exec: a small HTTP client for `make bench`, speaking celld's API over its Unix socket.
 *
 *   bench-exec [-s SOCKET] get PATH                    GET, print the body, exit 0 on 2xx
 *   bench-exec [-s SOCKET] create IMAGE                create a sandbox, print its id
 *   bench-exec [-s SOCKET] delete ID                   delete a sandbox
 *   bench-exec [-s SOCKET] [-n N] [-w W] latency ID [ARGV...]
 *        run ARGV (default: true) N times after W warm-up runs, one request at a time on one
 *        kept-alive connection; print {"n","p50_ms","p99_ms",...} on stdout.  Each sample is
 *        the time from the start of the request to the parsed terminal event of the stream.
 *   bench-exec [-s SOCKET] throughput ID BYTES [zero|dd|text]
 *        run `head -c BYTES /dev/zero` once (or another producer, see producer_argv); count
 *        the decoded stdout bytes at the client and print {"bytes","wire_bytes","seconds",
 *        "mb_per_s",...} on stdout.
 *
 * The stream is text/event-stream: each event is one JSON object followed by a blank line
 * (an optional "data:" prefix per line is accepted too).  stdout/stderr events are decoded
 * by a small scanner instead of a full JSON parse so that the client is never the bottleneck
 * of the throughput figure; every other event goes through jansson.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "cell/cleanup.h"

#define DEFAULT_SOCKET "/run/cell/cell.sock"
#define EXECD_PREFIX   "/proxy/44772"
#define MAX_BODY       (4u << 20)  /* bound what a non-stream answer may make us buffer */
#define MAX_EVENT      (64u << 20) /* one SSE event larger than this is a protocol error */

static const char *sock_path = DEFAULT_SOCKET;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sandbox ids go into a URL path: accept only what an id can be. */
static bool valid_id(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > 128)
		return false;
	return strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* ---- plain request/response ---- */

struct body {
	char *data;
	size_t len;
};

static size_t body_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct body *b = userdata;
	size_t n = size * nmemb;
	char *p;

	if (b->len + n > MAX_BODY)
		return 0;
	p = realloc(b->data, b->len + n + 1);
	if (!p)
		return 0;
	memcpy(p + b->len, ptr, n);
	b->len += n;
	p[b->len] = '\0';
	b->data = p;
	return n;
}

static CURL *new_handle(const char *path)
{
	char url[1024];
	CURL *c = curl_easy_init();

	if (!c)
		return NULL;
	snprintf(url, sizeof(url), "http://localhost%s", path);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock_path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	return c;
}

/* One request with an optional JSON body; returns the HTTP status or -1. */
static long simple_request(const char *method, const char *path, const char *json, struct body *out)
{
	struct curl_slist *hdrs = NULL;
	long status = -1;
	CURLcode rc;
	CURL *c = new_handle(path);

	if (!c)
		return -1;
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (json) {
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
	}
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	rc = curl_easy_perform(c);
	if (rc != CURLE_OK)
		fprintf(stderr, "bench-exec: %s %s via %s: %s\n", method, path, sock_path,
			curl_easy_strerror(rc));
	else
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	return status;
}

static int cmd_get(const char *path)
{
	struct body b = {0};
	long st = simple_request("GET", path, NULL, &b);

	if (b.data)
		printf("%s\n", b.data);
	free(b.data);
	return st >= 200 && st < 300 ? 0 : 1;
}

static int cmd_create(const char *image)
{
	_cleanup_free_ char *req = NULL;
	struct body b = {0};
	json_t *root, *id;
	long st;
	int ret = 1;

	root =
	    json_pack("{s:{s:s}, s:{s:s}}", "image", "uri", image, "metadata", "purpose", "bench");
	if (!root)
		return 1;
	req = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (!req)
		return 1;
	st = simple_request("POST", "/v1/sandboxes", req, &b);
	if (st < 200 || st >= 300) {
		fprintf(stderr, "bench-exec: create image %s: HTTP %ld: %s\n", image, st,
			b.data ? b.data : "");
		free(b.data);
		return 1;
	}
	root = json_loadb(b.data ? b.data : "", b.len, 0, NULL);
	id = json_object_get(root, "id");
	if (json_is_string(id)) {
		printf("%s\n", json_string_value(id));
		ret = 0;
	} else {
		fprintf(stderr, "bench-exec: create: no \"id\" in answer: %s\n",
			b.data ? b.data : "");
	}
	json_decref(root);
	free(b.data);
	return ret;
}

static int cmd_delete(const char *id)
{
	char path[512];
	struct body b = {0};
	long st;

	if (!valid_id(id)) {
		fprintf(stderr, "bench-exec: invalid sandbox id: %s\n", id);
		return 1;
	}
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	st = simple_request("DELETE", path, NULL, &b);
	if (st < 200 || st >= 300) {
		fprintf(stderr, "bench-exec: delete %s: HTTP %ld: %s\n", id, st,
			b.data ? b.data : "");
		free(b.data);
		return 1;
	}
	free(b.data);
	return 0;
}

/* ---- the command event stream ---- */

enum terminal { TERM_NONE, TERM_COMPLETE, TERM_ERROR };

struct stream {
	char *buf;
	size_t start, len, cap; /* unconsumed bytes are buf[start, len) */
	size_t scan;		/* no "\n\n" before this index */
	uint64_t wire_bytes;
	uint64_t out_bytes, err_bytes;
	uint64_t out_nonzero; /* decoded stdout bytes that were not NUL (throughput check) */
	enum terminal term;
	uint64_t t_term;
	char detail[512]; /* error event or protocol problem, for the message */
	bool bad;
};

static void stream_reset(struct stream *s)
{
	s->start = s->len = s->scan = 0;
	s->wire_bytes = s->out_bytes = s->err_bytes = s->out_nonzero = 0;
	s->term = TERM_NONE;
	s->t_term = 0;
	s->detail[0] = '\0';
	s->bad = false;
}

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
		p++;
	return p;
}

/* p points just after an opening quote; returns the closing quote or NULL.  memchr keeps
 * this fast on the multi-hundred-KiB text strings of a throughput run. */
static const char *string_end(const char *p, const char *end)
{
	for (;;) {
		const char *q = memchr(p, '"', (size_t)(end - p));
		const char *b;

		if (!q)
			return NULL;
		b = q;
		while (b > p && b[-1] == '\\')
			b--;
		if (((q - b) & 1) == 0)
			return q;
		p = q + 1;
	}
}

/* Skips one JSON value that is not a string (number, literal, object, array). */
static const char *skip_value(const char *p, const char *end)
{
	int depth = 0;

	while (p < end) {
		char c = *p;

		if (c == '"') {
			p = string_end(p + 1, end);
			if (!p)
				return NULL;
			p++;
			continue;
		}
		if (c == '{' || c == '[') {
			depth++;
		} else if (c == '}' || c == ']') {
			if (depth == 0)
				return p;
			depth--;
		} else if (c == ',' && depth == 0) {
			return p;
		}
		p++;
	}
	return depth == 0 ? p : NULL;
}

struct span {
	const char *p;
	size_t n;
};

struct event {
	struct span type, text, encoding;
};

static bool span_is(struct span s, const char *lit)
{
	return s.p && s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

/* Finds the raw (still escaped) string values of "type", "text" and "encoding" in a
 * top-level JSON object.  Returns false on anything that is not such an object. */
static bool scan_event(const char *p, const char *end, struct event *ev)
{
	memset(ev, 0, sizeof(*ev));
	p = skip_ws(p, end);
	if (p == end || *p++ != '{')
		return false;
	for (;;) {
		const char *k, *ke;
		struct span *dst = NULL;

		p = skip_ws(p, end);
		if (p < end && *p == '}')
			return true;
		if (p == end || *p != '"')
			return false;
		k = p + 1;
		ke = string_end(k, end);
		if (!ke)
			return false;
		if (ke - k == 4 && !memcmp(k, "type", 4))
			dst = &ev->type;
		else if (ke - k == 4 && !memcmp(k, "text", 4))
			dst = &ev->text;
		else if (ke - k == 8 && !memcmp(k, "encoding", 8))
			dst = &ev->encoding;
		p = skip_ws(ke + 1, end);
		if (p == end || *p++ != ':')
			return false;
		p = skip_ws(p, end);
		if (p < end && *p == '"') {
			const char *ve = string_end(p + 1, end);

			if (!ve)
				return false;
			if (dst) {
				dst->p = p + 1;
				dst->n = (size_t)(ve - p - 1);
			}
			p = ve + 1;
		} else {
			p = skip_value(p, end);
			if (!p)
				return false;
		}
		p = skip_ws(p, end);
		if (p < end && *p == ',') {
			p++;
			continue;
		}
		return p < end && *p == '}';
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static long hex4(const char *p, const char *end)
{
	long v = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		int h = hexval(p[i]);

		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

static unsigned utf8_len(long cp)
{
	return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

/* Counts the bytes a JSON string body decodes to; *nonzero gets the count of decoded bytes
 * that are not NUL.  Returns false on a malformed escape. */
static bool json_text_len(const char *p, size_t n, uint64_t *len, uint64_t *nonzero)
{
	static const char nul8[] = "\\u0000\\u0000\\u0000\\u0000\\u0000\\u0000\\u0000\\u0000";
	const char *end = p + n;
	uint64_t total = 0, nz = 0;

	while (p < end) {
		long cp;

		if (*p != '\\') {
			const char *bs = memchr(p, '\\', (size_t)(end - p));
			size_t lit = bs ? (size_t)(bs - p) : (size_t)(end - p);

			/* a literal byte in a JSON string is never NUL */
			total += lit;
			nz += lit;
			p += lit;
			continue;
		}
		/* NUL output arrives as runs of \u0000: count them without a call per byte */
		while (end - p >= 48 && !memcmp(p, nul8, 48)) {
			total += 8;
			p += 48;
		}
		if (p == end || *p != '\\')
			continue;
		if (end - p >= 6 && !memcmp(p, "\\u0000", 6)) {
			total++;
			p += 6;
			continue;
		}
		if (++p == end)
			return false;
		if (*p != 'u') {
			total++;
			nz++;
			p++;
			continue;
		}
		cp = hex4(p + 1, end);
		if (cp < 0)
			return false;
		p += 5;
		if (cp >= 0xd800 && cp < 0xdc00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
			long lo = hex4(p + 2, end);

			if (lo >= 0xdc00 && lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				p += 6;
			}
		}
		total += utf8_len(cp);
		nz += utf8_len(cp);
	}
	*len += total;
	*nonzero += nz;
	return true;
}

static signed char b64tab[256];

static void b64_init(void)
{
	static const char alpha[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	memset(b64tab, -1, sizeof(b64tab));
	for (int i = 0; i < 64; i++)
		b64tab[(unsigned char)alpha[i]] = (signed char)i;
}

/* Base64 text (the JSON string body; base64 never needs escapes): decoded length and the
 * count of non-NUL decoded bytes.  Four input characters (24 bits) at a time. */
static bool b64_text_len(const char *p, size_t n, uint64_t *len, uint64_t *nonzero)
{
	const unsigned char *u = (const unsigned char *)p;
	uint64_t total = 0, nz = 0;
	uint32_t acc = 0;
	int bits = 0;
	size_t i = 0;

	while (n && u[n - 1] == '=')
		n--;
	for (; i + 4 <= n; i += 4) {
		int a = b64tab[u[i]], b = b64tab[u[i + 1]], c = b64tab[u[i + 2]],
		    d = b64tab[u[i + 3]];
		uint32_t v;

		if ((a | b | c | d) < 0)
			return false;
		v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
		total += 3;
		if (v)
			nz += !!(v >> 16) + !!((v >> 8) & 0xff) + !!(v & 0xff);
	}
	for (; i < n; i++) {
		int v = b64tab[u[i]];

		if (v < 0)
			return false;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			total++;
			nz += ((acc >> bits) & 0xff) != 0;
		}
	}
	*len += total;
	*nonzero += nz;
	return true;
}

static void set_detail(struct stream *s, const char *what, const char *p, size_t n)
{
	snprintf(s->detail, sizeof(s->detail), "%s: %.*s", what, (int)(n > 300 ? 300 : n), p);
}

/* Terminal and other control events are small: parse them properly. */
static void control_event(struct stream *s, const char *p, size_t n)
{
	json_error_t jerr;
	json_t *ev = json_loadb(p, n, 0, &jerr);
	const char *type = json_string_value(json_object_get(ev, "type"));

	if (!ev || !type) {
		s->bad = true;
		set_detail(s, "unparsable event", p, n);
		json_decref(ev);
		return;
	}
	if (!strcmp(type, "execution_complete")) {
		s->term = TERM_COMPLETE;
		s->t_term = now_ns();
	} else if (!strcmp(type, "error")) {
		s->term = TERM_ERROR;
		s->t_term = now_ns();
		set_detail(s, "error event", p, n);
	}
	json_decref(ev);
}

static void handle_event(struct stream *s, const char *p, size_t n)
{
	struct event ev;
	uint64_t *count;
	bool ok;

	if (n == 0)
		return;
	if (!scan_event(p, p + n, &ev) || !ev.type.p) {
		s->bad = true;
		set_detail(s, "malformed event", p, n);
		return;
	}
	if (span_is(ev.type, "stdout"))
		count = &s->out_bytes;
	else if (span_is(ev.type, "stderr"))
		count = &s->err_bytes;
	else {
		control_event(s, p, n);
		return;
	}
	if (!ev.text.p) {
		s->bad = true;
		set_detail(s, "output event without text", p, n);
		return;
	}
	if (span_is(ev.encoding, "base64"))
		ok = b64_text_len(ev.text.p, ev.text.n, count,
				  count == &s->out_bytes ? &s->out_nonzero : &(uint64_t){0});
	else
		ok = json_text_len(ev.text.p, ev.text.n, count,
				   count == &s->out_bytes ? &s->out_nonzero : &(uint64_t){0});
	if (!ok) {
		s->bad = true;
		set_detail(s, "bad text encoding", p, n);
	}
}

/* An event block may be SSE-framed ("data: {...}" lines, ":" comments); the common case is
 * one bare JSON line, handled without a copy. */
static void handle_block(struct stream *s, const char *p, size_t n)
{
	_cleanup_free_ char *joined = NULL;
	size_t jl = 0;
	const char *end = p + n;

	if (n < 5 || memcmp(p, "data:", 5) != 0) {
		if (n == 0 || *p != ':')
			handle_event(s, p, n);
		return;
	}
	joined = malloc(n + 1);
	if (!joined) {
		s->bad = true;
		return;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;

		if (le - p >= 5 && !memcmp(p, "data:", 5)) {
			const char *d = p + 5;

			if (d < le && *d == ' ')
				d++;
			memcpy(joined + jl, d, (size_t)(le - d));
			jl += (size_t)(le - d);
		}
		p = nl ? nl + 1 : end;
	}
	handle_event(s, joined, jl);
}

static bool stream_reserve(struct stream *s, size_t n)
{
	size_t cap;
	char *p;

	if (s->cap - s->len >= n)
		return true;
	/* Compact only when full: moving the partial event on every write would be
	 * quadratic in the event size. */
	if (s->start) {
		memmove(s->buf, s->buf + s->start, s->len - s->start);
		s->len -= s->start;
		s->scan -= s->start;
		s->start = 0;
		if (s->cap - s->len >= n)
			return true;
	}
	if (s->len + n > MAX_EVENT)
		return false;
	cap = s->cap ? s->cap : 1u << 20;
	while (cap - s->len < n)
		cap *= 2;
	p = realloc(s->buf, cap);
	if (!p)
		return false;
	s->buf = p;
	s->cap = cap;
	return true;
}

static size_t stream_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct stream *s = userdata;
	size_t n = size * nmemb;

	s->wire_bytes += n;
	if (!stream_reserve(s, n)) {
		s->bad = true;
		snprintf(s->detail, sizeof(s->detail), "event larger than %u bytes", MAX_EVENT);
		return 0;
	}
	memcpy(s->buf + s->len, ptr, n);
	s->len += n;
	for (;;) {
		/* JSON text never holds a raw newline, so "\n\n" only ends an event; memchr
		 * for '\n' is far faster than a two-byte memmem on big events. */
		size_t from = s->scan > s->start ? s->scan - 1 : s->start;
		char *q = NULL;
		size_t ev_end;

		while (from + 1 < s->len) {
			char *nl = memchr(s->buf + from, '\n', s->len - from - 1);

			if (!nl)
				break;
			if (nl[1] == '\n') {
				q = nl;
				break;
			}
			from = (size_t)(nl - s->buf) + 1;
		}
		if (!q) {
			s->scan = s->len;
			break;
		}
		ev_end = (size_t)(q - s->buf);
		/* tolerate CRLF framing */
		handle_block(s, s->buf + s->start,
			     ev_end - s->start -
				 (ev_end > s->start && s->buf[ev_end - 1] == '\r' ? 1 : 0));
		s->start = ev_end + 2;
		s->scan = s->start;
	}
	if (s->start == s->len)
		s->start = s->len = s->scan = 0;
	return n;
}

struct exec_client {
	CURL *c;
	struct curl_slist *hdrs;
	char *req;
	struct stream s;
};

static int exec_client_init(struct exec_client *ec, const char *id, json_t *argv, long timeout_s)
{
	char path[512];
	json_t *root;

	if (!valid_id(id)) {
		fprintf(stderr, "bench-exec: invalid sandbox id: %s\n", id);
		return -1;
	}

	snprintf(path, sizeof(path), "/v1/sandboxes/%s" EXECD_PREFIX "/command", id);
	ec->c = new_handle(path);
	if (!ec->c)
		return -1;
	root = json_pack("{s:O}", "argv", argv);
	ec->req = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	if (!ec->req)
		return -1;
	ec->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	ec->hdrs = curl_slist_append(ec->hdrs, "Accept: text/event-stream");
	ec->hdrs = curl_slist_append(ec->hdrs, "Expect:");
	curl_easy_setopt(ec->c, CURLOPT_HTTPHEADER, ec->hdrs);
	curl_easy_setopt(ec->c, CURLOPT_POSTFIELDS, ec->req);
	curl_easy_setopt(ec->c, CURLOPT_WRITEFUNCTION, stream_write);
	curl_easy_setopt(ec->c, CURLOPT_WRITEDATA, &ec->s);
	curl_easy_setopt(ec->c, CURLOPT_BUFFERSIZE, 512L * 1024);
	/* a stream that never ends must not hang the whole bench */
	curl_easy_setopt(ec->c, CURLOPT_TIMEOUT, timeout_s);
	return 0;
}

static void exec_client_free(struct exec_client *ec)
{
	curl_slist_free_all(ec->hdrs);
	if (ec->c)
		curl_easy_cleanup(ec->c);
	free(ec->req);
	free(ec->s.buf);
}

/* One command; on success *elapsed_ns is request start → terminal event. */
static int exec_once(struct exec_client *ec, bool need_success, uint64_t *t0_out,
		     uint64_t *elapsed_ns)
{
	long status = 0;
	uint64_t t0;
	CURLcode rc;

	stream_reset(&ec->s);
	t0 = now_ns();
	rc = curl_easy_perform(ec->c);
	curl_easy_getinfo(ec->c, CURLINFO_RESPONSE_CODE, &status);
	if (t0_out)
		*t0_out = t0;
	if (rc != CURLE_OK) {
		fprintf(stderr, "bench-exec: POST command: %s%s%s\n", curl_easy_strerror(rc),
			ec->s.detail[0] ? ": " : "", ec->s.detail);
		return -1;
	}
	if (status != 200) {
		fprintf(stderr, "bench-exec: POST command: HTTP %ld: %.*s\n", status,
			(int)(ec->s.len - ec->s.start > 300 ? 300 : ec->s.len - ec->s.start),
			ec->s.buf ? ec->s.buf + ec->s.start : "");
		return -1;
	}
	if (ec->s.bad) {
		fprintf(stderr, "bench-exec: stream: %s\n", ec->s.detail);
		return -1;
	}
	if (ec->s.term == TERM_NONE) {
		fprintf(stderr, "bench-exec: stream ended without a terminal event\n");
		return -1;
	}
	if (need_success && ec->s.term != TERM_COMPLETE) {
		fprintf(stderr, "bench-exec: command failed: %s\n", ec->s.detail);
		return -1;
	}
	*elapsed_ns = ec->s.t_term - t0;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* nearest-rank percentile of a sorted array */
static double pct_ms(const uint64_t *v, size_t n, double p)
{
	size_t rank = (size_t)((p / 100.0) * (double)n + 0.999999);

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return (double)v[rank - 1] / 1e6;
}

static json_t *argv_json(int argc, char **argv)
{
	json_t *a = json_array();

	if (argc == 0)
		json_array_append_new(a, json_string("true"));
	for (int i = 0; i < argc; i++)
		json_array_append_new(a, json_string(argv[i]));
	return a;
}

static int cmd_latency(const char *id, long count, long warmup, int argc, char **argv)
{
	struct exec_client ec = {0};
	_cleanup_free_ uint64_t *v = calloc((size_t)count, sizeof(*v));
	json_t *a = argv_json(argc, argv);
	double sum = 0;
	int ret = 1;

	if (!v || !a || exec_client_init(&ec, id, a, 60) < 0)
		goto out;
	for (long i = 0; i < warmup + count; i++) {
		uint64_t ns;

		if (exec_once(&ec, true, NULL, &ns) < 0) {
			fprintf(stderr, "bench-exec: latency run %ld of %ld failed\n", i + 1,
				warmup + count);
			goto out;
		}
		if (i >= warmup)
			v[i - warmup] = ns;
	}
	qsort(v, (size_t)count, sizeof(*v), cmp_u64);
	for (long i = 0; i < count; i++)
		sum += (double)v[i];
	printf("{\"n\":%ld,\"warmup\":%ld,\"mean_ms\":%.3f,\"p50_ms\":%.3f,\"p90_ms\":%.3f,"
	       "\"p99_ms\":%.3f,\"min_ms\":%.3f,\"max_ms\":%.3f}\n",
	       count, warmup, sum / (double)count / 1e6, pct_ms(v, (size_t)count, 50),
	       pct_ms(v, (size_t)count, 90), pct_ms(v, (size_t)count, 99), (double)v[0] / 1e6,
	       (double)v[count - 1] / 1e6);
	ret = 0;
out:
	json_decref(a);
	exec_client_free(&ec);
	return ret;
}

#define DD_BLOCK 65536

/* The producer of a throughput run, by kind:
 *   zero  head -c BYTES /dev/zero: every byte NUL, so the server's encoding of control bytes
 *         (JSON escapes or base64) is part of the figure;
 *   dd    dd if=/dev/zero bs=64k: the same bytes from a producer that writes whole pipe-sized
 *         blocks (a head -c that copies in small pieces can be slower than the relay);
 *         BYTES is rounded down to whole blocks;
 *   text  head -c BYTES /dev/zero | tr '\0' x: printable bytes, no encoding cost. */
static json_t *producer_argv(const char *kind, unsigned long long *want)
{
	char n[32], cmd[128];

	if (!strcmp(kind, "zero")) {
		snprintf(n, sizeof(n), "%llu", *want);
		return json_pack("[s,s,s,s]", "head", "-c", n, "/dev/zero");
	}
	if (!strcmp(kind, "dd")) {
		*want -= *want % DD_BLOCK;
		snprintf(n, sizeof(n), "count=%llu", *want / DD_BLOCK);
		snprintf(cmd, sizeof(cmd), "bs=%u", DD_BLOCK);
		return *want ? json_pack("[s,s,s,s]", "dd", "if=/dev/zero", cmd, n) : NULL;
	}
	if (!strcmp(kind, "text")) {
		snprintf(cmd, sizeof(cmd), "head -c %llu /dev/zero | tr '\\0' x", *want);
		return json_pack("[s,s,s]", "sh", "-c", cmd);
	}
	return NULL;
}

static int cmd_throughput(const char *id, const char *bytes_arg, const char *kind)
{
	char *end;
	unsigned long long want = strtoull(bytes_arg, &end, 10);
	bool text = !strcmp(kind, "text");
	struct exec_client ec = {0};
	json_t *a;
	uint64_t ns = 0;
	double secs;
	int ret = 1;

	if (*end || end == bytes_arg || want == 0) {
		fprintf(stderr, "bench-exec: throughput: BYTES must be a positive integer: %s\n",
			bytes_arg);
		return 2;
	}
	a = producer_argv(kind, &want);
	if (!a) {
		fprintf(stderr,
			"bench-exec: throughput: KIND must be zero, dd (BYTES >= %u) or text: %s\n",
			DD_BLOCK, kind);
		return 2;
	}
	if (exec_client_init(&ec, id, a, 1800) < 0)
		goto out;
	if (exec_once(&ec, true, NULL, &ns) < 0)
		goto out;
	secs = (double)ns / 1e9;
	if (ec.s.out_bytes != want || ec.s.out_nonzero != (text ? want : 0))
		fprintf(stderr,
			"bench-exec: throughput: received %" PRIu64 " stdout bytes (%" PRIu64
			" not NUL), expected %llu %s bytes\n",
			ec.s.out_bytes, ec.s.out_nonzero, want, text ? "non-NUL" : "NUL");
	else
		ret = 0;
	printf("{\"kind\":\"%s\",\"bytes\":%" PRIu64
	       ",\"expected_bytes\":%llu,\"nonzero_bytes\":%" PRIu64 ",\"wire_bytes\":%" PRIu64
	       ",\"seconds\":%.4f,\"mb_per_s\":%.1f,"
	       "\"wire_mb_per_s\":%.1f}\n",
	       kind, ec.s.out_bytes, want, ec.s.out_nonzero, ec.s.wire_bytes, secs,
	       (double)ec.s.out_bytes / 1e6 / secs, (double)ec.s.wire_bytes / 1e6 / secs);
out:
	json_decref(a);
	exec_client_free(&ec);
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench-exec [-s SOCKET] get PATH\n"
		   "       bench-exec [-s SOCKET] create IMAGE\n"
		   "       bench-exec [-s SOCKET] delete ID\n"
		   "       bench-exec [-s SOCKET] [-n N] [-w WARMUP] latency ID [ARGV...]\n"
		   "       bench-exec [-s SOCKET] throughput ID BYTES [zero|dd|text]\n"
		   "SOCKET defaults to $CELL_SOCKET, else " DEFAULT_SOCKET "\n");
}

static long parse_count(const char *s, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < 0 || v > 100000000) {
		fprintf(stderr, "bench-exec: %s must be an integer in 0..100000000: %s\n", what, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"count", required_argument, NULL, 'n'},
	    {"warmup", required_argument, NULL, 'w'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	long count = 500, warmup = 20;
	const char *cmd;
	int c, ret;

	if (getenv("CELL_SOCKET") && *getenv("CELL_SOCKET"))
		sock_path = getenv("CELL_SOCKET");
	/* '+': stop at the first non-option so ARGV after the id is passed through */
	while ((c = getopt_long(argc, argv, "+s:n:w:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			sock_path = optarg;
			break;
		case 'n':
			count = parse_count(optarg, "-n");
			break;
		case 'w':
			warmup = parse_count(optarg, "-w");
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind + 2 > argc) {
		usage(stderr);
		return 2;
	}
	cmd = argv[optind];
	b64_init();
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return 1;
	if (!strcmp(cmd, "get"))
		ret = cmd_get(argv[optind + 1]);
	else if (!strcmp(cmd, "create"))
		ret = cmd_create(argv[optind + 1]);
	else if (!strcmp(cmd, "delete"))
		ret = cmd_delete(argv[optind + 1]);
	else if (!strcmp(cmd, "latency") && count > 0)
		ret = cmd_latency(argv[optind + 1], count, warmup, argc - optind - 2,
				  argv + optind + 2);
	else if (!strcmp(cmd, "throughput") && (optind + 3 == argc || optind + 4 == argc))
		ret = cmd_throughput(argv[optind + 1], argv[optind + 2],
				     optind + 4 == argc ? argv[optind + 3] : "zero");
	else {
		usage(stderr);
		ret = 2;
	}
	curl_global_cleanup();
	return ret;
}
