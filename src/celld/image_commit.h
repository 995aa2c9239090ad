/* image_commit.c: a sandbox's writable layer, or a snapshot's, made an image of the layer
 * store: the layer (an overlay upper dir, or the one inside a loop disk's disk.img) written
 * as a tar by libarchive, ids shifted back by the sandbox's uid_base, overlay whiteouts
 * (0/0 character devices) as ".wh.NAME" and opaque directories (trusted.overlay.opaque=y)
 * as ".wh..wh..opq"; device nodes, sockets and names that would read as whiteouts are left
 * out and counted. The tar goes into the store over the base image's layers (the store
 * image the sandbox sits on, by digest; an image cell built is tarred as one base layer
 * first, under a minimal config), and a new image record (its digest over the config's
 * digest and the diffIDs; the config's history and rootfs.diff_ids extended) is named.
 *
 * The upper dir was written by the sandbox: hostile. The walk is fd-relative, never follows
 * a symlink, never crosses a mount, and is bounded in entries and depth. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell/error.h"
#include "image_store.h"

struct adm_principal;
struct sandbox;

struct commit_opts {
	const char *name;     /* normalized (image_import_name) */
	const char *owner_id; /* recorded with the name */
	bool (*may_take)(const char *owner, void *cls);
	void *cls;
};

struct commit_result {
	char name[STORE_NAME_MAX];
	char digest[STORE_DIGEST_MAX];
	char source[96]; /* "sandbox <id>", "snapshot <id>" */
	size_t layers;
	uint64_t bytes;	  /* the new layer's files */
	uint64_t entries; /* of its tar */
	uint64_t skipped; /* devices, sockets, whiteout-like names left out */
};

/* A Paused or Stopped sandbox (busy SBX_SNAPSHOTTING meanwhile): -EBUSY when it is
 * Running ("pause it first") or busy, -ENOENT when it is gone, -STORE_ENAME_TAKEN. */
int image_commit_sandbox(struct sandbox *sb, const struct commit_opts *o, struct commit_result *res,
			 struct cell_error *err);
/* Snapshot id, which who must see (snapshot_get): -ENOENT otherwise. */
int image_commit_snapshot(const struct adm_principal *who, const char *id,
			  const struct commit_opts *o, struct commit_result *res,
			  struct cell_error *err);
