/* Copies of a sandbox's writable layer: see include/cell/layercopy.h.
 *
 * One walk serves both jobs: a copy (src and dst trees differ) and an in-place shift (dst
 * is src). Each entry's metadata is read from the source, then written to the destination
 * in this order: owner (which clears setuid/setgid and security.capability), mode, xattrs
 * (ids inside shifted), timestamps. A directory gets its metadata after its contents, so
 * its mtime is the source's. */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <linux/fs.h>

#include "cell/cleanup.h"
#include "cell/layercopy.h"
#include "cell/runtime.h"

#define XATTR_BLOB_MAX (1u << 20) /* every xattr of one entry, names and values */
#define VALUE_MAX      (64u << 10)
#define COPY_BUF       (1u << 20)
#define PATH_BUF       (PATH_MAX + NAME_MAX + 2)

struct walk {
	uint32_t from, to;
	bool copy; /* false: shift in place */
	dev_t dev; /* the tree's filesystem: never crossed */
	struct cell_layer_stats *stats;
	struct cell_error *err;
	char *list; /* names of the current entry's xattrs */
	/* The current entry's path in the layer, for messages: one buffer for the whole walk,
	 * so that a level of recursion costs little stack. */
	char *path;
	size_t path_len;
	char *blob; /* the current entry's xattrs: name\0 u32 len, value ... */
	size_t blob_len;
};

static uint32_t shift_id(const struct walk *w, uint32_t id)
{
	if (w->from == w->to || id < w->from || id - w->from >= CELL_UID_RANGE)
		return id;
	return w->to + (id - w->from);
}

/* ---- data ---- */

static int copy_range(int in, int out, off_t off, off_t len)
{
	while (len > 0) {
		loff_t a = off, b = off;
		ssize_t n = copy_file_range(in, &a, out, &b, (size_t)len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 &&
		    (errno == EXDEV || errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL)) {
			char *buf = malloc(COPY_BUF);
			if (!buf)
				return -ENOMEM;
			n = pread(in, buf, len < (off_t)COPY_BUF ? (size_t)len : COPY_BUF, off);
			if (n > 0 && pwrite(out, buf, (size_t)n, off) != n)
				n = -1;
			int e = errno;
			free(buf);
			errno = e;
			if (n < 0)
				return errno ? -errno : -EIO;
		}
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0; /* the source is shorter than it said: the rest is a hole */
		off += n;
		len -= n;
	}
	return 0;
}

int cell_file_clone(int in, int out, int *cloned)
{
	if (cloned)
		*cloned = 0;
	if (ioctl(out, FICLONE, in) == 0) {
		if (cloned)
			*cloned = 1;
		return 0;
	}
	struct stat st;
	if (fstat(in, &st) < 0)
		return -errno;
	if (ftruncate(out, st.st_size) < 0)
		return -errno;
	off_t pos = 0;
	while (pos < st.st_size) {
		off_t data = lseek(in, pos, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			return 0;
		if (data < 0) /* no SEEK_DATA here: everything is data */
			return copy_range(in, out, pos, st.st_size - pos);
		off_t hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		if (hole > st.st_size)
			hole = st.st_size;
		int r = copy_range(in, out, data, hole - data);
		if (r < 0)
			return r;
		pos = hole;
	}
	return 0;
}

/* ---- xattrs ---- */

/* fd >= 0: that file; else dirfd/name, not followed (a symlink's own xattrs). */
struct where {
	int fd, dirfd;
	const char *name;
	char path[64 + NAME_MAX];
};

static void where_at(struct where *wh, int fd, int dirfd, const char *name)
{
	wh->fd = fd;
	wh->dirfd = dirfd;
	wh->name = name;
	wh->path[0] = '\0';
	if (fd < 0 && name)
		snprintf(wh->path, sizeof(wh->path), "/proc/self/fd/%d/%s", dirfd, name);
}

static ssize_t x_list(const struct where *wh, char *buf, size_t size)
{
	return wh->fd >= 0 ? flistxattr(wh->fd, buf, size) : llistxattr(wh->path, buf, size);
}

static ssize_t x_get(const struct where *wh, const char *n, void *buf, size_t size)
{
	return wh->fd >= 0 ? fgetxattr(wh->fd, n, buf, size) : lgetxattr(wh->path, n, buf, size);
}

static int x_set(const struct where *wh, const char *n, const void *v, size_t size)
{
	return wh->fd >= 0 ? fsetxattr(wh->fd, n, v, size, 0) : lsetxattr(wh->path, n, v, size, 0);
}

/* Every xattr of the source into w->blob (0 when it has none). */
static int read_xattrs(struct walk *w, const struct where *src, const char *what)
{
	w->blob_len = 0;
	char *list = w->list;
	ssize_t n = x_list(src, list, XATTR_LIST_MAX);
	if (n < 0 && (errno == ENOTSUP || errno == EPERM))
		return 0;
	if (n < 0)
		return cell_err(w->err, errno, "listing xattrs of %s", what);
	for (ssize_t off = 0; off < n; off += (ssize_t)strlen(list + off) + 1) {
		const char *name = list + off;
		size_t nl = strlen(name) + 1;
		if (w->blob_len + nl + sizeof(uint32_t) + VALUE_MAX > XATTR_BLOB_MAX)
			return cell_err(w->err, E2BIG, "xattrs of %s: over %u bytes", what,
					XATTR_BLOB_MAX);
		char *p = w->blob + w->blob_len;
		memcpy(p, name, nl);
		ssize_t vl = x_get(src, name, p + nl + sizeof(uint32_t), VALUE_MAX);
		if (vl < 0 && errno == ENODATA)
			continue;
		if (vl < 0)
			return cell_err(w->err, errno, "reading xattr %s of %s", name, what);
		uint32_t len = (uint32_t)vl;
		memcpy(p + nl, &len, sizeof(len));
		w->blob_len += nl + sizeof(len) + len;
	}
	return 0;
}

/* Host ids inside a value: POSIX ACL entries (user and group) and a v3 capability's root
 * id. */
static void shift_value(const struct walk *w, const char *name, char *v, size_t len)
{
	if (w->from == w->to)
		return;
	if (!strcmp(name, "security.capability") && len == 24) {
		uint32_t magic, rootid;
		memcpy(&magic, v, 4);
		if ((le32toh(magic) & 0xFF000000u) != 0x03000000u)
			return;
		memcpy(&rootid, v + 20, 4);
		rootid = htole32(shift_id(w, le32toh(rootid)));
		memcpy(v + 20, &rootid, 4);
		return;
	}
	if (strcmp(name, "system.posix_acl_access") && strcmp(name, "system.posix_acl_default"))
		return;
	for (size_t off = 4; off + 8 <= len; off += 8) {
		uint16_t tag;
		uint32_t id;
		memcpy(&tag, v + off, 2);
		tag = le16toh(tag);
		if (tag != 0x02 && tag != 0x08) /* ACL_USER, ACL_GROUP */
			continue;
		memcpy(&id, v + off + 4, 4);
		id = htole32(shift_id(w, le32toh(id)));
		memcpy(v + off + 4, &id, 4);
	}
}

static int write_xattrs(struct walk *w, const struct where *dst, const char *what)
{
	for (size_t off = 0; off < w->blob_len;) {
		char *name = w->blob + off;
		size_t nl = strlen(name) + 1;
		uint32_t len;
		memcpy(&len, name + nl, sizeof(len));
		char *v = name + nl + sizeof(len);
		shift_value(w, name, v, len);
		if (x_set(dst, name, v, len) < 0)
			return cell_err(w->err, errno, "setting xattr %s of %s", name, what);
		off += nl + sizeof(len) + len;
	}
	return 0;
}

/* ---- one entry's metadata ---- */

static int apply_meta(struct walk *w, const struct stat *st, const struct where *src,
		      const struct where *dst, const char *what)
{
	uid_t uid = shift_id(w, st->st_uid);
	gid_t gid = shift_id(w, st->st_gid);
	bool lnk = S_ISLNK(st->st_mode);
	/* In place, an unchanged owner is left alone (chown would clear setuid and caps). */
	if (!w->copy && uid == st->st_uid && gid == st->st_gid)
		return 0;
	/* Read before the chown, which drops security.capability. */
	int r = read_xattrs(w, src, what);
	if (r < 0)
		return r;
	int c = dst->fd >= 0 ? fchown(dst->fd, uid, gid)
			     : fchownat(dst->dirfd, dst->name, uid, gid, AT_SYMLINK_NOFOLLOW);
	if (c < 0)
		return cell_err(w->err, errno, "setting the owner of %s", what);
	if (!lnk) {
		c = dst->fd >= 0 ? fchmod(dst->fd, st->st_mode & 07777)
				 : fchmodat(dst->dirfd, dst->name, st->st_mode & 07777, 0);
		if (c < 0)
			return cell_err(w->err, errno, "setting the mode of %s", what);
	}
	if ((r = write_xattrs(w, dst, what)) < 0)
		return r;
	struct timespec ts[2] = {st->st_atim, st->st_mtim};
	c = dst->fd >= 0 ? futimens(dst->fd, ts)
			 : utimensat(dst->dirfd, dst->name, ts, AT_SYMLINK_NOFOLLOW);
	if (c < 0 && !(lnk && errno == EOPNOTSUPP))
		return cell_err(w->err, errno, "setting the times of %s", what);
	return 0;
}

/* ---- the walk ---- */

static int walk_dir(struct walk *w, int src, int dst, unsigned depth, const char *what);

static int count(struct walk *w, const char *what)
{
	if (++w->stats->entries > CELL_LAYER_MAX_ENTRIES)
		return cell_err(w->err, E2BIG, "layer has more than %u entries (at %s)",
				CELL_LAYER_MAX_ENTRIES, what);
	return 0;
}

/* Kept out of the recursion's frames. */
static __attribute__((noinline)) int meta_by_fd(struct walk *w, const struct stat *st, int src,
						int dst, const char *what)
{
	struct where ws, wd;
	where_at(&ws, src, -1, NULL);
	where_at(&wd, dst, -1, NULL);
	return apply_meta(w, st, &ws, &wd, what);
}

static int do_dir(struct walk *w, int src, int dst, const char *name, const struct stat *st,
		  unsigned depth, const char *what)
{
	if (depth >= CELL_LAYER_MAX_DEPTH)
		return cell_err(w->err, ELOOP, "layer is more than %u directories deep (at %s)",
				CELL_LAYER_MAX_DEPTH, what);
	_cleanup_close_ int in = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return cell_err(w->err, errno, "opening %s", what);
	struct stat now;
	if (fstat(in, &now) < 0 || now.st_ino != st->st_ino || now.st_dev != st->st_dev)
		return cell_err(w->err, EAGAIN, "%s changed during the copy", what);
	if (w->copy && mkdirat(dst, name, 0700) < 0)
		return cell_err(w->err, errno, "creating the copy of %s", what);
	_cleanup_close_ int out =
	    w->copy ? openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : dup(in);
	if (out < 0)
		return cell_err(w->err, errno, "opening the copy of %s", what);
	int r = walk_dir(w, in, out, depth + 1, what);
	return r < 0 ? r : meta_by_fd(w, st, in, out, what);
}

static int do_file(struct walk *w, int src, int dst, const char *name, const struct stat *st,
		   const char *what)
{
	_cleanup_close_ int in =
	    openat(src, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (in < 0)
		return cell_err(w->err, errno, "opening %s", what);
	struct stat now;
	if (fstat(in, &now) < 0 || now.st_ino != st->st_ino || !S_ISREG(now.st_mode))
		return cell_err(w->err, EAGAIN, "%s changed during the copy", what);
	w->stats->files++;
	int out;
	if (w->copy) {
		out = openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (out < 0)
			return cell_err(w->err, errno, "creating the copy of %s", what);
		int cloned = 0;
		int r = cell_file_clone(in, out, &cloned);
		if (r < 0) {
			close(out);
			return cell_err(w->err, -r, "copying %s", what);
		}
		w->stats->bytes += (uint64_t)st->st_size;
		w->stats->cloned += (uint64_t)cloned;
	} else if ((out = dup(in)) < 0) {
		return cell_err(w->err, errno, "opening %s", what);
	}
	int r = meta_by_fd(w, st, in, out, what);
	close(out);
	return r;
}

/* Symlinks, whiteouts, fifos and sockets: by name, never opened. */
static __attribute__((noinline)) int do_node(struct walk *w, int src, int dst, const char *name,
					     const struct stat *st, const char *what)
{
	if (w->copy) {
		int c;
		if (S_ISLNK(st->st_mode)) {
			char target[PATH_MAX];
			ssize_t n = readlinkat(src, name, target, sizeof(target) - 1);
			if (n < 0)
				return cell_err(w->err, errno, "reading symlink %s", what);
			target[n] = '\0';
			c = symlinkat(target, dst, name);
		} else {
			c = mknodat(dst, name, (st->st_mode & S_IFMT) | 0600, st->st_rdev);
		}
		if (c < 0)
			return cell_err(w->err, errno, "creating the copy of %s", what);
	}
	struct where ws, wd;
	where_at(&ws, -1, src, name);
	where_at(&wd, -1, dst, name);
	return apply_meta(w, st, &ws, &wd, what);
}

static int walk_dir(struct walk *w, int src, int dst, unsigned depth, const char *what)
{
	/* A description of its own: a dup would share (and move) the caller's offset. */
	int dfd = openat(src, ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return cell_err(w->err, errno, "opening %s", what);
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return cell_err(w->err, errno, "reading %s", what);
	}
	int r = 0;
	struct dirent *de;
	size_t len = w->path_len;
	const char *sub = w->path;
	while (r == 0 && (errno = 0, de = readdir(d))) {
		const char *name = de->d_name;
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		/* what is w->path: the entry's path is appended to it, and cut again after. */
		size_t n = strlen(name);
		if (len + 1 + n < PATH_BUF) {
			w->path[len] = '/';
			memcpy(w->path + len + 1, name, n + 1);
			w->path_len = len + 1 + n;
		}
		struct stat st;
		if ((r = count(w, sub)) < 0)
			break;
		if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = cell_err(w->err, errno, "reading %s", sub);
			break;
		}
		if (st.st_dev != w->dev) /* a mount: not the layer's */
			continue;
		if (S_ISDIR(st.st_mode))
			r = do_dir(w, src, dst, name, &st, depth, sub);
		else if (S_ISREG(st.st_mode))
			r = do_file(w, src, dst, name, &st, sub);
		else if (S_ISLNK(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) ||
			 (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)))
			r = do_node(w, src, dst, name, &st, sub);
		else
			w->stats->skipped++;
		w->path[len] = '\0';
		w->path_len = len;
	}
	if (r == 0 && errno)
		r = cell_err(w->err, errno, "reading %s", what[0] ? what : "/");
	closedir(d);
	return r;
}

static int run(int src_fd, int dst_parent_fd, const char *dst_name, uint32_t from, uint32_t to,
	       struct cell_layer_stats *stats, struct cell_error *err)
{
	struct cell_layer_stats none;
	struct walk w = {.from = from,
			 .to = to,
			 .copy = dst_name != NULL,
			 .stats = stats ? stats : &none,
			 .err = err};
	memset(w.stats, 0, sizeof(*w.stats));
	struct stat st;
	if (fstat(src_fd, &st) < 0)
		return cell_err(err, errno, "reading the layer");
	if (!S_ISDIR(st.st_mode))
		return cell_err(err, ENOTDIR, "the layer is not a directory");
	w.dev = st.st_dev;
	w.list = malloc(XATTR_LIST_MAX);
	w.blob = malloc(XATTR_BLOB_MAX);
	w.path = calloc(1, PATH_BUF);
	if (!w.list || !w.blob || !w.path) {
		free(w.list);
		free(w.blob);
		free(w.path);
		return cell_err(err, ENOMEM, "copying the layer");
	}
	int r;
	if (w.copy) {
		r = mkdirat(dst_parent_fd, dst_name, 0700) < 0
			? cell_err(err, errno, "creating %s", dst_name)
			: 0;
		_cleanup_close_ int out =
		    r < 0 ? -1
			  : openat(dst_parent_fd, dst_name,
				   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (r == 0 && out < 0)
			r = cell_err(err, errno, "opening %s", dst_name);
		if (r == 0)
			r = walk_dir(&w, src_fd, out, 1, w.path);
		if (r == 0) {
			struct where ws, wd;
			where_at(&ws, src_fd, -1, NULL);
			where_at(&wd, out, -1, NULL);
			r = apply_meta(&w, &st, &ws, &wd, "/");
		}
	} else {
		r = walk_dir(&w, src_fd, src_fd, 1, w.path);
		if (r == 0) {
			struct where wh;
			where_at(&wh, src_fd, -1, NULL);
			r = apply_meta(&w, &st, &wh, &wh, "/");
		}
	}
	free(w.list);
	free(w.blob);
	free(w.path);
	return r;
}

int cell_layer_copy(int src_fd, int dst_parent_fd, const char *dst_name, uint32_t from_base,
		    uint32_t to_base, struct cell_layer_stats *stats, struct cell_error *err)
{
	if (!dst_name || !dst_name[0])
		return cell_err(err, EINVAL, "layer copy: no destination");
	return run(src_fd, dst_parent_fd, dst_name, from_base, to_base, stats, err);
}

int cell_layer_shift(int fd, uint32_t from_base, uint32_t to_base, struct cell_layer_stats *stats,
		     struct cell_error *err)
{
	return run(fd, -1, NULL, from_base, to_base, stats, err);
}
