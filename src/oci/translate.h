/* translate.c: an OCI spec in the runtime's terms. The bundle says what the engine wants;
 * this file says what cell does with each part, and what it refuses (a message naming the
 * field): the front's whole translation, so cmd_create.c only sequences. */
#pragma once

#include <jansson.h>

#include "cell/cgroup.h"
#include "cell/error.h"
#include "cell/runtime.h"
#include "spec.h"

struct oci_plan {
	struct cell_limits limits;
	struct cell_volume volumes[CELL_MAX_VOLUMES];
	size_t n_volumes;
	struct cell_tmpfs tmpfs[CELL_MAX_TMPFS];
	size_t n_tmpfs;
	char cgroup[512]; /* relative to the hierarchies' roots */
	int joined_ns;	  /* CLONE_NEW* joined (by path) or kept (not in the spec) */
	int join_fds[3];  /* net, ipc, uts namespaces to setns into; -1 */
	int join_flags[3];
};

/* Everything but the process: limits, bind mounts as volumes, the cgroup path, the
 * namespaces to join. plan's fds are the caller's to close (oci_plan_clear). */
int oci_plan_make(const struct oci_spec *s, const char *id, struct oci_plan *plan,
		  struct cell_error *err);
void oci_plan_clear(struct oci_plan *plan);

/* cell-init's OCI_CREATE request for the spec's process, with the spec's seccomp program
 * (compiled) when it has one. */
json_t *oci_process_request(const struct oci_spec *s, const struct oci_process *p,
			    struct cell_error *err);
