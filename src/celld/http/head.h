/* A raw HTTP request head (request line, headers, empty line), read before the HTTP server
 * has parsed it: where it ends, what a header holds. Pure (no I/O, no state): unit suites
 * link it alone. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Length of the head in buf[0..n) through its empty line, 0 while it is incomplete; *start
 * is where the request line begins (empty lines before it are allowed). */
size_t head_len(const char *buf, size_t n, size_t *start);
/* The value of the first header called name (any case) in a whole head, blanks around it
 * trimmed: true with *value and *vlen pointing into head. A value continued on a folded
 * line is refused (false): it is not what the HTTP server would read. */
bool head_value(const char *head, size_t len, const char *name, const char **value, size_t *vlen);
