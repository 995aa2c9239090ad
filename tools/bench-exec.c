/* bench-exec: the HTTP client of `make bench`, speaking celld's API over its Unix socket
 * through the client library (include/cell/client.h).
 *
 *   bench-exec [-s SOCKET] get PATH                    GET, print the body, exit 0 on 2xx
 *   bench-exec [-s SOCKET] create IMAGE                create a sandbox, print its id
 *   bench-exec [-s SOCKET] delete ID                   delete a sandbox
 *   bench-exec [-s SOCKET] [-n N] [-w W] latency ID [ARGV...]
 *        run ARGV (default: true) N times after W warm-up runs, one request at a time on one
 *        kept-alive connection; print {"n","p50_ms","p99_ms",...} on stdout.  Each sample is
 *        the time from the start of the request to the parsed terminal event of the stream
 *        (cell_client_exec, the CLI's own path).
 *   bench-exec [-s SOCKET] throughput ID BYTES [zero|dd|text]
 *        run `head -c BYTES /dev/zero` once (or another producer, see producer_argv); count
 *        the decoded stdout bytes at the client and print {"bytes","wire_bytes","seconds",
 *        "mb_per_s",...} on stdout.
 *
 * Throughput reads the stream with the library's framer (cell_client_stream) but decodes
 * stdout/stderr events with a small scanner of its own instead of the full JSON parse and
 * base64 decode of cell_client_exec, so that the client is never the bottleneck of the
 * figure; every other event goes through jansson.
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

#include <jansson.h>

#include "cell/cleanup.h"
#include "cell/client.h"
#include "cell/id.h"

#define DEFAULT_SOCKET "/run/cell/cell.sock"
#define MAX_EVENT      (64u << 20) /* one SSE event larger than this is a protocol error */
#define RECV_BUFFER    (512u << 10)

static struct cell_client client;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sandbox ids go into a URL path: accept only what an id can be. */
static bool valid_id(const char *id)
{
	if (cell_id_valid(id))
		return true;
	fprintf(stderr, "bench-exec: invalid sandbox id: %s\n", id);
	return false;
}

/* ---- plain requests ---- */

static int cmd_get(const char *path)
{
	struct cell_client_req req = {.path = path, .max_body = 4u << 20};
	struct cell_client_resp resp;
	struct cell_error err = {0};
	int r = cell_client_request(&client, &req, &resp, &err);

	if (r < 0)
		fprintf(stderr, "bench-exec: GET %s via %s: %s\n", path, client.socket, err.msg);
	if (resp.body.data)
		printf("%s\n", resp.body.data);
	r = r == 0 && resp.status >= 200 && resp.status < 300 ? 0 : 1;
	cell_client_resp_free(&resp);
	return r;
}

static int cmd_create(const char *image)
{
	struct cell_client_answer ans;
	struct cell_error err = {0};
	json_t *root, *id;
	int ret = 1;

	root =
	    json_pack("{s:{s:s}, s:{s:s}}", "image", "uri", image, "metadata", "purpose", "bench");
	if (!root)
		return 1;
	if (cell_client_api(&client, "POST", "/v1/sandboxes", root, "create", &ans, &err) < 0) {
		fprintf(stderr, "bench-exec: create image %s: %s\n", image, err.msg);
		json_decref(root);
		return 1;
	}
	json_decref(root);
	id = json_object_get(ans.json, "id");
	if (json_is_string(id)) {
		printf("%s\n", json_string_value(id));
		ret = 0;
	} else {
		fprintf(stderr, "bench-exec: create: no \"id\" in the answer\n");
	}
	json_decref(ans.json);
	return ret;
}

static int cmd_delete(const char *id)
{
	char path[512];
	struct cell_error err = {0};

	if (!valid_id(id))
		return 1;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	if (cell_client_api(&client, "DELETE", path, NULL, "delete", NULL, &err) < 0) {
		fprintf(stderr, "bench-exec: delete %s: %s\n", id, err.msg);
		return 1;
	}
	return 0;
}

/* ---- throughput: the command event stream, counted ---- */

enum terminal { TERM_NONE, TERM_COMPLETE, TERM_ERROR };

struct stream {
	uint64_t out_bytes, err_bytes;
	uint64_t out_nonzero; /* decoded stdout bytes that were not NUL (throughput check) */
	enum terminal term;
	uint64_t t_term;
	char detail[512]; /* error event or protocol problem, for the message */
	bool bad;
};

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

/* One event of a throughput stream (cell_client_event_fn): 1 after the terminal one. */
static int stream_event(void *ctx, const char *p, size_t n)
{
	struct stream *s = ctx;
	struct event ev;
	uint64_t *count;
	bool ok;

	if (n == 0)
		return 0;
	if (!scan_event(p, p + n, &ev) || !ev.type.p) {
		s->bad = true;
		set_detail(s, "malformed event", p, n);
		return -EPROTO;
	}
	if (span_is(ev.type, "stdout"))
		count = &s->out_bytes;
	else if (span_is(ev.type, "stderr"))
		count = &s->err_bytes;
	else {
		control_event(s, p, n);
		return s->bad ? -EPROTO : s->term != TERM_NONE;
	}
	if (!ev.text.p) {
		s->bad = true;
		set_detail(s, "output event without text", p, n);
		return -EPROTO;
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
		return -EPROTO;
	}
	return 0;
}

/* ---- latency: cell_client_exec ---- */

struct latency_run {
	uint64_t t_term; /* when the terminal event was parsed */
};

static int latency_output(void *ctx, int fd, const void *data, size_t len, struct cell_error *err)
{
	(void)ctx, (void)fd, (void)data, (void)len, (void)err;
	return 0;
}

static void latency_event(void *ctx, json_t *ev)
{
	struct latency_run *run = ctx;
	const char *type = json_string_value(json_object_get(ev, "type"));

	if (type && (!strcmp(type, "execution_complete") || !strcmp(type, "error")))
		run->t_term = now_ns();
}

/* One command; on success *elapsed_ns is request start → terminal event. */
static int exec_once(const char *id, const char *body, uint64_t *elapsed_ns)
{
	static const struct cell_client_exec_ops ops = {.output = latency_output,
							.event = latency_event};
	struct cell_client_exec_result res;
	struct latency_run run = {0};
	struct cell_error err = {0};
	uint64_t t0 = now_ns();
	int r = cell_client_exec(&client, id, body, &ops, &run, &res, &err);

	if (r < 0) {
		fprintf(stderr, "bench-exec: POST command: %s\n", err.msg);
	} else if (!res.complete) {
		_cleanup_free_ char *e = json_dumps(res.error, JSON_COMPACT);

		fprintf(stderr, "bench-exec: command failed: %.300s\n", e ? e : "?");
		r = -1;
	} else {
		*elapsed_ns = run.t_term - t0;
	}
	cell_client_exec_result_free(&res);
	return r < 0 ? -1 : 0;
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
	_cleanup_free_ uint64_t *v = calloc((size_t)count, sizeof(*v));
	_cleanup_free_ char *body = NULL;
	json_t *a = argv_json(argc, argv);
	json_t *root = a ? json_pack("{s:O}", "argv", a) : NULL;
	double sum = 0;

	body = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	json_decref(a);
	if (!v || !body || !valid_id(id))
		return 1;
	client.timeout_s = 60; /* a stream that never ends must not hang the whole bench */
	for (long i = 0; i < warmup + count; i++) {
		uint64_t ns;

		if (exec_once(id, body, &ns) < 0) {
			fprintf(stderr, "bench-exec: latency run %ld of %ld failed\n", i + 1,
				warmup + count);
			return 1;
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
	return 0;
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

/* One throughput run through the library's framer; on success *elapsed_ns is request
 * start → terminal event. */
static int stream_once(const char *id, const char *body, struct stream *s, uint64_t *elapsed_ns)
{
	char path[512];
	struct cell_client_req req = {.method = "POST",
				      .path = path,
				      .body = body,
				      .recv_buffer = RECV_BUFFER,
				      .max_event = MAX_EVENT};
	struct cell_error err = {0};
	long status = 0;
	uint64_t t0;
	int r;

	snprintf(path, sizeof(path), "/v1/sandboxes/%s" CELL_CLIENT_EXECD_PREFIX "/command", id);
	t0 = now_ns();
	r = cell_client_stream(&client, &req, stream_event, s, "POST command", &status, &err);
	if (r < 0) {
		fprintf(stderr, "bench-exec: %s%s%s\n", s->bad ? "stream" : err.msg,
			s->detail[0] ? ": " : "", s->detail);
		return -1;
	}
	if (s->term == TERM_NONE) {
		fprintf(stderr, "bench-exec: stream ended without a terminal event\n");
		return -1;
	}
	if (s->term != TERM_COMPLETE) {
		fprintf(stderr, "bench-exec: command failed: %s\n", s->detail);
		return -1;
	}
	*elapsed_ns = s->t_term - t0;
	return 0;
}

static int cmd_throughput(const char *id, const char *bytes_arg, const char *kind)
{
	char *end;
	unsigned long long want = strtoull(bytes_arg, &end, 10);
	bool text = !strcmp(kind, "text");
	struct stream s = {0};
	_cleanup_free_ char *body = NULL;
	json_t *a, *root;
	uint64_t ns = 0, wire;
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
	root = json_pack("{s:o}", "argv", a);
	body = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	if (!body || !valid_id(id))
		return 1;
	client.timeout_s = 1800;
	if (stream_once(id, body, &s, &ns) < 0)
		return 1;
	wire = cell_client_received(&client);
	secs = (double)ns / 1e9;
	if (s.out_bytes != want || s.out_nonzero != (text ? want : 0))
		fprintf(stderr,
			"bench-exec: throughput: received %" PRIu64 " stdout bytes (%" PRIu64
			" not NUL), expected %llu %s bytes\n",
			s.out_bytes, s.out_nonzero, want, text ? "non-NUL" : "NUL");
	else
		ret = 0;
	printf("{\"kind\":\"%s\",\"bytes\":%" PRIu64
	       ",\"expected_bytes\":%llu,\"nonzero_bytes\":%" PRIu64 ",\"wire_bytes\":%" PRIu64
	       ",\"seconds\":%.4f,\"mb_per_s\":%.1f,"
	       "\"wire_mb_per_s\":%.1f}\n",
	       kind, s.out_bytes, want, s.out_nonzero, wire, secs, (double)s.out_bytes / 1e6 / secs,
	       (double)wire / 1e6 / secs);
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

	const char *sock_path = DEFAULT_SOCKET;

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
	cell_client_init(&client, sock_path);
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
	cell_client_close(&client);
	return ret;
}
