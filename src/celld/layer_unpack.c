/* One image layer unpacked into a directory of the layer store (cell-security(7), "Image
 * layers"). Two libarchive readers are chained: the outer one only undoes the compression
 * (gzip or zstd by content, or none; raw format) and its read callback hashes the bytes of
 * fd (the blob digest); the inner one is the tar reader, whose read callback pulls the
 * outer's output and hashes it (the diffID). libarchive never writes to disk here: every
 * entry is made by this file, fd-relative below the layer's directory, each component
 * opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV). A hostile entry is refused, never confined (a layer that tries
 * "../x" is broken or an attack, and confining it would hand the sandbox a different tree
 * than its author meant). */
#include "image_lookup.h"
#include "layer_unpack.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <locale.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"

/* What may follow the tar's end (record padding: 10240 bytes by default, up to 1 MiB with
 * a large blocking factor) and what may follow the compressed stream in fd. A gzip bomb of
 * zeros after a tiny tar stops here. */
#define TAIL_MAX (1u << 20)
/* The uncompressed stream may exceed the files' bytes by this much per entry (a ustar
 * header, a pax header and its data) plus TAIL_MAX: beyond that it is headers only (a pax
 * header bomb) and stops at once. */
#define HEADER_SLACK 4096u
#define BUF_SIZE     (128u * 1024)
#define MAX_OWNER    65535
#define OPAQUE_XATTR "trusted.overlay.opaque"

struct dir_time {
	char *path; /* components joined by '/', "" for the layer's root */
	struct timespec ts[2];
};

struct unpack {
	const struct layer_limits *lim;
	struct layer_stats *st;
	struct cell_error *err;
	int fd, rootfd;
	const int *parents;
	size_t n_parents;
	struct archive *outer, *inner;
	EVP_MD_CTX *blob, *diff;
	uint64_t raw_bytes, raw_cap, tar_bytes, tar_cap;
	bool outer_eof;
	int stream_rc; /* a callback's -errno, kept for the message */
	char stream_msg[200];
	const char *entry; /* the entry being made, for messages */
	/* Paths of the non-directory entries made so far: what a hard link may name. */
	char **seen;
	size_t seen_n, seen_cap;
	struct dir_time *dirs; /* directory times, set at the end */
	size_t dirs_n, dirs_cap;
	unsigned char rawbuf[BUF_SIZE], tarbuf[BUF_SIZE];
};

/* An entry's path split into its components ("." dropped). */
struct path {
	char *buf;
	char **comp;
	size_t n;
};

static void path_free(struct path *p)
{
	free(p->buf);
	free(p->comp);
	p->buf = NULL;
	p->comp = NULL;
}

#define _cleanup_path_ __attribute__((cleanup(path_free)))

/* s as printable ASCII for a message: other bytes, quotes and backslashes as \xHH; a long
 * one cut with "...". */
static const char *esc(const char *s, char *out, size_t size)
{
	size_t o = 0;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (o + 8 >= size) {
			memcpy(out + o, "...", 4);
			return out;
		}
		if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, size - o, "\\x%02x", c);
	}
	out[o] = '\0';
	return out;
}

static int vfail(struct unpack *u, int code, bool with_errno, const char *fmt, va_list ap)
{
	char why[300], name[200];
	vsnprintf(why, sizeof(why), fmt, ap);
	if (!u->entry)
		return with_errno ? cell_err(u->err, code, "%s", why)
				  : cell_err_msg(u->err, code, "%s", why);
	esc(u->entry, name, sizeof(name));
	if (with_errno)
		return cell_err(u->err, code, "entry '%s': %s", name, why);
	return cell_err_msg(u->err, code, "entry '%s': %s", name, why);
}

/* A refused or malformed entry (-EINVAL) or a bound passed (-EFBIG): -code. */
static int fail(struct unpack *u, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct unpack *u, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfail(u, code, false, fmt, ap);
	va_end(ap);
	return r;
}

#define refuse(u, ...) fail(u, EINVAL, __VA_ARGS__)
#define bound(u, ...)  fail(u, EFBIG, __VA_ARGS__)

/* A system call failed: -errnum, its strerror appended. */
static int sysfail(struct unpack *u, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int sysfail(struct unpack *u, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfail(u, errnum ? errnum : EIO, true, fmt, ap);
	va_end(ap);
	return r;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* ---- the stream ------------------------------------------------------------------------ */

static void stream_fail(struct unpack *u, struct archive *a, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void stream_fail(struct unpack *u, struct archive *a, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(u->stream_msg, sizeof(u->stream_msg), fmt, ap);
	va_end(ap);
	u->stream_rc = rc;
	archive_set_error(a, -rc, "%s", u->stream_msg);
}

/* n bytes of a stream read into data: counted against cap, hashed, handed to libarchive. */
static la_ssize_t counted(struct unpack *u, struct archive *a, EVP_MD_CTX *md, uint64_t *total,
			  uint64_t cap, const char *what, const unsigned char *data, ssize_t n,
			  const void **buf)
{
	*total += (uint64_t)n;
	if (*total > cap) {
		stream_fail(u, a, -EFBIG, "the %s layer is over %llu bytes", what,
			    (unsigned long long)cap);
		return -1;
	}
	EVP_DigestUpdate(md, data, (size_t)n);
	*buf = data;
	return n;
}

/* The outer reader's source: fd, hashed as read (the blob digest). */
static la_ssize_t raw_read(struct archive *a, void *cls, const void **buf)
{
	struct unpack *u = cls;
	ssize_t n;
	do
		n = read(u->fd, u->rawbuf, sizeof(u->rawbuf));
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		stream_fail(u, a, -errno, "reading the layer: %s", strerror(errno));
		return -1;
	}
	return counted(u, a, u->blob, &u->raw_bytes, u->raw_cap, "compressed", u->rawbuf, n, buf);
}

/* The inner (tar) reader's source: the outer's output, hashed as read (the diffID). */
static la_ssize_t tar_read(struct archive *a, void *cls, const void **buf)
{
	struct unpack *u = cls;
	if (u->outer_eof)
		return 0;
	la_ssize_t n = archive_read_data(u->outer, u->tarbuf, sizeof(u->tarbuf));
	if (n < 0) {
		if (!u->stream_rc)
			stream_fail(u, a, -EINVAL, "the layer's compressed stream: %s",
				    archive_error_string(u->outer));
		else
			archive_set_error(a, -u->stream_rc, "%s", u->stream_msg);
		return -1;
	}
	if (n == 0) {
		u->outer_eof = true;
		return 0;
	}
	return counted(u, a, u->diff, &u->tar_bytes, u->tar_cap, "uncompressed", u->tarbuf, n, buf);
}

/* An error of a reader: the callback's when it set one, else libarchive's (malformed). */
static int stream_error(struct unpack *u, struct archive *a)
{
	if (u->stream_rc)
		return fail(u, -u->stream_rc, "%s", u->stream_msg);
	const char *msg = archive_error_string(a);
	return refuse(u, "%s", msg ? msg : "unreadable");
}

static int open_readers(struct unpack *u)
{
	u->outer = archive_read_new();
	u->inner = archive_read_new();
	if (!u->outer || !u->inner)
		return cell_err(u->err, ENOMEM, "starting the layer's readers");
	/* ARCHIVE_WARN here means libarchive would run an external program: never. */
	if (archive_read_support_filter_gzip(u->outer) != ARCHIVE_OK ||
	    archive_read_support_filter_zstd(u->outer) != ARCHIVE_OK)
		return cell_err_msg(u->err, ENOTSUP,
				    "libarchive has no built-in gzip or zstd decompression");
	if (archive_read_support_format_raw(u->outer) != ARCHIVE_OK ||
	    archive_read_support_format_tar(u->inner) != ARCHIVE_OK)
		return cell_err_msg(u->err, ENOTSUP, "libarchive: %s",
				    archive_error_string(u->outer));
	if (archive_read_open(u->outer, u, NULL, raw_read, NULL) != ARCHIVE_OK) {
		const char *msg = archive_error_string(u->outer);
		return u->stream_rc ? stream_error(u, u->outer)
				    : refuse(u, "not a tar layer: %s", msg ? msg : "unreadable");
	}
	struct archive_entry *e;
	int r = archive_read_next_header(u->outer, &e);
	if (r == ARCHIVE_EOF)
		return refuse(u, "not a tar layer: empty");
	if (r != ARCHIVE_OK)
		return stream_error(u, u->outer);
	if (archive_read_open(u->inner, u, NULL, tar_read, NULL) != ARCHIVE_OK) {
		const char *msg = archive_error_string(u->inner);
		return u->stream_rc ? stream_error(u, u->inner)
				    : refuse(u, "not a tar layer: %s", msg ? msg : "unreadable");
	}
	return 0;
}

/* After the tar's end: the rest of the uncompressed stream, then of fd, hashed (the
 * digests are of every byte), each at most TAIL_MAX. */
static int drain(struct unpack *u)
{
	uint64_t end = u->tar_bytes;
	const void *buf;
	la_ssize_t n;
	while ((n = tar_read(u->inner, u, &buf)) > 0)
		if (u->tar_bytes - end > TAIL_MAX)
			return bound(u, "more than %u bytes after the end of the tar", TAIL_MAX);
	if (n < 0)
		return stream_error(u, u->inner);
	end = u->raw_bytes;
	while ((n = raw_read(u->outer, u, &buf)) > 0)
		if (u->raw_bytes - end > TAIL_MAX)
			return bound(u, "more than %u bytes after the end of the compressed stream",
				     TAIL_MAX);
	return n < 0 ? stream_error(u, u->outer) : 0;
}

static void digest_hex(EVP_MD_CTX *ctx, char out[72])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	EVP_DigestFinal_ex(ctx, md, &len);
	int o = snprintf(out, 72, "sha256:");
	for (unsigned i = 0; i < len && o + 2 < 72; i++)
		o += snprintf(out + o, 72 - (size_t)o, "%02x", md[i]);
}

/* ---- paths ----------------------------------------------------------------------------- */

/* Splits raw into p: absolute paths, "..", empty components, names over NAME_MAX and more
 * than max_depth components are refused ("." is dropped, one trailing '/' allowed). what
 * names the path in a message ("" for the entry's own). */
static int path_parse(struct unpack *u, const char *raw, const char *what, struct path *p)
{
	char name[200];
	size_t len = strlen(raw);
	if (len == 0)
		return refuse(u, "%san empty path", what);
	if (raw[0] == '/')
		return refuse(u, "%san absolute path", what);
	p->buf = strdup(raw);
	p->comp = calloc(len / 2 + 2, sizeof(*p->comp));
	p->n = 0;
	if (!p->buf || !p->comp)
		return cell_err(u->err, ENOMEM, "splitting a path");
	if (len > 1 && p->buf[len - 1] == '/')
		p->buf[--len] = '\0';
	char *s = p->buf;
	for (;;) {
		char *slash = strchr(s, '/');
		if (slash)
			*slash = '\0';
		if (!*s)
			return refuse(u, "%san empty path component", what);
		if (!strcmp(s, ".."))
			return refuse(u, "%s'..' in the path", what);
		if (strlen(s) > NAME_MAX)
			return refuse(u, "%sa name over %d bytes ('%.40s...')", what, NAME_MAX,
				      esc(s, name, sizeof(name)));
		if (strcmp(s, ".")) {
			if (p->n >= u->lim->max_depth)
				return refuse(u, "%smore than %u path components", what,
					      u->lim->max_depth);
			p->comp[p->n++] = s;
		}
		if (!slash)
			break;
		s = slash + 1;
	}
	return 0;
}

/* The components [0, n) joined by '/' (malloc'd; "" for none). */
static char *path_join(const struct path *p, size_t n)
{
	size_t len = 1;
	for (size_t i = 0; i < n; i++)
		len += strlen(p->comp[i]) + 1;
	char *out = malloc(len), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++)
		o += sprintf(o, "%s%s", i ? "/" : "", p->comp[i]);
	*o = '\0';
	return out;
}

static int open_beneath(int dirfd, const char *name, int flags)
{
	struct open_how how = {
	    .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
	    .resolve =
		RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	int fd;
	do
		fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
	while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : fd;
}

/* The set of paths a hard link may name: open addressing, FNV-1a, at most half full. */
static size_t seen_slot(char **table, size_t cap, const char *path)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *c = path; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ull;
	size_t i = (size_t)h & (cap - 1);
	while (table[i] && strcmp(table[i], path))
		i = (i + 1) & (cap - 1);
	return i;
}

static bool seen_has(struct unpack *u, const char *path)
{
	return u->seen_cap && u->seen[seen_slot(u->seen, u->seen_cap, path)];
}

static int seen_add(struct unpack *u, const struct path *p)
{
	if ((u->seen_n + 1) * 2 > u->seen_cap) {
		size_t cap = u->seen_cap ? u->seen_cap * 2 : 256;
		char **t = calloc(cap, sizeof(*t));
		if (!t)
			return cell_err(u->err, ENOMEM, "recording an entry");
		for (size_t i = 0; i < u->seen_cap; i++)
			if (u->seen[i])
				t[seen_slot(t, cap, u->seen[i])] = u->seen[i];
		free(u->seen);
		u->seen = t;
		u->seen_cap = cap;
	}
	char *path = path_join(p, p->n);
	if (!path)
		return cell_err(u->err, ENOMEM, "recording an entry");
	size_t i = seen_slot(u->seen, u->seen_cap, path);
	if (u->seen[i]) {
		free(path);
		return 0;
	}
	u->seen[i] = path;
	u->seen_n++;
	return 0;
}

static int dir_time_add(struct unpack *u, const struct path *p, size_t n,
			const struct timespec ts[2])
{
	if (u->dirs_n == u->dirs_cap) {
		size_t cap = u->dirs_cap ? u->dirs_cap * 2 : 64;
		struct dir_time *d = realloc(u->dirs, cap * sizeof(*d));
		if (!d)
			return cell_err(u->err, ENOMEM, "recording a directory");
		u->dirs = d;
		u->dirs_cap = cap;
	}
	if (!(u->dirs[u->dirs_n].path = path_join(p, n)))
		return cell_err(u->err, ENOMEM, "recording a directory");
	memcpy(u->dirs[u->dirs_n].ts, ts, sizeof(u->dirs[0].ts));
	u->dirs_n++;
	return 0;
}

/* Why openat2 refused component i of p below dirfd: a refusal naming the prefix. */
static int walk_refusal(struct unpack *u, int dirfd, const struct path *p, size_t i, int rc,
			const char *what)
{
	_cleanup_free_ char *prefix = path_join(p, i + 1);
	char name[200];
	esc(prefix ? prefix : "?", name, sizeof(name));
	struct stat sb;
	if (rc == -ELOOP ||
	    (rc == -ENOTDIR && !fstatat(dirfd, p->comp[i], &sb, AT_SYMLINK_NOFOLLOW) &&
	     S_ISLNK(sb.st_mode)))
		return refuse(u, "%sthrough the symlink '%s'", what, name);
	if (rc == -ENOTDIR)
		return refuse(u, "%sthrough '%s', not a directory", what, name);
	if (rc == -EXDEV)
		return refuse(u, "%sthrough the mount point '%s'", what, name);
	return sysfail(u, -rc, "%sopening '%s'", what, name);
}

static int implied_dir(struct unpack *u, int dirfd, const struct path *p, size_t n);

/* Opens the directory of the first n components of p below the layer's root, making the
 * missing ones when make (implied directories). */
static int walk(struct unpack *u, const struct path *p, size_t n, bool make, const char *what,
		int *out)
{
	_cleanup_close_ int cur = fcntl(u->rootfd, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return sysfail(u, errno, "duplicating the layer's directory");
	for (size_t i = 0; i < n; i++) {
		int next = open_beneath(cur, p->comp[i], O_RDONLY | O_DIRECTORY);
		if (next == -ENOENT && make) {
			if (mkdirat(cur, p->comp[i], 0700) < 0)
				return sysfail(u, errno, "making its directory '%s'", p->comp[i]);
			next = open_beneath(cur, p->comp[i], O_RDONLY | O_DIRECTORY);
			if (next >= 0) {
				int r = implied_dir(u, next, p, i + 1);
				if (r < 0) {
					close(next);
					return r;
				}
			}
		}
		if (next < 0)
			return walk_refusal(u, cur, p, i, next, what);
		close(cur);
		cur = next;
	}
	*out = move_fd(cur);
	return 0;
}

/* The first parent layer's directory at p[0, n): 1 with *sb filled, 0 when none shows (a
 * whiteout, a file or an opaque directory above it, or no layer has it). */
static int parent_dir(struct unpack *u, const struct path *p, size_t n, struct stat *sb)
{
	for (size_t l = 0; l < u->n_parents; l++) {
		_cleanup_close_ int cur = fcntl(u->parents[l], F_DUPFD_CLOEXEC, 3);
		if (cur < 0)
			return sysfail(u, errno, "duplicating a parent layer's directory");
		bool opaque = false;
		size_t i;
		for (i = 0; i < n; i++) {
			int next = open_beneath(cur, p->comp[i], O_RDONLY | O_DIRECTORY);
			if (next == -ENOENT)
				break;
			if (next == -ENOTDIR || next == -ELOOP || next == -EXDEV)
				return 0; /* a whiteout, a file or a symlink hides the layers below
					   */
			if (next < 0)
				return sysfail(u, -next, "looking up '%s' in a parent layer",
					       p->comp[i]);
			close(cur);
			cur = next;
			if (i + 1 < n && layer_dir_opaque(cur))
				opaque = true;
		}
		if (i == n) {
			if (fstat(cur, sb) < 0)
				return sysfail(u, errno, "looking up a parent layer's directory");
			return 1;
		}
		if (opaque)
			return 0;
	}
	return 0;
}

/* A directory made because an entry below it needs it: owner, mode and times of the layers
 * below it, else root's 0755. */
static int implied_dir(struct unpack *u, int dirfd, const struct path *p, size_t n)
{
	struct stat sb = {.st_mode = S_IFDIR | 0755};
	int found = parent_dir(u, p, n, &sb);
	if (found < 0)
		return found;
	if (fchown(dirfd, sb.st_uid, sb.st_gid) < 0 || fchmod(dirfd, sb.st_mode & 07777) < 0)
		return sysfail(u, errno, "setting its implied directory's owner and mode");
	u->st->dirs++;
	if (!found)
		return 0;
	struct timespec ts[2] = {sb.st_atim, sb.st_mtim};
	return dir_time_add(u, p, n, ts);
}

/* Makes room for a new entry at dirfd/name: 1 when a directory stays (dir over dir), 0
 * when nothing is there (any earlier entry removed). */
static int make_room(struct unpack *u, int dirfd, const char *name, bool dir)
{
	struct stat sb;
	if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : sysfail(u, errno, "looking at an earlier entry");
	if (dir && S_ISDIR(sb.st_mode))
		return 1;
	int r = layer_remove_all(dirfd, name, u->err);
	return r < 0 ? cell_err_wrap(u->err, "replacing an earlier entry: ") : 0;
}

/* ---- metadata -------------------------------------------------------------------------- */

enum xattr_rule { XATTR_KEEP, XATTR_CAP, XATTR_DROP, XATTR_REFUSE };

static enum xattr_rule xattr_rule(const char *name)
{
	if (!strncmp(name, "user.", 5))
		return XATTR_KEEP;
	if (!strcmp(name, "security.capability"))
		return XATTR_CAP;
	if (!strncmp(name, "security.", 9) || !strncmp(name, "system.", 7))
		return XATTR_DROP;
	return XATTR_REFUSE; /* trusted.* (overlayfs' own: whiteouts, redirects) and the rest */
}

static uint32_t le32(const unsigned char *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void put_le32(unsigned char *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

/* security.capability of any version as version 3 with rootid 0: root of whatever user
 * namespace the layer is mounted for, never a host uid. Another rootid is refused. */
static int cap_v3(struct unpack *u, const void *value, size_t size, unsigned char out[24])
{
	const unsigned char *v = value;
	if (size < 4)
		return refuse(u, "a malformed security.capability");
	uint32_t magic = le32(v), rev = magic & VFS_CAP_REVISION_MASK;
	if ((magic & VFS_CAP_FLAGS_MASK & ~VFS_CAP_FLAGS_EFFECTIVE) ||
	    !((rev == VFS_CAP_REVISION_1 && size == XATTR_CAPS_SZ_1) ||
	      (rev == VFS_CAP_REVISION_2 && size == XATTR_CAPS_SZ_2) ||
	      (rev == VFS_CAP_REVISION_3 && size == XATTR_CAPS_SZ_3)))
		return refuse(u, "a malformed security.capability");
	if (rev == VFS_CAP_REVISION_3 && le32(v + 20))
		return refuse(u, "a security.capability of rootid %u, not 0", le32(v + 20));
	memset(out, 0, 24);
	put_le32(out, VFS_CAP_REVISION_3 | (magic & VFS_CAP_FLAGS_EFFECTIVE));
	memcpy(out + 4, v + 4, rev == VFS_CAP_REVISION_1 ? 8 : 16);
	return 0;
}

/* Checks every xattr of e before anything is made (a refused one refuses the entry). */
static int xattrs_check(struct unpack *u, struct archive_entry *e)
{
	const char *name;
	const void *value;
	size_t size;
	unsigned char cap[24];
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
		char n[120];
		enum xattr_rule rule = xattr_rule(name);
		if (rule == XATTR_REFUSE)
			return refuse(u, "the xattr '%s'", esc(name, n, sizeof(n)));
		if (rule == XATTR_CAP && cap_v3(u, value, size, cap) < 0)
			return -EINVAL;
	}
	return 0;
}

/* user.* on files and directories, security.capability on files; fd < 0: none at all.
 * libarchive's pax writer stores each xattr twice (LIBARCHIVE.xattr. and SCHILY.xattr.),
 * and its reader returns both: a name is counted once. */
static int xattrs_set(struct unpack *u, int fd, struct archive_entry *e, mode_t type)
{
	const char *name;
	const void *value;
	size_t size;
	_cleanup_free_ const char **dropped = NULL;
	size_t n_dropped = 0;
	int n = archive_entry_xattr_reset(e);
	if (n > 0 && !(dropped = calloc((size_t)n, sizeof(*dropped))))
		return cell_err(u->err, ENOMEM, "reading its xattrs");
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
		enum xattr_rule rule = xattr_rule(name);
		bool keep =
		    fd >= 0 && ((rule == XATTR_KEEP && (type == S_IFREG || type == S_IFDIR)) ||
				(rule == XATTR_CAP && type == S_IFREG));
		if (!keep) {
			size_t i = 0;
			while (i < n_dropped && strcmp(dropped[i], name))
				i++;
			if (i == n_dropped && n_dropped < (size_t)n) {
				dropped[n_dropped++] = name;
				u->st->xattrs_dropped++;
			}
			continue;
		}
		unsigned char cap[24];
		if (rule == XATTR_CAP) {
			if (cap_v3(u, value, size, cap) < 0)
				return -EINVAL;
			value = cap;
			size = sizeof(cap);
		}
		if (fsetxattr(fd, name, value, size, 0) < 0) {
			char what[120];
			return sysfail(u, errno, "setting the xattr '%s'",
				       esc(name, what, sizeof(what)));
		}
	}
	if (archive_entry_acl_types(e))
		u->st->xattrs_dropped++; /* POSIX ACLs: system.posix_acl_*, dropped */
	return 0;
}

static void entry_times(struct archive_entry *e, struct timespec ts[2])
{
	ts[1] = (struct timespec){archive_entry_mtime(e), archive_entry_mtime_nsec(e)};
	ts[0] = archive_entry_atime_is_set(e)
		    ? (struct timespec){archive_entry_atime(e), archive_entry_atime_nsec(e)}
		    : ts[1];
}

/* Owner, mode, xattrs, times, in that order (a chown clears set-id bits and file
 * capabilities). A directory's times are set at the end, when nothing is made in it. */
static int metadata(struct unpack *u, int fd, struct archive_entry *e, const struct path *p,
		    mode_t type)
{
	if (fchown(fd, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e)) < 0)
		return sysfail(u, errno, "setting its owner");
	if (fchmod(fd, archive_entry_perm(e) & 07777) < 0)
		return sysfail(u, errno, "setting its mode");
	int r = xattrs_set(u, fd, e, type);
	if (r < 0)
		return r;
	struct timespec ts[2];
	entry_times(e, ts);
	if (type == S_IFDIR)
		return dir_time_add(u, p, p->n, ts);
	if (futimens(fd, ts) < 0)
		return sysfail(u, errno, "setting its times");
	return 0;
}

/* ---- entries --------------------------------------------------------------------------- */

static int write_file(struct unpack *u, int dirfd, const char *name, struct archive_entry *e,
		      const struct path *p)
{
	uint64_t size = (uint64_t)archive_entry_size(e);
	int r = make_room(u, dirfd, name, false);
	if (r < 0)
		return r;
	_cleanup_close_ int fd =
	    openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sysfail(u, errno, "creating it");
	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		r = archive_read_data_block(u->inner, &buf, &len, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK)
			return stream_error(u, u->inner);
		if (off < 0 || (uint64_t)off > size || len > size - (uint64_t)off)
			return refuse(u, "data beyond its size");
		/* Sparse entries come as blocks at their offsets: the holes stay holes. */
		for (size_t done = 0; done < len;) {
			ssize_t n = pwrite(fd, (const char *)buf + done, len - done,
					   (off_t)((uint64_t)off + done));
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return sysfail(u, errno, "writing it");
			done += (size_t)n;
		}
	}
	if (ftruncate(fd, (off_t)size) < 0)
		return sysfail(u, errno, "setting its size");
	if ((r = metadata(u, fd, e, p, S_IFREG)) < 0)
		return r;
	u->st->files++;
	u->st->bytes += size;
	return seen_add(u, p);
}

/* A directory (one already there stays: its metadata is updated) or a fifo. */
static int make_dir_or_fifo(struct unpack *u, int dirfd, const char *name, struct archive_entry *e,
			    const struct path *p, mode_t type)
{
	bool dir = type == S_IFDIR;
	int r = make_room(u, dirfd, name, dir);
	if (r < 0)
		return r;
	if (r == 0 && (dir ? mkdirat(dirfd, name, 0700) : mkfifoat(dirfd, name, 0600)) < 0)
		return sysfail(u, errno, "making it");
	/* O_NONBLOCK: a fifo opens for reading without a writer. */
	_cleanup_close_ int fd =
	    open_beneath(dirfd, name, O_RDONLY | (dir ? O_DIRECTORY : O_NONBLOCK));
	if (fd < 0)
		return sysfail(u, -fd, "opening it");
	if ((r = metadata(u, fd, e, p, type)) < 0)
		return r;
	if (dir)
		u->st->dirs++;
	else
		u->st->fifos++;
	return dir ? 0 : seen_add(u, p);
}

static int make_symlink(struct unpack *u, int dirfd, const char *name, struct archive_entry *e,
			const struct path *p)
{
	/* The target is kept as given: it is resolved inside the sandbox's root, never here. */
	const char *target = archive_entry_symlink(e);
	if (!target || !*target)
		return refuse(u, "a symlink without a target");
	int r = make_room(u, dirfd, name, false);
	if (r < 0)
		return r;
	if (symlinkat(target, dirfd, name) < 0)
		return sysfail(u, errno, "making the symlink");
	if (fchownat(dirfd, name, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e),
		     AT_SYMLINK_NOFOLLOW) < 0)
		return sysfail(u, errno, "setting its owner");
	if ((r = xattrs_set(u, -1, e, S_IFLNK)) < 0)
		return r;
	struct timespec ts[2];
	entry_times(e, ts);
	if (utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return sysfail(u, errno, "setting its times");
	u->st->symlinks++;
	return seen_add(u, p);
}

/* An overlayfs whiteout (a 0/0 character device, root's) at dirfd/name. */
static int make_whiteout(struct unpack *u, int dirfd, const char *name)
{
	int r = make_room(u, dirfd, name, false);
	if (r < 0)
		return r;
	if (mknodat(dirfd, name, S_IFCHR, makedev(0, 0)) < 0)
		return sysfail(u, errno, "making the whiteout");
	u->st->whiteouts++;
	return 0;
}

/* A hard link, to an earlier entry of this layer only. */
static int make_link(struct unpack *u, int dirfd, const char *name, struct archive_entry *e,
		     const struct path *p)
{
	const char *raw = archive_entry_hardlink(e);
	char what[240], t[200];
	snprintf(what, sizeof(what), "hard link to '%s': ", esc(raw, t, sizeof(t)));
	_cleanup_path_ struct path tp = {0};
	int r = path_parse(u, raw, what, &tp);
	if (r < 0)
		return r;
	_cleanup_free_ char *joined = path_join(&tp, tp.n);
	if (!joined)
		return cell_err(u->err, ENOMEM, "joining a path");
	if (tp.n == 0 || !seen_has(u, joined))
		return refuse(u, "%snot an earlier entry of this layer", what);
	_cleanup_close_ int tdir = -1;
	if ((r = walk(u, &tp, tp.n - 1, false, what, &tdir)) < 0)
		return r;
	const char *tname = tp.comp[tp.n - 1];
	struct stat sb;
	if (fstatat(tdir, tname, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? refuse(u, "%sreplaced since", what)
				       : sysfail(u, errno, "%slooking at it", what);
	if (S_ISDIR(sb.st_mode))
		return refuse(u, "%sa directory", what);
	if ((r = make_room(u, dirfd, name, false)) < 0)
		return r;
	if (linkat(tdir, tname, dirfd, name, 0) < 0)
		return sysfail(u, errno, "%slinking", what);
	u->st->links++;
	return seen_add(u, p);
}

static int entry(struct unpack *u, struct archive_entry *e, struct path *p)
{
	const char *raw = archive_entry_pathname(e);
	u->entry = raw ? raw : "?";
	if (!raw)
		return refuse(u, "no path");
	if (++u->st->entries > u->lim->max_entries)
		return bound(u, "more than %llu entries", (unsigned long long)u->lim->max_entries);
	int r = path_parse(u, raw, "", p);
	if (r < 0)
		return r;
	la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
	if (uid < 0 || uid > MAX_OWNER || gid < 0 || gid > MAX_OWNER)
		return refuse(u, "owner %lld:%lld, beyond 0..%d", (long long)uid, (long long)gid,
			      MAX_OWNER);
	for (size_t i = 0; i + 1 < p->n; i++)
		if (!strncmp(p->comp[i], ".wh.", 4))
			return refuse(u, "a whiteout as a directory");

	const char *hardlink = archive_entry_hardlink(e);
	mode_t type = archive_entry_filetype(e);
	const char *base = p->n ? p->comp[p->n - 1] : "";
	bool wh = !strncmp(base, ".wh.", 4);
	enum { K_FILE, K_DIR, K_SYMLINK, K_LINK, K_FIFO, K_WHITEOUT, K_WH_NAME, K_OPAQUE } kind;
	if (wh && !strcmp(base, ".wh..wh..opq"))
		kind = K_OPAQUE;
	else if (wh && !strncmp(base, ".wh..wh.", 8))
		return refuse(u, "an unknown whiteout kind");
	else if (wh) {
		if (!base[4] || !strcmp(base + 4, ".") || !strcmp(base + 4, ".."))
			return refuse(u, "a whiteout without a name");
		kind = K_WH_NAME;
	} else if (hardlink)
		kind = K_LINK;
	else if (type == AE_IFREG)
		kind = K_FILE;
	else if (type == AE_IFDIR)
		kind = K_DIR;
	else if (type == AE_IFLNK)
		kind = K_SYMLINK;
	else if (type == AE_IFIFO)
		kind = K_FIFO;
	else if (type == AE_IFCHR && archive_entry_rdevmajor(e) == 0 &&
		 archive_entry_rdevminor(e) == 0)
		kind = K_WHITEOUT;
	else if (type == AE_IFCHR || type == AE_IFBLK)
		return refuse(u, "a device node (%u:%u)", (unsigned)archive_entry_rdevmajor(e),
			      (unsigned)archive_entry_rdevminor(e));
	else if (type == AE_IFSOCK)
		return refuse(u, "a socket");
	else
		return refuse(u, "an entry of unknown type 0%o", (unsigned)type);

	/* Bounds on the header, before any of its data is read. */
	if (kind == K_FILE) {
		la_int64_t size = archive_entry_size(e);
		if (size < 0)
			return refuse(u, "a negative size");
		if ((uint64_t)size > u->lim->max_file_bytes)
			return bound(u, "%lld bytes, over the %llu of a file", (long long)size,
				     (unsigned long long)u->lim->max_file_bytes);
		if (add_sat(u->st->bytes, (uint64_t)size) > u->lim->max_bytes)
			return bound(u, "the layer's files over %llu bytes",
				     (unsigned long long)u->lim->max_bytes);
	}
	if ((r = xattrs_check(u, e)) < 0)
		return r;
	if (p->n == 0 && kind != K_DIR)
		return refuse(u, "the layer's root as a non-directory");

	_cleanup_close_ int dirfd = -1;
	if ((r = walk(u, p, p->n ? p->n - 1 : 0, true, "", &dirfd)) < 0)
		return r;
	switch (kind) {
	case K_FILE:
		return write_file(u, dirfd, base, e, p);
	case K_DIR:
		/* The layer's root ("./") is the store's directory, left as the store made it:
		 * overlayfs shows the sandbox's own upper root over it anyway. */
		if (p->n == 0) {
			u->st->dirs++;
			return 0;
		}
		return make_dir_or_fifo(u, dirfd, base, e, p, S_IFDIR);
	case K_SYMLINK:
		return make_symlink(u, dirfd, base, e, p);
	case K_LINK:
		return make_link(u, dirfd, base, e, p);
	case K_FIFO:
		return make_dir_or_fifo(u, dirfd, base, e, p, S_IFIFO);
	case K_WHITEOUT:
		return make_whiteout(u, dirfd, base);
	case K_WH_NAME:
		return make_whiteout(u, dirfd, base + 4);
	case K_OPAQUE:
		if (fsetxattr(dirfd, OPAQUE_XATTR, "y", 1, 0) < 0)
			return sysfail(u, errno, "marking its directory opaque");
		u->st->whiteouts++;
		return 0;
	}
	return 0;
}

/* Every directory's times, now that nothing more is made in them (in entry order: a later
 * entry's win). One replaced since by something else is gone: nothing to set. */
static int set_dir_times(struct unpack *u)
{
	for (size_t i = 0; i < u->dirs_n; i++) {
		u->entry = u->dirs[i].path;
		_cleanup_close_ int fd = fcntl(u->rootfd, F_DUPFD_CLOEXEC, 3);
		if (fd < 0)
			return sysfail(u, errno, "duplicating the layer's directory");
		_cleanup_free_ char *copy = strdup(u->dirs[i].path);
		if (!copy)
			return cell_err(u->err, ENOMEM, "setting a directory's times");
		char *save = NULL;
		for (char *c = strtok_r(copy, "/", &save); c && fd >= 0;
		     c = strtok_r(NULL, "/", &save)) {
			int next = open_beneath(fd, c, O_RDONLY | O_DIRECTORY);
			if (next < 0 && next != -ENOENT && next != -ENOTDIR)
				return sysfail(u, -next, "opening it to set its times");
			close(fd);
			fd = next;
		}
		if (fd >= 0 && futimens(fd, u->dirs[i].ts) < 0)
			return sysfail(u, errno, "setting its times");
	}
	return 0;
}

static int run(struct unpack *u)
{
	int r = open_readers(u);
	if (r < 0)
		return r;
	for (;;) {
		struct archive_entry *e;
		u->entry = NULL;
		r = archive_read_next_header(u->inner, &e);
		if (r == ARCHIVE_EOF)
			break;
		/* ARCHIVE_WARN: e.g. an owner's name not convertible; the entry's path is
		 * checked below like any other. */
		if (r < ARCHIVE_WARN)
			return stream_error(u, u->inner);
		_cleanup_path_ struct path p = {0};
		r = entry(u, e, &p);
		if (r < 0)
			return r;
	}
	u->entry = NULL;
	if ((r = drain(u)) < 0)
		return r;
	return set_dir_times(u);
}

int layer_unpack_over(int fd, int dirfd, const int *parents, size_t n_parents,
		      const struct layer_limits *lim, struct layer_stats *st,
		      struct cell_error *err)
{
	*st = (struct layer_stats){0};
	struct unpack *u = calloc(1, sizeof(*u));
	if (!u)
		return cell_err(err, ENOMEM, "unpacking a layer");
	*u = (struct unpack){.lim = lim,
			     .st = st,
			     .err = err,
			     .fd = fd,
			     .rootfd = dirfd,
			     .parents = parents,
			     .n_parents = n_parents};
	/* Bounds of the streams: the files' bytes, their headers, the tails. */
	u->tar_cap =
	    add_sat(add_sat(lim->max_bytes, mul_sat(lim->max_entries, HEADER_SLACK)), TAIL_MAX);
	u->raw_cap = add_sat(add_sat(u->tar_cap, u->tar_cap / 64), TAIL_MAX);
	/* pax names are UTF-8: libarchive converts them to the thread's locale, and celld's is
	 * C, so the call runs in C.UTF-8 (the bytes then pass unchanged). */
	locale_t utf8 = newlocale(LC_ALL_MASK, "C.UTF-8", (locale_t)0);
	if (!utf8) {
		free(u);
		return cell_err(err, errno, "no C.UTF-8 locale for the layer's names");
	}
	locale_t old = uselocale(utf8);
	int r;
	u->blob = EVP_MD_CTX_new();
	u->diff = EVP_MD_CTX_new();
	if (!u->blob || !u->diff || !EVP_DigestInit_ex(u->blob, EVP_sha256(), NULL) ||
	    !EVP_DigestInit_ex(u->diff, EVP_sha256(), NULL))
		r = cell_err(err, ENOMEM, "starting the layer's digests");
	else
		r = run(u);
	if (r == 0) {
		digest_hex(u->blob, st->blob_digest);
		digest_hex(u->diff, st->diff_id);
	}
	if (u->inner)
		archive_read_free(u->inner);
	if (u->outer)
		archive_read_free(u->outer);
	EVP_MD_CTX_free(u->blob);
	EVP_MD_CTX_free(u->diff);
	for (size_t i = 0; i < u->seen_cap; i++)
		free(u->seen[i]);
	free(u->seen);
	for (size_t i = 0; i < u->dirs_n; i++)
		free(u->dirs[i].path);
	free(u->dirs);
	free(u);
	uselocale(old);
	freelocale(utf8);
	return r;
}

int layer_unpack(int fd, int dirfd, const struct layer_limits *lim, struct layer_stats *st,
		 struct cell_error *err)
{
	return layer_unpack_over(fd, dirfd, NULL, 0, lim, st, err);
}

int layer_remove_all(int parentfd, const char *name, struct cell_error *err)
{
	return cell_remove_tree_at(parentfd, name, err);
}
