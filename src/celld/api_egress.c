/* The egress API (OpenSandbox's specs/egress-api.yaml): GET, PATCH and DELETE /policy under
 * a sandbox's endpoint for port 18080, where OpenSandbox runs its egress sidecar and cell
 * answers itself (the SDK's getEgressPolicy, patchEgressRules and deleteEgressRules; the
 * CLI's `cell network`). Every answer is the spec's PolicyStatusResponse: {status: "ok",
 * mode: deny_all | allow_all | enforcing (derived from the policy as the sidecar derives
 * it), enforcementMode: "dns+nft" (celld's resolver and nftables), reason: cell's own mode
 * (cell.network), policy: the NetworkPolicy in force}.
 *
 * A sandbox created with cell.network "none" has no interface: GET answers its policy as it
 * is (deny, no rule: nothing leaves it), a DELETE removes nothing, and a PATCH, which would
 * have to open a network that does not exist, is refused 409 SANDBOX_NO_NETWORK. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "audit.h"
#include "events.h"
#include "http.h"
#include "netpolicy.h"
#include "network.h"
#include "sandbox.h"

#define ENFORCEMENT "dns+nft"

/* A PATCH or DELETE reads the policy, changes it, and replaces it: two at once on the same
 * sandbox would lose one's change. Held around that (network.c's own locks nest inside;
 * nothing here waits on a sandbox's operation). */
static pthread_mutex_t edit_lock = PTHREAD_MUTEX_INITIALIZER;

static json_t *status_body(const struct netpolicy *p, const char *reason)
{
	json_t *policy = netpolicy_to_json(p);
	if (!policy)
		return NULL;
	return json_pack("{s:s, s:s, s:s, s:s, s:o}", "status", "ok", "mode", netpolicy_mode(p),
			 "enforcementMode", ENFORCEMENT, "reason", reason, "policy", policy);
}

static int answer(struct http_req *r, const struct netpolicy *p, const char *reason)
{
	json_t *body = status_body(p, reason);
	if (!body)
		return http_error(r, 503, "HOST_OUT_OF_CAPACITY", "out of memory");
	return http_json(r, 200, body);
}

static int no_network(struct http_req *r, struct sandbox *sb)
{
	return http_error(r, 409, "SANDBOX_NO_NETWORK",
			  "sandbox %s has no network (cell.network none): its egress policy "
			  "cannot be opened; create it with a network instead",
			  sb->id);
}

int api_egress_get(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	struct cell_error err = {0};
	struct netpolicy p;
	enum network_mode mode;
	int rc = network_policy_get(sb, &mode, &p, &err);
	sandbox_unref(sb);
	if (rc == -ENOTSUP) {
		/* No network: nothing leaves the sandbox, which is what deny-all says. */
		struct netpolicy none = {0};
		answer(r, &none, "cell.network none: loopback only");
		return 0;
	}
	if (rc < 0) {
		/* The record's policy is not understood: celld's fault, not the request's. */
		cell_err_wrap(&err, "the policy in force: ");
		err.code = EIO;
		return http_internal(r, &err);
	}
	char reason[64];
	snprintf(reason, sizeof(reason), "cell.network %s", network_mode_name(mode));
	answer(r, &p, reason);
	netpolicy_free(&p);
	return 0;
}

enum edit { EDIT_PATCH, EDIT_DELETE };

static int edit(struct http_req *r, enum edit what)
{
	json_t *body;
	if (http_json_body_any(r, &body) < 0)
		return 0;
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb) {
		json_decref(body);
		return 0;
	}
	struct cell_error err = {0};
	struct netpolicy p = {0};
	pthread_mutex_lock(&edit_lock);
	int rc = network_policy_get(sb, NULL, &p, &err);
	bool none = rc == -ENOTSUP;
	if (none && what == EDIT_PATCH) {
		pthread_mutex_unlock(&edit_lock);
		no_network(r, sb);
		goto out;
	}
	if (rc < 0 && !none) {
		pthread_mutex_unlock(&edit_lock);
		http_internal(r, &err);
		goto out;
	}
	if (none)
		cell_err_clear(&err);
	rc = what == EDIT_PATCH ? netpolicy_merge(&p, body, &err)
				: netpolicy_remove_targets(&p, body, &err);
	if (rc < 0) {
		pthread_mutex_unlock(&edit_lock);
		http_internal(r, &err); /* EINVAL 400 naming the element, EFBIG 413 */
		goto out;
	}
	if (what == EDIT_DELETE && rc == 0) {
		/* Nothing matched: the policy stays as it is (the sidecar's answer). */
		pthread_mutex_unlock(&edit_lock);
		answer(r, &p, "no matching targets found");
		goto out;
	}
	rc = network_policy_replace(sb, &p, &err);
	pthread_mutex_unlock(&edit_lock);
	/* A network decision: the audit log has the change asked and whether it took. */
	audit_log(sb->id, "network.policy",
		  json_pack("{s:s, s:O, s:b}", "op", what == EDIT_PATCH ? "patch" : "delete",
			    "change", body, "ok", rc == 0));
	if (rc == 0)
		events_emit(sb->id, "network.policy",
			    json_pack("{s:s}", "op", what == EDIT_PATCH ? "patch" : "delete"));
	if (rc == -ENOTSUP) {
		/* Its network not (or no longer) there to change. */
		http_error(r, 409, "CONFLICT", "%s", err.msg);
	} else if (rc < 0) {
		http_internal(r, &err);
	} else
		answer(r, &p, "cell.network custom");
out:
	netpolicy_free(&p);
	sandbox_unref(sb);
	json_decref(body);
	return 0;
}

int api_egress_patch(struct http_req *r)
{
	return edit(r, EDIT_PATCH);
}

int api_egress_delete(struct http_req *r)
{
	return edit(r, EDIT_DELETE);
}
