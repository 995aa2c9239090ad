/* Output helpers of the cell CLI: pretty JSON, text made safe for a terminal, human sizes.
 *
 * Everything the CLI receives from celld is untrusted text: server messages are stripped of
 * control characters before they reach the terminal (escape sequences in an error message
 * must not be able to rewrite the user's screen). Command output is the exception: it is
 * written byte-exact, because that is what `cell run` promises. */
#pragma once

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

/* Print JSON pretty (2-space indent) to stdout, with a trailing newline. */
int cli_output_json(json_t *j);

/* Write text to f with every control character (other than \n and \t) replaced by '?'. */
void cli_output_safe(const char *s, FILE *f);

/* Human size: "1.2 GiB". */
void cli_output_size(unsigned long long n, char *buf, size_t size);
