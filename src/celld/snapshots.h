/* snapshots.c: snapshots of sandboxes' writable layers, kept under <state>/snapshots/<id>/
 * (0700): meta.json (what a new sandbox needs of the source's record, and the snapshot's
 * own fields) and either upper/ (a copy of the overlay's upper layer, owned by the
 * source's host ids) or disk.img (the source's loop-quota ext4 image, whose upper/ is
 * shifted when a sandbox is made from it). Copies are reflinks where the filesystem
 * has them, sparse otherwise (include/cell/layercopy.h). A snapshot outlives its source. */
#pragma once

#include <stdint.h>

#include <jansson.h>

#include "cell/error.h"
#include "sandbox.h"

struct adm_principal;

#define SNAPSHOT_NAME_MAX 128 /* bytes of a snapshot's name */

/* Create <state>/snapshots and remove what an interrupted capture or delete left. */
int snapshots_init(struct cell_error *err);
/* Once the quotas are loaded: every snapshot counted against its owner's (number and
 * meta.json's bytes), whatever the quota. */
int snapshots_charge(void);

/* A snapshot request's body: {name?} and nothing else, the name 1 to
 * SNAPSHOT_NAME_MAX bytes and neither an image's nor a listed E2B template's (a name never
 * shadows the operator's catalogue); *name NULL when absent (body's storage). 0, or
 * -EINVAL naming the field. */
int snapshot_request_name(json_t *body, const char **name, struct cell_error *err);
/* Every snapshot has an owner, the principal whose request made it (meta.json's "owner",
 * admission_principal_id's text; none on a snapshot older than tenancy: the operator's).
 * Each lookup below takes who asks (NULL: the operator) and finds only what who sees
 * (tenancy.h): another tenant's snapshot is answered as missing. */

/* Capture sb (Running: frozen through its cgroup for the copy and thawed after; Paused
 * stays paused; Stopped: its disk as it is), busy SBX_SNAPSHOTTING, for owner. name may be
 * NULL. *meta: the new snapshot's meta (a new reference). -ENOENT (sb gone), -EBUSY
 * (another state, or being deleted), -EUSERS (over owner's quota of snapshots, taken
 * before the copy, or of their bytes: the allocated blocks of the copy, kept in meta.json's
 * "bytes"; the copy is then removed), or what the copy met (ENOSPC, E2BIG for a layer over
 * the bounds, ...). A delete gives both back to the snapshot's owner. */
int snapshot_take(struct sandbox *sb, const char *name, struct adm_principal *owner, json_t **meta,
		  struct cell_error *err);
/* The meta of snapshot id (a new reference): 0, or -ENOENT (none, or not who's to see). */
int snapshot_get(const struct adm_principal *who, const char *id, json_t **meta,
		 struct cell_error *err);
/* The snapshot ref names: its id, else the newest of that name among who's own
 * (tenancy_owns_id: the operator's name never resolves to a tenant's). *meta: its meta (a
 * new reference). 0, -ENOENT, or what reading it met. */
int snapshot_find(const struct adm_principal *who, const char *ref, json_t **meta,
		  struct cell_error *err);
/* Every snapshot's meta who sees, oldest first (a new array). */
int snapshot_list(const struct adm_principal *who, json_t **out, struct cell_error *err);
/* Remove snapshot id: 0, -ENOENT (none, or not who's to see), -EBUSY (a sandbox is being
 * made from it). */
int snapshot_delete(const struct adm_principal *who, const char *id, struct cell_error *err);

/* The API's view of a meta: {id, sandboxId, name?, status, createdAt}. */
json_t *snapshot_json(json_t *meta);

/* A sandbox is being made from snapshot id: it cannot be deleted until the release
 * (-ENOENT when it is gone already, -EBUSY when too many are being made). */
int snapshot_hold(const char *id, struct cell_error *err);
void snapshot_release(const char *id);
/* Before a new sandbox's first start, in this order: snapshot_seed copies a snapshot's
 * disk.img into its dir (dirfd: that dir; it then becomes its disk, so the quota's setup
 * finds it), then, once the disk quota is set up (layer_dir: where upper/ goes),
 * snapshot_fill makes its upper/ the snapshot's, ids shifted to uid_base. */
int snapshot_seed(json_t *meta, int dirfd, struct cell_error *err);
int snapshot_fill(json_t *meta, const char *layer_dir, uint32_t uid_base, struct cell_error *err);
