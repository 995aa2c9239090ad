/* A skill's archive, judged and walked: tar.gz (ustar, pax and GNU long names) through
 * zlib's gz reader, zip (stored or deflated, no zip64, no encryption) from its central
 * directory. Nothing but regular files and directories is accepted; every path is
 * normalised and checked; expansion is bounded in total and against the archive's size,
 * counted on what is actually inflated (a header's claim is never trusted alone). */
#include "skillpkg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "cell/cleanup.h"

#define BLOCK 512

struct walk {
	const struct skillpkg_ops *ops; /* NULL: judging only */
	void *cls;
	struct skillpkg_info *info;
	struct cell_error *err;
	/* What decides the prefix (judging pass). */
	bool top_entrypoint, nested_entrypoint, mixed;
	char first[256];
	uint64_t expanded; /* every byte inflated, headers included */
	uint64_t cap;	   /* of expanded */
};

static int refuse(struct walk *w, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(struct walk *w, const char *path, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return cell_err_msg(w->err, EINVAL, "entry '%.200s': %s", path, why);
}

/* Normalise raw (from the archive) into out: "." and empty components dropped; refused:
 * absolute, "..", control characters, too long or too deep. 0 (out may be "": the top
 * itself), or -EINVAL. */
static int normalise(struct walk *w, const char *raw, char *out, size_t size)
{
	if (raw[0] == '/')
		return refuse(w, raw, "an absolute path");
	if (strlen(raw) >= SKILLPKG_PATH_MAX || size < SKILLPKG_PATH_MAX)
		return refuse(w, raw, "path longer than %d bytes", SKILLPKG_PATH_MAX - 1);
	size_t n = 0;
	int depth = 0;
	const char *p = raw;
	while (*p) {
		const char *s = strchr(p, '/');
		size_t len = s ? (size_t)(s - p) : strlen(p);
		if (len == 2 && !memcmp(p, "..", 2))
			return refuse(w, raw, "a '..' component");
		if (len > 255)
			return refuse(w, raw, "a component longer than 255 bytes");
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\')
				return refuse(w, raw,
					      "a control character or backslash in its name");
		if (len && !(len == 1 && p[0] == '.')) {
			if (++depth > SKILLPKG_DEPTH_MAX)
				return refuse(w, raw, "deeper than %d directories",
					      SKILLPKG_DEPTH_MAX);
			if (n)
				out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p += len + (s ? 1 : 0);
	}
	out[n] = '\0';
	return 0;
}

/* A judged entry: counted, looked at for entrypoint.sh, or (second walk) handed on. 1 when
 * the entry is skipped (the top directory itself). */
static int entry_begin(struct walk *w, const char *raw, enum skillpkg_kind kind, uint32_t mode,
		       uint64_t size)
{
	char path[SKILLPKG_PATH_MAX];
	int r = normalise(w, raw, path, sizeof(path));
	if (r < 0)
		return r;
	if (!w->ops) {
		if (++w->info->entries > SKILLPKG_ENTRIES_MAX)
			return refuse(w, raw, "more than %d entries in the archive",
				      SKILLPKG_ENTRIES_MAX);
		if (kind == SKILLPKG_FILE) {
			w->info->total += size;
			if (w->info->total > SKILLPKG_TOTAL_MAX)
				return refuse(w, raw, "the files expand beyond %llu MiB",
					      (unsigned long long)(SKILLPKG_TOTAL_MAX >> 20));
		}
		if (!path[0])
			return 1;
		const char *slash = strchr(path, '/');
		size_t flen = slash ? (size_t)(slash - path) : strlen(path);
		if (!w->first[0] && flen < sizeof(w->first)) {
			memcpy(w->first, path, flen);
			w->first[flen] = '\0';
		} else if (strlen(w->first) != flen || memcmp(w->first, path, flen)) {
			w->mixed = true;
		}
		if (kind == SKILLPKG_FILE && !strcmp(path, "entrypoint.sh"))
			w->top_entrypoint = true;
		if (kind == SKILLPKG_FILE && slash && !strcmp(slash + 1, "entrypoint.sh"))
			w->nested_entrypoint = true;
		return 0;
	}
	size_t plen = strlen(w->info->prefix);
	const char *rel = path;
	if (plen) {
		/* The top directory itself, or a path below it (the judging walk saw to it). */
		if (!strcmp(path, w->info->prefix) ||
		    (strlen(path) + 1 == plen && !strncmp(path, w->info->prefix, plen - 1)))
			return 1;
		if (strncmp(path, w->info->prefix, plen))
			return refuse(w, raw, "outside the archive's top directory");
		rel = path + plen;
	}
	if (!rel[0])
		return 1;
	struct skillpkg_entry e = {
	    .path = rel,
	    .kind = kind,
	    .mode = kind == SKILLPKG_DIR ? 0755 : ((mode & 0111) ? 0755 : 0644),
	    .size = size,
	};
	return w->ops->begin(w->cls, &e);
}

static int count_expanded(struct walk *w, size_t n)
{
	w->expanded += n;
	if (w->expanded > w->cap)
		return cell_err_msg(w->err, EINVAL,
				    "the archive expands beyond %llu bytes (%llu times its size "
				    "at most): refused as a compression bomb",
				    (unsigned long long)w->cap,
				    (unsigned long long)SKILLPKG_RATIO_MAX);
	return 0;
}

/* ---- tar.gz ---- */

/* 1: len bytes read; 0: at the end of the stream (nothing read); -EINVAL: corrupt, or cut
 * short inside len. */
static int gz_full(struct walk *w, gzFile gz, void *buf, size_t len)
{
	int n = gzread(gz, buf, (unsigned)len);
	if (n < 0) {
		int e;
		const char *m = gzerror(gz, &e);
		return cell_err_msg(w->err, EINVAL, "the archive's gzip stream is corrupt: %s",
				    m ? m : "read error");
	}
	int r = count_expanded(w, (size_t)n);
	if (r < 0)
		return r;
	if (n > 0 && (size_t)n < len)
		return cell_err_msg(w->err, EINVAL, "the archive is cut short");
	return n > 0;
}

static int octal(const char *f, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	while (i < len && (f[i] == ' ' || f[i] == '\0'))
		i++;
	bool any = false;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v > (UINT64_MAX >> 3))
			return -1;
		v = v * 8 + (uint64_t)(f[i] - '0');
		any = true;
	}
	for (; i < len; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return -1;
	*out = v;
	return any ? 0 : -1;
}

static bool checksum_ok(const unsigned char *h)
{
	uint64_t want;
	if (octal((const char *)h + 148, 8, &want) < 0)
		return false;
	uint64_t sum = 0;
	for (int i = 0; i < BLOCK; i++)
		sum += (i >= 148 && i < 156) ? ' ' : h[i];
	return sum == want;
}

/* Read a small extension (pax header, GNU long name) of size bytes into a string. */
static int tar_read_ext(struct walk *w, gzFile gz, uint64_t size, char **out)
{
	if (size > 64 * 1024)
		return cell_err_msg(w->err, EINVAL, "a tar extension header of %llu bytes",
				    (unsigned long long)size);
	uint64_t padded = (size + BLOCK - 1) / BLOCK * BLOCK;
	char *buf = malloc(padded + 1);
	if (!buf)
		return cell_err(w->err, ENOMEM, "tar header");
	int r = padded ? gz_full(w, gz, buf, padded) : 1;
	if (r <= 0) {
		free(buf);
		return r < 0 ? r : cell_err_msg(w->err, EINVAL, "the archive is cut short");
	}
	buf[size] = '\0';
	*out = buf;
	return 0;
}

/* "path" from pax records ("<len> key=value\n"...), or NULL. */
static char *pax_path(const char *rec, size_t len)
{
	size_t i = 0;
	while (i < len) {
		char *end;
		unsigned long n = strtoul(rec + i, &end, 10);
		if (n == 0 || end == rec + i || *end != ' ' || i + n > len)
			return NULL;
		const char *kv = end + 1, *stop = rec + i + n - 1; /* the '\n' */
		if (stop > kv && !strncmp(kv, "path=", 5))
			return strndup(kv + 5, (size_t)(stop - kv - 5));
		i += n;
	}
	return NULL;
}

static int tar_data(struct walk *w, gzFile gz, uint64_t size, bool pass_on)
{
	char buf[16 * BLOCK];
	uint64_t left = (size + BLOCK - 1) / BLOCK * BLOCK, data_left = size;
	while (left) {
		size_t n = left < sizeof(buf) ? (size_t)left : sizeof(buf);
		int r = gz_full(w, gz, buf, n);
		if (r <= 0)
			return r < 0 ? r : cell_err_msg(w->err, EINVAL, "the archive is cut short");
		size_t d = data_left < n ? (size_t)data_left : n;
		if (pass_on && d && (r = w->ops->data(w->cls, buf, d)) < 0)
			return r;
		data_left -= d;
		left -= n;
	}
	return 0;
}

static int walk_tar(struct walk *w, int fd)
{
	/* The dup shares fd's offset: both walks (and an upload just written) start at 0. */
	int dfd = dup(fd);
	if (dfd < 0 || lseek(dfd, 0, SEEK_SET) < 0) {
		if (dfd >= 0)
			close(dfd);
		return cell_err(w->err, errno, "the archive");
	}
	gzFile gz = gzdopen(dfd, "rb");
	if (!gz) {
		close(dfd);
		return cell_err(w->err, ENOMEM, "the archive");
	}
	gzbuffer(gz, 64 * 1024);
	unsigned char h[BLOCK];
	_cleanup_free_ char *long_name = NULL;
	int r = 0;
	for (;;) {
		/* The end of the stream where a header would be: an archive without its
		 * end-of-archive blocks, accepted as tar itself does. */
		r = gz_full(w, gz, h, BLOCK);
		if (r <= 0)
			break;
		bool zero = true;
		for (int i = 0; i < BLOCK && zero; i++)
			zero = h[i] == 0;
		if (zero) {
			r = 0;
			break;
		}
		if (!checksum_ok(h)) {
			r = cell_err_msg(w->err, EINVAL,
					 "not a tar archive inside the gzip stream (a header's "
					 "checksum is wrong)");
			break;
		}
		uint64_t size, mode = 0;
		char name[BLOCK];
		if (!memcmp(h + 257, "ustar\0", 6) && h[345]) {
			snprintf(name, sizeof(name), "%.155s/%.100s", (const char *)h + 345,
				 (const char *)h);
		} else {
			snprintf(name, sizeof(name), "%.100s", (const char *)h);
		}
		if (octal((const char *)h + 124, 12, &size) < 0 || size > SKILLPKG_TOTAL_MAX) {
			r = refuse(w, name, "a size out of range");
			break;
		}
		(void)octal((const char *)h + 100, 8, &mode);
		char type = (char)h[156];
		if (type == 'x' || type == 'L') {
			char *ext = NULL;
			if ((r = tar_read_ext(w, gz, size, &ext)) < 0)
				break;
			free(long_name);
			long_name = type == 'L' ? ext : pax_path(ext, size);
			if (type == 'x')
				free(ext);
			continue;
		}
		if (type == 'g') {
			if ((r = tar_data(w, gz, size, false)) < 0)
				break;
			continue;
		}
		const char *path = long_name ? long_name : name;
		enum skillpkg_kind kind = SKILLPKG_FILE;
		if (type == '0' || type == '\0' || type == '7')
			kind = SKILLPKG_FILE;
		else if (type == '5')
			kind = SKILLPKG_DIR;
		else if (type == '1' || type == 'K')
			r = refuse(w, path,
				   "a hard link (a skill holds regular files and directories "
				   "only)");
		else if (type == '2')
			r = refuse(w, path,
				   "a symbolic link (a skill holds regular files and "
				   "directories only)");
		else if (type == '3' || type == '4' || type == '6')
			r = refuse(w, path, "a device node or fifo");
		else
			r = refuse(w, path,
				   "an entry of tar type '%c' (only files and directories)",
				   type >= 0x20 && type < 0x7f ? type : '?');
		if (r < 0)
			break;
		if (kind == SKILLPKG_DIR && size) {
			r = refuse(w, path, "a directory with data");
			break;
		}
		int b = entry_begin(w, path, kind, (uint32_t)mode, size);
		if (b < 0) {
			r = b;
			break;
		}
		bool pass_on = w->ops && b == 0 && kind == SKILLPKG_FILE;
		if ((r = tar_data(w, gz, size, pass_on)) < 0)
			break;
		if (pass_on && (r = w->ops->end(w->cls)) < 0)
			break;
		free(long_name);
		long_name = NULL;
	}
	gzclose(gz);
	return r;
}

/* ---- zip ---- */

static uint16_t le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int pread_full(struct walk *w, int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return cell_err(w->err, errno, "reading the archive");
		if (n == 0)
			return cell_err_msg(w->err, EINVAL, "the zip archive is cut short");
		got += (size_t)n;
	}
	return 0;
}

/* One entry's bytes out (counted, CRC summed, handed on). */
static int zip_out(struct walk *w, const char *path, const unsigned char *buf, size_t n,
		   uint64_t *total, uint32_t usize, uLong *sum, bool pass_on)
{
	*total += n;
	if (*total > usize)
		return refuse(w, path, "inflates beyond the size its header says");
	*sum = crc32(*sum, buf, (uInt)n);
	int r = count_expanded(w, n);
	if (r == 0 && pass_on && n)
		r = w->ops->data(w->cls, buf, n);
	return r;
}

/* One entry's data: stored or raw deflate, at most usize bytes out, CRC checked. */
static int zip_data(struct walk *w, int fd, const char *path, uint64_t off, uint32_t csize,
		    uint32_t usize, uint16_t method, uint32_t crc, bool pass_on)
{
	unsigned char in[16384], out[32768];
	z_stream z = {0};
	if (method == 8 && inflateInit2(&z, -MAX_WBITS) != Z_OK)
		return cell_err(w->err, ENOMEM, "inflate");
	uint64_t in_left = csize, total = 0;
	uLong sum = crc32(0, Z_NULL, 0);
	int r = 0;
	for (;;) {
		if ((method == 0 || z.avail_in == 0) && in_left) {
			size_t n = in_left < sizeof(in) ? (size_t)in_left : sizeof(in);
			if ((r = pread_full(w, fd, in, n, off)) < 0)
				break;
			off += n;
			in_left -= n;
			if (method == 0) {
				if ((r = zip_out(w, path, in, n, &total, usize, &sum, pass_on)) < 0)
					break;
				continue;
			}
			z.next_in = in;
			z.avail_in = (uInt)n;
		}
		if (method == 0)
			break;
		z.next_out = out;
		z.avail_out = sizeof(out);
		int zr = inflate(&z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
			r = refuse(w, path, "corrupt deflate data");
			break;
		}
		size_t got = sizeof(out) - z.avail_out;
		if ((r = zip_out(w, path, out, got, &total, usize, &sum, pass_on)) < 0)
			break;
		if (zr == Z_STREAM_END)
			break;
		if (got == 0 && z.avail_in == 0 && in_left == 0) {
			r = refuse(w, path, "deflate data cut short");
			break;
		}
	}
	if (method == 8)
		inflateEnd(&z);
	if (r == 0 && total != usize)
		r = refuse(w, path, "%llu bytes where its header says %u",
			   (unsigned long long)total, usize);
	if (r == 0 && sum != crc)
		r = refuse(w, path, "a CRC mismatch");
	return r;
}

static int walk_zip(struct walk *w, int fd, uint64_t fsize)
{
	/* The end of central directory record: 22 bytes plus a comment of up to 64 KiB. */
	size_t tail = fsize < 22 + 65535 ? (size_t)fsize : 22 + 65535;
	_cleanup_free_ unsigned char *t = malloc(tail);
	if (!t)
		return cell_err(w->err, ENOMEM, "zip");
	int r = pread_full(w, fd, t, tail, fsize - tail);
	if (r < 0)
		return r;
	ssize_t eocd = -1;
	for (ssize_t i = (ssize_t)tail - 22; i >= 0; i--)
		if (!memcmp(t + i, "PK\x05\x06", 4)) {
			eocd = i;
			break;
		}
	if (eocd < 0)
		return cell_err_msg(w->err, EINVAL,
				    "not a zip archive (no end of central "
				    "directory)");
	const unsigned char *e = t + eocd;
	uint16_t count = le16(e + 10);
	uint32_t cd_size = le32(e + 12), cd_off = le32(e + 16);
	if (count == 0xffff || cd_off == 0xffffffff || cd_size == 0xffffffff)
		return cell_err_msg(w->err, EINVAL, "a zip64 archive (not supported)");
	if (le16(e + 4) || le16(e + 6) || le16(e + 8) != count)
		return cell_err_msg(w->err, EINVAL, "a multi-disk zip archive (not supported)");
	if (count > SKILLPKG_ENTRIES_MAX)
		return cell_err_msg(w->err, EINVAL, "more than %d entries in the archive",
				    SKILLPKG_ENTRIES_MAX);
	if ((uint64_t)cd_off + cd_size > fsize || cd_size > 8u << 20)
		return cell_err_msg(w->err, EINVAL, "the zip's central directory lies outside it");
	_cleanup_free_ unsigned char *cd = malloc(cd_size ? cd_size : 1);
	if (!cd)
		return cell_err(w->err, ENOMEM, "zip");
	if ((r = pread_full(w, fd, cd, cd_size, cd_off)) < 0)
		return r;
	size_t pos = 0;
	for (unsigned i = 0; i < count; i++) {
		if (pos + 46 > cd_size || memcmp(cd + pos, "PK\x01\x02", 4))
			return cell_err_msg(w->err, EINVAL,
					    "the zip's central directory is corrupt");
		const unsigned char *c = cd + pos;
		uint16_t made_by = le16(c + 4), flags = le16(c + 8), method = le16(c + 10);
		uint32_t crc = le32(c + 16), csize = le32(c + 20), usize = le32(c + 24);
		uint16_t nlen = le16(c + 28), xlen = le16(c + 30), clen = le16(c + 32);
		uint32_t ext_attr = le32(c + 38), loff = le32(c + 42);
		if (pos + 46 + nlen + xlen + clen > cd_size)
			return cell_err_msg(w->err, EINVAL,
					    "the zip's central directory is corrupt");
		char name[SKILLPKG_PATH_MAX + 2];
		if (nlen == 0 || nlen > SKILLPKG_PATH_MAX)
			return cell_err_msg(w->err, EINVAL, "a zip entry's name of %u bytes", nlen);
		memcpy(name, c + 46, nlen);
		name[nlen] = '\0';
		if (memchr(name, '\0', nlen))
			return refuse(w, name, "a NUL in its name");
		pos += 46u + nlen + xlen + clen;
		if (csize == 0xffffffff || usize == 0xffffffff || loff == 0xffffffff)
			return refuse(w, name, "zip64 sizes (not supported)");
		if (flags & 1)
			return refuse(w, name, "encrypted");
		if (method != 0 && method != 8)
			return refuse(w, name, "compression method %u (only stored and deflate)",
				      method);
		uint32_t mode = 0644;
		bool dir = name[nlen - 1] == '/';
		if ((made_by >> 8) == 3 && (ext_attr >> 16)) {
			uint32_t m = ext_attr >> 16;
			mode = m & 07777;
			if (S_ISLNK(m))
				return refuse(w, name,
					      "a symbolic link (a skill holds regular files "
					      "and directories only)");
			if (S_ISCHR(m) || S_ISBLK(m) || S_ISFIFO(m) || S_ISSOCK(m))
				return refuse(w, name, "a device node, fifo or socket");
			if (S_ISDIR(m))
				dir = true;
			else if (!S_ISREG(m))
				return refuse(w, name, "neither a file nor a directory");
		}
		if (dir && usize)
			return refuse(w, name, "a directory with data");
		if (dir) {
			name[nlen - (name[nlen - 1] == '/')] = '\0';
		}
		int b = entry_begin(w, name, dir ? SKILLPKG_DIR : SKILLPKG_FILE, mode, usize);
		if (b < 0)
			return b;
		if (dir)
			continue;
		unsigned char lh[30];
		if ((uint64_t)loff + 30 > fsize || (r = pread_full(w, fd, lh, 30, loff)) < 0)
			return r < 0 ? r
				     : refuse(w, name, "its local header lies outside the archive");
		if (memcmp(lh, "PK\x03\x04", 4))
			return refuse(w, name, "a corrupt local header");
		uint64_t doff = (uint64_t)loff + 30 + le16(lh + 26) + le16(lh + 28);
		if (doff + csize > fsize)
			return refuse(w, name, "its data lies outside the archive");
		bool pass_on = w->ops && b == 0;
		if ((r = zip_data(w, fd, name, doff, csize, usize, method, crc, pass_on)) < 0)
			return r;
		if (pass_on && (r = w->ops->end(w->cls)) < 0)
			return r;
	}
	return 0;
}

/* ---- both ---- */

static int walk(struct walk *w, int fd, bool zip)
{
	return zip ? walk_zip(w, fd, w->info->file_size) : walk_tar(w, fd);
}

int skillpkg_scan(int fd, const struct skillpkg_ops *ops, void *cls, struct skillpkg_info *info,
		  struct cell_error *err)
{
	memset(info, 0, sizeof(*info));
	struct stat st;
	if (fstat(fd, &st) < 0)
		return cell_err(err, errno, "the archive");
	unsigned char magic[4] = {0};
	if (st.st_size < 4 || pread(fd, magic, 4, 0) != 4)
		return cell_err_msg(err, EINVAL, "the file is not a tar.gz or zip archive");
	bool zip;
	if (magic[0] == 0x1f && magic[1] == 0x8b)
		zip = false;
	else if (!memcmp(magic, "PK\x03\x04", 4) || !memcmp(magic, "PK\x05\x06", 4))
		zip = true;
	else
		return cell_err_msg(err, EINVAL, "the file is not a tar.gz or zip archive");
	snprintf(info->format, sizeof(info->format), "%s", zip ? "zip" : "tar.gz");
	info->file_size = (uint64_t)st.st_size;
	uint64_t cap = info->file_size * SKILLPKG_RATIO_MAX;
	if (cap < SKILLPKG_RATIO_FLOOR)
		cap = SKILLPKG_RATIO_FLOOR;
	/* Headers and padding count too: a tar of the largest total stays below the cap. */
	if (cap > SKILLPKG_TOTAL_MAX + SKILLPKG_TOTAL_MAX / 8)
		cap = SKILLPKG_TOTAL_MAX + SKILLPKG_TOTAL_MAX / 8;
	struct walk w = {.info = info, .err = err, .cap = cap};
	int r = walk(&w, fd, zip);
	if (r < 0)
		return r;
	if (w.top_entrypoint)
		info->prefix[0] = '\0';
	else if (!w.mixed && w.first[0] && w.nested_entrypoint)
		snprintf(info->prefix, sizeof(info->prefix), "%s/", w.first);
	else
		return cell_err_msg(err, EINVAL,
				    "entry 'entrypoint.sh': missing (it must be at the archive's "
				    "top or in its single top directory)");
	if (!ops)
		return 0;
	struct walk w2 = {.ops = ops, .cls = cls, .info = info, .err = err, .cap = cap};
	return walk(&w2, fd, zip);
}
