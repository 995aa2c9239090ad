/* An image layer unpacked by src/celld/layer_unpack.c, from tar streams the suite writes
 * with libarchive: a layer of every kind of entry (owners, set-id and sticky modes, xattrs,
 * file capabilities, times, a UTF-8 pax name), plain, gzip and zstd with their digests,
 * whiteouts and opaque directories, later entries replacing earlier ones, a sparse file,
 * directories implied by an entry below them; and the hostile battery: each refusal names
 * the entry, leaves the sentinel directory beside the layer as it was, and
 * layer_remove_all leaves nothing. Runs as root (owners, device nodes, trusted xattrs). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <locale.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include "../../src/celld/layer_unpack.h"
#include "cell/cleanup.h"
#include "unit.h"

/* The suite's dir (made and removed by the parent process, so a failed test's files go
 * too) and the one test's dir in it. */
static char top[] = "/tmp/test_layer_unpack.XXXXXX";
static char dir[96];
static int tfd = -1; /* dir */

static const struct layer_limits LIM = {
    .max_bytes = 1ull << 30,
    .max_entries = 100000,
    .max_file_bytes = 256ull << 20,
    .max_depth = 128,
};

#define MTIME 1000000000

/* One entry to write. mode holds the type; data is a file's content or a symlink's target. */
struct ent {
	const char *path;
	mode_t mode;
	const char *data;
	const char *hard; /* a hard link's target */
	int64_t uid, gid;
	unsigned rmaj, rmin;
	time_t mtime;
	const char *xname; /* one xattr */
	const void *xval;
	size_t xlen;
};

static void put(struct archive *a, const struct ent *x)
{
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, x->path);
	archive_entry_set_mode(e, x->mode);
	archive_entry_set_uid(e, x->uid);
	archive_entry_set_gid(e, x->gid);
	archive_entry_set_mtime(e, x->mtime ? x->mtime : MTIME, 0);
	size_t len = 0;
	if (x->hard) {
		archive_entry_set_hardlink(e, x->hard);
	} else if (S_ISLNK(x->mode)) {
		archive_entry_set_symlink(e, x->data);
	} else if (S_ISREG(x->mode) && x->data) {
		len = strlen(x->data);
	} else if (S_ISCHR(x->mode) || S_ISBLK(x->mode)) {
		archive_entry_set_rdevmajor(e, x->rmaj);
		archive_entry_set_rdevminor(e, x->rmin);
	}
	archive_entry_set_size(e, (la_int64_t)len);
	if (x->xname)
		archive_entry_xattr_add_entry(e, x->xname, x->xval, x->xlen);
	ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
	if (len)
		ck_assert_int_eq(archive_write_data(a, x->data, len), (la_ssize_t)len);
	archive_entry_free(e);
}

/* A pax writer on fd; filter NULL, "gzip" or "zstd". */
static struct archive *writer(int fd, const char *filter)
{
	struct archive *a = archive_write_new();
	ck_assert_int_eq(archive_write_set_format_pax(a), ARCHIVE_OK);
	if (filter && !strcmp(filter, "gzip"))
		ck_assert_int_eq(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	if (filter && !strcmp(filter, "zstd"))
		ck_assert_int_eq(archive_write_add_filter_zstd(a), ARCHIVE_OK);
	ck_assert_int_eq(archive_write_open_fd(a, fd), ARCHIVE_OK);
	return a;
}

static int create_at(const char *name)
{
	int fd = openat(tfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static void finish(struct archive *a, int fd)
{
	ck_assert_int_eq(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	close(fd);
}

/* Writes the entries (until a NULL path) as t.tar. The writer runs in C.UTF-8 (pax names
 * are UTF-8); the suite, like celld, in C, so the unpacking must switch on its own. */
static void layer_file(const struct ent *ents, const char *filter)
{
	locale_t utf8 = newlocale(LC_ALL_MASK, "C.UTF-8", (locale_t)0);
	ck_assert_ptr_nonnull(utf8);
	locale_t old = uselocale(utf8);
	int fd = create_at("t.tar");
	struct archive *a = writer(fd, filter);
	for (const struct ent *x = ents; x->path; x++)
		put(a, x);
	finish(a, fd);
	uselocale(old);
	freelocale(utf8);
}

/* A fresh "layer" directory, t.tar unpacked into it over parents. */
static int unpack_over(const int *parents, size_t n, const struct layer_limits *lim,
		       struct layer_stats *st, struct cell_error *err)
{
	struct cell_error e = {0};
	ck_assert_int_eq(layer_remove_all(tfd, "layer", &e), 0);
	ck_assert_int_eq(mkdirat(tfd, "layer", 0755), 0);
	int lfd = openat(tfd, "layer", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd = openat(tfd, "t.tar", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_ge(fd, 0);
	int r = layer_unpack_over(fd, lfd, parents, n, lim, st, err);
	close(fd);
	close(lfd);
	return r;
}

static int unpack(const struct layer_limits *lim, struct layer_stats *st, struct cell_error *err)
{
	return unpack_over(NULL, 0, lim, st, err);
}

static void unpacked(struct layer_stats *st)
{
	struct cell_error err = {0};
	int r = unpack(&LIM, st, &err);
	ck_assert_msg(r == 0, "unpack: %d %s", r, err.msg);
}

static struct stat lstat_in(const char *path)
{
	char p[512];
	snprintf(p, sizeof(p), "layer/%s", path);
	struct stat sb;
	ck_assert_msg(fstatat(tfd, p, &sb, AT_SYMLINK_NOFOLLOW) == 0, "%s: %s", p, strerror(errno));
	return sb;
}

static void content_is(const char *path, const char *want)
{
	char p[512], buf[256] = {0};
	snprintf(p, sizeof(p), "layer/%s", path);
	int fd = openat(tfd, p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_int_ge(n, 0);
	ck_assert_str_eq(buf, want);
}

static ssize_t xattr_of(const char *path, const char *name, void *buf, size_t size)
{
	char p[700];
	snprintf(p, sizeof(p), "%s/layer/%s", dir, path);
	return lgetxattr(p, name, buf, size);
}

static void sha256_hex(const void *data, size_t len, char out[72])
{
	unsigned char md[32];
	unsigned n = 0;
	EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
	int o = snprintf(out, 72, "sha256:");
	for (unsigned i = 0; i < n; i++)
		o += snprintf(out + o, 72 - (size_t)o, "%02x", md[i]);
}

static size_t read_all(const char *name, char *buf, size_t size)
{
	int fd = openat(tfd, name, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	size_t len = 0;
	ssize_t n;
	while ((n = read(fd, buf + len, size - len)) > 0)
		len += (size_t)n;
	close(fd);
	ck_assert_uint_lt(len, size);
	return len;
}

static void write_all(const char *name, const void *buf, size_t len)
{
	int fd = create_at(name);
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* A v2 capability: cap_net_bind_service, permitted and effective. */
static const unsigned char CAP_V2[XATTR_CAPS_SZ_2] = {
    0x01, 0x00, 0x00, 0x02, /* VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE */
    0x00, 0x04, 0x00, 0x00, /* permitted[0]: bit 10 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

START_TEST(normal_layer_of_every_kind)
{
	const struct ent ents[] = {
	    {.path = "./", .mode = S_IFDIR | 0755},
	    {.path = "bin/", .mode = S_IFDIR | 0755},
	    {.path = "bin/tool",
	     .mode = S_IFREG | 04755,
	     .data = "#!/bin/sh\n",
	     .xname = "security.capability",
	     .xval = CAP_V2,
	     .xlen = sizeof(CAP_V2)},
	    {.path = "home/sandbox/",
	     .mode = S_IFDIR | 0750,
	     .uid = 1000,
	     .gid = 1000,
	     .mtime = 1234567890},
	    {.path = "home/sandbox/file",
	     .mode = S_IFREG | 0640,
	     .data = "hello",
	     .uid = 1000,
	     .gid = 1000,
	     .mtime = 1111111111,
	     .xname = "user.note",
	     .xval = "n",
	     .xlen = 1},
	    {.path = "home/sandbox/label",
	     .mode = S_IFREG | 0644,
	     .data = "",
	     .xname = "security.selinux",
	     .xval = "x",
	     .xlen = 1},
	    {.path = "home/sandbox/link", .mode = S_IFLNK | 0777, .data = "/etc/passwd"},
	    {.path = "home/sandbox/hard", .mode = S_IFREG | 0640, .hard = "home/sandbox/file"},
	    {.path = "tmp", .mode = S_IFDIR | 01777},
	    {.path = "srv", .mode = S_IFDIR | 02775, .gid = 50},
	    {.path = "run/fifo", .mode = S_IFIFO | 0620, .uid = 7, .gid = 8},
	    {.path = "\xc3\xbcn\xc3\xaf/\xc3\xa7\xc3\xb8"
		     "d\xc3\xa9",
	     .mode = S_IFREG | 0644,
	     .data = "utf8"},
	    {0},
	};
	layer_file(ents, NULL);
	struct layer_stats st;
	unpacked(&st);
	ck_assert_uint_eq(st.entries, 12);
	ck_assert_uint_eq(st.files, 4);
	/* ./ bin home/sandbox tmp srv, implied home run ün\xc3\xaf */
	ck_assert_uint_eq(st.dirs, 8);
	ck_assert_uint_eq(st.symlinks, 1);
	ck_assert_uint_eq(st.links, 1);
	ck_assert_uint_eq(st.fifos, 1);
	ck_assert_uint_eq(st.xattrs_dropped, 1);
	ck_assert_uint_eq(st.bytes, strlen("#!/bin/sh\n") + 5 + 4);

	struct stat sb = lstat_in("bin/tool");
	ck_assert_uint_eq(sb.st_mode, S_IFREG | 04755);
	content_is("bin/tool", "#!/bin/sh\n");
	unsigned char cap[64];
	ssize_t n = xattr_of("bin/tool", "security.capability", cap, sizeof(cap));
	/* Version 3 with rootid 0 (the kernel may keep a rootid-0 one as version 2). */
	ck_assert_msg(n == XATTR_CAPS_SZ_2 || n == XATTR_CAPS_SZ_3, "capability of %zd bytes", n);
	ck_assert_uint_eq(cap[4], 0x00);
	ck_assert_uint_eq(cap[5], 0x04);
	ck_assert_uint_eq(cap[0], 0x01); /* effective */
	if (n == XATTR_CAPS_SZ_3)
		ck_assert(!cap[20] && !cap[21] && !cap[22] && !cap[23]);

	sb = lstat_in("home/sandbox");
	ck_assert_uint_eq(sb.st_mode, S_IFDIR | 0750);
	ck_assert_uint_eq(sb.st_uid, 1000);
	ck_assert_uint_eq(sb.st_gid, 1000);
	ck_assert_int_eq(sb.st_mtim.tv_sec, 1234567890); /* set after its files were made */
	sb = lstat_in("home");
	ck_assert_uint_eq(sb.st_mode, S_IFDIR | 0755);
	ck_assert_uint_eq(sb.st_uid, 0);

	sb = lstat_in("home/sandbox/file");
	ck_assert_uint_eq(sb.st_mode, S_IFREG | 0640);
	ck_assert_uint_eq(sb.st_uid, 1000);
	ck_assert_int_eq(sb.st_mtim.tv_sec, 1111111111);
	ck_assert_uint_eq(sb.st_nlink, 2);
	char v[8] = {0};
	ck_assert_int_eq(xattr_of("home/sandbox/file", "user.note", v, sizeof(v)), 1);
	ck_assert_str_eq(v, "n");
	content_is("home/sandbox/file", "hello");
	ck_assert_uint_eq(lstat_in("home/sandbox/hard").st_ino, sb.st_ino);
	ck_assert_int_lt(xattr_of("home/sandbox/label", "security.selinux", v, sizeof(v)), 1);

	char target[64] = {0};
	ck_assert_int_eq(readlinkat(tfd, "layer/home/sandbox/link", target, sizeof(target)), 11);
	ck_assert_str_eq(target, "/etc/passwd");
	ck_assert_uint_eq(lstat_in("tmp").st_mode, S_IFDIR | 01777);
	sb = lstat_in("srv");
	ck_assert_uint_eq(sb.st_mode, S_IFDIR | 02775);
	ck_assert_uint_eq(sb.st_gid, 50);
	sb = lstat_in("run/fifo");
	ck_assert_uint_eq(sb.st_mode, S_IFIFO | 0620);
	ck_assert_uint_eq(sb.st_uid, 7);
	ck_assert_uint_eq(sb.st_gid, 8);
	content_is("\xc3\xbcn\xc3\xaf/\xc3\xa7\xc3\xb8"
		   "d\xc3\xa9",
		   "utf8");
}
END_TEST

/* t.tar's bytes compressed into name (libarchive's raw format: the bytes as they are). */
static void compress(const char *tar, size_t len, const char *name, const char *filter)
{
	int fd = create_at(name);
	struct archive *a = archive_write_new();
	ck_assert_int_eq(archive_write_set_format_raw(a), ARCHIVE_OK);
	if (!strcmp(filter, "gzip"))
		ck_assert_int_eq(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	else
		ck_assert_int_eq(archive_write_add_filter_zstd(a), ARCHIVE_OK);
	ck_assert_int_eq(archive_write_open_fd(a, fd), ARCHIVE_OK);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, "data");
	archive_entry_set_mode(e, S_IFREG | 0644);
	ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
	ck_assert_int_eq(archive_write_data(a, tar, len), (la_ssize_t)len);
	archive_entry_free(e);
	finish(a, fd);
}

static char big[4 << 20];

START_TEST(plain_gzip_zstd_digests)
{
	const struct ent ents[] = {
	    {.path = "etc/os-release", .mode = S_IFREG | 0644, .data = "ID=test\n"},
	    {.path = "usr/bin/x", .mode = S_IFREG | 0755, .data = "binary"},
	    {0},
	};
	layer_file(ents, NULL);
	static char tar[1 << 20], blob[1 << 20];
	size_t len = read_all("t.tar", tar, sizeof(tar));
	char diff_id[72], blob_digest[72];
	sha256_hex(tar, len, diff_id);
	/* Empty layers exist (a gzip of 1024 zero bytes is a common one). */
	static const char empty[1024];
	const char *kinds[] = {"plain", "gzip", "zstd", "empty"};
	for (size_t k = 0; k < 4; k++) {
		if (k == 1 || k == 2) {
			compress(tar, len, "c", kinds[k]);
			size_t clen = read_all("c", blob, sizeof(blob));
			write_all("t.tar", blob, clen);
			sha256_hex(blob, clen, blob_digest);
		} else if (k == 3) {
			compress(empty, sizeof(empty), "c", "gzip");
			size_t clen = read_all("c", blob, sizeof(blob));
			write_all("t.tar", blob, clen);
			sha256_hex(blob, clen, blob_digest);
			sha256_hex(empty, sizeof(empty), diff_id);
		} else {
			sha256_hex(tar, len, blob_digest);
		}
		struct layer_stats st;
		unpacked(&st);
		ck_assert_msg(!strcmp(st.diff_id, diff_id), "%s: diffID %s, want %s", kinds[k],
			      st.diff_id, diff_id);
		ck_assert_msg(!strcmp(st.blob_digest, blob_digest), "%s: blob %s, want %s",
			      kinds[k], st.blob_digest, blob_digest);
		if (k < 3) {
			ck_assert_uint_eq(st.files, 2);
			content_is("etc/os-release", "ID=test\n");
		} else {
			ck_assert_uint_eq(st.entries, 0);
		}
	}
}
END_TEST

static void is_whiteout(const char *path)
{
	struct stat sb = lstat_in(path);
	ck_assert_msg(S_ISCHR(sb.st_mode) && sb.st_rdev == makedev(0, 0), "%s: not a whiteout",
		      path);
	ck_assert_uint_eq(sb.st_uid, 0);
}

START_TEST(whiteouts_and_opaque_dirs)
{
	const struct ent ents[] = {
	    {.path = ".wh.gone", .mode = S_IFREG | 0644, .data = ""},
	    {.path = "d/.wh..wh..opq", .mode = S_IFREG | 0644, .data = ""},
	    {.path = "d/keep", .mode = S_IFREG | 0644, .data = "k"},
	    {.path = "cdev", .mode = S_IFCHR | 0600},
	    {.path = "x", .mode = S_IFREG | 0644, .data = "x"},
	    {.path = ".wh.x", .mode = S_IFREG | 0644, .data = ""},
	    {.path = "e/.wh.sub", .mode = S_IFREG | 0644, .data = ""},
	    {0},
	};
	layer_file(ents, NULL);
	struct layer_stats st;
	unpacked(&st);
	is_whiteout("gone");
	is_whiteout("cdev");
	is_whiteout("x");
	is_whiteout("e/sub");
	char v[4] = {0};
	ck_assert_int_eq(xattr_of("d", "trusted.overlay.opaque", v, sizeof(v)), 1);
	ck_assert_str_eq(v, "y");
	content_is("d/keep", "k");
	ck_assert_int_lt(fstatat(tfd, "layer/.wh.gone", &(struct stat){0}, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert_uint_eq(st.whiteouts, 5);
}
END_TEST

START_TEST(later_entries_replace_earlier_ones)
{
	const struct ent ents[] = {
	    {.path = "a", .mode = S_IFREG | 0644, .data = "one"},
	    {.path = "a", .mode = S_IFREG | 0600, .data = "two"},
	    {.path = "d", .mode = S_IFDIR | 0700},
	    {.path = "d/c", .mode = S_IFREG | 0644, .data = "c"},
	    {.path = "d", .mode = S_IFDIR | 0755, .uid = 3},
	    {.path = "x", .mode = S_IFREG | 0644, .data = "x"},
	    {.path = "x", .mode = S_IFDIR | 0755},
	    {.path = "y/z", .mode = S_IFREG | 0644, .data = "z"},
	    {.path = "y", .mode = S_IFREG | 0644, .data = "y"},
	    {.path = "l", .mode = S_IFLNK | 0777, .data = "a"},
	    {.path = "l", .mode = S_IFREG | 0644, .data = "l"},
	    {0},
	};
	layer_file(ents, NULL);
	struct layer_stats st;
	unpacked(&st);
	content_is("a", "two");
	ck_assert_uint_eq(lstat_in("a").st_mode, S_IFREG | 0600);
	struct stat sb = lstat_in("d");
	ck_assert_uint_eq(sb.st_mode, S_IFDIR | 0755);
	ck_assert_uint_eq(sb.st_uid, 3);
	content_is("d/c", "c");
	ck_assert(S_ISDIR(lstat_in("x").st_mode));
	content_is("y", "y");
	content_is("l", "l");
}
END_TEST

START_TEST(sparse_file_written_sparse)
{
	const uint64_t size = 64ull << 20, chunk = 1 << 20;
	int fd = create_at("t.tar");
	struct archive *a = writer(fd, "gzip");
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, "sparse");
	archive_entry_set_mode(e, S_IFREG | 0644);
	archive_entry_set_size(e, (la_int64_t)size);
	archive_entry_sparse_add_entry(e, 0, (la_int64_t)chunk);
	archive_entry_sparse_add_entry(e, 32 * chunk, (la_int64_t)chunk);
	ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
	for (uint64_t off = 0; off < size; off += chunk) {
		memset(big, off == 0 ? 'A' : off == 32 * chunk ? 'B' : 0, chunk);
		ck_assert_int_eq(archive_write_data(a, big, chunk), (la_ssize_t)chunk);
	}
	archive_entry_free(e);
	finish(a, fd);
	struct layer_stats st;
	unpacked(&st);
	ck_assert_uint_eq(st.bytes, size);
	struct stat sb = lstat_in("sparse");
	ck_assert_uint_eq((uint64_t)sb.st_size, size);
	ck_assert_msg((uint64_t)sb.st_blocks * 512 <= 8 * chunk, "%lld blocks: not sparse",
		      (long long)sb.st_blocks);
	fd = openat(tfd, "layer/sparse", O_RDONLY | O_CLOEXEC);
	char c[3];
	ck_assert_int_eq(pread(fd, &c[0], 1, 0), 1);
	ck_assert_int_eq(pread(fd, &c[1], 1, (off_t)(32 * chunk + 5)), 1);
	ck_assert_int_eq(pread(fd, &c[2], 1, (off_t)(10 * chunk)), 1);
	close(fd);
	ck_assert(c[0] == 'A' && c[1] == 'B' && c[2] == 0);
}
END_TEST

static void mkdir_owned(const char *path, uid_t uid, mode_t mode, time_t mtime)
{
	ck_assert_int_eq(mkdirat(tfd, path, 0700), 0);
	ck_assert_int_eq(fchownat(tfd, path, uid, uid, 0), 0);
	ck_assert_int_eq(fchmodat(tfd, path, mode, 0), 0);
	struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
	ck_assert_int_eq(utimensat(tfd, path, ts, 0), 0);
}

START_TEST(implied_directories_take_the_layer_below)
{
	/* The layer below: home 0755 root, home/sandbox 1000:1000 0750. */
	mkdir_owned("lower", 0, 0755, MTIME);
	mkdir_owned("lower/home", 0, 0755, MTIME);
	mkdir_owned("lower/home/sandbox", 1000, 0750, 1222333444);
	/* A layer above it that whited home/sandbox out, and one that made home opaque. */
	mkdir_owned("wh", 0, 0755, MTIME);
	mkdir_owned("wh/home", 0, 0755, MTIME);
	ck_assert_int_eq(mknodat(tfd, "wh/home/sandbox", S_IFCHR, makedev(0, 0)), 0);
	mkdir_owned("opq", 0, 0755, MTIME);
	mkdir_owned("opq/home", 0, 0755, MTIME);
	int home = openat(tfd, "opq/home", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_eq(fsetxattr(home, "trusted.overlay.opaque", "y", 1, 0), 0);
	close(home);
	mkdir_owned("empty", 0, 0755, MTIME);
	int lower = openat(tfd, "lower", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int wh = openat(tfd, "wh", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int opq = openat(tfd, "opq", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int empty = openat(tfd, "empty", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert(lower >= 0 && wh >= 0 && opq >= 0 && empty >= 0);

	const struct ent ents[] = {
	    {.path = "home/sandbox/entrypoint.sh",
	     .mode = S_IFREG | 0755,
	     .data = "#!/bin/sh\n",
	     .uid = 1000,
	     .gid = 1000},
	    {0},
	};
	layer_file(ents, "gzip");
	struct {
		int parents[2];
		size_t n;
		uid_t uid;
		mode_t mode;
	} cases[] = {
	    {{lower}, 1, 1000, 0750},	     /* the layer below's */
	    {{empty, lower}, 2, 1000, 0750}, /* the first that has it */
	    {{0}, 0, 0, 0755},		     /* no layer below: root's 0755 */
	    {{wh, lower}, 2, 0, 0755},	     /* whited out above */
	    {{opq, lower}, 2, 0, 0755},	     /* under an opaque directory above */
	};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(cases); i++) {
		struct layer_stats st;
		struct cell_error err = {0};
		int r = unpack_over(cases[i].parents, cases[i].n, &LIM, &st, &err);
		ck_assert_msg(r == 0, "case %zu: %d %s", i, r, err.msg);
		struct stat sb = lstat_in("home/sandbox");
		ck_assert_msg(sb.st_uid == cases[i].uid && sb.st_gid == cases[i].uid &&
				  (sb.st_mode & 07777) == cases[i].mode,
			      "case %zu: %u:%u %o", i, sb.st_uid, sb.st_gid, sb.st_mode & 07777);
		if (cases[i].uid)
			ck_assert_int_eq(sb.st_mtim.tv_sec, 1222333444);
		sb = lstat_in("home");
		ck_assert_uint_eq(sb.st_uid, 0);
		ck_assert_uint_eq(sb.st_mode & 07777, 0755);
		sb = lstat_in("home/sandbox/entrypoint.sh");
		ck_assert_uint_eq(sb.st_uid, 1000);
	}
	close(lower);
	close(wh);
	close(opq);
	close(empty);
}
END_TEST

/* ---- the hostile battery ----------------------------------------------------------------- */

/* The sentinel beside the layer is as it was, the temp dir holds nothing new, and
 * layer_remove_all leaves nothing of the layer. */
static void nothing_escaped(const char *label)
{
	char buf[64] = {0};
	int fd = openat(tfd, "sentinel/keep", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(read(fd, buf, sizeof(buf) - 1), 9);
	close(fd);
	ck_assert_msg(!strcmp(buf, "sentinel\n"), "%s: the sentinel was written", label);
	struct stat sb;
	ck_assert_int_eq(fstatat(tfd, "sentinel/keep", &sb, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert_msg(sb.st_nlink == 1 && sb.st_mode == (S_IFREG | 0644) && sb.st_uid == 0,
		      "%s: the sentinel was linked or changed", label);
	int dfd = openat(tfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	while ((de = readdir(d)))
		ck_assert_msg(!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
				  !strcmp(de->d_name, "sentinel") || !strcmp(de->d_name, "layer") ||
				  !strcmp(de->d_name, "t.tar"),
			      "%s: '%s' made beside the layer", label, de->d_name);
	closedir(d);
	d = fdopendir(openat(tfd, "sentinel", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	int n = 0;
	while ((de = readdir(d)))
		n++;
	closedir(d);
	ck_assert_msg(n == 3, "%s: something made in the sentinel", label);
	struct cell_error err = {0};
	ck_assert_int_eq(layer_remove_all(tfd, "layer", &err), 0);
	ck_assert_int_lt(fstatat(tfd, "layer", &sb, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert_int_eq(errno, ENOENT);
}

/* t.tar unpacked: refused with rc, a message holding needle, nothing escaped. */
static void refused_as(const char *label, const struct layer_limits *lim, int rc,
		       const char *needle)
{
	struct layer_stats st;
	struct cell_error err = {0};
	int r = unpack(lim, &st, &err);
	ck_assert_msg(r == rc, "%s: unpack returned %d, not %d (%s)", label, r, rc, err.msg);
	ck_assert_msg(strstr(err.msg, needle), "%s: '%s' does not say \"%s\"", label, err.msg,
		      needle);
	nothing_escaped(label);
}

static char abs_path[128], sentinel_path[128], name300[301], deep[300 * 2 + 8];

static const unsigned char CAP_V3_ROOT1000[XATTR_CAPS_SZ_3] = {
    0x01, 0x00, 0x00, 0x03, 0x00, 0x04, 0x00, 0x00, 0,	  0,	0, 0,
    0,	  0,	0,    0,    0,	  0,	0,    0,    0xe8, 0x03, 0, 0,
};

START_TEST(hostile_entries_refused)
{
	struct {
		const char *label;
		struct ent ents[4];
		const char *needle;
	} cases[] = {
	    {"dotdot",
	     {{.path = "../x", .mode = S_IFREG | 0644, .data = "x"}},
	     "entry '../x': '..'"},
	    {"absolute",
	     {{.path = abs_path, .mode = S_IFREG | 0644, .data = "x"}},
	     "an absolute path"},
	    {"dotdot inside",
	     {{.path = "a/../../x", .mode = S_IFREG | 0644, .data = "x"}},
	     "entry 'a/../../x': '..'"},
	    {"write through a symlink",
	     {{.path = "s", .mode = S_IFLNK | 0777, .data = sentinel_path},
	      {.path = "s/keep", .mode = S_IFREG | 0644, .data = "pwned"}},
	     "entry 's/keep': through the symlink 's'"},
	    {"symlink to /etc then s/passwd",
	     {{.path = "s", .mode = S_IFLNK | 0777, .data = "/etc"},
	      {.path = "s/passwd", .mode = S_IFREG | 0644, .data = "pwned"}},
	     "entry 's/passwd': through the symlink 's'"},
	    {"hard link through a symlink",
	     {{.path = "s", .mode = S_IFLNK | 0777, .data = sentinel_path},
	      {.path = "h", .mode = S_IFREG | 0644, .hard = "s/keep"}},
	     "entry 'h': hard link to 's/keep'"},
	    {"hard link through a symlink that replaced a directory",
	     {{.path = "s/keep", .mode = S_IFREG | 0644, .data = "k"},
	      {.path = "s", .mode = S_IFLNK | 0777, .data = sentinel_path},
	      {.path = "h", .mode = S_IFREG | 0644, .hard = "s/keep"}},
	     "entry 'h': hard link to 's/keep': through the symlink 's'"},
	    {"hard link placed through a symlink",
	     {{.path = "f", .mode = S_IFREG | 0644, .data = "f"},
	      {.path = "s", .mode = S_IFLNK | 0777, .data = sentinel_path},
	      {.path = "s/h", .mode = S_IFREG | 0644, .hard = "f"}},
	     "entry 's/h': through the symlink 's'"},
	    {"hard link outside",
	     {{.path = "h", .mode = S_IFREG | 0644, .hard = "../sentinel/keep"}},
	     "entry 'h': hard link to '../sentinel/keep': '..'"},
	    {"hard link to a later entry",
	     {{.path = "h", .mode = S_IFREG | 0644, .hard = "later"},
	      {.path = "later", .mode = S_IFREG | 0644, .data = "l"}},
	     "entry 'h': hard link to 'later': not an earlier entry"},
	    {"character device",
	     {{.path = "null", .mode = S_IFCHR | 0666, .rmaj = 1, .rmin = 3}},
	     "entry 'null': a device node (1:3)"},
	    {"block device",
	     {{.path = "dev/sda", .mode = S_IFBLK | 0660, .rmaj = 8}},
	     "entry 'dev/sda': a device node (8:0)"},
	    {"unknown whiteout",
	     {{.path = "d/.wh..wh.bad", .mode = S_IFREG | 0644, .data = ""}},
	     "entry 'd/.wh..wh.bad': an unknown whiteout kind"},
	    {"uid 70000",
	     {{.path = "u", .mode = S_IFREG | 0644, .data = "u", .uid = 70000}},
	     "entry 'u': owner 70000:0"},
	    {"300-byte name",
	     {{.path = name300, .mode = S_IFREG | 0644, .data = "n"}},
	     "a name over 255 bytes"},
	    {"depth 300",
	     {{.path = deep, .mode = S_IFREG | 0644, .data = "d"}},
	     "more than 128 path"},
	    {"through a file",
	     {{.path = "f", .mode = S_IFREG | 0644, .data = "f"},
	      {.path = "f/x", .mode = S_IFREG | 0644, .data = "x"}},
	     "entry 'f/x': through 'f', not a directory"},
	    {"trusted xattr",
	     {{.path = "t",
	       .mode = S_IFDIR | 0755,
	       .xname = "trusted.overlay.redirect",
	       .xval = "/x",
	       .xlen = 2}},
	     "entry 't/': the xattr 'trusted.overlay.redirect'"},
	    {"capability of another rootid",
	     {{.path = "c",
	       .mode = S_IFREG | 0755,
	       .data = "c",
	       .xname = "security.capability",
	       .xval = CAP_V3_ROOT1000,
	       .xlen = sizeof(CAP_V3_ROOT1000)}},
	     "entry 'c': a security.capability of rootid 1000"},
	    {"non-ASCII named",
	     {{.path = "\xc3\xa9/../x", .mode = S_IFREG | 0644, .data = "x"}},
	     "entry '\\xc3\\xa9/../x'"},
	};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(cases); i++) {
		layer_file(cases[i].ents, i % 2 ? "gzip" : NULL);
		refused_as(cases[i].label, &LIM, -EINVAL, cases[i].needle);
	}
}
END_TEST

START_TEST(too_many_entries_refused)
{
	int fd = create_at("t.tar");
	struct archive *a = writer(fd, "gzip");
	for (int i = 0; i < 1000; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%d", i);
		put(a, &(struct ent){.path = name, .mode = S_IFREG | 0644, .data = "x"});
	}
	finish(a, fd);
	struct layer_limits lim = LIM;
	lim.max_entries = 100;
	refused_as("many entries", &lim, -EFBIG, "entry 'f100': more than 100 entries");
}
END_TEST

START_TEST(sparse_terabyte_refused)
{
	/* The header alone: it is refused before any of its data is read. */
	static char buf[64 << 10];
	size_t used = 0;
	struct archive *a = archive_write_new();
	ck_assert_int_eq(archive_write_set_format_pax(a), ARCHIVE_OK);
	ck_assert_int_eq(archive_write_set_bytes_per_block(a, 0), ARCHIVE_OK);
	ck_assert_int_eq(archive_write_open_memory(a, buf, sizeof(buf), &used), ARCHIVE_OK);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, "huge");
	archive_entry_set_mode(e, S_IFREG | 0644);
	archive_entry_set_size(e, 1ll << 40);
	archive_entry_sparse_add_entry(e, 0, 4096);
	ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
	archive_entry_free(e);
	ck_assert_int_eq(archive_write_data(a, big, 4096), 4096);
	size_t len = used;
	ck_assert_uint_gt(len, 512);
	write_all("t.tar", buf, len);
	archive_write_free(a);
	refused_as("sparse 1 TB", &LIM, -EFBIG, "entry 'huge': 1099511627776 bytes, over the");
}
END_TEST

/* A gzip bomb written lazily into a pipe: kind 0, 1 MiB files of zeros without end; kind 1,
 * a small tar and then zeros without end. Stops when the reader is gone. */
static size_t small_len;

struct bomb {
	int fd, kind;
	uint64_t written; /* uncompressed */
};

static void *bomb_writer(void *arg)
{
	struct bomb *b = arg;
	static char zeros[1 << 20];
	struct archive *a = archive_write_new();
	if (b->kind == 0)
		archive_write_set_format_pax(a);
	else
		archive_write_set_format_raw(a);
	archive_write_add_filter_gzip(a);
	archive_write_open_fd(a, b->fd);
	if (b->kind == 0) {
		for (int i = 0; i < 100000; i++) {
			char name[32];
			snprintf(name, sizeof(name), "zero%d", i);
			struct archive_entry *e = archive_entry_new();
			archive_entry_set_pathname(e, name);
			archive_entry_set_mode(e, S_IFREG | 0644);
			archive_entry_set_size(e, sizeof(zeros));
			int r = archive_write_header(a, e);
			archive_entry_free(e);
			if (r != ARCHIVE_OK || archive_write_data(a, zeros, sizeof(zeros)) < 0)
				break;
			b->written += sizeof(zeros);
		}
	} else {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, "data");
		archive_entry_set_mode(e, S_IFREG | 0644);
		archive_write_header(a, e);
		archive_entry_free(e);
		/* A tar of one file, its end, then zeros. */
		if (archive_write_data(a, big, small_len) > 0)
			for (int i = 0; i < 100000; i++) {
				if (archive_write_data(a, zeros, sizeof(zeros)) < 0)
					break;
				b->written += sizeof(zeros);
			}
	}
	archive_write_free(a);
	close(b->fd);
	return NULL;
}

static void bomb(int kind, const char *needle)
{
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	struct bomb b = {.fd = p[1], .kind = kind};
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, bomb_writer, &b), 0);
	struct layer_limits lim = LIM;
	lim.max_bytes = 64 << 20;
	struct cell_error err = {0};
	struct layer_stats st;
	ck_assert_int_eq(mkdirat(tfd, "layer", 0755), 0);
	int lfd = openat(tfd, "layer", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = layer_unpack(p[0], lfd, &lim, &st, &err);
	close(lfd);
	close(p[0]);
	pthread_join(t, NULL);
	ck_assert_msg(r == -EFBIG, "bomb %d: %d %s", kind, r, err.msg);
	ck_assert_msg(strstr(err.msg, needle), "bomb %d: '%s'", kind, err.msg);
	/* Bounded early: the writer was stopped long before its 100 GB. */
	ck_assert_msg(b.written < (1ull << 30), "bomb %d: %llu bytes read", kind,
		      (unsigned long long)b.written);
	nothing_escaped("gzip bomb");
}

START_TEST(gzip_bombs_bounded_early)
{
	/* The small tar the second bomb starts with (into big). */
	int fd = create_at("t.tar");
	struct archive *a = writer(fd, NULL);
	put(a, &(struct ent){.path = "small", .mode = S_IFREG | 0644, .data = "s"});
	finish(a, fd);
	small_len = read_all("t.tar", big, sizeof(big));
	bomb(0, "the layer's files over 67108864 bytes");
	bomb(1, "bytes after the end of the tar");
}
END_TEST

START_TEST(broken_streams_refused)
{
	static char tar[1 << 20], gz[1 << 20];
	memset(big, 'q', 200000);
	big[200000] = '\0';
	const struct ent ents[] = {
	    {.path = "first", .mode = S_IFREG | 0644, .data = "1"},
	    {.path = "long", .mode = S_IFREG | 0644, .data = big},
	    {0},
	};
	layer_file(ents, NULL);
	size_t len = read_all("t.tar", tar, sizeof(tar));
	write_all("t.tar", tar, len / 2);
	refused_as("truncated tar", &LIM, -EINVAL, "entry 'long'");

	compress(tar, len, "c", "gzip");
	size_t glen = read_all("c", gz, sizeof(gz));
	ck_assert_int_eq(unlinkat(tfd, "c", 0), 0);
	write_all("t.tar", gz, glen - 20);
	refused_as("truncated gzip", &LIM, -EINVAL, "truncated gzip input");

	uint32_t x = 12345;
	for (size_t i = 0; i < 8192; i++)
		tar[i] = (char)((x = x * 1103515245 + 12345) >> 16);
	write_all("t.tar", tar, 8192);
	refused_as("garbage", &LIM, -EINVAL, "not a tar layer");
	write_all("t.tar", "", 0);
	refused_as("nothing", &LIM, -EINVAL, "not a tar layer");
}
END_TEST

static void setup_suite(void)
{
	ck_assert_ptr_nonnull(mkdtemp(top));
}

static void teardown_suite(void)
{
	/* fd-relative removal (never a shell line), whatever a failed test left. */
	int tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct cell_error err = {0};
	ck_assert_int_eq(layer_remove_all(tmp, top + strlen("/tmp/"), &err), 0);
	close(tmp);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "%s/test.XXXXXX", top);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	tfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(tfd, 0);
	ck_assert_int_eq(mkdirat(tfd, "sentinel", 0755), 0);
	int fd = openat(tfd, "sentinel/keep", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ck_assert_int_eq(write(fd, "sentinel\n", 9), 9);
	fchmod(fd, 0644);
	close(fd);
	snprintf(abs_path, sizeof(abs_path), "%s/x", dir);
	snprintf(sentinel_path, sizeof(sentinel_path), "%s/sentinel", dir);
	memset(name300, 'n', 300);
	for (int i = 0; i < 300; i++)
		memcpy(deep + 2 * i, "d/", 2);
	deep[599] = '\0';
}

static void teardown(void)
{
	int topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct cell_error err = {0};
	ck_assert_int_eq(layer_remove_all(topfd, dir + strlen(top) + 1, &err), 0);
	close(topfd);
	close(tfd);
}

static Suite *layer_unpack_suite(void)
{
	Suite *s = suite_create("layer_unpack");
	TCase *tc = tcase_create("layer_unpack");
	tcase_set_timeout(tc, 30);
	tcase_add_unchecked_fixture(tc, setup_suite, teardown_suite);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, normal_layer_of_every_kind);
	tcase_add_test(tc, plain_gzip_zstd_digests);
	tcase_add_test(tc, whiteouts_and_opaque_dirs);
	tcase_add_test(tc, later_entries_replace_earlier_ones);
	tcase_add_test(tc, sparse_file_written_sparse);
	tcase_add_test(tc, implied_directories_take_the_layer_below);
	tcase_add_test(tc, hostile_entries_refused);
	tcase_add_test(tc, too_many_entries_refused);
	tcase_add_test(tc, sparse_terabyte_refused);
	tcase_add_test(tc, gzip_bombs_bounded_early);
	tcase_add_test(tc, broken_streams_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (geteuid() != 0) {
		printf("test_layer_unpack: NOT RUN (needs root: owners, device nodes, trusted "
		       "xattrs)\n");
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	return unit_run(layer_unpack_suite());
}
