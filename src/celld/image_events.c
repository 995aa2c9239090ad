/* The image store's events (image_events.h). */
#include "events.h"
#include "image_events.h"
#include "image_store.h"

void image_event(const char *type, json_t *data)
{
	int fd = store_fd();
	if (fd < 0) {
		json_decref(data);
		return;
	}
	events_emit_at(fd, STORE_EVENTS_ID, type, data, EVENTS_MAX_BYTES);
}

void image_event_layer(const char *reference, const char *digest, unsigned index, unsigned count,
		       const char *state, uint64_t bytes)
{
	image_event("pull.layer",
		    json_pack("{s:s, s:s, s:I, s:I, s:s, s:I}", "reference", reference, "layer",
			      digest, "index", (json_int_t)index + 1, "count", (json_int_t)count,
			      "state", state, "bytes", (json_int_t)bytes));
}
