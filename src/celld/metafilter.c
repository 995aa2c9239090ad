/* A list's metadata filter (metafilter.h). */
#include <errno.h>
#include <string.h>

#include "cell/cleanup.h"
#include "fields.h"
#include "metafilter.h"
#include "http/url.h"

static int unescape(char *s, bool twice)
{
	return url_unescape(s, true) < 0 || (twice && url_unescape(s, false) < 0) ? -EINVAL : 0;
}

int metafilter_parse(const char *text, bool twice, json_t **out, struct cell_error *err)
{
	_cleanup_free_ char *buf = strdup(text);
	json_t *f = json_object();
	if (!buf || !f) {
		json_decref(f);
		return cell_err(err, ENOMEM, "metadata filter");
	}
	char *save = NULL;
	for (char *kv = strtok_r(buf, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq || eq == kv) {
			json_decref(f);
			return field_fail(err, "metadata filter must be k=v pairs joined by '&'");
		}
		*eq = '\0';
		if (unescape(kv, twice) < 0 || unescape(eq + 1, twice) < 0) {
			json_decref(f);
			return field_fail(err, "metadata filter has a malformed %%-escape");
		}
		json_t *v = json_string(eq + 1);
		if (!kv[0] || !v || json_object_set_new(f, kv, v) < 0) {
			json_decref(f);
			return field_fail(err, "metadata filter is not valid UTF-8 k=v pairs");
		}
	}
	*out = f;
	return 0;
}

bool metafilter_matches(json_t *metadata, json_t *filter)
{
	const char *k;
	json_t *v;
	json_object_foreach(filter, k, v)
	{
		json_t *have = json_object_get(metadata, k);
		if (!json_is_string(have) || strcmp(json_string_value(have), json_string_value(v)))
			return false;
	}
	return true;
}
