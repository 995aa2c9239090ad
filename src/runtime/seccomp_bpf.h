/* seccomp_bpf.c: a libseccomp filter exported as the classic BPF program the runtime
 * installs (struct cell_seccomp_prog), for both compilers: cell's profiles
 * (seccomp_profile.c) and an OCI spec's (seccomp_oci.c). */
#pragma once

#include <seccomp.h>

#include "cell/error.h"
#include "cell/runtime.h"

#define CELL_BPF_INSNS_MAX 4096 /* BPF_MAXINSNS of the kernel */

/* Export sc into out->filter (malloc'd) and out->len. what names the profile in errors. */
int cell_seccomp_export(scmp_filter_ctx sc, const char *what, struct cell_seccomp_prog *out,
			struct cell_error *err);
