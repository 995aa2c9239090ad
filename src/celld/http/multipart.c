/* A streaming multipart/form-data parser: part bodies are handed on as they arrive, never
 * buffered whole (uploads go up to 1 GiB). Only the header block of a part is held, and it
 * is bounded. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fields.h"
#include "multipart.h"

#define BOUNDARY_MAX 70 /* RFC 2046 */
#define HEADERS_MAX  8192
#define NAME_MAX_LEN 128

enum mp_state { MP_PREAMBLE, MP_AFTER_DELIM, MP_HEADERS, MP_BODY, MP_DONE };

struct multipart {
	const struct multipart_ops *ops;
	void *cls;
	enum mp_state state;
	char delim[BOUNDARY_MAX + 5]; /* "\r\n--" boundary */
	size_t dlen;
	/* Bytes not consumed yet: a possible start of the delimiter, or a partial header
	 * block. */
	char *keep;
	size_t klen;
	char headers[HEADERS_MAX];
	size_t hlen;
	bool in_part;
	char filename[HEADERS_MAX]; /* the current part's filename="...", "" when none */
};

/* boundary=... from a Content-Type value, quoted or not. */
static int parse_boundary(const char *ct, char *out, size_t size)
{
	if (!ct || strncasecmp(ct, "multipart/form-data", 19))
		return -EINVAL;
	const char *p = ct + 19;
	while ((p = strchr(p, ';'))) {
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncasecmp(p, "boundary=", 9))
			continue;
		p += 9;
		size_t n;
		if (*p == '"') {
			p++;
			const char *end = strchr(p, '"');
			if (!end)
				return -EINVAL;
			n = end - p;
		} else {
			n = strcspn(p, "; \t");
		}
		if (n == 0 || n > BOUNDARY_MAX || n >= size)
			return -EINVAL;
		memcpy(out, p, n);
		out[n] = '\0';
		return 0;
	}
	return -EINVAL;
}

struct multipart *multipart_new(const char *content_type, const struct multipart_ops *ops,
				void *cls, struct cell_error *err)
{
	char boundary[BOUNDARY_MAX + 1];
	if (parse_boundary(content_type, boundary, sizeof(boundary)) < 0) {
		field_fail(err, "Content-Type must be multipart/form-data with a boundary");
		return NULL;
	}
	struct multipart *mp = calloc(1, sizeof(*mp));
	if (!mp) {
		cell_err(err, ENOMEM, "multipart parser");
		return NULL;
	}
	mp->ops = ops;
	mp->cls = cls;
	mp->dlen = (size_t)snprintf(mp->delim, sizeof(mp->delim), "\r\n--%s", boundary);
	/* The first delimiter has no CRLF before it: pretend the body starts with one. */
	mp->keep = malloc(2);
	if (!mp->keep) {
		free(mp);
		cell_err(err, ENOMEM, "multipart parser");
		return NULL;
	}
	memcpy(mp->keep, "\r\n", 2);
	mp->klen = 2;
	return mp;
}

const char *multipart_filename(const struct multipart *mp)
{
	return mp->filename;
}

void multipart_free(struct multipart *mp)
{
	if (!mp)
		return;
	free(mp->keep);
	free(mp);
}

/* key="..." (key ends with '=': "name=", "filename=") of a Content-Disposition header
 * inside the part's header block; -ENOENT when it is not there. Parameters are split at
 * the ';' outside quotes, so a quoted value keeps its ';'. */
static int part_param(const char *headers, const char *key, char *name, size_t size)
{
	size_t klen = strlen(key);
	for (const char *line = headers; line && *line;) {
		const char *eol = strstr(line, "\r\n");
		const char *end = eol ? eol : line + strlen(line);
		if (end - line > 20 && !strncasecmp(line, "Content-Disposition:", 20)) {
			for (const char *t = line + 20; t < end;) {
				while (t < end && (*t == ' ' || *t == '\t' || *t == ';'))
					t++;
				bool match =
				    (size_t)(end - t) >= klen && !strncasecmp(t, key, klen);
				/* A parameter without a value ("form-data"): skipped. */
				size_t tok = strcspn(t, "=;\r");
				if (t + tok >= end || t[tok] != '=') {
					t += tok + (t + tok < end);
					continue;
				}
				/* This parameter's value: quoted (up to the closing quote) or bare.
				 */
				const char *v = t + tok + 1;
				const char *vend;
				size_t n;
				if (*v == '"') {
					v++;
					vend = memchr(v, '"', (size_t)(end - v));
					if (!vend)
						return -EINVAL;
					n = (size_t)(vend - v);
					vend++;
				} else {
					n = strcspn(v, " \t;");
					if (v + n > end)
						n = (size_t)(end - v);
					vend = v + n;
				}
				if (match && t + klen == v - (v[-1] == '"')) {
					if (n >= size)
						return -EINVAL;
					memcpy(name, v, n);
					name[n] = '\0';
					return 0;
				}
				t = vend;
			}
		}
		line = eol ? eol + 2 : NULL;
	}
	return -ENOENT;
}

static int emit(struct multipart *mp, const char *data, size_t len)
{
	if (!len || mp->state != MP_BODY)
		return 0;
	return mp->ops->part_data(mp->cls, data, len);
}

/* Consume what can be consumed from buf; returns bytes used, or -errno. */
static long step(struct multipart *mp, const char *buf, size_t len, struct cell_error *err)
{
	switch (mp->state) {
	case MP_PREAMBLE:
	case MP_BODY: {
		const char *hit = memmem(buf, len, mp->delim, mp->dlen);
		if (!hit) {
			/* Keep what could be the start of a delimiter cut by the chunk end. */
			size_t safe = len >= mp->dlen ? len - (mp->dlen - 1) : 0;
			int r = emit(mp, buf, safe);
			return r < 0 ? r : (long)safe;
		}
		int r = emit(mp, buf, hit - buf);
		if (r < 0)
			return r;
		if (mp->in_part) {
			mp->in_part = false;
			r = mp->ops->part_end(mp->cls);
			if (r < 0)
				return r;
		}
		mp->state = MP_AFTER_DELIM;
		return (hit - buf) + mp->dlen;
	}
	case MP_AFTER_DELIM:
		if (len < 2)
			return 0;
		if (!memcmp(buf, "--", 2)) {
			mp->state = MP_DONE;
			return len;
		}
		if (!memcmp(buf, "\r\n", 2)) {
			mp->state = MP_HEADERS;
			mp->hlen = 0;
			return 2;
		}
		if (buf[0] == ' ' || buf[0] == '\t') /* transport padding */
			return 1;
		return field_fail(err, "malformed multipart body after a boundary");
	case MP_HEADERS: {
		size_t take = len;
		if (mp->hlen + take > HEADERS_MAX - 1)
			take = HEADERS_MAX - 1 - mp->hlen;
		memcpy(mp->headers + mp->hlen, buf, take);
		size_t old = mp->hlen;
		mp->hlen += take;
		mp->headers[mp->hlen] = '\0';
		char *end = strstr(mp->headers, "\r\n\r\n");
		if (!end && (memchr(buf, '\0', take) || mp->hlen == HEADERS_MAX - 1))
			return field_fail(err, "multipart part headers too long or malformed");
		if (!end)
			return take;
		size_t used = (size_t)(end - mp->headers) + 4 - old;
		end[2] = '\0';
		char name[NAME_MAX_LEN];
		if (part_param(mp->headers, "name=", name, sizeof(name)) < 0)
			return field_fail(err, "multipart part without a Content-Disposition name");
		if (part_param(mp->headers, "filename=", mp->filename, sizeof(mp->filename)) < 0)
			mp->filename[0] = '\0';
		mp->state = MP_BODY;
		mp->in_part = true;
		int r = mp->ops->part_begin(mp->cls, name);
		return r < 0 ? r : (long)used;
	}
	case MP_DONE:
		return len; /* epilogue: ignored */
	}
	return -EINVAL;
}

int multipart_feed(struct multipart *mp, const char *data, size_t len, struct cell_error *err)
{
	/* Work on the kept bytes (< one delimiter, or < the header limit) + the new chunk. */
	size_t total = mp->klen + len;
	char *buf = malloc(total ? total : 1);
	if (!buf)
		return cell_err(err, ENOMEM, "multipart parser");
	/* memcpy with a NULL source is undefined even for 0 bytes (the first chunk has no
	 * kept bytes; an empty read has no data). */
	if (mp->klen)
		memcpy(buf, mp->keep, mp->klen);
	if (len)
		memcpy(buf + mp->klen, data, len);
	size_t pos = 0;
	int r = 0;
	while (pos < total) {
		long used = step(mp, buf + pos, total - pos, err);
		if (used < 0) {
			r = (int)used;
			break;
		}
		if (used == 0)
			break;
		pos += used;
	}
	free(mp->keep);
	mp->keep = NULL;
	mp->klen = 0;
	if (r == 0 && pos < total) {
		mp->keep = malloc(total - pos);
		if (!mp->keep)
			r = cell_err(err, ENOMEM, "multipart parser");
		else
			memcpy(mp->keep, buf + pos, total - pos);
		mp->klen = total - pos;
	}
	free(buf);
	return r;
}

int multipart_finish(struct multipart *mp, struct cell_error *err)
{
	if (mp->state != MP_DONE)
		return field_fail(err, "multipart body ended before its closing boundary");
	return 0;
}
