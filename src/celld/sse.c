/* Command events, each one JSON object followed by a blank line ("{...}\n\n"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "celld.h"

/* Takes the reference to ev. */
static char *finish_event(json_t *ev, size_t *len)
{
	if (!ev)
		return NULL;
	json_object_set_new(ev, "timestamp", json_integer(celld_now_ms()));
	char *text = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	if (!text)
		return NULL;
	size_t n = strlen(text);
	char *out = realloc(text, n + 3);
	if (!out) {
		free(text);
		return NULL;
	}
	memcpy(out + n, "\n\n", 3);
	*len = n + 2;
	return out;
}

char *sse_init(const char *cmd_id, size_t *len)
{
	return finish_event(json_pack("{s:s, s:s}", "type", "init", "text", cmd_id), len);
}

char *sse_ping(size_t *len)
{
	return finish_event(json_pack("{s:s, s:s}", "type", "ping", "text", "pong"), len);
}

char *sse_complete(int64_t execution_ms, size_t *len)
{
	return finish_event(json_pack("{s:s, s:I}", "type", "execution_complete", "execution_time",
				      (json_int_t)execution_ms),
			    len);
}

char *sse_error(int exit_code, const char *traceback, size_t *len)
{
	char evalue[16];
	snprintf(evalue, sizeof(evalue), "%d", exit_code);
	json_t *tb = json_string(traceback);
	return finish_event(json_pack("{s:s, s:{s:s, s:s, s:[o*]}}", "type", "error", "error",
				      "ename", "CommandExecError", "evalue", evalue, "traceback",
				      tb),
			    len);
}

/* Length of the longest prefix of s that is complete, valid UTF-8 (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF). *cut is set when the rest is the valid
 * beginning of a sequence that the end of the buffer interrupted. */
static size_t utf8_prefix(const uint8_t *s, size_t n, bool *cut)
{
	size_t i = 0;
	*cut = false;
	while (i < n) {
		uint8_t c = s[i];
		size_t need;
		uint8_t lo = 0x80, hi = 0xbf;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			need = 1;
		} else if (c >= 0xe0 && c <= 0xef) {
			need = 2;
			if (c == 0xe0)
				lo = 0xa0;
			else if (c == 0xed)
				hi = 0x9f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			need = 3;
			if (c == 0xf0)
				lo = 0x90;
			else if (c == 0xf4)
				hi = 0x8f;
		} else {
			return i;
		}
		size_t k;
		for (k = 1; k <= need; k++) {
			if (i + k >= n) {
				*cut = true;
				return i;
			}
			uint8_t b = s[i + k];
			if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf))
				return i;
		}
		i += need + 1;
	}
	return i;
}

/* Bytes a JSON string needs for c (without the quotes). */
static size_t escaped_len(uint8_t c)
{
	if (c == '"' || c == '\\')
		return 2;
	if (c >= 0x20)
		return 1;
	return (c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') ? 2 : 6;
}

static char *escape_into(char *w, const uint8_t *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		if (c >= 0x20 && c != '"' && c != '\\') {
			run++;
			continue;
		}
		memcpy(w, s + i - run, run);
		w += run;
		run = 0;
		*w++ = '\\';
		switch (c) {
		case '"':
			*w++ = '"';
			break;
		case '\\':
			*w++ = '\\';
			break;
		case '\n':
			*w++ = 'n';
			break;
		case '\r':
			*w++ = 'r';
			break;
		case '\t':
			*w++ = 't';
			break;
		case '\b':
			*w++ = 'b';
			break;
		case '\f':
			*w++ = 'f';
			break;
		default:
			memcpy(w, "u00", 3);
			w[3] = hex[c >> 4];
			w[4] = hex[c & 15];
			w += 5;
		}
	}
	memcpy(w, s + n - run, run);
	return w + run;
}

/* Output events are built by hand: this is the hot path of command streaming, and the
 * bytes were already checked to be UTF-8. Mostly-control-byte output (NUL runs) goes out
 * base64 when that is shorter than escaping it. */
static char *output_event(const char *type, const uint8_t *data, size_t n, bool base64, size_t *len)
{
	size_t esc = 0;
	if (!base64) {
		for (size_t i = 0; i < n; i++)
			esc += escaped_len(data[i]);
		base64 = esc > (n + 2) / 3 * 4;
	}
	_cleanup_free_ char *b64 = NULL;
	if (base64) {
		b64 = cell_base64_encode(data, n);
		if (!b64)
			return NULL;
		esc = strlen(b64);
	}
	char tail[96];
	int tl = snprintf(tail, sizeof(tail), "\"%s,\"timestamp\":%lld}\n\n",
			  base64 ? ",\"encoding\":\"base64\"" : "", (long long)celld_now_ms());
	char head[64];
	int hl = snprintf(head, sizeof(head), "{\"type\":\"%s\",\"text\":\"", type);
	char *out = malloc(hl + esc + tl + 1);
	if (!out)
		return NULL;
	memcpy(out, head, hl);
	char *w = out + hl;
	if (base64) {
		memcpy(w, b64, esc);
		w += esc;
	} else {
		w = escape_into(w, data, n);
	}
	memcpy(w, tail, tl + 1);
	*len = (size_t)(w - out) + tl;
	return out;
}

int sse_output(const char *type, struct sse_utf8 *u, const uint8_t *data, size_t n, bool final,
	       char **out, size_t *len)
{
	*out = NULL;
	*len = 0;
	size_t total = u->n + n;
	if (!total)
		return 0;
	_cleanup_free_ uint8_t *joined = NULL;
	const uint8_t *buf = data;
	if (u->n) {
		/* Only a held-back partial character (≤ 3 bytes) forces a copy. */
		joined = malloc(total);
		if (!joined)
			return -ENOMEM;
		memcpy(joined, u->carry, u->n);
		if (n)
			memcpy(joined + u->n, data, n);
		buf = joined;
	}
	u->n = 0;
	bool cut;
	size_t valid = utf8_prefix(buf, total, &cut);
	size_t send = total;
	bool base64 = false;
	if (valid < total) {
		if (cut && !final && total - valid < sizeof(u->carry)) {
			/* A character split across two chunks: finish it with the next one. */
			memcpy(u->carry, buf + valid, total - valid);
			u->n = total - valid;
			send = valid;
		} else {
			/* Bytes that are not UTF-8 stay exact, base64 encoded. */
			base64 = true;
		}
	}
	if (send && !(*out = output_event(type, buf, send, base64, len)))
		return -ENOMEM;
	return 0;
}
