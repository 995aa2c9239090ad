/* cell's one error idiom.
 *
 * A function that can fail returns 0 (or a non-negative value) on success and a negative
 * errno on failure, and fills the caller's `struct cell_error` with a message that names
 * what failed (the path, the field, the step). Only the top level logs it, once. */
#pragma once

#include <stdarg.h>
#include <stddef.h>

#define CELL_ERROR_MSG_MAX 512

struct cell_error {
	int code; /* positive errno of the first failure, 0 when none */
	char msg[CELL_ERROR_MSG_MAX];
};

/* Record an error and return -errnum (or -EIO when errnum is 0). When errnum is non-zero
 * ": strerror(errnum)" is appended. Safe with err == NULL. */
int cell_err(struct cell_error *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record an error whose message says it all (no ": strerror" appended) and return -code
 * (-EIO when code is 0). Safe with err == NULL. */
int cell_err_msg(struct cell_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int cell_err_vmsg(struct cell_error *err, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Prefix an existing message with more context ("creating sandbox ab12: " + old). */
int cell_err_wrap(struct cell_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The one way to drop an error on purpose (a best-effort cleanup, a fallback that follows):
 * logs it at debug level with why ("removing a stale socket") and clears err. Passing a
 * NULL cell_error to a function means the same without the log line; both are greppable. */
void cell_err_drop(struct cell_error *err, const char *why);

static inline void cell_err_clear(struct cell_error *err)
{
	if (err) {
		err->code = 0;
		err->msg[0] = '\0';
	}
}
