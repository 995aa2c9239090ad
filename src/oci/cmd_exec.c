/* cell-oci exec [--process FILE] [--detach] [--pid-file P] [--cwd DIR] [--env K=V]...
 * [--user UID[:GID]] ID [COMMAND [ARG...]]: a process in a running container.
 *
 * Nothing of the host enters the container: the process is cell-init's child, asked for
 * over the relay (EXEC), and this process mirrors it — its stdin fed as STDIN frames, its
 * output written to our stdout and stderr, the signals we get passed on as SIGNAL, and
 * its exit code ours (128+n for signal n). With --detach we fork that mirror, write its pid
 * to --pid-file (the pid containerd's shim waits on and signals) and return. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "cell/proto.h"
#include "commands.h"
#include "container.h"
#include "relay.h"
#include "spec.h"
#include "status.h"

struct exec_args {
	const char *process, *pid_file, *cwd, *user, *id, *console;
	bool detach, tty;
	char **env;
	size_t n_env;
	char **argv; /* COMMAND... when no --process */
	int argc;
};

static int parse_args(int argc, char **argv, struct exec_args *a, struct cell_error *err)
{
	static const struct option opts[] = {
	    {"process", required_argument, NULL, 'p'},
	    {"detach", no_argument, NULL, 'd'},
	    {"pid-file", required_argument, NULL, 'P'},
	    {"console-socket", required_argument, NULL, 'c'},
	    {"tty", no_argument, NULL, 't'},
	    {"cwd", required_argument, NULL, 'w'},
	    {"env", required_argument, NULL, 'e'},
	    {"user", required_argument, NULL, 'u'},
	    {NULL, 0, NULL, 0},
	};
	*a = (struct exec_args){0};
	a->env = calloc((size_t)argc + 1, sizeof(char *));
	if (!a->env)
		return cell_err(err, ENOMEM, "exec");
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "+p:dte:u:", opts, NULL)) != -1;) {
		switch (c) {
		case 'p':
			a->process = optarg;
			break;
		case 'd':
			a->detach = true;
			break;
		case 'P':
			a->pid_file = optarg;
			break;
		case 't':
			a->tty = true;
			break;
		case 'c':
			a->console = optarg;
			break;
		case 'w':
			a->cwd = optarg;
			break;
		case 'e':
			a->env[a->n_env++] = optarg;
			break;
		case 'u':
			a->user = optarg;
			break;
		default:
			return cell_err_msg(err, EINVAL, "exec: unknown option");
		}
	}
	if (optind >= argc)
		return cell_err_msg(err, EINVAL, "exec: expected a container id");
	a->id = argv[optind++];
	a->argv = argv + optind;
	a->argc = argc - optind;
	if (!a->process && a->argc == 0)
		return cell_err_msg(err, EINVAL, "exec: a command or --process FILE");
	return 0;
}

/* A terminal exec goes to the engine's console socket, as runc's: it needs one. */
static int check_terminal(const struct exec_args *a, struct cell_error *err)
{
	if (a->tty && !a->console)
		return cell_err_msg(err, EINVAL, "exec: a terminal needs --console-socket");
	if (a->tty && !a->detach)
		return cell_err_msg(err, EINVAL, "exec: a terminal is given with --detach only");
	return 0;
}

/* cell-init's EXEC request: from --process (the shim's) or from the command line. */
static json_t *exec_request(struct exec_args *a, struct cell_error *err)
{
	struct oci_process p = {0};
	json_t *argv = json_array(), *env = json_array();
	json_t *req = NULL;
	if (a->process) {
		_cleanup_free_ char *text = NULL;
		size_t len = 0;
		if (cell_read_file_at(AT_FDCWD, a->process, OCI_SPEC_FILE_MAX, &text, &len, err) <
			0 ||
		    oci_process_parse(text, len, &p, NULL, err) < 0)
			goto out;
		a->tty = a->tty || p.terminal;
	}
	size_t n = a->process ? p.args.n : (size_t)a->argc;
	for (size_t i = 0; i < n; i++) {
		const char *s = a->process ? p.args.v[i] : a->argv[i];
		char *b = cell_base64_encode(s, strlen(s));
		json_array_append_new(argv, json_string(b));
		free(b);
	}
	for (size_t i = 0; a->process && i < p.env.n; i++)
		json_array_append_new(env, json_string(p.env.v[i]));
	for (size_t i = 0; i < a->n_env; i++)
		json_array_append_new(env, json_string(a->env[i]));
	unsigned long uid = a->process ? p.uid : 0, gid = a->process ? p.gid : 0;
	if (a->user) {
		char *end;
		uid = strtoul(a->user, &end, 10);
		gid = *end == ':' ? strtoul(end + 1, &end, 10) : uid;
		if (*end || a->user[0] < '0' || a->user[0] > '9') {
			cell_err_msg(err, EINVAL, "exec: --user %s: UID[:GID] in numbers", a->user);
			goto out;
		}
	}
	const char *cwd = a->cwd ? a->cwd : a->process ? p.cwd : "/";
	req = json_pack("{s:O, s:O, s:s, s:I, s:I, s:b}", "argv", argv, "env", env, "cwd", cwd,
			"uid", (json_int_t)uid, "gid", (json_int_t)gid, "stdin", true);
	if (!req)
		cell_err(err, ENOMEM, "exec");
out:
	json_decref(argv);
	json_decref(env);
	oci_process_clear(&p);
	return req;
}

/* ---- the mirror ---- */

struct mirror {
	int sock, sig;
	int ready;	  /* --detach: told once the process started, then closed; -1 */
	int in, out, err; /* ours: stdio, or the terminal's slave for all three */
	bool tty;
	bool stdin_open;
	uint64_t unacked;
};

static int write_out(int fd, const uint8_t *p, size_t n)
{
	return cell_write_all(fd, p, n);
}

/* --detach's parent learns the process runs: it writes the pid file then. */
static void tell_started(struct mirror *m)
{
	if (m->ready < 0)
		return;
	ssize_t w = write(m->ready, "s", 1);
	(void)w;
	close(m->ready);
	m->ready = -1;
}

/* One frame from cell-init: its output, the stdin window, or the end. 1 when it ended
 * (*code set), 0 to go on, -errno. */
static int on_frame(struct mirror *m, int *code, struct cell_error *err)
{
	struct cell_frame f;
	int r = cell_frame_recv(m->sock, &f, CELL_FRAME_MAX, err);
	if (r < 0)
		return r;
	switch (f.type) {
	case CELL_FRAME_STDOUT:
	case CELL_FRAME_STDERR:
		write_out(f.type == CELL_FRAME_STDOUT ? m->out : m->err, f.payload, f.len);
		break;
	case CELL_FRAME_REPLAY: /* its offset, then what the terminal showed before we came */
		if (f.len > 8)
			write_out(m->out, f.payload + 8, f.len - 8);
		break;
	case CELL_FRAME_OK: /* PTY_ATTACH's: the process runs */
		tell_started(m);
		break;
	case CELL_FRAME_STDIN_TAKEN: {
		json_t *o = json_loads((char *)f.payload, 0, NULL);
		uint64_t n = (uint64_t)json_integer_value(json_object_get(o, "bytes"));
		m->unacked = n > m->unacked ? 0 : m->unacked - n;
		json_decref(o);
		break;
	}
	case CELL_FRAME_EXIT: {
		json_t *o = json_loads((char *)f.payload, 0, NULL);
		int sig = (int)json_integer_value(json_object_get(o, "signal"));
		*code = sig ? 128 + sig : (int)json_integer_value(json_object_get(o, "exit_code"));
		json_decref(o);
		r = 1;
		break;
	}
	case CELL_FRAME_ERROR: {
		json_t *o = json_loads((char *)f.payload, 0, NULL);
		const char *msg = json_string_value(json_object_get(o, "message"));
		r = cell_err_msg(err, EIO, "%s", msg ? msg : "cell-init refused the process");
		json_decref(o);
		break;
	}
	case CELL_FRAME_STARTED:
		tell_started(m);
		break;
	default:
		break;
	}
	cell_frame_free(&f);
	return r;
}

static int on_stdin(struct mirror *m, struct cell_error *err)
{
	uint8_t buf[CELL_FRAME_CHUNK];
	ssize_t n = read(m->in, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0) {
		m->stdin_open = false;
		return cell_frame_send(m->sock, CELL_FRAME_STDIN_CLOSE, NULL, 0, err);
	}
	m->unacked += (uint64_t)n;
	return cell_frame_send(m->sock, CELL_FRAME_STDIN, buf, (uint32_t)n, err);
}

static int on_signal(struct mirror *m, struct cell_error *err)
{
	struct signalfd_siginfo si;
	if (read(m->sig, &si, sizeof(si)) != sizeof(si))
		return 0;
	char text[64];
	struct winsize ws;
	if (si.ssi_signo == SIGWINCH) {
		if (!m->tty || ioctl(m->in, TIOCGWINSZ, &ws) < 0)
			return 0;
		snprintf(text, sizeof(text), "{\"cols\":%u,\"rows\":%u}", ws.ws_col, ws.ws_row);
		return cell_frame_send_str(m->sock, CELL_FRAME_RESIZE, text, err);
	}
	snprintf(text, sizeof(text), "{\"signal\":%u}", si.ssi_signo);
	return cell_frame_send_str(m->sock, CELL_FRAME_SIGNAL, text, err);
}

static int mirror_loop(struct mirror *m, struct cell_error *err)
{
	int code = 255;
	for (;;) {
		bool feed = m->stdin_open && m->unacked < CELL_STDIN_WINDOW;
		struct pollfd p[3] = {
		    {m->sock, POLLIN, 0}, {m->sig, POLLIN, 0}, {feed ? 0 : -1, POLLIN, 0}};
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			return cell_err(err, errno, "poll");
		}
		int r = 0;
		if (p[0].revents)
			r = on_frame(m, &code, err);
		if (r == 1)
			return code;
		if (r == 0 && p[1].revents)
			r = on_signal(m, err);
		if (r == 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR)))
			r = on_stdin(m, err);
		if (r < 0)
			return r;
	}
}

/* The whole conversation: 0-255 the process's code, or -errno. */
/* A terminal for the process: a host pty pair, its master to the engine's console socket,
 * its slave ours (raw: bytes pass as they are; our controlling terminal: the engine's
 * resizes of the master reach us as SIGWINCH). The process itself runs on a terminal of
 * cell-init's inside (PTY_CREATE), which we feed and read. */
static int open_terminal(const char *console, int *slave, struct cell_error *err)
{
	int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0) {
		int e = errno;
		if (master >= 0)
			close(master);
		return cell_err(err, e, "a terminal for exec");
	}
	*slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	struct termios t;
	int r = *slave < 0 ? cell_err(err, errno, "a terminal for exec") : 0;
	if (r == 0 && tcgetattr(*slave, &t) == 0) {
		cfmakeraw(&t);
		tcsetattr(*slave, TCSANOW, &t);
	}
	if (r == 0 && (setsid() < 0 || ioctl(*slave, TIOCSCTTY, 0) < 0))
		r = cell_err(err, errno, "taking the exec's terminal");
	if (r == 0)
		r = oci_send_console(console, master, err);
	close(master);
	return r;
}

/* PTY_CREATE (the process, started on attach and forgotten when it ends), then PTY_ATTACH
 * on a connection of its own: the conversation mirror_loop reads. */
static int start_terminal(int dirfd, const char *id, json_t *req, int sock, int slave,
			  struct cell_error *err)
{
	char sid[40];
	snprintf(sid, sizeof(sid), "oci-exec-%d", (int)getpid());
	json_object_del(req, "stdin");
	json_object_set_new(req, "id", json_string(sid));
	json_object_set_new(req, "once", json_true());
	int create = oci_relay_connect(dirfd, id, err);
	int r = create < 0 ? create
			   : oci_relay_call(create, CELL_FRAME_PTY_CREATE, req, NULL, NULL, err);
	if (create >= 0)
		close(create);
	struct winsize ws = {.ws_col = 80, .ws_row = 24};
	ioctl(slave, TIOCGWINSZ, &ws);
	json_t *attach = json_pack("{s:s, s:b, s:i, s:i}", "id", sid, "pty", true, "cols",
				   ws.ws_col ? ws.ws_col : 80, "rows", ws.ws_row ? ws.ws_row : 24);
	_cleanup_free_ char *text = attach ? json_dumps(attach, JSON_COMPACT) : NULL;
	json_decref(attach);
	if (r == 0)
		r = text ? cell_frame_send_str(sock, CELL_FRAME_PTY_ATTACH, text, err)
			 : cell_err(err, ENOMEM, "exec");
	return r;
}

/* The whole conversation: 0-255 the process's code, or -errno. */
static int run_mirror(const struct oci_cli *cli, const struct exec_args *a, json_t *req, int ready,
		      struct cell_error *err)
{
	struct oci_container c;
	int r = oci_container_load(cli, a->id, &c, err);
	const char *status = r == 0 ? oci_status(&c.st) : NULL;
	if (r == 0 && strcmp(status, "running"))
		r = cell_err_msg(err, EINVAL, "cannot exec in a container that is %s", status);
	int sock = r == 0 ? oci_relay_connect(c.dirfd, a->id, err) : -1;
	int dirfd = r == 0 ? dup(c.dirfd) : -1;
	oci_container_close(&c); /* the lock goes: commands on it go on while this runs */
	if (r < 0 || sock < 0) {
		if (dirfd >= 0)
			close(dirfd);
		return r < 0 ? r : sock;
	}
	sigset_t set;
	sigfillset(&set);
	sigdelset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	struct mirror m = {.sock = sock,
			   .sig = signalfd(-1, &set, SFD_CLOEXEC),
			   .ready = ready,
			   .in = 0,
			   .out = 1,
			   .err = 2,
			   .tty = a->tty,
			   .stdin_open = true};
	int slave = -1;
	if (a->tty) {
		r = open_terminal(a->console, &slave, err);
		m.in = m.out = m.err = slave;
		if (r == 0)
			r = start_terminal(dirfd, a->id, req, sock, slave, err);
	} else {
		_cleanup_free_ char *text = json_dumps(req, JSON_COMPACT);
		r = text ? cell_frame_send_str(sock, CELL_FRAME_EXEC, text, err)
			 : cell_err(err, ENOMEM, "exec");
	}
	close(dirfd);
	if (r == 0)
		r = mirror_loop(&m, err);
	close(sock);
	if (slave >= 0)
		close(slave);
	if (m.sig >= 0)
		close(m.sig);
	return r;
}

int oci_cmd_exec(const struct oci_cli *cli, int argc, char **argv)
{
	struct cell_error err = {0};
	struct exec_args a;
	int r = parse_args(argc, argv, &a, &err);
	json_t *req = r == 0 ? exec_request(&a, &err) : NULL;
	if (r == 0 && !req)
		r = -EINVAL;
	if (r == 0)
		r = check_terminal(&a, &err);
	if (r < 0) {
		json_decref(req);
		free(a.env);
		return oci_fail(cli, &err);
	}
	if (a.detach) {
		/* The pid goes to the engine once the process runs, as runc's exec returns. */
		int ready[2];
		pid_t pid = pipe2(ready, O_CLOEXEC) < 0 ? -1 : fork();
		if (pid < 0) {
			json_decref(req);
			free(a.env);
			return cell_err(&err, errno, "fork"), oci_fail(cli, &err);
		}
		if (pid == 0) {
			/* The engine waits for the EOF of the stdout it gave this command when it
			 * gave no stdio for the process (a terminal): the mirror lets go of it. */
			oci_close_inherited(ready[1]);
			if (a.tty) {
				int nul = open("/dev/null", O_RDWR);
				for (int i = 0; nul >= 0 && i < 3; i++)
					dup2(nul, i);
			}
			r = run_mirror(cli, &a, req, ready[1], &err);
			_exit(r < 0 ? (oci_fail(cli, &err), 255) : r);
		}
		close(ready[1]);
		char b;
		ssize_t got = read(ready[0], &b, 1);
		close(ready[0]);
		if (got != 1)
			r = cell_err_msg(&err, EIO, "exec in %s: the process did not start", a.id);
		else
			r = oci_write_pid_file(a.pid_file, pid, &err);
		json_decref(req);
		free(a.env);
		return r < 0 ? oci_fail(cli, &err) : 0;
	}
	r = run_mirror(cli, &a, req, -1, &err);
	json_decref(req);
	free(a.env);
	return r < 0 ? oci_fail(cli, &err) : r;
}
