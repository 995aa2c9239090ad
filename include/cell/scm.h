/* One file descriptor sent with a message on a Unix socket (SCM_RIGHTS): the one way the
 * runtime hands mounts to its child, cell-init hands a terminal's master to cell-oci, and
 * cell-oci hands it to an engine's console socket. Stack buffers and system calls only, so
 * a cloned child may call it. */
#pragma once

#include <sys/uio.h>

/* sendmsg of iov (n of them) carrying fd, EINTR retried, MSG_NOSIGNAL plus flags: the bytes
 * sent, or -errno. */
long cell_scm_send_fd(int sock, const struct iovec *iov, int n, int fd, int flags);
