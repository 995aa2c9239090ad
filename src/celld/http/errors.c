/* The errno → {HTTP status, code} table and the two APIs' error bodies (errors.h says who
 * uses them and how). */
#include <errno.h>
#include <stddef.h>

#include "cell/cleanup.h"
#include "errors.h"

/* The host running out of something (fds, memory, uid ranges, disk) is 503: the request
 * was fine and may succeed later; never a client error. A sandbox's own disk quota used up
 * (EDQUOT) is 507: that sandbox cannot store more, whatever the host has. */
static const struct errors_answer table[] = {
    {EINVAL, 400, "INVALID_ARGUMENT"},
    {EISDIR, 400, "INVALID_ARGUMENT"},
    {ENOTDIR, 400, "INVALID_ARGUMENT"},
    {ELOOP, 400, "INVALID_ARGUMENT"},
    {ENAMETOOLONG, 400, "INVALID_ARGUMENT"},
    {EXDEV, 400, "INVALID_ARGUMENT"},
    {EACCES, 403, "FORBIDDEN"},
    {EPERM, 403, "FORBIDDEN"},
    {EROFS, 403, "FORBIDDEN"},
    {ENOENT, 404, "NOT_FOUND"},
    {EBUSY, 409, "CONFLICT"},
    {EEXIST, 409, "CONFLICT"},
    {ENOTEMPTY, 409, "CONFLICT"},
    {EALREADY, 409, "CONFLICT"},
    {EFBIG, 413, "REQUEST_TOO_LARGE"},
    {EUSERS, 429, "QUOTA_EXCEEDED"},
    {ENOSPC, 503, "HOST_OUT_OF_CAPACITY"},
    {EMFILE, 503, "HOST_OUT_OF_CAPACITY"},
    {ENFILE, 503, "HOST_OUT_OF_CAPACITY"},
    {ENOMEM, 503, "HOST_OUT_OF_CAPACITY"},
    {EAGAIN, 503, "HOST_OUT_OF_CAPACITY"},
    {EDQUOT, 507, "INSUFFICIENT_STORAGE"},
};

static const struct errors_answer internal = {0, 500, "INTERNAL"};

const struct errors_answer *errors_lookup(int errnum)
{
	for (size_t i = 0; i < CELL_ARRAY_SIZE(table); i++)
		if (table[i].errnum == errnum)
			return &table[i];
	return &internal;
}

bool errors_host_short(int errnum)
{
	return errors_lookup(errnum)->status == 503;
}

json_t *errors_body_named(unsigned status, const char *code, const char *message)
{
	(void)status;
	return json_pack("{s:s, s:s}", "code", code, "message", message);
}

json_t *errors_body_numbered(unsigned status, const char *code, const char *message)
{
	(void)code;
	return json_pack("{s:i, s:s}", "code", (int)status, "message", message);
}
