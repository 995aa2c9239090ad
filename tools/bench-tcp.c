/* bench-tcp: the two ends of `make bench`'s TCP throughput leg (tools/bench, leg 6).
 *
 *   bench-tcp sink ADDR PORT BYTES   accept one connection, read BYTES, answer one byte, close;
 *                                    prints "listening" once ready
 *   bench-tcp send ADDR PORT BYTES   connect, write BYTES of zeros, wait for the answer;
 *                                    prints "<seconds> <MB/s>" (10^6 bytes/s), connect to
 *                                    answer
 *
 * Built static, so that the same binary runs on the host and inside a busybox sandbox (a
 * read-only volume). IPv4 numbers only: no name service. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(int argc, char **argv)
{
	struct sockaddr_in sa;
	if (argc != 5 || (strcmp(argv[1], "sink") && strcmp(argv[1], "send"))) {
		fprintf(stderr, "usage: bench-tcp sink|send ADDR PORT BYTES\n");
		return 2;
	}
	unsigned long long bytes = strtoull(argv[4], NULL, 10);
	if (!bytes || address(argv[2], argv[3], &sa) < 0)
		return 2;
	return !strcmp(argv[1], "sink") ? sink(&sa, bytes) : send_all(&sa, bytes);
}
