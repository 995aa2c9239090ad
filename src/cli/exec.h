/* The command options shared by exec and run (-w, -e, -t). */
#pragma once

#include <jansson.h>

#include "client.h"

/* -w DIR, -e K=V, -t SECONDS (optstring "w:e:t:"). */
/* clang-format off */
#define CLI_EXEC_LONGOPTS                                      \
	{"workdir", required_argument, NULL, 'w'},             \
	{"env", required_argument, NULL, 'e'},                 \
	{"timeout", required_argument, NULL, 't'}
/* clang-format on */

/* Handle one of CLI_EXEC_LONGOPTS into req (and envs, req->envs' object): 1 when c was one,
 * 0 when not, -errno (already reported) for a bad value. */
int cli_exec_opt(int c, const char *arg, struct cli_exec_req *req, json_t *envs);
