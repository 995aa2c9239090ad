/* fs-safe helpers. cell_open_in_root() is what keeps file API paths inside a sandbox, and
 * cell_remove_tree_at() runs as root over directories a sandbox wrote, so both are tested
 * against planted `..` paths, absolute and relative symlinks, magic links and odd modes. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cell/fsutil.h"
#include "unit.h"

static char base[192]; /* per-test temp dir */
static int basefd = -1;
static int rootfd = -1; /* base/root: the "sandbox root" for open_in_root */

/* --- independent helpers (never the code under test) --- */

static void rm_rf_at(int dfd, const char *name)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (!S_ISDIR(st.st_mode)) {
		unlinkat(dfd, name, 0);
		return;
	}
	/* a failed chmod shows up as a failed open below */
	if (fchmodat(dfd, name, 0700, 0) < 0 && errno != EPERM)
		return;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		DIR *d = fdopendir(fd);
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				rm_rf_at(fd, de->d_name);
		if (d)
			closedir(d);
		else
			close(fd);
	}
	unlinkat(dfd, name, AT_REMOVEDIR);
}

static void put(const char *rel, const char *content, mode_t mode)
{
	int fd = openat(basefd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ck_assert_msg(fd >= 0, "create %s: %s", rel, strerror(errno));
	size_t n = strlen(content);
	ck_assert_int_eq(write(fd, content, n), (ssize_t)n);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

static void dir(const char *rel)
{
	ck_assert_msg(mkdirat(basefd, rel, 0755) == 0, "mkdir %s: %s", rel, strerror(errno));
}

static void link_(const char *target, const char *rel)
{
	ck_assert_msg(symlinkat(target, basefd, rel) == 0, "symlink %s: %s", rel, strerror(errno));
}

/* Absolute host path of something under base, for planting absolute symlinks. */
static const char *host(const char *rel)
{
	static char buf[4][512];
	static int slot;
	char *b = buf[slot++ % 4];
	snprintf(b, sizeof(buf[0]), "%s/%s", base, rel);
	return b;
}

static char *slurp_fd(int fd)
{
	static char buf[256];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

static char *slurp(const char *rel)
{
	int fd = openat(basefd, rel, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	char *s = slurp_fd(fd);
	close(fd);
	return s;
}

static bool exists(const char *rel)
{
	struct stat st;
	return fstatat(basefd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* rm -rf of an absolute path, never following symlinks. */
static void rm_rf(const char *path)
{
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", path);
	char *slash = strrchr(parent, '/');
	if (!slash || slash == parent)
		return;
	*slash = '\0';
	int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd >= 0) {
		rm_rf_at(pfd, slash + 1);
		close(pfd);
	}
}

/* Tests run in forked children and a failing one exits at once, skipping its checked
 * teardown: each test's tree lives under a per-tcase dir that the parent removes. */
static char top[128];

static void top_setup(void)
{
	snprintf(top, sizeof(top), "/tmp/cell-unit.XXXXXX");
	if (!mkdtemp(top)) {
		perror("mkdtemp");
		exit(EXIT_FAILURE);
	}
}

static void top_teardown(void)
{
	rm_rf(top);
}

static void tree_setup(void)
{
	snprintf(base, sizeof(base), "%s/t.XXXXXX", top);
	ck_assert_ptr_nonnull(mkdtemp(base));
	basefd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(basefd, 0);
	umask(022);
	/* Outside the root: what no resolution may ever reach. */
	put("outside.txt", "OUTSIDE", 0644);
	dir("outdir");
	put("outdir/keep.txt", "KEEP", 0644);
	/* The root, with a decoy at the path an escape would clamp to. */
	dir("root");
	dir("root/sub");
	put("root/inside.txt", "INSIDE", 0644);
	put("root/outside.txt", "DECOY", 0644);
	rootfd = openat(basefd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(rootfd, 0);
}

static void tree_teardown(void)
{
	if (rootfd >= 0)
		close(rootfd);
	rootfd = -1;
	if (basefd >= 0)
		close(basefd);
	basefd = -1;
	rm_rf(base);
}

/* --- cell_open_in_root --- */

/* Returns the content read through cell_open_in_root, or NULL with *r = -errno. */
static const char *read_in_root(int rfd, const char *path, int no_symlinks, int *r)
{
	int fd = cell_open_in_root(rfd, path, O_RDONLY, 0, no_symlinks);
	*r = fd;
	if (fd < 0)
		return NULL;
	ck_assert_msg(fcntl(fd, F_GETFD) & FD_CLOEXEC, "fd for %s is not CLOEXEC", path);
	const char *s = slurp_fd(fd);
	close(fd);
	return s;
}

/* Every path must resolve to something inside the root (the decoy) or fail. */
static void expect_confined(const char *path, const char *want)
{
	int r;
	const char *got = read_in_root(rootfd, path, 0, &r);
	if (got)
		ck_assert_msg(strcmp(got, "OUTSIDE") != 0, "%s escaped the root", path);
	if (want) {
		ck_assert_msg(got != NULL, "%s: %s", path, strerror(-r));
		ck_assert_str_eq(got, want);
	} else {
		ck_assert_msg(got == NULL, "%s resolved to '%s', wanted failure", path, got);
		ck_assert_int_lt(r, 0);
	}
}

START_TEST(open_plain_inside)
{
	expect_confined("inside.txt", "INSIDE");
	expect_confined("/inside.txt", "INSIDE");
	expect_confined("sub/../inside.txt", "INSIDE");
	expect_confined("missing.txt", NULL);
}
END_TEST

START_TEST(open_dotdot_clamped)
{
	expect_confined("../outside.txt", "DECOY");
	expect_confined("../../../../../../../outside.txt", "DECOY");
	expect_confined("sub/../../outside.txt", "DECOY");
	expect_confined("/../outside.txt", "DECOY");
	expect_confined("../outdir/keep.txt", NULL);
}
END_TEST

START_TEST(open_absolute_host_path_stays_inside)
{
	expect_confined(host("outside.txt"), NULL);
	expect_confined(host("outdir/keep.txt"), NULL);
}
END_TEST

START_TEST(open_absolute_symlinks)
{
	link_(host("outside.txt"), "root/abs");
	link_("/outside.txt", "root/absdecoy");
	link_(host("outdir"), "root/absdir");
	link_("/", "root/slash");
	expect_confined("abs", NULL);
	expect_confined("absdecoy", "DECOY");
	expect_confined("absdir/keep.txt", NULL);
	expect_confined("slash/../outside.txt", "DECOY");
	expect_confined("sub/../abs", NULL);
}
END_TEST

START_TEST(open_relative_symlinks)
{
	link_("../outside.txt", "root/rel");
	link_("../../../../../../../outside.txt", "root/sub/deeprel");
	link_("..", "root/sub/up");
	link_("../outdir", "root/reldir");
	link_("c2", "root/c1");
	link_("/../sub/../../outside.txt", "root/c2");
	expect_confined("rel", "DECOY");
	expect_confined("sub/deeprel", "DECOY");
	expect_confined("sub/up/up/../outside.txt", NULL); /* root/up does not exist */
	expect_confined("sub/up/outside.txt", "DECOY");
	expect_confined("reldir/keep.txt", NULL);
	expect_confined("c1", "DECOY");
}
END_TEST

/* A symlink *named* /proc/self/root inside the tree is resolved inside the tree. */
START_TEST(open_symlink_to_proc_self_root)
{
	link_("/proc/self/root", "root/procroot");
	link_("../../../../../../../../proc/self/root", "root/sub/relproc");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "procroot%s", host("outside.txt"));
	expect_confined(path, NULL);
	snprintf(path, sizeof(path), "sub/relproc%s", host("outside.txt"));
	expect_confined(path, NULL);
	snprintf(path, sizeof(path), "/proc/self/root%s", host("outside.txt"));
	expect_confined(path, NULL);
}
END_TEST

/* Real magic links (procfs inside the root, as in a sandbox) are refused outright:
 * /proc/<pid>/root and /proc/<pid>/fd/N jump anywhere (the CVE-2019-5736 class). */
START_TEST(open_magic_links_refused)
{
	int procself = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(procself, 0);
	int outfd = openat(basefd, "outside.txt", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(outfd, 0);
	char path[PATH_MAX];
	const char *paths[4];
	snprintf(path, sizeof(path), "root%s", host("outside.txt"));
	paths[0] = path;
	char fdpath[64];
	snprintf(fdpath, sizeof(fdpath), "fd/%d", outfd);
	paths[1] = fdpath;
	paths[2] = "cwd/..";
	paths[3] = "exe";
	for (size_t i = 0; i < 4; i++) {
		int r;
		const char *got = read_in_root(procself, paths[i], 0, &r);
		ck_assert_msg(got == NULL, "magic link /proc/self/%s followed", paths[i]);
		ck_assert_int_lt(r, 0);
	}
	close(outfd);
	close(procself);
}
END_TEST

START_TEST(open_no_symlinks_flag)
{
	link_("inside.txt", "root/plainlink");
	int r;
	ck_assert_ptr_null(read_in_root(rootfd, "plainlink", 1, &r));
	ck_assert_int_eq(r, -ELOOP);
	ck_assert_str_eq(read_in_root(rootfd, "plainlink", 0, &r), "INSIDE");
	ck_assert_str_eq(read_in_root(rootfd, "sub/../inside.txt", 1, &r), "INSIDE");
}
END_TEST

START_TEST(open_root_itself)
{
	struct stat want, got;
	ck_assert_int_eq(fstat(rootfd, &want), 0);
	const char *paths[] = {"/", ".", "..", "../..", "sub/../..", "/.."};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		int fd = cell_open_in_root(rootfd, paths[i], O_PATH | O_DIRECTORY, 0, 0);
		ck_assert_msg(fd >= 0, "%s: %s", paths[i], strerror(-fd));
		ck_assert_int_eq(fstat(fd, &got), 0);
		ck_assert_msg(got.st_ino == want.st_ino && got.st_dev == want.st_dev,
			      "%s is not the root", paths[i]);
		close(fd);
	}
}
END_TEST

/* O_CREAT through a dangling symlink creates inside the root, never on the host. */
START_TEST(open_create_through_dangling_symlink)
{
	link_(host("created_outside.txt"), "root/dang");
	link_("/created_inside.txt", "root/dang2");
	link_("../../created_rel.txt", "root/dang3");
	int fd = cell_open_in_root(rootfd, "dang", O_WRONLY | O_CREAT, 0644, 0);
	if (fd >= 0)
		close(fd);
	ck_assert_msg(!exists("created_outside.txt"), "O_CREAT escaped through absolute link");
	fd = cell_open_in_root(rootfd, "dang2", O_WRONLY | O_CREAT, 0644, 0);
	if (fd >= 0) {
		close(fd);
		ck_assert(exists("root/created_inside.txt"));
	}
	ck_assert(!exists("created_inside.txt"));
	fd = cell_open_in_root(rootfd, "dang3", O_WRONLY | O_CREAT, 0644, 0);
	if (fd >= 0)
		close(fd);
	ck_assert_msg(!exists("created_rel.txt"), "O_CREAT escaped through relative link");
	/* A plain create works and honours the mode. */
	fd = cell_open_in_root(rootfd, "sub/new.txt", O_WRONLY | O_CREAT | O_EXCL, 0600, 0);
	ck_assert_int_ge(fd, 0);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	close(fd);
}
END_TEST

/* --- cell_remove_tree_at --- */

static void build_victim(void)
{
	dir("victim");
	dir("victim/a");
	dir("victim/a/b");
	put("victim/a/b/file", "x", 0644);
	link_(host("outdir"), "victim/abs_dir_link");
	link_("../outdir", "victim/rel_dir_link");
	link_(host("outside.txt"), "victim/file_link");
	link_(host("outdir"), "victim/a/b/deep_dir_link");
	dir("victim/locked");
	dir("victim/locked/inner");
	put("victim/locked/inner/f", "y", 0644);
	put("victim/locked/f", "z", 0000);
	ck_assert_int_eq(fchmodat(basefd, "victim/locked/inner", 0000, 0), 0);
	ck_assert_int_eq(fchmodat(basefd, "victim/locked", 0000, 0), 0);
	dir("victim/ro");
	put("victim/ro/f", "r", 0444);
	ck_assert_int_eq(fchmodat(basefd, "victim/ro", 0500, 0), 0);
	ck_assert_int_eq(mkfifoat(basefd, "victim/fifo", 0600), 0);
	/* deep nesting */
	char p[PATH_MAX] = "victim";
	for (int i = 0; i < 100; i++) {
		strcat(p, "/d");
		dir(p);
	}
}

static void expect_outside_intact(void)
{
	ck_assert_str_eq(slurp("outdir/keep.txt"), "KEEP");
	ck_assert_str_eq(slurp("outside.txt"), "OUTSIDE");
}

/* celld runs as root, and cell_remove_tree_at relies on root's CAP_DAC_OVERRIDE to enter
 * mode-000 dirs. A non-root test run gets the same powers over its own files from a user
 * namespace mapping its uid to 0. Runs in a forked child; with_tmpfs also gives the child
 * a private mount namespace with a tmpfs mounted on base/m/mnt. */
static int become_root(bool with_tmpfs)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	int flags = (with_tmpfs ? CLONE_NEWNS : 0) | (uid ? CLONE_NEWUSER : 0);
	if (flags && unshare(flags) < 0)
		return -1;
	if (uid) {
		char map[64];
		struct cell_error err = {0};
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
		if (cell_write_string("/proc/self/setgroups", "deny", &err) < 0 ||
		    cell_write_string("/proc/self/uid_map", map, &err) < 0)
			return -1;
		snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
		if (cell_write_string("/proc/self/gid_map", map, &err) < 0)
			return -1;
	}
	if (with_tmpfs) {
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("tmpfs", host("m/mnt"), "tmpfs", 0, "size=1m") < 0)
			return -1;
		/* fds opened before unshare() walk the old namespace's mounts: reopen. */
		basefd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (basefd < 0)
			return -1;
	}
	return 0;
}

#define CHILD_NO_USERNS 77

/* Remove base/name in a root-powered child; returns the child's exit code: 0 removed, 1
 * refused (message on stderr), CHILD_NO_USERNS when no user namespace could be made. */
static int remove_as_root(const char *name, bool with_tmpfs)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (become_root(with_tmpfs) < 0)
			_exit(CHILD_NO_USERNS);
		if (with_tmpfs) {
			int fd =
			    openat(basefd, "m/mnt/precious", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
			if (fd < 0)
				_exit(3);
			close(fd);
		}
		struct cell_error err = {0};
		int r = cell_remove_tree_at(basefd, name, &err);
		if (r < 0)
			fprintf(stderr, "cell_remove_tree_at(%s): %s\n", name, err.msg);
		if (with_tmpfs && !exists("m/mnt/precious"))
			_exit(5);
		_exit(r < 0 ? 1 : 0);
	}
	int status = 0;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status), "child died (status %d)", status);
	return WEXITSTATUS(status);
}

static void need_userns(int rc)
{
	if (rc == CHILD_NO_USERNS)
		ck_abort_msg("not root and no user namespace: cannot run as celld does");
}

START_TEST(remove_tree_full)
{
	build_victim();
	int rc = remove_as_root("victim", false);
	need_userns(rc);
	ck_assert_msg(rc == 0, "remove failed (see stderr)");
	ck_assert(!exists("victim"));
	expect_outside_intact();
}
END_TEST

/* overlayfs leaves mode-000 work dirs; a sandbox can make any dir 000. */
START_TEST(remove_tree_mode_000_dirs)
{
	dir("z");
	dir("z/work");
	dir("z/work/work");
	put("z/work/work/f", "w", 0000);
	ck_assert_int_eq(fchmodat(basefd, "z/work/work", 0000, 0), 0);
	ck_assert_int_eq(fchmodat(basefd, "z/work", 0000, 0), 0);
	ck_assert_int_eq(fchmodat(basefd, "z", 0000, 0), 0);
	int rc = remove_as_root("z", false);
	need_userns(rc);
	ck_assert_msg(rc == 0, "remove failed (see stderr)");
	ck_assert(!exists("z"));
}
END_TEST

START_TEST(remove_tree_top_symlink_not_followed)
{
	link_(host("outdir"), "lnk");
	link_("outdir", "rlnk");
	struct cell_error err = {0};
	ck_assert_int_eq(cell_remove_tree_at(basefd, "lnk", &err), 0);
	ck_assert_int_eq(cell_remove_tree_at(basefd, "rlnk", &err), 0);
	ck_assert(!exists("lnk"));
	ck_assert(!exists("rlnk"));
	expect_outside_intact();
}
END_TEST

START_TEST(remove_tree_missing_and_file)
{
	struct cell_error err = {0};
	ck_assert_int_eq(cell_remove_tree_at(basefd, "nope", &err), 0);
	put("plain", "p", 0000);
	ck_assert_int_eq(cell_remove_tree_at(basefd, "plain", &err), 0);
	ck_assert(!exists("plain"));
	/* Through a subdir fd, as celld uses it on <state>/sandboxes/<id>. */
	dir("s");
	dir("s/upper");
	link_(host("outdir"), "s/upper/x");
	int sfd = openat(basefd, "s", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(sfd, 0);
	ck_assert_int_eq(cell_remove_tree_at(sfd, "upper", &err), 0);
	close(sfd);
	ck_assert(!exists("s/upper"));
	expect_outside_intact();
}
END_TEST

/* A mount inside the tree (a bind of a host dir, say) is refused rather than emptied. The
 * mount lives in a private mount namespace of a child, so the host never sees it. */
START_TEST(remove_tree_does_not_cross_mounts)
{
	dir("m");
	dir("m/mnt");
	int rc = remove_as_root("m", true);
	need_userns(rc);
	ck_assert_msg(rc != 5, "files under a mount point were removed");
	ck_assert_msg(rc == 1, "removal crossed a mount point (child exit %d)", rc);
}
END_TEST

/* --- cell_write_file_atomic --- */

static int count_entries(const char *rel)
{
	int fd = openat(basefd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	DIR *d = fdopendir(fd);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

START_TEST(write_atomic_creates_and_replaces)
{
	dir("w");
	int wfd = openat(basefd, "w", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct cell_error err = {0};
	ck_assert_int_eq(cell_write_file_atomic(wfd, "state.json", "{\"a\":1}", 7, 0600, &err), 0);
	ck_assert_str_eq(slurp("w/state.json"), "{\"a\":1}");
	struct stat st1, st2;
	ck_assert_int_eq(fstatat(wfd, "state.json", &st1, 0), 0);
	ck_assert_uint_eq(st1.st_mode & 07777, 0600);

	ck_assert_int_eq(cell_write_file_atomic(wfd, "state.json", "{\"b\":2}", 7, 0600, &err), 0);
	ck_assert_str_eq(slurp("w/state.json"), "{\"b\":2}");
	ck_assert_int_eq(fstatat(wfd, "state.json", &st2, 0), 0);
	/* Replaced by rename, not rewritten in place: a reader never sees a torn file. */
	ck_assert_uint_ne(st1.st_ino, st2.st_ino);
	ck_assert_int_eq(count_entries("w"), 1);

	ck_assert_int_eq(cell_write_file_atomic(wfd, "empty", "", 0, 0644, &err), 0);
	ck_assert_int_eq(fstatat(wfd, "empty", &st1, 0), 0);
	ck_assert_int_eq(st1.st_size, 0);
	ck_assert_uint_eq(st1.st_mode & 07777, 0644);
	ck_assert_int_eq(count_entries("w"), 2);
	close(wfd);
}
END_TEST

START_TEST(write_atomic_large)
{
	size_t n = 3u << 20;
	char *data = malloc(n);
	for (size_t i = 0; i < n; i++)
		data[i] = (char)(i * 31);
	struct cell_error err = {0};
	ck_assert_int_eq(cell_write_file_atomic(basefd, "big", data, n, 0644, &err), 0);
	char *back = NULL;
	size_t len = 0;
	ck_assert_int_eq(cell_read_file_at(basefd, "big", n, &back, &len, &err), 0);
	ck_assert_uint_eq(len, n);
	ck_assert_int_eq(memcmp(back, data, n), 0);
	free(back);
	free(data);
}
END_TEST

START_TEST(write_atomic_replaces_symlink_not_target)
{
	link_(host("outside.txt"), "target");
	struct cell_error err = {0};
	ck_assert_int_eq(cell_write_file_atomic(basefd, "target", "new", 3, 0644, &err), 0);
	struct stat st;
	ck_assert_int_eq(fstatat(basefd, "target", &st, AT_SYMLINK_NOFOLLOW), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_str_eq(slurp("target"), "new");
	expect_outside_intact();
}
END_TEST

/* Someone who can write the dir plants a symlink at every temp name we might use: the write
 * may fail, but must never go through the link. */
START_TEST(write_atomic_planted_temp_symlink)
{
	char tmpname[NAME_MAX + 1];
	snprintf(tmpname, sizeof(tmpname), ".f.tmp%d", (int)getpid());
	link_(host("outside.txt"), tmpname);
	struct cell_error err = {0};
	int r = cell_write_file_atomic(basefd, "f", "PWNED", 5, 0644, &err);
	expect_outside_intact();
	if (r == 0)
		ck_assert_str_eq(slurp("f"), "PWNED");
	else
		ck_assert_str_ne(err.msg, "");
}
END_TEST

START_TEST(write_atomic_name_too_long)
{
	char name[NAME_MAX + 1];
	memset(name, 'n', NAME_MAX - 2);
	name[NAME_MAX - 2] = '\0';
	struct cell_error err = {0};
	int r = cell_write_file_atomic(basefd, name, "x", 1, 0644, &err);
	ck_assert_int_eq(r, -ENAMETOOLONG);
	ck_assert_ptr_nonnull(strstr(err.msg, "nnnnnnnn"));
	ck_assert_int_eq(count_entries("."), 3); /* outside.txt outdir root */
}
END_TEST

/* --- cell_read_file_at --- */

static void put_n(const char *rel, size_t n)
{
	char *buf = malloc(n + 1);
	memset(buf, 'q', n);
	buf[n] = '\0';
	put(rel, buf, 0644);
	free(buf);
}

START_TEST(read_limits)
{
	struct cell_error err = {0};
	char *out = (char *)"sentinel";
	size_t len = 99;

	put_n("exact", 4096);
	ck_assert_int_eq(cell_read_file_at(basefd, "exact", 4096, &out, &len, &err), 0);
	ck_assert_uint_eq(len, 4096);
	ck_assert_uint_eq(strlen(out), 4096);
	free(out);

	put_n("over", 4097);
	ck_assert_int_eq(cell_read_file_at(basefd, "over", 4096, &out, &len, &err), -EFBIG);
	ck_assert_ptr_null(out);
	ck_assert_ptr_nonnull(strstr(err.msg, "over"));

	put_n("small", 10);
	ck_assert_int_eq(cell_read_file_at(basefd, "small", 9, &out, &len, &err), -EFBIG);
	ck_assert_int_eq(cell_read_file_at(basefd, "small", 10, &out, &len, &err), 0);
	free(out);
	ck_assert_int_eq(cell_read_file_at(basefd, "small", 0, &out, &len, &err), -EFBIG);

	put("empty", "", 0644);
	ck_assert_int_eq(cell_read_file_at(basefd, "empty", 0, &out, &len, &err), 0);
	ck_assert_uint_eq(len, 0);
	ck_assert_str_eq(out, "");
	free(out);

	put_n("mid", 100000);
	ck_assert_int_eq(cell_read_file_at(basefd, "mid", 100000, &out, NULL, &err), 0);
	ck_assert_uint_eq(strlen(out), 100000);
	free(out);
	ck_assert_int_eq(cell_read_file_at(basefd, "mid", 99999, &out, &len, &err), -EFBIG);
}
END_TEST

START_TEST(read_refuses_non_regular)
{
	struct cell_error err = {0};
	char *out = NULL;
	size_t len;

	ck_assert_int_eq(cell_read_file_at(basefd, "missing", 100, &out, &len, &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "missing"));

	link_("outside.txt", "lnk");
	ck_assert_int_lt(cell_read_file_at(basefd, "lnk", 100, &out, &len, &err), 0);
	ck_assert_ptr_null(out);

	ck_assert_int_lt(cell_read_file_at(basefd, "outdir", 100, &out, &len, &err), 0);
	ck_assert_ptr_null(out);
	ck_assert_ptr_nonnull(strstr(err.msg, "outdir"));
}
END_TEST

/* A FIFO planted where a file is expected must fail, not block the reader forever. */
START_TEST(read_fifo_does_not_hang)
{
	ck_assert_int_eq(mkfifoat(basefd, "fifo", 0644), 0);
	struct cell_error err = {0};
	char *out = NULL;
	size_t len;
	ck_assert_int_lt(cell_read_file_at(basefd, "fifo", 100, &out, &len, &err), 0);
	ck_assert_ptr_null(out);
}
END_TEST

/* procfs files report size 0 but have content: read until EOF, not st_size. */
START_TEST(read_procfs_file)
{
	struct cell_error err = {0};
	char *out = NULL;
	size_t len = 0;
	ck_assert_int_eq(
	    cell_read_file_at(AT_FDCWD, "/proc/self/status", 1 << 16, &out, &len, &err), 0);
	ck_assert_uint_gt(len, 0);
	ck_assert_ptr_nonnull(strstr(out, "Pid:"));
	free(out);
}
END_TEST

/* --- cell_mkdir_p, cell_write_string --- */

START_TEST(mkdir_p_and_write_string)
{
	struct cell_error err = {0};
	ck_assert_int_eq(cell_mkdir_p(host("x/y/z"), 0711, &err), 0);
	ck_assert_int_eq(cell_mkdir_p(host("x/y/z"), 0711, &err), 0);
	ck_assert(exists("x/y/z"));
	ck_assert_int_eq(cell_mkdir_p("relative/path", 0755, &err), -EINVAL);
	ck_assert_int_eq(cell_mkdir_p(host("outside.txt"), 0755, &err), -ENOTDIR);
	ck_assert_ptr_nonnull(strstr(err.msg, "outside.txt"));

	put("knob", "", 0644);
	ck_assert_int_eq(cell_write_string(host("knob"), "max", &err), 0);
	ck_assert_str_eq(slurp("knob"), "max");
	ck_assert_int_eq(cell_write_string(host("nope/knob"), "1", &err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "nope/knob"));
	/* knobs are never written through a symlink */
	link_(host("outside.txt"), "knoblink");
	ck_assert_int_lt(cell_write_string(host("knoblink"), "PWNED", &err), 0);
	expect_outside_intact();
}
END_TEST

static Suite *fsutil_suite(void)
{
	Suite *s = suite_create("fsutil");
	TCase *tc = tcase_create("open_in_root");
	tcase_add_unchecked_fixture(tc, top_setup, top_teardown);
	tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
	tcase_add_test(tc, open_plain_inside);
	tcase_add_test(tc, open_dotdot_clamped);
	tcase_add_test(tc, open_absolute_host_path_stays_inside);
	tcase_add_test(tc, open_absolute_symlinks);
	tcase_add_test(tc, open_relative_symlinks);
	tcase_add_test(tc, open_symlink_to_proc_self_root);
	tcase_add_test(tc, open_magic_links_refused);
	tcase_add_test(tc, open_no_symlinks_flag);
	tcase_add_test(tc, open_root_itself);
	tcase_add_test(tc, open_create_through_dangling_symlink);
	suite_add_tcase(s, tc);

	tc = tcase_create("remove_tree");
	tcase_add_unchecked_fixture(tc, top_setup, top_teardown);
	tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
	tcase_add_test(tc, remove_tree_full);
	tcase_add_test(tc, remove_tree_mode_000_dirs);
	tcase_add_test(tc, remove_tree_top_symlink_not_followed);
	tcase_add_test(tc, remove_tree_missing_and_file);
	tcase_add_test(tc, remove_tree_does_not_cross_mounts);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_add_unchecked_fixture(tc, top_setup, top_teardown);
	tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, write_atomic_creates_and_replaces);
	tcase_add_test(tc, write_atomic_large);
	tcase_add_test(tc, write_atomic_replaces_symlink_not_target);
	tcase_add_test(tc, write_atomic_planted_temp_symlink);
	tcase_add_test(tc, write_atomic_name_too_long);
	tcase_add_test(tc, read_limits);
	tcase_add_test(tc, read_refuses_non_regular);
	tcase_add_test(tc, read_fifo_does_not_hang);
	tcase_add_test(tc, read_procfs_file);
	tcase_add_test(tc, mkdir_p_and_write_string);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(fsutil_suite());
}
