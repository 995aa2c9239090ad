/* Helpers every OpenSandbox route group shares. */
#include "api.h"
#include "registry.h"
#include "http.h"

struct sandbox *api_find_sandbox(struct http_req *r)
{
	const char *id = http_param(r, 0);
	struct sandbox *sb = id ? registry_get(id) : NULL;
	if (!sb)
		http_error(r, 404, "SANDBOX_NOT_FOUND", "sandbox %s not found", id ? id : "");
	return sb;
}
