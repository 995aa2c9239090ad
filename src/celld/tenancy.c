/* Tenancy (tenancy.h): one rule, asked by every lookup a client's request makes. */
#include <string.h>

#include "admission.h"
#include "http/http.h"
#include "http/keys.h"
#include "registry.h"
#include "sandbox.h"
#include "tenancy.h"

bool tenancy_sees(const struct adm_principal *who, const struct adm_principal *owner)
{
	return !who || !keys_tenancy() || who == owner;
}

bool tenancy_sees_id(const struct adm_principal *who, const char *owner_id)
{
	if (!who || !keys_tenancy())
		return true;
	return owner_id && !strcmp(owner_id, admission_principal_id(who));
}

bool tenancy_owns_id(const struct adm_principal *who, const char *owner_id)
{
	if (!keys_tenancy())
		return true;
	if (!who)
		return !owner_id || !owner_id[0] || !strcmp(owner_id, "unix");
	return owner_id && !strcmp(owner_id, admission_principal_id(who));
}

struct sandbox *tenancy_sandbox(const struct http_req *r, const char *id)
{
	const char *scope = http_scope(r);
	if (!id || (scope && strcmp(scope, id)))
		return NULL;
	struct sandbox *sb = registry_get(id);
	if (sb && !scope && !tenancy_sees(http_principal(r), sb->owner)) {
		sandbox_unref(sb);
		return NULL;
	}
	return sb;
}

void tenancy_grant_scoped(struct http_req *r, const char *id, bool anonymous)
{
	struct sandbox *sb = registry_get(id);
	struct adm_principal *owner = sb ? sb->owner : NULL;
	if (sb)
		sandbox_unref(sb);
	http_grant(r, owner ? owner : keys_default(), id);
	if (anonymous)
		http_grant_anonymous(r);
}
