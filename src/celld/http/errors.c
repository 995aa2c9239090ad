/* The errno → {HTTP status, code, RPC code} table and the two APIs' error bodies (errors.h says who
 * uses them and how). */
#include <errno.h>
#include <stddef.h>

#include "cell/cleanup.h"
#include "errors.h"

/* The host running out of something (fds, memory, uid ranges, disk) is 503: the request
 * was fine and may succeed later; never a client error. A sandbox's own disk quota used up
 * (EDQUOT) is 507: that sandbox cannot store more, whatever the host has. The last rows are
 * finer for RPC only: the HTTP APIs name no answer of their own for them, and a process
 * that is gone or a timeout on the way to cell-init stays their 500 INTERNAL. */
static const struct errors_answer table[] = {
    {EINVAL, 400, "INVALID_ARGUMENT", "invalid_argument"},
    {EISDIR, 400, "INVALID_ARGUMENT", "invalid_argument"},
    {ENOTDIR, 400, "INVALID_ARGUMENT", "invalid_argument"},
    {ELOOP, 400, "INVALID_ARGUMENT", "invalid_argument"},
    {ENAMETOOLONG, 400, "INVALID_ARGUMENT", "invalid_argument"},
    {EXDEV, 400, "INVALID_ARGUMENT", "invalid_argument"},
    /* The image cannot run what was asked of it (the code interpreter without python3). */
    {ENOEXEC, 400, "INVALID_ARGUMENT", "failed_precondition"},
    {EACCES, 403, "FORBIDDEN", "permission_denied"},
    {EPERM, 403, "FORBIDDEN", "permission_denied"},
    {EROFS, 403, "FORBIDDEN", "permission_denied"},
    {ENOENT, 404, "NOT_FOUND", "not_found"},
    {EBUSY, 409, "CONFLICT", "unavailable"},
    {EEXIST, 409, "CONFLICT", "already_exists"},
    {ENOTEMPTY, 409, "CONFLICT", "invalid_argument"},
    {EALREADY, 409, "CONFLICT", "failed_precondition"},
    {EFBIG, 413, "REQUEST_TOO_LARGE", "resource_exhausted"},
    {EUSERS, 429, "QUOTA_EXCEEDED", "resource_exhausted"},
    {ENOSPC, 503, "HOST_OUT_OF_CAPACITY", "resource_exhausted"},
    {EMFILE, 503, "HOST_OUT_OF_CAPACITY", "resource_exhausted"},
    {ENFILE, 503, "HOST_OUT_OF_CAPACITY", "resource_exhausted"},
    {ENOMEM, 503, "HOST_OUT_OF_CAPACITY", "resource_exhausted"},
    {EAGAIN, 503, "HOST_OUT_OF_CAPACITY", "unavailable"},
    {EDQUOT, 507, "INSUFFICIENT_STORAGE", "resource_exhausted"},
    {ESRCH, 500, "INTERNAL", "not_found"},
    {E2BIG, 500, "INTERNAL", "resource_exhausted"},
    {ETIMEDOUT, 500, "INTERNAL", "deadline_exceeded"},
    {EPIPE, 500, "INTERNAL", "failed_precondition"},
};

static const struct errors_answer internal = {0, 500, "INTERNAL", "internal"};

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
