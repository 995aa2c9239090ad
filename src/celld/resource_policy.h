/* policies/resources/default.json and a create's resourceLimits. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cell/error.h"
#include "cell/runtime.h"

/* Read the policy once at start; a bad file refuses the start, naming file and field. */
int limits_load(struct cell_error *err);
/* resourceLimits (a string map, or NULL) with the policy's defaults filled in. Returns 0,
 * -EINVAL (err names resourceLimits.<field>: malformed, too small, above the maximum),
 * -ENOMEM, or with check_host -EAGAIN (more than the host can hold, err says which rule). */
int limits_resolve(json_t *request, struct cell_limits *out, bool check_host,
		   struct cell_error *err);
/* The quota of a new named volume: text ("10Gi"; NULL: the policy's default disk) checked
 * against the policy's maximum disk and the state dir's free space; errors name field. */
int limits_volume_bytes(const char *text, const char *field, uint64_t *out, struct cell_error *err);
/* The rlimits every sandbox's processes start with. */
const struct cell_rlimit *limits_rlimits(size_t *n);
/* The limits as enforced, as shown by inspect and kept in state.json (0 = unlimited;
 * socketMemoryBytes null where socket buffers count in memoryBytes). */
json_t *limits_json(const struct cell_limits *l);
/* What a sandbox's record does not keep, filled into l from this celld's policy and host:
 * the io limits of its resourceLimits (request; on the state dir's disk, as at create) and
 * the instance totals. A sandbox started again from its record is held to them as it was
 * at create; when this host can no longer throttle io, a warning says so. */
void limits_complete(const char *id, json_t *request, struct cell_limits *l);
