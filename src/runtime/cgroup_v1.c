/* cgroup v1 backend: <rel> in each controller hierarchy, plus the cgroup2 hierarchy at
 * <root>/unified on a hybrid host (process tracking and cgroup.kill). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>

#include "cell/cgroup.h"
#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cgroup_fs.h"
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
	snprintf(path, sizeof(path), "%s/%s", cell_cgroup_fs_root(), hier);
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
	if (!cell_cgroup_fs_rel_valid(rel))
		return cell_err(err, EINVAL, "invalid cgroup name '%s'", rel ? rel : "");
	return 0;
}

static int v1_create(const char *rel, struct cell_error *err)
{
	int r = check_rel(rel, err);
	for (size_t i = 0; r == 0 && i < CELL_ARRAY_SIZE(hierarchies); i++)
		if (mounted(hierarchies[i]))
			r = cell_cgroup_fs_mkdir(hierarchies[i], rel, err);
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
		if (cell_cgroup_fs_path(path, sizeof(path), hierarchies[i], rel, "cgroup.procs") <
		    0)
			return cell_err(err, ENAMETOOLONG, "cgroup path for %s", rel);
		r = cell_write_string(path, val, err);
	}
	return r;
}

static int v1_join_open(const char *rel, struct cell_cgroup_join *j, struct cell_error *err)
{
	char path[PATH_MAX];
	int r = check_rel(rel, err);
	for (size_t i = 0; r == 0 && i < CELL_ARRAY_SIZE(hierarchies); i++) {
		if (!mounted(hierarchies[i]))
			continue;
		bool unified = !strcmp(hierarchies[i], "unified");
		if (cell_cgroup_fs_path(path, sizeof(path), hierarchies[i], rel,
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
	if (cell_cgroup_fs_path(buf, size, tracking_hierarchy(), rel, "cgroup.procs") < 0)
		return cell_err(err, ENAMETOOLONG, "cgroup path for %s", rel);
	return 0;
}

static int v1_list_pids(const char *rel, pid_t **pids, size_t *n, struct cell_error *err)
{
	char path[PATH_MAX];
	*pids = NULL;
	*n = 0;
	int r = procs_path(rel, path, sizeof(path), err);
	return r < 0 ? r : cell_cgroup_fs_read_pids(path, pids, n, err);
}

static bool set_freezer(const char *rel, const char *state)
{
	char path[PATH_MAX];
	if (!mounted("freezer") ||
	    cell_cgroup_fs_path(path, sizeof(path), "freezer", rel, "freezer.state") < 0 ||
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
	    cell_cgroup_fs_path(path, sizeof(path), "unified", rel, "cgroup.kill") == 0)
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
	return r < 0 ? r : cell_cgroup_fs_drain(procs, kill_round, rel, err);
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
		int ri = cell_cgroup_fs_rmdir(hierarchies[i], rel, r < 0 ? NULL : err);
		if (r == 0)
			r = ri;
	}
	return r;
}

/* ---- limits, freezing, usage ---- */

#define CPU_PERIOD_US  100000
#define FREEZE_WAIT_MS 5000

/* Write val into <hier>/<rel>/<file>. A hierarchy that is not mounted is skipped only when
 * the limit is unlimited anyway; asking for a limit the host cannot enforce is an error. */
static int write_file(const char *hier, const char *rel, const char *file, const char *val,
		      bool optional, struct cell_error *err)
{
	char path[PATH_MAX];
	if (!mounted(hier))
		return optional ? 0
				: cell_err(err, ENOTSUP, "no v1 %s hierarchy for %s", hier, file);
	if (cell_cgroup_fs_path(path, sizeof(path), hier, rel, file) < 0)
		return cell_err(err, ENAMETOOLONG, "cgroup path for %s", rel);
	int r = cell_write_string(path, val, NULL);
	if (r == -ENOENT && optional)
		return 0;
	return r < 0 ? cell_err(err, -r, "setting %s to %s", path, val) : 0;
}

static int v1_set_io(const char *rel, const struct cell_limits *lim, struct cell_error *err)
{
	static const char *const files[] = {
	    "blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
	    "blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device"};
	const uint64_t vals[] = {lim->io_read_bps, lim->io_write_bps, lim->io_read_iops,
				 lim->io_write_iops};
	for (size_t i = 0; lim->io_device && i < CELL_ARRAY_SIZE(files); i++) {
		if (!vals[i])
			continue;
		char val[64];
		snprintf(val, sizeof(val), "%u:%u %" PRIu64, major(lim->io_device),
			 minor(lim->io_device), vals[i]);
		int r = write_file("blkio", rel, files[i], val, false, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* v1 charges socket buffers (TCP and UDP queues alike) to this counter, apart from
 * memory.limit_in_bytes, and only for sockets created while their cgroup's counter has a
 * limit: without one they are charged to no cgroup at all, only to the host's global
 * net.ipv4.tcp_mem, whose hard limit then fails every TCP socket on the host. */
#define TCP_LIMIT "memory.kmem.tcp.limit_in_bytes"

static int write_u64(const char *hier, const char *rel, const char *file, uint64_t v,
		     struct cell_error *err)
{
	char val[32];
	snprintf(val, sizeof(val), "%" PRIu64, v);
	return write_file(hier, rel, file, val, false, err);
}

/* The bounds on all sandboxes together, on the instance cgroup above rel. */
static int v1_set_total(const char *rel, const struct cell_limits *lim, struct cell_error *err)
{
	char inst[PATH_MAX];
	if (!lim->total_pids && !lim->total_socket_bytes)
		return 0;
	if (cell_cgroup_fs_instance(rel, inst, sizeof(inst)) < 0)
		return cell_err(err, EINVAL, "cgroup %s has no instance cgroup", rel);
	int r = lim->total_pids ? write_u64("pids", inst, "pids.max", lim->total_pids, err) : 0;
	if (r < 0 || !lim->total_socket_bytes)
		return r;
	/* Below what the sandboxes hold already (tcp_mem was lowered since the value in force
	 * was written) the kernel refuses with EBUSY: that value stays. */
	struct cell_error werr = {0};
	r = write_u64("memory", inst, TCP_LIMIT, lim->total_socket_bytes, &werr);
	return r < 0 && r != -EBUSY ? cell_err(err, -r, "%s", werr.msg) : 0;
}

static int v1_set_limits(const char *rel, const struct cell_limits *lim, struct cell_error *err)
{
	char val[32];
	int r = check_rel(rel, err);
	if (r == 0)
		r = v1_set_total(rel, lim, err);
	if (r < 0)
		return r;
	/* Before any socket exists in the cgroup: the kernel ties a socket to its cgroup's
	 * counter when it is created, and only when that counter has a limit then. */
	if (lim->socket_bytes &&
	    (r = write_u64("memory", rel, TCP_LIMIT, lim->socket_bytes, err)) < 0)
		return r;
	if (lim->cpu_millis) {
		snprintf(val, sizeof(val), "%u", CPU_PERIOD_US);
		r = write_file("cpu", rel, "cpu.cfs_period_us", val, false, err);
		snprintf(val, sizeof(val), "%" PRIu64, lim->cpu_millis * CPU_PERIOD_US / 1000);
		if (r == 0)
			r = write_file("cpu", rel, "cpu.cfs_quota_us", val, false, err);
		if (r < 0)
			return r;
	}
	if (lim->memory_bytes) {
		snprintf(val, sizeof(val), "%" PRIu64, lim->memory_bytes);
		if ((r = write_file("memory", rel, "memory.limit_in_bytes", val, false, err)) < 0)
			return r;
		/* memory+swap at the same value: no swap (missing without swap accounting). */
		r = write_file("memory", rel, "memory.memsw.limit_in_bytes", val, true, err);
		if (r < 0)
			return r;
	}
	if (lim->pids && (r = write_u64("pids", rel, "pids.max", lim->pids, err)) < 0)
		return r;
	return v1_set_io(rel, lim, err);
}

static int elapsed_ms(const struct timespec *start)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int)((now.tv_sec - start->tv_sec) * 1000 +
		     (now.tv_nsec - start->tv_nsec) / 1000000);
}

/* freezer.state reads FREEZING until every task has stopped; v1 has no notification, so
 * poll (finely at first: most freezes finish within a millisecond). Bounded. */
static int v1_freeze(const char *rel, bool frozen, struct cell_error *err)
{
	char path[PATH_MAX];
	int r = check_rel(rel, err);
	if (r < 0)
		return r;
	if ((r = write_file("freezer", rel, "freezer.state", frozen ? "FROZEN" : "THAWED", false,
			    err)) < 0)
		return r;
	if (!frozen)
		return 0;
	cell_cgroup_fs_path(path, sizeof(path), "freezer", rel, "freezer.state");
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (int i = 0;; i++) {
		_cleanup_free_ char *now = NULL;
		if ((r = cell_read_file_at(AT_FDCWD, path, 64, &now, NULL, NULL)) < 0)
			return cell_err(err, -r, "reading %s", path);
		if (!strncmp(now, "FROZEN", 6))
			return 0;
		if (elapsed_ms(&start) > FREEZE_WAIT_MS) {
			set_freezer(rel, "THAWED");
			return cell_err(err, ETIMEDOUT, "%s stayed %.*s", path,
					(int)strcspn(now, "\n"), now);
		}
		const struct timespec nap = {.tv_sec = 0, .tv_nsec = i < 100 ? 50000 : 1000000};
		nanosleep(&nap, NULL);
	}
}

static uint64_t read_u64(const char *hier, const char *rel, const char *file, const char *key)
{
	char path[PATH_MAX];
	uint64_t v = 0;
	if (mounted(hier) && cell_cgroup_fs_path(path, sizeof(path), hier, rel, file) == 0)
		cell_cgroup_fs_u64(AT_FDCWD, path, key, &v);
	return v;
}

static uint64_t v1_oom_kills(const char *rel)
{
	return read_u64("memory", rel, "memory.oom_control", "oom_kill");
}

static int v1_usage(const char *rel, struct cell_cgroup_usage *out, struct cell_error *err)
{
	char path[PATH_MAX];
	int r = procs_path(rel, path, sizeof(path), err);
	if (r < 0)
		return r;
	if (access(path, F_OK) < 0)
		return cell_err(err, errno, "cgroup %s", path);
	*out = (struct cell_cgroup_usage){
	    .cpu_usec = read_u64("cpuacct", rel, "cpuacct.usage", NULL) / 1000,
	    .memory_current = read_u64("memory", rel, "memory.usage_in_bytes", NULL),
	    .memory_peak = read_u64("memory", rel, "memory.max_usage_in_bytes", NULL),
	    .socket_current = read_u64("memory", rel, "memory.kmem.tcp.usage_in_bytes", NULL),
	    .pids_current = read_u64("pids", rel, "pids.current", NULL),
	    .oom_kills = v1_oom_kills(rel),
	};
	return 0;
}

/* The three counters a sampler of many sandboxes reads: one file in each of three
 * hierarchies, the first of which says whether the cgroup exists. */
static int v1_counters(const char *rel, struct cell_cgroup_usage *out, struct cell_error *err)
{
	char path[PATH_MAX];
	int r = check_rel(rel, err);
	if (r < 0)
		return r;
	*out = (struct cell_cgroup_usage){0};
	if (!mounted("cpuacct") ||
	    cell_cgroup_fs_path(path, sizeof(path), "cpuacct", rel, "cpuacct.usage") < 0)
		return cell_err(err, ENOTSUP, "no cpuacct hierarchy for %s", rel);
	r = cell_cgroup_fs_u64(AT_FDCWD, path, NULL, &out->cpu_usec);
	if (r < 0)
		return cell_err(err, -r, "cgroup %s", path);
	out->cpu_usec /= 1000;
	out->memory_current = read_u64("memory", rel, "memory.usage_in_bytes", NULL);
	out->pids_current = read_u64("pids", rel, "pids.current", NULL);
	return 0;
}

static void v1_describe(const char *rel, char *buf, size_t size)
{
	if (size && cell_cgroup_fs_path(buf, size, tracking_hierarchy(), rel ? rel : "", NULL) < 0)
		buf[0] = '\0';
}

/* ---- the hierarchies a sandbox sees ---- */

/* Read at detection, before any child exists; the child reads it without locks. */
static struct cell_cg_layout layout;

static void v1_probe(void)
{
	cell_cgroup_fs_layout(&layout);
}

static int v1_mount_inside(int rootfd, struct cell_child_err *ce)
{
	return cell_child_mount_cgroup_hybrid(&layout, rootfd, ce);
}

/* Both v1 tables differ only in the name they show. */
#define V1_OPS                                                                                     \
	.socket_memory_apart = true, .create = v1_create, .attach = v1_attach,                     \
	.list_pids = v1_list_pids, .kill_all = v1_kill_all, .destroy = v1_destroy,                 \
	.describe = v1_describe, .set_limits = v1_set_limits, .freeze = v1_freeze,                 \
	.usage = v1_usage, .counters = v1_counters, .oom_kills = v1_oom_kills, .probe = v1_probe,  \
	.join_open = v1_join_open, .mount_inside = v1_mount_inside

const struct cell_cgroup_ops cell_cgroup_v1_ops = {.name = "v1-hybrid", V1_OPS};

/* Same backend on a host without the cgroup2 "unified" mount. */
const struct cell_cgroup_ops cell_cgroup_v1_plain_ops = {.name = "v1", V1_OPS};
