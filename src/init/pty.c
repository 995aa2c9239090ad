/* PTY sessions: a process per session that outlives the relay connections attached to it.
 *
 * PTY_CREATE only records what to run: the command (through the shell's -c), or a login
 * shell ("-bash", else "-sh"), its cwd, environment and ids. The process starts on an
 * attach when none runs, in the mode that attach asks for:
 *
 *   pty   a terminal of the sandbox's own devpts (/dev/ptmx), the process its session
 *         leader with the terminal as controlling tty on 0-2 (job control works, ^C goes to
 *         the foreground process group by the kernel's rules), TERM=xterm-256color unless
 *         the session's env names one, the window size of the attach (80x24 by default);
 *   pipe  stdin, stdout and stderr on three pipes, in a session (and process group) of its
 *         own.
 *
 * Everything the process writes is read at once, attached or not, into a ring of
 * RING_SIZE bytes with a byte offset that only grows (output_offset: the bytes ever
 * written). While a connection is attached, what is read goes to it too (STDOUT; STDERR for
 * the stderr pipe); when celld does not take it fast enough (its queue above
 * CONN_HIGH_WATER), reading stops until the queue drains, so the process waits on a full
 * terminal as it would on a slow real one, and PID 1 neither blocks nor grows.
 *
 * When the process is reaped, what it left is read (a terminal's last output may still be
 * on its way: until the master reports the hang-up, at most EXIT_SETTLE_MS), EXIT goes to
 * the attached connection, and the session waits for the next attach, which starts the
 * process again with offsets going on. What its background children still hold of the
 * terminal or the pipes is closed then (they got the terminal's SIGHUP already). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "cell/codec.h"
#include "cell/log.h"
#include "cell/proto.h"
#include "base.h"
#include "conn.h"
#include "defer.h"
#include "feed.h"
#include "files.h"
#include "proc.h"
#include "pty.h"
#include "watch.h"

#define ID_LEN_MAX CONN_ID_MAX
/* One REPLAY frame carries the whole ring after its 8-byte offset. */
#define RING_SIZE	 (CELL_FRAME_MAX - 8)
#define DRAIN_MAX	 (4u << 20) /* read at the reap at most, per fd */
#define EXIT_SETTLE_MS	 200
#define READS_PER_WAKEUP 16
#define DIM_MAX		 1000
#define ENV_MAX		 4096
#define ID_MAX		 0xfffffffeu
#define DEFAULT_CWD	 "/workspace"
#define DEFAULT_PATH	 "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define DEFAULT_TERM	 "xterm-256color"
#define VIEWERS_MAX	 8

struct pty;

struct pty_out {
	struct init_watch w;
	struct pty *p;
	uint16_t type; /* CELL_FRAME_STDOUT or CELL_FRAME_STDERR */
};

struct pty {
	struct init_deferred dead;
	char id[ID_LEN_MAX + 1];
	char *cwd;	    /* NULL: DEFAULT_CWD, else its home, else "/" */
	char *command;	    /* NULL: argv, else a login shell */
	char **argv;	    /* decoded, NULL-terminated: run directly */
	char **sh_argv;	    /* sh -c 'exec "$0" "$@"' argv...: a bare name looked up (no malloc
			     * between fork and execve) */
	char *user;	    /* "user": USER and LOGNAME, its home the default cwd */
	int64_t timeout_ms; /* the process is killed this long after its start; 0 never */
	bool once;	    /* forgotten when its process ends */
	bool no_stdin;	    /* "stdin": false: a pipe-mode process reads /dev/null */
	char **env;	    /* the session's "K=V" strings, NULL-terminated */
	uint32_t uid, gid;
	bool set_ids;

	unsigned char *ring; /* RING_SIZE bytes, from the first start on */
	uint64_t total;	     /* bytes ever written: output_offset */

	pid_t pid;     /* the running process (until finished) */
	bool running;  /* started, its end not yet reported */
	bool reaped;   /* it has exited; its last output is being read */
	bool ran;      /* a process ran: mode is meaningful */
	bool is_pty;   /* the mode of the current (or last) process */
	bool has_exit; /* exit_status is the last process's */
	bool paused;   /* output not read: the attached connection is full */
	int exit_status;
	struct pty_out out, err;    /* pty mode: out is the master, err unused */
	struct feed in;		    /* stdin pipe, or a duplicate of the master */
	struct init_watch timer;    /* EXIT_SETTLE_MS after the reap */
	struct init_watch deadline; /* timeout_ms after the start */
	struct conn *conn;	    /* the attached connection */
	/* Connections attached with "share" beside it: they get its output and its end. */
	struct conn *viewers[VIEWERS_MAX];
	size_t n_viewers;
};

static struct pty *ptys[PTY_MAX];
static size_t n_ptys;
static unsigned char iobuf[CELL_FRAME_CHUNK];

static struct pty *find(const char *id)
{
	for (size_t i = 0; i < n_ptys; i++)
		if (!strcmp(ptys[i]->id, id))
			return ptys[i];
	return NULL;
}

/* The session whose running process is pid. */
static struct pty *find_pid(json_int_t pid)
{
	for (size_t i = 0; i < n_ptys; i++)
		if (ptys[i]->running && !ptys[i]->reaped && ptys[i]->pid == pid)
			return ptys[i];
	return NULL;
}

/* The session a request names by "pid" (its running process) or by "id"; NULL answered. */
static struct pty *lookup(struct conn *c, json_t *req, const char *what)
{
	json_t *jpid = json_object_get(req, "pid");
	if (jpid) {
		if (!json_is_integer(jpid) || json_integer_value(jpid) < 1 ||
		    json_integer_value(jpid) > INT_MAX) {
			conn_fail(c, EINVAL, "%s: pid must be a positive integer", what);
			return NULL;
		}
		struct pty *p = find_pid(json_integer_value(jpid));
		if (!p)
			conn_fail(c, ENOENT, "no pty session runs process %lld",
				  (long long)json_integer_value(jpid));
		return p;
	}
	const char *id = conn_req_id(c, req, what);
	if (!id)
		return NULL;
	struct pty *p = find(id);
	if (!p)
		conn_fail(c, ENOENT, "pty session %s not found", id);
	return p;
}

/* The process took (or input dropped) n bytes: the attached celld's window opens by as
 * much (CELL_STDIN_WINDOW, proto.h). */
static void stdin_taken(struct feed *f, size_t n)
{
	struct pty *p = init_container_of(f, struct pty, in);
	if (p->conn)
		conn_send_json(p->conn, CELL_FRAME_STDIN_TAKEN,
			       json_pack("{s:I}", "bytes", (json_int_t)n));
}

/* ---- the scrollback ---- */

static void ring_put(struct pty *p, const unsigned char *d, size_t n)
{
	if (n > RING_SIZE) {
		p->total += n - RING_SIZE;
		d += n - RING_SIZE;
		n = RING_SIZE;
	}
	size_t pos = (size_t)(p->total % RING_SIZE);
	size_t first = n < RING_SIZE - pos ? n : RING_SIZE - pos;
	memcpy(p->ring + pos, d, first);
	memcpy(p->ring, d + first, n - first);
	p->total += n;
}

/* REPLAY: the 8-byte big-endian offset of its first byte, then the kept bytes from since
 * (or from the oldest kept one) up to output_offset. */
static void send_replay(struct pty *p, struct conn *c, uint64_t since)
{
	uint64_t kept = p->total < RING_SIZE ? p->total : RING_SIZE;
	uint64_t from = since > p->total - kept ? since : p->total - kept;
	size_t len = (size_t)(p->total - from);
	unsigned char *b = malloc(8 + len);
	if (!b) {
		conn_fail(c, ENOMEM, "PTY_ATTACH: out of memory for the replay");
		return;
	}
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(from >> (56 - 8 * i));
	size_t pos = (size_t)(from % RING_SIZE);
	size_t first = len < RING_SIZE - pos ? len : RING_SIZE - pos;
	memcpy(b + 8, p->ring + pos, first);
	memcpy(b + 8 + first, p->ring, len - first);
	conn_send(c, CELL_FRAME_REPLAY, b, (uint32_t)(8 + len));
	free(b);
}

/* ---- output ---- */

/* full: the connection whose queue is full; its drain resumes the reading. */
static void pause_output(struct pty *p, struct conn *full)
{
	p->paused = true;
	init_watch_del(&p->out.w);
	init_watch_del(&p->err.w);
	conn_want_drain(full);
}

/* The attached connection whose queue is full, or NULL. */
static struct conn *full_conn(const struct pty *p)
{
	if (p->conn && conn_queued(p->conn) >= CONN_HIGH_WATER)
		return p->conn;
	for (size_t i = 0; i < p->n_viewers; i++)
		if (conn_queued(p->viewers[i]) >= CONN_HIGH_WATER)
			return p->viewers[i];
	return NULL;
}

static void resume_output(struct pty *p)
{
	if (!p->paused)
		return;
	p->paused = false;
	init_watch_resume(&p->out.w);
	init_watch_resume(&p->err.w);
}

/* One read of o into the ring and to the attached connection: bytes, 0 at the end (EOF;
 * EIO from a master whose terminal nobody holds any more), -EAGAIN, -errno. */
static long take(struct pty_out *o)
{
	struct pty *p = o->p;
	ssize_t n;
	do
		n = read(o->w.fd, iobuf, sizeof(iobuf));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EIO ? 0 : -errno;
	if (n == 0)
		return 0;
	ring_put(p, iobuf, (size_t)n);
	if (p->conn)
		conn_send(p->conn, o->type, iobuf, (uint32_t)n);
	for (size_t i = 0; i < p->n_viewers; i++)
		conn_send(p->viewers[i], o->type, iobuf, (uint32_t)n);
	return n;
}

static void finish(struct pty *p);
static void pty_free(struct pty *p);

static void out_ended(struct pty_out *o)
{
	init_watch_close(&o->w);
	if (o->p->reaped && o->p->running)
		finish(o->p);
}

/* What is there now, whatever the connection's queue (bounded by DRAIN_MAX). */
static void drain(struct pty_out *o)
{
	size_t got = 0;
	while (o->w.fd >= 0 && got < DRAIN_MAX) {
		long n = take(o);
		if (n == -EAGAIN)
			return;
		if (n <= 0) {
			init_watch_close(&o->w);
			return;
		}
		got += (size_t)n;
	}
}

static void out_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	struct pty_out *o = init_container_of(w, struct pty_out, w);
	struct pty *p = o->p;
	for (int i = 0; i < READS_PER_WAKEUP && o->w.fd >= 0; i++) {
		struct conn *full = full_conn(p);
		if (full) {
			pause_output(p, full);
			return;
		}
		long n = take(o);
		if (n == -EAGAIN)
			return;
		if (n <= 0) {
			out_ended(o);
			return;
		}
	}
}

/* ---- the end of a process ---- */

static void exit_numbers(int st, int *code, int *sig)
{
	*sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + *sig;
}

static void send_exit(struct conn *c, int code, int sig)
{
	conn_send_json(c, CELL_FRAME_EXIT,
		       json_pack("{s:i,s:i}", "exit_code", code, "signal", sig));
	conn_finish(c);
}

/* Close what is left of the process and tell the attached connection how it ended. */
static void finish(struct pty *p)
{
	init_watch_close(&p->out.w);
	init_watch_close(&p->err.w);
	feed_drop(&p->in);
	init_watch_close(&p->timer);
	init_watch_close(&p->deadline);
	p->running = false;
	p->reaped = false;
	p->paused = false;
	p->pid = 0;
	struct conn *c = p->conn;
	p->conn = NULL;
	int code, sig;
	exit_numbers(p->exit_status, &code, &sig);
	if (c)
		send_exit(c, code, sig);
	while (p->n_viewers)
		send_exit(p->viewers[--p->n_viewers], code, sig);
	/* Its memory lives on to the end of this turn of the loop (deferred). */
	if (p->once) {
		log_debug("pty session %s: its process ended: forgotten", p->id);
		pty_free(p);
	}
}

static void timer_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	struct pty *p = init_container_of(w, struct pty, timer);
	uint64_t x;
	ssize_t n = read(w->fd, &x, sizeof(x));
	(void)n;
	if (!p->running || !p->reaped)
		return;
	/* A background child still holds the terminal: what is there now is the last. */
	drain(&p->out);
	finish(p);
}

static void settle_later(struct pty *p)
{
	if (p->timer.fd < 0) {
		p->timer.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (p->timer.fd < 0 || init_watch_add(&p->timer, EPOLLIN) < 0) {
			if (p->timer.fd >= 0)
				close(p->timer.fd);
			p->timer.fd = -1;
			finish(p);
			return;
		}
	}
	struct itimerspec its = {.it_value = {.tv_nsec = EXIT_SETTLE_MS * 1000000L}};
	if (timerfd_settime(p->timer.fd, 0, &its, NULL) < 0)
		finish(p);
}

bool pty_reaped(int pid, int status)
{
	for (size_t i = 0; i < n_ptys; i++) {
		struct pty *p = ptys[i];
		if (!p->running || p->reaped || p->pid != pid)
			continue;
		p->reaped = true;
		p->has_exit = true;
		p->exit_status = status;
		log_debug("pty session %s: its process %d ended (status 0x%x)", p->id, pid, status);
		/* Pipes hold everything it wrote by now; a terminal passes the last of it on a
		 * little later, up to the hang-up the master reports once nobody holds the
		 * terminal. */
		drain(&p->out);
		drain(&p->err);
		if (p->is_pty && p->out.w.fd >= 0)
			settle_later(p);
		else
			finish(p);
		return true;
	}
	return false;
}

/* ---- signals ---- */

/* The foreground process group of its terminal (pty mode), else its own group. */
static void signal_fg(struct pty *p, int sig)
{
	if (!p->running || p->reaped || p->pid <= 0)
		return;
	pid_t pg = p->is_pty && p->out.w.fd >= 0 ? tcgetpgrp(p->out.w.fd) : -1;
	if (pg <= 1)
		pg = p->pid;
	if (kill(-pg, sig) < 0 && errno == ESRCH)
		kill(p->pid, sig);
}

static void kill_all(struct pty *p)
{
	if (!p->running || p->reaped || p->pid <= 0)
		return;
	if (p->is_pty && p->out.w.fd >= 0) {
		pid_t pg = tcgetpgrp(p->out.w.fd);
		if (pg > 1)
			kill(-pg, SIGKILL);
	}
	kill(-p->pid, SIGKILL);
	proc_signal_session(p->pid, SIGKILL, 0);
	kill(p->pid, SIGKILL);
}

/* ---- starting the process ---- */

static bool env_has(char *const *env, const char *name)
{
	size_t n = strlen(name);
	for (; *env; env++)
		if (!strncmp(*env, name, n) && (*env)[n] == '=')
			return true;
	return false;
}

/* The session's env plus what a terminal login has when it names none: TERM (pty mode),
 * PATH, HOME (the user's, from the sandbox's passwd), USER and LOGNAME (a "user" session).
 * The added strings live in extra. */
#define ENV_EXTRA 5
static char **build_env(const struct pty *p, bool want_pty, char extra[ENV_EXTRA][PATH_MAX + 8])
{
	size_t n = 0;
	while (p->env[n])
		n++;
	char **env = calloc(n + ENV_EXTRA + 1, sizeof(char *));
	if (!env)
		return NULL;
	memcpy(env, p->env, n * sizeof(char *));
	if (want_pty && !env_has(p->env, "TERM")) {
		snprintf(extra[0], sizeof(extra[0]), "TERM=%s", DEFAULT_TERM);
		env[n++] = extra[0];
	}
	if (!env_has(p->env, "PATH")) {
		snprintf(extra[1], sizeof(extra[1]), "PATH=%s", DEFAULT_PATH);
		env[n++] = extra[1];
	}
	if (!env_has(p->env, "HOME")) {
		char home[PATH_MAX];
		uint32_t uid = p->set_ids ? p->uid : (uint32_t)geteuid();
		if (!files_user_home(uid, home, sizeof(home)))
			snprintf(home, sizeof(home), "/");
		snprintf(extra[2], sizeof(extra[2]), "HOME=%s", home);
		env[n++] = extra[2];
	}
	if (p->user && !env_has(p->env, "USER")) {
		snprintf(extra[3], sizeof(extra[3]), "USER=%s", p->user);
		env[n++] = extra[3];
	}
	if (p->user && !env_has(p->env, "LOGNAME")) {
		snprintf(extra[4], sizeof(extra[4]), "LOGNAME=%s", p->user);
		env[n++] = extra[4];
	}
	return env;
}

static const char *env_value(char *const *env, const char *name)
{
	size_t n = strlen(name);
	for (; *env; env++)
		if (!strncmp(*env, name, n) && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

static void __attribute__((noreturn)) child_die(int code, const char *what, int e)
{
	char msg[PATH_MAX + 128];
	int n = snprintf(msg, sizeof(msg), "cell-init: %s: %s\r\n", what, strerror(e));
	if (n > 0) {
		ssize_t w = write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
		(void)w;
	}
	_exit(code);
}

/* Between fork and execve: system calls only (PID 1 has a second thread). */
static void __attribute__((noreturn))
child(const struct pty *p, char **env, int tty, int in_r, int out_w, int err_w)
{
	setsid();
	proc_default_signals();
	if (tty >= 0) {
		/* The session leader takes the terminal as its controlling tty. */
		ioctl(tty, TIOCSCTTY, 0);
		in_r = out_w = err_w = tty;
	}
	/* Moved above 2 first, so no dup2 below overwrites one still to be moved. */
	int fds[3] = {in_r, out_w, err_w};
	for (int i = 0; i < 3; i++) {
		fds[i] = fcntl(fds[i], F_DUPFD, 10);
		if (fds[i] < 0)
			_exit(126);
	}
	for (int i = 0; i < 3; i++)
		if (dup2(fds[i], i) < 0)
			_exit(126);
	proc_close_fds_from(3);
	proc_command_limits();
	if (p->set_ids) {
		const char *step = "";
		int e = proc_set_ids(p->uid, p->gid, &step);
		if (e < 0)
			child_die(126, step, -e);
	}
	if (p->cwd && p->cwd[0] != '/') {
		/* Below the home: "~" and "~/" stand for it, as a shell has them. */
		const char *home = env_value(env, "HOME");
		const char *rest = p->cwd;
		if (rest[0] == '~' && (!rest[1] || rest[1] == '/'))
			rest += rest[1] ? 2 : 1;
		char path[2 * PATH_MAX + 2];
		snprintf(path, sizeof(path), "%s/%s", home ? home : "", rest);
		if (chdir(path) < 0)
			child_die(126, path, errno);
	} else if (p->cwd) {
		if (chdir(p->cwd) < 0)
			child_die(126, p->cwd, errno);
	} else if (p->user) {
		/* A named user starts in its home, as a login does. */
		const char *home = env_value(env, "HOME");
		if (!home || chdir(home) < 0)
			if (chdir("/") < 0)
				child_die(126, "/", errno);
	} else if (chdir(DEFAULT_CWD) < 0) {
		const char *home = env_value(env, "HOME");
		if (!home || chdir(home) < 0)
			if (chdir("/") < 0)
				child_die(126, "/", errno);
	}
	proc_unblock_signals();
	if (p->argv) {
		/* A path runs as it is; a bare name is looked up in the env's PATH by the
		 * shell (PID 1 searches no path of the sandbox's). */
		if (strchr(p->argv[0], '/')) {
			execve(p->argv[0], p->argv, env);
			/* E2B's SDKs run every command as /bin/bash -l -c: an image without
			 * bash (alpine, busybox) runs it with its sh, as a terminal does, named
			 * sh (a multi-call busybox picks its applet by that name). */
			if (errno == ENOENT && !strcmp(p->argv[0], "/bin/bash")) {
				p->argv[0] = (char *)"sh";
				execve("/bin/sh", p->argv, env);
				p->argv[0] = (char *)"/bin/bash";
			}
			child_die(errno == ENOENT ? 127 : 126, p->argv[0], errno);
		}
		execve("/bin/sh", p->sh_argv, env);
		child_die(127, "executing /bin/sh to look the command up", errno);
	}
	/* bash when the image has it (found by execve: PID 1 looks up no path of the
	 * sandbox's), else sh; a login shell without a command. */
	char *bash[] = {p->command ? "bash" : "-bash", "-c", p->command, NULL};
	char *sh[] = {p->command ? "sh" : "-sh", "-c", p->command, NULL};
	if (!p->command)
		bash[1] = sh[1] = NULL;
	execve("/bin/bash", bash, env);
	execve("/usr/bin/bash", bash, env);
	execve("/bin/sh", sh, env);
	child_die(127, "executing /bin/bash or /bin/sh", errno);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The terminal: a master of the sandbox's devpts and its slave, sized. */
static int open_terminal(struct pty *p, unsigned cols, unsigned rows, int *mfd, int *sfd)
{
	*mfd = posix_openpt(O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (*mfd < 0)
		return -errno;
	/* No grantpt: devpts gives the slave its owner and mode itself, and PID 1 never
	 * consults the sandbox's group database through a library. unlockpt fails on
	 * anything but a master (a /dev/ptmx that root inside replaced). */
	if (unlockpt(*mfd) < 0)
		return -errno;
	/* The peer by the master itself, not by a path under /dev/pts that the sandbox could
	 * have replaced; the path only on a kernel without TIOCGPTPEER. */
	*sfd = ioctl(*mfd, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*sfd < 0) {
		char name[64];
		if (ptsname_r(*mfd, name, sizeof(name)) != 0)
			return -ENOTTY;
		*sfd = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (*sfd < 0)
			return -errno;
	}
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
	if (ioctl(*mfd, TIOCSWINSZ, &ws) < 0)
		return -errno;
	/* The user owns its terminal, as a login gives it. */
	if (p->set_ids && fchown(*sfd, p->uid, (gid_t)-1) < 0)
		log_debug("pty session %s: fchown of its terminal: %s", p->id, strerror(errno));
	return 0;
}

static void deadline_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	struct pty *p = init_container_of(w, struct pty, deadline);
	uint64_t x;
	ssize_t n = read(w->fd, &x, sizeof(x));
	(void)n;
	log_debug("pty session %s: its time (%lld ms) is up: killed", p->id,
		  (long long)p->timeout_ms);
	kill_all(p);
}

/* timeout_ms from now its process is killed. Without a timer it must not run unbounded. */
static void arm_deadline(struct pty *p)
{
	if (p->timeout_ms <= 0)
		return;
	p->deadline =
	    (struct init_watch){.fn = deadline_event,
				.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)};
	struct itimerspec its = {.it_value = {.tv_sec = p->timeout_ms / 1000,
					      .tv_nsec = (p->timeout_ms % 1000) * 1000000L}};
	if (p->deadline.fd < 0 || timerfd_settime(p->deadline.fd, 0, &its, NULL) < 0 ||
	    init_watch_add(&p->deadline, EPOLLIN) < 0) {
		log_warn("pty session %s: no timer for its deadline: killed", p->id);
		init_watch_close(&p->deadline);
		kill_all(p);
	}
}

static int start(struct pty *p, bool want_pty, unsigned cols, unsigned rows)
{
	if (!p->ring) {
		p->ring = malloc(RING_SIZE);
		if (!p->ring)
			return -ENOMEM;
	}
	int mfd = -1, sfd = -1, infd = -1, in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	int rc = 0;
	if (want_pty) {
		rc = open_terminal(p, cols, rows, &mfd, &sfd);
		if (!rc && (infd = fcntl(mfd, F_DUPFD_CLOEXEC, 3)) < 0)
			rc = -errno;
	} else if ((p->no_stdin ? (in[0] = fcntl(init_base.devnull_fd, F_DUPFD_CLOEXEC, 3))
				: pipe2(in, O_CLOEXEC)) < 0 ||
		   pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
		   fcntl(out[0], F_SETFL, O_NONBLOCK) < 0 ||
		   fcntl(err[0], F_SETFL, O_NONBLOCK) < 0) {
		/* Non-blocking on PID 1's ends only: the process writes as to any pipe. */
		rc = -errno;
	}
	char extra[ENV_EXTRA][PATH_MAX + 8];
	char **env = rc ? NULL : build_env(p, want_pty, extra);
	if (!rc && !env)
		rc = -ENOMEM;
	pid_t pid = rc ? -1 : fork();
	if (pid == 0)
		child(p, env, sfd, in[0], out[1], err[1]);
	if (!rc && pid < 0)
		rc = -errno;
	free(env);
	close_fd(&sfd);
	close_fd(&in[0]);
	close_fd(&out[1]);
	close_fd(&err[1]);
	if (rc) {
		close_fd(&mfd);
		close_fd(&infd);
		close_fd(&in[1]);
		close_fd(&out[0]);
		close_fd(&err[0]);
		return rc;
	}
	p->pid = pid;
	p->running = p->ran = true;
	p->reaped = p->has_exit = p->paused = false;
	p->is_pty = want_pty;
	p->out = (struct pty_out){.w = {.fn = out_event, .fd = want_pty ? mfd : out[0]},
				  .p = p,
				  .type = CELL_FRAME_STDOUT};
	p->err = (struct pty_out){.w = {.fn = out_event, .fd = want_pty ? -1 : err[0]},
				  .p = p,
				  .type = CELL_FRAME_STDERR};
	rc = init_watch_add(&p->out.w, EPOLLIN);
	if (!rc && p->err.w.fd >= 0)
		rc = init_watch_add(&p->err.w, EPOLLIN);
	/* Without stdin (in[1] -1) the feed stays closed: input is refused (EPIPE). */
	if (!rc)
		rc = feed_open(&p->in, want_pty ? infd : in[1]);
	else if ((want_pty ? infd : in[1]) >= 0)
		close(want_pty ? infd : in[1]);
	if (rc) {
		/* Its output could not be watched: it must not run. Its reap finishes it. */
		log_warn("pty session %s: watching its process: %s", p->id, strerror(-rc));
		kill_all(p);
		return rc;
	}
	arm_deadline(p);
	log_debug("pty session %s: %s process %d started", p->id, want_pty ? "pty" : "pipe",
		  (int)pid);
	return 0;
}

/* ---- the attached connection ---- */

static int get_dim(struct conn *c, json_t *req, const char *what, const char *key, unsigned *out)
{
	json_t *j = json_object_get(req, key);
	if (!j)
		return 0;
	if (!json_is_integer(j) || json_integer_value(j) < 1 || json_integer_value(j) > DIM_MAX) {
		conn_fail(c, EINVAL, "%s: %s must be an integer in 1..%d", what, key, DIM_MAX);
		return -1;
	}
	*out = (unsigned)json_integer_value(j);
	return 0;
}

static void resize(struct pty *p, unsigned cols, unsigned rows)
{
	if (!p->is_pty || p->out.w.fd < 0)
		return;
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
	/* The kernel sends SIGWINCH to the terminal's foreground process group. */
	if (ioctl(p->out.w.fd, TIOCSWINSZ, &ws) < 0)
		log_debug("pty session %s: TIOCSWINSZ: %s", p->id, strerror(errno));
}

static void frame_resize(struct pty *p, struct conn *c, uint8_t *payload, uint32_t len)
{
	json_t *req = conn_parse_json(c, payload, len, "RESIZE");
	if (!req)
		return;
	struct winsize cur = {0};
	if (p->is_pty && p->out.w.fd >= 0)
		ioctl(p->out.w.fd, TIOCGWINSZ, &cur);
	unsigned cols = cur.ws_col ? cur.ws_col : 80, rows = cur.ws_row ? cur.ws_row : 24;
	bool ok = get_dim(c, req, "RESIZE", "cols", &cols) == 0 &&
		  get_dim(c, req, "RESIZE", "rows", &rows) == 0;
	json_decref(req);
	if (ok)
		resize(p, cols, rows);
}

static void attached_frame(void *op, struct conn *c, uint16_t type, uint8_t *payload, uint32_t len)
{
	struct pty *p = op;
	bool live = p->running && !p->reaped;
	switch (type) {
	case CELL_FRAME_STDIN:
		/* After the process ended, or its stdin was closed: dropped. */
		if (live && feed_write(&p->in, payload, len) == -ENOBUFS)
			conn_fail(c, ENOBUFS,
				  "STDIN: more than %u bytes wait for pty session %s to read them",
				  FEED_MAX, p->id);
		return;
	case CELL_FRAME_STDIN_CLOSE:
		if (!live)
			return;
		if (p->is_pty) {
			/* A terminal has no end of its input: its EOF character is what a
			 * user types for one. */
			struct termios t;
			if (p->out.w.fd >= 0 && tcgetattr(p->out.w.fd, &t) == 0) {
				char eof = (char)t.c_cc[VEOF];
				if (feed_write(&p->in, &eof, 1) == -ENOBUFS)
					conn_fail(c, ENOBUFS,
						  "STDIN_CLOSE: input of pty session "
						  "%s is full",
						  p->id);
			}
		} else {
			feed_close(&p->in);
		}
		return;
	case CELL_FRAME_RESIZE:
		frame_resize(p, c, payload, len);
		return;
	default: {
		int sig = conn_parse_signal(c, type, payload, len, "a pty session");
		if (sig > 0)
			signal_fg(p, sig);
		return;
	}
	}
}

static void attached_drain(void *op, struct conn *c)
{
	(void)c;
	resume_output(op);
}

static void attached_closed(void *op, struct conn *c)
{
	struct pty *p = op;
	for (size_t i = 0; i < p->n_viewers; i++)
		if (p->viewers[i] == c) {
			p->viewers[i] = p->viewers[--p->n_viewers];
			resume_output(p);
			return;
		}
	if (p->conn != c)
		return;
	/* Detached: the process runs on, its output goes to the scrollback only. */
	p->conn = NULL;
	resume_output(p);
}

static const struct conn_handler attached_handler = {
    .frame = attached_frame,
    .drain = attached_drain,
    .closed = attached_closed,
    .keep_on_eof = true,
};

/* ---- requests ---- */

static void pty_free(struct pty *p)
{
	init_watch_close(&p->out.w);
	init_watch_close(&p->err.w);
	feed_drop(&p->in);
	init_watch_close(&p->timer);
	init_watch_close(&p->deadline);
	free(p->ring);
	free(p->cwd);
	free(p->command);
	free(p->user);
	if (p->argv)
		for (char **a = p->argv; *a; a++)
			free(*a);
	free(p->argv);
	free(p->sh_argv);
	if (p->env)
		for (char **e = p->env; *e; e++)
			free(*e);
	free(p->env);
	for (size_t i = 0; i < n_ptys; i++)
		if (ptys[i] == p) {
			ptys[i] = ptys[--n_ptys];
			break;
		}
	init_defer_free(&p->dead, p);
}

static int get_id(json_t *req, const char *key, uint32_t *out, bool *present,
		  struct cell_error *err)
{
	json_t *j = json_object_get(req, key);
	*present = j != NULL;
	if (!j)
		return 0;
	if (!json_is_integer(j) || json_integer_value(j) < 0 ||
	    (uint64_t)json_integer_value(j) > ID_MAX)
		return cell_err(err, EINVAL, "PTY_CREATE: %s must be an integer in 0..%u", key,
				ID_MAX);
	*out = (uint32_t)json_integer_value(j);
	return 0;
}

#define ARGV_MAX     4096
#define TIMEOUT_MAX  (365LL * 24 * 3600 * 1000)
#define USER_LEN_MAX 256

static int parse_argv(struct pty *p, json_t *argv, struct cell_error *err)
{
	size_t n = json_is_array(argv) ? json_array_size(argv) : 0;
	if (!n || n > ARGV_MAX)
		return cell_err(err, EINVAL,
				"PTY_CREATE: argv must be an array of 1..%d base64 strings",
				ARGV_MAX);
	if (!(p->argv = calloc(n + 1, sizeof(char *))))
		return cell_err(err, ENOMEM, "PTY_CREATE: argv");
	for (size_t i = 0; i < n; i++) {
		json_t *a = json_array_get(argv, i);
		uint8_t *buf;
		size_t len;
		if (!json_is_string(a) ||
		    cell_base64_decode(json_string_value(a), json_string_length(a), &buf, &len) < 0)
			return cell_err(err, EINVAL,
					"PTY_CREATE: argv[%zu] must be a base64 string", i);
		p->argv[i] = (char *)buf;
		if (memchr(buf, '\0', len) || (i == 0 && !len))
			return cell_err(err, EINVAL,
					"PTY_CREATE: argv[%zu] must be %swithout a NUL byte", i,
					i ? "" : "non-empty, ");
	}
	if (!(p->sh_argv = calloc(n + 4, sizeof(char *))))
		return cell_err(err, ENOMEM, "PTY_CREATE: argv");
	p->sh_argv[0] = (char *)"sh";
	p->sh_argv[1] = (char *)"-c";
	p->sh_argv[2] = (char *)"exec \"$0\" \"$@\"";
	memcpy(p->sh_argv + 3, p->argv, n * sizeof(char *));
	return 0;
}

/* argv, user, timeout_ms, once. A user sets the ids (*has_uid) unless it is optional and
 * the sandbox has no such account. */
static int create_parse_more(struct pty *p, json_t *req, bool *has_uid, struct cell_error *err)
{
	json_t *argv = json_object_get(req, "argv");
	if (argv && p->command)
		return cell_err(err, EINVAL, "PTY_CREATE: command and argv are mutually exclusive");
	if (argv && parse_argv(p, argv, err) < 0)
		return -err->code;
	json_t *to = json_object_get(req, "timeout_ms");
	if (to && (!json_is_integer(to) || json_integer_value(to) < 0 ||
		   json_integer_value(to) > TIMEOUT_MAX))
		return cell_err(err, EINVAL, "PTY_CREATE: timeout_ms must be an integer in 0..%lld",
				TIMEOUT_MAX);
	p->timeout_ms = to ? json_integer_value(to) : 0;
	json_t *once = json_object_get(req, "once");
	json_t *opt = json_object_get(req, "user_optional");
	if ((once && !json_is_boolean(once)) || (opt && !json_is_boolean(opt)))
		return cell_err(err, EINVAL, "PTY_CREATE: once and user_optional are booleans");
	p->once = json_is_true(once);
	json_t *in = json_object_get(req, "stdin");
	if (in && !json_is_boolean(in))
		return cell_err(err, EINVAL, "PTY_CREATE: stdin must be a boolean");
	p->no_stdin = json_is_false(in);
	json_t *user = json_object_get(req, "user");
	if (!user)
		return 0;
	const char *name = json_string_value(user);
	if (!name || !name[0] || json_string_length(user) > USER_LEN_MAX ||
	    strlen(name) != json_string_length(user) || strchr(name, ':') || strchr(name, '\n'))
		return cell_err(err, EINVAL, "PTY_CREATE: user must be a user name");
	if (*has_uid)
		return cell_err(err, EINVAL, "PTY_CREATE: user and uid are mutually exclusive");
	uint32_t uid;
	if (files_user_uid(name, &uid) < 0) {
		if (json_is_true(opt))
			return 0; /* root, as the sandbox has no such account */
		return cell_err(err, ENOENT,
				"PTY_CREATE: no user '%s' in the sandbox's /etc/passwd", name);
	}
	p->uid = uid;
	*has_uid = true;
	if (!(p->user = strdup(name)))
		return cell_err(err, ENOMEM, "PTY_CREATE: user");
	return 0;
}

static int create_parse(struct pty *p, json_t *req, struct cell_error *err)
{
	json_t *cwd = json_object_get(req, "cwd");
	if (cwd) {
		const char *s = json_is_string(cwd) ? json_string_value(cwd) : NULL;
		/* Relative (or "~", "~/..."): below the user's home, for a "user" session. */
		bool rel_ok = json_object_get(req, "user") != NULL;
		if (!s || !s[0] || (s[0] != '/' && !rel_ok) || strlen(s) >= PATH_MAX)
			return cell_err(err, EINVAL,
					"PTY_CREATE: cwd must be an absolute path (or, with a "
					"user, one relative to its home)");
		if (!(p->cwd = strdup(s)))
			return cell_err(err, ENOMEM, "PTY_CREATE: cwd");
	}
	json_t *cmd = json_object_get(req, "command");
	if (cmd) {
		uint8_t *buf;
		size_t len;
		if (!json_is_string(cmd) ||
		    cell_base64_decode(json_string_value(cmd), json_string_length(cmd), &buf,
				       &len) < 0)
			return cell_err(err, EINVAL, "PTY_CREATE: command must be a base64 string");
		p->command = (char *)buf;
		if (memchr(buf, '\0', len) || !len)
			return cell_err(
			    err, EINVAL,
			    "PTY_CREATE: command must be non-empty, without a NUL byte");
	}
	json_t *env = json_object_get(req, "env");
	size_t n = json_is_array(env) ? json_array_size(env) : 0;
	if (env && (!json_is_array(env) || n > ENV_MAX))
		return cell_err(err, EINVAL,
				"PTY_CREATE: env must be an array of at most %d \"K=V\" strings",
				ENV_MAX);
	if (!(p->env = calloc(n + 1, sizeof(char *))))
		return cell_err(err, ENOMEM, "PTY_CREATE: env");
	for (size_t i = 0; i < n; i++) {
		const char *s = json_string_value(json_array_get(env, i));
		if (!s || s[0] == '=' || !strchr(s, '='))
			return cell_err(err, EINVAL,
					"PTY_CREATE: env[%zu] must be a \"K=V\" string", i);
		if (!(p->env[i] = strdup(s)))
			return cell_err(err, ENOMEM, "PTY_CREATE: env");
	}
	bool has_uid, has_gid;
	int r = get_id(req, "uid", &p->uid, &has_uid, err);
	if (r == 0)
		r = get_id(req, "gid", &p->gid, &has_gid, err);
	if (r == 0)
		r = create_parse_more(p, req, &has_uid, err);
	if (r < 0)
		return r;
	/* uid without gid: the user's primary group from the sandbox's passwd, as EXEC. */
	uint32_t pg;
	if (has_uid && !has_gid)
		p->gid = files_user_gid(p->uid, &pg) && pg <= ID_MAX ? pg : 0;
	p->set_ids = has_uid || has_gid;
	return 0;
}

void pty_create(struct conn *c, json_t *req)
{
	const char *id = conn_req_id(c, req, "PTY_CREATE");
	if (!id)
		return;
	if (find(id)) {
		conn_fail(c, EEXIST, "pty session %s exists", id);
		return;
	}
	if (n_ptys >= PTY_MAX) {
		conn_fail(c, EMFILE, "a sandbox keeps at most %d pty sessions", PTY_MAX);
		return;
	}
	struct pty *p = calloc(1, sizeof(*p));
	if (!p) {
		conn_fail(c, ENOMEM, "PTY_CREATE: out of memory");
		return;
	}
	snprintf(p->id, sizeof(p->id), "%s", id);
	p->out.w.fd = p->err.w.fd = -1;
	p->timer = (struct init_watch){.fn = timer_event, .fd = -1};
	p->deadline = (struct init_watch){.fn = deadline_event, .fd = -1};
	p->in.taken = stdin_taken;
	feed_open(&p->in, -1);
	ptys[n_ptys++] = p;
	struct cell_error err = {0};
	if (create_parse(p, req, &err) < 0) {
		pty_free(p);
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	conn_send_json(c, CELL_FRAME_OK, json_pack("{s:s}", "id", p->id));
	conn_finish(c);
}

void pty_attach(struct conn *c, json_t *req)
{
	const char *what = "PTY_ATTACH";
	json_t *jp = json_object_get(req, "pty");
	if (!json_is_boolean(jp)) {
		conn_fail(c, EINVAL, "%s: pty must be a boolean", what);
		return;
	}
	json_t *js = json_object_get(req, "since");
	if (js && (!json_is_integer(js) || json_integer_value(js) < 0)) {
		conn_fail(c, EINVAL, "%s: since must be a non-negative integer", what);
		return;
	}
	json_t *jt = json_object_get(req, "takeover");
	json_t *jsh = json_object_get(req, "share");
	if ((jt && !json_is_boolean(jt)) || (jsh && !json_is_boolean(jsh))) {
		conn_fail(c, EINVAL, "%s: takeover and share must be booleans", what);
		return;
	}
	unsigned cols = 80, rows = 24;
	bool sized = json_object_get(req, "cols") || json_object_get(req, "rows");
	if (get_dim(c, req, what, "cols", &cols) < 0 || get_dim(c, req, what, "rows", &rows) < 0)
		return;
	struct pty *p = lookup(c, req, what);
	if (!p)
		return;
	const char *id = p->id;
	bool share = json_is_true(jsh) && p->running && !p->reaped && (p->conn || p->n_viewers);
	if (share && p->n_viewers >= VIEWERS_MAX) {
		conn_fail(c, EBUSY, "pty session %s has %d clients attached beside its own", id,
			  VIEWERS_MAX);
		return;
	}
	if (!share && (p->conn || p->n_viewers)) {
		if (!json_is_true(jt)) {
			conn_fail(c, EBUSY,
				  "pty session %s has another client attached (takeover takes it "
				  "over)",
				  id);
			return;
		}
		struct conn *old = p->conn;
		p->conn = NULL;
		if (old)
			conn_fail(old, ECONNABORTED, "taken over");
		while (p->n_viewers)
			conn_fail(p->viewers[--p->n_viewers], ECONNABORTED, "taken over");
		resume_output(p);
	}
	/* Its end is still settling (the last output of a terminal): settled now. */
	if (p->running && p->reaped) {
		drain(&p->out);
		finish(p);
	}
	if (!p->running && p->once && p->ran) {
		conn_fail(c, ENOENT, "the process of pty session %s has ended", id);
		return;
	}
	if (!p->running) {
		int r = start(p, json_is_true(jp), cols, rows);
		if (r < 0) {
			conn_fail(c, -r, "%s: starting pty session %s: %s", what, id, strerror(-r));
			return;
		}
	} else if (sized) {
		resize(p, cols, rows);
	}
	if (share)
		p->viewers[p->n_viewers++] = c;
	else
		p->conn = c;
	conn_attach(c, &attached_handler, p);
	conn_send_json(c, CELL_FRAME_OK,
		       json_pack("{s:s,s:i,s:I}", "mode", p->is_pty ? "pty" : "pipe", "pid",
				 (int)p->pid, "output_offset", (json_int_t)p->total));
	if (js && (uint64_t)json_integer_value(js) < p->total)
		send_replay(p, c, (uint64_t)json_integer_value(js));
}

void pty_status(struct conn *c, json_t *req)
{
	struct pty *p = lookup(c, req, "PTY_STATUS");
	if (!p)
		return;
	bool running = p->running && !p->reaped;
	json_t *o =
	    json_pack("{s:b,s:I}", "running", running, "output_offset", (json_int_t)p->total);
	if (o && p->ran)
		json_object_set_new(o, "mode", json_string(p->is_pty ? "pty" : "pipe"));
	if (o && running)
		json_object_set_new(o, "pid", json_integer(p->pid));
	if (o && !running && p->has_exit) {
		int code, sig;
		exit_numbers(p->exit_status, &code, &sig);
		json_object_set_new(o, "exit_code", json_integer(code));
	}
	conn_send_json(c, CELL_FRAME_OK, o);
	conn_finish(c);
}

void pty_close(struct conn *c, json_t *req)
{
	struct pty *p = lookup(c, req, "PTY_CLOSE");
	if (!p)
		return;
	bool live = p->running && !p->reaped;
	kill_all(p);
	struct conn *held = p->conn;
	p->conn = NULL;
	/* Its process group is killed: the attached clients see it end so (or as it ended,
	 * when it had already). */
	int code = 128 + SIGKILL, sig = SIGKILL;
	if (!live && p->has_exit)
		exit_numbers(p->exit_status, &code, &sig);
	if (held)
		send_exit(held, code, sig);
	while (p->n_viewers)
		send_exit(p->viewers[--p->n_viewers], code, sig);
	log_debug("pty session %s closed", p->id);
	pty_free(p);
	conn_send_json(c, CELL_FRAME_OK, json_pack("{s:b}", "closed", 1));
	conn_finish(c);
}

void pty_kill_all(void)
{
	for (size_t i = 0; i < n_ptys; i++)
		kill_all(ptys[i]);
}

void pty_list(struct conn *c, json_t *req)
{
	(void)req;
	json_t *v = json_array();
	for (size_t i = 0; v && i < n_ptys; i++) {
		struct pty *p = ptys[i];
		if (p->running && !p->reaped)
			json_array_append_new(v, json_pack("{s:s,s:i,s:s}", "id", p->id, "pid",
							   (int)p->pid, "mode",
							   p->is_pty ? "pty" : "pipe"));
	}
	conn_send_json(c, CELL_FRAME_OK, v ? json_pack("{s:o}", "sessions", v) : NULL);
	conn_finish(c);
}

/* What PTY_CONTROL asks of p's running process, in order; 0 or a failure answered. */
static int control(struct pty *p, struct conn *c, json_t *req)
{
	const char *what = "PTY_CONTROL";
	json_t *in = json_object_get(req, "stdin"), *cl = json_object_get(req, "stdin_close");
	json_t *sig = json_object_get(req, "signal");
	if (cl && !json_is_boolean(cl))
		return conn_fail(c, EINVAL, "%s: stdin_close must be a boolean", what), -1;
	if (sig &&
	    (!json_is_integer(sig) || json_integer_value(sig) < 1 || json_integer_value(sig) > 64))
		return conn_fail(c, EINVAL, "%s: signal must be an integer in 1..64", what), -1;
	unsigned cols = 0, rows = 0;
	if (get_dim(c, req, what, "cols", &cols) < 0 || get_dim(c, req, what, "rows", &rows) < 0)
		return -1;
	if (in) {
		uint8_t *buf = NULL;
		size_t len = 0;
		if (!json_is_string(in) ||
		    cell_base64_decode(json_string_value(in), json_string_length(in), &buf, &len) <
			0)
			return conn_fail(c, EINVAL, "%s: stdin must be a base64 string", what), -1;
		int r = len ? feed_write(&p->in, buf, len) : 0;
		free(buf);
		if (r == -EPIPE || (!r && !feed_is_open(&p->in) && len))
			return conn_fail(c, EPIPE, "the stdin of process %d is closed",
					 (int)p->pid),
			       -1;
		if (r == -ENOBUFS)
			return conn_fail(c, ENOBUFS,
					 "more than %u bytes wait for process %d to read them",
					 FEED_MAX, (int)p->pid),
			       -1;
	}
	if (json_is_true(cl)) {
		struct termios t;
		if (!p->is_pty)
			feed_close(&p->in);
		else if (p->out.w.fd >= 0 && tcgetattr(p->out.w.fd, &t) == 0) {
			char eof = (char)t.c_cc[VEOF];
			if (feed_write(&p->in, &eof, 1) == -ENOBUFS)
				return conn_fail(c, ENOBUFS, "%s: the input of process %d is full",
						 what, (int)p->pid),
				       -1;
		}
	}
	if (cols || rows) {
		struct winsize cur = {0};
		if (p->is_pty && p->out.w.fd >= 0)
			ioctl(p->out.w.fd, TIOCGWINSZ, &cur);
		resize(p, cols ? cols : (cur.ws_col ? cur.ws_col : 80),
		       rows ? rows : (cur.ws_row ? cur.ws_row : 24));
	}
	if (sig && json_integer_value(sig) == SIGKILL)
		kill_all(p);
	else if (sig)
		signal_fg(p, (int)json_integer_value(sig));
	return 0;
}

void pty_control(struct conn *c, json_t *req)
{
	struct pty *p = lookup(c, req, "PTY_CONTROL");
	if (!p)
		return;
	if (!p->running || p->reaped) {
		conn_fail(c, ESRCH, "the process of pty session %s is not running", p->id);
		return;
	}
	if (control(p, c, req) < 0)
		return;
	conn_send_json(c, CELL_FRAME_OK, json_object());
	conn_finish(c);
}
