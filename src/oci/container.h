/* container.c: what every command after create does first: the root opened, the
 * container's directory opened and locked, its state.json read. */
#pragma once

#include "cli.h"
#include "spec.h"
#include "state.h"

struct oci_container {
	int rootfd, dirfd;
	struct oci_state st;
};

/* 0, or -errno with err naming the container ("container x does not exist"). */
int oci_container_load(const struct oci_cli *cli, const char *id, struct oci_container *c,
		       struct cell_error *err);
void oci_container_close(struct oci_container *c);
/* A bundle's config.json, read and parsed (errors name the file). */
int oci_bundle_spec(const char *bundle, struct oci_spec **out, struct cell_error *err);
/* The spec of the container's bundle, read again (hooks at start and delete). */
/* Hooks after the fact (poststart, poststop): a failure is logged and the lifecycle goes
 * on, as runtime-spec says; the bundle's spec is read again for them. */
void oci_container_hooks(const struct oci_container *c, enum oci_hook_kind kind);
/* The cgroup backend, with containers' cgroups at their specs' paths (no nesting). */
struct cell_cgroup_ops;
const struct cell_cgroup_ops *oci_cgroups(struct cell_error *err);
int oci_container_spec(const struct oci_container *c, struct oci_spec **out,
		       struct cell_error *err);
