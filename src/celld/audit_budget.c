/* The audit log's write budget per principal (audit_budget.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit_budget.h"

#define LINE_MAX_BYTES (64u << 10) /* audit.h's AUDIT_LINE_MAX: a whole record fits a burst */
#define RATE_MAX       (UINT64_C(1) << 40)

const struct audit_budget_policy audit_budget_default = {
    /* An agent's busy minute is a few hundred records; a flood from one key fills
     * 16 MiB in well over an hour instead of seconds. */
    .records_per_second = 20,
    .records_burst = 200,
    .bytes_per_second = 16384,
    .bytes_burst = 262144,
};

static void refill(struct audit_bucket *b, const struct audit_budget_policy *p, int64_t now_ms)
{
	/* A clock set back refills nothing; it never takes away. */
	if (now_ms > b->last_ms) {
		double s = (double)(now_ms - b->last_ms) / 1000.0;
		b->records += s * (double)p->records_per_second;
		b->bytes += s * (double)p->bytes_per_second;
		b->last_ms = now_ms;
	}
	if (b->records > (double)p->records_burst)
		b->records = (double)p->records_burst;
	if (b->bytes > (double)p->bytes_burst)
		b->bytes = (double)p->bytes_burst;
}

bool audit_bucket_take(struct audit_bucket *b, const struct audit_budget_policy *p, int64_t now_ms,
		       size_t len, bool force)
{
	refill(b, p, now_ms);
	if (b->records >= 1.0 && b->bytes >= (double)len) {
		b->records -= 1.0;
		b->bytes -= (double)len;
		return true;
	}
	if (!force)
		return false;
	b->records = b->records >= 1.0 ? b->records - 1.0 : 0;
	b->bytes = b->bytes >= (double)len ? b->bytes - (double)len : 0;
	return true;
}

void audit_drops_add(struct audit_drops *d, const char *action, size_t len, int64_t now_ms)
{
	if (!d->count)
		d->first_ms = now_ms;
	d->last_ms = now_ms;
	d->count++;
	d->bytes += len;
	for (unsigned i = 0; i < d->nactions; i++) {
		if (!strcmp(d->actions[i].name, action)) {
			d->actions[i].count++;
			return;
		}
	}
	if (d->nactions < AUDIT_DROP_ACTIONS && strlen(action) < sizeof(d->actions[0].name)) {
		snprintf(d->actions[d->nactions].name, sizeof(d->actions[0].name), "%s", action);
		d->actions[d->nactions++].count = 1;
		return;
	}
	d->other++;
}

static void time_text(int64_t ms, char buf[32])
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	char day[24];
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, 32, "%.20s.%03dZ", day, (int)(ms % 1000));
}

json_t *audit_drops_json(const struct audit_drops *d)
{
	char first[32], last[32];
	time_text(d->first_ms, first);
	time_text(d->last_ms, last);
	json_t *actions = json_object();
	for (unsigned i = 0; actions && i < d->nactions; i++)
		json_object_set_new(actions, d->actions[i].name,
				    json_integer((json_int_t)d->actions[i].count));
	if (actions && d->other)
		json_object_set_new(actions, "other", json_integer((json_int_t)d->other));
	return json_pack("{s:s, s:I, s:I, s:o*, s:s, s:s}", "principal", d->principal, "count",
			 (json_int_t)d->count, "bytes", (json_int_t)d->bytes, "actions", actions,
			 "first", first, "last", last);
}

static struct audit_bucket *bucket_of(struct audit_budget *b, const char *principal, int64_t now_ms)
{
	for (size_t i = 0; i < b->n; i++)
		if (!strcmp(b->buckets[i].principal, principal))
			return &b->buckets[i];
	/* Past the cap, or out of memory: the last bucket is everyone else's. Principals
	 * are celld's keys, so the cap is never reached in practice. */
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 8;
		struct audit_bucket *nb =
		    b->n < AUDIT_PRINCIPALS_MAX ? realloc(b->buckets, cap * sizeof(*nb)) : NULL;
		if (!nb)
			return b->n ? &b->buckets[b->n - 1] : NULL;
		b->buckets = nb;
		b->cap = cap;
	}
	struct audit_bucket *k = &b->buckets[b->n++];
	memset(k, 0, sizeof(*k));
	snprintf(k->principal, sizeof(k->principal), "%s", principal);
	snprintf(k->drops.principal, sizeof(k->drops.principal), "%s", principal);
	k->records = (double)b->policy.records_burst;
	k->bytes = (double)b->policy.bytes_burst;
	k->last_ms = now_ms;
	return k;
}

static void move_drops(struct audit_bucket *k, struct audit_drops *due)
{
	*due = k->drops;
	memset(&k->drops, 0, sizeof(k->drops));
	snprintf(k->drops.principal, sizeof(k->drops.principal), "%s", k->principal);
}

bool audit_budget_admit(struct audit_budget *b, const char *principal, const char *action,
			size_t len, bool security, int64_t now_ms, struct audit_drops *due,
			bool *has_due)
{
	*has_due = false;
	struct audit_bucket *k = bucket_of(b, principal, now_ms);
	if (!k)
		return true; /* out of memory: never lose a record for want of a bucket */
	if (k->drops.count && (now_ms - k->drops.last_ms >= AUDIT_QUIET_MS ||
			       now_ms - k->drops.first_ms >= AUDIT_SUMMARY_EVERY_MS)) {
		move_drops(k, due);
		*has_due = true;
	}
	if (audit_bucket_take(k, &b->policy, now_ms, len, security))
		return true;
	audit_drops_add(&k->drops, action, len, now_ms);
	return false;
}

bool audit_budget_take_pending(struct audit_budget *b, struct audit_drops *due)
{
	for (size_t i = 0; i < b->n; i++) {
		if (b->buckets[i].drops.count) {
			move_drops(&b->buckets[i], due);
			return true;
		}
	}
	return false;
}

void audit_budget_free(struct audit_budget *b)
{
	free(b->buckets);
	b->buckets = NULL;
	b->n = b->cap = 0;
}

/* ---- the policy file ---- */

static int fail(struct cell_error *err, const char *file, const char *field, const char *what)
{
	return cell_err_msg(err, EINVAL, "%s: %s %s", file, field, what);
}

static int get_rate(json_t *o, const char *file, const char *name, uint64_t min, uint64_t *out,
		    struct cell_error *err)
{
	json_t *v = json_object_get(o, name);
	if (!v)
		return 0; /* the built-in value stays */
	if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)min ||
	    (uint64_t)json_integer_value(v) > RATE_MAX) {
		char what[96];
		snprintf(what, sizeof(what), "must be an integer from %" PRIu64 " to %" PRIu64, min,
			 (uint64_t)RATE_MAX);
		return fail(err, file, name, what);
	}
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int audit_budget_parse(json_t *root, const char *file, struct audit_budget_policy *out,
		       struct cell_error *err)
{
	static const char *const known[] = {"recordsPerSecond", "recordsBurst", "bytesPerSecond",
					    "bytesBurst"};
	if (!json_is_object(root))
		return fail(err, file, "the file", "must be a JSON object");
	const char *k;
	json_t *v;
	json_object_foreach(root, k, v)
	{
		bool ok = false;
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			ok = ok || !strcmp(k, known[i]);
		if (!ok) {
			char field[80];
			snprintf(field, sizeof(field), "'%.64s'", k);
			return fail(err, file, field,
				    "is not a known field (recordsPerSecond, recordsBurst, "
				    "bytesPerSecond, bytesBurst)");
		}
	}
	struct audit_budget_policy p = *out;
	int r = get_rate(root, file, "recordsPerSecond", 1, &p.records_per_second, err);
	if (r == 0)
		r = get_rate(root, file, "recordsBurst", 1, &p.records_burst, err);
	if (r == 0)
		r = get_rate(root, file, "bytesPerSecond", 1, &p.bytes_per_second, err);
	if (r == 0)
		r = get_rate(root, file, "bytesBurst", LINE_MAX_BYTES, &p.bytes_burst, err);
	if (r < 0)
		return r;
	if (p.records_burst < p.records_per_second)
		return fail(err, file, "recordsBurst", "must be at least recordsPerSecond");
	if (p.bytes_burst < p.bytes_per_second)
		return fail(err, file, "bytesBurst", "must be at least bytesPerSecond");
	*out = p;
	return 0;
}
