/* E2B's template ids onto cell's images, read once at start. E2B names a sandbox's
 * filesystem by template ("base" is the SDKs' default); cell by image. The operator maps the
 * ids clients use onto local images; an id the map does not list names the image of that
 * name unless "unlisted" is "refuse". */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <jansson.h>

#include "cell/log.h"
#include "config.h"
#include "e2b_templates.h"
#include "fields.h"
#include "images.h"
#include "oci_image.h"

#define POLICY_FILE	"e2b/templates.json"
#define POLICY_MAX	(256 << 10)
#define TEMPLATES_MAX	1024
#define TEMPLATE_ID_MAX 128

static json_t *templates;    /* id → image name; never freed (its strings are handed out) */
static json_t *interpreters; /* ids marked "codeInterpreter": id → true */
static bool unlisted_refused;

/* One entry: "image", or {"image": "image", "codeInterpreter": bool}. The image's name
 * (a reference into value) and whether the code interpreter runs in it. */
static int load_entry(const char *id, json_t *value, const char **image, bool *interp,
		      struct cell_error *err)
{
	*interp = false;
	if (json_is_string(value)) {
		*image = json_string_value(value);
		return 0;
	}
	const char *k;
	json_t *v;
	json_object_foreach(value, k, v)
	{
		if (strcmp(k, "image") && strcmp(k, "codeInterpreter"))
			return field_fail(err, "%s: templates.%.64s: unknown member '%.64s'",
					  POLICY_FILE, id, k);
	}
	char name[128];
	snprintf(name, sizeof(name), "%s: templates.%.64s.image", POLICY_FILE, id);
	if (!json_is_object(value) || field_string(value, "image", name, true, image, err) < 0)
		return field_fail(err,
				  "%s: templates.%.64s must be an image name or {\"image\": name, "
				  "\"codeInterpreter\": bool}",
				  POLICY_FILE, id);
	snprintf(name, sizeof(name), "%s: templates.%.64s.codeInterpreter", POLICY_FILE, id);
	return field_bool(value, "codeInterpreter", name, interp, err);
}

/* The entry's image checked: a local name (which may be added later) or a registry
 * reference (pulled by the first create that names its template). */
static int check_image(const char *id, const char *image, struct cell_error *err)
{
	char rootfs[4096];
	struct cell_error ierr = {0};
	int r = image_resolve(image, rootfs, sizeof(rootfs), &ierr);
	struct oci_ref ref;
	if (r == -EINVAL && oci_ref_parse(image, &ref, &ierr) == 0)
		return 0;
	if (r == -EINVAL)
		return field_fail(err, "%s: templates.%.64s: '%.64s' is no valid image name",
				  POLICY_FILE, id, image);
	if (r < 0)
		log_warn("E2B templates: %s maps to image '%s', which is not there now", id, image);
	return 0;
}

static int load_map(json_t *given, json_t *map, json_t *interp, struct cell_error *err)
{
	if (given && !json_is_object(given))
		return field_fail(err, "%s: templates must be an object", POLICY_FILE);
	if (json_object_size(given) > TEMPLATES_MAX)
		return field_fail(err, "%s: at most %d templates", POLICY_FILE, TEMPLATES_MAX);
	const char *k;
	json_t *v;
	json_object_foreach(given, k, v)
	{
		const char *image;
		bool code;
		if (!k[0] || strlen(k) > TEMPLATE_ID_MAX)
			return field_fail(err, "%s: a template id must be 1-%d bytes", POLICY_FILE,
					  TEMPLATE_ID_MAX);
		if (load_entry(k, v, &image, &code, err) < 0 || check_image(k, image, err) < 0)
			return -EINVAL;
		if (json_object_set_new(map, k, json_string(image)) < 0 ||
		    (code && json_object_set_new(interp, k, json_true()) < 0))
			return cell_err(err, ENOMEM, "E2B templates");
	}
	return 0;
}

static int load_root(json_t *root, struct cell_error *err)
{
	const char *k;
	json_t *v;
	json_object_foreach(root, k, v)
	{
		if (strcmp(k, "templates") && strcmp(k, "unlisted"))
			return field_fail(err, "%s: unknown member '%.64s'", POLICY_FILE, k);
	}
	const char *unlisted = NULL;
	if (field_string(root, "unlisted", POLICY_FILE ": unlisted", false, &unlisted, err) < 0)
		return -EINVAL;
	if (unlisted && strcmp(unlisted, "image") && strcmp(unlisted, "refuse"))
		return field_fail(err, "%s: unlisted must be \"image\" or \"refuse\"", POLICY_FILE);
	json_t *map = json_object(), *interp = json_object();
	int r = map && interp ? load_map(json_object_get(root, "templates"), map, interp, err)
			      : cell_err(err, ENOMEM, "E2B templates");
	if (r < 0) {
		json_decref(map);
		json_decref(interp);
		return r;
	}
	json_decref(templates);
	json_decref(interpreters);
	templates = map;
	interpreters = interp;
	unlisted_refused = unlisted && !strcmp(unlisted, "refuse");
	return 0;
}

int e2b_templates_load(struct cell_error *err)
{
	json_t *root;
	int r = config_policy_json(POLICY_FILE, POLICY_MAX, &root, err);
	if (r == -ENOENT) {
		log_info("E2B templates: no %s/%s; base is the image default", celld.policies_dir,
			 POLICY_FILE);
		root = json_pack("{s:{s:s}}", "templates", "base", "default");
		if (!root)
			return cell_err(err, ENOMEM, "E2B templates");
	} else if (r < 0) {
		return r;
	}
	r = load_root(root, err);
	json_decref(root);
	return r;
}

int e2b_template_image(const char *template_id, const char **image)
{
	json_t *v = templates ? json_object_get(templates, template_id) : NULL;
	if (v) {
		*image = json_string_value(v);
		return 0;
	}
	if (unlisted_refused)
		return -ENOENT;
	*image = template_id;
	return 0;
}

bool e2b_template_listed(const char *template_id)
{
	return templates && json_object_get(templates, template_id);
}

bool e2b_template_interpreter(const char *template_id)
{
	return interpreters && json_object_get(interpreters, template_id);
}
