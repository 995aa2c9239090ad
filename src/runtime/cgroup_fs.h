/* cgroup_fs.c: the cgroup filesystem as both backends (cgroup_v1.c, cgroup_v2.c) use it —
 * paths below celld's own cgroup, mkdir/rmdir, cgroup.procs, the kill loop — and the
 * layout of the host's cgroup mounts. A leaf: it calls no backend by name; the backend
 * cell_cgroup_detect() chose is handed to it once (cell_cgroup_fs_start) for its settle.
 * Private to the src/runtime/ files about cgroups. Filled before any thread or child
 * exists, read only afterwards (the cloned child reads the layout without locks). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "cell/cgroup.h"
#include "cell/error.h"

#define CELL_CG_MAX_MOUNTS 8
#define CELL_CG_MAX_OPTS   4
#define CELL_CG_NAME_MAX   48

/* One hierarchy to mount read-only inside a sandbox on a v1 host. */
struct cell_cg_mount {
	char dir[CELL_CG_NAME_MAX]; /* its name under the cgroup root: "memory", "cpu,cpuacct" */
	char opts[CELL_CG_MAX_OPTS][16]; /* the controllers (fsconfig flags of the mount) */
	size_t n_opts;
	bool v2; /* the "unified" cgroup2 mount of a hybrid host */
};

/* A compatibility name ("cpu" → "cpu,cpuacct") recreated inside. */
struct cell_cg_link {
	char name[CELL_CG_NAME_MAX], target[CELL_CG_NAME_MAX];
};

struct cell_cg_layout {
	struct cell_cg_mount mounts[CELL_CG_MAX_MOUNTS];
	size_t n_mounts;
	struct cell_cg_link links[CELL_CG_MAX_MOUNTS];
	size_t n_links;
};

/* Once, by cell_cgroup_detect(): read celld's own cgroups (/proc/self/cgroup) and keep ops,
 * whose settle runs before the first path below celld's own cgroup is built. */
void cell_cgroup_fs_start(const struct cell_cgroup_ops *ops);

/* The v1 hierarchies a sandbox sees read-only (mount_cgroup.c), from /proc/self/mountinfo:
 * each cgroup mount right under the root, with its controllers, and the host's
 * compatibility symlinks. */
void cell_cgroup_fs_layout(struct cell_cg_layout *out);

/* celld's own cgroup in hierarchy hier ("" = the v2 root or "unified" of a hybrid host;
 * else a v1 controller name), relative, without slashes around it: "" when celld sits at
 * the root or nesting is off. Sandboxes' cgroups are created below it. */
const char *cell_cgroup_fs_prefix(const char *hier);

const char *cell_cgroup_fs_root(void);
bool cell_cgroup_fs_rel_valid(const char *rel);
/* <root>/<hier>/<prefix>/<rel>[/<file>] (hier may be ""); -ENAMETOOLONG when it does not
 * fit. */
int cell_cgroup_fs_path(char *buf, size_t size, const char *hier, const char *rel,
			const char *file);
/* mkdir -p of <root>/<hier>/<rel> (existing is success). */
int cell_cgroup_fs_mkdir(const char *hier, const char *rel, struct cell_error *err);
/* rmdir <root>/<hier>/<rel> (missing is success), then its parent when empty. */
int cell_cgroup_fs_rmdir(const char *hier, const char *rel, struct cell_error *err);
/* rel's parent ("cell-xxxxxxxx" of "cell-xxxxxxxx/<id>"): the instance cgroup that holds
 * every sandbox of one celld, where their totals are bounded. -EINVAL without one. */
int cell_cgroup_fs_instance(const char *rel, char *buf, size_t size);
/* The number in the cgroup file dirfd/file (AT_FDCWD with a path also): with key, the value
 * after "key " in a flat keyed file (cpu.stat, memory.stat, memory.events); else its first
 * number. One read(2) into a bounded buffer and no stat, as a sampler of many cgroups wants.
 * 0 with *out, or -errno (-ENOENT: no such cgroup, -ENODATA: no such key). */
int cell_cgroup_fs_u64(int dirfd, const char *file, const char *key, uint64_t *out);
/* Parse a cgroup.procs file into a malloc'd array. A missing file gives 0 pids. */
int cell_cgroup_fs_read_pids(const char *procs_path, pid_t **pids, size_t *n,
			     struct cell_error *err);
/* kill_all's loop: call kill_round(rel), then poll procs_path until it lists no pid; repeat,
 * for at most ~10 s. A cgroup that does not exist (no procs file) is already empty. */
int cell_cgroup_fs_drain(const char *procs_path,
			 int (*kill_round)(const char *, struct cell_error *), const char *rel,
			 struct cell_error *err);
