/* Helpers every OpenSandbox route group shares. */
#include <stdio.h>

#include "api.h"
#include "http/http.h"
#include "lifecycle.h"
#include "registry.h"
#include "sandbox.h"
#include "tenancy.h"

struct sandbox *api_find_sandbox(struct http_req *r)
{
	const char *id = http_param(r, 0);
	struct sandbox *sb = tenancy_sandbox(r, id);
	if (!sb)
		http_error(r, 404, "SANDBOX_NOT_FOUND", "sandbox %s not found", id ? id : "");
	return sb;
}

struct sandbox *api_used_sandbox(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (sb)
		sandbox_touch(sb);
	return sb;
}

struct sandbox *api_running_sandbox(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return NULL;
	/* Using a paused or stopped sandbox starts it first (as a request to a stopped VM
	 * would wake it), so clients never see exec or files fail on a sandbox an idle timer
	 * paused or stopped. The control API's use wakes any sandbox. */
	enum sbx_use use;
	struct sbx_use_view v;
	struct cell_error perr = {0};
	if (lifecycle_use(sb, false, &use, &v, &perr) < 0) {
		sandbox_unref(sb);
		http_internal(r, &perr);
		return NULL;
	}
	if (use == SBX_USE_READY)
		return sb;
	if (use == SBX_USE_BUSY)
		http_error(r, 409, "SANDBOX_NOT_RUNNING", "sandbox %s is busy (%s)", sb->id,
			   sandbox_state_name(v.state));
	else
		http_error(r, 409, "SANDBOX_NOT_RUNNING", "sandbox %s is %s%s%s", sb->id,
			   sandbox_state_name(v.state), v.reason[0] ? ": " : "", v.reason);
	sandbox_unref(sb);
	return NULL;
}
