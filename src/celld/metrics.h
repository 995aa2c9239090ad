/* metrics.c: celld's own counters for GET /metrics (api_operator.c writes them out).
 * Each place that already counts adds to one of these with a relaxed atomic add: no lock,
 * no allocation, so the hot paths (relay, proxy, resolver, every request's end) pay one
 * instruction. Counters only grow (Prometheus counters); gauges are read at the scrape
 * from their owners, never kept here. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum metric_counter {
	METRIC_CREATES,		/* sandboxes created (lifecycle_create succeeded) */
	METRIC_CREATE_FAILURES, /* creates that failed (lifecycle_create returned < 0) */
	METRIC_DELETES,		/* sandboxes deleted */
	METRIC_RELAY_SENT,	/* bytes celld sent to cell-init on the relay */
	METRIC_RELAY_RECEIVED,	/* bytes celld received from cell-init */
	METRIC_PROXY_SENT,	/* bytes the port proxy and tunnels sent to sandboxes' apps */
	METRIC_PROXY_RECEIVED,	/* bytes they received from the apps */
	METRIC_DNS_ANSWERS,	/* the sandboxes' resolver: answers sent back */
	METRIC_DNS_REFUSALS,	/* REFUSED sent back (a name the policy does not allow) */
	METRIC_COUNTERS
};

/* A request's route group: a small fixed set, never a sandbox id or a path. */
enum metric_group {
	METRIC_GROUP_LIFECYCLE, /* sandboxes, snapshots, volumes, egress policy */
	METRIC_GROUP_EXECD,	/* commands, sessions, terminals, code, metrics */
	METRIC_GROUP_FILES,	/* execd's files and directories */
	METRIC_GROUP_PROXY,	/* the port proxy and tunnels */
	METRIC_GROUP_IMAGES,	/* images and skills */
	METRIC_GROUP_E2B,	/* everything of the E2B listener */
	METRIC_GROUP_OPERATOR,	/* /metrics, /health, /info, /audit */
	METRIC_GROUP_OTHER,	/* no route took it */
	METRIC_GROUPS
};

/* The latency histogram's upper bounds in seconds (Prometheus' le), +Inf after them. */
#define METRIC_BUCKETS 12
extern const double metrics_bucket_s[METRIC_BUCKETS];

void metrics_add(enum metric_counter c, uint64_t n);
/* A port proxy's or tunnel's splice moved n bytes to the app (to_app) or from it: the
 * cell_splice_opts.moved of a splice whose b is the app. */
void metrics_proxy_moved(bool to_app, size_t n);
uint64_t metrics_get(enum metric_counter c);

/* A request of group g answered (and its connection done with it) after ms. */
void metrics_request(enum metric_group g, int64_t ms);
const char *metrics_group_name(enum metric_group g);
/* Group g's histogram as Prometheus reads it: cumulative counts per bucket (the last,
 * METRIC_BUCKETS, is +Inf, the count), the sum of latencies in milliseconds. */
void metrics_histogram(enum metric_group g, uint64_t cumulative[METRIC_BUCKETS + 1],
		       uint64_t *sum_ms);
