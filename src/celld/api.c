/* Helpers every OpenSandbox route group shares. */
#include <errno.h>
#include <stdio.h>

#include "api.h"
#include "http.h"
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
	 * paused or stopped. It is activity: its idle timer starts again. */
	sandbox_touch(sb);
	struct cell_error perr = {0};
	if (lifecycle_wake(sb, &perr) < 0 && perr.code != EBUSY && perr.code != ENOENT) {
		sandbox_unref(sb);
		http_internal(r, &perr);
		return NULL;
	}
	registry_lock();
	enum sbx_state st = sb->state;
	bool busy = sb->busy != SBX_IDLE;
	char reason[256];
	snprintf(reason, sizeof(reason), "%s", sb->reason ? sb->reason : "");
	registry_unlock();
	if (st == SBX_RUNNING && !busy)
		return sb;
	if (busy)
		http_error(r, 409, "SANDBOX_NOT_RUNNING", "sandbox %s is busy (%s)", sb->id,
			   sandbox_state_name(st));
	else
		http_error(r, 409, "SANDBOX_NOT_RUNNING", "sandbox %s is %s%s%s", sb->id,
			   sandbox_state_name(st), reason[0] ? ": " : "", reason);
	sandbox_unref(sb);
	return NULL;
}
