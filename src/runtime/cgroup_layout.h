/* The host's cgroup layout as seen once at start (cgroup.c), shared by the backends and by
 * the read-only mount of a sandbox's cgroup (mount_cgroup.c). Private to src/runtime/ files
 * about cgroups. Filled by cell_cgroup_detect() before any thread or child exists, read
 * only afterwards (the cloned child reads it without locks). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

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

const struct cell_cg_layout *cell_cgroup_layout(void);

/* celld's own cgroup in hierarchy hier ("" = the v2 root or "unified" of a hybrid host;
 * else a v1 controller name), relative, without slashes around it: "" when celld sits at
 * the root or nesting is off. Sandboxes' cgroups are created below it. */
const char *cell_cgroup_prefix(const char *hier);

/* v2 only: make the prefix usable for controller-enabled children (the "no internal
 * processes" rule). Called before the first path is used; idempotent. */
void cell_cgroup_v2_settle(void);
