/* celld's counters (metrics.h): plain arrays of relaxed atomics, read at a scrape. */
#include "metrics.h"

const double metrics_bucket_s[METRIC_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
						 0.5,	1,    2.5,   5,	   10,	60};

static uint64_t counters[METRIC_COUNTERS];

struct histogram {
	uint64_t buckets[METRIC_BUCKETS + 1]; /* per bucket, not cumulative: one add a request */
	uint64_t sum_ms;
};
static struct histogram groups[METRIC_GROUPS];

static const char *const group_names[METRIC_GROUPS] = {
    [METRIC_GROUP_LIFECYCLE] = "lifecycle", [METRIC_GROUP_EXECD] = "execd",
    [METRIC_GROUP_FILES] = "files",	    [METRIC_GROUP_PROXY] = "proxy",
    [METRIC_GROUP_IMAGES] = "images",	    [METRIC_GROUP_E2B] = "e2b",
    [METRIC_GROUP_OPERATOR] = "operator",   [METRIC_GROUP_OTHER] = "other",
};

void metrics_add(enum metric_counter c, uint64_t n)
{
	__atomic_add_fetch(&counters[c], n, __ATOMIC_RELAXED);
}

void metrics_proxy_moved(bool to_app, size_t n)
{
	metrics_add(to_app ? METRIC_PROXY_SENT : METRIC_PROXY_RECEIVED, n);
}

uint64_t metrics_get(enum metric_counter c)
{
	return __atomic_load_n(&counters[c], __ATOMIC_RELAXED);
}

void metrics_request(enum metric_group g, int64_t ms)
{
	if (ms < 0)
		ms = 0;
	unsigned b = 0;
	while (b < METRIC_BUCKETS && (double)ms > metrics_bucket_s[b] * 1000)
		b++;
	__atomic_add_fetch(&groups[g].buckets[b], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&groups[g].sum_ms, (uint64_t)ms, __ATOMIC_RELAXED);
}

const char *metrics_group_name(enum metric_group g)
{
	return group_names[g];
}

void metrics_histogram(enum metric_group g, uint64_t cumulative[METRIC_BUCKETS + 1],
		       uint64_t *sum_ms)
{
	uint64_t total = 0;
	for (unsigned b = 0; b <= METRIC_BUCKETS; b++) {
		total += __atomic_load_n(&groups[g].buckets[b], __ATOMIC_RELAXED);
		cumulative[b] = total;
	}
	*sum_ms = __atomic_load_n(&groups[g].sum_ms, __ATOMIC_RELAXED);
}
