/* execd GET /metrics and /metrics/watch (the SDK's getMetrics), and the usage object of
 * GET /v1/sandboxes/{id}: all from the sandbox's own cgroup counters, never from inside
 * the sandbox (whose answers would be hostile input). A paused sandbox can be measured
 * without resuming it.
 *
 * cpu_count is the CPU limit in whole cores, rounded up (the host's online CPUs when
 * unlimited); cpu_used_pct is CPU time over wall time in a window (100 ms for /metrics,
 * the last second for /metrics/watch), as a percentage of cpu_count cores; mem_total_mib is
 * the memory limit, mem_used_mib the cgroup's current charge. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cell/quota.h"
#include "api.h"
#include "config.h"
#include "events.h"
#include "lifecycle.h"
#include "registry.h"
#include "timefmt.h"
#include "http/sse.h"
#include "http/http.h"
#include "sandbox.h"

#define SAMPLE_MS      100
#define WATCH_EVERY_MS 1000
#define MIB	       (1024.0 * 1024.0)

static int sample(const struct sandbox *sb, struct cell_cgroup_usage *u, int64_t *at_us)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	*at_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	if (!celld.cgroup->usage)
		return -ENOTSUP;
	int r = celld.cgroup->usage(sb->cgroup_rel, u, NULL);
	/* An OOM kill a metrics reader's sample shows is an event of the sandbox. */
	if (r == 0)
		events_oom_count(sb->id, u->oom_kills);
	return r;
}

/* The metrics object from two samples. */
static json_t *metrics_json(const struct sandbox *sb, const struct cell_cgroup_usage *a,
			    int64_t at_a, const struct cell_cgroup_usage *b, int64_t at_b)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t millis = sb->limits.cpu_millis;
	double cores = millis ? (double)((millis + 999) / 1000) : (double)(online > 0 ? online : 1);
	double window = (double)(at_b - at_a);
	double pct = 0;
	if (window > 0 && b->cpu_usec >= a->cpu_usec)
		pct = (double)(b->cpu_usec - a->cpu_usec) / (window * cores) * 100.0;
	if (pct > 100.0)
		pct = 100.0;
	double total = (double)sb->limits.memory_bytes;
	struct sysinfo si;
	if (sysinfo(&si) == 0) {
		double host = (double)si.totalram * si.mem_unit;
		if (!total || total > host)
			total = host;
	}
	return json_pack("{s:f, s:f, s:f, s:f, s:I}", "cpu_count", cores, "cpu_used_pct", pct,
			 "mem_total_mib", total / MIB, "mem_used_mib",
			 (double)b->memory_current / MIB, "timestamp", (json_int_t)celld_now_ms());
}

int api_execd_metrics(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	struct cell_cgroup_usage a, b;
	int64_t ta, tb;
	int rc = sample(sb, &a, &ta);
	if (rc == 0) {
		struct timespec nap = {0, SAMPLE_MS * 1000000L};
		nanosleep(&nap, NULL);
		rc = sample(sb, &b, &tb);
	}
	if (rc < 0) {
		sandbox_unref(sb);
		return http_error(r, 409, "SANDBOX_NOT_RUNNING",
				  "sandbox %s has no cgroup to measure", http_param(r, 0));
	}
	json_t *o = metrics_json(sb, &a, ta, &b, tb);
	sandbox_unref(sb);
	return http_json(r, 200, o);
}

/* ---- /metrics/watch: one event per second until the client leaves or the sandbox goes */

struct watch {
	struct sandbox *sb;
	struct cell_cgroup_usage last;
	int64_t last_at;
	char *pending; /* the rest of the current event */
	size_t off, len;
	bool first;
};

static ssize_t watch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct watch *w = cls;
	if (w->off == w->len) {
		free(w->pending);
		w->pending = NULL;
		w->off = w->len = 0;
		if (!w->first) {
			struct timespec nap = {WATCH_EVERY_MS / 1000, 0};
			nanosleep(&nap, NULL);
		}
		w->first = false;
		struct cell_cgroup_usage now;
		int64_t at;
		if (sample(w->sb, &now, &at) < 0)
			return MHD_CONTENT_READER_END_OF_STREAM;
		json_t *o = metrics_json(w->sb, &w->last, w->last_at, &now, at);
		char *text = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
		json_decref(o);
		if (!text || asprintf(&w->pending, "%s\n\n", text) < 0) {
			free(text);
			w->pending = NULL;
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		free(text);
		w->len = strlen(w->pending);
		w->last = now;
		w->last_at = at;
	}
	size_t n = w->len - w->off < max ? w->len - w->off : max;
	memcpy(buf, w->pending + w->off, n);
	w->off += n;
	return (ssize_t)n;
}

static void watch_free(void *cls)
{
	struct watch *w = cls;
	free(w->pending);
	sandbox_unref(w->sb);
	free(w);
}

int api_execd_metrics_watch(struct http_req *r)
{
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	struct watch *w = calloc(1, sizeof(*w));
	if (!w) {
		sandbox_unref(sb);
		return http_no_memory(r);
	}
	w->sb = sb;
	w->first = true;
	if (sample(sb, &w->last, &w->last_at) < 0) {
		watch_free(w);
		return http_error(r, 409, "SANDBOX_NOT_RUNNING",
				  "sandbox has no cgroup to measure");
	}
	/* The first event covers a short window rather than none. */
	struct timespec nap = {0, SAMPLE_MS * 1000000L};
	nanosleep(&nap, NULL);
	struct MHD_Response *resp =
	    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, watch_read, w, watch_free);
	if (!resp) {
		watch_free(w);
		return http_no_memory(r);
	}
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	return http_respond(r, 200, resp);
}
