/* A connection to a port inside a sandbox's network namespace (portconn.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "network.h"
#include "portconn.h"

struct ns_socket {
	int nsfd, fd, err;
};

/* A thread of its own enters the namespace and ends there: the caller's thread never
 * leaves celld's. */
static void *ns_socket_thread(void *arg)
{
	struct ns_socket *n = arg;
	if (setns(n->nsfd, CLONE_NEWNET) < 0) {
		n->err = errno;
		return NULL;
	}
	n->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (n->fd < 0)
		n->err = errno;
	return NULL;
}

static int socket_in(int nsfd, struct cell_error *err)
{
	struct ns_socket n = {.nsfd = nsfd, .fd = -1};
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64u << 10);
	int r = pthread_create(&t, &attr, ns_socket_thread, &n);
	pthread_attr_destroy(&attr);
	if (r)
		return cell_err(err, r, "starting a thread to enter the sandbox's network");
	pthread_join(t, NULL);
	if (n.fd < 0)
		return cell_err(err, n.err, "a socket in the sandbox's network namespace");
	return n.fd;
}

/* poll fd for events for at most ms: 1 ready, 0 timed out, -errno. */
static int wait_fd(int fd, short events, int ms)
{
	struct pollfd pfd = {.fd = fd, .events = events};
	for (;;) {
		int r = poll(&pfd, 1, ms);
		if (r >= 0)
			return r;
		if (errno != EINTR)
			return -errno;
	}
}

int portconn_open(struct sandbox *sb, unsigned port, struct cell_error *err)
{
	_cleanup_close_ int ns = network_open_netns(sb, err);
	if (ns < 0)
		return ns;
	_cleanup_close_ int fd = socket_in(ns, err);
	if (fd < 0)
		return fd;
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno != EINPROGRESS)
			return cell_err(err, errno, "connecting to port %u", port);
		int r = wait_fd(fd, POLLOUT, PORTCONN_CONNECT_MS);
		if (r == 0)
			return cell_err(err, ETIMEDOUT, "connecting to port %u", port);
		int soerr = 0;
		socklen_t len = sizeof(soerr);
		if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
			return cell_err(err, r < 0 ? -r : errno, "connecting to port %u", port);
		if (soerr)
			return cell_err(err, soerr, "connecting to port %u", port);
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return move_fd(fd);
}
