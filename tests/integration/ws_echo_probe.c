/* ws_echo_probe PORT: a WebSocket echo server on 127.0.0.1:PORT, one thread a connection,
 * for it_proxy's tests of the port proxy's protocol switch. Static, so it runs in the
 * busybox image. No library: the handshake's SHA-1 and base64 are here.
 *
 * The path, its query aside:
 *   GET /refuse        answers 403 with a short body (an app refusing the upgrade)
 *   GET /head          switches, then sends the request head it got as its first message
 *                      (in the same write as its 101: bytes after the head)
 *   GET anything else  switches; a Sec-WebSocket-Protocol offer gets its first token back
 *
 * Once switched, every frame comes back as it came (FIN, opcode, payload), unmasked; a
 * ping gets its pong, a close its close. A client frame that is not masked, or longer than
 * FRAME_MAX, ends the connection. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEAD_MAX  8192
#define FRAME_MAX (64u << 20)
#define PIECE	  (64u << 10)

/* ---- SHA-1 (FIPS 180-1) and base64, for Sec-WebSocket-Accept ---- */

static uint32_t rol(uint32_t x, int n)
{
	return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const unsigned char *p)
{
	uint32_t w[80];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
	for (int i = 0; i < 80; i++) {
		uint32_t f, k;
		if (i < 20)
			f = (b & c) | (~b & d), k = 0x5a827999;
		else if (i < 40)
			f = b ^ c ^ d, k = 0x6ed9eba1;
		else if (i < 60)
			f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdc;
		else
			f = b ^ c ^ d, k = 0xca62c1d6;
		uint32_t t = rol(a, 5) + f + e + k + w[i];
		e = d, d = c, c = rol(b, 30), b = a, a = t;
	}
	h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

static void sha1(const unsigned char *data, size_t len, unsigned char out[20])
{
	uint32_t h[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
	size_t i = 0;
	for (; i + 64 <= len; i += 64)
		sha1_block(h, data + i);
	unsigned char last[128] = {0};
	size_t rest = len - i;
	memcpy(last, data + i, rest);
	last[rest] = 0x80;
	size_t total = rest + 9 <= 64 ? 64 : 128;
	uint64_t bits = (uint64_t)len * 8;
	for (int j = 0; j < 8; j++)
		last[total - 1 - j] = (unsigned char)(bits >> (8 * j));
	sha1_block(h, last);
	if (total == 128)
		sha1_block(h, last + 64);
	for (int j = 0; j < 5; j++)
		for (int k = 0; k < 4; k++)
			out[4 * j + k] = (unsigned char)(h[j] >> (24 - 8 * k));
}

static void base64(const unsigned char *in, size_t len, char *out)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < len)
			v |= in[i + 2];
		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		out[o++] = i + 1 < len ? tab[v >> 6 & 63] : '=';
		out[o++] = i + 2 < len ? tab[v & 63] : '=';
	}
	out[o] = '\0';
}

/* ---- I/O ---- */

static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		ssize_t n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The value of header name in head (case-insensitive name), copied to out; 0 if found. */
static int header(const char *head, const char *name, char *out, size_t size)
{
	size_t n = strlen(name);
	for (const char *l = strstr(head, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n")) {
		const char *s = l + 2;
		if (!strncasecmp(s, name, n) && s[n] == ':') {
			s += n + 1;
			s += strspn(s, " \t");
			size_t v = strcspn(s, "\r\n");
			if (v >= size)
				return -1;
			memcpy(out, s, v);
			out[v] = '\0';
			return 0;
		}
	}
	return -1;
}

/* ---- a connection ---- */

static int send_frame_head(int fd, unsigned char b0, uint64_t len)
{
	unsigned char h[10];
	size_t n = 2;
	h[0] = b0;
	if (len < 126) {
		h[1] = (unsigned char)len;
	} else if (len <= 0xffff) {
		h[1] = 126;
		h[2] = (unsigned char)(len >> 8);
		h[3] = (unsigned char)len;
		n = 4;
	} else {
		h[1] = 127;
		for (int i = 0; i < 8; i++)
			h[2 + i] = (unsigned char)(len >> (56 - 8 * i));
		n = 10;
	}
	return write_full(fd, h, n);
}

static void echo(int fd)
{
	unsigned char piece[PIECE];
	for (;;) {
		unsigned char h[2];
		if (read_full(fd, h, 2) < 0)
			return;
		unsigned op = h[0] & 0x0f;
		uint64_t len = h[1] & 0x7f;
		if (!(h[1] & 0x80))
			return;
		if (len == 126 || len == 127) {
			unsigned char ext[8];
			size_t n = len == 126 ? 2 : 8;
			if (read_full(fd, ext, n) < 0)
				return;
			len = 0;
			for (size_t i = 0; i < n; i++)
				len = len << 8 | ext[i];
		}
		unsigned char mask[4];
		if (len > FRAME_MAX || read_full(fd, mask, 4) < 0)
			return;
		unsigned char b0 = op == 9 ? (unsigned char)(0x80 | 10) : h[0];
		if (op != 10 && send_frame_head(fd, b0, len) < 0)
			return;
		for (uint64_t done = 0; done < len;) {
			size_t n = len - done < PIECE ? (size_t)(len - done) : PIECE;
			if (read_full(fd, piece, n) < 0)
				return;
			for (size_t i = 0; i < n; i++)
				piece[i] ^= mask[(done + i) & 3];
			if (op != 10 && write_full(fd, piece, n) < 0)
				return;
			done += n;
		}
		if (op == 8)
			return;
	}
}

static void *conn_run(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char head[HEAD_MAX + 1];
	size_t len = 0;
	/* Byte by byte: nothing after the head is taken from the frames. */
	while (len < HEAD_MAX && !(len >= 4 && !memcmp(head + len - 4, "\r\n\r\n", 4))) {
		if (read_full(fd, head + len, 1) < 0)
			goto out;
		len++;
	}
	head[len] = '\0';
	char path[256] = "";
	sscanf(head, "GET %255s ", path);
	path[strcspn(path, "?")] = '\0';
	char key[128], proto[128];
	if (!strcmp(path, "/refuse") || header(head, "Sec-WebSocket-Key", key, sizeof(key)) < 0) {
		static const char no[] = "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n"
					 "Content-Length: 18\r\nX-Echo-App: refused\r\n\r\n"
					 "no websocket here\n";
		write_full(fd, no, strlen(no));
		goto out;
	}
	char cat[256];
	snprintf(cat, sizeof(cat), "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
	unsigned char digest[20];
	sha1((const unsigned char *)cat, strlen(cat), digest);
	char accept[32];
	base64(digest, sizeof(digest), accept);
	char out[HEAD_MAX * 2 + 512];
	int n = snprintf(out, sizeof(out),
			 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			 "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\nX-Echo-App: yes\r\n",
			 accept);
	if (header(head, "Sec-WebSocket-Protocol", proto, sizeof(proto)) == 0) {
		proto[strcspn(proto, ", ")] = '\0';
		n += snprintf(out + n, sizeof(out) - (size_t)n, "Sec-WebSocket-Protocol: %s\r\n",
			      proto);
	}
	n += snprintf(out + n, sizeof(out) - (size_t)n, "\r\n");
	size_t total = (size_t)n;
	if (!strcmp(path, "/head")) {
		/* A text frame holding the head, in the same write as the 101. */
		unsigned char fh[4] = {0x81, 126, (unsigned char)(len >> 8), (unsigned char)len};
		memcpy(out + total, fh, 4);
		memcpy(out + total + 4, head, len);
		total += 4 + len;
	}
	if (write_full(fd, out, total) == 0)
		echo(fd);
out:
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: ws_echo_probe PORT\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)atoi(argv[1])),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 512) < 0) {
		perror("ws_echo_probe: listen");
		return 1;
	}
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256u << 10);
	for (;;) {
		int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
				continue;
			perror("ws_echo_probe: accept");
			return 1;
		}
		pthread_t t;
		if (pthread_create(&t, &attr, conn_run, (void *)(intptr_t)fd) != 0)
			close(fd);
	}
}
