/* API keys: finding a header in a raw request head, and comparing a key in constant time.
 * Pure (no I/O, no state): unit suites link it alone. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The value of the first header called name (any case) in a whole request head (request
 * line, headers, through the empty line), blanks around it trimmed: true with *value and
 * *len pointing into head. A value continued on a folded line is refused (false): it is
 * not what the HTTP server would read. */
bool auth_head_value(const char *head, size_t len, const char *name, const char **value,
		     size_t *vlen);
/* given (len bytes) equals key; the comparison takes the same time whatever either holds
 * (both are hashed first, so neither bytes nor length leak). NULL given or key: false. */
bool auth_key_equal(const char *given, size_t len, const char *key);
