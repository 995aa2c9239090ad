/* The errno → {HTTP status, code} table (errors.h says who uses it and how). */
#include <errno.h>
#include <stddef.h>

#include "cell/cleanup.h"
#include "errors.h"

/* The host running out of something (fds, memory, uid ranges, disk) is 503, never a client
 * error. */
static const struct errors_answer table[] = {
    {ENOSPC, 503, "HOST_OUT_OF_CAPACITY"},
    {EMFILE, 503, "HOST_OUT_OF_CAPACITY"},
    {ENFILE, 503, "HOST_OUT_OF_CAPACITY"},
    {ENOMEM, 503, "HOST_OUT_OF_CAPACITY"},
    {EAGAIN, 503, "HOST_OUT_OF_CAPACITY"},
    {EINVAL, 400, "INVALID_ARGUMENT"},
    {EBUSY, 409, "CONFLICT"},
    {EEXIST, 409, "CONFLICT"},
    {EFBIG, 413, "REQUEST_TOO_LARGE"},
    {EUSERS, 429, "QUOTA_EXCEEDED"},
};

static const struct errors_answer internal = {0, 500, "INTERNAL"};

const struct errors_answer *errors_lookup(int errnum)
{
	for (size_t i = 0; i < CELL_ARRAY_SIZE(table); i++)
		if (table[i].errnum == errnum)
			return &table[i];
	return &internal;
}
