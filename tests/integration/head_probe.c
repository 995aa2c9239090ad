/* head_probe PORT: an HTTP/1.1 app on 127.0.0.1:PORT for it_proxy's tests of what crosses
 * the port proxy. Static, so it runs in the busybox image. One connection at a time: it
 * reads the request head (no body), then answers 200 whose body is that head byte for
 * byte (what reached the app), and whose head carries, before its own Content-Length, the
 * bytes of /tmp/head_probe.answer when that file exists, as they are ("Name: value\r\n"
 * lines an app crafted: control characters, cookies), so a test writes the answer it wants
 * with a file upload and no shell quoting.
 *
 * When /tmp/head_probe.silent exists it plays an app that goes quiet instead: after the
 * request head it sends nothing (the file empty) or, the file holding "head", a 200 head and
 * "first\n" of a body that never ends; then it waits for the other side to close and, when
 * it has, writes /tmp/head_probe.gone (/tmp/head_probe.got once it has the request head) (for a
 * test of how soon the proxy lets go of an app whose client left). */
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
#define SILENT	   "/tmp/head_probe" /* .silent: the mode; .gone: the close came */

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

/* The silent app: the head or nothing, then wait for the close, then say it came. */
static void mark(const char *path)
{
	int g = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (g >= 0)
		close(g);
}

static void serve_silent(int fd, const char *mode)
{
	mark(SILENT ".got");
	static const char start[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
				    "Connection: close\r\n\r\nfirst\n";
	if (!strncmp(mode, "head", 4) && send_all(fd, start, sizeof(start) - 1) < 0)
		return;
	struct timeval tv = {.tv_sec = 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)); /* block until it closes */
	char buf[512];
	while (recv(fd, buf, sizeof(buf), 0) > 0)
		;
	mark(SILENT ".gone");
}

static void serve(int fd, char *head, char *extra)
{
	size_t len = read_head(fd, head);
	if (!len)
		return;
	char mode[16] = "";
	int m = open(SILENT ".silent", O_RDONLY | O_CLOEXEC);
	if (m >= 0) {
		ssize_t n = read(m, mode, sizeof(mode) - 1);
		close(m);
		mode[n > 0 ? n : 0] = '\0';
		serve_silent(fd, mode);
		return;
	}
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
