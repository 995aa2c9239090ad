/* state.c: cell-oci's record of its containers, under the --root directory the engine
 * names (containerd's shim: /run/containerd/runc/<namespace>; dockerd: /run/docker/runtime-
 * runc/moby), one directory per container:
 *
 *   <root>/            0700, made on first use
 *   <root>/<id>/       0700: the container's; flock'ed while a command works on it
 *   <root>/<id>/state.json   what create decided (pid, its start time, bundle, cgroup,
 *                            uid range, annotations), replaced atomically
 *
 * Every path is fd-relative to the root; an id is checked before it becomes a name
 * (runc's rule: letters, digits, '_', '+', '-', '.', not "." or ".."; at most 1024
 * bytes). The state file is read bounded and parsed strictly: anyone who can write there
 * is root already, but a torn or foreign file must give an error, not a crash. Pure
 * (jansson, no runtime): unit suites link it alone. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "cell/error.h"

#define OCI_ID_MAX	   1024
#define OCI_STATE_FILE_MAX (1u << 20)

/* What create decided about a container; the live status (created, running, paused,
 * stopped) is worked out from it when asked (cmd_state.c), never stored. */
struct oci_state {
	char id[OCI_ID_MAX + 1];
	char *bundle;	    /* absolute */
	char *rootfs;	    /* absolute */
	char *cgroup;	    /* relative to the cgroup root the runtime uses */
	pid_t pid;	    /* the container's init (cell-init), host pid */
	uint64_t starttime; /* its /proc/<pid>/stat field 22: a recycled pid is not it */
	bool started;	    /* start ran */
	uint32_t uid_base;  /* first host id of its range */
	int64_t created_ms; /* wall clock, for state's "created" */
	/* The limits set (0: none): what update changes one at a time. */
	uint64_t memory_bytes, cpu_millis, pids;
	json_t *annotations; /* object, may be NULL */
};

bool oci_id_valid(const char *id);

/* The root directory (made 0700 when missing, with its parents): an O_DIRECTORY fd. */
int oci_root_open(const char *root, struct cell_error *err);

/* Make <root>/<id> for a new container and lock it: its fd, or -EEXIST ("container <id>
 * already exists") / -EINVAL (a bad id), err filled. */
int oci_container_make(int rootfd, const char *id, struct cell_error *err);
/* Open and lock an existing one: its fd, or -ENOENT ("container <id> does not exist"). */
int oci_container_open(int rootfd, const char *id, struct cell_error *err);
/* Remove <root>/<id> and what is in it (dirfd: its open fd, closed here). */
int oci_container_remove(int rootfd, const char *id, int dirfd, struct cell_error *err);

/* state.json in the container's dir: written whole to a temporary file, then renamed. */
int oci_state_write(int dirfd, const struct oci_state *st, struct cell_error *err);
int oci_state_read(int dirfd, struct oci_state *st, struct cell_error *err);
void oci_state_clear(struct oci_state *st);

/* The ids under the root, sorted (for `list`); *n entries, each malloc'd, the array too. */
int oci_container_ids(int rootfd, char ***ids, size_t *n, struct cell_error *err);
