/* record.c: a sandbox's record (the text of its state.json) as plain data, encoded and
 * decoded without any of celld's state: what a restart needs to adopt the sandbox and what
 * lifecycle_start needs to start it again. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>

#include "cell/error.h"
#include "cell/id.h"
#include "cell/runtime.h"
#include "cell/seccomp.h"
#include "sandbox.h"

struct record {
	char id[CELL_ID_MAX + 1];
	enum sbx_state state;
	/* Strings and JSON: owned after record_decode (record_free), borrowed for
	 * record_encode. NULL where the record has none. */
	char *image, *rootfs, *session_key, *reason;
	char *owner; /* "key:<hex>", or "unix" */
	char *dir;   /* written for operators; not read back */
	char *cgroup_rel;
	/* A sandbox made from a snapshot: the snapshot's id. */
	char *snapshot_id;
	/* Its name (cell.name), or NULL. */
	char *name;
	/* An image of the layer store: its manifest digest, and its lower dirs, top first
	 * (content-addressed: a name moved to another image never changes them); its
	 * WorkingDir and User, the defaults of its commands. */
	char *image_digest;
	json_t *image_layers;
	char *image_workdir, *image_user;
	json_t *metadata, *env, *entrypoint, *resource_limits, *volumes;
	json_t *network; /* {"mode", "policy"?} (network.c reads it); NULL: none */
	/* provision.c's: what each start runs and the last outcome; NULL: none (also in a
	 * record older than provisioning). */
	json_t *provision, *provision_result;
	time_t created_at, expires_at, transition_at; /* 0: none */
	int64_t created_ms; /* "createdAtMs"; created_at's second when absent (older records) */
	int slot;
	uint32_t uid_base;
	pid_t pid;
	uint64_t starttime;
	bool has_limits; /* false in a record older than "limits" */
	struct cell_limits limits;
	bool has_seccomp; /* false in a record older than profiles: "" (no filter) */
	char seccomp_profile[CELL_SECCOMP_NAME_MAX + 1];
	bool seccomp_log;
	bool sudo; /* "sudo": true; absent (false) in most records */
	/* "access": {"manualResume": true, "publicPorts": true}, each written only when true
	 * (sandbox.h); absent in most records; "e2b" in a record of an older celld. */
	bool manual_resume, public_ports;
	bool interpreter_bind; /* "interpreterService": true, written only when true */
	/* "lifecycle": the idle timers, the last activity and the Running seconds before the
	 * current spell; false in a record older than them (then no timers run). */
	bool has_lifecycle;
	struct sbx_timers timers;
	int64_t active_at, running_seconds;
};

/* The JSON object of rec (a new reference), or NULL on allocation failure. */
json_t *record_encode(const struct record *rec);
/* rec from o, the record of sandbox id: 0, or -EINVAL with err naming the first field that
 * is missing or wrong ("state.json: slot 99999 is out of range"). rec owns what it holds
 * afterwards (record_free), also on failure. */
int record_decode(json_t *o, const char *id, struct record *rec, struct cell_error *err);
void record_free(struct record *rec);
