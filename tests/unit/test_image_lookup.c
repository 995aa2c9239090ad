/* A path in an image's merged view (src/celld/image_lookup.c), from layer dirs the suite
 * makes in overlayfs' format: found in the top layer or below it, hidden by a whiteout, by
 * an opaque directory or by a file on the way, a symlink on the way left to the image, a
 * built image's single rootfs, and bad paths refused. Runs as root (whiteouts are device
 * nodes, opaque marks trusted xattrs). */
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include <jansson.h>

#include "../../src/celld/image_lookup.h"
#include "unit.h"

static char top[] = "/tmp/test_image_lookup.XXXXXX";
static char upper[128], lower[128];
static json_t *layers; /* [upper, lower] */

static void path_at(char *buf, size_t size, const char *layer, const char *rel)
{
	ck_assert_int_lt(snprintf(buf, size, "%s/%s", layer, rel), (int)size);
}

static void mkdirs(const char *layer, const char *rel)
{
	char p[512];
	path_at(p, sizeof(p), layer, rel);
	for (char *s = p + strlen(layer) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		ck_assert(mkdir(p, 0755) == 0 || errno == EEXIST);
		*s = '/';
	}
	ck_assert(mkdir(p, 0755) == 0 || errno == EEXIST);
}

static void file(const char *layer, const char *rel)
{
	char p[512];
	path_at(p, sizeof(p), layer, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "%s: %s", p, strerror(errno));
	close(fd);
}

static void whiteout(const char *layer, const char *rel)
{
	char p[512];
	path_at(p, sizeof(p), layer, rel);
	ck_assert_msg(mknod(p, S_IFCHR | 0, makedev(0, 0)) == 0, "%s: %s", p, strerror(errno));
}

static void opaque(const char *layer, const char *rel)
{
	char p[512];
	path_at(p, sizeof(p), layer, rel);
	ck_assert_msg(setxattr(p, "trusted.overlay.opaque", "y", 1, 0) == 0, "%s: %s", p,
		      strerror(errno));
}

static int look(const char *rel)
{
	struct cell_error err = {0};
	int r = image_lookup(layers, NULL, rel, &err);
	ck_assert_msg(r >= 0, "%s: %s", rel, err.msg);
	return r;
}

static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(top));
	snprintf(upper, sizeof(upper), "%s/upper", top);
	snprintf(lower, sizeof(lower), "%s/lower", top);
	ck_assert_int_eq(mkdir(upper, 0755), 0);
	ck_assert_int_eq(mkdir(lower, 0755), 0);
	layers = json_pack("[s, s]", upper, lower);
	ck_assert_ptr_nonnull(layers);
}

static void teardown(void)
{
	json_decref(layers);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", top);
	ck_assert_int_eq(system(cmd), 0);
	strcpy(top, "/tmp/test_image_lookup.XXXXXX");
}

START_TEST(found_in_any_layer)
{
	mkdirs(lower, "opt/svc");
	file(lower, "opt/svc/run.sh");
	mkdirs(upper, "usr/bin");
	file(upper, "usr/bin/python3");
	ck_assert_int_eq(look("opt/svc/run.sh"), 1);
	ck_assert_int_eq(look("opt/svc"), 1);
	ck_assert_int_eq(look("usr/bin/python3"), 1);
	ck_assert_int_eq(look("usr/local/bin/python3"), 0);
	ck_assert_int_eq(look("opt/svc/other.sh"), 0);
}
END_TEST

START_TEST(hidden_by_a_whiteout_an_opaque_dir_or_a_file)
{
	mkdirs(lower, "opt/svc");
	file(lower, "opt/svc/run.sh");
	mkdirs(lower, "srv/data");
	file(lower, "srv/data/x");
	mkdirs(lower, "var/lib");
	file(lower, "var/lib/y");
	mkdirs(upper, "opt");
	whiteout(upper, "opt/svc");
	mkdirs(upper, "srv/data");
	opaque(upper, "srv/data");
	mkdirs(upper, "var");
	file(upper, "var/lib"); /* a file over the lower directory */
	ck_assert_int_eq(look("opt/svc/run.sh"), 0);
	ck_assert_int_eq(look("opt/svc"), 0);
	ck_assert_int_eq(look("opt"), 1);
	ck_assert_int_eq(look("srv/data/x"), 0);
	ck_assert_int_eq(look("srv/data"), 1);
	ck_assert_int_eq(look("var/lib/y"), 0);
	/* Below a whiteout of one entry its siblings still show. */
	mkdirs(lower, "opt/keep");
	ck_assert_int_eq(look("opt/keep"), 1);
}
END_TEST

START_TEST(a_symlink_on_the_way_is_left_to_the_image)
{
	mkdirs(upper, "usr/local");
	char p[512];
	path_at(p, sizeof(p), upper, "usr/local/bin");
	ck_assert_int_eq(symlink("/nonexistent", p), 0);
	ck_assert_int_eq(look("usr/local/bin/python3"), 1);
	ck_assert_int_eq(look("usr/local/bin"), 1);
}
END_TEST

START_TEST(a_built_image_is_its_rootfs)
{
	mkdirs(lower, "usr/bin");
	file(lower, "usr/bin/python3");
	struct cell_error err = {0};
	ck_assert_int_eq(image_lookup(NULL, lower, "usr/bin/python3", &err), 1);
	ck_assert_int_eq(image_lookup(json_array(), upper, "usr/bin/python3", &err), 0);
}
END_TEST

START_TEST(bad_paths_are_refused)
{
	struct cell_error err = {0};
	ck_assert_int_eq(image_lookup(layers, NULL, "opt/../etc/shadow", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "opt/../etc/shadow"));
	ck_assert_int_eq(image_lookup(layers, NULL, "", &err), -EINVAL);
	ck_assert_int_eq(image_lookup(layers, NULL, "./x", &err), -EINVAL);
	json_t *gone = json_pack("[s]", "/nonexistent/layer");
	ck_assert_int_eq(image_lookup(gone, NULL, "x", &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/layer"));
	json_decref(gone);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("image_lookup");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, found_in_any_layer);
	tcase_add_test(tc, hidden_by_a_whiteout_an_opaque_dir_or_a_file);
	tcase_add_test(tc, a_symlink_on_the_way_is_left_to_the_image);
	tcase_add_test(tc, a_built_image_is_its_rootfs);
	tcase_add_test(tc, bad_paths_are_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(suite());
}
