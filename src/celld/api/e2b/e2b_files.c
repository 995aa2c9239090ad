/* envd's GET and POST /files: a file's bytes, streamed through celld, never held whole.
 *   GET /files?path=P&username=U: the file's bytes as the body (sbfile.c's reader,
 *   file_xfer.c's download).
 *   POST /files?path=P&username=U: a multipart/form-data body (each "file" part one file,
 *   at ?path or, without it, at the part's filename) or an application/octet-stream body
 *   (one file at ?path), either possibly gzip-compressed (Content-Encoding: gzip), each file
 *   through one upload of file_xfer.c; the answer lists what was written
 *   ([{"name","type":"file","path","metadata"?}]). X-Metadata-<key>: <value> headers are
 *   kept on each file written as its metadata (cell-init's xattrs: user.e2b.<key>).
 * Paths resolve as the call's user sees them (e2b_user_path), created files are owned by it;
 * cell-init resolves them beneath the sandbox's root. Errors are envd's {"code","message"}. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <microhttpd.h>
#include <zlib.h>

#include "cell/meta.h"
#include "e2b.h"
#include "http/errors.h"
#include "file_xfer.h"
#include "http/http.h"
#include "http/multipart.h"
#include "sandbox.h"
#include "sbfile.h"
#include "http/transport.h"

#define INFLATE_CHUNK (64u << 10)

/* The errno cell-init reported, as the table should read it: a full disk, or a file past
 * what the sandbox allows, is its own layer at its quota (507, the SDK's
 * NotEnoughSpaceError), never the host out of capacity. */
static int sandbox_errno(int errnum)
{
	return errnum == ENOSPC || errnum == EFBIG ? EDQUOT : errnum;
}

/* The HTTP status of an errno cell-init reported: the table's (errors.h), but a path that
 * is there as something else is a 400, as envd answers it. */
static unsigned files_status(int errnum)
{
	return errnum == EEXIST ? 400 : errors_lookup(sandbox_errno(errnum))->status;
}

/* The call's user: the username query parameter, else the default. 0, or -1 answered. */
static int files_user(struct http_req *r, const struct sandbox *sb, struct e2b_user *u,
		      sbfile_budget *b)
{
	const char *qn = http_query(r, "username");
	char name[E2B_USER_NAME_MAX + 1] = "";
	if (qn && qn[0] && e2b_user_name(qn, name) < 0)
		return e2b_error(r, 400, "username: not a user name"), -1;
	struct cell_error err = {0};
	if (e2b_user_lookup(sb, name, u, b, &err) < 0) {
		if (err.code == ENOENT) /* no such user: envd's 401 */
			e2b_error(r, 401, "%s", err.msg);
		else
			http_internal(r, &err);
		return -1;
	}
	return 0;
}

/* path as u sees it into out: 0, or -EINVAL with *why. */
static int resolve(const struct e2b_user *u, const char *path, char out[PATH_MAX], const char **why)
{
	if (!path || !path[0])
		return *why = "path is required", -EINVAL;
	if (e2b_user_path(u, path, out) < 0)
		return *why = "path is too long", -EINVAL;
	return 0;
}

/* ---- download ---- */

int e2b_files_download(struct http_req *r)
{
	struct sandbox *sb = e2b_envd_http_sandbox(r);
	if (!sb)
		return 0;
	sbfile_budget b = SBFILE_BUDGET_INIT;
	struct e2b_user u;
	char path[PATH_MAX];
	const char *why;
	if (files_user(r, sb, &u, &b) < 0) {
		sandbox_unref(sb);
		return 0;
	}
	if (resolve(&u, http_query(r, "path"), path, &why) < 0) {
		sandbox_unref(sb);
		return e2b_error(r, 400, "%s", why);
	}
	sbfile_info st;
	struct cell_error err = {0};
	int fd;
	struct sbfile_ctx c = {sb, u.name, &b};
	int rc = sbfile_read_open(&c, path, 0, -1, &fd, &st, &err);
	if (rc != 0) {
		sandbox_unref(sb);
		if (rc == 1)
			return e2b_error(r, files_status(err.code), "%.1024s: %s", path, err.msg);
		return http_fail(r, err.code, NULL, "%.1024s: %s", path, err.msg);
	}
	if (strcmp(st.type, "file")) {
		close(fd);
		sandbox_unref(sb);
		return e2b_error(r, 400, "path is a %s, not a file: %.1024s", st.type, path);
	}
	struct file_download *d = file_download_new(sb, fd);
	if (!d)
		return http_no_memory(r);
	d->left = st.size > 0 ? (uint64_t)st.size : 0;
	/* A known length: Content-Length (0 for an empty file, which the SDK reads as such). */
	struct MHD_Response *resp = MHD_create_response_from_callback(
	    d->left, 64 << 10, file_download_read, d, file_download_free);
	if (!resp) {
		file_download_free(d);
		return http_no_memory(r);
	}
	MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
	return http_respond(r, 200, resp);
}

/* ---- upload ---- */

enum upload_part { PART_NONE, PART_FILE };

struct upload {
	struct sandbox *sb;
	struct e2b_user user;
	sbfile_budget budget;
	char qpath[PATH_MAX]; /* ?path resolved, "" when absent */
	struct multipart *mp; /* a multipart body; NULL: one raw file at qpath */
	enum upload_part part;
	struct file_upload fu;
	char path[PATH_MAX]; /* the file being written */
	bool gzip;
	bool z_ready;
	z_stream z;
	unsigned char *zout;
	uint64_t inflated;    /* bytes the gzip body inflated to, bounded as a plain body is */
	json_t *written;      /* WriteInfo of each file done */
	json_t *meta;	      /* X-Metadata-<key>: {key (lowercased): value}, NULL: none */
	const char *meta_bad; /* why a header was refused, NULL when none was */
	size_t meta_bytes;    /* keys (with the xattr prefix) plus values */
	bool refused;	      /* answered at its start: the body is dropped */
	/* The first failure; the rest of the body is read and dropped, then it is answered. */
	struct http_later failed;
};

static void upload_free(void *cls)
{
	struct upload *u = cls;
	file_upload_release(&u->fu);
	multipart_free(u->mp);
	if (u->z_ready)
		inflateEnd(&u->z);
	free(u->zout);
	json_decref(u->written);
	json_decref(u->meta);
	if (u->sb) {
		sandbox_stream_end(u->sb);
		sandbox_unref(u->sb);
	}
	free(u);
}

/* A failure of the file being written: cell-init's refusal (1) or the relay's (-errno). */
static int upload_fail(struct upload *u, int rc, const struct cell_error *err)
{
	if (rc == 1)
		return http_later_fail(&u->failed, files_status(err->code), "", "%s: %s", u->path,
				       err->msg);
	return http_later_fail_errno(&u->failed, err->code, NULL, "%s: %s", u->path, err->msg);
}

static int file_begin(struct upload *u, const char *path)
{
	const char *why;
	if (resolve(&u->user, path, u->path, &why) < 0)
		return http_later_fail(&u->failed, 400, "", "%s", why);
	struct cell_error err = {0};
	struct sbfile_ctx c = {u->sb, u->user.name, &u->budget};
	int rc = sbfile_make_parents(&c, u->path, u->user.uid, u->user.gid, &err);
	if (rc != 0)
		return upload_fail(u, rc, &err);
	/* What it creates is the user's, as envd makes it. */
	struct sbfile_perm p = {
	    .mode = 0644, .user = {.id = u->user.uid}, .group = {.id = u->user.gid}};
	rc = file_upload_begin(&u->fu, u->path, &p, u->meta, &err);
	return rc < 0 ? upload_fail(u, rc, &err) : 0;
}

static int file_data(struct upload *u, const char *data, size_t len)
{
	struct cell_error err = {0};
	int rc = file_upload_write(&u->fu, data, len, &err);
	return rc ? (upload_fail(u, rc, &err), -EIO) : 0;
}

static int file_end(struct upload *u)
{
	struct cell_error err = {0};
	int64_t size = 0;
	int rc = file_upload_end(&u->fu, &size, &err); /* audited there */
	if (rc != 0)
		return upload_fail(u, rc, &err);
	const char *slash = strrchr(u->path, '/');
	json_t *info = json_pack("{s:s, s:s, s:s}", "name", slash ? slash + 1 : u->path, "type",
				 "file", "path", u->path);
	if (info && u->meta) /* what was written with it, as envd answers */
		json_object_set(info, "metadata", u->meta);
	if (!info || json_array_append_new(u->written, info) < 0)
		return http_later_fail(&u->failed, 400, "", "%s: path is not UTF-8", u->path);
	return 0;
}

static int on_part_begin(void *cls, const char *name)
{
	struct upload *u = cls;
	if (strcmp(name, "file"))
		return http_later_fail(&u->failed, 400, "",
				       "multipart part %.64s: only \"file\" parts are taken", name);
	const char *fname = multipart_filename(u->mp);
	if (!u->qpath[0] && !fname[0])
		return http_later_fail(&u->failed, 400, "",
				       "a file part needs a filename (its path) when the path "
				       "parameter is absent");
	u->part = PART_FILE;
	return file_begin(u, u->qpath[0] ? u->qpath : fname);
}

static int on_part_data(void *cls, const char *data, size_t len)
{
	struct upload *u = cls;
	return u->part == PART_FILE ? file_data(u, data, len) : 0;
}

static int on_part_end(void *cls)
{
	struct upload *u = cls;
	enum upload_part k = u->part;
	u->part = PART_NONE;
	return k == PART_FILE ? file_end(u) : 0;
}

static const struct multipart_ops upload_ops = {on_part_begin, on_part_data, on_part_end};

/* Decoded body bytes: into the multipart parser, or the one raw file. */
static int body_bytes(struct upload *u, const char *data, size_t len)
{
	if (!u->mp)
		return file_data(u, data, len);
	struct cell_error err = {0};
	if (multipart_feed(u->mp, data, len, &err) < 0) {
		if (!u->failed.status)
			http_later_fail(&u->failed, 400, "", "%s", err.msg);
		return -EINVAL;
	}
	return 0;
}

/* Content-Encoding: gzip: the body inflated as it comes. finish: the body ended. */
static int inflate_bytes(struct upload *u, const char *data, size_t len, bool finish)
{
	u->z.next_in = (unsigned char *)data;
	u->z.avail_in = (uInt)len;
	for (;;) {
		u->z.next_out = u->zout;
		u->z.avail_out = INFLATE_CHUNK;
		int zr = inflate(&u->z, Z_NO_FLUSH);
		size_t out = INFLATE_CHUNK - u->z.avail_out;
		if ((u->inflated += out) > HTTP_UPLOAD_MAX)
			return http_later_fail(&u->failed, 413, "",
					       "the gzip body inflates past %llu bytes",
					       (unsigned long long)HTTP_UPLOAD_MAX);
		if (out && body_bytes(u, (const char *)u->zout, out) < 0)
			return -EIO;
		if (zr == Z_STREAM_END) {
			if (u->z.avail_in)
				return http_later_fail(&u->failed, 400, "",
						       "bytes after the end of the gzip stream");
			return 0;
		}
		if (zr != Z_OK && zr != Z_BUF_ERROR)
			return http_later_fail(&u->failed, 400, "", "body is not valid gzip: %s",
					       u->z.msg ? u->z.msg : "corrupt");
		if (!u->z.avail_in && out < INFLATE_CHUNK) {
			if (finish)
				return http_later_fail(&u->failed, 400, "",
						       "gzip body ends before its stream does");
			return 0;
		}
	}
}

/* One request header: X-Metadata-<key>: <value> into u->meta (the key lowercased; the first
 * of a repeated key wins), validated and bounded as cell-init bounds a file's metadata. */
static bool meta_header(void *cls, const char *name, const char *value)
{
	struct upload *u = cls;
	static const char prefix[] = "X-Metadata-";
	if (strncasecmp(name, prefix, sizeof(prefix) - 1))
		return true;
	const char *key = name + sizeof(prefix) - 1;
	size_t klen = strlen(key), vlen = strlen(value);
	if (!cell_meta_key_ok(key, klen)) {
		u->meta_bad = klen ? "X-Metadata-<key>: a key is 1 to 246 HTTP token characters"
				   : "X-Metadata-<key>: the key is empty";
		return false;
	}
	if (!cell_meta_value_ok(value, vlen)) {
		u->meta_bad = "X-Metadata-<key>: a value is printable ASCII";
		return false;
	}
	char lower[CELL_META_KEY_MAX + 1];
	for (size_t i = 0; i <= klen; i++)
		lower[i] = (char)tolower((unsigned char)key[i]);
	if (!u->meta && !(u->meta = json_object())) {
		u->meta_bad = "out of memory";
		return false;
	}
	if (json_object_get(u->meta, lower))
		return true;
	if ((u->meta_bytes += (sizeof(CELL_META_PREFIX) - 1) + klen + vlen) > CELL_META_MAX) {
		u->meta_bad = "X-Metadata-*: a file's metadata is at most 4096 bytes (each key "
			      "counted with 9 bytes of prefix)";
		return false;
	}
	if (json_object_set_new(u->meta, lower, json_string(value)) < 0) {
		u->meta_bad = "out of memory";
		return false;
	}
	return true;
}

int e2b_files_upload_begin(struct http_req *r)
{
	struct sandbox *sb = e2b_envd_http_sandbox(r);
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
	u->fu =
	    (struct file_upload){.sb = sb, .user = u->user.name, .fd = -1, .budget = &u->budget};
	http_set_state(r, u, upload_free);
	u->refused = true; /* until it is ready */
	if (!(u->written = json_array()))
		return http_no_memory(r);
	if (files_user(r, sb, &u->user, &u->budget) < 0)
		return 0;
	const char *qp = http_query(r, "path"), *why;
	if (qp && qp[0] && resolve(&u->user, qp, u->qpath, &why) < 0)
		return e2b_error(r, 400, "path: %s", why);
	const char *enc = http_header(r, "Content-Encoding");
	if (enc && strcasecmp(enc, "identity")) {
		if (strcasecmp(enc, "gzip"))
			return e2b_error(r, 415, "Content-Encoding %.32s: only gzip is taken", enc);
		u->gzip = true;
		if (!(u->zout = malloc(INFLATE_CHUNK)) ||
		    inflateInit2(&u->z, 16 + MAX_WBITS) != Z_OK)
			return http_no_memory(r);
		u->z_ready = true;
	}
	http_headers_each(r, meta_header, u);
	if (u->meta_bad)
		return e2b_error(r, 400, "%s", u->meta_bad);
	const char *ct = http_header(r, "Content-Type");
	if (ct && !strncasecmp(ct, "multipart/form-data", 19)) {
		struct cell_error err = {0};
		u->mp = multipart_new(ct, &upload_ops, u, &err);
		if (!u->mp)
			return e2b_error(r, 400, "%s", err.msg);
		u->refused = false;
		return 0;
	}
	if (!ct || strncasecmp(ct, "application/octet-stream", 24))
		return e2b_error(r, 400,
				 "Content-Type must be multipart/form-data or "
				 "application/octet-stream");
	if (!u->qpath[0])
		return e2b_error(r, 400, "path is required with an application/octet-stream body");
	u->refused = false;
	file_begin(u, u->qpath);
	return 0;
}

int e2b_files_upload_data(struct http_req *r, const char *data, size_t len)
{
	struct upload *u = http_state(r);
	if (!u || u->refused || u->failed.status)
		return 0;
	if (u->gzip)
		inflate_bytes(u, data, len, false);
	else
		body_bytes(u, data, len);
	return 0;
}

int e2b_files_upload(struct http_req *r)
{
	struct upload *u = http_state(r);
	if (!u)
		return e2b_error(r, 500, "upload state lost");
	if (u->refused)
		return 0; /* answered at its start */
	if (!u->failed.status && u->gzip)
		inflate_bytes(u, "", 0, true);
	struct cell_error err = {0};
	if (!u->failed.status && u->mp && multipart_finish(u->mp, &err) < 0)
		http_later_fail(&u->failed, 400, "", "%s", err.msg);
	if (!u->failed.status && !u->mp)
		file_end(u);
	if (!u->failed.status && !json_array_size(u->written))
		http_later_fail(&u->failed, 400, "", "no file part in the upload");
	if (u->failed.status)
		return http_later_answer(r, &u->failed);
	json_t *out = u->written;
	u->written = NULL;
	return http_json(r, 200, out);
}
