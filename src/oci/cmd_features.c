/* cell-oci features: what this runtime supports, as runtime-spec's features.md shapes it
 * (containerd 2 and dockerd read it at start). It says what the code does, no more: the
 * hooks cell-oci runs, the namespaces it makes or joins, the capabilities libcap knows, the
 * seccomp actions and operators seccomp_oci.c compiles. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/capability.h>

#include <jansson.h>
#include <seccomp.h>

#include "cell/version.h"
#include "commands.h"

static json_t *strings(const char *const *v)
{
	json_t *a = json_array();
	for (; a && *v; v++)
		json_array_append_new(a, json_string(*v));
	return a;
}

static json_t *capabilities(void)
{
	json_t *a = json_array();
	for (cap_value_t c = 0; a && c <= CAP_LAST_CAP; c++) {
		char *name = cap_to_name(c);
		if (!name)
			continue;
		char upper[64];
		size_t i = 0;
		for (; name[i] && i + 1 < sizeof(upper); i++)
			upper[i] =
			    (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32 : name[i]);
		upper[i] = '\0';
		json_array_append_new(a, json_string(upper));
		cap_free(name);
	}
	return a;
}

int oci_cmd_features(const struct oci_cli *cli, int argc, char **argv)
{
	(void)cli;
	(void)argc;
	(void)argv;
	static const char *const hooks[] = {"prestart", "createRuntime", "poststart", "poststop",
					    NULL};
	static const char *const mount_opts[] = {"bind", "rbind", "ro", NULL};
	static const char *const ns[] = {"cgroup", "ipc",  "mount", "network",
					 "pid",	   "user", "uts",   NULL};
	static const char *const actions[] = {
	    "SCMP_ACT_ALLOW",	     "SCMP_ACT_ERRNO",	     "SCMP_ACT_KILL",
	    "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG",
	    "SCMP_ACT_TRACE",	     "SCMP_ACT_TRAP",	     NULL};
	static const char *const ops[] = {"SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT",
					  "SCMP_CMP_LE", "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ",
					  "SCMP_CMP_NE", NULL};
	static const char *const archs[] = {"SCMP_ARCH_X86_64",	 "SCMP_ARCH_X86", "SCMP_ARCH_X32",
					    "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM", NULL};
	static const char *const flags[] = {"SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG",
					    "SECCOMP_FILTER_FLAG_SPEC_ALLOW", NULL};
	const struct scmp_version *v = seccomp_version();
	char lsv[32];
	snprintf(lsv, sizeof(lsv), "%u.%u.%u", v->major, v->minor, v->micro);
	json_t *f = json_pack(
	    "{s:s, s:s, s:o, s:o, s:{s:o, s:o, s:{s:b, s:b, s:b, s:b, s:b}, "
	    "s:{s:b, s:o, s:o, s:o, s:o, s:o}, s:{s:b}, s:{s:b}, s:{s:b}}, "
	    "s:{s:s, s:s, s:s, s:s}}",
	    "ociVersionMin", "1.0.0", "ociVersionMax", "1.2.0", "hooks", strings(hooks),
	    "mountOptions", strings(mount_opts), "linux", "namespaces", strings(ns), "capabilities",
	    capabilities(), "cgroup", "v1", 1, "v2", 1, "systemd", 0, "systemdUser", 0, "rdma", 0,
	    "seccomp", "enabled", 1, "actions", strings(actions), "operators", strings(ops),
	    "archs", strings(archs), "knownFlags", strings(flags), "supportedFlags", json_array(),
	    "apparmor", "enabled", 0, "selinux", "enabled", 0, "intelRdt", "enabled", 0,
	    "annotations", "io.github.cell.version", CELL_VERSION,
	    "io.github.cell.libseccomp.version", lsv, "io.github.cell.userns", "always",
	    "io.github.cell.exec", "relay");
	if (!f)
		return 1;
	json_dumpf(f, stdout, JSON_INDENT(4));
	putchar('\n');
	json_decref(f);
	return 0;
}
