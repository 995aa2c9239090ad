/* A streaming multipart/form-data parser (uploads). Pure: unit suites link it alone. */
#pragma once

#include <stddef.h>

#include "cell/error.h"

struct multipart;
struct multipart_ops {
	/* A part starts; name is its Content-Disposition name. */
	int (*part_begin)(void *cls, const char *name);
	int (*part_data)(void *cls, const char *data, size_t len);
	int (*part_end)(void *cls);
};
/* boundary from the Content-Type header (parsed here); NULL with err when unusable. */
struct multipart *multipart_new(const char *content_type, const struct multipart_ops *ops,
				void *cls, struct cell_error *err);
/* Feed body bytes; a callback's negative return stops the parser and is returned. */
int multipart_feed(struct multipart *mp, const char *data, size_t len, struct cell_error *err);
/* The body ended: -EINVAL unless the closing boundary was seen. */
int multipart_finish(struct multipart *mp, struct cell_error *err);
/* The filename="..." of the part being read (valid from its part_begin to the next), as
 * sent (quotes stripped, nothing decoded); "" when the part has none. */
const char *multipart_filename(const struct multipart *mp);
void multipart_free(struct multipart *mp);
