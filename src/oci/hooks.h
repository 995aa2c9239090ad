/* hooks.c: the spec's hooks run on the host, each fed the container's state on stdin
 * (runtime-spec config.md, "POSIX-platform Hooks"): prestart and createRuntime once the
 * container's namespaces exist (after cell_spawn, before the process starts),
 * poststart after start, poststop at delete. createContainer and startContainer, which
 * the spec runs inside the container's mount namespace, are refused at create. */
#pragma once

#include <jansson.h>

#include "cell/error.h"
#include "spec.h"

/* Run the hooks of kind in order, each with state (the state JSON) on stdin and its own
 * timeout (default 30 s); the first failure stops them, err naming it. */
int oci_hooks_run(const struct oci_spec *s, enum oci_hook_kind kind, const json_t *state,
		  struct cell_error *err);
/* Kinds cell-oci cannot run: -EINVAL naming the first one the spec has. */
int oci_hooks_check(const struct oci_spec *s, struct cell_error *err);
