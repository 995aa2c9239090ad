/* Unit tests of src/oci/state.c: cell-oci's containers under --root. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/fsutil.h"
#include "state.h"
#include "unit.h"

static char root[64];

static void make_root(void)
{
	snprintf(root, sizeof(root), "/tmp/test-oci-state-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
}

static void remove_root(void)
{
	struct cell_error err = {0};
	ck_assert_msg(cell_remove_tree_at(AT_FDCWD, root, &err) == 0, "%s", err.msg);
}

START_TEST(id_rule)
{
	ck_assert(oci_id_valid("abc"));
	ck_assert(oci_id_valid("k8s_POD-1.2+x"));
	ck_assert(!oci_id_valid(""));
	ck_assert(!oci_id_valid("."));
	ck_assert(!oci_id_valid(".."));
	ck_assert(!oci_id_valid("a/b"));
	ck_assert(!oci_id_valid("a b"));
	ck_assert(!oci_id_valid("a\nb"));
	char big[OCI_ID_MAX + 2];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert(!oci_id_valid(big));
	big[OCI_ID_MAX] = '\0';
	ck_assert(oci_id_valid(big));
}
END_TEST

START_TEST(make_write_read_list_remove)
{
	make_root();
	char *sub = NULL;
	ck_assert_int_gt(asprintf(&sub, "%s/nested/root", root), 0);
	struct cell_error err = {0};
	int rootfd = oci_root_open(sub, &err);
	ck_assert_msg(rootfd >= 0, "%s", err.msg);
	struct stat st;
	ck_assert_int_eq(fstat(rootfd, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0700);

	int dir = oci_container_make(rootfd, "c1", &err);
	ck_assert_msg(dir >= 0, "%s", err.msg);
	ck_assert_int_eq(oci_container_make(rootfd, "c1", &err), -EEXIST);
	ck_assert_str_eq(err.msg, "container c1 already exists");
	ck_assert_int_eq(oci_container_make(rootfd, "../x", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "invalid container id '../x'"));

	struct oci_state s = {.pid = 4242,
			      .starttime = 99,
			      .started = true,
			      .uid_base = 200000,
			      .created_ms = 1700000000000};
	snprintf(s.id, sizeof(s.id), "c1");
	s.bundle = strdup("/run/b");
	s.annotations = json_pack("{s:s}", "k", "v");
	ck_assert_int_eq(oci_state_write(dir, &s, &err), 0);
	oci_state_clear(&s);

	/* A second command waits for the lock: here, a non-blocking try fails. */
	int other = openat(rootfd, "c1", O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(other, 0);
	ck_assert_int_eq(flock(other, LOCK_EX | LOCK_NB), -1);
	ck_assert_int_eq(errno, EWOULDBLOCK);
	close(other);
	close(dir);

	dir = oci_container_open(rootfd, "c1", &err);
	ck_assert_msg(dir >= 0, "%s", err.msg);
	struct oci_state r;
	ck_assert_int_eq(oci_state_read(dir, &r, &err), 0);
	ck_assert_str_eq(r.id, "c1");
	ck_assert_str_eq(r.bundle, "/run/b");
	ck_assert_ptr_null(r.rootfs);
	ck_assert_int_eq(r.pid, 4242);
	ck_assert_uint_eq(r.starttime, 99);
	ck_assert(r.started);
	ck_assert_uint_eq(r.uid_base, 200000);
	ck_assert_int_eq(r.created_ms, 1700000000000);
	ck_assert_str_eq(json_string_value(json_object_get(r.annotations, "k")), "v");
	oci_state_clear(&r);

	int d2 = oci_container_make(rootfd, "a0", &err);
	ck_assert_int_ge(d2, 0);
	close(d2);
	char **ids;
	size_t n;
	ck_assert_int_eq(oci_container_ids(rootfd, &ids, &n, &err), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(ids[0], "a0");
	ck_assert_str_eq(ids[1], "c1");
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);

	ck_assert_int_eq(oci_container_remove(rootfd, "c1", dir, &err), 0);
	ck_assert_int_eq(oci_container_open(rootfd, "c1", &err), -ENOENT);
	ck_assert_str_eq(err.msg, "container c1 does not exist");
	close(rootfd);
	free(sub);
	remove_root();
}
END_TEST

/* A torn or foreign state.json is an error naming it, never a crash. */
START_TEST(bad_state_files)
{
	make_root();
	struct cell_error err = {0};
	int rootfd = oci_root_open(root, &err);
	int dir = oci_container_make(rootfd, "c", &err);
	ck_assert_int_ge(dir, 0);
	static const struct {
		const char *text, *needle;
	} cases[] = {
	    {"{\"id\":\"c\",\"pid\":1", "not a JSON object"},
	    {"[]", "not a JSON object"},
	    {"{\"id\":\"../c\"}", "id is missing or invalid"},
	    {"{\"id\":\"c\",\"pid\":-1,\"starttime\":1,\"uidBase\":1,\"createdMs\":1,"
	     "\"started\":false}",
	     "pid is missing or out of range"},
	    {"{\"id\":\"c\",\"pid\":1,\"starttime\":1,\"uidBase\":1,\"createdMs\":1}",
	     "started is missing"},
	    {"{\"id\":\"c\",\"bundle\":7,\"pid\":1,\"starttime\":1,\"uidBase\":1,"
	     "\"createdMs\":1,\"started\":false}",
	     "bundle is missing or not a string"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int fd = openat(dir, "state.json", O_WRONLY | O_CREAT | O_TRUNC, 0600);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(write(fd, cases[i].text, strlen(cases[i].text)),
				 (ssize_t)strlen(cases[i].text));
		close(fd);
		struct oci_state s;
		ck_assert_int_lt(oci_state_read(dir, &s, &err), 0);
		ck_assert_msg(strstr(err.msg, cases[i].needle), "case %zu: %s", i, err.msg);
	}
	/* a FIFO planted as state.json is refused, not waited on */
	ck_assert_int_eq(unlinkat(dir, "state.json", 0), 0);
	ck_assert_int_eq(mkfifoat(dir, "state.json", 0600), 0);
	struct oci_state s;
	ck_assert_int_lt(oci_state_read(dir, &s, &err), 0);
	close(dir);
	close(rootfd);
	remove_root();
}
END_TEST

START_TEST(relative_root_refused)
{
	struct cell_error err = {0};
	ck_assert_int_eq(oci_root_open("run/x", &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "--root 'run/x' is not an absolute path"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("oci_state");
	TCase *tc = tcase_create("state");
	tcase_add_test(tc, id_rule);
	tcase_add_test(tc, make_write_read_list_remove);
	tcase_add_test(tc, bad_state_files);
	tcase_add_test(tc, relative_root_refused);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
