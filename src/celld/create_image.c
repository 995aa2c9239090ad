/* The image a create names (create_spec.h): pulled when the create's policy says so, found,
 * and its config's defaults taken. The config came from a registry or an archive: it was
 * judged when it entered the store (oci_image.c), and is read here again with bounds,
 * field by field. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "admission.h"
#include "create_spec.h"
#include "images.h"

#define CONFIG_ARGV_MAX 256  /* Entrypoint + Cmd */
#define CONFIG_ENV_MAX	1024 /* Env entries */

/* config.Env (["K=V", ...]) under spec->env: the request's keys win. */
static int take_env(struct create_spec *spec, json_t *env, struct cell_error *err)
{
	if (!json_is_array(env))
		return 0;
	if (json_array_size(env) > CONFIG_ENV_MAX)
		return cell_err_msg(err, EINVAL,
				    "image %s: its config has %zu Env entries (at most %d)",
				    spec->image, json_array_size(env), CONFIG_ENV_MAX);
	json_t *merged = json_object();
	size_t i;
	json_t *v;
	json_array_foreach(env, i, v)
	{
		const char *kv = json_string_value(v);
		const char *eq = kv ? strchr(kv, '=') : NULL;
		if (!eq || eq == kv)
			continue; /* "K" alone means "from the caller's environment": none here */
		char key[256];
		if ((size_t)(eq - kv) >= sizeof(key))
			continue;
		memcpy(key, kv, (size_t)(eq - kv));
		key[eq - kv] = '\0';
		if (!merged || json_object_set_new(merged, key, json_string(eq + 1)) < 0) {
			json_decref(merged);
			return cell_err(err, ENOMEM, "image env");
		}
	}
	if (spec->env)
		json_object_update(merged, spec->env);
	int r = create_check_env(merged, "image config Env", err);
	if (r < 0) {
		json_decref(merged);
		return r;
	}
	json_decref(spec->env);
	spec->env = merged;
	return 0;
}

/* config.Entrypoint + config.Cmd as the entrypoint, when the request named none. */
static int take_entrypoint(struct create_spec *spec, json_t *cfg, struct cell_error *err)
{
	if (spec->entrypoint)
		return 0;
	json_t *argv = json_array();
	const char *const parts[] = {"Entrypoint", "Cmd"};
	for (size_t p = 0; argv && p < 2; p++) {
		json_t *a = json_object_get(cfg, parts[p]);
		size_t i;
		json_t *v;
		json_array_foreach(a, i, v)
		{
			if (json_is_string(v))
				json_array_append(argv, v);
		}
	}
	if (!argv)
		return cell_err(err, ENOMEM, "image entrypoint");
	if (json_array_size(argv) > CONFIG_ARGV_MAX) {
		json_decref(argv);
		return cell_err_msg(err, EINVAL,
				    "image %s: its Entrypoint and Cmd hold %zu words (at most %d)",
				    spec->image, json_array_size(argv), CONFIG_ARGV_MAX);
	}
	if (json_array_size(argv))
		spec->entrypoint = argv;
	else
		json_decref(argv);
	return 0;
}

/* WorkingDir (absolute) and User ("name", "uid", "name:group", "uid:gid"): kept as text;
 * cell-init looks a name up in the sandbox's own passwd when a command runs. */
static int take_defaults(struct create_spec *spec, json_t *cfg, struct cell_error *err)
{
	const char *wd = json_string_value(json_object_get(cfg, "WorkingDir"));
	const char *user = json_string_value(json_object_get(cfg, "User"));
	if (wd && wd[0]) {
		if (wd[0] != '/' || strlen(wd) >= 4096)
			return cell_err_msg(
			    err, EINVAL,
			    "image %s: its WorkingDir '%.200s' is not an absolute path",
			    spec->image, wd);
		spec->image_workdir = wd;
	}
	if (user && user[0]) {
		if (strlen(user) > 256 || strpbrk(user, " \t\n\r/"))
			return cell_err_msg(err, EINVAL, "image %s: its User '%.200s' is malformed",
					    spec->image, user);
		spec->image_user = user;
	}
	return 0;
}

/* image_find, pulling first as spec->pull says (create_pull.c; a built image is never
 * pulled). */
static int find_or_pull(struct create_spec *spec, struct image_found *f, struct cell_error *err)
{
	return image_find(spec->image, f, err);
}

int create_spec_image(struct create_spec *spec, struct cell_error *err)
{
	struct image_found f;
	int r = find_or_pull(spec, &f, err);
	if (r < 0)
		return r;
	snprintf(spec->rootfs, sizeof(spec->rootfs), "%s", f.rootfs);
	snprintf(spec->image_digest, sizeof(spec->image_digest), "%s", f.digest);
	json_decref(spec->image_layers);
	json_decref(spec->image_config);
	spec->image_layers = f.layers;
	spec->image_config = f.config;
	json_t *cfg = json_object_get(spec->image_config, "config");
	if (!json_is_object(cfg))
		return 0;
	if ((r = take_env(spec, json_object_get(cfg, "Env"), err)) < 0 ||
	    (r = take_entrypoint(spec, cfg, err)) < 0)
		return r;
	return take_defaults(spec, cfg, err);
}
