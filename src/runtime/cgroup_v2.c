/* cgroup v2 backend: one hierarchy at <root>/<rel>. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell/cgroup.h"
#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "internal.h"

static const char *const wanted_controllers[] = {"cpu", "memory", "pids", "io"};

static bool has_word(const char *list, const char *word)
{
	size_t len = strlen(word);
	for (const char *c = list; (c = strstr(c, word)); c += len)
		if ((c == list || c[-1] == ' ') && (c[len] == ' ' || c[len] == '\n' || !c[len]))
			return true;
	return false;
}

/* Quotas need the controllers enabled in every ancestor's subtree_control. Best effort:
 * the sandbox works without them, and a later quota step reports what is missing. */
static void enable_controllers(const char *dir)
{
	char path[PATH_MAX];
	_cleanup_free_ char *avail = NULL;
	snprintf(path, sizeof(path), "%s/cgroup.controllers", dir);
	if (cell_read_file_at(AT_FDCWD, path, 4096, &avail, NULL, NULL) < 0)
		return;
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
	for (size_t i = 0; i < CELL_ARRAY_SIZE(wanted_controllers); i++) {
		char op[32];
		if (!has_word(avail, wanted_controllers[i]))
			continue;
		snprintf(op, sizeof(op), "+%s", wanted_controllers[i]);
		cell_write_string(path, op, NULL);
	}
}

/* rel's directory (file NULL) or a file in it; a bad rel is refused before it becomes a
 * path. */
static int v2_path(const char *rel, const char *file, char *buf, size_t size,
		   struct cell_error *err)
{
	if (!cell_cgroup_rel_valid(rel) || cell_cgroup_path(buf, size, "", rel, file) < 0)
		return cell_err(err, EINVAL, "invalid cgroup name '%s'", rel ? rel : "");
	return 0;
}

static int v2_create(const char *rel, struct cell_error *err)
{
	if (!cell_cgroup_rel_valid(rel))
		return cell_err(err, EINVAL, "invalid cgroup name '%s'", rel ? rel : "");
	int r = cell_cgroup_mkdir("", rel, err);
	if (r < 0)
		return r;
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", cell_cgroup_root());
	enable_controllers(dir);
	for (const char *c = rel; (c = strchr(c, '/')); c++) {
		snprintf(dir, sizeof(dir), "%s/%.*s", cell_cgroup_root(), (int)(c - rel), rel);
		enable_controllers(dir);
	}
	return 0;
}

static int v2_attach(const char *rel, pid_t pid, struct cell_error *err)
{
	char path[PATH_MAX], val[24];
	int r = v2_path(rel, "cgroup.procs", path, sizeof(path), err);
	if (r < 0)
		return r;
	snprintf(val, sizeof(val), "%d", (int)pid);
	return cell_write_string(path, val, err);
}

int cell_cgroup_v2_join_open(const char *rel, struct cell_cgroup_join *j, struct cell_error *err)
{
	char path[PATH_MAX];
	int r = v2_path(rel, NULL, path, sizeof(path), err);
	if (r < 0)
		return r;
	j->clone_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (j->clone_fd < 0)
		return cell_err(err, errno, "opening %s", path);
	return 0;
}

static int v2_list_pids(const char *rel, pid_t **pids, size_t *n, struct cell_error *err)
{
	char path[PATH_MAX];
	*pids = NULL;
	*n = 0;
	int r = v2_path(rel, "cgroup.procs", path, sizeof(path), err);
	return r < 0 ? r : cell_cgroup_read_pids(path, pids, n, err);
}

/* Without cgroup.kill (kernels before 5.14): freeze first so nothing forks or exits on its
 * own between reading the pids and signalling them (a pid read from cgroup.procs must not
 * be recycled by then), SIGKILL (it ends frozen tasks in v2), thaw. */
static int kill_round(const char *rel, struct cell_error *err)
{
	char path[PATH_MAX];
	cell_cgroup_path(path, sizeof(path), "", rel, "cgroup.kill");
	/* cgroup.kill signals every task atomically, forks in flight included. */
	if (cell_write_string(path, "1", NULL) == 0)
		return 0;
	char freeze[PATH_MAX];
	cell_cgroup_path(freeze, sizeof(freeze), "", rel, "cgroup.freeze");
	bool frozen = cell_write_string(freeze, "1", NULL) == 0;
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0;
	cell_cgroup_path(path, sizeof(path), "", rel, "cgroup.procs");
	int r = cell_cgroup_read_pids(path, &pids, &n, err);
	for (size_t i = 0; i < n; i++)
		kill(pids[i], SIGKILL);
	if (frozen)
		cell_write_string(freeze, "0", NULL);
	return r;
}

static int v2_kill_all(const char *rel, struct cell_error *err)
{
	char procs[PATH_MAX];
	int r = v2_path(rel, "cgroup.procs", procs, sizeof(procs), err);
	return r < 0 ? r : cell_cgroup_drain(procs, kill_round, rel, err);
}

static int v2_destroy(const char *rel, struct cell_error *err)
{
	if (!cell_cgroup_rel_valid(rel))
		return cell_err(err, EINVAL, "invalid cgroup name '%s'", rel ? rel : "");
	return cell_cgroup_rmdir("", rel, err);
}

static void v2_describe(const char *rel, char *buf, size_t size)
{
	if (size && cell_cgroup_path(buf, size, "", rel ? rel : "", NULL) < 0)
		buf[0] = '\0';
}

const struct cell_cgroup_ops cell_cgroup_v2_ops = {
    .name = "v2",
    .create = v2_create,
    .attach = v2_attach,
    .list_pids = v2_list_pids,
    .kill_all = v2_kill_all,
    .destroy = v2_destroy,
    .describe = v2_describe,
};
