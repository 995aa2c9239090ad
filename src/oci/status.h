/* status.c: what a recorded container is now: "created" (its init waits for start),
 * "running", "paused" (its cgroup frozen) or "stopped" (its init is gone), worked out
 * from the process (its pid and start time, so a recycled pid is not taken for it) and
 * the cgroup. */
#pragma once

#include <stdbool.h>

#include <jansson.h>

#include "state.h"

const char *oci_status(const struct oci_state *st);
/* runc's state JSON (ociVersion, id, pid, status, bundle, rootfs, created, owner,
 * annotations): what `state` prints and what hooks read on stdin. */
json_t *oci_state_json(const struct oci_state *st);
/* Its init is still the process create made. */
bool oci_init_alive(const struct oci_state *st);
