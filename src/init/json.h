/* JSON helpers of cell-init. */
#pragma once

#include <stddef.h>

#include <jansson.h>

/* Copy msg into a fresh json string, replacing bytes that are not valid UTF-8 with '?'
 * (messages carry hostile paths and program names; jansson accepts only UTF-8). */
json_t *init_json_string_lossy(const char *msg, size_t len);
