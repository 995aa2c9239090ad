/* admission.c: quotas per API key and for all keys together */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "cell/error.h"

/* ADM_SNAPSHOT_BYTES counts bytes (admission_take_n), every other kind units. */
enum adm_kind {
	ADM_SANDBOXES,
	ADM_COMMANDS,
	ADM_STREAMS,
	ADM_SNAPSHOTS,
	ADM_SNAPSHOT_BYTES,
	ADM_KINDS
};
/* Who a request acts for: an API key (never the key itself), or NULL for the Unix socket,
 * which no quota limits. Principals live as long as celld. */
struct adm_principal;

/* policies/quotas/default.json (built-in quotas when missing), fitted to celld's fd limit;
 * a bad file refuses the start, naming the field. */
int admission_load(struct cell_error *err);
struct adm_principal *admission_principal(const char *key);
/* From a record's "owner" ("key:<hex>"; anything else is the Unix socket's, NULL). */
struct adm_principal *admission_principal_by_id(const char *id);
const char *admission_principal_id(const struct adm_principal *p);
/* The tenant's name (keys.h) once set, else its id; "operator" for NULL. Names are set at
 * start, before any request, and never change after. */
void admission_principal_set_name(struct adm_principal *p, const char *name);
const char *admission_principal_name(const struct adm_principal *p);
/* One more of kind for p: 0, or -EUSERS with err naming the quota (429). force counts it
 * whatever the quota (a sandbox adopted at start). NULL p: always 0, nothing counted. */
int admission_take(struct adm_principal *p, enum adm_kind kind, bool force, struct cell_error *err);
void admission_put(struct adm_principal *p, enum adm_kind kind);
/* The same for n at once (bytes). */
int admission_take_n(struct adm_principal *p, enum adm_kind kind, uint64_t n, bool force,
		     struct cell_error *err);
void admission_put_n(struct adm_principal *p, enum adm_kind kind, uint64_t n);
/* /v1/info's "quotas". */
json_t *admission_json(void);
/* How many key holders' connections the TCP server may hold (fitted to the fd limit). */
unsigned admission_tcp_connections(void);
