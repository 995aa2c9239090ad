/* Passing one file descriptor over a Unix socket (SCM_RIGHTS), between celld and the child
 * it clones. Stack buffers and system calls only: the child may call these (internal.h). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "cell/scm.h"
#include "internal.h"

int cell_send_fd(int sock, int fd)
{
	char byte = 0;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	long n = cell_scm_send_fd(sock, &iov, 1, fd, 0);
	return n < 0 ? (int)n : 0;
}

int cell_recv_fd(int sock, int *fd)
{
	char byte;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = {
	    .msg_iov = &iov,
	    .msg_iovlen = 1,
	    .msg_control = u.buf,
	    .msg_controllen = sizeof(u.buf),
	};
	ssize_t n;
	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE; /* the parent gave up (or died): nothing to wait for */
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(sizeof(int)))
		return -EPROTO;
	memcpy(fd, CMSG_DATA(c), sizeof(int));
	return 0;
}
