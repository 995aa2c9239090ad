/* Copies of a sandbox's writable layer (src/runtime/layercopy.c): a tree copied with its
 * ids shifted from one uid range to another (owners, ACL entries), setuid kept through the
 * chown, overlay whiteouts (0:0 character devices) and trusted.overlay.* xattrs (opaque
 * dirs) kept, symlinks copied as symlinks and never followed (a planted one to /etc), holes
 * kept, the same shift in place, and the depth bound. Owners and trusted xattrs need root:
 * without it those checks are skipped, recorded as skips (strict mode fails them), and the
 * rest still runs; a /tmp without ACLs is a host skip of the ACL checks. */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cell/fsutil.h"
#include "cell/layercopy.h"
#include "unit.h"

#define FROM 100000u
#define TO   300000u

static char base[128];
static int basefd = -1;
static bool root;

static void setup(void)
{
	snprintf(base, sizeof(base), "/tmp/cell-layercopy.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(base));
	basefd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(basefd, 0);
	root = geteuid() == 0;
}

static void teardown(void)
{
	struct cell_error err = {0};
	int parent = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cell_remove_tree_at(parent, base + 5, &err);
	close(parent);
	close(basefd);
}

static void put(const char *path, const char *text, mode_t mode, uid_t uid, gid_t gid)
{
	int fd = openat(basefd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	if (root)
		ck_assert_int_eq(fchown(fd, uid, gid), 0);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

static struct stat lst(const char *path)
{
	struct stat st;
	ck_assert_msg(fstatat(basefd, path, &st, AT_SYMLINK_NOFOLLOW) == 0, "%s: %s", path,
		      strerror(errno));
	return st;
}

static void expect_owner(const char *path, uid_t uid, gid_t gid)
{
	if (!root)
		return;
	struct stat st = lst(path);
	ck_assert_msg(st.st_uid == uid && st.st_gid == gid, "%s: %u:%u, wanted %u:%u", path,
		      st.st_uid, st.st_gid, uid, gid);
}

/* An access ACL granting user id read. */
static int set_acl(const char *path, uint32_t id)
{
	uint32_t v[1 + 5 * 2] = {htole32(2)};
	uint16_t tags[5] = {0x01, 0x02, 0x04, 0x10, 0x20};
	uint32_t ids[5] = {~0u, id, ~0u, ~0u, ~0u};
	for (int i = 0; i < 5; i++) {
		uint32_t tp = htole16(tags[i]) | (uint32_t)htole16(tags[i] == 1 ? 6 : 4) << 16;
		v[1 + i * 2] = tp;
		v[2 + i * 2] = htole32(ids[i]);
	}
	char *p = NULL;
	ck_assert_int_ge(asprintf(&p, "%s/%s", base, path), 0);
	int r = setxattr(p, "system.posix_acl_access", v, sizeof(v), 0), e = errno;
	free(p);
	errno = e;
	return r;
}

static uint32_t acl_user(const char *path)
{
	char *p = NULL;
	ck_assert_int_ge(asprintf(&p, "%s/%s", base, path), 0);
	uint32_t v[16];
	ssize_t n = getxattr(p, "system.posix_acl_access", v, sizeof(v));
	free(p);
	for (ssize_t i = 1; n > 0 && (i * 2 + 1) * 4 <= n; i++) {
		uint32_t tp = v[1 + (i - 1) * 2];
		if ((le16toh((uint16_t)tp)) == 0x02)
			return le32toh(v[2 + (i - 1) * 2]);
	}
	return 0;
}

/* The layer a sandbox with uid base FROM would have written. */
static void make_tree(void)
{
	ck_assert_int_eq(mkdirat(basefd, "src", 0755), 0);
	if (root)
		ck_assert_int_eq(fchownat(basefd, "src", FROM, FROM, 0), 0);
	put("src/a", "a\n", 0640, FROM + 1234, FROM + 5678);
	put("src/su", "x\n", 04755, FROM, FROM);
	put("src/outside", "o\n", 0644, 1000, 1000);
	ck_assert_int_eq(mkdirat(basefd, "src/d", 0711), 0);
	put("src/d/y", "y\n", 0600, FROM + 7, FROM + 8);
	if (root)
		ck_assert_int_eq(fchownat(basefd, "src/d", FROM + 7, FROM + 8, 0), 0);
	ck_assert_int_eq(symlinkat("/etc", basefd, "src/evil"), 0);
	if (root)
		ck_assert_int_eq(
		    fchownat(basefd, "src/evil", FROM + 1, FROM + 1, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert_int_eq(mkfifoat(basefd, "src/fifo", 0644), 0);
	if (root) {
		/* overlay's whiteout and opaque dir */
		ck_assert_int_eq(mknodat(basefd, "src/wh", S_IFCHR | 0, makedev(0, 0)), 0);
		ck_assert_int_eq(mkdirat(basefd, "src/opq", 0755), 0);
		char *p = NULL;
		ck_assert_int_ge(asprintf(&p, "%s/src/opq", base), 0);
		ck_assert_int_eq(setxattr(p, "trusted.overlay.opaque", "y", 1, 0), 0);
		free(p);
	}
	/* a hole, then one byte */
	int fd = openat(basefd, "src/sparse", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "z", 1, (8 << 20) - 1), 1);
	close(fd);
	struct timespec ts[2] = {{1000000, 0}, {2000000, 0}};
	ck_assert_int_eq(utimensat(basefd, "src/a", ts, 0), 0);
}

static void expect_tree(const char *top, uint32_t b)
{
	char p[256];
#define P(x) (snprintf(p, sizeof(p), "%s/%s", top, x), p)
	expect_owner(P("a"), b + 1234, b + 5678);
	ck_assert_int_eq(lst(P("a")).st_mode & 07777, 0640);
	ck_assert_int_eq(lst(P("a")).st_mtim.tv_sec, 2000000);
	expect_owner(P("su"), b, b);
	ck_assert_int_eq(lst(P("su")).st_mode & 07777, 04755);
	expect_owner(P("outside"), 1000, 1000);
	expect_owner(P("d"), b + 7, b + 8);
	ck_assert_int_eq(lst(P("d")).st_mode & 07777, 0711);
	expect_owner(P("d/y"), b + 7, b + 8);
	struct stat st = lst(P("evil"));
	ck_assert(S_ISLNK(st.st_mode));
	expect_owner(P("evil"), b + 1, b + 1);
	char target[64] = "";
	ck_assert_int_eq(readlinkat(basefd, P("evil"), target, sizeof(target) - 1), 4);
	ck_assert_str_eq(target, "/etc");
	ck_assert(S_ISFIFO(lst(P("fifo")).st_mode));
	st = lst(P("sparse"));
	ck_assert_int_eq(st.st_size, 8 << 20);
	ck_assert_int_lt(st.st_blocks * 512, 1 << 20); /* the hole stayed a hole */
	if (root) {
		st = lst(P("wh"));
		ck_assert(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
		expect_owner(P("wh"), 0, 0);
		char v[8] = "";
		char full[400];
		snprintf(full, sizeof(full), "%s/%s", base, P("opq"));
		ck_assert_int_eq(getxattr(full, "trusted.overlay.opaque", v, sizeof(v)), 1);
		ck_assert_int_eq(v[0], 'y');
	}
#undef P
}

START_TEST(copy_shifts_and_keeps)
{
	make_tree();
	put("src/acl", "acl\n", 0644, FROM, FROM);
	bool acl = set_acl("src/acl", FROM + 42) == 0;
	if (!acl)
		unit_skip_record(__func__, "host", "acl-set", "%s: no ACL on this /tmp (%s)",
				 "ACL ids are not checked", strerror(errno));
	if (!root)
		unit_skip_record(__func__, "other", "",
				 "not root: owners and trusted xattrs unchecked");
	int src = openat(basefd, "src", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct cell_layer_stats stats;
	struct cell_error err = {0};
	ck_assert_msg(cell_layer_copy(src, basefd, "dst", FROM, TO, &stats, &err) == 0, "%s",
		      err.msg);
	close(src);
	expect_tree("dst", TO);
	expect_tree("src", FROM); /* the source is untouched */
	if (acl && root)
		ck_assert_uint_eq(acl_user("dst/acl"), TO + 42);
	if (acl)
		ck_assert_uint_eq(acl_user("src/acl"), FROM + 42);
	ck_assert_uint_ge(stats.files, 5);
	/* Nothing of the symlink's target was copied (/etc has more names than src). */
	ck_assert_uint_le(stats.entries, 12);
	/* The same bases: ids kept. */
	src = openat(basefd, "src", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_eq(cell_layer_copy(src, basefd, "same", FROM, FROM, NULL, &err), 0);
	close(src);
	expect_tree("same", FROM);
	/* An existing destination is refused. */
	src = openat(basefd, "src", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_lt(cell_layer_copy(src, basefd, "same", FROM, TO, NULL, &err), 0);
	close(src);
}
END_TEST

START_TEST(shift_in_place)
{
	if (!root)
		unit_skip_record(__func__, "other", "",
				 "not root: owners and trusted xattrs unchecked");
	make_tree();
	int src = openat(basefd, "src", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct cell_error err = {0};
	ck_assert_msg(cell_layer_shift(src, FROM, TO, NULL, &err) == 0, "%s", err.msg);
	close(src);
	expect_tree("src", TO);
	expect_owner("src", TO, TO);
}
END_TEST

struct deep_job {
	int src, r;
	struct cell_error err;
};

static void *deep_copy(void *arg)
{
	struct deep_job *job = arg;
	job->r = cell_layer_copy(job->src, basefd, "out", FROM, TO, NULL, &job->err);
	return NULL;
}

START_TEST(depth_is_bounded)
{
	ck_assert_int_eq(mkdirat(basefd, "deep", 0755), 0);
	int fd = openat(basefd, "deep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (unsigned i = 0; i < CELL_LAYER_MAX_DEPTH + 2; i++) {
		ck_assert_int_eq(mkdirat(fd, "d", 0755), 0);
		int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = next;
	}
	close(fd);
	/* On a thread with a small stack (celld's request threads have 1 MiB): the walk's
	 * recursion must stay well within it down to the bound. */
	struct deep_job job = {.src = openat(basefd, "deep", O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
	pthread_attr_t attr;
	pthread_t t;
	ck_assert_int_eq(pthread_attr_init(&attr), 0);
	ck_assert_int_eq(pthread_attr_setstacksize(&attr, 256 << 10), 0);
	ck_assert_int_eq(pthread_create(&t, &attr, deep_copy, &job), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	pthread_attr_destroy(&attr);
	ck_assert_int_eq(job.r, -ELOOP);
	ck_assert_ptr_nonnull(strstr(job.err.msg, "deep"));
	close(job.src);
}
END_TEST

START_TEST(clone_keeps_holes)
{
	int in = openat(basefd, "in", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_eq(pwrite(in, "head", 4, 0), 4);
	ck_assert_int_eq(pwrite(in, "tail", 4, 16 << 20), 4);
	int out = openat(basefd, "out", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_eq(cell_file_clone(in, out, NULL), 0);
	char buf[5] = "";
	ck_assert_int_eq(pread(out, buf, 4, 16 << 20), 4);
	ck_assert_str_eq(buf, "tail");
	ck_assert_int_eq(pread(out, buf, 4, 0), 4);
	ck_assert_str_eq(buf, "head");
	struct stat st;
	ck_assert_int_eq(fstat(out, &st), 0);
	ck_assert_int_eq(st.st_size, (16 << 20) + 4);
	ck_assert_int_lt(st.st_blocks * 512, 1 << 20);
	close(in);
	close(out);
}
END_TEST

static Suite *layercopy_suite(void)
{
	Suite *s = suite_create("layercopy");
	TCase *tc = tcase_create("layercopy");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, copy_shifts_and_keeps);
	tcase_add_test(tc, shift_in_place);
	tcase_add_test(tc, depth_is_bounded);
	tcase_add_test(tc, clone_keeps_holes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(layercopy_suite());
}
