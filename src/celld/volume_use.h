/* volume_use.c: which sandboxes use a named volume, and whether one more may */
#pragma once

#include <jansson.h>

#include "cell/error.h"

struct sandbox;

/* For a new sandbox sb (published, busy creating), its volume claims (create_spec.h): each
 * named volume made when missing and allowed (createIfNotExists), then checked against its
 * access mode and the sandboxes that use it already. *made lists the volumes this call made
 * (a JSON array of names, for volume_use_undo). 0; -ENOENT (a missing volume that may not
 * be made), -EINVAL (read-write on a ReadOnlyMany volume) or -EBUSY (another sandbox holds
 * it in a way its access mode excludes), err naming volume and sandbox. */
int volume_use_claim(struct sandbox *sb, json_t *claims, json_t **made, struct cell_error *err);
/* A create that failed after volume_use_claim: the volumes it made go again (sb is no
 * longer in the registry). */
void volume_use_undo(json_t *made);
/* After sb was deleted (out of the registry): volumes whose create asked to be removed
 * with it (pvc.deleteOnSandboxTermination) go, unless another sandbox uses them. */
void volume_use_release(const char *id, json_t *volumes);
/* The ids of the sandboxes whose records name volume (a JSON array, oldest first). */
json_t *volume_use_users(const char *volume);
