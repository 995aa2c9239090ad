/* Parsers of the cell CLI's option values and operands. Each reports what was wrong with
 * cli_error and returns -errno (or false). */
#pragma once

#include <stdbool.h>

#include <jansson.h>

/* Refuse anything that is not a well-formed sandbox id before it reaches a URL. */
bool cli_parse_id(const char *id);

/* Parse "K=V" (or "K", taken from the CLI's own environment) into obj. */
int cli_parse_env(json_t *obj, const char *arg);

/* Parse "-v HOST:DEST[:ro|:rw]" into a {"host","dest","readOnly"} object appended to arr;
 * HOST is made absolute with realpath() (it must exist). */
int cli_parse_volume(json_t *arr, const char *arg);

/* Parse a positive number of seconds (fractions allowed) into milliseconds. */
int cli_parse_seconds_ms(const char *arg, long long *ms);

/* Parse --user's "UID[:GID]" (decimal, each 0-65535, the ids a sandbox has; GID defaults
 * to UID). Names are refused: resolving one would need the sandbox's /etc/passwd. */
int cli_parse_user(const char *arg, long long *uid, long long *gid);
