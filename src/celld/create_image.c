/* The image a create names (create_spec.h): pulled when the create's policy says so, found,
 * and its config's defaults taken. The config came from a registry or an archive: it was
 * judged when it entered the store (oci_image.c), and is read here again with bounds,
 * field by field.
 *
 * An image pulled with a request's own credentials (image.auth) is private to the key
 * that pulled it: another key naming it must show credentials the registry accepts for it
 * (its manifest fetched again with them, no layer downloaded twice) before it is handed the
 * cached layers. An image pulled anonymously or with the operator's auth file is
 * everyone's, as the operator configured the host's registries for everyone. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "admission.h"
#include "create_spec.h"
#include "image_pull.h"
#include "images.h"
#include "interp_service.h"

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

/* Pull spec->image as spec says, with its credentials; the image's private mark set or
 * cleared by whose credentials opened it. */
static int pull(struct create_spec *spec, struct cell_error *err)
{
	struct oci_creds creds = {0};
	bool own = spec->pull_user && spec->pull_password;
	if (own) {
		snprintf(creds.user, sizeof(creds.user), "%s", spec->pull_user);
		snprintf(creds.pass, sizeof(creds.pass), "%s", spec->pull_password);
	}
	struct image_pull_result res;
	int r = image_pull(spec->image, own ? &creds : NULL, NULL, NULL, &res, err);
	explicit_bzero(&creds, sizeof(creds));
	if (r < 0) {
		cell_err_wrap(err, "image '%.200s': pulling it: ", spec->image);
		/* An image that cannot be had is the create's image not found (400), whatever
		 * the registry said (the message says it); the host's own limits stay theirs. */
		if (r != -ENOSPC && r != -ENOMEM && r != -EMFILE && r != -ENFILE)
			err->code = ENOENT, r = -ENOENT;
		return r;
	}
	struct cell_error perr = {0};
	/* The key's own credentials made it the key's; anyone's (the operator's) made it
	 * everyone's. The operator's own pulls with credentials stay the operator's. */
	const char *owner = own ? admission_principal_id(spec->owner) : NULL;
	if (store_name_private(res.name, owner, &perr) < 0)
		cell_err_drop(&perr, "marking a pulled image");
	/* Found next by the name the pull stored it under (a short name's registry). */
	spec->pulled_name = strdup(res.name);
	return 0;
}

/* Whether spec's caller may use the image found without pulling: it is everyone's, or
 * the caller's own, or the caller is the operator. */
static bool usable(const struct create_spec *spec, const struct image_found *f)
{
	return !f->private_to[0] || !spec->owner ||
	       !strcmp(f->private_to, admission_principal_id(spec->owner));
}

static int find_pulled(struct create_spec *spec, struct image_found *f, struct cell_error *err)
{
	return image_find(spec->pulled_name ? spec->pulled_name : spec->image, f, err);
}

/* image_find, pulling first as spec->pull says (a built image is never pulled). */
static int find_or_pull(struct create_spec *spec, struct image_found *f, struct cell_error *err)
{
	bool built = image_is_built(spec->image);
	if (!built && spec->pull == CREATE_PULL_ALWAYS) {
		int r = pull(spec, err);
		if (r < 0)
			return r;
		return find_pulled(spec, f, err);
	}
	int r = image_find(spec->image, f, err);
	if (r == 0 && (built || usable(spec, f)))
		return 0;
	if (r == 0) {
		/* Another key's private image: this caller's credentials must open it too. */
		image_found_free(f);
		if ((r = pull(spec, err)) < 0)
			return r;
		return find_pulled(spec, f, err);
	}
	if (r != -ENOENT || built || spec->pull == CREATE_PULL_NEVER)
		return r;
	*err = (struct cell_error){0};
	if ((r = pull(spec, err)) < 0)
		return r;
	return find_pulled(spec, f, err);
}

bool create_image_present(const struct create_spec *spec)
{
	if (image_is_built(spec->image))
		return true;
	struct image_found f;
	struct cell_error err = {0};
	if (image_find(spec->image, &f, &err) < 0)
		return false;
	bool ok = usable(spec, &f);
	image_found_free(&f);
	return ok;
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
	/* The interpreter asked for runs as the entrypoint, unless the request named one that
	 * runs something (OpenSandbox's SDK names `tail -f /dev/null` when given none). */
	if (spec->interpreter_asked && create_entrypoint_is_noop(spec->entrypoint)) {
		json_decref(spec->entrypoint);
		if (!(spec->entrypoint = json_pack("[s]", INTERP_SERVICE_LAUNCHER)))
			return cell_err(err, ENOMEM, "entrypoint");
	}
	json_t *cfg = json_object_get(spec->image_config, "config");
	if (json_is_object(cfg) &&
	    ((r = take_env(spec, json_object_get(cfg, "Env"), err)) < 0 ||
	     (r = take_entrypoint(spec, cfg, err)) < 0 || (r = take_defaults(spec, cfg, err)) < 0))
		return r;
	return interp_service_choose(spec, err);
}
