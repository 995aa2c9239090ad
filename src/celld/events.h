/* events.c: a sandbox's events (GET /v1/sandboxes/{id}/events): state transitions, OOM
 * kills, network and seccomp denials, and whatever provisioning reports (startup script,
 * skills). Each is one JSON line {"seq", "time" (RFC 3339, ms), "type", ...data} appended
 * to <state>/sandboxes/<id>/events.jsonl (0600) in one write(2); past EVENTS_MAX_BYTES the
 * file is rotated to events.jsonl.1 (one kept). seq grows by one per event of a sandbox,
 * across rotations and celld restarts. Live readers (events_wait) are woken by every
 * event.
 *
 * Events are addressed by the sandbox's id under a sandboxes dir (celld's, or a test's), so
 * any layer may emit them without holding the sandbox; an event for a sandbox whose dir is
 * gone is dropped. Never put a secret or an environment value in one. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define EVENTS_FILE	 "events.jsonl"
#define EVENTS_MAX_BYTES (1u << 20)
#define EVENTS_LINE_MAX	 (16u << 10) /* data of a larger event is dropped ("truncated") */

/* Append an event for sandbox id (data: an object or NULL, stolen; its seq, time and type
 * keys are ignored) under celld's sandboxes dir. Returns its seq, or 0 when dropped. */
uint64_t events_emit(const char *id, const char *type, json_t *data);
/* The same under the dir open at sandboxes_fd, rotating past max_bytes (tests). */
uint64_t events_emit_at(int sandboxes_fd, const char *id, const char *type, json_t *data,
			uint64_t max_bytes);
/* The OOM kills of sandbox id's cgroup (cgroup_rel) since the last look: an "oom" event
 * with the count when it grew. The first look for a sandbox in this process only notes the
 * count. */
void events_check_oom(const char *id, const char *cgroup_rel);
/* The same with the count already read (total: its cgroup's OOM kills so far), for a
 * path that reads the cgroup's usage anyway. */
void events_oom_count(const char *id, uint64_t total);
/* Forget what this process keeps for id (its next seq, its OOM count): it was deleted. */
void events_forget(const char *id);

/* ---- readers ---- */

/* How many events were emitted so far (by anyone): a reader waits for it to change. */
uint64_t events_generation(void);
/* Wait up to timeout_ms for the generation to move past gen. */
void events_wait(uint64_t gen, int timeout_ms);

/* A reader's place in a sandbox's events: the last seq it has, the file it reads. */
struct events_cursor {
	int sandboxes_fd;
	char id[80];
	uint64_t last; /* events with seq > last are still to come */
	int fd;	       /* events.jsonl as opened (it may have been rotated since); -1 */
	uint64_t off;  /* bytes of fd read (whole lines) */
	bool started;  /* events.jsonl.1 was read */
};
void events_cursor_init(struct events_cursor *c, int sandboxes_fd, const char *id, uint64_t since);
void events_cursor_close(struct events_cursor *c);
/* Append to *out (a malloc'd buffer of *len bytes, grown) every whole event after c->last,
 * as server-sent events ("id: N\nevent: TYPE\ndata: {...}\n\n"), and move c on. Returns how
 * many, or -ENOMEM. */
int events_cursor_read(struct events_cursor *c, char **out, size_t *len);
/* One server-sent event for line (a JSON object with seq and type) onto *out. */
int events_sse_append(const char *line, size_t n, char **out, size_t *len);
