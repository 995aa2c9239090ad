/* cell's own routes of named volumes: GET /v1/volumes, GET and DELETE /v1/volumes/{name}.
 * A volume is made by the first create that names it (volumes[].pvc); these list it, show
 * which sandboxes use it and remove it once none does. Each is its creator's (tenancy.h):
 * another tenant's volume is not found, and only sandboxes the caller sees are named. */
#include <errno.h>

#include "api.h"
#include "tenancy.h"
#include "volstore.h"
#include "volume_use.h"

/* The record, its disk use and its users r sees; NULL when it went meanwhile or is not r's
 * to see. */
static json_t *volume_json(struct http_req *r, const char *name)
{
	struct volstore_info info;
	struct cell_error err = {0};
	if (volstore_get(name, &info, &err) < 0 || !tenancy_sees_id(http_principal(r), info.owner))
		return NULL;
	json_t *o = volstore_json(&info);
	if (o)
		json_object_set_new(o, "usedBy", volume_use_users_seen(name, http_principal(r)));
	return o;
}

int api_volume_list(struct http_req *r)
{
	json_t *names = volstore_names(), *items = json_array();
	size_t i;
	json_t *n;
	json_array_foreach(names, i, n)
	{
		json_t *o = volume_json(r, json_string_value(n));
		if (o)
			json_array_append_new(items, o);
	}
	json_decref(names);
	return http_json(r, 200, json_pack("{s:o}", "items", items));
}

int api_volume_get(struct http_req *r)
{
	const char *name = http_param(r, 0);
	json_t *o = volstore_name_valid(name) ? volume_json(r, name) : NULL;
	if (!o)
		return http_fail(r, ENOENT, "VOLUME_NOT_FOUND", "volume %.64s not found", name);
	return http_json(r, 200, o);
}

int api_volume_delete(struct http_req *r)
{
	const char *name = http_param(r, 0);
	struct cell_error err = {0};
	struct volstore_info info;
	if (!volstore_name_valid(name) || volstore_get(name, &info, &err) < 0 ||
	    !tenancy_sees_id(http_principal(r), info.owner))
		return http_fail(r, ENOENT, "VOLUME_NOT_FOUND", "volume %.64s not found", name);
	json_t *users = volume_use_users(name);
	size_t n = json_array_size(users);
	json_decref(users);
	if (n) {
		/* named only when r sees it (the operator's sandbox may mount a tenant's) */
		json_t *seen = volume_use_users_seen(name, http_principal(r));
		const char *first = json_string_value(json_array_get(seen, 0));
		http_fail(r, EBUSY, "VOLUME_IN_USE",
			  "volume %s is used by sandbox %s%s; delete %s first", name,
			  first ? first : "(not yours)", n > 1 ? " and others" : "",
			  n > 1 ? "them" : "it");
		json_decref(seen);
		return 0;
	}
	int rc = volstore_remove(name, &err);
	if (rc == -ENOENT)
		return http_fail(r, ENOENT, "VOLUME_NOT_FOUND", "volume %.64s not found", name);
	if (rc < 0)
		return http_internal(r, &err);
	return http_empty(r, 204);
}
