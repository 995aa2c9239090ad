/* Typed access to request JSON, errors naming the field ("entrypoint[2] must be a string").
 * Pure (no I/O, no state): unit suites link it alone. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cell/error.h"

/* Each returns 1 when the field is present and valid, 0 when absent (or null) and not
 * required, -EINVAL with err filled ("entrypoint[2] must be a string") otherwise. Strings
 * are refused when they carry a NUL byte (bodies are parsed with JSON_ALLOW_NUL so the
 * message can name the field). */
int field_string(json_t *obj, const char *key, const char *name, bool required, const char **out,
		 struct cell_error *err);
int field_int(json_t *obj, const char *key, const char *name, int64_t min, int64_t max,
	      int64_t *out, struct cell_error *err);
int field_bool(json_t *obj, const char *key, const char *name, bool *out, struct cell_error *err);
/* An object whose values are all strings; *out is a new reference. */
int field_string_map(json_t *obj, const char *key, const char *name, json_t **out,
		     struct cell_error *err);
/* An array of strings; *out is a new reference. */
int field_string_array(json_t *obj, const char *key, const char *name, json_t **out,
		       struct cell_error *err);
/* Bounds of a string map or array a client stores in a sandbox's record (state.json must
 * stay loadable, and copies of it cheap). */
struct field_caps {
	size_t items;	  /* entries */
	size_t key_len;	  /* bytes of one key (maps; keys must be non-empty) */
	size_t value_len; /* bytes of one value */
	size_t total;	  /* bytes of every key and value together */
};
/* map (an object of strings) or arr (an array of strings) within caps, else -EINVAL with
 * err naming the field, the entry and the cap. */
int field_check_map_caps(json_t *map, const char *name, const struct field_caps *caps,
			 struct cell_error *err);
int field_check_array_caps(json_t *arr, const char *name, const struct field_caps *caps,
			   struct cell_error *err);
/* Fill err with a message naming the field (cell_err_msg with EINVAL). */
int field_fail(struct cell_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A decimal integer in [min, max], nothing else around it. 0 or -EINVAL. */
int parse_int64(const char *text, int64_t min, int64_t max, int64_t *out);
/* A JSON string without NUL bytes. */
bool json_is_clean_string(const json_t *v);
