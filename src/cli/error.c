/* Error reporting of the cell CLI. */
#include <stdarg.h>
#include <stdio.h>

#include "error.h"
#include "output.h"

void cli_error(const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fputs("cell: ", stderr);
	cli_output_safe(msg, stderr);
	fputc('\n', stderr);
}

int cli_error_usage(const char *cmd, int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "cell %s: ", cmd);
	cli_output_safe(msg, stderr);
	fprintf(stderr, "\nTry 'cell %s --help'.\n", cmd);
	return code;
}

int cli_error_option(const char *cmd, int code)
{
	fprintf(stderr, "Try 'cell %s --help'.\n", cmd);
	return code;
}
