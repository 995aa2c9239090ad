/* secrets.c: a sandbox's secrets: NAME → value pairs a create gives (its top-level
 * "secretEnv" object, or extensions["cell.secrets"], a JSON object as a string), put into
 * the environment of every command, bash session and terminal celld starts in the sandbox,
 * and shown nowhere: not in the record (state.json), a GET or inspect (only their names),
 * events or the audit log. They live in <state>/sandboxes/<id>/secrets.json (0600, in the
 * root-only dir), so they survive a celld restart and go with the sandbox's dir. */
#pragma once

#include <stddef.h>

#include <jansson.h>

#include "cell/error.h"

#define SECRETS_FILE	  "secrets.json"
#define SECRETS_MAX_ITEMS 64
#define SECRETS_NAME_MAX  128
#define SECRETS_VALUE_MAX (32u << 10)
#define SECRETS_TOTAL_MAX (64u << 10)

/* The create's secrets from secret_env (the "secretEnv" member; may be NULL) and ext (the
 * extensions["cell.secrets"] string; may be NULL), merged (secretEnv wins): each name
 * [A-Za-z_][A-Za-z0-9_]* of at most SECRETS_NAME_MAX bytes, each value a string of at most
 * SECRETS_VALUE_MAX bytes without NUL, SECRETS_MAX_ITEMS and SECRETS_TOTAL_MAX bytes in
 * all. 0 with *out (NULL when there are none), or -EINVAL with err naming the field. */
int secrets_parse(json_t *secret_env, const char *ext, json_t **out, struct cell_error *err);
/* Write secrets (an object) into the dir open at dirfd as SECRETS_FILE (0600, through a
 * temporary file and a rename). 0 or -errno. */
int secrets_save(int dirfd, json_t *secrets, struct cell_error *err);
/* The secrets kept in the dir at dirfd: an object (a new reference), NULL when none. */
json_t *secrets_load(int dirfd);
/* Their names, sorted: an array (empty when none); NULL when out of memory. */
json_t *secrets_names(int dirfd);
