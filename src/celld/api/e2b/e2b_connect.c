/* The Connect protocol as envd's clients speak it over HTTP/1.1 with the JSON codec: a
 * unary call is a POST of one JSON message answered 200 with one (or an error status with
 * {"code": "<name>", "message"}); a server-streaming call posts one envelope
 * (flags byte, u32 big-endian length, JSON) and is answered 200 with a body of envelopes,
 * the last of them the end-of-stream frame (flags 0x02) carrying its error, if any.
 * Compressed envelopes (flag 0x01) are refused: no client of cell's asks for them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "cell/cleanup.h"
#include "e2b.h"
#include "fields.h"
#include "http/errors.h"
#include "http/http.h"
#include "http/sse.h"

#define ENVELOPE_HEADER	    5
#define FLAG_COMPRESSED	    0x01
#define FLAG_END_STREAM	    0x02
#define CONNECT_TIMEOUT_LEN 10 /* the protocol's bound on Connect-Timeout-Ms's digits */

static const struct {
	const char *name;
	unsigned status;
} codes[] = {
    [CONNECT_OK] = {"ok", 200},
    [CONNECT_CANCELED] = {"canceled", 499},
    [CONNECT_UNKNOWN] = {"unknown", 500},
    [CONNECT_INVALID_ARGUMENT] = {"invalid_argument", 400},
    [CONNECT_DEADLINE_EXCEEDED] = {"deadline_exceeded", 504},
    [CONNECT_NOT_FOUND] = {"not_found", 404},
    [CONNECT_ALREADY_EXISTS] = {"already_exists", 409},
    [CONNECT_PERMISSION_DENIED] = {"permission_denied", 403},
    [CONNECT_RESOURCE_EXHAUSTED] = {"resource_exhausted", 429},
    [CONNECT_FAILED_PRECONDITION] = {"failed_precondition", 400},
    [CONNECT_ABORTED] = {"aborted", 409},
    [CONNECT_OUT_OF_RANGE] = {"out_of_range", 400},
    [CONNECT_UNIMPLEMENTED] = {"unimplemented", 501},
    [CONNECT_INTERNAL] = {"internal", 500},
    [CONNECT_UNAVAILABLE] = {"unavailable", 503},
    [CONNECT_DATA_LOSS] = {"data_loss", 500},
    [CONNECT_UNAUTHENTICATED] = {"unauthenticated", 401},
};

const char *connect_code_name(enum connect_code code)
{
	return (size_t)code < CELL_ARRAY_SIZE(codes) ? codes[code].name : "unknown";
}

unsigned connect_code_status(enum connect_code code)
{
	return (size_t)code < CELL_ARRAY_SIZE(codes) ? codes[code].status : 500;
}

/* The errno table's RPC name of errnum (http/errors.c), as this protocol's code. */
enum connect_code connect_code_from_errno(int errnum)
{
	if (!errnum)
		return CONNECT_OK;
	const char *rpc = errors_lookup(errnum)->rpc;
	for (size_t i = 0; i < CELL_ARRAY_SIZE(codes); i++)
		if (!strcmp(codes[i].name, rpc))
			return (enum connect_code)i;
	return CONNECT_INTERNAL;
}

static int parse_message(struct http_req *r, const char *text, size_t len, json_t **msg)
{
	json_error_t jerr;
	/* An empty message is {} (the client may send nothing for it). */
	json_t *v = len ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr) : json_object();
	if (!v) {
		connect_error(r, CONNECT_INVALID_ARGUMENT, "the request is no JSON: %s", jerr.text);
		return -EINVAL;
	}
	if (!json_is_object(v)) {
		json_decref(v);
		connect_error(r, CONNECT_INVALID_ARGUMENT, "the request message is no JSON object");
		return -EINVAL;
	}
	*msg = v;
	return 0;
}

int connect_request(struct http_req *r, bool streaming, json_t **msg)
{
	size_t len;
	const unsigned char *body = (const unsigned char *)http_body(r, &len);
	*msg = NULL;
	if (!streaming)
		return parse_message(r, (const char *)body, len, msg);
	/* Exactly one envelope: a server-streaming call sends its one message so. */
	if (len < ENVELOPE_HEADER) {
		connect_stream_error(r, CONNECT_INVALID_ARGUMENT,
				     "the request body is not one Connect envelope (%zu bytes)",
				     len);
		return -EINVAL;
	}
	uint32_t n =
	    (uint32_t)body[1] << 24 | (uint32_t)body[2] << 16 | (uint32_t)body[3] << 8 | body[4];
	if (body[0] & FLAG_COMPRESSED || body[0] & ~(FLAG_COMPRESSED | FLAG_END_STREAM) ||
	    n != len - ENVELOPE_HEADER) {
		connect_stream_error(r, CONNECT_INVALID_ARGUMENT,
				     "the request body is not one uncompressed Connect envelope "
				     "(flags 0x%02x, length %u of %zu bytes)",
				     body[0], n, len - ENVELOPE_HEADER);
		return -EINVAL;
	}
	json_error_t jerr;
	json_t *v =
	    n ? json_loadb((const char *)body + ENVELOPE_HEADER, n, JSON_REJECT_DUPLICATES, &jerr)
	      : json_object();
	if (!v || !json_is_object(v)) {
		json_decref(v);
		connect_stream_error(r, CONNECT_INVALID_ARGUMENT,
				     "the request message is no JSON object");
		return -EINVAL;
	}
	*msg = v;
	return 0;
}

int connect_reply(struct http_req *r, json_t *msg)
{
	if (!msg)
		return connect_error(r, CONNECT_INTERNAL, "out of memory");
	return http_json(r, 200, msg);
}

static json_t *error_json(enum connect_code code, const char *message)
{
	return json_pack("{s:s, s:s}", "code", connect_code_name(code), "message", message);
}

int connect_error(struct http_req *r, enum connect_code code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *body = error_json(code, msg);
	if (!body)
		return http_empty(r, 500);
	return http_json(r, connect_code_status(code), body);
}

int64_t connect_timeout_ms(const struct http_req *r)
{
	const char *v = http_header(r, "Connect-Timeout-Ms");
	int64_t ms;
	if (!v || strlen(v) > CONNECT_TIMEOUT_LEN || parse_int64(v, 0, INT64_MAX, &ms) < 0)
		return 0;
	return ms;
}

/* ---- streamed answers ---- */

static int envelope(struct sse_buf *b, uint8_t flags, const json_t *msg)
{
	_cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
	if (!text)
		return -ENOMEM;
	size_t n = strlen(text);
	const char h[ENVELOPE_HEADER] = {(char)flags, (char)(n >> 24), (char)(n >> 16),
					 (char)(n >> 8), (char)n};
	return sse_buf_add(b, h, sizeof(h)) < 0 || sse_buf_add(b, text, n) < 0 ? -ENOMEM : 0;
}

int connect_frame(struct sse_buf *b, const json_t *msg)
{
	return envelope(b, 0, msg);
}

int connect_end(struct sse_buf *b, enum connect_code code, const char *message)
{
	json_t *end = code == CONNECT_OK ? json_object()
					 : json_pack("{s:o}", "error", error_json(code, message));
	if (!end)
		return -ENOMEM;
	int r = envelope(b, FLAG_END_STREAM, end);
	json_decref(end);
	return r;
}

size_t connect_buf_take(struct sse_buf *b, char *buf, size_t max)
{
	size_t n = b->len - b->off;
	if (n > max)
		n = max;
	memcpy(buf, b->data + b->off, n);
	b->off += n;
	if (b->off == b->len)
		b->off = b->len = 0;
	return n;
}

/* MHD asks for up to this much per call. */
#define STREAM_BLOCK (64u << 10)

int connect_stream(struct http_req *r,
		   ssize_t (*read)(void *cls, uint64_t pos, char *buf, size_t max), void *cls,
		   void (*free_fn)(void *cls))
{
	struct MHD_Response *resp =
	    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, read, cls, free_fn);
	if (!resp) {
		free_fn(cls);
		/* In the protocol's shape: a bare 503 would read as the sandbox gone. */
		return connect_stream_error(r, connect_code_from_errno(ENOMEM), "out of memory");
	}
	MHD_add_response_header(resp, "Content-Type", "application/connect+json");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return http_respond(r, 200, resp);
}

int connect_stream_error(struct http_req *r, enum connect_code code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	struct sse_buf b = {0};
	if (connect_end(&b, code, msg) < 0) {
		sse_buf_free(&b);
		return http_empty(r, 500);
	}
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(b.len, b.data, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		sse_buf_free(&b);
		return http_empty(r, 500);
	}
	MHD_add_response_header(resp, "Content-Type", "application/connect+json");
	return http_respond(r, 200, resp);
}

int connect_int64(const json_t *v, int64_t *out)
{
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	if (json_is_string(v))
		return parse_int64(json_string_value(v), INT64_MIN, INT64_MAX, out);
	return -EINVAL;
}
