/* Parsers of the cell CLI's option values and operands. Each reports what was wrong with
 * cli_error and returns -errno (or false). */
#pragma once

#include <stdbool.h>

#include <jansson.h>

/* Refuse anything that is not a well-formed sandbox id before it reaches a URL. */
bool cli_parse_id(const char *id);

/* Parse "K=V" (or "K", taken from the CLI's own environment) into obj. */
int cli_parse_env(json_t *obj, const char *arg);

/* docker's --env-file: each line K=V or K (taken from this environment) into obj as
 * cli_parse_env; blank lines and lines starting with '#' skipped; at most 1 MiB. */
int cli_parse_env_file(json_t *obj, const char *path);

/* Parse "-v HOST:DEST[:ro|:rw]" into a {"host","dest","readOnly"} object appended to arr;
 * HOST is made absolute with realpath() (it must exist). */
int cli_parse_volume(json_t *arr, const char *arg);

/* Parse a positive number of seconds (fractions allowed) into milliseconds. */
int cli_parse_seconds_ms(const char *arg, long long *ms);

/* Parse --user's "UID[:GID]" (decimal, each 0-65535, the ids a sandbox has; GID defaults
 * to UID). Names are refused: resolving one would need the sandbox's /etc/passwd. */
int cli_parse_user(const char *arg, long long *uid, long long *gid);

/* A port number 1-65535 (0 too when zero_ok: any free port); false, printing nothing, when
 * s is not one. */
bool cli_parse_port(const char *s, bool zero_ok, unsigned *out);
