/* URL text: percent-decoding. Pure (no I/O, no state): unit suites link it alone. */
#pragma once

#include <stdbool.h>

/* Percent-decode s in place ('+' as a space when plus_space). Malformed escapes and "%00"
 * are refused (-EINVAL): a NUL would cut the text short wherever it is used next. */
int url_unescape(char *s, bool plus_space);
