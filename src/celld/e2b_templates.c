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

static json_t *templates; /* id → image name; never freed (its strings are handed out) */
static bool unlisted_refused;

static int load_root(json_t *root, struct cell_error *err)
{
	const char *k;
	json_t *v;
	json_object_foreach(root, k, v)
	{
		if (strcmp(k, "templates") && strcmp(k, "unlisted"))
			return field_fail(err, "%s: unknown member '%.64s'", POLICY_FILE, k);
	}
	json_t *map = NULL;
	const char *unlisted = NULL;
	if (field_string_map(root, "templates", POLICY_FILE ": templates", &map, err) < 0 ||
	    field_string(root, "unlisted", POLICY_FILE ": unlisted", false, &unlisted, err) < 0) {
		json_decref(map);
		return -EINVAL;
	}
	if (unlisted && strcmp(unlisted, "image") && strcmp(unlisted, "refuse")) {
		json_decref(map);
		return field_fail(err, "%s: unlisted must be \"image\" or \"refuse\"", POLICY_FILE);
	}
	if (!map)
		map = json_object();
	if (json_object_size(map) > TEMPLATES_MAX) {
		json_decref(map);
		return field_fail(err, "%s: at most %d templates", POLICY_FILE, TEMPLATES_MAX);
	}
	json_object_foreach(map, k, v)
	{
		char rootfs[4096];
		struct cell_error ierr = {0};
		if (!k[0] || strlen(k) > TEMPLATE_ID_MAX) {
			json_decref(map);
			return field_fail(err, "%s: a template id must be 1-%d bytes", POLICY_FILE,
					  TEMPLATE_ID_MAX);
		}
		int r = image_resolve(json_string_value(v), rootfs, sizeof(rootfs), &ierr);
		struct oci_ref ref;
		/* A registry reference is pulled by the first create that names its template. */
		if (r == -EINVAL && oci_ref_parse(json_string_value(v), &ref, &ierr) == 0)
			continue;
		if (r == -EINVAL) {
			json_decref(map);
			return field_fail(err,
					  "%s: templates.%.64s: '%.64s' is no valid image name",
					  POLICY_FILE, k, json_string_value(v));
		}
		if (r < 0) /* an image added later is found then */
			log_warn("E2B templates: %s maps to image '%s', which is not there now", k,
				 json_string_value(v));
	}
	json_decref(templates);
	templates = map;
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
