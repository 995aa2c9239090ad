/* TEMPORARY, until the branch net-egress lands netpolicy.c: a minimal NetworkPolicy parser
 * so that celld links. Delete this file when netpolicy.c exists. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "netpolicy.h"
int netpolicy_from_json(json_t *o, const char *field, struct netpolicy *out, struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	if (!json_is_object(o))
		return cell_err_msg(err, EINVAL, "%s must be an object", field);
	const char *d = json_string_value(json_object_get(o, "defaultAction"));
	out->default_allow = !d || !strcmp(d, "allow");
	json_t *eg = json_object_get(o, "egress");
	size_t n = json_array_size(eg);
	out->rules = calloc(n ? n : 1, sizeof(*out->rules));
	for (size_t i = 0; i < n; i++) {
		json_t *r = json_array_get(eg, i);
		struct netpolicy_rule *x = &out->rules[out->n++];
		x->allow = !strcmp(json_string_value(json_object_get(r, "action")) ?: "", "allow");
		snprintf(x->target, sizeof(x->target), "%s",
			 json_string_value(json_object_get(r, "target")) ?: "");
		struct in_addr a;
		if (inet_pton(AF_INET, x->target, &a) == 1) {
			x->kind = NETPOLICY_IPV4;
			x->addr = ntohl(a.s_addr);
			x->prefix = 32;
		} else
			x->kind = x->target[0] == '*' ? NETPOLICY_WILDCARD : NETPOLICY_DOMAIN;
	}
	return 0;
}
json_t *netpolicy_to_json(const struct netpolicy *p)
{
	json_t *eg = json_array();
	for (size_t i = 0; i < p->n; i++)
		json_array_append_new(eg, json_pack("{s:s,s:s}", "action",
						    p->rules[i].allow ? "allow" : "deny", "target",
						    p->rules[i].target));
	return json_pack("{s:s,s:o}", "defaultAction", p->default_allow ? "allow" : "deny",
			 "egress", eg);
}
int netpolicy_copy(const struct netpolicy *src, struct netpolicy *dst)
{
	*dst = *src;
	dst->rules = calloc(src->n ? src->n : 1, sizeof(*dst->rules));
	memcpy(dst->rules, src->rules, src->n * sizeof(*dst->rules));
	return 0;
}
void netpolicy_free(struct netpolicy *p)
{
	free(p->rules);
	p->rules = NULL;
	p->n = 0;
}
