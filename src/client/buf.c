/* Growable byte buffers of the client library. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cell/client.h"

int cell_client_buf_append(struct cell_client_buf *b, const void *data, size_t len, size_t max)
{
	if (len > max || b->len > max - len)
		return -EMSGSIZE;
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + len + 1)
			cap *= 2;
		char *p = realloc(b->data, cap);
		if (!p)
			return -ENOMEM;
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

void cell_client_buf_free(struct cell_client_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
