/* audit.c: celld's audit log, append-only JSON lines under <state>/audit/ (dir 0700, files
 * 0600): one line per lifecycle change, command, file change and network decision, with
 * a seq, the time, the request id, who asked ("unix" for the Unix socket, an API key's id,
 * never the key) and the sandbox. Two files, each rotated on its own: security.log (the
 * actions audit_action_security names: lifecycle, network decisions, failed
 * authentication, the budget's summaries) and audit.log (the rest: commands, file changes),
 * so that a flood of commands never rotates the security records out. One seq counts the
 * lines of both, taken under the log's lock; the reader merges them by time, then seq.
 * Each line goes out in one writev(2) on an O_APPEND descriptor, so a crash mid-write
 * leaves at most a torn last line, which the reader skips (and the next open ends with a
 * newline first). Past max bytes a file is rotated: audit.log → audit.log.1 …
 * .AUDIT_KEEP (the oldest dropped), and the same for security.log.
 *
 * A key holder's records are limited by a budget (audit_budget.h, policies/audit/
 * budget.json): those past it are dropped and summed up in an audit.dropped record. The
 * operator ("unix") and celld's own records are not limited; security records always
 * pass.
 *
 * Also the context of the request a thread answers (its id and who), set by the transport
 * around every handler, so that lower layers (sandbox_end, commands) can log who asked
 * without carrying the request down. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "cell/error.h"

struct sockaddr;
struct audit_budget_policy;

#define AUDIT_FILE	     "audit.log"
#define AUDIT_SECURITY_FILE  "security.log"
#define AUDIT_KEEP	     4		 /* rotated files kept: audit.log.1 … .4 */
#define AUDIT_MAX_DEFAULT    (16u << 20) /* bytes of a log file before it is rotated */
#define AUDIT_MAX_MIN	     4096u
#define AUDIT_LINE_MAX	     (64u << 10) /* a longer record is cut down (details dropped) */
#define AUDIT_READ_LIMIT_MAX 10000

/* ---- the request a thread answers ---- */

/* Set (and clear with NULLs) the calling thread's request id and principal id. */
void audit_context_set(const char *request_id, const char *who);
/* The calling thread's: "" when it answers no request. */
const char *audit_request_id(void);
/* The calling thread's: "celld" itself when it answers no request (a timer, the watcher). */
const char *audit_who(void);

/* Now, RFC 3339 UTC with milliseconds ("2026-11-24T15:00:00.123Z"). */
void audit_time_now(char buf[32]);

/* ---- the log ---- */

/* Open (create) <dir>/audit.log and <dir>/security.log, making dir 0700: 0 or -errno with
 * err. max_bytes, security_max_bytes: rotate each past this many bytes (0:
 * AUDIT_MAX_DEFAULT). Until it is opened, records are dropped. */
int audit_open(const char *dir, uint64_t max_bytes, uint64_t security_max_bytes,
	       struct cell_error *err);
/* Write what the budget dropped and close. */
void audit_close(void);
/* policies/audit/budget.json (built-in values when missing); a bad file refuses the start,
 * naming the field. */
int audit_policy_load(struct cell_error *err);
/* The same with a policy given (tests). */
void audit_budget_set(const struct audit_budget_policy *p);
/* Write the summaries of every principal's drops not told yet (the log is being read, or
 * celld stops). */
void audit_flush_drops(void);
/* Whether action's records go to security.log. */
bool audit_action_security(const char *action);
/* One record: {"time", "requestId", "who", "sandbox", "action", ...details} (details is
 * stolen; may be NULL; its keys never replace the first five). The context of the calling
 * thread supplies requestId and who. */
void audit_log(const char *sandbox_id, const char *action, json_t *details);
/* The same with an explicit request id and who (a command ending on another thread). */
void audit_log_as(const char *request_id, const char *who, const char *sandbox_id,
		  const char *action, json_t *details);
/* head (stolen) with the members of extra it lacks, as one JSON line with its "\n"
 * (malloc'd, *len its length; NULL when out of memory); past max bytes, head alone with
 * "truncated": true. The audit log's and the events' lines. */
char *audit_json_line(json_t *head, json_t *extra, size_t flags, size_t max, size_t *len);
/* The line written for a record, with its "\n" (malloc'd; NULL when out of memory). */
char *audit_line(const char *time_text, const char *request_id, const char *who,
		 const char *sandbox_id, const char *action, json_t *details, size_t *len);

/* ---- failed authentication ---- */

/* A request refused 401 on a TCP listener: an auth.failed record (who "anonymous") naming
 * the listener, the client and the request's "METHOD path" (of request, a request line or
 * head: audit_request_text). At most 10 a second for every listener together; those past
 * it are counted into the next record's "suppressedBefore". */
void audit_auth_failed(const char *listener, const char *client, const char *request_id,
		       const char *request, size_t request_len);
/* A client's address as an audit record names it: IPv4, or an IPv6 /64 ("2001:db8::/64"). */
void audit_client_text(const struct sockaddr *sa, char *buf, size_t size);
/* "METHOD path" of a request line (through the first CR or LF of head): the target without
 * its query, bytes outside printable ASCII as '?', cut to size - 1 bytes. Its length. */
size_t audit_request_text(const char *head, size_t len, char *out, size_t size);

/* ---- reading ---- */

/* Read the records of dir (each log's rotated files oldest first, then the live one),
 * skipping lines that are not whole JSON objects (a torn last line): those of sandbox_id
 * (NULL: all), at or after since (0: all), the last `limit` of them (0:
 * AUDIT_READ_LIMIT_MAX), both logs merged by time, then seq. *out: an array, oldest
 * first. Writes the budget's pending summaries first when dir is the open log's. */
int audit_read(const char *dir, const char *sandbox_id, time_t since, size_t limit, json_t **out,
	       struct cell_error *err);
/* Two records' order: by "time", then by "seq" (< 0, 0, > 0). */
int audit_record_cmp(json_t *a, json_t *b);
/* a and b (arrays, each in order) merged in order: the last `limit` records (a new array,
 * NULL when out of memory). */
json_t *audit_merge(json_t *a, json_t *b, size_t limit);
/* The directory audit_open was given (NULL before). */
const char *audit_dir(void);
