/* What every API's create shares below the API layer: the caps of what a client stores in a
 * sandbox's record (metadata, env), the env's key check, and freeing a spec. */
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "create_spec.h"
#include "fields.h"

/* Every copy of the record (state.json, each GET) stays small, and the record always fits
 * the 1 MiB celld loads back after a restart (store.c refuses to write one that does not). */
const struct field_caps create_metadata_caps = {
    .items = 128, .key_len = 256, .value_len = 4096, .total = 16 << 10};
const struct field_caps create_env_caps = {
    .items = 1024, .key_len = 256, .value_len = 32 << 10, .total = 64 << 10};

int create_check_env(json_t *env, const char *name, struct cell_error *err)
{
	const char *k;
	json_t *v;
	json_object_foreach(env, k, v)
	{
		if (!k[0] || strchr(k, '='))
			return field_fail(err,
					  "%s key '%.64s' is invalid: it must be non-empty and "
					  "contain no '='",
					  name, k);
	}
	return field_check_map_caps(env, name, &create_env_caps, err);
}

bool create_entrypoint_is_noop(json_t *ep)
{
	static const char *const noop[] = {"tail", "-f", "/dev/null"};
	if (!ep || json_array_size(ep) == 0)
		return true;
	if (json_array_size(ep) != CELL_ARRAY_SIZE(noop))
		return false;
	for (size_t i = 0; i < CELL_ARRAY_SIZE(noop); i++)
		if (strcmp(json_string_value(json_array_get(ep, i)), noop[i]))
			return false;
	return true;
}

void create_spec_free(struct create_spec *spec)
{
	json_decref(spec->entrypoint);
	json_decref(spec->env);
	json_decref(spec->metadata);
	json_decref(spec->resource_limits);
	json_decref(spec->volumes_json);
	json_decref(spec->volume_claims);
	json_decref(spec->network);
	json_decref(spec->provision);
	json_decref(spec->warnings);
	json_decref(spec->secrets);
	json_decref(spec->snapshot);
	json_decref(spec->image_layers);
	json_decref(spec->image_config);
	free(spec->pulled_name);
}
