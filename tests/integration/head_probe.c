/* head_probe PORT: an HTTP/1.1 app on 127.0.0.1:PORT for it_proxy's tests of what crosses
 * the port proxy. Static, so it runs in the busybox image. One connection at a time: it
 * reads the request head (no body), then answers 200 whose body is that head byte for
 * byte (what reached the app), and whose head carries, before its own Content-Length, the
 * bytes of /tmp/head_probe.answer when that file exists, as they are ("Name: value\r\n"
 * lines an app crafted: control characters, cookies), so a test writes the answer it wants
 * with a file upload and no shell quoting. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEAD_MAX   (64u << 10)
#define ANSWER_MAX (16u << 10)
#define ANSWER	   "/tmp/head_probe.answer"

static int send_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The request head into head (NUL-terminated): its length, 0 when it did not come whole. */
static size_t read_head(int fd, char *head)
{
	size_t len = 0;
	while (len < HEAD_MAX) {
		ssize_t n = recv(fd, head + len, HEAD_MAX - len, 0);
		if (n <= 0)
			return 0;
		len += (size_t)n;
		head[len] = '\0';
		char *end = strstr(head, "\r\n\r\n");
		if (end)
			return (size_t)(end - head) + 4;
	}
	return 0;
}

/* The crafted header lines, "" when there are none. */
static size_t read_answer(char *out)
{
	int fd = open(ANSWER, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, out, ANSWER_MAX);
	close(fd);
	return n > 0 ? (size_t)n : 0;
}

static void serve(int fd, char *head, char *extra)
{
	size_t len = read_head(fd, head);
	if (!len)
		return;
	size_t extra_len = read_answer(extra);
	char top[128];
	int n = snprintf(top, sizeof(top), "HTTP/1.1 200 OK\r\n");
	char tail[128];
	int t = snprintf(tail, sizeof(tail),
			 "Content-Type: text/plain\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 len);
	if (send_all(fd, top, (size_t)n) == 0 && send_all(fd, extra, extra_len) == 0 &&
	    send_all(fd, tail, (size_t)t) == 0)
		send_all(fd, head, len);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: head_probe PORT\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 16) < 0) {
		perror("head_probe: listen");
		return 1;
	}
	static char head[HEAD_MAX + 1], extra[ANSWER_MAX];
	for (;;) {
		int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		struct timeval tv = {.tv_sec = 30};
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		serve(fd, head, extra);
		close(fd);
	}
}
