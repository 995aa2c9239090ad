/* cell-oci's side of a container's relay (relay.h). Everything cell-init sends is read
 * bounded: a frame past CELL_FRAME_MAX, of another type than OK or ERROR, or with more than
 * one descriptor is a protocol error. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/proto.h"
#include "relay.h"

#define RELAY_TIMEOUT_MS 30000
#define ANSWER_MAX	 (64u << 10)

int oci_relay_connect(int dirfd, const char *id, struct cell_error *err)
{
	/* The path through /proc/self/fd keeps sun_path short whatever --root is. */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/init.sock", dirfd);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return cell_err(err, errno, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return cell_err(err, e, "container %s: its init does not answer", id);
	}
	struct timeval tv = {RELAY_TIMEOUT_MS / 1000, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Read exactly len bytes; the first read collects a descriptor when one comes. */
static int read_all(int sock, void *buf, size_t len, int *fd, struct cell_error *err)
{
	size_t got = 0;
	while (got < len) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * 2)];
			struct cmsghdr align;
		} u;
		struct iovec iov = {(char *)buf + got, len - got};
		struct msghdr msg = {.msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = u.buf,
				     .msg_controllen = sizeof(u.buf)};
		ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return cell_err(err, n < 0 ? errno : ECONNRESET, "reading from cell-init");
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int fds[2] = {-1, -1};
			memcpy(fds, CMSG_DATA(cm), k > 2 ? 2 * sizeof(int) : k * sizeof(int));
			for (size_t i = 0; i < k && i < 2; i++) {
				if (fd && *fd < 0 && i == 0 && k == 1)
					*fd = fds[i];
				else
					close(fds[i]);
			}
		}
		if (msg.msg_flags & MSG_CTRUNC)
			return cell_err_msg(err, EPROTO, "cell-init sent too many descriptors");
		got += (size_t)n;
	}
	return 0;
}

static int parse_error(const char *payload, struct cell_error *err)
{
	json_t *o = json_loads(payload ? payload : "", 0, NULL);
	json_t *e = json_object_get(o, "errno");
	const char *msg = json_string_value(json_object_get(o, "message"));
	int errnum = json_is_integer(e) && json_integer_value(e) > 0 && json_integer_value(e) < 4096
			 ? (int)json_integer_value(e)
			 : EIO;
	int r = cell_err_msg(err, errnum, "%s", msg ? msg : "cell-init refused");
	json_decref(o);
	return r;
}

int oci_relay_call(int sock, int type, json_t *req, json_t **out, int *fd, struct cell_error *err)
{
	if (out)
		*out = NULL;
	int got_fd = -1;
	_cleanup_free_ char *text = json_dumps(req, JSON_COMPACT);
	if (!text)
		return cell_err(err, ENOMEM, "request");
	int r = cell_frame_send_str(sock, (uint16_t)type, text, err);
	if (r < 0)
		return r;
	uint8_t hdr[CELL_FRAME_HEADER];
	r = read_all(sock, hdr, sizeof(hdr), &got_fd, err);
	uint16_t ftype = 0;
	uint32_t len = 0;
	if (r == 0 && cell_frame_header_decode(hdr, ANSWER_MAX, &ftype, &len) < 0)
		r = cell_err_msg(err, EPROTO, "a malformed frame from cell-init");
	if (r == 0 && ftype != CELL_FRAME_OK && ftype != CELL_FRAME_ERROR)
		r = cell_err_msg(err, EPROTO, "cell-init answered %s", cell_frame_type_name(ftype));
	_cleanup_free_ char *payload = r == 0 ? calloc(1, len + 1) : NULL;
	if (r == 0 && !payload)
		r = cell_err(err, ENOMEM, "answer");
	if (r == 0 && len)
		r = read_all(sock, payload, len, &got_fd, err);
	if (r == 0 && ftype == CELL_FRAME_ERROR)
		r = parse_error(payload, err);
	if (r == 0 && out && !(*out = json_loads(payload, 0, NULL)))
		r = cell_err_msg(err, EPROTO, "cell-init's answer is not JSON");
	if (r < 0 || !fd) {
		if (got_fd >= 0)
			close(got_fd);
		got_fd = -1;
	}
	if (fd)
		*fd = got_fd;
	return r;
}
