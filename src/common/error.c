#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cell/error.h"
#include "cell/log.h"

int cell_err(struct cell_error *err, int errnum, const char *fmt, ...)
{
	if (errnum < 0)
		errnum = -errnum;
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
		if (errnum && n >= 0 && (size_t)n < sizeof(err->msg))
			snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(errnum));
		err->code = errnum ? errnum : EIO;
	}
	return -(errnum ? errnum : EIO);
}

int cell_err_vmsg(struct cell_error *err, int code, const char *fmt, va_list ap)
{
	if (code < 0)
		code = -code;
	if (!code)
		code = EIO;
	if (err) {
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		err->code = code;
	}
	return -code;
}

int cell_err_msg(struct cell_error *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = cell_err_vmsg(err, code, fmt, ap);
	va_end(ap);
	return r;
}

int cell_err_wrap(struct cell_error *err, const char *fmt, ...)
{
	if (!err)
		return -EIO;
	char prefix[CELL_ERROR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	char old[CELL_ERROR_MSG_MAX];
	memcpy(old, err->msg, sizeof(old));
	size_t plen = strnlen(prefix, sizeof(err->msg) - 1);
	memcpy(err->msg, prefix, plen);
	size_t olen = strnlen(old, sizeof(old));
	if (olen > sizeof(err->msg) - 1 - plen)
		olen = sizeof(err->msg) - 1 - plen;
	memcpy(err->msg + plen, old, olen);
	err->msg[plen + olen] = '\0';
	if (!err->code)
		err->code = EIO;
	return -err->code;
}

void cell_err_drop(struct cell_error *err, const char *why)
{
	if (!err || !err->code)
		return;
	log_debug("%s (ignored): %s", why, err->msg);
	cell_err_clear(err);
}
