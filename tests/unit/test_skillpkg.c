/* A skill's archive judged by src/celld/skillpkg.c: good tar.gz and zip archives (at the top
 * or in a single top directory) are walked with their paths and bytes; hostile ones are
 * refused with an error naming the entry: "..", an absolute path, a symlink, a hard link, a
 * device node, a fifo, a gzip and a zip bomb, a zip entry lying about its size, too many
 * entries, a missing entrypoint.sh, something that is no archive at all. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/celld/skillpkg.h"
#include "../integration/archive_gen.h"
#include "unit.h"

static char dir[] = "/tmp/test_skillpkg.XXXXXX";

static const char *tmp_path(const char *name)
{
	static char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return p;
}

static gzFile tar_open(const char *name)
{
	gzFile gz = gzopen(tmp_path(name), "wb");
	ck_assert_ptr_nonnull(gz);
	return gz;
}

static int scan(const char *name, const struct skillpkg_ops *ops, void *cls,
		struct skillpkg_info *info, struct cell_error *err)
{
	int fd = open(tmp_path(name), O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	int r = skillpkg_scan(fd, ops, cls, info, err);
	close(fd);
	return r;
}

/* Refused, with a message holding needle. */
static void refused(const char *name, const char *needle)
{
	struct skillpkg_info info;
	struct cell_error err = {0};
	int r = scan(name, NULL, NULL, &info, &err);
	ck_assert_msg(r == -EINVAL, "%s: scan returned %d (%s)", name, r, err.msg);
	ck_assert_msg(strstr(err.msg, needle), "%s: '%s' does not say '%s'", name, err.msg, needle);
}

/* What a walk saw: "D path;" and "F path mode=data;" in order. */
struct seen {
	char text[4096];
	size_t len;
};

static void add(struct seen *s, const char *fmt, const char *a, unsigned m)
{
	s->len += (size_t)snprintf(s->text + s->len, sizeof(s->text) - s->len, fmt, a, m);
}

static int on_begin(void *cls, const struct skillpkg_entry *e)
{
	add(cls, e->kind == SKILLPKG_DIR ? "D %s %o;" : "F %s %o=", e->path, e->mode);
	return 0;
}

static int on_data(void *cls, const void *buf, size_t len)
{
	struct seen *s = cls;
	ck_assert_uint_lt(s->len + len, sizeof(s->text));
	memcpy(s->text + s->len, buf, len);
	s->len += len;
	s->text[s->len] = '\0';
	return 0;
}

static int on_end(void *cls)
{
	add(cls, "%s;", "", 0);
	return 0;
}

static const struct skillpkg_ops ops = {on_begin, on_data, on_end};

static const char ep[] = "#!/bin/sh\necho hi\n";

START_TEST(good_tar_gz_at_top)
{
	gzFile gz = tar_open("top.tar.gz");
	agen_tar_entry(gz, "./", '5', NULL, 0, 0755, NULL);
	agen_tar_entry(gz, "./entrypoint.sh", '0', ep, strlen(ep), 0755, NULL);
	agen_tar_entry(gz, "./lib/", '5', NULL, 0, 0700, NULL);
	agen_tar_entry(gz, "./lib//a.txt", '0', "abc", 3, 0600, NULL);
	gzclose(gz);
	struct seen s = {0};
	struct skillpkg_info info;
	struct cell_error err = {0};
	ck_assert_msg(scan("top.tar.gz", &ops, &s, &info, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(info.format, "tar.gz");
	ck_assert_str_eq(info.prefix, "");
	ck_assert_uint_eq(info.entries, 4);
	ck_assert_uint_eq(info.total, strlen(ep) + 3);
	ck_assert_str_eq(s.text, "F entrypoint.sh 755=#!/bin/sh\necho hi\n;D lib 755;F lib/a.txt "
				 "644=abc;");
}
END_TEST

START_TEST(good_tar_gz_in_one_top_dir_with_a_long_name)
{
	char longname[300];
	snprintf(longname, sizeof(longname), "tool/%0200d.txt", 7);
	gzFile gz = tar_open("dir.tar.gz");
	agen_tar_entry(gz, "tool/", '5', NULL, 0, 0755, NULL);
	agen_tar_entry(gz, "tool/entrypoint.sh", '0', ep, strlen(ep), 0644, NULL);
	agen_tar_entry(gz, longname, '0', "x", 1, 0644, NULL);
	agen_tar_end(gz);
	gzclose(gz);
	struct seen s = {0};
	struct skillpkg_info info;
	struct cell_error err = {0};
	ck_assert_msg(scan("dir.tar.gz", &ops, &s, &info, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(info.prefix, "tool/");
	char want[600];
	snprintf(want, sizeof(want), "F entrypoint.sh 644=%s;F %s 644=x;", ep, longname + 5);
	ck_assert_str_eq(s.text, want);
}
END_TEST

START_TEST(good_zip_stored_and_deflated)
{
	struct agen_zip z = {.f = fopen(tmp_path("good.zip"), "wb")};
	ck_assert_ptr_nonnull(z.f);
	agen_zip_entry(&z, "sk/", NULL, 0, S_IFDIR | 0755, false, 0);
	agen_zip_entry(&z, "sk/entrypoint.sh", ep, strlen(ep), S_IFREG | 0755, true, 0);
	agen_zip_entry(&z, "sk/data.txt", "hello", 5, S_IFREG | 0644, false, 0);
	agen_zip_finish(&z);
	struct seen s = {0};
	struct skillpkg_info info;
	struct cell_error err = {0};
	ck_assert_msg(scan("good.zip", &ops, &s, &info, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(info.format, "zip");
	ck_assert_str_eq(info.prefix, "sk/");
	char want[200];
	snprintf(want, sizeof(want), "F entrypoint.sh 755=%s;F data.txt 644=hello;", ep);
	ck_assert_str_eq(s.text, want);
}
END_TEST

START_TEST(hostile_tar_entries_refused)
{
	struct {
		const char *file, *name;
		char type;
		const char *link, *needle;
	} cases[] = {
	    {"dotdot.tar.gz", "a/../../etc/passwd", '0', NULL, "'..'"},
	    {"abs.tar.gz", "/etc/cron.d/x", '0', NULL, "absolute"},
	    {"symlink.tar.gz", "escape", '2', "/etc", "symbolic link"},
	    {"hardlink.tar.gz", "hl", '1', "/etc/shadow", "hard link"},
	    {"dev.tar.gz", "null", '3', NULL, "device"},
	    {"fifo.tar.gz", "pipe", '6', NULL, "fifo"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gzFile gz = tar_open(cases[i].file);
		agen_tar_entry(gz, "entrypoint.sh", '0', ep, strlen(ep), 0755, NULL);
		agen_tar_entry(gz, cases[i].name, cases[i].type, cases[i].type == '0' ? "x" : NULL,
			       cases[i].type == '0' ? 1 : 0, 0644, cases[i].link);
		agen_tar_end(gz);
		gzclose(gz);
		refused(cases[i].file, cases[i].needle);
		refused(cases[i].file, cases[i].name);
	}
}
END_TEST

START_TEST(hostile_zip_entries_refused)
{
	struct agen_zip z = {.f = fopen(tmp_path("link.zip"), "wb")};
	agen_zip_entry(&z, "entrypoint.sh", ep, strlen(ep), S_IFREG | 0755, false, 0);
	agen_zip_entry(&z, "ln", "/etc", 4, S_IFLNK | 0777, false, 0);
	agen_zip_finish(&z);
	refused("link.zip", "'ln': a symbolic link");

	z = (struct agen_zip){.f = fopen(tmp_path("dotdot.zip"), "wb")};
	agen_zip_entry(&z, "entrypoint.sh", ep, strlen(ep), S_IFREG | 0755, false, 0);
	agen_zip_entry(&z, "../x", "x", 1, S_IFREG | 0644, false, 0);
	agen_zip_finish(&z);
	refused("dotdot.zip", "'../x': a '..' component");

	z = (struct agen_zip){.f = fopen(tmp_path("abs.zip"), "wb")};
	agen_zip_entry(&z, "entrypoint.sh", ep, strlen(ep), S_IFREG | 0755, false, 0);
	agen_zip_entry(&z, "/root/.bashrc", "x", 1, S_IFREG | 0644, false, 0);
	agen_zip_finish(&z);
	refused("abs.zip", "absolute");

	z = (struct agen_zip){.f = fopen(tmp_path("dev.zip"), "wb")};
	agen_zip_entry(&z, "entrypoint.sh", ep, strlen(ep), S_IFREG | 0755, false, 0);
	agen_zip_entry(&z, "tty", NULL, 0, S_IFCHR | 0666, false, 0);
	agen_zip_finish(&z);
	refused("dev.zip", "'tty': a device node");

	/* An entry inflating to more than its header states is cut there. */
	static char big[100000];
	z = (struct agen_zip){.f = fopen(tmp_path("liar.zip"), "wb")};
	agen_zip_entry(&z, "entrypoint.sh", big, sizeof(big), S_IFREG | 0755, true, 10);
	agen_zip_finish(&z);
	refused("liar.zip", "beyond the size its header says");
}
END_TEST

START_TEST(bombs_refused)
{
	/* 64 MiB of zeros: the gzip stream is ~64 KiB, far past the ratio cap. */
	gzFile gz = tar_open("bomb.tar.gz");
	agen_tar_entry(gz, "entrypoint.sh", '0', ep, strlen(ep), 0755, NULL);
	agen_tar_zeros(gz, "zeros", 64u << 20);
	agen_tar_end(gz);
	gzclose(gz);
	refused("bomb.tar.gz", "compression bomb");

	/* The same in a zip: 32 MiB deflated to ~32 KiB. */
	size_t n = 32u << 20;
	char *zeros = calloc(1, n);
	ck_assert_ptr_nonnull(zeros);
	struct agen_zip z = {.f = fopen(tmp_path("bomb.zip"), "wb")};
	agen_zip_entry(&z, "entrypoint.sh", ep, strlen(ep), S_IFREG | 0755, false, 0);
	agen_zip_entry(&z, "zeros", zeros, n, S_IFREG | 0644, true, 0);
	agen_zip_finish(&z);
	free(zeros);
	refused("bomb.zip", "compression bomb");

	/* A header claiming more than the total bound is refused before any byte. */
	gz = tar_open("huge.tar.gz");
	agen_tar_entry(gz, "entrypoint.sh", '0', ep, strlen(ep), 0755, NULL);
	agen_tar_header(gz, "huge", '0', (size_t)300 << 20, 0644, NULL);
	agen_tar_end(gz);
	gzclose(gz);
	refused("huge.tar.gz", "'huge'");
}
END_TEST

START_TEST(too_many_entries_refused)
{
	gzFile gz = tar_open("many.tar.gz");
	agen_tar_entry(gz, "entrypoint.sh", '0', ep, strlen(ep), 0755, NULL);
	for (int i = 0; i < SKILLPKG_ENTRIES_MAX + 1; i++) {
		char name[32];
		snprintf(name, sizeof(name), "d%d/", i);
		agen_tar_entry(gz, name, '5', NULL, 0, 0755, NULL);
	}
	agen_tar_end(gz);
	gzclose(gz);
	refused("many.tar.gz", "more than 4096 entries");
}
END_TEST

START_TEST(missing_entrypoint_and_non_archives_refused)
{
	gzFile gz = tar_open("noep.tar.gz");
	agen_tar_entry(gz, "run.sh", '0', ep, strlen(ep), 0755, NULL);
	agen_tar_end(gz);
	gzclose(gz);
	refused("noep.tar.gz", "'entrypoint.sh': missing");

	/* Two top directories, each with one: neither is the skill's top. */
	gz = tar_open("twotops.tar.gz");
	agen_tar_entry(gz, "a/entrypoint.sh", '0', ep, strlen(ep), 0755, NULL);
	agen_tar_entry(gz, "b/entrypoint.sh", '0', ep, strlen(ep), 0755, NULL);
	agen_tar_end(gz);
	gzclose(gz);
	refused("twotops.tar.gz", "'entrypoint.sh': missing");

	/* A symlink named entrypoint.sh is refused as a symlink. */
	gz = tar_open("eplink.tar.gz");
	agen_tar_entry(gz, "entrypoint.sh", '2', NULL, 0, 0777, "/bin/sh");
	agen_tar_end(gz);
	gzclose(gz);
	refused("eplink.tar.gz", "symbolic link");

	FILE *f = fopen(tmp_path("text.zip"), "w");
	fputs("just some text, not an archive\n", f);
	fclose(f);
	refused("text.zip", "not a tar.gz or zip archive");

	/* gzip of something that is not a tar. */
	gz = tar_open("notar.tar.gz");
	char junk[1024];
	memset(junk, 'j', sizeof(junk));
	gzwrite(gz, junk, sizeof(junk));
	gzclose(gz);
	refused("notar.tar.gz", "not a tar archive");

	/* A tar cut short. */
	gz = tar_open("cut.tar.gz");
	agen_tar_header(gz, "entrypoint.sh", '0', 4096, 0644, NULL);
	gzwrite(gz, "abc", 3);
	gzclose(gz);
	refused("cut.tar.gz", "cut short");
}
END_TEST

/* A tool of this host, in /usr/bin or /bin. */
static bool have_tool(const char *name)
{
	char *usr = NULL, *bin = NULL;
	ck_assert_int_gt(asprintf(&usr, "/usr/bin/%s", name), 0);
	ck_assert_int_gt(asprintf(&bin, "/bin/%s", name), 0);
	bool have = access(usr, X_OK) == 0 || access(bin, X_OK) == 0;
	free(usr);
	free(bin);
	return have;
}

/* Archives the usual tools make (GNU tar's default format with a long name, pax, zip):
 * read the same. Unit suites need no root and no tool: without tar(1) the test is skipped,
 * without zip(1) its zip, and either skip is recorded. */
START_TEST(archives_of_the_usual_tools)
{
	if (!have_tool("tar"))
		UNIT_SKIP_HOST("tool-tar", "no tar(1) on this host");
	bool zip = have_tool("zip");
	if (!zip)
		unit_skip_record(__func__, "host", "tool-zip",
				 "no zip(1) on this host: no archive of zip's read");
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && mkdir -p src/skill/%0150d && printf 'echo hi\\n' > "
		 "src/skill/entrypoint.sh && printf x > src/skill/%0150d/f && cd src && "
		 "tar -czf ../gnu.tar.gz skill && tar --format=pax -czf ../pax.tar.gz skill%s",
		 dir, 7, 7, zip ? " && zip -qr ../z.zip skill" : "");
	ck_assert_int_eq(system(cmd), 0);
	const char *files[] = {"gnu.tar.gz", "pax.tar.gz", "z.zip"};
	for (size_t i = 0; i < (zip ? 3 : 2); i++) {
		struct seen s = {0};
		struct skillpkg_info info;
		struct cell_error err = {0};
		ck_assert_msg(scan(files[i], &ops, &s, &info, &err) == 0, "%s: %s", files[i],
			      err.msg);
		ck_assert_str_eq(info.prefix, "skill/");
		char want[400];
		snprintf(want, sizeof(want), "F %0150d/f 644=x;", 7);
		ck_assert_msg(strstr(s.text, want), "%s: %s", files[i], s.text);
		ck_assert_msg(strstr(s.text, "F entrypoint.sh 644=echo hi\n;"), "%s: %s", files[i],
			      s.text);
	}
}
END_TEST

static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	strcpy(dir, "/tmp/test_skillpkg.XXXXXX");
}

static Suite *skillpkg_suite(void)
{
	Suite *s = suite_create("skillpkg");
	TCase *tc = tcase_create("skillpkg");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, good_tar_gz_at_top);
	tcase_add_test(tc, good_tar_gz_in_one_top_dir_with_a_long_name);
	tcase_add_test(tc, good_zip_stored_and_deflated);
	tcase_add_test(tc, hostile_tar_entries_refused);
	tcase_add_test(tc, hostile_zip_entries_refused);
	tcase_add_test(tc, bombs_refused);
	tcase_add_test(tc, too_many_entries_refused);
	tcase_add_test(tc, missing_entrypoint_and_non_archives_refused);
	tcase_add_test(tc, archives_of_the_usual_tools);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(skillpkg_suite());
}
