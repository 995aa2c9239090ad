/* volume_use.c: which sandboxes use a named volume, and whether one more may */
#pragma once

#include <jansson.h>

#include "cell/error.h"

struct adm_principal;
struct sandbox;

/* For a new sandbox sb (published, busy creating), its volume claims (create_spec.h): each
 * named volume made when missing and allowed (createIfNotExists), then checked against its
 * access mode and the sandboxes that use it already. *made lists the volumes this call made
 * (a JSON array of names, for volume_use_undo). Another tenant's volume (tenancy.h; its
 * record's owner) is missing to sb's owner, and its name taken. 0; -EINVAL (a missing
 * volume that may not be made, or read-write on a ReadOnlyMany volume), -EEXIST (another
 * tenant's name) or -EBUSY (another sandbox holds it in a way its access mode excludes),
 * err naming volume and sandbox (one sb's owner sees; else "(not yours)"). */
int volume_use_claim(struct sandbox *sb, json_t *claims, json_t **made, struct cell_error *err);
/* A create that failed after volume_use_claim: the volumes it made go again (sb is no
 * longer in the registry). */
void volume_use_undo(json_t *made);
/* After sb was deleted (out of the registry): volumes whose create asked to be removed
 * with it (pvc.deleteOnSandboxTermination) go, unless another sandbox uses them. */
void volume_use_release(const char *id, json_t *volumes);
/* The ids of the sandboxes whose records name volume (a JSON array, oldest first). */
json_t *volume_use_users(const char *volume);
/* The same, only those who sees (tenancy_sees). */
json_t *volume_use_users_seen(const char *volume, const struct adm_principal *who);
