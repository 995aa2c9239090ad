/* FILE_TAR: a directory (or one regular file) of the sandbox as a POSIX tar stream, made
 * while it is sent (DATA frames, then END; ERROR ends it early).
 *
 * Why written here and not with libarchive: cell-init is linked -static and is PID 1 under
 * the sandbox's seccomp policy. A static libarchive (`pkg-config --static --libs
 * libarchive`: -larchive -lnettle -lacl -llzma -lzstd -llz4 -lbz2 -lz -lxml2, and libxml2
 * pulls ICU) brings compressors and parsers cell-init never uses into PID 1, several of
 * which have no static archive on the build hosts at all; it resolves owner names with
 * getpwuid_r()/getgrgid_r() and converts names with iconv_open(), which in a static glibc
 * means NSS modules and gconv loaded with dlopen() from the sandbox's own /lib: code the
 * sandbox planted, run as PID 1. And its disk reader walks by path name with its own
 * symlink rules, where every step here must be fd-relative (O_NOFOLLOW below the
 * directory, a directory swapped for a symlink never followed) and resumable from the
 * event loop a turn at a time. What the archive needs is small: ustar headers and pax
 * extended headers, below.
 *
 * The walk: the path is resolved confined (RESOLVE_IN_ROOT, as FILE_READ does); below it
 * every entry is opened O_PATH | O_NOFOLLOW relative to its directory's fd and judged on
 * that fd (fstat): a regular file is read through it, a directory entered through it, a
 * symlink archived as a link (readlinkat on the fd), anything else (fifo, socket, device)
 * skipped. A process racing the walk can move things inside the sandbox, never point it
 * outside. Names are relative to the path's base name, in byte order within a directory.
 *
 * Bounds: at most FILES_ENTRIES_MAX entries and FILES_DEPTH_MAX levels below the path. A
 * turn of the event loop produces at most TAR_BYTES_PER_TURN bytes or TAR_ENTRIES_PER_TURN
 * entries, and only while celld keeps the queue below CONN_HIGH_WATER (a slow client
 * slows only its own archive, as FILE_READ does). When a bound is hit mid-stream, or an
 * entry cannot be read, the archive is cut: the bytes so far, then ERROR, never the two
 * zero blocks that end an archive, so a reader sees a truncated archive, never a
 * complete-looking one missing files. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <dirent.h>
#include <unistd.h>

#include "cell/error.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cell/proto.h"
#include "base.h"
#include "conn.h"
#include "files.h"
#include "tar.h"

#define TAR_BLOCK	     512
#define TAR_BYTES_PER_TURN   (1u << 20)
#define TAR_ENTRIES_PER_TURN 256
#define TAR_STREAMS_MAX	     8 /* archives made at once (each holds up to 34 fds) */
/* The longest name an archive holds: the base name and FILES_DEPTH_MAX components. */
#define TAR_NAME_MAX ((FILES_DEPTH_MAX + 2) * (NAME_MAX + 1))
#define PAX_MAX	     (TAR_NAME_MAX + PATH_MAX + 1024)

struct tar_level {
	int fd; /* the directory, O_RDONLY */
	char **names;
	size_t n, next;
	size_t name_len; /* op->name up to and with this directory's '/' */
	dev_t dev;
};

struct tar_op {
	struct tar_level lv[FILES_DEPTH_MAX + 1];
	int depth;   /* levels open */
	int file_fd; /* a regular file being archived, or -1 */
	int64_t file_pos;
	uint64_t file_left, pad_left;
	bool file_shrank;
	unsigned long entries;
	struct files_names pw, gr;
	size_t name_len;
	char name[TAR_NAME_MAX + 2];
	size_t out_len;
	uint8_t out[CELL_FRAME_CHUNK];
	char pax[PAX_MAX]; /* the extended header being made */
	char path[];	   /* as the request named it, for messages */
};

static int streams;

/* ---- output: one staging buffer, sent as DATA frames of CELL_FRAME_CHUNK ---- */

static void out_flush(struct tar_op *op, struct conn *c)
{
	if (!op->out_len)
		return;
	conn_send(c, CELL_FRAME_DATA, op->out, (uint32_t)op->out_len);
	op->out_len = 0;
}

static void out_put(struct tar_op *op, struct conn *c, const void *p, size_t len)
{
	const uint8_t *b = p;
	while (len) {
		size_t room = sizeof(op->out) - op->out_len;
		size_t n = len < room ? len : room;
		if (b)
			memcpy(op->out + op->out_len, b, n);
		else
			memset(op->out + op->out_len, 0, n);
		op->out_len += n;
		len -= n;
		if (b)
			b += n;
		if (op->out_len == sizeof(op->out))
			out_flush(op, c);
	}
}

/* ---- headers ---- */

struct ustar {
	char name[100], mode[8], uid[8], gid[8], size[12], mtime[12], chksum[8], typeflag,
	    linkname[100], magic[6], version[2], uname[32], gname[32], devmajor[8], devminor[8],
	    prefix[155], pad[12];
};
_Static_assert(sizeof(struct ustar) == TAR_BLOCK, "a ustar header is one block");

/* v in octal digits filling the field but its last byte (NUL); false when it does not fit. */
static bool octal(char *field, size_t size, uint64_t v)
{
	if (size - 1 < 22 && v >> (3 * (size - 1)))
		return false;
	snprintf(field, size, "%0*llo", (int)size - 1, (unsigned long long)v);
	return true;
}

/* One pax record, "LEN key=value\n", LEN counting the whole record. */
static void pax_add(char *buf, size_t *len, const char *key, const char *val, size_t vlen)
{
	size_t base = strlen(key) + vlen + 3, n = base;
	for (size_t d = 1;; d++) {
		char tmp[24];
		n = base + d;
		if ((size_t)snprintf(tmp, sizeof(tmp), "%zu", n) == d)
			break;
	}
	if (*len + n > PAX_MAX)
		return; /* cannot happen: PAX_MAX is above every record this file makes */
	int k = snprintf(buf + *len, PAX_MAX - *len, "%zu %s=", n, key);
	memcpy(buf + *len + k, val, vlen);
	buf[*len + k + vlen] = '\n';
	*len += n;
}

static void pax_num(char *buf, size_t *len, const char *key, long long v)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%lld", v);
	pax_add(buf, len, key, num, (size_t)n);
}

static void header_finish(struct ustar *h)
{
	memcpy(h->magic, "ustar", 6);
	memcpy(h->version, "00", 2);
	memset(h->chksum, ' ', sizeof(h->chksum));
	unsigned sum = 0;
	for (size_t i = 0; i < sizeof(*h); i++)
		sum += ((unsigned char *)h)[i];
	snprintf(h->chksum, sizeof(h->chksum), "%06o", sum);
	h->chksum[7] = ' ';
}

static void copy_field(char *field, size_t size, const char *s, size_t len)
{
	memcpy(field, s, len < size ? len : size);
}

/* The header of op->name (with st, typeflag, link target), with a pax extended header
 * before it for what ustar cannot hold: a name or link over 100 bytes, a size of 8 GiB or
 * more, ids over 2097151, an mtime before 1970 or after 2242, owner names over 31 bytes. */
static void put_header(struct tar_op *op, struct conn *c, const struct stat *st, char type,
		       uint64_t size, const char *link, size_t link_len)
{
	struct ustar h = {0};
	char *pax = op->pax;
	size_t pax_len = 0;
	bool need_pax = false;
	const char *un = NULL, *gn = NULL;
	size_t un_len = 0, gn_len = 0;
	un = files_names_find(&op->pw, st->st_uid, &un_len);
	gn = files_names_find(&op->gr, st->st_gid, &gn_len);

	/* Every field is tried (no short cut): the ones that fit are set, the others stay
	 * empty and go to the pax header. */
	need_pax |= !octal(h.size, sizeof(h.size), size);
	need_pax |= !octal(h.uid, sizeof(h.uid), st->st_uid);
	need_pax |= !octal(h.gid, sizeof(h.gid), st->st_gid);
	if (st->st_mtim.tv_sec >= 0)
		need_pax |= !octal(h.mtime, sizeof(h.mtime), (uint64_t)st->st_mtim.tv_sec);
	else
		need_pax = true;
	need_pax |= op->name_len > sizeof(h.name) || link_len > sizeof(h.linkname) ||
		    (un && un_len >= sizeof(h.uname)) || (gn && gn_len >= sizeof(h.gname));
	if (need_pax) {
		if (op->name_len > sizeof(h.name))
			pax_add(pax, &pax_len, "path", op->name, op->name_len);
		if (link_len > sizeof(h.linkname))
			pax_add(pax, &pax_len, "linkpath", link, link_len);
		if (h.size[0] == '\0')
			pax_num(pax, &pax_len, "size", (long long)size);
		if (h.uid[0] == '\0')
			pax_num(pax, &pax_len, "uid", (long long)st->st_uid);
		if (h.gid[0] == '\0')
			pax_num(pax, &pax_len, "gid", (long long)st->st_gid);
		if (h.mtime[0] == '\0')
			pax_num(pax, &pax_len, "mtime", (long long)st->st_mtim.tv_sec);
		if (un && un_len >= sizeof(h.uname))
			pax_add(pax, &pax_len, "uname", un, un_len);
		if (gn && gn_len >= sizeof(h.gname))
			pax_add(pax, &pax_len, "gname", gn, gn_len);
		struct ustar x = {0};
		/* The extended header's own name: ignored by pax readers, kept short. */
		const char *slash = memrchr(op->name, '/', op->name_len > 1 ? op->name_len - 1 : 0);
		const char *base = slash ? slash + 1 : op->name;
		size_t blen = op->name_len - (size_t)(base - op->name);
		memcpy(x.name, "PaxHeaders/", 11);
		copy_field(x.name + 11, sizeof(x.name) - 11, base, blen);
		octal(x.mode, sizeof(x.mode), 0644);
		octal(x.uid, sizeof(x.uid), 0);
		octal(x.gid, sizeof(x.gid), 0);
		octal(x.size, sizeof(x.size), pax_len);
		octal(x.mtime, sizeof(x.mtime), 0);
		x.typeflag = 'x';
		header_finish(&x);
		out_put(op, c, &x, sizeof(x));
		out_put(op, c, pax, pax_len);
		out_put(op, c, NULL, (TAR_BLOCK - pax_len % TAR_BLOCK) % TAR_BLOCK);
	}
	/* What did not fit is in the pax header; ustar's fields get a truncated copy or 0. */
	copy_field(h.name, sizeof(h.name), op->name, op->name_len);
	if (link)
		copy_field(h.linkname, sizeof(h.linkname), link, link_len);
	octal(h.mode, sizeof(h.mode), st->st_mode & 07777);
	if (h.size[0] == '\0')
		octal(h.size, sizeof(h.size), 0);
	if (h.uid[0] == '\0')
		octal(h.uid, sizeof(h.uid), 0);
	if (h.gid[0] == '\0')
		octal(h.gid, sizeof(h.gid), 0);
	if (h.mtime[0] == '\0')
		octal(h.mtime, sizeof(h.mtime), 0);
	if (un)
		copy_field(h.uname, sizeof(h.uname) - 1, un, un_len);
	if (gn)
		copy_field(h.gname, sizeof(h.gname) - 1, gn, gn_len);
	h.typeflag = type;
	header_finish(&h);
	out_put(op, c, &h, sizeof(h));
}

/* ---- the walk ---- */

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void level_close(struct tar_level *lv)
{
	if (lv->fd >= 0)
		close(lv->fd);
	lv->fd = -1;
	for (size_t i = 0; i < lv->n; i++)
		free(lv->names[i]);
	free(lv->names);
	lv->names = NULL;
	lv->n = lv->next = 0;
}

/* Enter the directory open on fd (taken) whose archive name, with its '/', is op->name:
 * its names, sorted, become the next level. */
static int level_push(struct tar_op *op, int fd, struct cell_error *err)
{
	struct tar_level *lv = &op->lv[op->depth];
	*lv = (struct tar_level){.fd = fd, .name_len = op->name_len};
	struct stat st = {0};
	int dfd = fstat(fd, &st) < 0 ? -1 : dup(fd);
	lv->dev = st.st_dev;
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		level_close(lv);
		return cell_err(err, errno, "reading %s/.../%.*s", op->path, (int)op->name_len,
				op->name);
	}
	size_t cap = 0;
	int r = 0;
	struct dirent *de;
	while (r == 0 && (errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (op->depth >= FILES_DEPTH_MAX) {
			r = cell_err(err, EFBIG, "archiving %s: deeper than %d levels", op->path,
				     FILES_DEPTH_MAX);
			break;
		}
		if (++op->entries > FILES_ENTRIES_MAX) {
			r = cell_err(err, EFBIG, "archiving %s: more than %d entries", op->path,
				     FILES_ENTRIES_MAX);
			break;
		}
		if (lv->n == cap) {
			size_t ncap = cap ? cap * 2 : 32;
			char **nn = realloc(lv->names, ncap * sizeof(*nn));
			if (!nn) {
				r = cell_err(err, ENOMEM, "archiving %s", op->path);
				break;
			}
			lv->names = nn;
			cap = ncap;
		}
		if (!(lv->names[lv->n] = strdup(de->d_name)))
			r = cell_err(err, ENOMEM, "archiving %s", op->path);
		else
			lv->n++;
	}
	if (r == 0 && errno)
		r = cell_err(err, errno, "reading a directory below %s", op->path);
	closedir(d);
	if (r < 0) {
		level_close(lv);
		return r;
	}
	if (lv->n)
		qsort(lv->names, lv->n, sizeof(*lv->names), name_cmp);
	op->depth++;
	return 0;
}

/* A mount of procfs or sysfs below the path is archived as an empty directory: their
 * files' sizes are not their contents, and /proc holds every process's state. */
static bool not_entered(int fd, dev_t parent_dev, const struct stat *st)
{
	if (st->st_dev == parent_dev)
		return false;
	struct statfs sf;
	return fstatfs(fd, &sf) < 0 || sf.f_type == PROC_SUPER_MAGIC || sf.f_type == SYSFS_MAGIC;
}

/* Archive one object, open O_PATH on pfd (taken), whose archive name is op->name: a
 * regular file (its data follows in later turns), a directory (entered), a symlink (as a
 * link); anything else is skipped. parent_dev: its directory's device, or 0 for the top. */
static int archive(struct tar_op *op, struct conn *c, int pfd, dev_t parent_dev,
		   struct cell_error *err)
{
	struct stat st;
	char link[32];
	int r = 0, fd = -1;
	if (fstat(pfd, &st) < 0) {
		r = cell_err(err, errno, "archiving %s/.../%.*s", op->path, (int)op->name_len,
			     op->name);
	} else if (S_ISREG(st.st_mode)) {
		/* Through the O_PATH fd: the very inode judged above, and no open code of
		 * anything else runs. */
		snprintf(link, sizeof(link), "/proc/self/fd/%d", pfd);
		fd = open(link, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			r = cell_err(err, fd < 0 ? errno : EBUSY, "archiving %s/.../%.*s", op->path,
				     (int)op->name_len, op->name);
		} else {
			put_header(op, c, &st, '0', (uint64_t)st.st_size, NULL, 0);
			op->file_fd = fd;
			op->file_pos = 0;
			op->file_left = (uint64_t)st.st_size;
			op->pad_left = (TAR_BLOCK - (uint64_t)st.st_size % TAR_BLOCK) % TAR_BLOCK;
			op->file_shrank = false;
			fd = -1;
		}
	} else if (S_ISDIR(st.st_mode)) {
		fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			r = cell_err(err, errno, "archiving %s/.../%.*s", op->path,
				     (int)op->name_len, op->name);
		} else {
			op->name[op->name_len++] = '/';
			op->name[op->name_len] = '\0';
			put_header(op, c, &st, '5', 0, NULL, 0);
			if (!not_entered(fd, parent_dev ? parent_dev : st.st_dev, &st)) {
				r = level_push(op, fd, err);
				fd = -1;
			}
		}
	} else if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(pfd, "", target, sizeof(target));
		if (n < 0 || (size_t)n >= sizeof(target))
			r = cell_err(err, n < 0 ? errno : ENAMETOOLONG, "archiving %s/.../%.*s",
				     op->path, (int)op->name_len, op->name);
		else
			put_header(op, c, &st, '2', 0, target, (size_t)n);
	} else {
		log_debug("archive of %s: %.*s is not a file, directory or link: skipped", op->path,
			  (int)op->name_len, op->name);
	}
	if (fd >= 0)
		close(fd);
	close(pfd);
	return r;
}

/* The next entry of the innermost directory, or leave it when it has none. */
static int next_entry(struct tar_op *op, struct conn *c, struct cell_error *err)
{
	struct tar_level *lv = &op->lv[op->depth - 1];
	if (lv->next == lv->n) {
		level_close(lv);
		op->depth--;
		return 0;
	}
	const char *name = lv->names[lv->next++];
	size_t nlen = strlen(name);
	op->name_len = lv->name_len;
	memcpy(op->name + op->name_len, name, nlen);
	op->name_len += nlen;
	op->name[op->name_len] = '\0';
	/* O_NOFOLLOW with O_PATH: the entry itself, a symlink included, whatever was swapped
	 * in since the directory was read. */
	int pfd = openat(lv->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return errno == ENOENT
			   ? 0 /* gone meanwhile */
			   : cell_err(err, errno, "archiving %s/.../%s", op->path, name);
	struct cell_error refused;
	if (files_refuse_process_state(pfd, "archiving", op->name, &refused) < 0) {
		close(pfd);
		return 0; /* a process's state below /proc: never archived */
	}
	return archive(op, c, pfd, lv->dev, err);
}

/* File data of the current regular file, read into the staging buffer: 0 while there is
 * more, 1 when the file and its padding are out, -errno. A file that shrank since its
 * header is padded with zeros to the size the header promised; one that grew is cut there. */
static int file_step(struct tar_op *op, struct conn *c, size_t *produced, struct cell_error *err)
{
	if (op->file_left) {
		size_t room = sizeof(op->out) - op->out_len;
		size_t want = op->file_left < room ? (size_t)op->file_left : room;
		ssize_t n = 0;
		if (!op->file_shrank) {
			n = pread(op->file_fd, op->out + op->out_len, want, op->file_pos);
			if (n < 0 && errno == EINTR)
				return 0;
			if (n < 0)
				return cell_err(err, errno, "reading %s/.../%.*s", op->path,
						(int)op->name_len, op->name);
			if (n == 0) {
				op->file_shrank = true;
				log_debug("archive of %s: %.*s shrank while read: padded", op->path,
					  (int)op->name_len, op->name);
			}
		}
		if (op->file_shrank) {
			memset(op->out + op->out_len, 0, want);
			n = (ssize_t)want;
		}
		op->out_len += (size_t)n;
		op->file_pos += n;
		op->file_left -= (uint64_t)n;
		*produced += (size_t)n;
		if (op->out_len == sizeof(op->out))
			out_flush(op, c);
		return 0;
	}
	out_put(op, c, NULL, op->pad_left);
	*produced += op->pad_left;
	close(op->file_fd);
	op->file_fd = -1;
	return 1;
}

/* Produce until the queue is full or this turn's share is spent; conn_want_drain() brings
 * us back. */
static void tar_pump(void *opp, struct conn *c)
{
	struct tar_op *op = opp;
	struct cell_error err = {0};
	size_t produced = 0;
	unsigned entries = 0;
	int r = 0;
	while (r >= 0 && conn_queued(c) < CONN_HIGH_WATER && produced < TAR_BYTES_PER_TURN &&
	       entries < TAR_ENTRIES_PER_TURN) {
		if (op->file_fd >= 0) {
			r = file_step(op, c, &produced, &err);
			continue;
		}
		if (op->depth == 0) {
			/* The end of the archive: two zero blocks. */
			out_put(op, c, NULL, 2 * TAR_BLOCK);
			out_flush(op, c);
			conn_send(c, CELL_FRAME_END, NULL, 0);
			conn_finish(c);
			return;
		}
		entries++;
		r = next_entry(op, c, &err);
	}
	if (r < 0) {
		out_flush(op, c);
		log_warn("archive cut short (no end-of-archive blocks sent): %s", err.msg);
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	out_flush(op, c);
	conn_want_drain(c);
}

static void tar_frame(void *op, struct conn *c, uint16_t type, uint8_t *payload, uint32_t len)
{
	(void)op;
	(void)payload;
	(void)len;
	conn_fail(c, EPROTO, "unexpected %s frame during FILE_TAR", cell_frame_type_name(type));
}

static void tar_free(struct tar_op *op)
{
	for (int i = 0; i < op->depth; i++)
		level_close(&op->lv[i]);
	if (op->file_fd >= 0)
		close(op->file_fd);
	files_names_free(&op->pw);
	files_names_free(&op->gr);
	free(op);
	streams--;
}

static void tar_closed(void *opp, struct conn *c)
{
	(void)c;
	tar_free(opp);
}

static const struct conn_handler tar_handler = {
    .frame = tar_frame,
    .drain = tar_pump,
    .closed = tar_closed,
    .keep_on_eof = true,
};

/* The archive's top name: the path's last component, or "." for the root (and a path
 * ending in "." or ".."). */
static size_t top_name(const char *path, char *out)
{
	size_t len = strlen(path);
	while (len > 1 && path[len - 1] == '/')
		len--;
	const char *end = path + len, *start = end;
	while (start > path && start[-1] != '/')
		start--;
	size_t n = (size_t)(end - start);
	if (n == 0 || n > NAME_MAX || (n == 1 && start[0] == '.') ||
	    (n == 2 && start[0] == '.' && start[1] == '.')) {
		out[0] = '.';
		return 1;
	}
	memcpy(out, start, n);
	return n;
}

/* {"path"}: STAT of what path leads to (resolved confined, symlinks followed as FILE_READ
 * follows them), then the archive. ERROR before STAT when it is missing, neither a
 * directory nor a regular file, or on procfs or sysfs. */
void tar_start(struct conn *c, json_t *req)
{
	json_t *jp = json_object_get(req, "path");
	const char *path = json_string_value(jp);
	if (!path || path[0] != '/' || json_string_length(jp) >= PATH_MAX ||
	    strlen(path) != json_string_length(jp)) {
		conn_fail(c, EINVAL, "FILE_TAR: path must be an absolute path");
		return;
	}
	if (streams >= TAR_STREAMS_MAX) {
		conn_fail(c, EBUSY, "archiving %s: %d archives are being made already", path,
			  TAR_STREAMS_MAX);
		return;
	}
	struct cell_error err = {0};
	int pfd = cell_open_in_root(init_base.rootfd, path, O_PATH, 0, 0);
	if (pfd < 0) {
		conn_fail(c, -pfd, "archiving %s: %s", path, strerror(-pfd));
		return;
	}
	struct stat st;
	struct statfs sf;
	int r = files_refuse_process_state(pfd, "archiving", path, &err);
	if (r == 0 && (fstat(pfd, &st) < 0 || fstatfs(pfd, &sf) < 0))
		r = cell_err(&err, errno, "archiving %s", path);
	else if (r == 0 && !S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		r = cell_err(&err, EINVAL, "archiving %s: not a directory or a regular file", path);
	else if (r == 0 && (sf.f_type == PROC_SUPER_MAGIC || sf.f_type == SYSFS_MAGIC))
		r = cell_err(&err, EINVAL, "archiving %s: /proc and /sys are not archived", path);
	struct tar_op *op = r < 0 ? NULL : calloc(1, sizeof(*op) + strlen(path) + 1);
	if (r == 0 && !op)
		r = cell_err(&err, ENOMEM, "archiving %s", path);
	if (r < 0) {
		close(pfd);
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	streams++;
	op->file_fd = -1;
	strcpy(op->path, path);
	op->name_len = top_name(path, op->name);
	files_names_load(&op->pw, "/etc/passwd");
	files_names_load(&op->gr, "/etc/group");
	conn_send_json(c, CELL_FRAME_STAT, files_stat_json(path, &st));
	conn_attach(c, &tar_handler, op);
	conn_grow_sndbuf(c);
	r = archive(op, c, pfd, 0, &err);
	if (r < 0) {
		out_flush(op, c);
		log_warn("archive cut short (no end-of-archive blocks sent): %s", err.msg);
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	tar_pump(op, c);
}
