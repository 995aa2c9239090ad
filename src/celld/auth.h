/* API keys: comparing a key in constant time. Pure: unit suites link it alone. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* given (len bytes) equals key; the comparison takes the same time whatever either holds
 * (both are hashed first, so neither bytes nor length leak). NULL given or key: false. */
bool auth_key_equal(const char *given, size_t len, const char *key);
