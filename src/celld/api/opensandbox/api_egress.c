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
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "audit.h"
#include "events.h"
#include "http/http.h"
#include "netpolicy.h"
#include "network.h"
#include "sandbox.h"

#define ENFORCEMENT "dns+nft"

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
		return http_no_memory(r);
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

struct edit_req {
	enum edit what;
	json_t *body;
	bool no_network; /* a PATCH of a sandbox without one */
	bool changed;	 /* the change was good: it was put in force (or failed to be) */
};

/* The request's change of the policy in force (network_policy_edit, under the lock every
 * API's edit takes). */
static int change(struct netpolicy *p, bool has_network, void *cls, struct cell_error *err)
{
	struct edit_req *q = cls;
	if (!has_network && q->what == EDIT_PATCH) {
		q->no_network = true;
		return -ENOTSUP;
	}
	int rc = q->what == EDIT_PATCH ? netpolicy_merge(p, q->body, err)
				       : netpolicy_remove_targets(p, q->body, err);
	if (rc < 0)
		return rc; /* EINVAL 400 naming the element, EFBIG 413 */
	/* A DELETE that matched nothing leaves the policy as it is (the sidecar's answer). */
	q->changed = q->what == EDIT_PATCH || rc > 0;
	return q->changed;
}

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
	struct netpolicy p;
	struct edit_req q = {.what = what, .body = body};
	int rc = network_policy_edit(sb, change, &q, &p, &err);
	if (q.no_network) {
		no_network(r, sb);
		goto out;
	}
	if (rc == 1) {
		answer(r, &p, "no matching targets found");
		goto out;
	}
	/* A network decision: the audit log has the change asked and whether it took. */
	if (q.changed)
		audit_log(sb->id, "network.policy",
			  json_pack("{s:s, s:O, s:b}", "op",
				    what == EDIT_PATCH ? "patch" : "delete", "change", body, "ok",
				    rc == 0));
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
