/* Tenancy: who sees what. Every sandbox, snapshot and named volume has an owner, the
 * principal that made it (an API key, or the operator on the Unix socket). Once celld has
 * a second key (keys_tenancy), a key sees only its own; the operator sees all. With one key,
 * that key and the operator share everything. Another tenant's thing is not found (404):
 * its existence is not told. */
#pragma once

#include <stdbool.h>

struct adm_principal;
struct http_req;
struct sandbox;

/* Whether who may see and act on a thing owner made (NULL: the operator). */
bool tenancy_sees(const struct adm_principal *who, const struct adm_principal *owner);
/* The same with the owner as recorded on disk (admission_principal_id's text; NULL, "" and
 * "unix" are the operator's). */
bool tenancy_sees_id(const struct adm_principal *who, const char *owner_id);
/* Whether who made a thing whose recorded owner is owner_id: what a name resolves among, so
 * that no tenant's name shadows another's. Unlike tenancy_sees_id, the operator owns only
 * its own (else a key could plant a name the operator's request then takes); without
 * tenancy, everything is the one tenant's. */
bool tenancy_owns_id(const struct adm_principal *who, const char *owner_id);
/* Sandbox id referenced, when r may act on it: the sandbox its credential is scoped to (a
 * sandbox's token, a signed URL, a preview token: that one alone), else one r's principal
 * sees. NULL when there is none r may see. */
struct sandbox *tenancy_sandbox(const struct http_req *r, const char *id);
/* For an authorized hook: r carries a token of sandbox id alone. It acts for that
 * sandbox's owner (its quotas), or the default key's when the operator made it: on TCP
 * nobody acts as the operator. anonymous: a credential anyone may be handed (a preview
 * token, a traffic token, a signed URL, a public port), whose connections are held within
 * the listener's keyless budget (keyless.h); not: a sandbox's own client's (E2B's envd
 * token, which the key holder's SDK gets with the sandbox). */
void tenancy_grant_scoped(struct http_req *r, const char *id, bool anonymous);
