/* audit.c: celld's audit log, append-only JSON lines under <state>/audit/ (dir 0700, files
 * 0600): one line per lifecycle change, command, file change and network decision, with
 * the time, the request id, who asked ("unix" for the Unix socket, an API key's id, never
 * the key) and the sandbox. Each line goes out in one write(2) on an O_APPEND descriptor,
 * so a crash mid-write leaves at most a torn last line, which the reader skips (and the
 * next open ends with a newline first). Past max bytes the log is rotated: audit.log →
 * audit.log.1 … .AUDIT_KEEP (the oldest dropped).
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

#define AUDIT_FILE	     "audit.log"
#define AUDIT_KEEP	     4		 /* rotated files kept: audit.log.1 … .4 */
#define AUDIT_MAX_DEFAULT    (16u << 20) /* bytes of audit.log before it is rotated */
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

/* Open (create) <dir>/audit.log, making dir 0700: 0 or -errno with err. max_bytes: rotate
 * past this many bytes (0: AUDIT_MAX_DEFAULT). Until it is opened, records are dropped. */
int audit_open(const char *dir, uint64_t max_bytes, struct cell_error *err);
void audit_close(void);
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

/* Read the records of dir (rotated files oldest first, then audit.log), skipping lines
 * that are not whole JSON objects (a torn last line): those of sandbox_id (NULL: all), at
 * or after since (0: all), the last `limit` of them (0: AUDIT_READ_LIMIT_MAX). *out: an
 * array, oldest first. */
int audit_read(const char *dir, const char *sandbox_id, time_t since, size_t limit, json_t **out,
	       struct cell_error *err);
/* The directory audit_open was given (NULL before). */
const char *audit_dir(void);
