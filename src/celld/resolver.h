/* resolver.c: celld's per-sandbox DNS resolver (interface; see the helper's header) */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell/error.h"

struct resolver_rule {
	bool allow;
	char pattern[256];
};
struct resolver_rules {
	bool default_allow;
	const struct resolver_rule *rules;
	size_t n;
};
typedef void resolver_answer_fn(void *ctx, const char *key, const struct in_addr *addrs, size_t n,
				unsigned ttl_s);
int resolver_start(const struct sockaddr_in *upstream, resolver_answer_fn *on_answer, void *ctx,
		   struct cell_error *err);
void resolver_stop(void);
int resolver_add(const char *key, const char *sandbox_id, struct in_addr listen_addr,
		 const struct resolver_rules *rules, bool pin_answers, struct cell_error *err);
int resolver_set_rules(const char *key, const struct resolver_rules *rules, bool pin_answers,
		       struct cell_error *err);
void resolver_remove(const char *key);
struct resolver_stats {
	uint64_t queries, forwarded, answered, refused, rate_limited, failed;
};
int resolver_stats(const char *key, struct resolver_stats *out);
int resolver_parse_upstream(const char *text, struct sockaddr_in *out, struct cell_error *err);
int resolver_default_upstream(struct sockaddr_in *out, struct cell_error *err);
