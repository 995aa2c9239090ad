/* Unpack a tar archive from a sandbox beneath one host directory, as its bytes arrive.
 *
 * The archive is made inside the sandbox, so it is hostile input, whatever made it: every
 * header's checksum is checked; a name is refused when it is absolute or has a ".."
 * component (a pax header's path included), longer than a name can be, or deeper than
 * UNTAR_DEPTH_MAX; every step is relative to the destination's fd, each directory on the
 * way opened O_NOFOLLOW (a symlink the archive made earlier, or one already there, is never
 * followed: such an entry fails the unpacking); a file is created O_EXCL | O_NOFOLLOW
 * after whatever non-directory was at its name is unlinked; symbolic links are made as
 * links, whatever they point to; modes lose set-id and sticky bits (and the umask); owners
 * are not kept (what is unpacked belongs to the user running cell); hard links, devices,
 * fifos and unknown entry types are skipped. At most UNTAR_ENTRIES_MAX entries and
 * UNTAR_PAX_MAX bytes of one pax header. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cell/fsutil.h"
#include "untar.h"

#define BLOCK 512

enum sink { SINK_NONE, SINK_FILE, SINK_PAX };

struct untar {
	int root;
	mode_t umask;
	uint8_t block[BLOCK];
	size_t got;	/* bytes of block filled */
	bool in_data;	/* between a header and the next: data, then padding */
	uint64_t left;	/* data bytes of the current entry still to come */
	uint64_t pad;	/* padding bytes after them */
	enum sink sink; /* where the data goes */
	int fd;		/* SINK_FILE */
	mode_t mode;	/* SINK_FILE: applied when complete */
	struct timespec mtime;
	char *pax; /* SINK_PAX: the extended header being read */
	size_t pax_len;
	char *pax_path, *pax_link; /* the next entry's, from a pax header */
	bool pax_has_size, pax_has_mtime;
	uint64_t pax_size;
	struct timespec pax_mtime;
	int zero_blocks;
	bool ended;
	unsigned long entries;
};

struct untar *untar_new(int dirfd, struct cell_error *err)
{
	struct untar *u = calloc(1, sizeof(*u));
	if (!u) {
		cell_err(err, ENOMEM, "unpacking");
		return NULL;
	}
	u->root = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (u->root < 0) {
		cell_err(err, errno, "unpacking");
		free(u);
		return NULL;
	}
	u->fd = -1;
	u->umask = umask(0);
	umask(u->umask);
	return u;
}

void untar_free(struct untar *u)
{
	if (!u)
		return;
	if (u->fd >= 0)
		close(u->fd);
	close(u->root);
	free(u->pax);
	free(u->pax_path);
	free(u->pax_link);
	free(u);
}

unsigned long untar_entries(const struct untar *u)
{
	return u->entries;
}

/* ---- header fields ---- */

/* An octal field (leading blanks, digits, then NUL or blanks). false when it is not one
 * (base-256 included: this archive never needs it). */
static bool field_octal(const char *f, size_t size, uint64_t *out)
{
	size_t i = 0;
	uint64_t v = 0;
	while (i < size && f[i] == ' ')
		i++;
	if (i == size)
		return false;
	for (; i < size && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return false;
		v = v * 8 + (uint64_t)(f[i] - '0');
	}
	for (; i < size; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return false;
	*out = v;
	return true;
}

static bool checksum_ok(const uint8_t *b)
{
	uint64_t want;
	if (!field_octal((const char *)b + 148, 8, &want))
		return false;
	uint64_t sum = 0;
	for (size_t i = 0; i < BLOCK; i++)
		sum += (i >= 148 && i < 156) ? ' ' : b[i];
	return sum == want;
}

static char *strndup_field(const uint8_t *f, size_t size)
{
	return strndup((const char *)f, strnlen((const char *)f, size));
}

/* ---- pax ---- */

static int set_str(char **dst, const char *v, size_t len)
{
	if (memchr(v, '\0', len))
		return -EPROTO;
	char *s = strndup(v, len);
	if (!s)
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

static bool parse_u64(const char *v, size_t len, uint64_t *out)
{
	uint64_t n = 0;
	if (!len || len > 19)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return false;
		n = n * 10 + (uint64_t)(v[i] - '0');
	}
	*out = n;
	return true;
}

/* "LEN key=value\n" records: path, linkpath, size and mtime are kept for the next entry,
 * the rest ignored. */
static int pax_parse(struct untar *u, struct cell_error *err)
{
	const char *p = u->pax, *end = u->pax + u->pax_len;
	while (p < end) {
		const char *sp = memchr(p, ' ', (size_t)(end - p));
		uint64_t n;
		if (!sp || !parse_u64(p, (size_t)(sp - p), &n) || n > (uint64_t)(end - p) ||
		    n < (uint64_t)(sp - p) + 3 || p[n - 1] != '\n')
			return cell_err(err, EPROTO, "unpacking: a malformed pax header");
		const char *key = sp + 1, *rec_end = p + n - 1;
		const char *eq = memchr(key, '=', (size_t)(rec_end - key));
		if (!eq)
			return cell_err(err, EPROTO, "unpacking: a malformed pax header");
		size_t klen = (size_t)(eq - key), vlen = (size_t)(rec_end - eq - 1);
		const char *v = eq + 1;
		int r = 0;
		if (klen == 4 && !memcmp(key, "path", 4))
			r = set_str(&u->pax_path, v, vlen);
		else if (klen == 8 && !memcmp(key, "linkpath", 8))
			r = set_str(&u->pax_link, v, vlen);
		else if (klen == 4 && !memcmp(key, "size", 4)) {
			if (!parse_u64(v, vlen, &u->pax_size))
				r = -EPROTO;
			u->pax_has_size = true;
		} else if (klen == 5 && !memcmp(key, "mtime", 5)) {
			const char *dot = memchr(v, '.', vlen);
			uint64_t s;
			if (vlen && v[0] != '-' &&
			    parse_u64(v, dot ? (size_t)(dot - v) : vlen, &s) && s < INT64_MAX) {
				u->pax_mtime = (struct timespec){.tv_sec = (time_t)s};
				u->pax_has_mtime = true;
			}
		}
		if (r < 0)
			return cell_err(err, -r, "unpacking: a bad pax record");
		p += n;
	}
	return 0;
}

static void pax_reset(struct untar *u)
{
	free(u->pax_path);
	free(u->pax_link);
	u->pax_path = u->pax_link = NULL;
	u->pax_has_size = u->pax_has_mtime = false;
}

/* ---- names and places ---- */

/* The directory that will hold name's last component, opened (created 0700 when missing)
 * component by component beneath the root, O_NOFOLLOW each; *last points into name. The
 * first component (the archived directory's own name) is dropped; *last stays NULL (and
 * the result is 0, no fd) when nothing is left: the top entry itself. */
static int open_parent(struct untar *u, char *name, const char **last, struct cell_error *err)
{
	*last = NULL;
	if (name[0] == '/')
		return cell_err(err, EPROTO, "unpacking: refused the absolute name %.200s", name);
	char *comp[UNTAR_DEPTH_MAX + 1];
	int n = 0;
	for (char *save = NULL, *t = strtok_r(name, "/", &save); t;
	     t = strtok_r(NULL, "/", &save)) {
		if (!strcmp(t, "."))
			continue;
		if (!strcmp(t, ".."))
			return cell_err(err, EPROTO, "unpacking: refused a name with '..'");
		if (strlen(t) > NAME_MAX || n == UNTAR_DEPTH_MAX + 1)
			return cell_err(err, EPROTO,
					"unpacking: refused a name over %d components or with one "
					"over %d bytes",
					UNTAR_DEPTH_MAX, NAME_MAX);
		comp[n++] = t;
	}
	if (n < 2)
		return 0;
	int fd = fcntl(u->root, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return cell_err(err, errno, "unpacking");
	for (int i = 1; i < n - 1; i++) {
		int next = openat(fd, comp[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT && mkdirat(fd, comp[i], 0700) == 0)
			next = openat(fd, comp[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			int e = errno;
			close(fd);
			return cell_err(err, e == ELOOP ? ENOTDIR : e,
					"unpacking: %s: not a directory (a symbolic link is never "
					"followed)",
					comp[i]);
		}
		close(fd);
		fd = next;
	}
	*last = comp[n - 1];
	return fd;
}

/* Remove whatever non-directory is at name (a link is removed as a link). */
static int clear_name(int dirfd, const char *name, struct cell_error *err)
{
	if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
		return cell_err(err, errno == EISDIR ? EISDIR : errno, "unpacking %s", name);
	return 0;
}

/* ---- entries ---- */

static int begin_entry(struct untar *u, struct cell_error *err)
{
	const uint8_t *b = u->block;
	uint64_t size, mode, mtime;
	if (!field_octal((const char *)b + 124, 12, &size) ||
	    !field_octal((const char *)b + 100, 8, &mode))
		return cell_err(err, EPROTO, "unpacking: a malformed header");
	if (!field_octal((const char *)b + 136, 12, &mtime))
		mtime = 0;
	char type = (char)b[156];
	if (u->pax_has_size && type != 'x' && type != 'g')
		size = u->pax_size;
	u->left = size;
	u->pad = (BLOCK - size % BLOCK) % BLOCK;
	u->in_data = true;
	u->sink = SINK_NONE;
	if (type == 'x') {
		if (size > UNTAR_PAX_MAX)
			return cell_err(err, EFBIG, "unpacking: a pax header over %u bytes",
					UNTAR_PAX_MAX);
		free(u->pax);
		u->pax = malloc(size + 1);
		if (!u->pax)
			return cell_err(err, ENOMEM, "unpacking");
		u->pax_len = 0;
		u->sink = SINK_PAX;
		return 0;
	}
	if (type == 'g')
		return 0; /* global header: its data skipped */
	if (++u->entries > UNTAR_ENTRIES_MAX)
		return cell_err(err, EFBIG, "unpacking: more than %d entries", UNTAR_ENTRIES_MAX);
	char *name = NULL;
	if (u->pax_path) {
		name = strdup(u->pax_path);
	} else {
		char *n = strndup_field(b, 100), *prefix = strndup_field(b + 345, 155);
		if (n && prefix && prefix[0] && !memcmp(b + 257, "ustar", 5)) {
			if (asprintf(&name, "%s/%s", prefix, n) < 0)
				name = NULL;
		} else if (n) {
			name = strdup(n);
		}
		free(n);
		free(prefix);
	}
	char *link = u->pax_link ? strdup(u->pax_link) : strndup_field(b + 157, 100);
	struct timespec mt =
	    u->pax_has_mtime ? u->pax_mtime : (struct timespec){.tv_sec = (time_t)mtime};
	pax_reset(u);
	int r = 0, dfd = -1;
	const char *last = NULL;
	if (!name || !link)
		r = cell_err(err, ENOMEM, "unpacking");
	else
		dfd = open_parent(u, name, &last, err);
	if (r == 0 && dfd < 0)
		r = dfd;
	else if (r == 0 && !last)
		dfd = -1; /* the archived directory itself: the destination stands for it */
	else if (r == 0 && (type == '0' || type == '\0' || type == '7')) {
		if ((r = clear_name(dfd, last, err)) == 0) {
			u->fd = openat(dfd, last,
				       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (u->fd < 0)
				r = cell_err(err, errno, "unpacking %s", last);
			u->sink = SINK_FILE;
			u->mode = (mode_t)mode & 0777 & ~u->umask;
			u->mtime = mt;
		}
	} else if (r == 0 && type == '5') {
		if (mkdirat(dfd, last, ((mode_t)mode & 0777 & ~u->umask) | 0700) < 0) {
			struct stat st;
			if (errno != EEXIST || fstatat(dfd, last, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			    !S_ISDIR(st.st_mode))
				r = cell_err(err, errno == EEXIST ? ENOTDIR : errno,
					     "unpacking %s: cannot make it a directory", last);
		}
	} else if (r == 0 && type == '2') {
		if (!link[0])
			r = cell_err(err, EPROTO, "unpacking %s: a link to nothing", last);
		else if ((r = clear_name(dfd, last, err)) == 0 && symlinkat(link, dfd, last) < 0)
			r = cell_err(err, errno, "unpacking %s", last);
	}
	/* Any other type (hard link, device, fifo, GNU extensions) is skipped, with its data. */
	if (dfd >= 0)
		close(dfd);
	free(name);
	free(link);
	return r;
}

static int end_entry(struct untar *u, struct cell_error *err)
{
	int r = 0;
	if (u->sink == SINK_PAX) {
		r = pax_parse(u, err);
		free(u->pax);
		u->pax = NULL;
	} else if (u->sink == SINK_FILE && u->fd >= 0) {
		struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, u->mtime};
		if (fchmod(u->fd, u->mode) < 0 || futimens(u->fd, ts) < 0)
			r = cell_err(err, errno, "unpacking: setting a file's mode and time");
		if (close(u->fd) < 0 && r == 0)
			r = cell_err(err, errno, "unpacking: writing a file");
		u->fd = -1;
	}
	u->sink = SINK_NONE;
	u->in_data = false;
	return r;
}

static int take_data(struct untar *u, const uint8_t *p, size_t n, struct cell_error *err)
{
	if (u->sink == SINK_FILE) {
		int r = cell_write_all(u->fd, p, n);
		if (r < 0)
			return cell_err(err, -r, "unpacking: writing a file");
	} else if (u->sink == SINK_PAX) {
		memcpy(u->pax + u->pax_len, p, n);
		u->pax_len += n;
	}
	return 0;
}

int untar_feed(struct untar *u, const void *data, size_t len, struct cell_error *err)
{
	const uint8_t *p = data;
	while (len) {
		if (u->ended)
			return 0; /* after the end-of-archive blocks: ignored */
		if (u->in_data) {
			if (u->left) {
				size_t n = u->left < len ? (size_t)u->left : len;
				int r = take_data(u, p, n, err);
				if (r < 0)
					return r;
				u->left -= n;
				p += n;
				len -= n;
				continue;
			}
			if (u->pad) {
				size_t n = u->pad < len ? (size_t)u->pad : len;
				u->pad -= n;
				p += n;
				len -= n;
				continue;
			}
			int r = end_entry(u, err);
			if (r < 0)
				return r;
			continue;
		}
		size_t n = BLOCK - u->got < len ? BLOCK - u->got : len;
		memcpy(u->block + u->got, p, n);
		u->got += n;
		p += n;
		len -= n;
		if (u->got < BLOCK)
			continue;
		u->got = 0;
		bool zero = true;
		for (size_t i = 0; i < BLOCK && zero; i++)
			zero = !u->block[i];
		if (zero) {
			u->ended = ++u->zero_blocks == 2;
			continue;
		}
		if (u->zero_blocks || !checksum_ok(u->block))
			return cell_err(err, EPROTO, "unpacking: not a tar archive (bad header)");
		int r = begin_entry(u, err);
		if (r < 0)
			return r;
		if (!u->left && !u->pad && (r = end_entry(u, err)) < 0)
			return r;
	}
	return 0;
}

int untar_finish(struct untar *u, struct cell_error *err)
{
	if (u->in_data && !u->left && !u->pad) {
		int r = end_entry(u, err);
		if (r < 0)
			return r;
	}
	if (!u->ended)
		return cell_err(err, EPROTO,
				"the archive ended early (cut short in the sandbox: a bound or a "
				"read error; what came is unpacked)");
	return 0;
}
