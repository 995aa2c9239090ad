/* A create from a snapshot, below the API layer: what every API's create takes of the
 * snapshot's source (spec->snapshot holds the snapshot's meta, snapshots.h) when the
 * request leaves it out, and where its disk and lower layer come from. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "create_spec.h"
#include "fields.h"
#include "seccomp_policy.h"

static const char *snapshot_id(const struct create_spec *spec)
{
	return json_string_value(json_object_get(spec->snapshot, "id"));
}

int create_snapshot_defaults(struct create_spec *spec, struct cell_error *err)
{
	json_t *meta = spec->snapshot;
	json_t *src_env = json_object_get(meta, "env");
	if (json_is_object(src_env)) {
		json_t *env = json_deep_copy(src_env);
		if (!env)
			return cell_err(err, ENOMEM, "create from snapshot");
		if (spec->env)
			json_object_update(env, spec->env);
		json_decref(spec->env);
		spec->env = env;
		if (field_check_map_caps(env, "env", &create_env_caps, err) < 0)
			return -EINVAL;
	}
	json_t *rl = json_object_get(meta, "resourceLimits");
	if (!spec->resource_limits && json_is_object(rl))
		spec->resource_limits = json_deep_copy(rl);
	json_t *md = json_object_get(meta, "metadata");
	if (!spec->metadata && json_is_object(md))
		spec->metadata = json_deep_copy(md);
	return 0;
}

int create_snapshot_disk(struct create_spec *spec, struct cell_error *err)
{
	json_t *meta = spec->snapshot;
	uint64_t disk = (uint64_t)json_integer_value(json_object_get(meta, "diskBytes"));
	const char *kind = json_string_value(json_object_get(meta, "kind"));
	bool named = json_object_get(spec->resource_limits, "disk") != NULL;
	if (kind && !strcmp(kind, "image") && named && spec->limits.disk_bytes != disk)
		return field_fail(err,
				  "resourceLimits.disk: a sandbox from snapshot %s has its disk "
				  "(%llu bytes); leave disk out",
				  snapshot_id(spec), (unsigned long long)disk);
	if (!named)
		spec->limits.disk_bytes = disk;
	return 0;
}

void create_snapshot_record(struct create_spec *spec, unsigned named)
{
	json_t *meta = spec->snapshot;
	json_t *net = json_object_get(meta, "network");
	if (!(named & CREATE_NAMED_NETWORK) && json_is_object(net)) {
		json_decref(spec->network);
		spec->network = json_incref(net);
	}
	const char *prof = json_string_value(json_object_get(meta, "seccompProfile"));
	if (!(named & CREATE_NAMED_SECCOMP) && prof && seccomp_policy_exists(prof)) {
		spec->seccomp_profile = prof;
		spec->seccomp_log = json_is_true(json_object_get(meta, "seccompLog"));
	}
	if (!(named & CREATE_NAMED_SUDO))
		spec->sudo = json_is_true(json_object_get(meta, "sudo"));
	/* Its image lacks the code-interpreter service the source ran: so does the copy. */
	spec->interpreter_bind = json_is_true(json_object_get(meta, "interpreterService"));
}

int create_snapshot_rootfs(struct create_spec *spec, const char *field, struct cell_error *err)
{
	const char *rootfs = json_string_value(json_object_get(spec->snapshot, "rootfs"));
	struct stat st;
	if (!rootfs || !rootfs[0] || strlen(rootfs) >= sizeof(spec->rootfs) ||
	    stat(rootfs, &st) < 0 || !S_ISDIR(st.st_mode))
		return cell_err_msg(
			   err, ENOENT,
			   "%s: the image '%.128s' of snapshot %s is no longer on this host", field,
			   spec->image, snapshot_id(spec)),
		       -ENOENT;
	snprintf(spec->rootfs, sizeof(spec->rootfs), "%s", rootfs);
	json_t *layers = json_object_get(spec->snapshot, "imageLayers");
	const char *digest = json_string_value(json_object_get(spec->snapshot, "imageDigest"));
	if (!json_is_array(layers))
		return 0;
	size_t i;
	json_t *l;
	json_array_foreach(layers, i, l)
	{
		const char *dir = json_string_value(l);
		if (!dir || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
			return cell_err_msg(
				   err, ENOENT,
				   "%s: a layer of the image '%.128s' of snapshot %s is no "
				   "longer on this host",
				   field, spec->image, snapshot_id(spec)),
			       -ENOENT;
	}
	spec->image_layers = json_incref(layers);
	snprintf(spec->image_digest, sizeof(spec->image_digest), "%s", digest ? digest : "");
	return 0;
}
