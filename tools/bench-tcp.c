/* bench-tcp: the two ends of `make bench`'s TCP throughput leg (tools/bench, leg 6), and the
 * app of its port proxy leg (leg 7).
 *
 *   bench-tcp sink ADDR PORT BYTES   accept one connection, read BYTES, answer one byte, close;
 *                                    prints "listening" once ready
 *   bench-tcp send ADDR PORT BYTES   connect, write BYTES of zeros, wait for the answer;
 *                                    prints "<seconds> <MB/s>" (10^6 bytes/s), connect to
 *                                    answer
 *   bench-tcp http ADDR PORT BYTES   serve HTTP/1.1 until killed, a thread a connection, kept
 *                                    alive unless the request says "Connection: close":
 *                                    GET /bytes/N answers N zero bytes (N <= BYTES), anything
 *                                    else "ok\n"; prints "listening" once ready
 *
 * Built static, so that the same binary runs on the host and inside a busybox sandbox (a
 * read-only volume). IPv4 numbers only: no name service. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (256 * 1024)

static char buf[CHUNK];

static int die(const char *what)
{
	fprintf(stderr, "bench-tcp: %s: %s\n", what, strerror(errno));
	return 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int address(const char *ip, const char *port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((unsigned short)atoi(port));
	if (inet_pton(AF_INET, ip, &sa->sin_addr) != 1) {
		fprintf(stderr, "bench-tcp: %s is not an IPv4 address\n", ip);
		return -1;
	}
	return 0;
}

static int sink(const struct sockaddr_in *sa, unsigned long long bytes)
{
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(l, (const struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(l, 1) < 0)
		return die("listening");
	printf("listening\n");
	fflush(stdout);
	int c = accept(l, NULL, NULL);
	if (c < 0)
		return die("accept");
	while (bytes) {
		ssize_t n = read(c, buf, bytes < CHUNK ? bytes : CHUNK);
		if (n <= 0)
			return n < 0 ? die("read")
				     : (fprintf(stderr, "bench-tcp: short stream\n"), 1);
		bytes -= (unsigned long long)n;
	}
	if (write(c, "k", 1) != 1)
		return die("answer");
	close(c);
	close(l);
	return 0;
}

static int send_all(const struct sockaddr_in *sa, unsigned long long bytes)
{
	unsigned long long total = bytes;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	double t0 = now();
	if (s < 0 || connect(s, (const struct sockaddr *)sa, sizeof(*sa)) < 0)
		return die("connect");
	while (bytes) {
		ssize_t n = write(s, buf, bytes < CHUNK ? bytes : CHUNK);
		if (n < 0)
			return die("write");
		bytes -= (unsigned long long)n;
	}
	char k;
	if (read(s, &k, 1) != 1)
		return die("waiting for the sink");
	double dt = now() - t0;
	printf("%.3f %.1f\n", dt, (double)total / dt / 1e6);
	close(s);
	return 0;
}

/* ---- http: the app behind the port proxy ---- */

#define HEAD_MAX 8192

static unsigned long long http_max;

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void *http_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char head[HEAD_MAX + 1];
	size_t len = 0;
	for (;;) {
		char *end;
		while (!(head[len] = '\0', end = strstr(head, "\r\n\r\n"))) {
			if (len == HEAD_MAX)
				goto out;
			ssize_t n = recv(fd, head + len, HEAD_MAX - len, 0);
			if (n <= 0)
				goto out;
			len += (size_t)n;
		}
		*end = '\0';
		unsigned long long n = 0;
		bool bytes = sscanf(head, "GET /bytes/%llu ", &n) == 1 && n <= http_max;
		bool close_after = strcasestr(head, "\r\nConnection: close") != NULL;
		char out[256];
		int hl = snprintf(out, sizeof(out),
				  "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
				  "Content-Length: %llu\r\n%s\r\n%s",
				  bytes ? n : 3, close_after ? "Connection: close\r\n" : "",
				  bytes ? "" : "ok\n");
		if (write_all(fd, out, (size_t)hl) < 0)
			goto out;
		while (bytes && n) {
			size_t k = n < CHUNK ? (size_t)n : CHUNK;
			if (write_all(fd, buf, k) < 0)
				goto out;
			n -= k;
		}
		if (close_after)
			break;
		/* What followed the head is the next request (no request here has a body). */
		size_t used = (size_t)(end - head) + 4;
		memmove(head, head + used, len - used);
		len -= used;
	}
out:
	close(fd);
	return NULL;
}

static int http(const struct sockaddr_in *sa)
{
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(l, (const struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(l, 128) < 0)
		return die("listening");
	printf("listening\n");
	fflush(stdout);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		int c = accept(l, NULL, NULL);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return die("accept");
		}
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_t t;
		if (pthread_create(&t, &attr, http_conn, (void *)(intptr_t)c) != 0)
			close(c);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa;
	if (argc != 5 ||
	    (strcmp(argv[1], "sink") && strcmp(argv[1], "send") && strcmp(argv[1], "http"))) {
		fprintf(stderr, "usage: bench-tcp sink|send|http ADDR PORT BYTES\n");
		return 2;
	}
	unsigned long long bytes = strtoull(argv[4], NULL, 10);
	if (!bytes || address(argv[2], argv[3], &sa) < 0)
		return 2;
	if (!strcmp(argv[1], "http")) {
		http_max = bytes;
		return http(&sa);
	}
	return !strcmp(argv[1], "sink") ? sink(&sa, bytes) : send_all(&sa, bytes);
}
