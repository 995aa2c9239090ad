/* cgroup v2 backend: one hierarchy at <root>/<rel>. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "cell/cgroup.h"
#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cgroup_fs.h"
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

/* The v2 prefix can take controller-enabled children: the wanted controllers are available
 * to it and can be enabled in its subtree_control. */
static bool v2_prefix_usable(const char *dir)
{
	static const char *const need[] = {"cpu", "memory", "pids"};
	char path[PATH_MAX];
	_cleanup_free_ char *avail = NULL;
	snprintf(path, sizeof(path), "%s/cgroup.controllers", dir);
	if (cell_read_file_at(AT_FDCWD, path, 4096, &avail, NULL, NULL) < 0)
		return false;
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
	for (size_t i = 0; i < CELL_ARRAY_SIZE(need); i++) {
		char op[16];
		snprintf(op, sizeof(op), "+%s", need[i]);
		if (!strstr(avail, need[i]) || cell_write_string(path, op, NULL) < 0)
			return false;
	}
	return true;
}

/* Started in a leaf named celld: the delegated cgroup is its parent. That is where a
 * service manager that delegates a subgroup (systemd's DelegateSubgroup=celld) starts
 * celld, and where an earlier celld moved itself: its sandboxes nest in the parent, and
 * the leaf stays free of controllers so the next celld can be started in it while they
 * run. True with own shortened to the parent. */
static bool v2_settle_in_parent(char *own)
{
	char *slash = strrchr(own, '/');
	if (strcmp(slash ? slash + 1 : own, "celld"))
		return false;
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s/%.*s", cell_cgroup_fs_root(),
		 slash ? (int)(slash - own) : 0, own);
	if (!v2_prefix_usable(parent))
		return false;
	if (slash)
		*slash = '\0';
	else
		own[0] = '\0';
	log_info("cgroup: celld runs in the leaf %s/celld; sandboxes nest in %s", parent, parent);
	return true;
}

/* cgroup_fs.c calls this once, before the first path below own is built. */
static bool v2_settle(char *own)
{
	char dir[PATH_MAX], leaf[PATH_MAX + 16];
	if (v2_settle_in_parent(own))
		return true;
	snprintf(dir, sizeof(dir), "%s/%s", cell_cgroup_fs_root(), own);
	if (v2_prefix_usable(dir))
		return true;
	/* Processes in celld's cgroup block its subtree_control: move celld (the whole
	 * process) into a leaf of its own and try again. */
	snprintf(leaf, sizeof(leaf), "%s/celld", dir);
	char procs[PATH_MAX + 32];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", leaf);
	if ((mkdir(leaf, 0755) == 0 || errno == EEXIST) &&
	    cell_write_string(procs, "0", NULL) == 0) {
		if (v2_prefix_usable(dir)) {
			log_info("cgroup: celld moved into %s so that sandboxes nest in %s", leaf,
				 dir);
			return true;
		}
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
		cell_write_string(procs, "0", NULL);
		rmdir(leaf);
	}
	log_warn("cgroup: cannot nest sandboxes in %s (controllers not delegated, or other "
		 "processes there); using the cgroup root",
		 dir);
	return false;
}

/* rel's directory (file NULL) or a file in it; a bad rel is refused before it becomes a
 * path. */
static int v2_path(const char *rel, const char *file, char *buf, size_t size,
		   struct cell_error *err)
{
	if (!cell_cgroup_fs_rel_valid(rel) || cell_cgroup_fs_path(buf, size, "", rel, file) < 0)
		return cell_err(err, EINVAL, "invalid cgroup name '%s'", rel ? rel : "");
	return 0;
}

static int v2_create(const char *rel, struct cell_error *err)
{
	if (!cell_cgroup_fs_rel_valid(rel))
		return cell_err(err, EINVAL, "invalid cgroup name '%s'", rel ? rel : "");
	int r = cell_cgroup_fs_mkdir("", rel, err);
	if (r < 0)
		return r;
	/* celld's own cgroup (the root when not nested; see v2_settle), then each
	 * dir of rel above the sandbox's. */
	const char *prefix = cell_cgroup_fs_prefix("");
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s%s%s", cell_cgroup_fs_root(), prefix[0] ? "/" : "", prefix);
	enable_controllers(dir);
	for (const char *c = rel; (c = strchr(c, '/')); c++) {
		char part[PATH_MAX];
		snprintf(part, sizeof(part), "%.*s", (int)(c - rel), rel);
		if (cell_cgroup_fs_path(dir, sizeof(dir), "", part, NULL) == 0)
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

static int v2_join_open(const char *rel, struct cell_cgroup_join *j, struct cell_error *err)
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
	return r < 0 ? r : cell_cgroup_fs_read_pids(path, pids, n, err);
}

/* Without cgroup.kill (kernels before 5.14): freeze first so nothing forks or exits on its
 * own between reading the pids and signalling them (a pid read from cgroup.procs must not
 * be recycled by then), SIGKILL (it ends frozen tasks in v2), thaw. */
static int kill_round(const char *rel, struct cell_error *err)
{
	char path[PATH_MAX];
	cell_cgroup_fs_path(path, sizeof(path), "", rel, "cgroup.kill");
	/* cgroup.kill signals every task atomically, forks in flight included. */
	if (cell_write_string(path, "1", NULL) == 0)
		return 0;
	char freeze[PATH_MAX];
	cell_cgroup_fs_path(freeze, sizeof(freeze), "", rel, "cgroup.freeze");
	bool frozen = cell_write_string(freeze, "1", NULL) == 0;
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0;
	cell_cgroup_fs_path(path, sizeof(path), "", rel, "cgroup.procs");
	int r = cell_cgroup_fs_read_pids(path, &pids, &n, err);
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
	return r < 0 ? r : cell_cgroup_fs_drain(procs, kill_round, rel, err);
}

static int v2_destroy(const char *rel, struct cell_error *err)
{
	if (!cell_cgroup_fs_rel_valid(rel))
		return cell_err(err, EINVAL, "invalid cgroup name '%s'", rel ? rel : "");
	return cell_cgroup_fs_rmdir("", rel, err);
}

static void v2_describe(const char *rel, char *buf, size_t size)
{
	if (size && cell_cgroup_fs_path(buf, size, "", rel ? rel : "", NULL) < 0)
		buf[0] = '\0';
}

/* ---- limits, freezing, usage ---- */

#define CPU_PERIOD_US  100000
#define FREEZE_WAIT_MS 5000

static int write_file(const char *rel, const char *file, const char *val, bool optional,
		      struct cell_error *err)
{
	char path[PATH_MAX];
	int r = v2_path(rel, file, path, sizeof(path), err);
	if (r < 0)
		return r;
	struct cell_error werr = {0};
	r = cell_write_string(path, val, &werr);
	if (r == -ENOENT && optional)
		return 0;
	if (r < 0)
		return cell_err(err, -r, "setting %s to %s (controller not enabled?)", path, val);
	return 0;
}

/* "max" for 0 (unlimited), else the number. */
static void limit_text(uint64_t v, char *buf, size_t size)
{
	if (v)
		snprintf(buf, size, "%" PRIu64, v);
	else
		snprintf(buf, size, "max");
}

static int v2_set_io(const char *rel, const struct cell_limits *lim, struct cell_error *err)
{
	if (!lim->io_device ||
	    !(lim->io_read_bps | lim->io_write_bps | lim->io_read_iops | lim->io_write_iops))
		return 0;
	char rb[24], wb[24], ri[24], wi[24], val[160];
	limit_text(lim->io_read_bps, rb, sizeof(rb));
	limit_text(lim->io_write_bps, wb, sizeof(wb));
	limit_text(lim->io_read_iops, ri, sizeof(ri));
	limit_text(lim->io_write_iops, wi, sizeof(wi));
	snprintf(val, sizeof(val), "%u:%u rbps=%s wbps=%s riops=%s wiops=%s", major(lim->io_device),
		 minor(lim->io_device), rb, wb, ri, wi);
	return write_file(rel, "io.max", val, false, err);
}

/* The bound on all sandboxes together, on the instance cgroup above rel. Socket buffers
 * need none of their own here: v2 charges them to each sandbox's memory. */
static int v2_set_total(const char *rel, const struct cell_limits *lim, struct cell_error *err)
{
	char inst[PATH_MAX], val[32];
	if (!lim->total_pids)
		return 0;
	if (cell_cgroup_fs_instance(rel, inst, sizeof(inst)) < 0)
		return cell_err(err, EINVAL, "cgroup %s has no instance cgroup", rel);
	snprintf(val, sizeof(val), "%" PRIu64, lim->total_pids);
	return write_file(inst, "pids.max", val, false, err);
}

static int v2_set_limits(const char *rel, const struct cell_limits *lim, struct cell_error *err)
{
	char val[64];
	int r = v2_set_total(rel, lim, err);
	if (r < 0)
		return r;
	if (lim->cpu_millis)
		snprintf(val, sizeof(val), "%" PRIu64 " %u", lim->cpu_millis * CPU_PERIOD_US / 1000,
			 CPU_PERIOD_US);
	else
		snprintf(val, sizeof(val), "max %u", CPU_PERIOD_US);
	r = write_file(rel, "cpu.max", val, false, err);
	if (r < 0)
		return r;
	limit_text(lim->memory_bytes, val, sizeof(val));
	if ((r = write_file(rel, "memory.max", val, false, err)) < 0)
		return r;
	/* No swap: a sandbox at its limit is OOM-killed instead of pushing the host into swap.
	 * The file is missing when the kernel has no swap accounting. */
	if ((r = write_file(rel, "memory.swap.max", "0", true, err)) < 0)
		return r;
	limit_text(lim->pids, val, sizeof(val));
	if ((r = write_file(rel, "pids.max", val, false, err)) < 0)
		return r;
	return v2_set_io(rel, lim, err);
}

static int elapsed_ms(const struct timespec *start)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int)((now.tv_sec - start->tv_sec) * 1000 +
		     (now.tv_nsec - start->tv_nsec) / 1000000);
}

/* cgroup.freeze asks; cgroup.events "frozen 1" says every task has stopped. The events file
 * signals POLLPRI on each change, so no busy polling; bounded, as a task stuck in the
 * kernel (an uninterruptible wait) delays it. */
static int v2_freeze(const char *rel, bool frozen, struct cell_error *err)
{
	int r = write_file(rel, "cgroup.freeze", frozen ? "1" : "0", false, err);
	if (r < 0)
		return r;
	char path[PATH_MAX];
	if ((r = v2_path(rel, "cgroup.events", path, sizeof(path), err)) < 0)
		return r;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "opening %s", path);
	const char *want = frozen ? "frozen 1" : "frozen 0";
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		char buf[256];
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		if (n < 0)
			return cell_err(err, errno, "reading %s", path);
		buf[n] = '\0';
		if (strstr(buf, want))
			return 0;
		int left = FREEZE_WAIT_MS - elapsed_ms(&start);
		if (left <= 0)
			return cell_err(err, ETIMEDOUT, "%s did not report '%s'", path, want);
		struct pollfd pfd = {.fd = fd, .events = POLLPRI};
		poll(&pfd, 1, left < 50 ? left : 50);
	}
}

static uint64_t read_u64(const char *rel, const char *file, const char *key)
{
	char path[PATH_MAX];
	uint64_t v = 0;
	if (v2_path(rel, file, path, sizeof(path), NULL) == 0)
		cell_cgroup_fs_u64(AT_FDCWD, path, key, &v);
	return v;
}

static uint64_t v2_oom_kills(const char *rel)
{
	return read_u64(rel, "memory.events", "oom_kill");
}

static int v2_usage(const char *rel, struct cell_cgroup_usage *out, struct cell_error *err)
{
	char path[PATH_MAX];
	int r = v2_path(rel, NULL, path, sizeof(path), err);
	if (r < 0)
		return r;
	if (access(path, F_OK) < 0)
		return cell_err(err, errno, "cgroup %s", path);
	*out = (struct cell_cgroup_usage){
	    .cpu_usec = read_u64(rel, "cpu.stat", "usage_usec"),
	    .memory_current = read_u64(rel, "memory.current", NULL),
	    .memory_peak = read_u64(rel, "memory.peak", NULL),
	    .socket_current = read_u64(rel, "memory.stat", "sock"),
	    .pids_current = read_u64(rel, "pids.current", NULL),
	    .oom_kills = v2_oom_kills(rel),
	};
	return 0;
}

/* The three counters a sampler of many sandboxes reads, through one open of the cgroup's
 * directory: a path walked once, not once a file. */
static int v2_counters(const char *rel, struct cell_cgroup_usage *out, struct cell_error *err)
{
	char path[PATH_MAX];
	int r = v2_path(rel, NULL, path, sizeof(path), err);
	if (r < 0)
		return r;
	_cleanup_close_ int dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return cell_err(err, errno, "cgroup %s", path);
	*out = (struct cell_cgroup_usage){0};
	cell_cgroup_fs_u64(dir, "cpu.stat", "usage_usec", &out->cpu_usec);
	cell_cgroup_fs_u64(dir, "memory.current", NULL, &out->memory_current);
	cell_cgroup_fs_u64(dir, "pids.current", NULL, &out->pids_current);
	return 0;
}

const struct cell_cgroup_ops cell_cgroup_v2_ops = {
    .name = "v2",
    .create = v2_create,
    .attach = v2_attach,
    .list_pids = v2_list_pids,
    .kill_all = v2_kill_all,
    .destroy = v2_destroy,
    .describe = v2_describe,
    .set_limits = v2_set_limits,
    .freeze = v2_freeze,
    .usage = v2_usage,
    .counters = v2_counters,
    .oom_kills = v2_oom_kills,
    .settle = v2_settle,
    .join_open = v2_join_open,
    .mount_inside = cell_child_mount_cgroup2,
};
