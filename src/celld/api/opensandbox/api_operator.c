/* The operator's routes: GET /metrics (Prometheus' text exposition format 0.0.4) and
 * GET /health (liveness). Both answer on the Unix socket only, whose clients are the
 * operator (no key asked); on a TCP listener, even with a key, they do not exist: the same
 * 404 as any unknown path, so no count leaks to a tenant.
 *
 * A scrape reads the counters the hot paths keep (metrics.h, relaxed atomics) and asks
 * each gauge's owner once: the registry (one pass under its lock), the commands' output
 * budget, the image store, the packet log. Its one allocation is the answer's text. */
#include <stdio.h>
#include <stdlib.h>

#include "api.h"
#include "commands.h"
#include "http/http.h"
#include "image_store.h"
#include "metrics.h"
#include "netlog.h"
#include "registry.h"
#include "sandbox.h"
#include "timers.h"

#define HEALTH_REGISTRY_MS 1000 /* the registry lock is free within this, or it is stuck */
/* The timers' thread shows a sign of life at least every 2 s (its tick) and after each
 * sandbox it looked at: this late, it is stuck. */
#define HEALTH_TIMERS_MS 10000

static int not_here(struct http_req *r)
{
	return http_error(r, 404, "NOT_FOUND", "no such endpoint");
}

/* "# HELP" and "# TYPE" of a family, before its samples. */
static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP cell_%s %s\n# TYPE cell_%s %s\n", name, help, name, type);
}

static void counter(FILE *f, const char *name, const char *help, enum metric_counter c)
{
	family(f, name, "counter", help);
	fprintf(f, "cell_%s %llu\n", name, (unsigned long long)metrics_get(c));
}

static void gauge(FILE *f, const char *name, const char *help, unsigned long long v)
{
	family(f, name, "gauge", help);
	fprintf(f, "cell_%s %llu\n", name, v);
}

static void sandboxes(FILE *f)
{
	size_t counts[SBX_FAILED + 1];
	registry_count_states(counts, SBX_FAILED + 1);
	family(f, "sandboxes", "gauge", "Sandboxes by state.");
	for (enum sbx_state s = SBX_PENDING; s <= SBX_FAILED; s++)
		fprintf(f, "cell_sandboxes{state=\"%s\"} %zu\n", sandbox_state_name(s), counts[s]);
}

static void latencies(FILE *f)
{
	family(f, "http_request_duration_seconds", "histogram",
	       "Time from a request's arrival to the end of its answer, by route group.");
	for (enum metric_group g = 0; g < METRIC_GROUPS; g++) {
		uint64_t cum[METRIC_BUCKETS + 1], sum_ms;
		metrics_histogram(g, cum, &sum_ms);
		const char *name = metrics_group_name(g);
		for (unsigned b = 0; b < METRIC_BUCKETS; b++)
			fprintf(f,
				"cell_http_request_duration_seconds_bucket{group=\"%s\",le=\"%g\"} "
				"%llu\n",
				name, metrics_bucket_s[b], (unsigned long long)cum[b]);
		fprintf(f,
			"cell_http_request_duration_seconds_bucket{group=\"%s\",le=\"+Inf\"} %llu\n"
			"cell_http_request_duration_seconds_sum{group=\"%s\"} %.3f\n"
			"cell_http_request_duration_seconds_count{group=\"%s\"} %llu\n",
			name, (unsigned long long)cum[METRIC_BUCKETS], name, (double)sum_ms / 1000,
			name, (unsigned long long)cum[METRIC_BUCKETS]);
	}
}

/* A counter of two directions, as one family with a label. */
static void directions(FILE *f, const char *name, const char *help, const char *a,
		       enum metric_counter ca, const char *b, enum metric_counter cb)
{
	family(f, name, "counter", help);
	fprintf(f, "cell_%s{direction=\"%s\"} %llu\ncell_%s{direction=\"%s\"} %llu\n", name, a,
		(unsigned long long)metrics_get(ca), name, b, (unsigned long long)metrics_get(cb));
}

static void write_metrics(FILE *f)
{
	sandboxes(f);
	counter(f, "sandbox_creates_total", "Sandboxes created.", METRIC_CREATES);
	counter(f, "sandbox_create_failures_total", "Creates that failed.", METRIC_CREATE_FAILURES);
	counter(f, "sandbox_deletes_total", "Sandboxes deleted.", METRIC_DELETES);
	latencies(f);
	directions(f, "relay_bytes_total", "Bytes on the relays to the sandboxes' cell-init.",
		   "sent", METRIC_RELAY_SENT, "received", METRIC_RELAY_RECEIVED);
	directions(f, "proxy_bytes_total", "Bytes of the port proxy and tunnels, to and from apps.",
		   "to_app", METRIC_PROXY_SENT, "from_app", METRIC_PROXY_RECEIVED);
	counter(f, "dns_answers_total", "Answers of the sandboxes' resolver.", METRIC_DNS_ANSWERS);
	counter(f, "dns_refusals_total", "Names the sandboxes' resolver refused (REFUSED).",
		METRIC_DNS_REFUSALS);
	struct netlog_stats ns;
	netlog_stats(&ns);
	family(f, "packets_dropped_total", "counter",
	       "Packets the sandboxes' egress policy dropped, as the packet log saw them.");
	fprintf(f, "cell_packets_dropped_total %llu\n", (unsigned long long)ns.packets);
	uint64_t kept, budget;
	cmd_output_usage(&kept, &budget);
	gauge(f, "command_output_bytes", "Commands' output kept in memory.", kept);
	gauge(f, "command_output_budget_bytes", "The bound of commands' output kept.", budget);
	gauge(f, "image_store_bytes", "Bytes the image store's layers take.", store_used_bytes());
}

int api_operator_metrics(struct http_req *r)
{
	if (http_is_tcp(r))
		return not_here(r);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return http_no_memory(r);
	write_metrics(f);
	if (fclose(f) != 0) {
		free(text);
		return http_no_memory(r);
	}
	return http_text(r, text, len, "text/plain; version=0.0.4; charset=utf-8", NULL);
}

static int unhealthy(struct http_req *r, const char *part, const char *message)
{
	return http_json(r, 503,
			 json_pack("{s:s, s:s, s:s}", "status", "unavailable", "failing", part,
				   "message", message));
}

int api_operator_health(struct http_req *r)
{
	if (http_is_tcp(r))
		return not_here(r);
	if (!registry_lock_within(HEALTH_REGISTRY_MS))
		return unhealthy(r, "registry", "the registry lock was not free within 1 s");
	registry_unlock();
	int64_t age = timers_beat_age_ms();
	if (age < 0 || age > HEALTH_TIMERS_MS)
		return unhealthy(r, "timers", "the timers' thread has not run for over 10 s");
	return http_json(r, 200,
			 json_pack("{s:s, s:I, s:I}", "status", "ok", "sandboxes",
				   (json_int_t)registry_count(), "timersAgeMs", (json_int_t)age));
}
