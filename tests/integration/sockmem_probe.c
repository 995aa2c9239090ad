/* sockmem_probe: a static helper run inside a sandbox by it_limits. It fills socket buffers
 * that nobody reads and reports how much the kernel let it queue, so that the test can hold
 * the total against the sandbox's memory limit:
 *
 *   sockmem_probe tcp|udp|unix TARGET_BYTES
 *
 * tcp:  loopback connections (client and server end both in this process) with the largest
 *       send and receive buffers the host allows; the client writes until the kernel takes
 *       no more, the server end never reads.
 * udp:  loopback receivers with the largest receive buffer, each sent datagrams until its
 *       queue is full; nobody reads.
 * unix: stream socketpairs; one end writes until its send buffer is full, the other never
 *       reads.
 *
 * It stops once TARGET_BYTES are held (the caller keeps that far below the host's socket
 * memory thresholds) or when new sockets stop gaining (STARVED). Every socket is non-blocking, and
 * every wait is bounded, so nothing hangs. After each socket it prints one line
 *
 *   sockets N payload BYTES mem BYTES
 *
 * (payload: bytes queued and unread, from SIOCOUTQ/SIOCINQ, or datagrams × size for udp;
 * mem: the memory the sockets hold, from SO_MEMINFO), so that a kill for memory still
 * leaves the last reading behind, and "end target" (TARGET_BYTES held), "end refused"
 * (new sockets got nothing more) or "end stopped" (out of sockets or a failed step). Exit 0 unless
 * a setup step failed. */
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/sockios.h>

#ifndef SO_MEMINFO
#define SO_MEMINFO 55
#endif
/* The indices of SO_MEMINFO's answer (linux/sock_diag.h). */
enum {
	MI_RMEM_ALLOC,
	MI_RCVBUF,
	MI_WMEM_ALLOC,
	MI_SNDBUF,
	MI_FWD_ALLOC,
	MI_WMEM_QUEUED,
	MI_OPTMEM,
	MI_BACKLOG,
	MI_DROPS,
	MI_VARS
};

#define MAX_SOCKETS 4000
#define CHUNK	    65536
#define DGRAM	    65000      /* below loopback's MTU: one skb per datagram */
#define BUF_WANT    (64 << 20) /* asked for; the kernel caps it at net.core.[rw]mem_max */
#define STALL_MS    200	       /* a socket that gains nothing for this long is full */
/* A socket that gains less than this was refused buffers: the kernel still lets each new
 * socket queue a little (TCP forces its first few KiB), so "nothing" never comes. A few in
 * a row mean the limit is reached. */
#define STARVED	  (64 << 10)
#define STARVED_N 3

static char chunk[CHUNK];
static int fds[MAX_SOCKETS];
static size_t n_fds;
static uint64_t payload, mem;
static int starved;
static const char *why = "stopped"; /* why the run ended */

/* Whether the last socket's gain ends the run. */
static bool refused(uint64_t gain)
{
	starved = gain < STARVED ? starved + 1 : 0;
	if (starved == STARVED_N)
		why = "refused";
	return starved == STARVED_N;
}

static void fail(const char *what)
{
	printf("error %s: %s\n", what, strerror(errno));
	exit(1);
}

static int keep(int fd)
{
	if (fd < 0)
		fail("socket");
	if (n_fds == MAX_SOCKETS) {
		errno = EMFILE;
		fail("too many sockets");
	}
	fds[n_fds++] = fd;
	return fd;
}

static void set_buf(int fd, int opt)
{
	int v = BUF_WANT;
	setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
}

/* The memory a socket holds: received and unread, queued to send, and its forward
 * allocation (charged already, not yet used). */
static uint64_t held(int fd)
{
	uint32_t mi[MI_VARS] = {0};
	socklen_t len = sizeof(mi);
	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mi, &len) < 0)
		return 0;
	return (uint64_t)mi[MI_RMEM_ALLOC] + mi[MI_WMEM_QUEUED] + mi[MI_FWD_ALLOC] +
	       (mi[MI_WMEM_QUEUED] ? 0 : mi[MI_WMEM_ALLOC]);
}

static uint64_t ioctl_bytes(int fd, unsigned long req)
{
	int v = 0;
	return ioctl(fd, req, &v) == 0 && v > 0 ? (uint64_t)v : 0;
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Write into fd until it takes nothing more for STALL_MS or the target is reached;
 * returns the bytes written. */
static uint64_t fill_stream(int fd, uint64_t room)
{
	uint64_t sent = 0;
	long last = now_ms();
	while (sent < room && now_ms() - last < STALL_MS) {
		size_t n = room - sent < CHUNK ? (size_t)(room - sent) : CHUNK;
		ssize_t w = send(fd, chunk, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w > 0) {
			sent += (uint64_t)w;
			last = now_ms();
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS &&
		    errno != ENOMEM)
			break;
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		poll(&p, 1, 20);
	}
	return sent;
}

static void report(void)
{
	printf("sockets %zu payload %llu mem %llu\n", n_fds, (unsigned long long)payload,
	       (unsigned long long)mem);
	fflush(stdout);
}

static int tcp_listener(struct sockaddr_in *addr)
{
	int l = keep(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	socklen_t len = sizeof(*addr);
	*addr =
	    (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	set_buf(l, SO_RCVBUF); /* accepted sockets inherit it */
	if (bind(l, (struct sockaddr *)addr, len) < 0 || listen(l, 64) < 0 ||
	    getsockname(l, (struct sockaddr *)addr, &len) < 0)
		fail("listen");
	return l;
}

static int tcp_accept(int l)
{
	struct pollfd p = {.fd = l, .events = POLLIN};
	for (int i = 0; i < 50; i++) {
		int s = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (s >= 0)
			return s;
		if (errno != EAGAIN)
			return -1;
		poll(&p, 1, 20);
	}
	return -1;
}

static void run_tcp(uint64_t target)
{
	struct sockaddr_in addr;
	int l = tcp_listener(&addr);
	while (payload < target && n_fds + 2 <= MAX_SOCKETS) {
		int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c < 0)
			break; /* out of memory or files: as far as it goes */
		keep(c);
		set_buf(c, SO_SNDBUF);
		if (connect(c, (struct sockaddr *)&addr, sizeof(addr)) < 0 && errno != EINPROGRESS)
			break;
		int s = tcp_accept(l);
		if (s < 0)
			break;
		keep(s);
		uint64_t got = fill_stream(c, target - payload);
		/* What stays queued: unsent or unacknowledged at the client, unread at the
		 * server. */
		uint64_t queued = ioctl_bytes(c, SIOCOUTQ) + ioctl_bytes(s, SIOCINQ);
		payload += queued;
		mem += held(c) + held(s);
		report();
		if (refused(got))
			break;
	}
}

static void run_udp(uint64_t target)
{
	int tx = keep(socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	while (payload < target && n_fds < MAX_SOCKETS) {
		int rx = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (rx < 0)
			break;
		keep(rx);
		set_buf(rx, SO_RCVBUF);
		struct sockaddr_in addr = {.sin_family = AF_INET,
					   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t len = sizeof(addr);
		if (bind(rx, (struct sockaddr *)&addr, len) < 0 ||
		    getsockname(rx, (struct sockaddr *)&addr, &len) < 0)
			fail("bind");
		/* Loopback delivers before sendto returns: a datagram that did not raise the
		 * receiver's memory was dropped, and a few drops in a row mean it is full. */
		uint64_t before = held(rx), got = 0;
		for (int drops = 0; drops < 3 && payload + got < target;) {
			if (sendto(tx, chunk, DGRAM, MSG_DONTWAIT, (struct sockaddr *)&addr, len) <
			    0) {
				if (errno != EAGAIN && errno != ENOBUFS && errno != ENOMEM)
					fail("sendto");
				struct pollfd p = {.fd = tx, .events = POLLOUT};
				poll(&p, 1, 20);
				drops++;
				continue;
			}
			uint64_t after = held(rx);
			if (after > before) {
				got += DGRAM;
				drops = 0;
			} else {
				drops++;
			}
			before = after;
		}
		payload += got;
		mem += held(rx);
		report();
		if (refused(got))
			break;
	}
}

static void run_unix(uint64_t target)
{
	while (payload < target && n_fds + 2 <= MAX_SOCKETS) {
		int sp[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) < 0)
			break;
		keep(sp[0]);
		keep(sp[1]);
		set_buf(sp[0], SO_SNDBUF);
		uint64_t got = fill_stream(sp[0], target - payload);
		payload += ioctl_bytes(sp[1], SIOCINQ);
		/* A unix stream skb waits in the reader's queue but is charged to the writer's
		 * send allocation until read. */
		mem += held(sp[0]) + held(sp[1]);
		report();
		if (refused(got))
			break;
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: sockmem_probe tcp|udp|unix TARGET_BYTES\n");
		return 2;
	}
	uint64_t target = strtoull(argv[2], NULL, 10);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	memset(chunk, 'x', sizeof(chunk));
	if (!strcmp(argv[1], "tcp"))
		run_tcp(target);
	else if (!strcmp(argv[1], "udp"))
		run_udp(target);
	else if (!strcmp(argv[1], "unix"))
		run_unix(target);
	else
		return 2;
	if (payload >= target)
		why = "target";
	report();
	printf("end %s\n", why);
	return 0;
}
