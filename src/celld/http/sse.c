/* Command events, each one JSON object followed by a blank line ("{...}\n\n").
 *
 * Output events are the hot path of command streaming (every byte a command prints passes
 * through here), so they are built by hand, straight into the stream's buffer: one scan
 * that validates UTF-8 and sizes the JSON escaping a machine word at a time (plain text
 * and NUL runs never go byte by byte), then one pass that copies runs between the bytes
 * that need escaping, or base64 when that is shorter or the bytes are not UTF-8. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "timefmt.h"
#include "sse.h"

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

/* ---- the buffer ---- */

void sse_buf_free(struct sse_buf *b)
{
	free(b->data);
	*b = (struct sse_buf){0};
}

size_t sse_buf_take(struct sse_buf *b, char *out, size_t max)
{
	size_t n = b->len - b->off;
	if (!n) {
		b->off = b->len = 0;
		return 0;
	}
	if (n > max)
		n = max;
	memcpy(out, b->data + b->off, n);
	b->off += n;
	return n;
}

/* Room for `more` bytes after the unread ones; consumed bytes are dropped first. */
static int buf_reserve(struct sse_buf *b, size_t more)
{
	if (b->off && b->off == b->len)
		b->off = b->len = 0;
	if (b->cap - b->len >= more)
		return 0;
	if (b->off) {
		memmove(b->data, b->data + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		if (b->cap - b->len >= more)
			return 0;
	}
	if (more > SIZE_MAX / 2 - b->len)
		return -ENOMEM;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap - b->len < more)
		cap *= 2;
	char *nd = realloc(b->data, cap);
	if (!nd)
		return -ENOMEM;
	b->data = nd;
	b->cap = cap;
	return 0;
}

int sse_buf_add(struct sse_buf *b, const char *data, size_t len)
{
	int r = buf_reserve(b, len);
	if (r < 0)
		return r;
	memcpy(b->data + b->len, data, len);
	b->len += len;
	return 0;
}

/* ---- scanning ---- */

#define ONES  0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

static uint64_t load64(const uint8_t *p)
{
	uint64_t w;
	memcpy(&w, p, sizeof(w));
	return w;
}

/* Word-at-a-time byte tests (exact as yes/no answers, whatever the other bytes hold). */
static uint64_t has_zero(uint64_t v)
{
	return (v - ONES) & ~v & HIGHS;
}

/* Non-zero when a byte of w is a control byte, '"' or '\\': the bytes a JSON string cannot
 * hold as they are. Bytes >= 0x80 need nothing (their UTF-8 was checked separately). */
static uint64_t needs_escape(uint64_t w)
{
	uint64_t below_space = (w - ONES * 0x20) & ~w & HIGHS;
	return below_space | has_zero(w ^ (ONES * '"')) | has_zero(w ^ (ONES * '\\'));
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

/* The length of the valid UTF-8 sequence starting at s[0] >= 0x80 (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), 0 when it is not one. *cut is set when the
 * bytes are the valid beginning of a sequence that the end of the buffer interrupted. */
static size_t utf8_seq(const uint8_t *s, size_t left, bool *cut)
{
	uint8_t c = s[0];
	size_t need;
	uint8_t lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf) {
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
		return 0;
	}
	for (size_t k = 1; k <= need; k++) {
		if (k >= left) {
			*cut = true;
			return 0;
		}
		uint8_t b = s[k];
		if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf))
			return 0;
	}
	return need + 1;
}

struct scan {
	size_t valid; /* longest valid UTF-8 prefix */
	bool cut;     /* the rest is the valid beginning of an interrupted sequence */
	size_t esc;   /* JSON-escaped length of the prefix (exact unless over) */
	bool over;    /* esc passed limit: counting stopped, base64 is shorter */
};

/* One pass over s: the valid prefix, and its escaped length until that is known to exceed
 * limit. Plain text and NUL runs go eight bytes at a time. */
static void scan(const uint8_t *s, size_t n, size_t limit, struct scan *sc)
{
	size_t i = 0, esc = 0;
	bool over = false;
	*sc = (struct scan){0};
	while (i < n) {
		/* Once base64 is decided only the UTF-8 check is left: ASCII goes 32 bytes at a
		 * step (the escaped length, no longer needed, is not kept up to date). */
		while (over && i + 32 <= n &&
		       !((load64(s + i) | load64(s + i + 8) | load64(s + i + 16) |
			  load64(s + i + 24)) &
			 HIGHS))
			i += 32;
		if (i + 8 <= n) {
			uint64_t w = load64(s + i);
			if (!(w & HIGHS)) {
				if (over || !needs_escape(w)) {
					esc += 8;
				} else if (!w) {
					esc += 48; /* eight NULs: \u0000 each */
				} else {
					for (int k = 0; k < 8; k++)
						esc += escaped_len(s[i + k]);
				}
				i += 8;
				if (!over && esc > limit)
					over = true;
				continue;
			}
		}
		if (s[i] < 0x80) {
			esc += escaped_len(s[i]);
			i++;
		} else {
			size_t len = utf8_seq(s + i, n - i, &sc->cut);
			if (!len)
				break;
			esc += len;
			i += len;
		}
		if (!over && esc > limit)
			over = true;
	}
	sc->valid = i;
	sc->esc = esc;
	sc->over = over;
}

/* ---- writing ---- */

static char *escape_into(char *w, const uint8_t *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i = 0;
	while (i < n) {
		/* A run of bytes that need nothing, found a word at a time and copied at once. */
		size_t start = i;
		while (i + 8 <= n && !needs_escape(load64(s + i)))
			i += 8;
		while (i < n && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\')
			i++;
		memcpy(w, s + start, i - start);
		w += i - start;
		if (i == n)
			break;
		uint8_t c = s[i++];
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
	return w;
}

/* Standard base64 with padding. Two output characters per 12 input bits from one table
 * (built once), six input bytes per step: about twice the speed of a per-character
 * encoder, on the path every byte of binary command output takes. */
static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static uint16_t b64_pairs[4096]; /* the two characters for 12 bits, in memory order */
static pthread_once_t b64_once = PTHREAD_ONCE_INIT;

static void b64_init(void)
{
	for (unsigned i = 0; i < 4096; i++) {
		char two[2] = {b64_alphabet[i >> 6], b64_alphabet[i & 63]};
		memcpy(&b64_pairs[i], two, 2);
	}
}

static char *b64_tail(char *w, const uint8_t *s, size_t left)
{
	uint32_t v = (uint32_t)s[0] << 16 | (left > 1 ? (uint32_t)s[1] << 8 : 0);
	w[0] = b64_alphabet[v >> 18];
	w[1] = b64_alphabet[(v >> 12) & 63];
	w[2] = left > 1 ? b64_alphabet[(v >> 6) & 63] : '=';
	w[3] = '=';
	return w + 4;
}

#if defined(__x86_64__)
/* 24 input bytes to 32 characters per step with AVX2 (the shuffle, multiply and
 * table-lookup scheme of Mula and Lemire's base64 work); about 8 times the scalar speed.
 * Returns how many input bytes it encoded (a multiple of 24; it reads 4 bytes past the
 * last group, so it stops 28 bytes before the end). */
__attribute__((target("avx2"))) static size_t base64_avx2(char *w, const uint8_t *s, size_t n)
{
	const __m256i shuf = _mm256_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10, 1,
					      0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10);
	/* Per 6-bit value class, what to add to reach its character. */
	const __m256i offsets =
	    _mm256_setr_epi8('a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
			     '0' - 52, '0' - 52, '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0,
			     'a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
			     '0' - 52, '0' - 52, '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0);
	size_t i = 0;
	for (; i + 28 <= n; i += 24) {
		__m128i lo = _mm_loadu_si128((const __m128i *)(s + i));
		__m128i hi = _mm_loadu_si128((const __m128i *)(s + i + 12));
		__m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
		v = _mm256_shuffle_epi8(v, shuf);
		/* The four 6-bit fields of each 3-byte group, one per byte. */
		__m256i a = _mm256_mulhi_epu16(_mm256_and_si256(v, _mm256_set1_epi32(0x0fc0fc00)),
					       _mm256_set1_epi32(0x04000040));
		__m256i b = _mm256_mullo_epi16(_mm256_and_si256(v, _mm256_set1_epi32(0x003f03f0)),
					       _mm256_set1_epi32(0x01000010));
		__m256i idx = _mm256_or_si256(a, b);
		__m256i cls = _mm256_subs_epu8(idx, _mm256_set1_epi8(51));
		__m256i upper = _mm256_cmpgt_epi8(_mm256_set1_epi8(26), idx);
		cls = _mm256_or_si256(cls, _mm256_and_si256(upper, _mm256_set1_epi8(13)));
		__m256i out = _mm256_add_epi8(_mm256_shuffle_epi8(offsets, cls), idx);
		_mm256_storeu_si256((__m256i *)w, out);
		w += 32;
	}
	return i;
}

static bool have_avx2;
#endif

static void base64_setup(void)
{
	b64_init();
#if defined(__x86_64__)
	__builtin_cpu_init();
	have_avx2 = __builtin_cpu_supports("avx2");
#endif
}

static char *base64_into(char *w, const uint8_t *s, size_t n)
{
	pthread_once(&b64_once, base64_setup);
	size_t i = 0;
#if defined(__x86_64__)
	if (have_avx2) {
		i = base64_avx2(w, s, n);
		w += i / 3 * 4;
	}
#endif
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* Eight bytes loaded (big-endian order), the first six encoded: stays in bounds. */
	for (; i + 8 <= n; i += 6) {
		uint64_t x = __builtin_bswap64(load64(s + i));
		uint64_t o = (uint64_t)b64_pairs[(x >> 52) & 0xfff] |
			     (uint64_t)b64_pairs[(x >> 40) & 0xfff] << 16 |
			     (uint64_t)b64_pairs[(x >> 28) & 0xfff] << 32 |
			     (uint64_t)b64_pairs[(x >> 16) & 0xfff] << 48;
		memcpy(w, &o, 8);
		w += 8;
	}
#endif
	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
		memcpy(w, &b64_pairs[v >> 12], 2);
		memcpy(w + 2, &b64_pairs[v & 0xfff], 2);
		w += 4;
	}
	return i < n ? b64_tail(w, s + i, n - i) : w;
}

/* Appends s (n bytes) at w; returns the end. */
static char *put(char *w, const char *s, size_t n)
{
	memcpy(w, s, n);
	return w + n;
}

/* The decimal digits of v at w; returns the end. Line events come by the million, so the
 * event's framing is built without the printf family. */
static char *put_u64(char *w, uint64_t v)
{
	char tmp[20];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*w++ = tmp[--n];
	return w;
}

/* One output event for s[0..n) into b: escaped text (esc bytes), or base64. */
static int output_event(struct sse_buf *b, const char *type, const uint8_t *s, size_t n,
			bool base64, size_t esc)
{
	static const char head0[] = "{\"type\":\"", head1[] = "\",\"text\":\"",
			  enc[] = ",\"encoding\":\"base64\"",
			  ts[] = ",\"timestamp\":", end[] = "}\n\n";
	size_t tlen = strlen(type);
	size_t body = base64 ? (n + 2) / 3 * 4 : esc;
	/* head, type, text, closing quote, encoding, timestamp (<= 20 digits), end */
	size_t need = sizeof(head0) + tlen + sizeof(head1) + body + 1 + sizeof(enc) + sizeof(ts) +
		      20 + sizeof(end);
	int r = buf_reserve(b, need);
	if (r < 0)
		return r;
	int64_t now = celld_now_ms();
	char *w = b->data + b->len;
	w = put(w, head0, sizeof(head0) - 1);
	w = put(w, type, tlen);
	w = put(w, head1, sizeof(head1) - 1);
	w = base64 ? base64_into(w, s, n) : escape_into(w, s, n);
	*w++ = '"';
	if (base64)
		w = put(w, enc, sizeof(enc) - 1);
	w = put(w, ts, sizeof(ts) - 1);
	w = put_u64(w, now > 0 ? (uint64_t)now : 0);
	w = put(w, end, sizeof(end) - 1);
	b->len = (size_t)(w - b->data);
	return 0;
}

/* The event for the bytes of buf[0..total) that can go now; the rest (an interrupted
 * character) is kept in u. */
static int output_from(struct sse_buf *b, const char *type, struct sse_utf8 *u, const uint8_t *buf,
		       size_t total, bool final)
{
	/* Base64 is chosen when escaping would be longer (NUL-heavy output): counting stops
	 * once the escaped length passes that. */
	struct scan sc;
	scan(buf, total, (total + 2) / 3 * 4, &sc);
	size_t send = total;
	bool base64;
	if (sc.valid < total) {
		if (sc.cut && !final && total - sc.valid < sizeof(u->carry)) {
			/* A character split across two chunks: finish it with the next one. */
			memcpy(u->carry, buf + sc.valid, total - sc.valid);
			u->n = total - sc.valid;
			send = sc.valid;
			base64 = sc.over || sc.esc > (send + 2) / 3 * 4;
		} else {
			/* Bytes that are not UTF-8 stay exact, base64 encoded. */
			base64 = true;
		}
	} else {
		base64 = sc.over;
	}
	if (!send)
		return 0;
	return output_event(b, type, buf, send, base64, sc.esc);
}

int sse_output_add(struct sse_buf *b, const char *type, struct sse_utf8 *u, const uint8_t *data,
		   size_t n, bool final)
{
	if (!u->n)
		return output_from(b, type, u, data, n, final);
	/* Only a held-back partial character (<= 3 bytes) forces a copy. */
	size_t total = u->n + n;
	_cleanup_free_ uint8_t *joined = malloc(total);
	if (!joined)
		return -ENOMEM;
	memcpy(joined, u->carry, u->n);
	if (n)
		memcpy(joined + u->n, data, n);
	u->n = 0;
	return output_from(b, type, u, joined, total, final);
}

int sse_output(const char *type, struct sse_utf8 *u, const uint8_t *data, size_t n, bool final,
	       char **out, size_t *len)
{
	struct sse_buf b = {0};
	*out = NULL;
	*len = 0;
	int r = sse_output_add(&b, type, u, data, n, final);
	if (r < 0) {
		sse_buf_free(&b);
		return r;
	}
	*out = b.data;
	*len = b.len;
	return 0;
}

/* ---- lines ---- */

void sse_lines_free(struct sse_lines *l)
{
	free(l->buf);
	*l = (struct sse_lines){0};
}

/* One event for a whole line or a piece of one: text when it is UTF-8, base64 otherwise. */
static int line_event(struct sse_buf *b, const char *type, const uint8_t *s, size_t n)
{
	struct sse_utf8 u = {0};
	return output_from(b, type, &u, s, n, true);
}

/* Where to cut s[0..cap) (at least cap bytes are there) so that a UTF-8 character running
 * past cap goes whole into the next piece. */
static size_t piece_cut(const uint8_t *s, size_t cap)
{
	for (size_t k = 1; k <= 3; k++) {
		uint8_t c = s[cap - k];
		if ((c & 0xc0) == 0x80)
			continue;
		size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
		return need > k ? cap - k : cap;
	}
	return cap;
}

/* s[0..m) belongs to the current line; ends: the line ends after it. */
static int add_seg(struct sse_buf *b, const char *type, struct sse_lines *l, const uint8_t *s,
		   size_t m, bool ends)
{
	int r = 0;
	/* Bytes held from before: fill the buffer, send it in pieces while it is full. */
	while (l->len && l->len + m >= SSE_LINE_MAX) {
		size_t take = SSE_LINE_MAX - l->len;
		memcpy(l->buf + l->len, s, take);
		s += take;
		m -= take;
		size_t cut = piece_cut(l->buf, SSE_LINE_MAX);
		if ((r = line_event(b, type, l->buf, cut)) < 0)
			return r;
		memmove(l->buf, l->buf + cut, SSE_LINE_MAX - cut);
		l->len = SSE_LINE_MAX - cut;
		l->mid = true;
	}
	if (l->len) {
		memcpy(l->buf + l->len, s, m);
		l->len += m;
		if (ends) {
			r = line_event(b, type, l->buf, l->len);
			l->len = 0;
		}
		return r;
	}
	/* Nothing held: send straight from s, keeping only a partial last piece. */
	while (m >= SSE_LINE_MAX) {
		size_t cut = piece_cut(s, SSE_LINE_MAX);
		if ((r = line_event(b, type, s, cut)) < 0)
			return r;
		s += cut;
		m -= cut;
		l->mid = true;
	}
	if (!m)
		return 0;
	if (ends)
		return line_event(b, type, s, m);
	if (!l->buf && !(l->buf = malloc(SSE_LINE_MAX)))
		return -ENOMEM;
	memcpy(l->buf, s, m);
	l->len = m;
	return 0;
}

int sse_lines_add(struct sse_buf *b, const char *type, struct sse_lines *l, const uint8_t *data,
		  size_t n, bool final)
{
	const uint8_t *p = data, *end = data + n;
	const uint8_t *nl = n ? memchr(p, '\n', n) : NULL, *cr = n ? memchr(p, '\r', n) : NULL;
	int r = 0;
	while (p < end) {
		if (nl && nl < p)
			nl = memchr(p, '\n', (size_t)(end - p));
		if (cr && cr < p)
			cr = memchr(p, '\r', (size_t)(end - p));
		const uint8_t *t = !nl ? cr : !cr ? nl : nl < cr ? nl : cr;
		if (!t)
			break;
		size_t m = (size_t)(t - p);
		if (m || l->len || l->mid)
			r = add_seg(b, type, l, p, m, true);
		else if (!(*t == '\n' && l->cr))
			r = line_event(b, type, (const uint8_t *)"\n", 1); /* an empty line */
		if (r < 0)
			return r;
		l->cr = *t == '\r';
		l->mid = false;
		p = t + 1;
	}
	if (p < end) {
		l->cr = false;
		if ((r = add_seg(b, type, l, p, (size_t)(end - p), final)) < 0)
			return r;
	} else if (final && l->len) {
		r = line_event(b, type, l->buf, l->len);
		l->len = 0;
	}
	if (final)
		l->mid = l->cr = false;
	return r;
}
