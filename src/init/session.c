/* Bash sessions: one shell per session, a direct child of cell-init, alive until the
 * session is closed (or the sandbox stops).
 *
 * The shell (bash, or sh when the image has none) reads its script from a pipe on its
 * stdin, writes output to two pipes (stdout, stderr) and run statuses to a third, its fd 3.
 * A run is three lines written to the script pipe:
 *
 *     cd -- '<cwd>'                          (only when the run names one)
 *     eval '<command>' </dev/null 3>&-
 *     printf '%s %d %s\n' <token> "$?" '' >&3
 *
 * (The first step, at the open, is a cd to the first directory, made when missing, and a
 * status whose third word is "bash" when the shell is bash: PID 1 never looks up a path of
 * the sandbox's to choose; the child tries bash's execve, then sh's.)
 * The command runs in the shell itself (eval), so its functions, variables, options, traps,
 * aliases and working directory stay for the next run. It never has fd 3 (closed around the
 * eval) nor the script pipe (stdin is /dev/null), and the token is 128 random bits drawn
 * per run that the shell reads only after the eval: nothing the command prints, on any fd,
 * can end its run early or forge its status. (Root in the sandbox can reach the shell's
 * pipes through /proc and read the token there: that only disturbs its own session, which
 * it could end anyway.) The run ends at its status line (output already
 * in the pipes is sent first), so a background job that keeps the output pipes open does not
 * hold it; output written between runs is read and dropped.
 *
 * Timeout and interrupt stop the run's processes, not the shell: every process of the
 * shell's session (it is a session leader) started since the run began gets the signal
 * (SIGTERM, SIGKILL after KILL_GRACE_MS). In bash the rest of the run is dropped too, so that
 * `sleep 100; echo done` never prints "done" after its timeout: the opening step defines
 * three functions (ABORT_FUNCS) and traps ABORT_SIGNAL, which init sends the shell with
 * the first signal. The trap turns on a DEBUG trap under extdebug that skips every command
 * (and returns from every function) of the run until the status step's __cell_end, which
 * turns it off and writes the status; the next run's __cell_begin clears what a trap run late
 * (after the end) left. The run's code is then 128 + the signal. A command that redefines
 * __cell_end or __cell_begin owns its own status (it is its own shell). A command that traps
 * ABORT_SIGNAL or DEBUG itself, or a loop of builtins that skipping never ends, falls to the next
 * stages. If the run still has not ended another grace period later (a loop of builtins runs in the
 * shell itself), the shell is killed: the run ends, and the session answers EPIPE from then on.
 * Closing a session kills its shell and every process left in its session (one that made a session
 * of its own has left it). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cell/codec.h"
#include "cell/log.h"
#include "cell/proto.h"
#include "conn.h"
#include "defer.h"
#include "proc.h"
#include "session.h"
#include "watch.h"

#define SESSION_ID_MAX	 CONN_ID_MAX
#define DEFAULT_CWD	 "/workspace"
#define OPEN_DEADLINE_MS 10000
#define KILL_GRACE_MS	 2000
#define STATUS_LINE_MAX	 128
#define DRAIN_MAX	 (4u << 20) /* read at the end of a run at most, per pipe */
#define TIMEOUT_MAX_MS	 (30ull * 24 * 3600 * 1000)

/* bash only (see the top): the ABORT_SIGNAL trap that drops the rest of a run, the DEBUG trap it
 * sets (commands and functions of cell's own pass), the start of a run that clears what a
 * late trap may have left, and the end of a run that clears it and writes the status line
 * (its token, the eval's code) to fd 3, all in one command the DEBUG trap lets pass. */
#define ABORT_FUNCS                                                                                \
	"__cell_abort() { __cell_aborting=1; shopt -s extdebug; trap __cell_skip DEBUG; }\n"       \
	"__cell_skip() { [[ -z ${__cell_aborting-} || $BASH_COMMAND == __cell_* || "               \
	"${FUNCNAME[1]-} == __cell_* ]] && return 0; [[ ${#FUNCNAME[@]} -gt 2 ]] && return 2; "    \
	"return 1; }\n"                                                                            \
	"__cell_begin() { trap - DEBUG; shopt -u extdebug; __cell_aborting=; }\n"                  \
	"__cell_end() { local rc=$1; __cell_begin; printf '%s %d %s\\n' \"$2\" \"$rc\" '' >&3; "   \
	"}\n"
/* The signal that tells bash to drop the rest of a run: a real-time one, which a command's
 * own traps (USR1, INT, ...) are unlikely to claim. */
#define ABORT_SIGNAL (SIGRTMAX - 3)

enum sess_state { SESS_OPENING, SESS_IDLE, SESS_RUNNING, SESS_DEAD };

struct session;

struct sess_pipe {
	struct init_watch w;
	struct session *s;
	uint16_t type; /* CELL_FRAME_STDOUT / STDERR; 0 for the status pipe */
};

struct session {
	struct init_deferred dead;
	char id[SESSION_ID_MAX + 1];
	const char *shell; /* "bash" or "sh" */
	pid_t pid;	   /* 0 once reaped */
	int status;	   /* its wait status, once reaped */
	enum sess_state state;
	struct conn *conn; /* the SESSION_OPEN or the run being served */
	struct sess_pipe out, err, st;
	struct init_watch in; /* the script pipe, watched for EPOLLOUT while inbuf waits */
	char *inbuf;
	size_t inlen, inoff;
	struct init_watch timer;
	char token[33];
	char line[STATUS_LINE_MAX];
	size_t linelen;
	bool line_skip; /* the current line is too long: dropped up to its newline */
	uint64_t run_start_ticks, start_ns;
	int stage;     /* 0 running, 1 TERM sent, 2 KILL sent, 3 the shell killed */
	int abort_sig; /* the signal that stopped the run, once the shell was told (bash) */
	bool timed_out, paused;
};

static struct session *sessions[SESSION_MAX];
static size_t n_sessions;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct session *find(const char *id)
{
	for (size_t i = 0; i < n_sessions; i++)
		if (!strcmp(sessions[i]->id, id))
			return sessions[i];
	return NULL;
}

/* Send sig to the processes of s's session other than the shell; with since, only those
 * started at or after that tick (the current run's). */
static void signal_members(struct session *s, int sig, uint64_t since)
{
	proc_signal_session(s->pid, sig, since);
}

static void timer_set(struct session *s, uint64_t ms)
{
	if (s->timer.fd < 0)
		return;
	struct itimerspec its = {
	    .it_value = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000}};
	timerfd_settime(s->timer.fd, 0, &its, NULL);
}

/* ---- output ---- */

static void pipes_resume(struct session *s)
{
	if (!s->paused)
		return;
	s->paused = false;
	init_watch_resume(&s->out.w);
	init_watch_resume(&s->err.w);
}

/* One chunk of p to the run's connection, or dropped when no run takes it (output written
 * between runs): the bytes taken, 0 at end of file, -errno. */
static long pipe_take(struct sess_pipe *p)
{
	struct session *s = p->s;
	if (s->conn && s->state == SESS_RUNNING)
		return conn_send_from_fd(s->conn, p->type, p->w.fd, CELL_FRAME_CHUNK, -1);
	return init_read_discard(p->w.fd);
}

/* Send (or drop, with no run) what is in p now, up to DRAIN_MAX. */
static void pipe_drain(struct sess_pipe *p)
{
	size_t got = 0;
	while (p->w.fd >= 0 && got < DRAIN_MAX) {
		long n = pipe_take(p);
		if (n == 0)
			init_watch_close(&p->w);
		if (n <= 0)
			return;
		got += (size_t)n;
	}
}

static void pipe_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	struct sess_pipe *p = init_container_of(w, struct sess_pipe, w);
	struct session *s = p->s;
	for (int i = 0; i < 16 && p->w.fd >= 0; i++) {
		if (s->conn && s->state == SESS_RUNNING && conn_queued(s->conn) > CONN_HIGH_WATER) {
			/* celld is slow: stop reading, so the command waits on a full pipe. Out
			 * of the epoll set, not only masked: a hang-up would still wake the
			 * loop. */
			s->paused = true;
			init_watch_del(&s->out.w);
			init_watch_del(&s->err.w);
			conn_want_drain(s->conn);
			return;
		}
		long n = pipe_take(p);
		if (n == 0)
			init_watch_close(&p->w);
		if (n <= 0)
			return;
	}
}

/* ---- ending ---- */

static void run_end(struct session *s, int code, int sig)
{
	pipe_drain(&s->out);
	pipe_drain(&s->err);
	pipes_resume(s);
	timer_set(s, 0);
	uint64_t ms = (now_ns() - s->start_ns) / 1000000u;
	json_t *o = json_pack("{s:i,s:i,s:b,s:I}", "exit_code", code, "signal", sig, "timed_out",
			      s->timed_out, "duration_ms", (json_int_t)ms);
	struct conn *c = s->conn;
	s->conn = NULL;
	if (c) {
		conn_send_json(c, CELL_FRAME_EXIT, o);
		conn_finish(c);
	} else {
		json_decref(o);
	}
	if (s->state == SESS_RUNNING)
		s->state = SESS_IDLE;
}

static void sess_free(struct session *s)
{
	init_watch_close(&s->out.w);
	init_watch_close(&s->err.w);
	init_watch_close(&s->st.w);
	init_watch_close(&s->in);
	init_watch_close(&s->timer);
	free(s->inbuf);
	s->inbuf = NULL;
	for (size_t i = 0; i < n_sessions; i++)
		if (sessions[i] == s) {
			sessions[i] = sessions[--n_sessions];
			break;
		}
	init_defer_free(&s->dead, s);
}

/* The shell is gone (reaped, or its pipes broke): end what was going on. */
static void shell_gone(struct session *s)
{
	if (s->state == SESS_DEAD)
		return;
	enum sess_state was = s->state;
	s->state = SESS_DEAD;
	init_watch_close(&s->in);
	init_watch_close(&s->st.w);
	if (was == SESS_OPENING) {
		struct conn *c = s->conn;
		s->conn = NULL;
		if (c)
			conn_fail(c, ECHILD,
				  "session %s: its shell exited before it was ready (no /bin/bash, "
				  "no /bin/sh?)",
				  s->id);
		sess_free(s);
		return;
	}
	if (was == SESS_RUNNING) {
		int st = s->status;
		int sig = s->pid ? SIGKILL : (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
		int code = sig ? 128 + sig : WEXITSTATUS(st);
		s->state = SESS_RUNNING; /* for run_end's drain into the run */
		run_end(s, code, sig);
		s->state = SESS_DEAD;
	}
	timer_set(s, 0);
}

/* The shell first: killed after its command, it could still run the next one of the run
 * (a two-CPU machine runs it between our kills) and print what a killed run never should. */
static void kill_shell(struct session *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		kill(-s->pid, SIGKILL);
		signal_members(s, SIGKILL, 0);
	}
}

/* ---- the status pipe ---- */

static void status_line(struct session *s)
{
	char tok[33], word[8] = "";
	int rc;
	char extra;
	int n = sscanf(s->line, "%32s %d %7s %c", tok, &rc, word, &extra);
	if (n < 2 || n > 3 || strcmp(tok, s->token) || rc < 0 || rc > 255)
		return;
	s->token[0] = '\0'; /* used once */
	if (s->state == SESS_OPENING) {
		struct conn *c = s->conn;
		s->conn = NULL;
		timer_set(s, 0);
		if (rc || !c) {
			if (c)
				conn_fail(c, ENOENT,
					  "session %s: cannot enter its working directory", s->id);
			kill_shell(s);
			sess_free(s);
			return;
		}
		/* The first status names the shell that runs: bash, or the sh it fell back to. */
		s->shell = strcmp(word, "bash") ? "sh" : "bash";
		s->state = SESS_IDLE;
		conn_send_json(c, CELL_FRAME_OK,
			       json_pack("{s:i,s:s}", "pid", (int)s->pid, "shell", s->shell));
		conn_finish(c);
		return;
	}
	if (s->state == SESS_RUNNING)
		run_end(s, s->abort_sig ? 128 + s->abort_sig : rc, s->abort_sig);
}

static void status_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	struct sess_pipe *p = init_container_of(w, struct sess_pipe, w);
	struct session *s = p->s;
	char buf[512];
	ssize_t n;
	do
		n = read(w->fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n <= 0) {
		/* Only the shell holds it: it is exiting. The reap tells how. */
		init_watch_close(w);
		return;
	}
	for (ssize_t i = 0; i < n && s->st.w.fd >= 0; i++) {
		if (buf[i] != '\n') {
			if (s->linelen < sizeof(s->line) - 1)
				s->line[s->linelen++] = buf[i];
			else
				s->line_skip = true;
			continue;
		}
		s->line[s->linelen] = '\0';
		bool skip = s->line_skip;
		s->linelen = 0;
		s->line_skip = false;
		if (!skip)
			status_line(s); /* may free s: memory stays until the batch ends */
	}
}

/* ---- the script pipe ---- */

static void script_flush(struct session *s)
{
	while (s->in.fd >= 0 && s->inoff < s->inlen) {
		ssize_t n = write(s->in.fd, s->inbuf + s->inoff, s->inlen - s->inoff);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			init_watch_mod(&s->in, EPOLLOUT);
			return;
		}
		if (n < 0) {
			init_watch_close(
			    &s->in); /* EPIPE: the shell is exiting; the reap ends the run */
			break;
		}
		s->inoff += (size_t)n;
	}
	free(s->inbuf);
	s->inbuf = NULL;
	s->inlen = s->inoff = 0;
	if (s->in.fd >= 0)
		init_watch_mod(&s->in, 0);
}

static void script_event(struct init_watch *w, uint32_t events)
{
	struct session *s = init_container_of(w, struct session, in);
	if (events & (EPOLLERR | EPOLLHUP))
		init_watch_close(w); /* the shell is gone; its reap ends what was going on */
	else
		script_flush(s);
}

/* Append s in single quotes ('\'' for each quote) to b. */
static size_t quoted_len(const char *str)
{
	size_t n = 2;
	for (const char *p = str; *p; p++)
		n += *p == '\'' ? 4 : 1;
	return n;
}

static char *put_quoted(char *o, const char *str)
{
	*o++ = '\'';
	for (const char *p = str; *p; p++) {
		if (*p == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *p;
		}
	}
	*o++ = '\'';
	return o;
}

static int new_token(struct session *s)
{
	uint8_t r[16];
	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		return -EIO;
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(s->token + 2 * i, 3, "%02x", r[i]);
	return 0;
}

/* Queue the script of one step: an optional cd, an optional eval of command, the status. */
static int script_queue(struct session *s, const char *cwd, bool mkdir_cwd, const char *command)
{
	if (new_token(s) < 0)
		return -EIO;
	size_t n = 160 + (cwd ? 3 * quoted_len(cwd) + 64 : 0) +
		   (command ? quoted_len(command) + 32 : quoted_len(ABORT_FUNCS) + 64);
	char *b = malloc(n), *o = b;
	if (!b)
		return -ENOMEM;
	if (!command) {
		/* The opening step: bash gets the functions that drop an aborted run (first, so
		 * that the status is the cd's). */
		o += sprintf(o, "if [ -n \"${BASH_VERSION-}\" ]; then eval ");
		o = put_quoted(o, ABORT_FUNCS);
		o += sprintf(o, "; trap __cell_abort %d; fi\n", ABORT_SIGNAL);
	}
	if (cwd && mkdir_cwd) {
		o += sprintf(o, "{ [ -d ");
		o = put_quoted(o, cwd);
		o += sprintf(o, " ] || mkdir -p -- ");
		o = put_quoted(o, cwd);
		o += sprintf(o, "; } && ");
	}
	if (cwd) {
		o += sprintf(o, "cd -- ");
		o = put_quoted(o, cwd);
		o += sprintf(o, "\n");
	}
	bool bash = command && s->shell && !strcmp(s->shell, "bash");
	if (bash)
		o += sprintf(o, "__cell_begin\n");
	if (command) {
		o += sprintf(o, "eval ");
		o = put_quoted(o, command);
		o += sprintf(o, " </dev/null 3>&-\n");
	}
	/* The opening step also says whether the shell is bash. */
	if (bash)
		o += sprintf(o, "__cell_end $? %s\n", s->token);
	else
		o += sprintf(o, "printf '%%s %%d %%s\\n' %s \"$?\" %s >&3\n", s->token,
			     command ? "" : "\"${BASH_VERSION:+bash}\"");
	s->inbuf = b;
	s->inlen = (size_t)(o - b);
	s->inoff = 0;
	script_flush(s);
	return 0;
}

/* ---- the timer: open deadline, run timeout, kill stages ---- */

/* Stop the run with sig: its processes get it, and bash drops the rest of the run. */
static void run_stop(struct session *s, int sig)
{
	if (!s->abort_sig && s->pid > 0 && s->shell && !strcmp(s->shell, "bash")) {
		s->abort_sig = sig;
		kill(s->pid, ABORT_SIGNAL); /* pending until the command it waits for ends */
	}
	signal_members(s, sig, s->run_start_ticks);
}

static void timer_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	struct session *s = init_container_of(w, struct session, timer);
	uint64_t x;
	ssize_t n = read(w->fd, &x, sizeof(x));
	(void)n;
	if (s->state == SESS_OPENING) {
		struct conn *c = s->conn;
		s->conn = NULL;
		if (c)
			conn_fail(c, ETIMEDOUT, "session %s: its shell did not start within %d ms",
				  s->id, OPEN_DEADLINE_MS);
		kill_shell(s);
		sess_free(s);
		return;
	}
	if (s->state != SESS_RUNNING)
		return;
	if (s->stage == 0) {
		s->timed_out = true;
		s->stage = 1;
		run_stop(s, SIGTERM);
	} else if (s->stage == 1) {
		s->stage = 2;
		signal_members(s, SIGKILL, s->run_start_ticks);
	} else {
		/* The run goes on in the shell itself: only its death ends it. */
		s->stage = 3;
		kill_shell(s);
		return;
	}
	timer_set(s, KILL_GRACE_MS);
}

/* ---- frames during a run ---- */

static void run_frame(void *op, struct conn *c, uint16_t type, uint8_t *payload, uint32_t len)
{
	struct session *s = op;
	int sig = conn_parse_signal(c, type, payload, len, "a session");
	if (sig < 0 || s->state != SESS_RUNNING || s->conn != c)
		return;
	run_stop(s, sig);
	if (s->stage == 0) {
		s->stage = sig == SIGKILL ? 2 : 1;
		timer_set(s, KILL_GRACE_MS);
	}
}

static void run_drain(void *op, struct conn *c)
{
	(void)c;
	pipes_resume(op);
}

static void run_closed(void *op, struct conn *c)
{
	struct session *s = op;
	if (s->conn == c) {
		/* celld hung up: the run goes on, its output dropped, its end not reported. */
		s->conn = NULL;
		pipes_resume(s);
	}
}

static const struct conn_handler run_handler = {
    .frame = run_frame,
    .drain = run_drain,
    .closed = run_closed,
    .keep_on_eof = true,
};

static void open_closed(void *op, struct conn *c)
{
	struct session *s = op;
	if (s->conn != c)
		return;
	/* celld went away before the answer: it never learns the session, so it goes. */
	s->conn = NULL;
	if (s->state == SESS_OPENING) {
		kill_shell(s);
		sess_free(s);
	}
}

static void open_frame(void *op, struct conn *c, uint16_t type, uint8_t *payload, uint32_t len)
{
	(void)op;
	(void)payload;
	(void)len;
	conn_fail(c, EPROTO, "unexpected %s frame while a session opens",
		  cell_frame_type_name(type));
}

static const struct conn_handler open_handler = {
    .frame = open_frame,
    .closed = open_closed,
    .keep_on_eof = false,
};

/* ---- requests ---- */

static const char *req_path(struct conn *c, json_t *req, const char *what, bool *bad)
{
	json_t *j = json_object_get(req, "cwd");
	*bad = false;
	if (!j)
		return NULL;
	const char *p = json_is_string(j) ? json_string_value(j) : NULL;
	if (!p || p[0] != '/' || strlen(p) >= 4096) {
		conn_fail(c, EINVAL, "%s: cwd must be an absolute path", what);
		*bad = true;
		return NULL;
	}
	return p;
}

static int make_pipe(int p[2], bool nonblock_read)
{
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	if (nonblock_read && fcntl(p[0], F_SETFL, O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* bash when the image has it (tried by execve in the child: PID 1 never looks up a path
 * of the sandbox's), else sh. */
static void __attribute__((noreturn))
shell_child(char **envp, int in_r, int out_w, int err_w, int st_w)
{
	setsid();
	proc_default_signals();
	/* Moved above 3 first, so no dup2 below overwrites one still to be moved. */
	int fds[4] = {in_r, out_w, err_w, st_w};
	for (int i = 0; i < 4; i++) {
		fds[i] = fcntl(fds[i], F_DUPFD, 10);
		if (fds[i] < 0)
			_exit(126);
	}
	for (int i = 0; i < 4; i++)
		if (dup2(fds[i], i) < 0)
			_exit(126);
	proc_close_fds_from(4);
	proc_command_limits();
	if (chdir(DEFAULT_CWD) < 0 && chdir("/") < 0)
		_exit(126);
	proc_unblock_signals();
	char *bash[] = {"bash", "--noprofile", "--norc", NULL};
	execve("/bin/bash", bash, envp);
	execve("/usr/bin/bash", bash, envp);
	char *sh[] = {"sh", NULL};
	execve("/bin/sh", sh, envp);
	_exit(127);
}

void session_open(struct conn *c, json_t *req)
{
	const char *id = conn_req_id(c, req, "SESSION_OPEN");
	bool bad;
	const char *cwd = id ? req_path(c, req, "SESSION_OPEN", &bad) : NULL;
	if (!id || bad)
		return;
	if (find(id)) {
		conn_fail(c, EEXIST, "session %s exists", id);
		return;
	}
	if (n_sessions >= SESSION_MAX) {
		conn_fail(c, EMFILE, "a sandbox keeps at most %d sessions", SESSION_MAX);
		return;
	}
	json_t *env = json_object_get(req, "env");
	size_t ne = json_is_array(env) ? json_array_size(env) : 0;
	if (env && (!json_is_array(env) || ne > 4096)) {
		conn_fail(c, EINVAL, "SESSION_OPEN: env must be an array of at most 4096 strings");
		return;
	}
	char **envp = calloc(ne + 1, sizeof(char *));
	if (!envp) {
		conn_fail(c, ENOMEM, "SESSION_OPEN: env");
		return;
	}
	for (size_t i = 0; i < ne; i++) {
		json_t *e = json_array_get(env, i);
		if (!json_is_string(e) || !strchr(json_string_value(e), '=')) {
			free(envp);
			conn_fail(c, EINVAL, "SESSION_OPEN: env[%zu] must be a K=V string", i);
			return;
		}
		envp[i] = (char *)json_string_value(e);
	}
	struct session *s = calloc(1, sizeof(*s));
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, st[2] = {-1, -1};
	int rc = s ? 0 : -ENOMEM;
	if (!rc)
		rc = make_pipe(in, false);
	if (!rc)
		rc = make_pipe(out, true);
	if (!rc)
		rc = make_pipe(err, true);
	if (!rc)
		rc = make_pipe(st, true);
	if (!rc && fcntl(in[1], F_SETFL, O_NONBLOCK) < 0)
		rc = -errno;
	int tfd = rc ? -1 : timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (!rc && tfd < 0)
		rc = -errno;
	pid_t pid = rc ? -1 : fork();
	if (pid == 0)
		shell_child(envp, in[0], out[1], err[1], st[1]);
	free(envp);
	if (!rc && pid < 0)
		rc = -errno;
	close(in[0]);
	close(out[1]);
	close(err[1]);
	close(st[1]);
	if (rc) {
		if (tfd >= 0)
			close(tfd);
		if (in[1] >= 0)
			close(in[1]);
		if (out[0] >= 0)
			close(out[0]);
		if (err[0] >= 0)
			close(err[0]);
		if (st[0] >= 0)
			close(st[0]);
		free(s);
		conn_fail(c, -rc, "SESSION_OPEN: starting its shell: %s", strerror(-rc));
		return;
	}
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->shell = "shell"; /* until its first status line says which */
	s->pid = pid;
	s->state = SESS_OPENING;
	s->conn = c;
	s->out = (struct sess_pipe){
	    .w = {.fn = pipe_event, .fd = out[0]}, .s = s, .type = CELL_FRAME_STDOUT};
	s->err = (struct sess_pipe){
	    .w = {.fn = pipe_event, .fd = err[0]}, .s = s, .type = CELL_FRAME_STDERR};
	s->st = (struct sess_pipe){.w = {.fn = status_event, .fd = st[0]}, .s = s};
	s->in = (struct init_watch){.fn = script_event, .fd = in[1]};
	s->timer = (struct init_watch){.fn = timer_event, .fd = tfd};
	sessions[n_sessions++] = s;
	conn_attach(c, &open_handler, s);
	if (init_watch_add(&s->out.w, EPOLLIN) < 0 || init_watch_add(&s->err.w, EPOLLIN) < 0 ||
	    init_watch_add(&s->st.w, EPOLLIN) < 0 || init_watch_add(&s->in, 0) < 0 ||
	    init_watch_add(&s->timer, EPOLLIN) < 0 || script_queue(s, cwd, true, NULL) < 0) {
		s->conn = NULL;
		conn_fail(c, ENOMEM, "SESSION_OPEN: watching its shell");
		kill_shell(s);
		sess_free(s);
		return;
	}
	timer_set(s, OPEN_DEADLINE_MS);
	log_debug("session %s: its shell started as %d", s->id, (int)pid);
}

void session_run(struct conn *c, json_t *req)
{
	const char *id = conn_req_id(c, req, "SESSION_RUN");
	bool bad;
	const char *cwd = id ? req_path(c, req, "SESSION_RUN", &bad) : NULL;
	if (!id || bad)
		return;
	struct session *s = find(id);
	if (!s) {
		conn_fail(c, ENOENT, "session %s not found", id);
		return;
	}
	json_t *tj = json_object_get(req, "timeout_ms");
	if (tj && (!json_is_integer(tj) || json_integer_value(tj) < 0 ||
		   (uint64_t)json_integer_value(tj) > TIMEOUT_MAX_MS)) {
		conn_fail(c, EINVAL, "SESSION_RUN: timeout_ms must be an integer in 0..%llu",
			  (unsigned long long)TIMEOUT_MAX_MS);
		return;
	}
	json_t *cj = json_object_get(req, "command");
	uint8_t *cmd = NULL;
	size_t clen = 0;
	if (!json_is_string(cj) ||
	    cell_base64_decode(json_string_value(cj), json_string_length(cj), &cmd, &clen) < 0) {
		conn_fail(c, EINVAL, "SESSION_RUN: command must be a base64 string");
		return;
	}
	if (memchr(cmd, '\0', clen)) {
		free(cmd);
		conn_fail(c, EINVAL, "SESSION_RUN: command contains a NUL byte");
		return;
	}
	if (s->state == SESS_DEAD) {
		free(cmd);
		int st = s->status;
		if (WIFSIGNALED(st))
			conn_fail(c, EPIPE, "session %s: its shell was killed by signal %d", id,
				  WTERMSIG(st));
		else
			conn_fail(c, EPIPE, "session %s: its shell exited with code %d", id,
				  WEXITSTATUS(st));
		return;
	}
	if (s->state != SESS_IDLE || s->inbuf) {
		free(cmd);
		conn_fail(c, EBUSY, "session %s is running another command", id);
		return;
	}
	/* Output left from between runs is not this run's. */
	pipe_drain(&s->out);
	pipe_drain(&s->err);
	int rc = script_queue(s, cwd, false, (char *)cmd);
	free(cmd);
	if (rc < 0) {
		conn_fail(c, -rc, "SESSION_RUN: %s", strerror(-rc));
		return;
	}
	s->state = SESS_RUNNING;
	s->conn = c;
	s->stage = 0;
	s->abort_sig = 0;
	s->timed_out = false;
	s->start_ns = now_ns();
	s->run_start_ticks = proc_boot_ticks();
	conn_attach(c, &run_handler, s);
	conn_send_json(c, CELL_FRAME_STARTED, json_pack("{s:i}", "pid", (int)s->pid));
	if (tj && json_integer_value(tj) > 0)
		timer_set(s, (uint64_t)json_integer_value(tj));
	if (s->in.fd < 0)
		shell_gone(s); /* the script pipe broke: the reap will not come again */
}

void session_close(struct conn *c, json_t *req)
{
	const char *id = conn_req_id(c, req, "SESSION_CLOSE");
	if (!id)
		return;
	struct session *s = find(id);
	if (!s) {
		conn_fail(c, ENOENT, "session %s not found", id);
		return;
	}
	int pid = s->pid;
	kill_shell(s);
	if (s->state == SESS_RUNNING) {
		s->stage = 3;
		run_end(s, 128 + SIGKILL, SIGKILL);
	} else if (s->state == SESS_OPENING && s->conn) {
		struct conn *oc = s->conn;
		s->conn = NULL;
		conn_fail(oc, ECANCELED, "session %s was closed", id);
	}
	sess_free(s);
	conn_send_json(c, CELL_FRAME_OK, json_pack("{s:b,s:i}", "closed", 1, "pid", pid));
	conn_finish(c);
}

bool session_reaped(int pid, int status)
{
	for (size_t i = 0; i < n_sessions; i++) {
		struct session *s = sessions[i];
		if (s->pid != pid)
			continue;
		s->status = status;
		s->pid = 0;
		log_debug("session %s: its shell %d ended (status 0x%x)", s->id, pid, status);
		shell_gone(s);
		return true;
	}
	return false;
}
