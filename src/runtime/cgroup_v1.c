/* cgroup v1 backend: <rel> in each controller hierarchy, plus the cgroup2 hierarchy at
 * <root>/unified on a hybrid host (process tracking and cgroup.kill). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <time.h>
#include <linux/magic.h>

#include "cell/cgroup.h"
#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "internal.h"

#define FREEZE_POLLS 200 /* × 1 ms */

/* The hierarchies a sandbox joins. cpuset is left out on purpose: a v1 cpuset cgroup accepts
 * no task until cpus and mems are set. */
static const char *const hierarchies[] = {"cpu",   "cpuacct", "memory", "pids",
					  "blkio", "freezer", "unified"};

static bool probe_mounted(const char *hier)
{
	char path[PATH_MAX];
	struct statfs sfs;
	snprintf(path, sizeof(path), "%s/%s", cell_cgroup_root(), hier);
	if (statfs(path, &sfs) < 0)
		return false;
	return strcmp(hier, "unified") ? sfs.f_type == CGROUP_SUPER_MAGIC
				       : sfs.f_type == CGROUP2_SUPER_MAGIC;
}

/* A hierarchy is used when it is mounted: controllers the kernel lacks are skipped, and
 * "unified" only counts on a hybrid host. Probed once per process, like the layout itself
 * (cell_cgroup_detect): every create, attach, kill and destroy asks, for each hierarchy. */
static bool mounted(const char *hier)
{
	static int known[CELL_ARRAY_SIZE(hierarchies)]; /* 0 unknown, 1 no, 2 yes */
	size_t i = 0;
	while (i < CELL_ARRAY_SIZE(hierarchies) && strcmp(hierarchies[i], hier))
		i++;
	if (i == CELL_ARRAY_SIZE(hierarchies))
		return probe_mounted(hier);
	int v = __atomic_load_n(&known[i], __ATOMIC_RELAXED);
	if (!v) {
		v = probe_mounted(hier) ? 2 : 1;
		__atomic_store_n(&known[i], v, __ATOMIC_RELAXED);
	}
	return v == 2;
}

/* Where pids are listed: memory (always there, detect checked it), else pids. */
static const char *tracking_hierarchy(void)
{
	return mounted("memory") ? "memory" : "pids";
}

static int check_rel(const char *rel, struct cell_error *err)
{
	if (!cell_cgroup_rel_valid(rel))
		return cell_err(err, EINVAL, "invalid cgroup name '%s'", rel ? rel : "");
	return 0;
}

static int v1_create(const char *rel, struct cell_error *err)
{
	int r = check_rel(rel, err);
	for (size_t i = 0; r == 0 && i < CELL_ARRAY_SIZE(hierarchies); i++)
		if (mounted(hierarchies[i]))
			r = cell_cgroup_mkdir(hierarchies[i], rel, err);
	return r;
}

static int v1_attach(const char *rel, pid_t pid, struct cell_error *err)
{
	char path[PATH_MAX], val[24];
	int r = check_rel(rel, err);
	snprintf(val, sizeof(val), "%d", (int)pid);
	for (size_t i = 0; r == 0 && i < CELL_ARRAY_SIZE(hierarchies); i++) {
		if (!mounted(hierarchies[i]))
			continue;
		if (cell_cgroup_path(path, sizeof(path), hierarchies[i], rel, "cgroup.procs") < 0)
			return cell_err(err, ENAMETOOLONG, "cgroup path for %s", rel);
		r = cell_write_string(path, val, err);
	}
	return r;
}

int cell_cgroup_v1_join_open(const char *rel, struct cell_cgroup_join *j, struct cell_error *err)
{
	char path[PATH_MAX];
	int r = check_rel(rel, err);
	for (size_t i = 0; r == 0 && i < CELL_ARRAY_SIZE(hierarchies); i++) {
		if (!mounted(hierarchies[i]))
			continue;
		bool unified = !strcmp(hierarchies[i], "unified");
		if (cell_cgroup_path(path, sizeof(path), hierarchies[i], rel,
				     unified ? NULL : "tasks") < 0)
			return cell_err(err, ENAMETOOLONG, "cgroup path for %s", rel);
		int fd = open(path, (unified ? O_RDONLY | O_DIRECTORY : O_WRONLY) | O_CLOEXEC |
					O_NOFOLLOW);
		if (fd < 0)
			return cell_err(err, errno, "opening %s", path);
		if (unified) {
			j->clone_fd = fd;
		} else if (j->n_task_fds == CELL_CGROUP_JOIN_MAX) {
			close(fd);
			return cell_err(err, E2BIG, "too many cgroup hierarchies");
		} else {
			j->task_fds[j->n_task_fds++] = fd;
		}
	}
	return r;
}

/* rel's cgroup.procs in the hierarchy that tracks the sandbox's tasks. */
static int procs_path(const char *rel, char *buf, size_t size, struct cell_error *err)
{
	int r = check_rel(rel, err);
	if (r < 0)
		return r;
	if (cell_cgroup_path(buf, size, tracking_hierarchy(), rel, "cgroup.procs") < 0)
		return cell_err(err, ENAMETOOLONG, "cgroup path for %s", rel);
	return 0;
}

static int v1_list_pids(const char *rel, pid_t **pids, size_t *n, struct cell_error *err)
{
	char path[PATH_MAX];
	*pids = NULL;
	*n = 0;
	int r = procs_path(rel, path, sizeof(path), err);
	return r < 0 ? r : cell_cgroup_read_pids(path, pids, n, err);
}

static bool set_freezer(const char *rel, const char *state)
{
	char path[PATH_MAX];
	if (!mounted("freezer") ||
	    cell_cgroup_path(path, sizeof(path), "freezer", rel, "freezer.state") < 0 ||
	    cell_write_string(path, state, NULL) < 0)
		return false;
	if (strcmp(state, "FROZEN"))
		return true;
	/* FREEZING until every task has stopped; bounded, as a task stuck in the kernel may
	 * never get there (then we signal anyway and try again next round). */
	const struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
	for (int i = 0; i < FREEZE_POLLS; i++) {
		_cleanup_free_ char *now = NULL;
		if (cell_read_file_at(AT_FDCWD, path, 64, &now, NULL, NULL) < 0)
			return true;
		if (!strncmp(now, "FROZEN", 6))
			return true;
		nanosleep(&ms, NULL);
	}
	return true;
}

/* One kill round. On a hybrid host the unified hierarchy's cgroup.kill does it atomically.
 * Otherwise (and as a backstop) freeze so that no task forks or exits between reading the
 * pids and signalling them — a frozen task cannot die, so its pid cannot be recycled and
 * handed to an unrelated host process — SIGKILL each (a v1-frozen task stays frozen with
 * the signal pending), then thaw so they die. */
static int kill_round(const char *rel, struct cell_error *err)
{
	char path[PATH_MAX];
	if (mounted("unified") &&
	    cell_cgroup_path(path, sizeof(path), "unified", rel, "cgroup.kill") == 0)
		cell_write_string(path, "1", NULL);
	bool frozen = set_freezer(rel, "FROZEN");
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0;
	int r = v1_list_pids(rel, &pids, &n, err);
	for (size_t i = 0; i < n; i++)
		kill(pids[i], SIGKILL);
	if (frozen)
		set_freezer(rel, "THAWED");
	return r;
}

static int v1_kill_all(const char *rel, struct cell_error *err)
{
	char procs[PATH_MAX];
	int r = procs_path(rel, procs, sizeof(procs), err);
	return r < 0 ? r : cell_cgroup_drain(procs, kill_round, rel, err);
}

static int v1_destroy(const char *rel, struct cell_error *err)
{
	int r = check_rel(rel, err);
	if (r < 0)
		return r;
	/* Every hierarchy is tried even after a failure, so a retry has less left to do. */
	for (size_t i = 0; i < CELL_ARRAY_SIZE(hierarchies); i++) {
		if (!mounted(hierarchies[i]))
			continue;
		int ri = cell_cgroup_rmdir(hierarchies[i], rel, r < 0 ? NULL : err);
		if (r == 0)
			r = ri;
	}
	return r;
}

static void v1_describe(const char *rel, char *buf, size_t size)
{
	if (size && cell_cgroup_path(buf, size, tracking_hierarchy(), rel ? rel : "", NULL) < 0)
		buf[0] = '\0';
}

const struct cell_cgroup_ops cell_cgroup_v1_ops = {
    .name = "v1-hybrid",
    .create = v1_create,
    .attach = v1_attach,
    .list_pids = v1_list_pids,
    .kill_all = v1_kill_all,
    .destroy = v1_destroy,
    .describe = v1_describe,
};

/* Same backend on a host without the cgroup2 "unified" mount. */
const struct cell_cgroup_ops cell_cgroup_v1_plain_ops = {
    .name = "v1",
    .create = v1_create,
    .attach = v1_attach,
    .list_pids = v1_list_pids,
    .kill_all = v1_kill_all,
    .destroy = v1_destroy,
    .describe = v1_describe,
};
