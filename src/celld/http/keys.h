/* The API keys celld takes on TCP (either API): the default one (<state>/api-key, or
 * CELL_API_KEY), and one per tenant in the keys file (<state>/api-keys). Each key is its
 * own principal (admission.h): what it creates is its own (tenancy.h). Loaded once at
 * start; read-only afterwards. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "cell/error.h"

struct adm_principal;

/* At most this many keys in all; a tenant's name is 1 to KEYS_NAME_MAX characters of
 * [a-z0-9._-], starting with a letter or digit; a tenant's key 16 to KEYS_KEY_MAX printable
 * bytes without blanks. */
#define KEYS_MAX      256
#define KEYS_NAME_MAX 32
#define KEYS_KEY_MAX  256
#define KEYS_DEFAULT  "default" /* the name of the default key */

/* Add key under name. -EINVAL (err naming what) when either is malformed or taken. */
int keys_add(const char *name, const char *key, struct cell_error *err);
/* The keys file: one "NAME KEY" per line; blank lines and '#' comments skipped. A missing
 * file is no key (0). A malformed line refuses it all, naming the file and line. */
int keys_load_file(const char *path, struct cell_error *err);
/* The principal whose key given (len bytes) is, or NULL when none is. The time taken does
 * not depend on which key matched or on any key's bytes. */
struct adm_principal *keys_match(const char *given, size_t len);
/* The default key's principal (NULL when there is no default key). */
struct adm_principal *keys_default(void);
size_t keys_count(void);
/* Tenancy is on from the second key: the keys' sandboxes, snapshots and volumes are then
 * each key's own. With one key, that key and the operator share everything. */
bool keys_tenancy(void);
