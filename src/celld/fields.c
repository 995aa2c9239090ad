/* Typed access to request JSON. Every refusal names the field, so a client learns exactly
 * what to fix ("resourceLimits.cpu must be a string"). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fields.h"

int field_fail(struct cell_error *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = cell_err_vmsg(err, EINVAL, fmt, ap);
	va_end(ap);
	return r;
}

bool json_is_clean_string(const json_t *v)
{
	/* Bodies are parsed with JSON_ALLOW_NUL: a "\u0000" inside a value would otherwise
	 * truncate it silently once it becomes a C string (a path or a command). */
	return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

static json_t *lookup(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_null(v) ? NULL : v;
}

int field_string(json_t *obj, const char *key, const char *name, bool required, const char **out,
		 struct cell_error *err)
{
	json_t *v = lookup(obj, key);
	if (!v) {
		if (required)
			return field_fail(err, "%s is required", name);
		return 0;
	}
	if (!json_is_string(v))
		return field_fail(err, "%s must be a string", name);
	if (!json_is_clean_string(v))
		return field_fail(err, "%s must not contain a NUL byte", name);
	*out = json_string_value(v);
	return 1;
}

int field_int(json_t *obj, const char *key, const char *name, int64_t min, int64_t max,
	      int64_t *out, struct cell_error *err)
{
	json_t *v = lookup(obj, key);
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return field_fail(err, "%s must be an integer", name);
	int64_t n = json_integer_value(v);
	if (n < min || n > max)
		return field_fail(err, "%s must be between %lld and %lld", name, (long long)min,
				  (long long)max);
	*out = n;
	return 1;
}

int field_bool(json_t *obj, const char *key, const char *name, bool *out, struct cell_error *err)
{
	json_t *v = lookup(obj, key);
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return field_fail(err, "%s must be a boolean", name);
	*out = json_is_true(v);
	return 1;
}

int field_string_map(json_t *obj, const char *key, const char *name, json_t **out,
		     struct cell_error *err)
{
	json_t *v = lookup(obj, key);
	if (!v)
		return 0;
	if (!json_is_object(v))
		return field_fail(err, "%s must be an object of strings", name);
	const char *k;
	json_t *val;
	json_object_foreach(v, k, val)
	{
		if (!json_is_string(val))
			return field_fail(err, "%s.%s must be a string", name, k);
		if (!json_is_clean_string(val))
			return field_fail(err, "%s.%s must not contain a NUL byte", name, k);
	}
	*out = json_incref(v);
	return 1;
}

int field_string_array(json_t *obj, const char *key, const char *name, json_t **out,
		       struct cell_error *err)
{
	json_t *v = lookup(obj, key);
	if (!v)
		return 0;
	if (!json_is_array(v))
		return field_fail(err, "%s must be an array of strings", name);
	size_t i;
	json_t *val;
	json_array_foreach(v, i, val)
	{
		if (!json_is_string(val))
			return field_fail(err, "%s[%zu] must be a string", name, i);
		if (!json_is_clean_string(val))
			return field_fail(err, "%s[%zu] must not contain a NUL byte", name, i);
	}
	*out = json_incref(v);
	return 1;
}

int parse_int64(const char *text, int64_t min, int64_t max, int64_t *out)
{
	/* Digits only (a '-' where negatives are allowed): strtoll alone would also take
	 * leading blanks and '+'. */
	if (!text || !(isdigit((unsigned char)text[0]) || (text[0] == '-' && min < 0)))
		return -EINVAL;
	char *end;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (errno || end == text || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* One entry against the caps: its key (maps only) and value, adding both to *total. */
static int check_entry(const char *name, const char *key, size_t key_len, size_t index,
		       size_t value_len, const struct field_caps *caps, size_t *total,
		       struct cell_error *err)
{
	if (key && (key_len == 0 || key_len > caps->key_len || strlen(key) != key_len))
		return field_fail(err, "%s key '%.64s%s' must be 1-%zu bytes without a NUL byte",
				  name, key, key_len > 64 ? "..." : "", caps->key_len);
	if (value_len > caps->value_len) {
		if (key)
			return field_fail(err, "%s.%.64s is %zu bytes; at most %zu", name, key,
					  value_len, caps->value_len);
		return field_fail(err, "%s[%zu] is %zu bytes; at most %zu", name, index, value_len,
				  caps->value_len);
	}
	*total += key_len + value_len;
	if (*total > caps->total)
		return field_fail(err, "%s holds more than %zu bytes%s", name, caps->total,
				  key ? " of keys and values" : "");
	return 0;
}

/* A key's length as jansson holds it: since 2.14 a key may hold a NUL byte (then it is
 * longer than its C string, and check_entry refuses it); before, jansson refuses those. */
static size_t key_len(void *it)
{
#if JANSSON_VERSION_HEX >= 0x020e00
	return json_object_iter_key_len(it);
#else
	return strlen(json_object_iter_key(it));
#endif
}

int field_check_map_caps(json_t *map, const char *name, const struct field_caps *caps,
			 struct cell_error *err)
{
	if (json_object_size(map) > caps->items)
		return field_fail(err, "%s has %zu entries; at most %zu", name,
				  json_object_size(map), caps->items);
	size_t total = 0;
	for (void *it = json_object_iter(map); it; it = json_object_iter_next(map, it)) {
		int r =
		    check_entry(name, json_object_iter_key(it), key_len(it), 0,
				json_string_length(json_object_iter_value(it)), caps, &total, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int field_check_array_caps(json_t *arr, const char *name, const struct field_caps *caps,
			   struct cell_error *err)
{
	if (json_array_size(arr) > caps->items)
		return field_fail(err, "%s has %zu entries; at most %zu", name,
				  json_array_size(arr), caps->items);
	size_t total = 0, i;
	json_t *v;
	json_array_foreach(arr, i, v)
	{
		int r = check_entry(name, NULL, 0, i, json_string_length(v), caps, &total, err);
		if (r < 0)
			return r;
	}
	return 0;
}
