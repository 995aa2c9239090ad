/* websocket.c: the handshake's checks and accept key, and the framing of a server
 * conversation driven against a hand-made client over a socketpair (frames built here byte
 * by byte, so a broken frame is exactly what the test says). */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/websocket.h"

static const struct websocket_handshake good = {
    .method = "GET",
    .upgrade = "websocket",
    .connection = "keep-alive, Upgrade",
    .version = "13",
    .key = "dGhlIHNhbXBsZSBub25jZQ==",
};

START_TEST(handshake_accept_key)
{
	char accept[WEBSOCKET_ACCEPT_LEN + 1];
	struct cell_error err = {0};
	ck_assert_int_eq(websocket_check(&good, accept, &err), 0);
	/* RFC 6455 1.3's example. */
	ck_assert_str_eq(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	struct websocket_handshake h = good;
	h.upgrade = "WebSocket";
	h.connection = "upgrade";
	ck_assert_int_eq(websocket_check(&h, accept, &err), 0);
}
END_TEST

START_TEST(handshake_refused)
{
	struct {
		struct websocket_handshake h;
		const char *names;
	} bad[] = {
	    {{"POST", "websocket", "Upgrade", "13", "dGhlIHNhbXBsZSBub25jZQ=="}, "GET"},
	    {{"GET", NULL, "Upgrade", "13", "dGhlIHNhbXBsZSBub25jZQ=="}, "Upgrade"},
	    {{"GET", "h2c", "Upgrade", "13", "dGhlIHNhbXBsZSBub25jZQ=="}, "Upgrade"},
	    {{"GET", "websocket", "keep-alive", "13", "dGhlIHNhbXBsZSBub25jZQ=="}, "Connection"},
	    {{"GET", "websocket", "Upgradex", "13", "dGhlIHNhbXBsZSBub25jZQ=="}, "Connection"},
	    {{"GET", "websocket", "Upgrade", "8", "dGhlIHNhbXBsZSBub25jZQ=="}, "Version"},
	    {{"GET", "websocket", "Upgrade", NULL, "dGhlIHNhbXBsZSBub25jZQ=="}, "Version"},
	    {{"GET", "websocket", "Upgrade", "13", NULL}, "Key"},
	    {{"GET", "websocket", "Upgrade", "13", "c2hvcnQ="}, "Key"},
	    {{"GET", "websocket", "Upgrade", "13", "dGhlIHNhbXBsZSBub25jZQ=!"}, "Key"},
	    {{"GET", "websocket", "Upgrade", "13", "dGhlIHNhbXBsZSBub25jZXgh"}, "Key"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char accept[WEBSOCKET_ACCEPT_LEN + 1];
		struct cell_error err = {0};
		ck_assert_int_eq(websocket_check(&bad[i].h, accept, &err), -EINVAL);
		ck_assert_msg(strstr(err.msg, bad[i].names), "case %zu: %s", i, err.msg);
	}
}
END_TEST

/* ---- a server conversation ---- */

struct got {
	int n;
	bool text[8];
	size_t len[8];
	uint8_t first[8];
};

static void on_message(void *cls, bool text, const uint8_t *data, size_t len)
{
	struct got *g = cls;
	if (g->n < 8) {
		g->text[g->n] = text;
		g->len[g->n] = len;
		g->first[g->n] = len ? data[0] : 0;
	}
	g->n++;
}

/* A masked client frame (mask 0x01020304), header flags b0 as given. */
static size_t client_frame(uint8_t *out, uint8_t b0, const uint8_t *payload, size_t len)
{
	size_t n = 0;
	out[n++] = b0;
	if (len < 126) {
		out[n++] = 0x80 | (uint8_t)len;
	} else if (len < 65536) {
		out[n++] = 0x80 | 126;
		out[n++] = (uint8_t)(len >> 8);
		out[n++] = (uint8_t)len;
	} else {
		out[n++] = 0x80 | 127;
		for (int i = 7; i >= 0; i--)
			out[n++] = (uint8_t)((uint64_t)len >> (8 * i));
	}
	static const uint8_t mask[4] = {1, 2, 3, 4};
	memcpy(out + n, mask, 4);
	n += 4;
	for (size_t i = 0; i < len; i++)
		out[n + i] = payload[i] ^ mask[i % 4];
	return n + len;
}

/* Drive the server until it wants nothing or nothing more happens; returns its last io. */
static int pump(struct websocket *ws, int fd)
{
	int rc = 0;
	for (int i = 0; i < 200; i++) {
		short want = websocket_events(ws);
		if (!want)
			break;
		struct pollfd p = {.fd = fd, .events = want};
		if (poll(&p, 1, 50) <= 0)
			break;
		rc = websocket_io(ws, p.revents);
		if (rc < 0)
			break;
	}
	return rc;
}

/* The close frame the server sent (its code), reading past other frames; 0 when none. */
static unsigned server_close_code(int fd)
{
	static uint8_t buf[1 << 16];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	for (ssize_t at = 0; n > 0 && at + 2 <= n;) {
		uint8_t op = buf[at] & 0x0f;
		size_t len = buf[at + 1] & 0x7f, hdr = 2;
		if (len == 126) {
			len = (size_t)buf[at + 2] << 8 | buf[at + 3];
			hdr = 4;
		}
		if (op == 0x8 && len >= 2)
			return (unsigned)buf[at + hdr] << 8 | buf[at + hdr + 1];
		if (op == 0x8)
			return 1005; /* RFC 6455 7.4.1: no status code present */
		at += (ssize_t)(hdr + len);
	}
	return 0;
}

static void conversation(int sv[2], struct websocket **ws, struct got *g, const char *extra,
			 size_t extra_len)
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	struct cell_error err = {0};
	*ws = websocket_new(sv[0], extra, extra_len, 1024, on_message, g, &err);
	ck_assert_ptr_nonnull(*ws);
}

START_TEST(messages_and_fragments)
{
	int sv[2];
	struct websocket *ws;
	struct got g = {0};
	uint8_t buf[4096];
	/* The first frame came with the request head. */
	size_t n0 = client_frame(buf, 0x81, (const uint8_t *)"{\"a\":1}", 7);
	char extra[64];
	memcpy(extra, buf, n0);
	conversation(sv, &ws, &g, extra, n0);
	size_t n = client_frame(buf, 0x82, (const uint8_t *)"\x00hi", 3);
	/* A fragmented text message: "ab" then "cd". */
	n += client_frame(buf + n, 0x01, (const uint8_t *)"ab", 2);
	n += client_frame(buf + n, 0x80, (const uint8_t *)"cd", 2);
	ck_assert_int_eq(write(sv[1], buf, n), (ssize_t)n);
	ck_assert_int_eq(websocket_io(ws, 0), 0); /* the extra bytes, without poll */
	pump(ws, sv[0]);
	ck_assert_int_eq(g.n, 3);
	ck_assert(g.text[0] && g.len[0] == 7 && g.first[0] == '{');
	ck_assert(!g.text[1] && g.len[1] == 3 && g.first[1] == 0x00);
	ck_assert(g.text[2] && g.len[2] == 4 && g.first[2] == 'a');
	/* The server's own messages, then its close. */
	ck_assert_int_eq(websocket_send_prefixed(ws, 0x01, "out", 3), 0);
	ck_assert_int_eq(websocket_close(ws, 4001, "TAKEN_OVER"), 0);
	ck_assert_int_eq(websocket_send(ws, true, "late", 4), -EPIPE);
	pump(ws, sv[0]);
	uint8_t in[64];
	ssize_t got = recv(sv[1], in, sizeof(in), 0);
	ck_assert_int_ge(got, 6 + 2 + 2 + 10);
	ck_assert_uint_eq(in[0], 0x82);
	ck_assert_uint_eq(in[1], 4);
	ck_assert(!memcmp(in + 2, "\x01out", 4));
	ck_assert_uint_eq(in[6], 0x88);
	ck_assert_uint_eq((unsigned)in[8] << 8 | in[9], 4001);
	ck_assert(!memcmp(in + 10, "TAKEN_OVER", 10));
	ck_assert(websocket_closing(ws));
	/* The client's close reply ends it; the peer's end is an error after that. */
	n = client_frame(buf, 0x88, (const uint8_t *)"\x03\xe8", 2);
	ck_assert_int_eq(write(sv[1], buf, n), (ssize_t)n);
	pump(ws, sv[0]);
	ck_assert_int_eq(websocket_events(ws), 0);
	websocket_free(ws);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Each violation closes: too big with 1009; reserved bits, an unmasked frame, a fragmented
 * control frame and an unknown opcode with 1002 (or wslay's close without a code). */
START_TEST(violations_close)
{
	struct {
		uint8_t b0;
		size_t len;
		bool unmasked;
		unsigned code;
	} cases[] = {
	    {0x82, 2000, false, 1009}, {0xc2, 3, false, 1002}, {0x82, 3, true, 1002},
	    {0x09, 3, false, 1002},    {0x8f, 3, false, 1002},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int sv[2];
		struct websocket *ws;
		struct got g = {0};
		conversation(sv, &ws, &g, NULL, 0);
		static uint8_t payload[4096], buf[8192];
		size_t n = client_frame(buf, cases[i].b0, payload, cases[i].len);
		if (cases[i].unmasked) {
			buf[1] &= 0x7f;
			memmove(buf + 2, buf + 6, n - 6);
			n -= 4;
		}
		ck_assert_int_eq(write(sv[1], buf, n), (ssize_t)n);
		pump(ws, sv[0]);
		ck_assert_msg(g.n == 0, "case %zu: a message got through", i);
		/* A protocol error may close without a code (wslay's own close). */
		unsigned code = server_close_code(sv[1]);
		ck_assert_msg(code == cases[i].code || (cases[i].code == 1002 && code == 1005),
			      "case %zu: close %u", i, code);
		websocket_free(ws);
		close(sv[0]);
		close(sv[1]);
	}
}
END_TEST

/* A peer that goes away is an error, with ECONNRESET. */
START_TEST(peer_gone)
{
	int sv[2];
	struct websocket *ws;
	struct got g = {0};
	conversation(sv, &ws, &g, NULL, 0);
	close(sv[1]);
	ck_assert_int_eq(websocket_io(ws, POLLIN), -ECONNRESET);
	websocket_free(ws);
	close(sv[0]);
}
END_TEST

static Suite *websocket_suite(void)
{
	Suite *s = suite_create("websocket");
	TCase *tc = tcase_create("all");
	tcase_add_test(tc, handshake_accept_key);
	tcase_add_test(tc, handshake_refused);
	tcase_add_test(tc, messages_and_fragments);
	tcase_add_test(tc, violations_close);
	tcase_add_test(tc, peer_gone);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(websocket_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
