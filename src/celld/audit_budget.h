/* audit_budget.c: what one principal may write to the audit log per unit of time. A token
 * bucket per principal id ("key:<hex>"), records and bytes, each with a burst; a record
 * over either is dropped and tallied, and the tally comes back as a summary to write
 * (audit.dropped) when the principal writes again after a quiet second, or every
 * AUDIT_SUMMARY_EVERY_MS while it floods. A security record always passes, using up what
 * budget is left. Pure: no clock, no lock, no I/O (audit.c holds the lock and the clock).
 *
 * Also the budget's policy, policies/audit/budget.json, checked field by field. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cell/error.h"

#define AUDIT_BUDGET_FILE      "audit/budget.json"
#define AUDIT_QUIET_MS	       1000  /* a pause this long ends a flood: its summary is written */
#define AUDIT_SUMMARY_EVERY_MS 10000 /* during a flood, a summary this often */
#define AUDIT_PRINCIPALS_MAX   1024  /* principals tracked apart; the rest share one bucket */
#define AUDIT_DROP_ACTIONS     8     /* actions named in a summary; more are "other" */

struct audit_budget_policy {
	uint64_t records_per_second, records_burst;
	uint64_t bytes_per_second, bytes_burst;
};

/* The built-in policy, as the file shipped in policies/ says. */
extern const struct audit_budget_policy audit_budget_default;

/* What one principal had dropped since its last summary. */
struct audit_drops {
	char principal[80];
	uint64_t count, bytes;
	int64_t first_ms, last_ms; /* Unix ms */
	unsigned nactions;
	struct {
		char name[32];
		uint64_t count;
	} actions[AUDIT_DROP_ACTIONS];
	uint64_t other; /* dropped records of actions past the named ones */
};

struct audit_bucket {
	char principal[80];
	double records, bytes; /* tokens */
	int64_t last_ms;       /* when they were last refilled */
	struct audit_drops drops;
};

struct audit_budget {
	struct audit_budget_policy policy;
	struct audit_bucket *buckets;
	size_t n, cap;
};

/* Refill b to now_ms under p, then take one record of len bytes: true when it fits (or
 * force: a security record, which passes whatever is left, taking it down to 0). */
bool audit_bucket_take(struct audit_bucket *b, const struct audit_budget_policy *p, int64_t now_ms,
		       size_t len, bool force);
/* One dropped record of action, len bytes, at now_ms, into d. */
void audit_drops_add(struct audit_drops *d, const char *action, size_t len, int64_t now_ms);
/* The summary record's details: {"principal", "count", "bytes", "actions": {name: n},
 * "first", "last"} (a new reference; NULL when out of memory). */
json_t *audit_drops_json(const struct audit_drops *d);

/* Whether principal's record (action, len bytes, security or not) is written at now_ms (Unix
 * ms): false when it is dropped (and tallied). When a summary of the principal's drops is
 * due first, it is moved into *due and *has_due set (write it before this record). */
bool audit_budget_admit(struct audit_budget *b, const char *principal, const char *action,
			size_t len, bool security, int64_t now_ms, struct audit_drops *due,
			bool *has_due);
/* The next tally not summarized yet (any age), moved into *due: false when none is left. */
bool audit_budget_take_pending(struct audit_budget *b, struct audit_drops *due);
void audit_budget_free(struct audit_budget *b);

/* The policy of root (the file's JSON) into *out, over the built-in values: -EINVAL with err
 * naming the field (file: the path for the message). Unknown fields are refused. */
int audit_budget_parse(json_t *root, const char *file, struct audit_budget_policy *out,
		       struct cell_error *err);
