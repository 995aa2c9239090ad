/* The image store's bounds (image_policy.h). */
#include <errno.h>
#include <string.h>

#include <jansson.h>

#include "cell/log.h"
#include "cell/quantity.h"
#include "cell/runtime.h"
#include "config.h"
#include "image_policy.h"

#define POLICY_FILE "images/limits.json"
#define POLICY_MAX  (16u << 10)

static struct image_policy policy = {
    .max_image_bytes = 32ull << 30,
    .max_store_bytes = 500ull << 30,
    .max_layers = CELL_IMAGE_LAYERS_MAX,
};

static int fail(struct cell_error *err, const char *field, const char *why)
{
	return cell_err_msg(err, EINVAL, "%s/%s: %s %s", celld.policies_dir, POLICY_FILE, field,
			    why);
}

/* A byte count: an integer, or a quantity such as "32Gi"; absent keeps *out. */
static int load_bytes(json_t *root, const char *field, uint64_t *out, struct cell_error *err)
{
	json_t *v = json_object_get(root, field);
	uint64_t b = 0;
	if (!v)
		return 0;
	if (json_is_integer(v) && json_integer_value(v) >= 1)
		b = (uint64_t)json_integer_value(v);
	else if (json_is_string(v) && cell_parse_bytes(json_string_value(v), &b) < 0)
		b = 0;
	if (!b)
		return fail(
		    err, field,
		    "must be a number of bytes (an integer, or a quantity such as \"32Gi\")");
	*out = b;
	return 0;
}

int image_policy_load(struct cell_error *err)
{
	json_t *root;
	int r = config_policy_json(POLICY_FILE, POLICY_MAX, &root, err);
	if (r == -ENOENT) {
		log_info("images: no %s/%s; built-in bounds", celld.policies_dir, POLICY_FILE);
		return 0;
	}
	if (r < 0)
		return r;
	const char *k;
	json_t *v;
	json_object_foreach(root, k, v)
	{
		if (r == 0 && strcmp(k, "maxImageBytes") && strcmp(k, "maxStoreBytes") &&
		    strcmp(k, "maxLayers"))
			r = fail(err, k, "is not a field of it");
	}
	if (r == 0)
		r = load_bytes(root, "maxImageBytes", &policy.max_image_bytes, err);
	if (r == 0)
		r = load_bytes(root, "maxStoreBytes", &policy.max_store_bytes, err);
	json_t *layers = json_object_get(root, "maxLayers");
	if (r == 0 && layers) {
		if (!json_is_integer(layers) || json_integer_value(layers) < 1 ||
		    json_integer_value(layers) > CELL_IMAGE_LAYERS_MAX)
			r = fail(err, "maxLayers", "must be an integer from 1 to 128");
		else
			policy.max_layers = (unsigned)json_integer_value(layers);
	}
	json_decref(root);
	if (r == 0)
		log_info("images: a pull takes at most %llu bytes and %u layers; the store at most "
			 "%llu bytes",
			 (unsigned long long)policy.max_image_bytes, policy.max_layers,
			 (unsigned long long)policy.max_store_bytes);
	return r;
}

const struct image_policy *image_policy(void)
{
	return &policy;
}
