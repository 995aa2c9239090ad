/* Creating a sandbox (POST /v1/sandboxes): shared by create, run and selftest. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cell/error.h"

struct cli_create_opts {
	const char *image;   /* NULL: "default" */
	const char *session; /* extensions["cell.sessionKey"] */
	json_t
	    *volumes; /* cli_parse_volume's: host {"host","dest",..} or named {"pvc",..}; or NULL */
	json_t *env;  /* object, or NULL */
	long long timeout_s; /* sandbox lifetime; 0: none */
	const char *seccomp; /* extensions["cell.seccomp"]; NULL: celld's default */
	bool seccomp_log;    /* extensions["cell.seccompLog"] */
};

/* --seccomp NAME and --seccomp-log of create and run. */
enum { CLI_OPT_SECCOMP = 0x1100, CLI_OPT_SECCOMP_LOG };
/* clang-format off */
#define CLI_SECCOMP_LONGOPTS                                           \
	{"seccomp", required_argument, NULL, CLI_OPT_SECCOMP},         \
	{"seccomp-log", no_argument, NULL, CLI_OPT_SECCOMP_LOG}
/* clang-format on */
/* Handle one of CLI_SECCOMP_LONGOPTS into o: true when c was one. */
bool cli_create_seccomp_opt(int c, const char *arg, struct cli_create_opts *o);

/* POST /v1/sandboxes; on success the new (or resumed) sandbox's id is in id[] and its JSON
 * in *out (may be NULL). */
int cli_create_sandbox(const struct cli_create_opts *o, char *id, size_t id_size, json_t **out,
		       struct cell_error *err);
