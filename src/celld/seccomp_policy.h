/* seccomp_policy.c: policies/seccomp/<name>.json, compiled at start */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "cell/error.h"
#include "cell/seccomp.h"

/* Load, validate and compile every profile (default.json is required); a bad profile
 * refuses the start, naming file and field. */
int seccomp_policies_load(struct cell_error *err);
bool seccomp_policy_exists(const char *name);
/* The compiled program (with a notification listener when log), or NULL when unknown. */
const struct cell_seccomp_prog *seccomp_policy_prog(const char *name, bool log);
const struct cell_seccomp_profile *seccomp_policy_profile(const char *name);
/* "default, strict" into buf, for error messages. */
void seccomp_policy_names(char *buf, size_t size);
