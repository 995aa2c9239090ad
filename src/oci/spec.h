/* spec.c: an OCI bundle's config.json (runtime-spec 1.0 to 1.2), parsed and validated into
 * the plain types cell-oci turns into the runtime's spawn request.
 *
 * The file comes from whoever wrote the bundle (containerd from a pod spec, dockerd from a
 * docker run, a hand-written test): hostile input. Every string, array and map is bounded;
 * every value is type-checked; a problem is refused with a message naming the field
 * ("process.rlimits[2].type: unknown rlimit 'RLIMIT_FOO'"). Unknown properties are ignored,
 * as the spec requires of runtimes. Capabilities this libcap does not know are dropped
 * with a warning (as runc does), so a newer engine's default set does not stop a
 * container. The seccomp profile, sysctls, annotations and the unified cgroup map are
 * checked for shape here and kept as JSON for the steps that apply them.
 *
 * Pure (jansson and libcap only): unit suites link it alone. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cell/error.h"

#define OCI_SPEC_FILE_MAX (4u << 20) /* bytes of config.json or a process.json */
#define OCI_LIST_MAX	  4096	     /* entries of args, env, mounts, paths, ... */
#define OCI_STRING_MAX	  (64u << 10)
#define OCI_WARNINGS_MAX  8

enum oci_hook_kind {
	OCI_HOOK_PRESTART,
	OCI_HOOK_CREATE_RUNTIME,
	OCI_HOOK_CREATE_CONTAINER,
	OCI_HOOK_START_CONTAINER,
	OCI_HOOK_POSTSTART,
	OCI_HOOK_POSTSTOP,
	OCI_HOOK_KINDS,
};

struct oci_strv {
	char **v; /* NULL-terminated */
	size_t n;
};

struct oci_hook {
	char *path; /* absolute */
	struct oci_strv args, env;
	int timeout; /* seconds; 0: none */
};

struct oci_mount {
	char *destination; /* absolute */
	char *type;	   /* NULL: a bind when the options say so */
	char *source;
	struct oci_strv options;
};

struct oci_idmap {
	uint32_t container_id, host_id, size;
};

struct oci_namespace {
	int flag;   /* CLONE_NEW* */
	char *path; /* join this one; NULL: a new one */
};

struct oci_rlimit {
	int resource; /* RLIMIT_* */
	uint64_t soft, hard;
};

/* Capability sets as bit masks (bit n: capability n). */
struct oci_caps {
	bool given; /* process.capabilities was present */
	uint64_t bounding, effective, inheritable, permitted, ambient;
};

struct oci_process {
	bool terminal;
	unsigned rows, cols; /* consoleSize; 0: not given */
	uint32_t uid, gid;
	bool has_umask;
	uint32_t umask;
	uint32_t *additional_gids;
	size_t n_additional_gids;
	struct oci_strv args, env;
	char *cwd; /* absolute */
	struct oci_caps caps;
	struct oci_rlimit *rlimits;
	size_t n_rlimits;
	bool no_new_privileges;
	bool has_oom_score_adj;
	int oom_score_adj;
	char *apparmor_profile, *selinux_label; /* accepted, not applied: cell-oci says so */
};

struct oci_device {
	char type; /* 'c', 'b', 'u' or 'p' */
	char *path;
	int64_t major, minor;
	bool has_mode, has_uid, has_gid;
	uint32_t mode, uid, gid;
};

struct oci_device_rule {
	bool allow;
	char type;	      /* 'a', 'c' or 'b' */
	int64_t major, minor; /* -1: any */
	char access[4];	      /* of "rwm" */
};

/* linux.resources: a value's has_ flag says whether it was given. */
struct oci_resources {
	bool has_memory_limit, has_memory_reservation, has_memory_swap;
	int64_t memory_limit, memory_reservation, memory_swap; /* bytes; -1: unlimited */
	bool has_cpu_shares, has_cpu_quota, has_cpu_period;
	uint64_t cpu_shares, cpu_period;
	int64_t cpu_quota; /* µs per period; -1: unlimited */
	char *cpus, *mems;
	bool has_pids_limit;
	int64_t pids_limit; /* <= 0: unlimited */
	bool has_blkio_weight;
	uint16_t blkio_weight;
	struct oci_device_rule *devices;
	size_t n_devices;
	json_t *unified; /* object of string values, or NULL */
};

struct oci_spec {
	char *oci_version;
	char *root_path; /* relative to the bundle or absolute */
	bool root_readonly;
	struct oci_process process;
	bool has_process;
	char *hostname, *domainname;
	struct oci_mount *mounts;
	size_t n_mounts;
	struct oci_hook *hooks[OCI_HOOK_KINDS];
	size_t n_hooks[OCI_HOOK_KINDS];
	json_t *annotations; /* object of string values, or NULL */
	/* linux */
	struct oci_namespace *namespaces;
	size_t n_namespaces;
	struct oci_idmap *uid_mappings, *gid_mappings;
	size_t n_uid_mappings, n_gid_mappings;
	struct oci_device *devices;
	size_t n_devices;
	char *cgroups_path;
	struct oci_resources resources;
	json_t *sysctl;	 /* object of string values, or NULL */
	json_t *seccomp; /* the spec's profile as given, or NULL */
	char *rootfs_propagation;
	struct oci_strv masked_paths, readonly_paths;
	char *warnings[OCI_WARNINGS_MAX]; /* what was accepted but dropped, for the log */
	size_t n_warnings;
};

/* Parse the text of a config.json. 0 with *out set, or -EINVAL (-ENOMEM, -E2BIG) with err
 * naming the field. */
int oci_spec_parse(const char *text, size_t len, struct oci_spec **out, struct cell_error *err);
void oci_spec_free(struct oci_spec *s);

/* Parse a process object alone (exec --process FILE): the same rules as config.json's
 * "process". warnings (may be NULL) collects what was dropped. */
int oci_process_parse(const char *text, size_t len, struct oci_process *out,
		      struct oci_spec *warnings, struct cell_error *err);
void oci_process_clear(struct oci_process *p);

/* The namespace of type flag (CLONE_NEW*) in s, or NULL when the spec asks for none. */
const struct oci_namespace *oci_spec_namespace(const struct oci_spec *s, int flag);
