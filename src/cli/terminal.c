/* Interactive terminals: the user's tty in raw mode, bytes both ways over the PTY session's
 * WebSocket (channel byte 0x00 stdin; 0x01 output, 0x02 stderr, 0x03 replay with its
 * 8-byte offset; JSON text frames connected/exit/error, resize from here), the window size
 * following SIGWINCH, ^P^Q to detach. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "cell/cleanup.h"
#include "client.h"
#include "global.h"
#include "signals.h"
#include "terminal.h"

#define PTY_PATH      "/v1/sandboxes/%s" CLI_EXECD_PREFIX "/pty"
#define DETACH_FIRST  0x10  /* ^P */
#define DETACH_NEXT   0x11  /* ^Q */
#define START_WAIT_MS 30000 /* for celld's "connected" after the switch */

struct term {
	const struct cli_term_attach *a;
	struct cell_client_ws *ws;
	bool connected, exited, detached;
	int exit_code;
	char error[256]; /* an error frame's text */
	bool held_first; /* a ^P was typed: the next byte says whether it detaches */
	bool discard;	 /* output is not shown (a start without attaching) */
};

static volatile sig_atomic_t winch;

static void on_winch(int sig)
{
	(void)sig;
	winch = 1;
}

static void write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* the user's terminal is gone: nothing to tell */
		p += w;
		n -= (size_t)w;
	}
}

static void on_text(struct term *t, const uint8_t *data, size_t len)
{
	json_t *m = json_loadb((const char *)data, len, 0, NULL);
	const char *type = json_string_value(json_object_get(m, "type"));
	if (!type) {
		json_decref(m);
		return;
	}
	if (!strcmp(type, "connected")) {
		t->connected = true;
		winch = 1; /* tell the size now */
	} else if (!strcmp(type, "exit")) {
		t->exited = true;
		t->exit_code = (int)json_integer_value(json_object_get(m, "exit_code"));
	} else if (!strcmp(type, "error")) {
		snprintf(t->error, sizeof(t->error), "%s (%s)",
			 json_string_value(json_object_get(m, "error")) ?: "error",
			 json_string_value(json_object_get(m, "code")) ?: "?");
	}
	json_decref(m);
}

static void on_msg(void *ctx, bool binary, const uint8_t *data, size_t len)
{
	struct term *t = ctx;
	if (!binary) {
		on_text(t, data, len);
		return;
	}
	if (len < 1 || t->discard)
		return;
	if (data[0] == 0x01)
		write_all(1, data + 1, len - 1);
	else if (data[0] == 0x02)
		write_all(2, data + 1, len - 1);
	else if (data[0] == 0x03 && len >= 9)
		write_all(1, data + 9, len - 9);
}

static void send_size(struct term *t)
{
	struct winsize ws;
	if (ioctl(0, TIOCGWINSZ, &ws) < 0 || !ws.ws_col || !ws.ws_row)
		return;
	char msg[96];
	int n = snprintf(msg, sizeof(msg), "{\"type\":\"resize\",\"cols\":%u,\"rows\":%u}",
			 ws.ws_col, ws.ws_row);
	cell_client_ws_send(t->ws, false, msg, (size_t)n);
}

static void send_input(struct term *t, const uint8_t *p, size_t n)
{
	uint8_t frame[1 + 4096];
	frame[0] = 0x00;
	memcpy(frame + 1, p, n);
	cell_client_ws_send(t->ws, true, frame, n + 1);
}

/* Keyboard bytes to the session; ^P^Q detaches (a ^P followed by anything else is sent). */
static void keyboard(struct term *t, const uint8_t *p, size_t n, bool tty)
{
	uint8_t out[4096];
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (tty && t->held_first) {
			t->held_first = false;
			if (p[i] == DETACH_NEXT) {
				t->detached = true;
				break;
			}
			out[o++] = DETACH_FIRST;
		}
		if (tty && p[i] == DETACH_FIRST) {
			t->held_first = true;
			continue;
		}
		out[o++] = p[i];
		if (o >= sizeof(out) - 1) {
			send_input(t, out, o);
			o = 0;
		}
	}
	if (o)
		send_input(t, out, o);
}

/* The loop: until the process ends, the user detaches, a signal, or the link ends. */
static void pump(struct term *t, bool tty, const sigset_t *waitmask)
{
	bool in_open = t->a->input;
	while (!t->exited && !t->detached && !cli_signals_caught) {
		/* Bytes already read in, then the size when it changed, then queued frames out,
		 * before deciding what to wait for. */
		if (cell_client_ws_pump(t->ws, 0) == 1)
			return;
		if (winch && t->connected && tty) {
			winch = 0;
			send_size(t);
			if (cell_client_ws_pump(t->ws, 0) == 1)
				return;
		}
		struct pollfd p[2] = {
		    {.fd = in_open && t->connected ? 0 : -1, .events = POLLIN},
		    {.fd = cell_client_ws_fd(t->ws), .events = cell_client_ws_events(t->ws)},
		};
		int n = ppoll(p, 2, NULL, waitmask);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (p[0].revents) {
			uint8_t buf[4096];
			ssize_t r = read(0, buf, sizeof(buf));
			if (r > 0) {
				keyboard(t, buf, (size_t)r, tty);
			} else if (r == 0 || errno != EINTR) {
				/* Input ended (not a terminal): the terminal's end-of-file
				 * character. */
				in_open = false;
				send_input(t, (const uint8_t *)"\x04", 1);
			}
		}
		if (cell_client_ws_pump(t->ws, p[1].revents) == 1)
			return;
	}
}

static int link_error(struct term *t, struct cell_error *err)
{
	uint16_t code = cell_client_ws_close_code(t->ws);
	if (code == 4001)
		return cell_err_msg(err, ECONNABORTED,
				    "PTY session %s: another client took it over", t->a->session),
		       -ECONNABORTED;
	if (t->error[0])
		return cell_err_msg(err, EIO, "PTY session %s: %s", t->a->session, t->error), -EIO;
	return cell_err_msg(err, ECONNRESET, "PTY session %s: the connection to celld ended",
			    t->a->session),
	       -ECONNRESET;
}

static int remove_session(const struct cli_term_attach *a)
{
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, PTY_PATH "/%s", a->id, a->session) < 0)
		return -ENOMEM;
	struct cell_error err = {0};
	long status = 0;
	return cli_client_api("DELETE", path, NULL, "remove PTY session", NULL, &status, &err);
}

static int open_ws(struct term *t, struct cell_error *err)
{
	struct winsize ws = {0};
	ioctl(0, TIOCGWINSZ, &ws);
	_cleanup_free_ char *path = NULL;
	/* No replay is an offset past all output: celld takes a missing since as 0, execd's
	 * replay of everything kept. */
	char since[32];
	snprintf(since, sizeof(since), "&since=%lld", t->a->since >= 0 ? t->a->since : LLONG_MAX);
	if (asprintf(&path, PTY_PATH "/%s/ws?cols=%u&rows=%u%s%s", t->a->id, t->a->session,
		     ws.ws_col ? ws.ws_col : 80u, ws.ws_row ? ws.ws_row : 24u, since,
		     t->a->takeover ? "&takeover=1" : "") < 0)
		return cell_err(err, ENOMEM, "attach"), -ENOMEM;
	return cell_client_ws_open(cli_client(), path, on_msg, t, "attach to PTY session", &t->ws,
				   err);
}

int cli_term_attach(const struct cli_term_attach *a, int *exit_code, struct cell_error *err)
{
	struct term t = {.a = a};
	int rc = open_ws(&t, err);
	/* The API's hint names its query; a CLI user's is the flag. */
	if (rc < 0 && strstr(err->msg, "?takeover=1"))
		cell_err_msg(err, EBUSY,
			     "another client is attached to session %s of sandbox %s "
			     "(--takeover takes it over)",
			     a->session, a->id);
	if (rc < 0) {
		cell_client_close(cli_client());
		if (a->remove_at_end)
			remove_session(a);
		return rc;
	}
	bool tty = isatty(0);
	struct termios saved, raw;
	bool restore = tty && tcgetattr(0, &saved) == 0;
	if (restore) {
		raw = saved;
		cfmakeraw(&raw);
		tcsetattr(0, TCSADRAIN, &raw);
	}
	struct sigaction sa = {.sa_handler = on_winch};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGWINCH, &sa, NULL);
	sigset_t block, waitmask;
	sigemptyset(&block);
	sigaddset(&block, SIGWINCH);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	pump(&t, tty, &waitmask);
	sigprocmask(SIG_SETMASK, &waitmask, NULL);
	if (restore)
		tcsetattr(0, TCSADRAIN, &saved);
	if (!t.exited && !t.detached)
		cell_client_ws_close(t.ws, 1000, "bye");
	if (t.exited) {
		*exit_code = t.exit_code;
		rc = 0;
	} else if (t.detached) {
		fprintf(stderr, "\r\n[detached: cell attach %s %s]\r\n", a->id, a->session);
		*exit_code = 0;
		rc = 0;
	} else if (cli_signals_caught) {
		*exit_code = 128 + cli_signals_caught;
		rc = 0;
	} else {
		rc = link_error(&t, err);
	}
	cell_client_ws_free(t.ws);
	cell_client_close(cli_client());
	if (a->remove_at_end && !t.detached)
		remove_session(a);
	return rc;
}

int cli_term_start(const char *id, const char *session, struct cell_error *err)
{
	const struct cli_term_attach a = {.id = id, .session = session, .since = -1};
	struct term t = {.a = &a, .discard = true};
	int rc = open_ws(&t, err);
	while (rc == 0 && !t.connected && !t.exited && !t.error[0]) {
		struct pollfd p = {.fd = cell_client_ws_fd(t.ws),
				   .events = cell_client_ws_events(t.ws)};
		int n = poll(&p, 1, START_WAIT_MS);
		if (n == 0 || (n < 0 && errno != EINTR))
			rc = cell_err(err, n ? errno : ETIMEDOUT, "PTY session %s: starting it",
				      session);
		else if (n > 0 && cell_client_ws_pump(t.ws, p.revents) == 1)
			rc = link_error(&t, err);
	}
	if (rc == 0 && t.error[0])
		rc = link_error(&t, err);
	if (t.ws && rc == 0)
		cell_client_ws_close(t.ws, 1000, "detached");
	cell_client_ws_free(t.ws);
	cell_client_close(cli_client());
	return rc;
}

int cli_term_create(const char *id, const char *command, const char *cwd, char **session,
		    struct cell_error *err)
{
	*session = NULL;
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, PTY_PATH, id) < 0)
		return cell_err(err, ENOMEM, "create PTY session"), -ENOMEM;
	json_t *body = json_object();
	if (command)
		json_object_set_new(body, "command", json_string(command));
	if (cwd)
		json_object_set_new(body, "cwd", json_string(cwd));
	json_t *out = NULL;
	long status = 0;
	int rc = cli_client_api("POST", path, body, "create PTY session", &out, &status, err);
	json_decref(body);
	if (rc < 0)
		return rc;
	const char *sid = json_string_value(json_object_get(out, "session_id"));
	if (!sid || !(*session = strdup(sid))) {
		json_decref(out);
		return cell_err_msg(err, EPROTO,
				    "create PTY session: celld's answer has no "
				    "session_id"),
		       -EPROTO;
	}
	json_decref(out);
	return 0;
}

/* Append s to b single-quoted ('\'' for each quote). */
static bool put_word(struct cell_client_buf *b, const char *s)
{
	if (cell_client_buf_append(b, "'", 1, 1u << 20) < 0)
		return false;
	for (const char *p = s; *p; p++) {
		const char *piece = *p == '\'' ? "'\\''" : p;
		size_t n = *p == '\'' ? 4 : 1;
		if (cell_client_buf_append(b, piece, n, 1u << 20) < 0)
			return false;
	}
	return cell_client_buf_append(b, "'", 1, 1u << 20) == 0;
}

char *cli_term_command_line(char *const *argv, json_t *envs)
{
	struct cell_client_buf b = {0};
	bool ok = true;
	const char *k;
	json_t *v;
	json_object_foreach(envs, k, v)
	{
		/* The name goes into the line unquoted: a shell variable name only. */
		ok = ok && *k && !isdigit((unsigned char)*k) &&
		     strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
			 strlen(k);
		ok = ok && cell_client_buf_append(&b, "export ", 7, 1u << 20) == 0;
		ok = ok && cell_client_buf_append(&b, k, strlen(k), 1u << 20) == 0;
		ok = ok && cell_client_buf_append(&b, "=", 1, 1u << 20) == 0;
		ok = ok && put_word(&b, json_string_value(v) ?: "");
		ok = ok && cell_client_buf_append(&b, "; ", 2, 1u << 20) == 0;
	}
	ok = ok && cell_client_buf_append(&b, "exec", 4, 1u << 20) == 0;
	for (size_t i = 0; ok && argv[i]; i++)
		ok = cell_client_buf_append(&b, " ", 1, 1u << 20) == 0 && put_word(&b, argv[i]);
	if (!ok) {
		cell_client_buf_free(&b);
		return NULL;
	}
	return b.data;
}
