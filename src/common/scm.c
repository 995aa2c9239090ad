/* One descriptor sent with a message (cell/scm.h). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "cell/scm.h"

long cell_scm_send_fd(int sock, const struct iovec *iov, int n, int fd, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr msg = {
	    .msg_iov = (struct iovec *)iov,
	    .msg_iovlen = (size_t)n,
	    .msg_control = u.buf,
	    .msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	ssize_t sent;
	do /* MSG_NOSIGNAL: a peer that died must not SIGPIPE the sender */
		sent = sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
	while (sent < 0 && errno == EINTR);
	return sent < 0 ? -errno : (long)sent;
}
