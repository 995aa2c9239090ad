/* A create request as validated by an API (every field checked, policy defaults filled in):
 * what lifecycle_create records and starts. Data only, so that the parsers of its parts
 * (volumes.c) sit below lifecycle. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cell/runtime.h"
#include "sandbox.h"

struct adm_principal;
struct field_caps;

struct create_spec {
	const char *image;
	char rootfs[4096];
	/* An image of the layer store (images.h): its lower dirs, top first, its digest and
	 * its config (owned); NULL and "" for an image cell built. */
	json_t *image_layers, *image_config;
	char image_digest[72];
	/* The store image's WorkingDir and User (strings of image_config), or NULL. */
	const char *image_workdir, *image_user;
	/* A registry image: how to pull it (create_image.c), and the request's own
	 * credentials (image.auth), or NULL for the operator's auth file. */
	enum create_pull { CREATE_PULL_IF_NOT_PRESENT, CREATE_PULL_ALWAYS, CREATE_PULL_NEVER } pull;
	const char *pull_user, *pull_password;
	char *pulled_name;  /* the name a pull of this create stored the image under (owned) */
	json_t *entrypoint; /* array of strings or NULL */
	json_t *env, *metadata, *resource_limits, *volumes_json; /* owned references */
	const char *session_key;
	const char *name;	     /* extensions cell.name, checked; NULL: none */
	struct adm_principal *owner; /* who asks (NULL: the Unix socket) */
	int64_t timeout;	     /* seconds, 0 = none */
	const char *seccomp_profile; /* extensions["cell.seccomp"]; NULL: "default" */
	bool seccomp_log;	     /* extensions["cell.seccompLog"] */
	bool sudo;		     /* extensions["cell.sudo"]; E2B's creates */
	bool manual_resume;	     /* woken only when asked (sandbox.h) */
	bool public_ports;	     /* ports reached without a credential (sandbox.h) */
	/* The code interpreter asked for (interp_service.h), and whether the host's copy of
	 * its service is bound into the sandbox (the image lacks one). */
	bool interpreter_asked, interpreter_bind;
	struct cell_limits limits; /* resourceLimits, validated, defaults filled in */
	/* The named volumes it mounts, with what to do when one is missing (volumes.h):
	 * [{volume, create, bytes, access, deleteOnSandboxTermination, dest, subPath?}], or
	 * NULL. */
	json_t *volume_claims;
	const char *network_mode; /* extensions["cell.network"], NULL if absent */
	json_t *network;	  /* the record's "network" (network_spec) */
	json_t *provision;	  /* the record's "provision" (provision_parse), or NULL */
	json_t *warnings;	  /* strings for the create's answer, or NULL */
	struct sbx_timers timers; /* the idle timers (timer_policy.h): policy, then extensions */
	/* NAME → value (secrets.h: "secretEnv" and extensions["cell.secrets"]), or NULL:
	 * written to the sandbox's secrets.json, never to its record. */
	json_t *secrets;
	/* A create with snapshotId: the snapshot's meta (snapshots.h), owned; its writable
	 * layer starts as the snapshot's. NULL: an empty layer. */
	json_t *snapshot;
};

/* ---- create_spec.c: what every API's create shares ---- */

/* The caps of a sandbox's metadata and env (a client's strings kept in its record). */
extern const struct field_caps create_metadata_caps, create_env_caps;
/* env (a string map, named name in messages): keys non-empty without '=', within
 * create_env_caps. 0 or -EINVAL naming the field. */
int create_check_env(json_t *env, const char *name, struct cell_error *err);
/* Whether an entrypoint runs nothing: none, or OpenSandbox's SDK's default `tail -f
 * /dev/null`, which keeps a container alive; cell-init already is the sandbox's main
 * process. */
bool create_entrypoint_is_noop(json_t *ep);
/* Drop every reference spec holds. */
void create_spec_free(struct create_spec *spec);

/* ---- create_snapshot.c: a create from a snapshot (spec->snapshot set, spec->image its
 * image) ---- */

/* What the request leaves out comes from the snapshot's source: resourceLimits, metadata;
 * env is the source's with the request's over it. 0, or -EINVAL naming the field. */
int create_snapshot_defaults(struct create_spec *spec, struct cell_error *err);
/* The disk, once spec->limits is resolved: a snapshot of a loop-quota disk is that disk
 * (its size the source's; another size asked for is -EINVAL); a layer copied as a tree
 * takes the request's disk, or the source's when it names none. */
int create_snapshot_disk(struct create_spec *spec, struct cell_error *err);
/* What the request named itself, kept over the source's in create_snapshot_record. */
#define CREATE_NAMED_NETWORK 1u
#define CREATE_NAMED_SECCOMP 2u
#define CREATE_NAMED_SUDO    4u
/* The source's network policy, seccomp profile and sudo, where named leaves them out. */
void create_snapshot_record(struct create_spec *spec, unsigned named);
/* spec->rootfs: the source's image as it was resolved (the lower layer its upper layer
 * was written over); -ENOENT, its message starting with field (the request's), when the
 * host no longer has it. */
int create_snapshot_rootfs(struct create_spec *spec, const char *field, struct cell_error *err);

/* ---- create_image.c: the image a create names ---- */

/* spec->image found (images.h), pulled first as spec->pull says: rootfs, and a store
 * image's layers, digest and config, whose defaults fill what the request left out: Env
 * under the request's env (the image's PATH over cell's default), Entrypoint + Cmd as the
 * entrypoint, WorkingDir and User as the defaults of its commands. -ENOENT or -EINVAL with
 * err naming image.uri, or another -errno. */
int create_spec_image(struct create_spec *spec, struct cell_error *err);
/* Whether spec->image is one spec->owner's create would take without pulling: a built
 * image, or one of the image store that is everyone's or the owner's (the operator: any). */
bool create_image_present(const struct create_spec *spec);
