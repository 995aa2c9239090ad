/* seccomp profiles: the JSON files of policies/seccomp/ (format in cell-policy(5)), validated
 * strictly and compiled with libseccomp into the classic BPF program the runtime installs
 * last before exec (struct cell_seccomp_prog, cell/runtime.h).
 *
 * A profile is a denylist over "allow": each rule names syscalls, an errno and why, and may
 * restrict the rule to argument values. Denied calls always fail with an errno, never kill,
 * so programs degrade gracefully. Calls of a foreign ABI (i386 and x32 on x86_64) and
 * syscalls newer than the libseccomp celld was built with are denied as the profile says.
 *
 * celld compiles each profile twice: plain (denied calls fail in the kernel), and for
 * logging, where every rule marked "log" becomes a user notification that celld answers
 * with the rule's errno (cell_seccomp_profile_errno) after recording the call. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cell/error.h"
#include "cell/runtime.h"

#define CELL_SECCOMP_NAME_MAX 32	   /* profile names: [a-z0-9][a-z0-9_-]* */
#define CELL_SECCOMP_FILE_MAX (256u << 10) /* bytes of one profile file */

struct cell_seccomp_profile;

/* A name a profile may have (and a create may ask for). */
bool cell_seccomp_name_valid(const char *name);

/* Parse and validate the text of a profile. file names it in messages ("default.json");
 * name is the name the profile must declare (its file name without .json), or NULL. Every
 * problem is refused, with err naming the file and the field:
 * "default.json: rules[3].args[0].op: unknown op 'foo' (eq, in, masked_eq, has_any, not_in)". */
int cell_seccomp_profile_parse(const char *file, const char *name, const char *text, size_t len,
			       struct cell_seccomp_profile **out, struct cell_error *err);
void cell_seccomp_profile_free(struct cell_seccomp_profile *p);
const char *cell_seccomp_profile_name(const struct cell_seccomp_profile *p);

/* Compile p for the native architecture. With notify, rules marked "log" (and the foreign
 * ABI and newer-syscall rules when they log) answer through a user-notification listener;
 * the others stay plain errno. out->filter is malloc'd: free with cell_seccomp_prog_free. */
int cell_seccomp_compile(const struct cell_seccomp_profile *p, bool notify,
			 struct cell_seccomp_prog *out, struct cell_error *err);
void cell_seccomp_prog_free(struct cell_seccomp_prog *prog);

/* The errno p gives a call (arch: AUDIT_ARCH_*, as in struct seccomp_data), evaluated
 * exactly as the compiled filter does; 0 when p allows it. */
int cell_seccomp_profile_errno(const struct cell_seccomp_profile *p, uint32_t arch, int nr,
			       const uint64_t args[6]);

/* "x86_64", "x86", "x32", ... for an AUDIT_ARCH_* value; "unknown" otherwise. */
const char *cell_seccomp_arch_name(uint32_t arch);
/* The name of syscall nr of arch into buf ("#<nr>" when libseccomp does not know it). */
void cell_seccomp_syscall_name(uint32_t arch, int nr, char *buf, size_t size);

/* What compiling an OCI profile left out, for the caller's log. */
struct cell_seccomp_oci_report {
	unsigned unknown_syscalls; /* names this libseccomp does not know: left out */
	char first_unknown[48];	   /* the first of them */
	unsigned ignored_flags;	   /* flags (TSYNC, LOG, SPEC_ALLOW...) with no effect here */
};

/* Compile an OCI runtime spec's seccomp profile (config.json's linux.seccomp: defaultAction,
 * defaultErrnoRet, architectures, flags, syscalls with names, action, errnoRet and args)
 * for the native architecture and those it lists (seccomp_oci.c says how it reads them).
 * Every problem is refused, with err naming the field. out->filter is malloc'd: free with
 * cell_seccomp_prog_free. rep may be NULL. */
int cell_seccomp_compile_oci(const json_t *profile, struct cell_seccomp_prog *out,
			     struct cell_seccomp_oci_report *rep, struct cell_error *err);
