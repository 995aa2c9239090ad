#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cell/proto.h"

static const char *const frame_names[CELL_FRAME_TYPE_MAX + 1] = {
    [CELL_FRAME_PING] = "PING",
    [CELL_FRAME_PONG] = "PONG",
    [CELL_FRAME_EXEC] = "EXEC",
    [CELL_FRAME_STARTED] = "STARTED",
    [CELL_FRAME_STDOUT] = "STDOUT",
    [CELL_FRAME_STDERR] = "STDERR",
    [CELL_FRAME_EXIT] = "EXIT",
    [CELL_FRAME_SIGNAL] = "SIGNAL",
    [CELL_FRAME_ERROR] = "ERROR",
    [CELL_FRAME_FILE_STAT] = "FILE_STAT",
    [CELL_FRAME_STAT] = "STAT",
    [CELL_FRAME_FILE_READ] = "FILE_READ",
    [CELL_FRAME_DATA] = "DATA",
    [CELL_FRAME_END] = "END",
    [CELL_FRAME_FILE_WRITE] = "FILE_WRITE",
    [CELL_FRAME_OK] = "OK",
    [CELL_FRAME_FILE_MKDIR] = "FILE_MKDIR",
    [CELL_FRAME_FILE_REMOVE] = "FILE_REMOVE",
    [CELL_FRAME_FILE_LIST] = "FILE_LIST",
    [CELL_FRAME_ENTRIES] = "ENTRIES",
    [CELL_FRAME_FILE_MOVE] = "FILE_MOVE",
    [CELL_FRAME_FILE_CHMOD] = "FILE_CHMOD",
    [CELL_FRAME_FILE_REPLACE] = "FILE_REPLACE",
    [CELL_FRAME_FILE_TAR] = "FILE_TAR",
    [CELL_FRAME_SESSION_OPEN] = "SESSION_OPEN",
    [CELL_FRAME_SESSION_RUN] = "SESSION_RUN",
    [CELL_FRAME_SESSION_CLOSE] = "SESSION_CLOSE",
    [CELL_FRAME_PTY_CREATE] = "PTY_CREATE",
    [CELL_FRAME_PTY_ATTACH] = "PTY_ATTACH",
    [CELL_FRAME_PTY_STATUS] = "PTY_STATUS",
    [CELL_FRAME_PTY_CLOSE] = "PTY_CLOSE",
    [CELL_FRAME_STDIN] = "STDIN",
    [CELL_FRAME_STDIN_CLOSE] = "STDIN_CLOSE",
    [CELL_FRAME_RESIZE] = "RESIZE",
    [CELL_FRAME_REPLAY] = "REPLAY",
    [CELL_FRAME_STDIN_TAKEN] = "STDIN_TAKEN",
    [CELL_FRAME_PTY_LIST] = "PTY_LIST",
    [CELL_FRAME_PTY_CONTROL] = "PTY_CONTROL",
    [39] = "RESERVED_39",
    [CELL_FRAME_FILE_WATCH] = "FILE_WATCH",
    [CELL_FRAME_EVENTS] = "EVENTS",
    [CELL_FRAME_OCI_CREATE] = "OCI_CREATE",
    [CELL_FRAME_OCI_START] = "OCI_START",
};

const char *cell_frame_type_name(uint16_t type)
{
	if (type == 0 || type > CELL_FRAME_TYPE_MAX)
		return "UNKNOWN";
	return frame_names[type];
}

void cell_frame_header_encode(uint8_t out[CELL_FRAME_HEADER], uint16_t type, uint32_t len)
{
	out[0] = len >> 24;
	out[1] = len >> 16;
	out[2] = len >> 8;
	out[3] = len;
	out[4] = type >> 8;
	out[5] = type;
	out[6] = 0;
	out[7] = 0;
}

int cell_frame_header_decode(const uint8_t in[CELL_FRAME_HEADER], uint32_t max, uint16_t *type,
			     uint32_t *len)
{
	uint32_t l = (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 | (uint32_t)in[2] << 8 | in[3];
	uint16_t t = (uint16_t)(in[4] << 8 | in[5]);
	if (in[6] || in[7] || t == 0 || t > CELL_FRAME_TYPE_MAX)
		return -EPROTO;
	if (l > max)
		return -EMSGSIZE;
	*type = t;
	*len = l;
	return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == ENOTSOCK)
			n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
	}
	return 0;
}

/* Returns bytes read (== len), 0 on EOF before any byte, -EPIPE on EOF mid-way. */
static ssize_t read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return got ? -EPIPE : 0;
		got += n;
	}
	return got;
}

int cell_frame_send(int fd, uint16_t type, const void *payload, uint32_t len,
		    struct cell_error *err)
{
	if (len > CELL_FRAME_MAX)
		return cell_err(err, EMSGSIZE, "frame %s of %u bytes", cell_frame_type_name(type),
				len);
	uint8_t hdr[CELL_FRAME_HEADER];
	cell_frame_header_encode(hdr, type, len);
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)payload, len}};
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
	size_t total = sizeof(hdr) + len;
	ssize_t n;
	do
		n = sendmsg(fd, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return cell_err(err, errno, "sending %s frame", cell_frame_type_name(type));
	if ((size_t)n == total)
		return 0;
	/* Short write: finish the rest plainly. */
	int r;
	if ((size_t)n < sizeof(hdr)) {
		r = write_all(fd, hdr + n, sizeof(hdr) - n);
		if (!r)
			r = write_all(fd, payload, len);
	} else {
		r = write_all(fd, (const uint8_t *)payload + (n - sizeof(hdr)),
			      len - (n - sizeof(hdr)));
	}
	if (r < 0)
		return cell_err(err, -r, "sending %s frame", cell_frame_type_name(type));
	return 0;
}

int cell_frame_send_str(int fd, uint16_t type, const char *json, struct cell_error *err)
{
	return cell_frame_send(fd, type, json, json ? strlen(json) : 0, err);
}

int cell_frame_recv(int fd, struct cell_frame *frame, uint32_t max, struct cell_error *err)
{
	uint8_t hdr[CELL_FRAME_HEADER];
	frame->payload = NULL;
	frame->len = 0;
	frame->type = 0;
	ssize_t n = read_all(fd, hdr, sizeof(hdr));
	if (n == 0)
		return cell_err(err, ECONNRESET, "relay closed");
	if (n < 0)
		return cell_err(err, -n, "reading frame header");
	int r = cell_frame_header_decode(hdr, max, &frame->type, &frame->len);
	if (r < 0)
		return cell_err(err, -r, "bad frame header");
	if (!frame->len)
		return 0;
	frame->payload = malloc(frame->len + 1);
	if (!frame->payload)
		return cell_err(err, ENOMEM, "frame payload");
	n = read_all(fd, frame->payload, frame->len);
	if (n != (ssize_t)frame->len) {
		cell_frame_free(frame);
		return cell_err(err, n < 0 ? -n : EPIPE, "reading frame payload");
	}
	frame->payload[frame->len] = '\0';
	return 0;
}

void cell_frame_free(struct cell_frame *frame)
{
	free(frame->payload);
	frame->payload = NULL;
	frame->len = 0;
}

bool cell_http_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

bool cell_meta_key_ok(const char *k, size_t n)
{
	if (!n || n > CELL_META_KEY_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!cell_http_tchar((unsigned char)k[i]))
			return false;
	return true;
}

bool cell_meta_value_ok(const char *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e)
			return false;
	return true;
}
