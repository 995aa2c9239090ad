/* execd file routes: upload (multipart, each file streamed through file_xfer.c's upload),
 * download (streamed out, offset/limit and Range; format=tar a directory as an archive
 * cell-init makes as it goes), info, and the management routes, each one call of the files
 * service (sbfile.h) per path (mkdir, remove, list, move, chmod, replace), validated here
 * first so bad input changes nothing. Paths are resolved by cell-init beneath the sandbox's
 * root (RESOLVE_IN_ROOT): "..", absolute symlinks and magic links cannot reach a host file;
 * here they are only checked to be absolute, NUL-free text. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cell/cleanup.h"
#include "cell/log.h"
#include "api.h"
#include "commands.h"
#include "lifecycle.h"
#include "timefmt.h"
#include "fields.h"
#include "file_xfer.h"
#include "http/multipart.h"
#include "http/http.h"
#include "sandbox.h"
#include "sbfile.h"

#define INFO_PATHS_MAX 256
#define META_MAX       (64u << 10)

/* ---- shared ---- */

/* What init answered about a path, through the errno table; a missing file is the execd
 * spec's FILE_NOT_FOUND. */
static const char *path_code(int errnum)
{
	return errnum == ENOENT ? "FILE_NOT_FOUND" : NULL;
}

/* The errno init reported, as the table should read it: a full disk inside the sandbox is
 * its own writable layer at its quota (507), never the host out of capacity (503). */
static int sandbox_errno(int errnum)
{
	return errnum == ENOSPC ? EDQUOT : errnum;
}

/* A failed call of the files service about path: cell-init's refusal (1) through the
 * table as a path's error, the relay's (-errno) as it is. */
static int respond_failed(struct http_req *r, const char *path, int rc,
			  const struct cell_error *err)
{
	if (rc != 1)
		return http_internal(r, err);
	int errnum = sandbox_errno(err->code);
	return http_fail(r, errnum, path_code(errnum), "%.1024s: %s", path, err->msg);
}

static int check_path(struct http_req *r, const char *path, const char *name)
{
	if (!path || !path[0])
		return http_error(r, 400, "INVALID_ARGUMENT", "%s is required", name), -EINVAL;
	if (!sbfile_path_ok(path))
		return http_error(r, 400, "INVALID_ARGUMENT", "%s must be an absolute path", name),
		       -EINVAL;
	return 0;
}

/* ---- info ---- */

/* 0755 → 755: the decimal digits spell the octal permission. */
static long octal_digits(uint32_t mode)
{
	long v = 0, mul = 1;
	for (mode &= 07777; mode; mode >>= 3, mul *= 10)
		v += (long)(mode & 7) * mul;
	return v;
}

static json_t *file_info(const char *path, const sbfile_info *st)
{
	char mt[CELLD_TIME_LEN], ct[CELLD_TIME_LEN];
	celld_format_time((time_t)st->mtime, mt);
	celld_format_time((time_t)st->ctime, ct);
	return json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:I}", "path", path, "type", st->type,
			 "size", (json_int_t)st->size, "modified_at", mt, "created_at", ct, "owner",
			 st->owner, "group", st->group, "mode", (json_int_t)octal_digits(st->mode));
}

int api_files_info(struct http_req *r)
{
	const char *paths[INFO_PATHS_MAX];
	size_t n = http_query_all(r, "path", paths, INFO_PATHS_MAX);
	if (!n)
		return http_error(r, 400, "INVALID_ARGUMENT", "path is required");
	for (size_t i = 0; i < n; i++)
		if (check_path(r, paths[i], "path") < 0)
			return 0;
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	/* One budget for every path: a stalled init costs this request RELAY_BUDGET_MS, not
	 * that per path. */
	sbfile_budget b = SBFILE_BUDGET_INIT;
	struct sbfile_ctx c = {sb, NULL, &b};
	json_t *out = json_object();
	for (size_t i = 0; i < n; i++) {
		sbfile_info st;
		struct cell_error err = {0};
		int rc = sbfile_stat(&c, paths[i], &st, &err);
		if (rc != 0) {
			respond_failed(r, paths[i], rc, &err);
			json_decref(out);
			sandbox_unref(sb);
			return 0;
		}
		json_t *fi = file_info(paths[i], &st);
		if (!fi || json_object_set_new(out, paths[i], fi) < 0) {
			json_decref(out);
			sandbox_unref(sb);
			return http_error(r, 400, "INVALID_ARGUMENT", "path is not valid UTF-8");
		}
	}
	sandbox_unref(sb);
	return http_json(r, 200, out);
}

/* ---- download ---- */

/* Range: 1 with [start, end] set, 0 to ignore the header (malformed or several ranges:
 * the whole file is sent), -1 when unsatisfiable (416). */
static int parse_range(const char *h, int64_t size, int64_t *start, int64_t *end)
{
	if (strncmp(h, "bytes=", 6) || strchr(h, ','))
		return 0;
	const char *spec = h + 6;
	const char *dash = strchr(spec, '-');
	if (!dash)
		return 0;
	char a[32] = "", b[32] = "";
	size_t alen = dash - spec, blen = strlen(dash + 1);
	if (alen >= sizeof(a) || blen >= sizeof(b))
		return 0;
	memcpy(a, spec, alen);
	memcpy(b, dash + 1, blen + 1);
	int64_t x, y;
	if (!alen) {
		if (parse_int64(b, 0, INT64_MAX, &y) < 0)
			return 0;
		if (y == 0 || size == 0)
			return -1;
		*start = y >= size ? 0 : size - y;
		*end = size - 1;
		return 1;
	}
	if (parse_int64(a, 0, INT64_MAX, &x) < 0)
		return 0;
	if (blen && (parse_int64(b, 0, INT64_MAX, &y) < 0 || y < x))
		return 0;
	if (x >= size)
		return -1;
	*start = x;
	*end = blen && y < size - 1 ? y : size - 1;
	return 1;
}

static int respond_unsatisfiable(struct http_req *r, int64_t size)
{
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return -ENOMEM;
	char cr[64];
	snprintf(cr, sizeof(cr), "bytes */%lld", (long long)size);
	MHD_add_response_header(resp, "Content-Range", cr);
	return http_respond(r, 416, resp);
}

/* Range resolved against the file's size: 0 go on (ranged or not), 1 answered. */
static int apply_range(struct http_req *r, const struct sbfile_ctx *c, const char *path,
		       const char *range, int64_t *offset, int64_t *limit, int64_t *size)
{
	sbfile_info st;
	struct cell_error err = {0};
	int rc = sbfile_stat(c, path, &st, &err);
	if (rc != 0)
		return respond_failed(r, path, rc, &err), 1;
	int64_t start, end;
	int pr = parse_range(range, st.size, &start, &end);
	if (pr < 0)
		return respond_unsatisfiable(r, st.size), 1;
	if (pr == 1) {
		*offset = start;
		*limit = end - start + 1;
		*size = st.size;
	}
	return 0;
}

/* Content-Disposition with the file's base name and suffix; the name is sandbox text, so
 * anything that could break out of the quoted string (or the header) becomes '_'. */
static void add_disposition(struct MHD_Response *resp, const char *path, const char *suffix)
{
	char trimmed[PATH_MAX];
	snprintf(trimmed, sizeof(trimmed), "%s", path);
	for (size_t len = strlen(trimmed); len > 1 && trimmed[len - 1] == '/';)
		trimmed[--len] = '\0';
	const char *base = strrchr(trimmed, '/');
	base = base && base[1] ? base + 1 : "download";
	if (!strcmp(base, ".") || !strcmp(base, ".."))
		base = "download";
	char v[320];
	size_t n = snprintf(v, sizeof(v), "attachment; filename=\"");
	for (const unsigned char *p = (const unsigned char *)base; *p && n < 280; p++)
		v[n++] = (*p < 0x20 || *p >= 0x7f || *p == '"' || *p == '\\') ? '_' : (char)*p;
	n += snprintf(v + n, sizeof(v) - n, "%s\"", suffix);
	MHD_add_response_header(resp, "Content-Disposition", v);
}

/* format=tar: the directory (or file) path leads to as a tar archive cell-init makes while
 * it is sent, chunked, never held whole here. */
static int download_tar(struct http_req *r, const char *path)
{
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	sbfile_budget b = SBFILE_BUDGET_INIT;
	struct sbfile_ctx c = {sb, NULL, &b};
	sbfile_info st;
	struct cell_error err = {0};
	int fd;
	int rc = sbfile_tar_open(&c, path, &fd, &st, &err);
	if (rc != 0) {
		sandbox_unref(sb);
		return respond_failed(r, path, rc, &err);
	}
	struct file_download *d = file_download_new(sb, fd);
	if (!d)
		return http_no_memory(r);
	d->tar = true;
	d->left = UINT64_MAX;
	struct MHD_Response *resp = MHD_create_response_from_callback(
	    MHD_SIZE_UNKNOWN, 64 << 10, file_download_read, d, file_download_free);
	if (!resp) {
		file_download_free(d);
		return http_no_memory(r);
	}
	MHD_add_response_header(resp, "Content-Type", "application/x-tar");
	add_disposition(resp, path, ".tar");
	return http_respond(r, 200, resp);
}

int api_files_download(struct http_req *r)
{
	const char *path = http_query(r, "path");
	if (check_path(r, path, "path") < 0)
		return 0;
	const char *qo = http_query(r, "offset"), *ql = http_query(r, "limit");
	const char *range = http_header(r, "Range");
	int64_t first = 1, count = -1;
	if ((qo && parse_int64(qo, 0, INT64_MAX, &first) < 0) ||
	    (ql && parse_int64(ql, 0, INT64_MAX, &count) < 0))
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "offset (first line, 1-based) and limit (line count) must be "
				  "integers >= 0");
	bool lines = qo || ql;
	const char *format = http_query(r, "format");
	if (format && !strcmp(format, "zip"))
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "format zip is not offered: use format=tar (cell-init writes the "
				  "archive itself, and no zip library fits its static, confined "
				  "build)");
	if (format && strcmp(format, "tar") && strcmp(format, "raw"))
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "format must be tar (a directory or file as an archive) or raw");
	if (format && !strcmp(format, "tar")) {
		if (lines || range)
			return http_error(r, 400, "INVALID_ARGUMENT",
					  "format=tar takes no offset, limit or Range: an archive "
					  "is sent whole");
		return download_tar(r, path);
	}
	if (lines && range)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "offset/limit and the Range header exclude each other");
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	int64_t offset = 0, limit = -1, full = -1;
	/* The stat of a Range and the read share one budget. */
	sbfile_budget b = SBFILE_BUDGET_INIT;
	struct sbfile_ctx c = {sb, NULL, &b};
	if (range && apply_range(r, &c, path, range, &offset, &limit, &full)) {
		sandbox_unref(sb);
		return 0;
	}
	sbfile_info st;
	struct cell_error err = {0};
	int fd;
	int rc = sbfile_read_open(&c, path, offset, limit, &fd, &st, &err);
	if (rc != 0) {
		sandbox_unref(sb);
		return respond_failed(r, path, rc, &err);
	}
	if (strcmp(st.type, "file")) {
		close(fd);
		sandbox_unref(sb);
		return http_error(r, 400, "INVALID_ARGUMENT", "%.1024s is a %s, not a file", path,
				  st.type);
	}
	struct file_download *d = file_download_new(sb, fd);
	if (!d)
		return http_no_memory(r);
	d->lines = lines;
	d->skip = first > 1 ? first - 1 : 0;
	d->want = count;
	uint64_t len = st.size > offset ? (uint64_t)(st.size - offset) : 0;
	if (limit >= 0 && (uint64_t)limit < len)
		len = (uint64_t)limit;
	d->left = len;
	struct MHD_Response *resp = MHD_create_response_from_callback(
	    lines ? MHD_SIZE_UNKNOWN : len, 64 << 10, file_download_read, d, file_download_free);
	if (!resp) {
		file_download_free(d);
		return http_no_memory(r);
	}
	if (lines) {
		MHD_add_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
		return http_respond(r, 200, resp);
	}
	MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
	MHD_add_response_header(resp, "Accept-Ranges", "bytes");
	add_disposition(resp, path, "");
	if (full >= 0) {
		char cr[96];
		snprintf(cr, sizeof(cr), "bytes %lld-%lld/%lld", (long long)offset,
			 (long long)(offset + (int64_t)len - 1), (long long)full);
		MHD_add_response_header(resp, "Content-Range", cr);
	}
	return http_respond(r, full >= 0 ? 206 : 200, resp);
}

/* ---- upload ---- */

enum part_kind { PART_NONE, PART_META, PART_FILE, PART_SKIP };

struct upload {
	struct sandbox *sb;
	struct multipart *mp;
	enum part_kind part;
	char *meta;
	size_t meta_len;
	bool pending;		 /* a metadata part awaits its file: path and perm */
	struct sbfile_perm perm; /* its mode and owners */
	char path[PATH_MAX];
	struct file_upload fu; /* the file being written */
	sbfile_budget budget;  /* for every file's start and end, together */
	unsigned files;
	/* The first failure; the rest of the body is read and dropped, then it is answered. */
	struct http_later failed;
};

static void upload_free(void *cls)
{
	struct upload *u = cls;
	file_upload_release(&u->fu);
	multipart_free(u->mp);
	free(u->meta);
	if (u->sb)
		sandbox_stream_end(u->sb);
	sandbox_unref(u->sb);
	free(u);
}

/* A failure of the file being written: cell-init's refusal (1), or the relay's (-errno). */
static int write_failed(struct upload *u, int rc, const struct cell_error *err)
{
	if (rc != 1)
		return http_later_fail_errno(&u->failed, err->code, NULL, "%s: relay: %s", u->path,
					     err->msg);
	int errnum = sandbox_errno(err->code);
	return http_later_fail_errno(&u->failed, errnum, path_code(errnum), "%s: %s", u->path,
				     err->msg);
}

/* 644 (or "644") → 0644: every digit must be octal. */
static int parse_mode(json_t *v, uint32_t *out)
{
	char buf[16];
	if (json_is_integer(v))
		snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
	else if (json_is_clean_string(v) && json_string_length(v) < sizeof(buf))
		snprintf(buf, sizeof(buf), "%s", json_string_value(v));
	else
		return -EINVAL;
	uint32_t m = 0;
	if (!buf[0] || strlen(buf) > 4)
		return -EINVAL;
	for (const char *p = buf; *p; p++) {
		if (*p < '0' || *p > '7')
			return -EINVAL;
		m = m << 3 | (uint32_t)(*p - '0');
	}
	/* Permission bits only: no set-id bits on files a client uploads. */
	if (m > 0777)
		return -EINVAL;
	*out = m;
	return 0;
}

/* owner/group: a numeric id inside the sandbox's range, or "root". */
static int parse_id(json_t *v, int64_t *out)
{
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return *out >= 0 && *out < CELL_UID_RANGE ? 0 : -EINVAL;
	}
	if (!json_is_clean_string(v))
		return -EINVAL;
	if (!strcmp(json_string_value(v), "root")) {
		*out = 0;
		return 0;
	}
	return parse_int64(json_string_value(v), 0, CELL_UID_RANGE - 1, out);
}

static int owner_field(json_t *v, struct sbfile_owner *o);

static int metadata_done(struct upload *u)
{
	json_error_t jerr;
	json_t *m = json_loadb(u->meta ? u->meta : "", u->meta_len,
			       JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	free(u->meta);
	u->meta = NULL;
	u->meta_len = 0;
	if (!json_is_object(m)) {
		json_decref(m);
		return http_later_fail(&u->failed, 400, "INVALID_ARGUMENT",
				       "metadata part must be a JSON object {path, mode?, owner?, "
				       "group?}");
	}
	const char *path;
	struct cell_error err = {0};
	uint32_t mode = 0644;
	json_t *jm = json_object_get(m, "mode"), *jo = json_object_get(m, "owner"),
	       *jg = json_object_get(m, "group");
	int rc = -EINVAL;
	if (field_string(m, "path", "metadata.path", true, &path, &err) < 0)
		http_later_fail(&u->failed, 400, "INVALID_ARGUMENT", "%s", err.msg);
	else if (!sbfile_path_ok(path))
		http_later_fail(&u->failed, 400, "INVALID_ARGUMENT",
				"metadata.path must be an absolute path");
	else if (jm && !json_is_null(jm) && parse_mode(jm, &mode) < 0)
		http_later_fail(
		    &u->failed, 400, "INVALID_ARGUMENT",
		    "metadata.mode must be octal permission digits from 0 to 777 such as 644 "
		    "(set-id and sticky bits are refused)");
	else
		rc = 0;
	struct sbfile_perm perm = SBFILE_PERM_KEEP;
	perm.mode = (int32_t)mode;
	if (rc == 0 && jo && !json_is_null(jo) && owner_field(jo, &perm.user) < 0) {
		rc = http_later_fail(&u->failed, 400, "INVALID_ARGUMENT",
				     "metadata.owner must be a user name or a numeric id (0-%d)",
				     CELL_UID_RANGE - 1);
	} else if (rc == 0 && jg && !json_is_null(jg) && owner_field(jg, &perm.group) < 0) {
		rc = http_later_fail(&u->failed, 400, "INVALID_ARGUMENT",
				     "metadata.group must be a group name or a numeric id (0-%d)",
				     CELL_UID_RANGE - 1);
	}
	if (rc == 0) {
		snprintf(u->path, sizeof(u->path), "%s", path);
		u->perm = perm;
		u->pending = true;
	}
	json_decref(m);
	return rc;
}

static int file_begin(struct upload *u)
{
	if (!u->pending)
		return http_later_fail(&u->failed, 400, "INVALID_ARGUMENT",
				       "file part without a metadata part before it");
	struct cell_error err = {0};
	int rc = file_upload_begin(&u->fu, u->path, &u->perm, NULL, &err);
	u->pending = false;
	if (rc < 0)
		return http_later_fail_errno(&u->failed, err.code, NULL, "%s", err.msg);
	return 0;
}

static int file_end(struct upload *u)
{
	struct cell_error err = {0};
	int64_t size;
	int rc = file_upload_end(&u->fu, &size, &err); /* audited there */
	if (rc != 0)
		return write_failed(u, rc, &err);
	u->files++;
	return 0;
}

static int on_part_begin(void *cls, const char *name)
{
	struct upload *u = cls;
	if (!strcmp(name, "metadata")) {
		u->part = PART_META;
		u->meta_len = 0;
		return 0;
	}
	if (!strcmp(name, "file")) {
		u->part = PART_FILE;
		return file_begin(u);
	}
	u->part = PART_SKIP; /* unknown parts are ignored */
	return 0;
}

static int on_part_data(void *cls, const char *data, size_t len)
{
	struct upload *u = cls;
	if (u->part == PART_META) {
		if (u->meta_len + len > META_MAX)
			return http_later_fail(&u->failed, 400, "INVALID_ARGUMENT",
					       "metadata part larger than %u bytes", META_MAX);
		char *nm = realloc(u->meta, u->meta_len + len + 1);
		if (!nm)
			return http_later_fail_errno(&u->failed, ENOMEM, NULL, "out of memory");
		memcpy(nm + u->meta_len, data, len);
		u->meta = nm;
		u->meta_len += len;
		return 0;
	}
	if (u->part != PART_FILE)
		return 0;
	struct cell_error err = {0};
	int rc = file_upload_write(&u->fu, data, len, &err);
	if (rc != 0)
		return write_failed(u, rc, &err), -EIO;
	return 0;
}

static int on_part_end(void *cls)
{
	struct upload *u = cls;
	enum part_kind k = u->part;
	u->part = PART_NONE;
	if (k == PART_META)
		return metadata_done(u);
	if (k == PART_FILE)
		return file_end(u);
	return 0;
}

static const struct multipart_ops upload_ops = {on_part_begin, on_part_data, on_part_end};

int api_files_upload_begin(struct http_req *r)
{
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	struct upload *u = calloc(1, sizeof(*u));
	if (!u) {
		sandbox_unref(sb);
		return http_no_memory(r);
	}
	u->sb = sb;
	sandbox_stream_begin(sb); /* a long upload keeps the sandbox from idling */
	u->budget = (sbfile_budget)SBFILE_BUDGET_INIT;
	u->fu = (struct file_upload){.sb = sb, .fd = -1, .budget = &u->budget};
	http_set_state(r, u, upload_free);
	struct cell_error err = {0};
	u->mp = multipart_new(http_header(r, "Content-Type"), &upload_ops, u, &err);
	if (!u->mp)
		return http_error(r, 400, "INVALID_ARGUMENT", "%s", err.msg);
	return 0;
}

int api_files_upload_data(struct http_req *r, const char *data, size_t len)
{
	struct upload *u = http_state(r);
	if (!u || u->failed.status)
		return 0;
	struct cell_error err = {0};
	if (multipart_feed(u->mp, data, len, &err) < 0 && !u->failed.status)
		http_later_fail_errno(&u->failed, err.code, NULL, "%s", err.msg);
	return 0;
}

int api_files_upload(struct http_req *r)
{
	struct upload *u = http_state(r);
	if (!u)
		return http_error(r, 500, "INTERNAL", "upload state lost");
	struct cell_error err = {0};
	if (!u->failed.status && multipart_finish(u->mp, &err) < 0)
		http_later_fail(&u->failed, 400, "INVALID_ARGUMENT", "%s", err.msg);
	if (!u->failed.status && u->pending)
		http_later_fail(&u->failed, 400, "INVALID_ARGUMENT",
				"metadata for %s has no file part", u->path);
	if (!u->failed.status && !u->files)
		http_later_fail(&u->failed, 400, "INVALID_ARGUMENT", "no file part in the upload");
	if (u->failed.status)
		return http_later_answer(r, &u->failed);
	return http_empty(r, 200);
}

/* ---- directories and file management ---- */

#define MANAGE_PATHS_MAX 256 /* paths one request names */

/* owner/group on a directory, a permission change or an upload: a numeric id inside the
 * sandbox's range (number or digits), or a user/group name cell-init looks up in the
 * sandbox's own /etc/passwd or /etc/group. 0 or -EINVAL. */
static int owner_field(json_t *v, struct sbfile_owner *o)
{
	int64_t id;
	*o = (struct sbfile_owner){.id = -1};
	if (parse_id(v, &id) == 0) {
		o->id = id;
		return 0;
	}
	if (!json_is_clean_string(v))
		return -EINVAL;
	const char *s = json_string_value(v);
	size_t n = strlen(s);
	/* All digits but out of range: parse_id refused it, a name must not be a number. */
	if (!sbfile_name_ok(s, n) || strspn(s, "0123456789") == n)
		return -EINVAL;
	snprintf(o->name, sizeof(o->name), "%s", s);
	return 0;
}

/* {mode?, owner?, group?} of one path into p; 400 naming the field on bad input. */
static int permission_fields(struct http_req *r, const char *path, json_t *perm,
			     struct sbfile_perm *p, bool need_mode)
{
	if (!json_is_object(perm))
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "%.1024s: must be an object {mode, owner?, group?}", path),
		       -EINVAL;
	json_t *jm = json_object_get(perm, "mode"), *jo = json_object_get(perm, "owner"),
	       *jg = json_object_get(perm, "group");
	*p = SBFILE_PERM_KEEP;
	uint32_t mode;
	if (jm && !json_is_null(jm)) {
		if (parse_mode(jm, &mode) < 0)
			return http_error(r, 400, "INVALID_ARGUMENT",
					  "%.1024s: mode must be octal permission digits from 0 "
					  "to 777 such as 755 (set-id and sticky bits are refused)",
					  path),
			       -EINVAL;
		p->mode = (int32_t)mode;
	} else if (need_mode) {
		p->mode = 0755;
	}
	if (jo && !json_is_null(jo) && owner_field(jo, &p->user) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "%.1024s: owner must be a user name or a numeric id (0-%d)", path,
				  CELL_UID_RANGE - 1),
		       -EINVAL;
	if (jg && !json_is_null(jg) && owner_field(jg, &p->group) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "%.1024s: group must be a group name or a numeric id (0-%d)",
				  path, CELL_UID_RANGE - 1),
		       -EINVAL;
	return 0;
}

enum op_kind { OP_MKDIR, OP_REMOVE, OP_MOVE, OP_CHMOD, OP_REPLACE };

/* One path's change, its texts borrowed from the request. */
struct op {
	const char *path;	    /* a move's source */
	const char *dest;	    /* a move's */
	struct sbfile_perm perm;    /* mkdir, chmod */
	bool recursive;		    /* remove */
	const char *old, *new_text; /* replace */
};

/* All of a request's changes, validated before the first is made. */
struct ops {
	enum op_kind kind;
	size_t n;
	struct op v[MANAGE_PATHS_MAX];
};

static struct ops *ops_new(enum op_kind kind)
{
	struct ops *o = calloc(1, sizeof(*o));
	if (o)
		o->kind = kind;
	return o;
}

/* One change through the files service, which audits it. */
static int run_one(const struct sbfile_ctx *c, enum op_kind k, const struct op *o, int64_t *count,
		   struct cell_error *err)
{
	switch (k) {
	case OP_MKDIR:
		return sbfile_mkdir(c, o->path, &o->perm, NULL, err);
	case OP_REMOVE:
		return sbfile_remove(c, o->path, o->recursive, err);
	case OP_MOVE:
		return sbfile_move(c, o->path, o->dest, err);
	case OP_CHMOD:
		return sbfile_chmod(c, o->path, &o->perm, err);
	case OP_REPLACE:
		return sbfile_replace(c, o->path, o->old, o->new_text, count, err);
	}
	return cell_err(err, EINVAL, "unknown file operation");
}

/* Make each change in turn; the first failure answers. With collect, each replace's count
 * goes into it as {"<path>": {"replacedCount": N}} and it is the answer. */
static int run_ops_collect(struct http_req *r, const struct ops *ops, json_t *collect)
{
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb) {
		json_decref(collect);
		return 0;
	}
	sbfile_budget b = SBFILE_BUDGET_INIT;
	struct sbfile_ctx c = {sb, NULL, &b};
	for (size_t i = 0; i < ops->n; i++) {
		const struct op *o = &ops->v[i];
		struct cell_error err = {0};
		int64_t count = 0;
		int rc = run_one(&c, ops->kind, o, collect ? &count : NULL, &err);
		if (rc != 0) {
			sandbox_unref(sb);
			json_decref(collect);
			return respond_failed(r, o->path, rc, &err);
		}
		if (collect)
			json_object_set_new(collect, o->path,
					    json_pack("{s:I}", "replacedCount", (json_int_t)count));
	}
	sandbox_unref(sb);
	return collect ? http_json(r, 200, collect) : http_empty(r, 200);
}

static int run_ops(struct http_req *r, const struct ops *ops)
{
	return run_ops_collect(r, ops, NULL);
}

/* A body {"<path>": {mode, owner?, group?}, ...} run as one change of kind per path: mode
 * is required for mkdir, optional for chmod. what names the paths in the bound's message. */
static int run_path_perms(struct http_req *r, enum op_kind kind, bool mode_required,
			  const char *what)
{
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	__attribute__((cleanup(json_decrefp))) json_t *owned = body;
	if (json_object_size(body) == 0 || json_object_size(body) > MANAGE_PATHS_MAX)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "body must map 1 to %d %s to {mode, owner?, group?}",
				  MANAGE_PATHS_MAX, what);
	_cleanup_free_ struct ops *ops = ops_new(kind);
	if (!ops)
		return http_no_memory(r);
	const char *path;
	json_t *perm;
	json_object_foreach(body, path, perm)
	{
		struct op *o = &ops->v[ops->n++];
		o->path = path;
		if (check_path(r, path, "path") < 0 ||
		    permission_fields(r, path, perm, &o->perm, mode_required) < 0)
			return 0;
	}
	return run_ops(r, ops);
}

/* POST /directories {"<path>": {mode, owner?, group?}, ...}: mkdir -p each. */
int api_dirs_create(struct http_req *r)
{
	return run_path_perms(r, OP_MKDIR, true, "directory paths");
}

/* DELETE /files?path=P... (not directories) and DELETE /directories?path=P... (rm -r). */
static int remove_paths(struct http_req *r, bool recursive)
{
	const char *paths[MANAGE_PATHS_MAX + 1];
	size_t n = http_query_all(r, "path", paths, MANAGE_PATHS_MAX + 1);
	if (!n)
		return http_error(r, 400, "INVALID_ARGUMENT", "path is required");
	if (n > MANAGE_PATHS_MAX)
		return http_error(r, 400, "INVALID_ARGUMENT", "path: at most %d per request",
				  MANAGE_PATHS_MAX);
	_cleanup_free_ struct ops *ops = ops_new(OP_REMOVE);
	if (!ops)
		return http_no_memory(r);
	for (size_t i = 0; i < n; i++) {
		if (check_path(r, paths[i], "path") < 0)
			return 0;
		if (!sbfile_text_ok(paths[i]))
			return http_error(r, 400, "INVALID_ARGUMENT", "path is not valid UTF-8");
		ops->v[ops->n++] = (struct op){.path = paths[i], .recursive = recursive};
	}
	return run_ops(r, ops);
}

int api_files_delete(struct http_req *r)
{
	return remove_paths(r, false);
}

int api_dirs_delete(struct http_req *r)
{
	return remove_paths(r, true);
}

/* ---- listing and search ---- */

static int add_entry(void *cls, const char *path, const sbfile_info *st)
{
	json_t *fi = file_info(path, st);
	return fi && json_array_append_new(cls, fi) == 0 ? 0 : -ENOMEM;
}

/* The entries of path, depth levels down or (pattern) matching a glob, as the answer. */
static int list_request(struct http_req *r, const char *path, int depth, const char *pattern)
{
	if (!sbfile_text_ok(path) || (pattern && !sbfile_text_ok(pattern)))
		return http_error(r, 400, "INVALID_ARGUMENT",
				  pattern ? "path and pattern must be UTF-8 text"
					  : "path is not valid UTF-8");
	struct sandbox *sb = api_running_sandbox(r);
	if (!sb)
		return 0;
	sbfile_budget b = SBFILE_BUDGET_INIT;
	struct sbfile_ctx c = {sb, NULL, &b};
	struct cell_error err = {0};
	json_t *out = json_array();
	int rc = out ? sbfile_list(&c, path, depth, pattern, add_entry, out, &err)
		     : cell_err(&err, ENOMEM, "listing");
	sandbox_unref(sb);
	if (rc != 0) {
		json_decref(out);
		return respond_failed(r, path, rc, &err);
	}
	return http_json(r, 200, out);
}

/* GET /directories/list?path=DIR&depth=N */
int api_dirs_list(struct http_req *r)
{
	const char *path = http_query(r, "path"), *ds = http_query(r, "depth");
	int64_t depth = 1;
	if (check_path(r, path, "path") < 0)
		return 0;
	if (ds && parse_int64(ds, 1, SBFILE_LIST_DEPTH_MAX, &depth) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "depth must be an integer from 1 to %d", SBFILE_LIST_DEPTH_MAX);
	return list_request(r, path, (int)depth, NULL);
}

/* GET /files/search?path=DIR&pattern=GLOB */
int api_files_search(struct http_req *r)
{
	const char *path = http_query(r, "path"), *pattern = http_query(r, "pattern");
	if (check_path(r, path, "path") < 0)
		return 0;
	if (!pattern || !pattern[0])
		pattern = "**";
	if (strlen(pattern) > 1024)
		return http_error(r, 400, "INVALID_ARGUMENT", "pattern: at most 1024 bytes");
	return list_request(r, path, 0, pattern);
}

/* ---- move, permissions, replace ---- */

/* POST /files/mv [{"src","dest"}, ...] */
int api_files_move(struct http_req *r)
{
	json_t *body;
	if (http_json_body_any(r, &body) < 0)
		return 0;
	__attribute__((cleanup(json_decrefp))) json_t *owned = body;
	if (!json_is_array(body) || json_array_size(body) == 0 ||
	    json_array_size(body) > MANAGE_PATHS_MAX)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "body must be an array of 1 to %d {src, dest}", MANAGE_PATHS_MAX);
	_cleanup_free_ struct ops *ops = ops_new(OP_MOVE);
	if (!ops)
		return http_no_memory(r);
	size_t i;
	json_t *e;
	json_array_foreach(body, i, e)
	{
		const char *src = json_string_value(json_object_get(e, "src"));
		const char *dest = json_string_value(json_object_get(e, "dest"));
		char name[32];
		snprintf(name, sizeof(name), "[%zu].src", i);
		if (!json_is_object(e) || check_path(r, src, name) < 0)
			return json_is_object(e)
				   ? 0
				   : http_error(r, 400, "INVALID_ARGUMENT",
						"[%zu] must be an object {src, dest}", i);
		snprintf(name, sizeof(name), "[%zu].dest", i);
		if (check_path(r, dest, name) < 0)
			return 0;
		ops->v[ops->n++] = (struct op){.path = src, .dest = dest};
	}
	return run_ops(r, ops);
}

/* POST /files/permissions {"<path>": {mode, owner?, group?}, ...} */
int api_files_permissions(struct http_req *r)
{
	return run_path_perms(r, OP_CHMOD, false, "paths");
}

/* One path's {"old","new"} into o; 400 naming the field on bad input. */
static int replace_fields(struct http_req *r, const char *path, json_t *item, struct op *o)
{
	json_t *jo = json_object_get(item, "old"), *jn = json_object_get(item, "new");
	if (!json_is_clean_string(jo) || !json_string_length(jo) ||
	    json_string_length(jo) > SBFILE_REPLACE_MAX)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "%.1024s: old must be a non-empty string of at most %u bytes",
				  path, SBFILE_REPLACE_MAX),
		       -EINVAL;
	if (!json_is_clean_string(jn) || json_string_length(jn) > SBFILE_REPLACE_MAX)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "%.1024s: new must be a string of at most %u bytes", path,
				  SBFILE_REPLACE_MAX),
		       -EINVAL;
	*o = (struct op){
	    .path = path, .old = json_string_value(jo), .new_text = json_string_value(jn)};
	return 0;
}

/* POST /files/replace[?verbose=true] {"<path>": {"old","new"}, ...} */
int api_files_replace(struct http_req *r)
{
	const char *verbose = http_query(r, "verbose");
	if (verbose && strcmp(verbose, "true") && strcmp(verbose, "false"))
		return http_error(r, 400, "INVALID_ARGUMENT", "verbose must be true or false");
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	__attribute__((cleanup(json_decrefp))) json_t *owned = body;
	if (json_object_size(body) == 0 || json_object_size(body) > MANAGE_PATHS_MAX)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "body must map 1 to %d paths to {old, new}", MANAGE_PATHS_MAX);
	_cleanup_free_ struct ops *ops = ops_new(OP_REPLACE);
	if (!ops)
		return http_no_memory(r);
	const char *path;
	json_t *item;
	json_object_foreach(body, path, item)
	{
		if (check_path(r, path, "path") < 0 ||
		    replace_fields(r, path, item, &ops->v[ops->n++]) < 0)
			return 0;
	}
	bool v = verbose && !strcmp(verbose, "true");
	return run_ops_collect(r, ops, v ? json_object() : NULL);
}
