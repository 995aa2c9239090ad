/* store.c: <dir>/state.json, the persisted record of a sandbox: everything needed to
 * adopt it after a restart and to start it again (lifecycle_start). */
#pragma once

#include "cell/error.h"
#include "sandbox.h"

/* Snapshot sb under the registry lock, then write it atomically (0600): the temp file is
 * synced to disk before it replaces state.json. */
int store_save(struct sandbox *sb, struct cell_error *err);
/* The same with a choice of syncing, for the two writes of a create (lifecycle_create says
 * why): STORE_SYNCED is store_save; STORE_UNSYNCED replaces the file atomically but leaves
 * it to the kernel's writeback; STORE_SYNC_RENAMED syncs the new file once it is in place,
 * so data and rename are both durable when it returns. */
enum store_sync { STORE_SYNCED, STORE_UNSYNCED, STORE_SYNC_RENAMED };
int store_save_sync(struct sandbox *sb, enum store_sync how, struct cell_error *err);
/* The record of sb as it will be once the operation it is busy with ends in state (the
 * record is durable before sandbox_end publishes the state). */
int store_save_as(struct sandbox *sb, enum sbx_state state, enum store_sync how,
		  struct cell_error *err);
/* Load <sandboxes>/<id>/state.json into a new entry (not published). */
int store_load(const char *id, struct sandbox **out, struct cell_error *err);
