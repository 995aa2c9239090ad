/* A libseccomp filter as a classic BPF program (seccomp_bpf.h). */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/filter.h>

#include "cell/cleanup.h"
#include "seccomp_bpf.h"

int cell_seccomp_export(scmp_filter_ctx sc, const char *what, struct cell_seccomp_prog *out,
			struct cell_error *err)
{
	_cleanup_close_ int fd = memfd_create("cell-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "%s: memfd for the filter", what);
	/* libseccomp 2.5 exports only to an fd. */
	int r = seccomp_export_bpf(sc, fd);
	if (r < 0)
		return cell_err(err, -r, "%s: exporting the filter", what);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return cell_err(err, errno, "%s: exported filter", what);
	size_t n = (size_t)st.st_size / sizeof(struct sock_filter);
	if (!n || n > CELL_BPF_INSNS_MAX || (size_t)st.st_size % sizeof(struct sock_filter))
		return cell_err_msg(err, EINVAL,
				    "%s: compiles to %zu BPF instructions (kernel limit %d)", what,
				    n, CELL_BPF_INSNS_MAX);
	struct sock_filter *f = malloc(st.st_size);
	if (!f)
		return cell_err(err, ENOMEM, "%s", what);
	if (pread(fd, f, st.st_size, 0) != st.st_size) {
		free(f);
		return cell_err(err, EIO, "%s: reading the exported filter", what);
	}
	out->filter = f;
	out->len = (unsigned short)n;
	return 0;
}
