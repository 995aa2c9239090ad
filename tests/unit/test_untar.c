/* untar.c, the CLI's unpacker of archives that come out of a sandbox: what a well-formed
 * archive holds lands beneath the destination, fed whole or a byte at a time; hostile
 * archives (absolute names, "..", a link planted and then written through, bad headers,
 * oversized pax headers, an archive cut short) fail and never write outside it. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/fsutil.h"
#include "untar.h"
#include "unit.h"

static char top[64];   /* the suite's temp dir, removed after every test ran, failed or not */
static char base[128]; /* per test: base/d/dest is unpacked into, base/out lies outside */
static int destfd = -1;

static void suite_setup(void)
{
	snprintf(top, sizeof(top), "/tmp/cell-untar-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(top));
}

static void suite_teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	ck_assert_int_eq(system(cmd), 0);
}

static void setup(void)
{
	umask(022);
	snprintf(base, sizeof(base), "%s/t-XXXXXX", top);
	ck_assert_ptr_nonnull(mkdtemp(base));
	char p[192];
	snprintf(p, sizeof(p), "%s/d", base);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/out", base);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/d/dest", base);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	destfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(destfd, 0);
}

static void teardown(void)
{
	close(destfd);
}

/* ---- an archive builder (independent of the code under test) ---- */

struct ar {
	char *buf;
	size_t len, cap;
};

static void ar_put(struct ar *a, const void *p, size_t n)
{
	if (a->len + n > a->cap) {
		a->cap = (a->len + n) * 2;
		a->buf = realloc(a->buf, a->cap);
		ck_assert_ptr_nonnull(a->buf);
	}
	if (p)
		memcpy(a->buf + a->len, p, n);
	else
		memset(a->buf + a->len, 0, n);
	a->len += n;
}

static void ar_header(struct ar *a, const char *name, char type, unsigned mode, size_t size,
		      const char *link, bool break_sum)
{
	unsigned char h[512] = {0};
	memcpy(h, name, strnlen(name, 100));
	snprintf((char *)h + 100, 8, "%07o", mode);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	char num[24];
	snprintf(num, sizeof(num), "%011zo", size);
	memcpy(h + 124, num, 12);
	snprintf((char *)h + 136, 12, "%011o", 1000000000);
	h[156] = (unsigned char)type;
	if (link)
		memcpy(h + 157, link, strnlen(link, 100));
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum + (break_sum ? 1 : 0));
	ar_put(a, h, 512);
}

static void ar_entry(struct ar *a, const char *name, char type, unsigned mode, const char *data,
		     const char *link)
{
	size_t n = data ? strlen(data) : 0;
	ar_header(a, name, type, mode, n, link, false);
	ar_put(a, data, n);
	ar_put(a, NULL, (512 - n % 512) % 512);
}

static void ar_pax(struct ar *a, const char *records)
{
	size_t n = strlen(records);
	ar_header(a, "PaxHeaders/x", 'x', 0644, n, NULL, false);
	ar_put(a, records, n);
	ar_put(a, NULL, (512 - n % 512) % 512);
}

static void ar_end(struct ar *a)
{
	ar_put(a, NULL, 1024);
}

/* Feed a whole (step 0) or step bytes at a time; the first failure's result. */
static int unpack(const struct ar *a, size_t step, struct cell_error *err)
{
	struct untar *u = untar_new(destfd, err);
	ck_assert_ptr_nonnull(u);
	int r = 0;
	for (size_t off = 0; off < a->len && r == 0;) {
		size_t n = step && a->len - off > step ? step : a->len - off;
		r = untar_feed(u, a->buf + off, n, err);
		off += n;
	}
	if (r == 0)
		r = untar_finish(u, err);
	untar_free(u);
	return r;
}

static bool exists(const char *rel)
{
	char p[1024];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	return lstat(p, &st) == 0;
}

static void build_good(struct ar *a, const char *longname)
{
	ar_entry(a, "top/", '5', 0755, NULL, NULL);
	ar_entry(a, "top/a/", '5', 0750, NULL, NULL);
	ar_entry(a, "top/a/f", '0', 04755, "hi\n", NULL);
	ar_entry(a, "top/l", '2', 0777, NULL, "/etc/passwd");
	ar_entry(a, "top/fifo", '6', 0644, NULL, NULL);
	char rec[512];
	snprintf(rec, sizeof(rec), "%zu path=top/%s\n", strlen(longname) + 14, longname);
	ar_pax(a, rec);
	ar_entry(a, "top/truncated-name", '0', 0600, "long\n", NULL);
	ar_end(a);
}

static void check_good(const char *longname)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/d/dest/a/f", base);
	struct stat st;
	ck_assert_int_eq(lstat(p, &st), 0);
	ck_assert_msg(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0755, "f: mode %o",
		      st.st_mode);
	ck_assert_int_eq(st.st_mtime, 1000000000);
	ck_assert_int_eq(st.st_size, 3);
	snprintf(p, sizeof(p), "%s/d/dest/l", base);
	char t[64];
	ssize_t n = readlink(p, t, sizeof(t));
	ck_assert_msg(n == 11 && !memcmp(t, "/etc/passwd", 11), "l: %zd", n);
	ck_assert(!exists("d/dest/fifo"));
	snprintf(p, sizeof(p), "d/dest/%s", longname);
	ck_assert_msg(exists(p), "the pax path was not used");
	ck_assert(!exists("d/dest/truncated-name"));
	ck_assert(!exists("d/dest/top"));
}

START_TEST(unpacks_whole_or_byte_by_byte)
{
	char longname[151];
	memset(longname, 'n', 150);
	longname[150] = '\0';
	struct ar a = {0};
	build_good(&a, longname);
	struct cell_error err = {0};
	ck_assert_msg(unpack(&a, 0, &err) == 0, "%s", err.msg);
	check_good(longname);
	/* again, a byte at a time, over what is there now (files replaced, dirs kept) */
	ck_assert_msg(unpack(&a, 1, &err) == 0, "%s", err.msg);
	check_good(longname);
	free(a.buf);
}
END_TEST

START_TEST(refuses_absolute_and_dotdot)
{
	struct ar a = {0};
	struct cell_error err = {0};
	char name[192];
	snprintf(name, sizeof(name), "%s/out/abs", base);
	ar_entry(&a, name, '0', 0644, "x", NULL);
	ar_end(&a);
	ck_assert_int_eq(unpack(&a, 0, &err), -EPROTO);
	ck_assert(!exists("out/abs"));
	free(a.buf);
	a = (struct ar){0};
	ar_entry(&a, "top/../../out/up", '0', 0644, "x", NULL);
	ar_end(&a);
	ck_assert_int_eq(unpack(&a, 0, &err), -EPROTO);
	ck_assert(!exists("out/up"));
	free(a.buf);
	/* the same through a pax path */
	a = (struct ar){0};
	ar_pax(&a, "26 path=top/../../out/pax\n");
	ar_entry(&a, "top/innocent", '0', 0644, "x", NULL);
	ar_end(&a);
	ck_assert_int_eq(unpack(&a, 0, &err), -EPROTO);
	ck_assert(!exists("out/pax") && !exists("d/dest/innocent"));
	free(a.buf);
}
END_TEST

/* A link the archive plants (to a directory outside, or ..) is never written through. */
START_TEST(never_writes_through_a_link)
{
	char out[192];
	snprintf(out, sizeof(out), "%s/out", base);
	const char *targets[] = {out, "..", "../../out"};
	for (size_t i = 0; i < 3; i++) {
		struct ar a = {0};
		ar_entry(&a, "top/l", '2', 0777, NULL, targets[i]);
		ar_entry(&a, "top/l/evil", '0', 0644, "x", NULL);
		ar_end(&a);
		struct cell_error err = {0};
		ck_assert_int_eq(unpack(&a, 0, &err), -ENOTDIR);
		ck_assert(!exists("out/evil") && !exists("d/evil"));
		/* a file over the link replaces the link, never its target */
		free(a.buf);
		a = (struct ar){0};
		ar_entry(&a, "top/l", '0', 0644, "replaced", NULL);
		ar_end(&a);
		ck_assert_msg(unpack(&a, 0, &err) == 0, "%s", err.msg);
		struct stat st;
		char p[256];
		snprintf(p, sizeof(p), "%s/d/dest/l", base);
		ck_assert_int_eq(lstat(p, &st), 0);
		ck_assert(S_ISREG(st.st_mode));
		ck_assert_int_eq(unlink(p), 0);
		free(a.buf);
	}
}
END_TEST

START_TEST(refuses_bad_headers_and_bounds)
{
	struct cell_error err = {0};
	struct ar a = {0};
	ar_header(&a, "top/f", '0', 0644, 0, NULL, true);
	ar_end(&a);
	ck_assert_int_eq(unpack(&a, 0, &err), -EPROTO);
	free(a.buf);
	/* a pax header over UNTAR_PAX_MAX */
	a = (struct ar){0};
	ar_header(&a, "PaxHeaders/x", 'x', 0644, UNTAR_PAX_MAX + 1, NULL, false);
	ck_assert_int_eq(unpack(&a, 0, &err), -EFBIG);
	free(a.buf);
	/* a malformed pax record */
	a = (struct ar){0};
	ar_pax(&a, "99 path=x\n");
	ar_entry(&a, "top/f", '0', 0644, "x", NULL);
	ar_end(&a);
	ck_assert_int_eq(unpack(&a, 0, &err), -EPROTO);
	free(a.buf);
	/* cut short: no end-of-archive blocks; what came is there */
	a = (struct ar){0};
	ar_entry(&a, "top/kept", '0', 0644, "x", NULL);
	ck_assert_int_eq(unpack(&a, 7, &err), -EPROTO);
	ck_assert(exists("d/dest/kept"));
	free(a.buf);
	/* a name deeper than UNTAR_DEPTH_MAX */
	a = (struct ar){0};
	char rec[400], path[300] = "top";
	for (int i = 0; i < UNTAR_DEPTH_MAX + 1; i++)
		strcat(path, "/d");
	snprintf(rec, sizeof(rec), "%zu path=%s\n", strlen(path) + 10, path);
	ar_pax(&a, rec);
	ar_entry(&a, "x", '5', 0755, NULL, NULL);
	ar_end(&a);
	ck_assert_int_eq(unpack(&a, 0, &err), -EPROTO);
	free(a.buf);
}
END_TEST

static Suite *untar_suite(void)
{
	Suite *s = suite_create("untar");
	TCase *tc = tcase_create("untar");
	tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, unpacks_whole_or_byte_by_byte);
	tcase_add_test(tc, refuses_absolute_and_dotdot);
	tcase_add_test(tc, never_writes_through_a_link);
	tcase_add_test(tc, refuses_bad_headers_and_bounds);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(untar_suite());
}
