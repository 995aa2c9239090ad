/* image_events.c: the image store's events (GET /v1/images/events, `cell events --images`):
 * pulls started, each layer fetched or found, pulls done or failed, images imported,
 * committed, tagged and removed, prunes. They are kept as a sandbox's are (events.h), in
 * <images>/.store/.events/events.jsonl, so a follower sees a pull that a create started as
 * well as one of its own, and what happened while it was away (since=SEQ). No event holds a
 * credential. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

/* Append one event (data: an object or NULL, stolen). Dropped before store_init. */
void image_event(const char *type, json_t *data);

/* A pull's layer (index of count, bottom first) that reached the store: fetched (state
 * "done") or found there ("exists"). Bytes moving are for the pull's own listeners only. */
void image_event_layer(const char *reference, const char *digest, unsigned index, unsigned count,
		       const char *state, uint64_t bytes);
