/* cgroup backends behind one ops table, chosen once at start.
 *
 * A sandbox's cgroup is named by a relative path such as "cell/<id>" (or
 * "cell-<instance>/<id>" for a non-default state dir). On a pure v2 host that is
 * /sys/fs/cgroup/<rel>; on a hybrid host (v1 controllers + cgroup2 at
 * /sys/fs/cgroup/unified) it is <rel> in each v1 controller hierarchy (cpu, cpuacct,
 * memory, pids, blkio, freezer) plus the unified hierarchy, for process tracking. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cell/error.h"

/* A sandbox's limits, already validated against the policy (0 = unlimited). Swap is always
 * off where the controller allows it. */
struct cell_limits {
	uint64_t cpu_millis; /* 1000 = one core */
	uint64_t memory_bytes;
	/* Socket buffers (TCP and UDP queues), on a backend that charges them apart from
	 * memory (socket_memory_apart); elsewhere they count in memory_bytes and this is 0. */
	uint64_t socket_bytes;
	uint64_t pids;
	uint64_t disk_bytes; /* quota on the writable layer (include/cell/quota.h) */
	uint64_t io_read_bps, io_write_bps, io_read_iops, io_write_iops;
	dev_t io_device; /* the block device holding the state dir; 0 = no io limits */
	/* What all sandboxes of this celld together may hold: written into the instance cgroup
	 * (rel's parent, which holds every sandbox's cgroup) before the sandbox's own limits,
	 * so the kernel enforces the sum. 0 = not bounded there. */
	uint64_t total_pids, total_socket_bytes;
};

/* What the cgroup's own counters say. */
struct cell_cgroup_usage {
	uint64_t cpu_usec;
	uint64_t memory_current, memory_peak; /* bytes */
	uint64_t socket_current; /* bytes of socket buffers (within memory_current on v2) */
	uint64_t pids_current;
	uint64_t oom_kills; /* processes the OOM killer ended in this cgroup */
};

/* Runtime-internal (src/runtime/internal.h): only spawn uses the members that take them. */
struct cell_cgroup_join;
struct cell_child_err;

struct cell_cgroup_ops {
	const char *name; /* "v2" or "v1-hybrid" (also "v1" without a unified mount) */
	/* v1 charges socket buffers to a counter of their own (memory.kmem.tcp.*), not to
	 * memory, and only for sockets created after that counter got a limit: set_limits
	 * bounds it with socket_bytes. v2 charges them to memory. */
	bool socket_memory_apart;
	/* mkdir -p the cgroup in every hierarchy (idempotent). */
	int (*create)(const char *rel, struct cell_error *err);
	/* Move pid into the cgroup in every hierarchy. */
	int (*attach)(const char *rel, pid_t pid, struct cell_error *err);
	/* Collect the pids in the cgroup (host pid namespace); *pids is malloc'd. */
	int (*list_pids)(const char *rel, pid_t **pids, size_t *n, struct cell_error *err);
	/* SIGKILL every process in the cgroup and wait (bounded) until it is empty. */
	int (*kill_all)(const char *rel, struct cell_error *err);
	/* rmdir the cgroup in every hierarchy; missing is success. Fails with -EBUSY while
	 * processes remain. Also removes the parent instance dir when it became empty. */
	int (*destroy)(const char *rel, struct cell_error *err);
	/* The main path shown to users (v2 path, or the v1 memory hierarchy path), into buf. */
	void (*describe)(const char *rel, char *buf, size_t size);
	/* Write the limits into the cgroup's controller files. */
	int (*set_limits)(const char *rel, const struct cell_limits *lim, struct cell_error *err);
	/* Freeze (true) or thaw every process of the cgroup; returns once the kernel reports
	 * the new state (bounded wait). */
	int (*freeze)(const char *rel, bool frozen, struct cell_error *err);
	int (*usage)(const char *rel, struct cell_cgroup_usage *out, struct cell_error *err);
	/* Only usage's cpu_usec, memory_current and pids_current (the rest 0), in as few reads
	 * as the backend allows: what a sampler of many sandboxes at once asks. */
	int (*counters)(const char *rel, struct cell_cgroup_usage *out, struct cell_error *err);
	/* Only usage's oom_kills (one file: read at the start and end of every command);
	 * 0 when unreadable. */
	uint64_t (*oom_kills)(const char *rel);

	/* What the runtime asks of the backend it was given; callers outside src/runtime/
	 * leave these alone. */
	/* Once, at detection: read what the backend needs later without reading files (v1:
	 * the hierarchies a sandbox sees, for mount_inside). Read-only. NULL: nothing. */
	void (*probe)(void);
	/* Make own (celld's cgroup, relative to the root, never "") able to hold the
	 * sandboxes' cgroups; false: they go to the root instead. It may shorten own in place
	 * (to the parent of the leaf celld was started in) and change the host's cgroups (v2
	 * moves celld into a leaf), so it runs once on first use, not at detection. NULL:
	 * nothing to do (v1 allows processes beside child cgroups). */
	bool (*settle)(char *own);
	/* Open the fds through which the child joins rel before it runs anything (struct
	 * cell_cgroup_join), in the parent before clone. NULL: the parent attaches the child
	 * by pid after clone (attach). */
	int (*join_open)(const char *rel, struct cell_cgroup_join *j, struct cell_error *err);
	/* In the cloned child (internal.h rules), after it joined its cgroup and unshared its
	 * cgroup namespace: mount that cgroup read-only at /sys/fs/cgroup below rootfd. */
	int (*mount_inside)(int rootfd, struct cell_child_err *ce);
};

/* Detect the host's layout once (statfs of /sys/fs/cgroup, /sys/fs/cgroup/unified) and
 * return the matching backend; NULL with err filled when neither is usable. The root can be
 * overridden for tests with the env var CELL_CGROUP_ROOT (default /sys/fs/cgroup). */
const struct cell_cgroup_ops *cell_cgroup_detect(struct cell_error *err);
/* cell-oci: a container's cgroup is at the path its spec gives, from the hierarchy's root
 * (an OCI cgroupsPath), not nested below the caller's own cgroup as celld's sandboxes are.
 * Before the first cgroup call. */
void cell_cgroup_no_nesting(void);

extern const struct cell_cgroup_ops cell_cgroup_v2_ops;
extern const struct cell_cgroup_ops cell_cgroup_v1_ops;

#define CELL_DEFAULT_STATE_DIR "/var/lib/cell"

/* The relative cgroup name of sandbox `id` for a celld using `state_dir` (absolute,
 * canonical; trailing slashes ignored): "cell/<id>" for CELL_DEFAULT_STATE_DIR, else
 * "cell-<first 8 hex of sha256(state_dir)>/<id>", so several celld never collide.
 * Returns 0, -EINVAL (bad id or state dir) or -ENAMETOOLONG. */
int cell_cgroup_name(const char *state_dir, const char *id, char *buf, size_t size);
