/* Error reporting of the cell CLI: one line on stderr per failure, "cell: <msg>", with
 * control characters replaced (messages carry text celld or a sandbox chose). */
#pragma once

#include "cell/error.h"

/* Print "cell: <msg>\n" to stderr, control characters replaced. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Usage error: "cell <cmd>: <msg>" then "Try 'cell <cmd> --help'." Returns `code`. */
int cli_error_usage(const char *cmd, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* After getopt_long has printed what was wrong with an option: point at the help. */
int cli_error_option(const char *cmd, int code);
