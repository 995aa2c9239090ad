/* cell-init: PID 1 of every sandbox.
 *
 * Started by the runtime with fexecve() as PID 1 of a new pid namespace, a clean
 * environment, cwd "/" and the relay socket at fd 3 (CELL_INIT_LISTEN_FD). It accepts any
 * number of connections from celld, each carrying one conversation (include/cell/proto.h),
 * runs commands as its own children, streams their output, reaps every process that ends
 * up parented to it, and does file operations confined beneath "/".
 *
 * `cell-init --listen PATH` is the test mode: the same server as an ordinary process
 * bound to PATH, a child subreaper so orphans of its commands still come back to it, and
 * SIGTERM/SIGINT end it.
 *
 * Nothing a client or a sandboxed process sends can make it exit: a malformed frame costs
 * only the connection that carried it. The host's SIGTERM (celld's stop with a grace) is
 * passed to every process of the sandbox, and cell-init exits once none is left. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/log.h"
#include "cell/proto.h"
#include "cell/version.h"
#include "base.h"
#include "conn.h"
#include "defer.h"
#include "exec.h"
#include "files.h"
#include "fswatch.h"
#include "oci.h"
#include "pty.h"
#include "session.h"
#include "tar.h"
#include "watch.h"

#define MAX_CONNS	   4096
#define ACCEPTS_PER_WAKEUP 64

static int listen_fd = -1;
static int spare_fd = -1;     /* given up to accept-and-close when out of fds */
static const char *test_path; /* --listen PATH, made absolute */
static char test_path_buf[PATH_MAX];
static bool quit;
static bool ending;	   /* the host asked the sandbox to end: quit once no child is left */
static bool oci_requested; /* --oci */

/* ---- requests ---- */

static void handle_ping(struct conn *c)
{
	json_t *o = json_pack("{s:i,s:s}", "pid", (int)getpid(), "version", CELL_VERSION);
	conn_send_json(c, CELL_FRAME_PONG, o);
	conn_finish(c);
}

static void handle_request(struct conn *c, uint16_t type, uint8_t *payload, uint32_t len)
{
	void (*op)(struct conn *, json_t *) = NULL;
	switch (type) {
	case CELL_FRAME_PING:
		handle_ping(c);
		return;
	case CELL_FRAME_EXEC:
		op = exec_start;
		break;
	case CELL_FRAME_FILE_STAT:
		op = files_stat;
		break;
	case CELL_FRAME_FILE_READ:
		op = files_read;
		break;
	case CELL_FRAME_FILE_WRITE:
		op = files_write;
		break;
	case CELL_FRAME_FILE_MKDIR:
		op = files_mkdir;
		break;
	case CELL_FRAME_FILE_REMOVE:
		op = files_remove;
		break;
	case CELL_FRAME_FILE_LIST:
		op = files_list;
		break;
	case CELL_FRAME_FILE_MOVE:
		op = files_move;
		break;
	case CELL_FRAME_FILE_CHMOD:
		op = files_chmod;
		break;
	case CELL_FRAME_FILE_REPLACE:
		op = files_replace;
		break;
	case CELL_FRAME_FILE_WATCH:
		op = fswatch_start;
		break;
	case CELL_FRAME_FILE_TAR:
		op = tar_start;
		break;
	case CELL_FRAME_SESSION_OPEN:
		op = session_open;
		break;
	case CELL_FRAME_SESSION_RUN:
		op = session_run;
		break;
	case CELL_FRAME_SESSION_CLOSE:
		op = session_close;
		break;
	case CELL_FRAME_PTY_CREATE:
		op = pty_create;
		break;
	case CELL_FRAME_PTY_ATTACH:
		op = pty_attach;
		break;
	case CELL_FRAME_PTY_STATUS:
		op = pty_status;
		break;
	case CELL_FRAME_PTY_CLOSE:
		op = pty_close;
		break;
	case CELL_FRAME_PTY_LIST:
		op = pty_list;
		break;
	case CELL_FRAME_PTY_CONTROL:
		op = pty_control;
		break;
	case CELL_FRAME_OCI_CREATE:
		op = oci_create;
		break;
	case CELL_FRAME_OCI_START:
		op = oci_start;
		break;
	default:
		conn_fail(c, EPROTO, "unexpected %s frame as a request",
			  cell_frame_type_name(type));
		return;
	}
	json_t *req = conn_parse_json(c, payload, len, cell_frame_type_name(type));
	if (!req)
		return;
	op(c, req);
	json_decref(req);
}

/* ---- signals and children ---- */

/* No process is left in the sandbox but us: every other one is our descendant, orphans
 * coming back to PID 1, so one without children is alone. */
static bool alone(void)
{
	siginfo_t si;
	return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD;
}

/* A signal from outside our pid namespace arrives with no sender pid; one sent from inside
 * carries its sender's, and no process may forge SI_USER's (the kernel refuses si_code >= 0
 * from rt_sigqueueinfo and pidfd_send_signal). Only the host may stop the sandbox so. */
static bool from_host(const struct signalfd_siginfo *si)
{
	return si->ssi_code == SI_USER && si->ssi_pid == 0;
}

/* The host's SIGTERM (a stop with a grace): every process of the sandbox gets it (and
 * SIGCONT, so a stopped one acts on it now), and we exit once they have all ended. What
 * outlives the grace is killed by the host. */
static void end_sandbox(void)
{
	if (!ending)
		log_debug("asked to end: SIGTERM to every process");
	ending = true;
	kill(-1, SIGTERM);
	kill(-1, SIGCONT);
	if (alone())
		quit = true;
}

static void reap_children(void)
{
	for (;;) {
		int status;
		/* WUNTRACED: a command's child stopped before its execve must not hold its
		 * request (and the client) until a deadline. */
		pid_t pid = waitpid(-1, &status, WNOHANG | WUNTRACED);
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid <= 0) {
			if (ending && alone())
				quit = true;
			return;
		}
		if (WIFSTOPPED(status)) {
			exec_stopped(pid, WSTOPSIG(status));
			continue;
		}
		/* An OCI container ends with its process. */
		if (oci_reaped(pid, status)) {
			quit = true;
			continue;
		}
		/* Orphans reparented to us are reaped and forgotten. */
		if (!exec_reaped(pid, status) && !session_reaped(pid, status) &&
		    !pty_reaped(pid, status))
			log_debug("reaped orphan %d", (int)pid);
	}
}

static void signal_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	bool child = false, end = false;
	for (;;) {
		struct signalfd_siginfo si[16];
		ssize_t n = read(w->fd, si, sizeof(si));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (size_t i = 0; i < (size_t)n / sizeof(si[0]); i++) {
			/* An OCI container's: the host's signals are its process's (the
			 * engine's kill, docker stop). */
			if (oci_mode() && si[i].ssi_signo != SIGCHLD && from_host(&si[i])) {
				oci_forward_signal((int)si[i].ssi_signo);
				continue;
			}
			switch (si[i].ssi_signo) {
			case SIGCHLD:
				child = true;
				break;
			case SIGTERM:
			case SIGINT:
				/* As PID 1, one from inside the sandbox is ignored. */
				if (test_path)
					quit = true;
				else if (si[i].ssi_signo == SIGTERM && from_host(&si[i]))
					end = true;
				break;
			default:
				break; /* everything else is drained and dropped */
			}
		}
	}
	if (end)
		end_sandbox();
	if (child || ending)
		reap_children();
}

/* ---- accepting ---- */

static void accept_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	for (int i = 0; i < ACCEPTS_PER_WAKEUP; i++) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
				continue;
			if (errno == EAGAIN)
				return;
			if ((errno == EMFILE || errno == ENFILE) && spare_fd >= 0) {
				/* Out of fds: accept with the spare and close, so the
				 * pending connection does not spin the level-triggered loop. */
				close(spare_fd);
				fd = accept4(w->fd, NULL, NULL, SOCK_CLOEXEC);
				if (fd >= 0)
					close(fd);
				spare_fd = open("/", O_PATH | O_CLOEXEC);
				log_warn("out of file descriptors: relay connection refused");
				continue;
			}
			log_warn("accept: %s", strerror(errno));
			return;
		}
		if (conn_count() >= MAX_CONNS) {
			log_warn("%d relay connections open: refusing another", conn_count());
			close(fd);
			continue;
		}
		conn_new(fd);
	}
}

/* ---- setup ---- */

static int listen_on_path(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_error("--listen %s: path too long", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error("socket: %s", strerror(errno));
		return -1;
	}
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	mode_t old = umask(0177);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0) {
		log_error("bind %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int setup_listener(void)
{
	int fd = test_path ? listen_on_path(test_path) : CELL_INIT_LISTEN_FD;
	if (fd < 0)
		return -1;
	/* The runtime may hand over a bound socket that is not listening yet; listen() on
	 * a listening socket only resets the backlog. */
	if (listen(fd, SOMAXCONN) < 0) {
		log_error("listen on fd %d: %s", fd, strerror(errno));
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		log_error("relay socket fd %d: %s", fd, strerror(errno));
		return -1;
	}
	return fd;
}

static int setup_signals(void)
{
	sigset_t all;
	sigfillset(&all);
	if (sigprocmask(SIG_BLOCK, &all, NULL) < 0)
		return -1;
	return signalfd(-1, &all, SFD_NONBLOCK | SFD_CLOEXEC);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cell-init                 (PID 1 of a sandbox, relay socket at fd %d)\n"
		"       cell-init --listen PATH   (test mode: bind PATH itself)\n"
		"       cell-init --oci           (PID 1 of an OCI container: cell-oci's)\n"
		"options: --debug  log every request\n",
		CELL_INIT_LISTEN_FD);
}

/* The socket path is unlinked at exit, after chdir("/"): keep it absolute. */
static int set_test_path(const char *p)
{
	char cwd[PATH_MAX];
	int n;
	if (p[0] == '/')
		n = snprintf(test_path_buf, sizeof(test_path_buf), "%s", p);
	else if (getcwd(cwd, sizeof(cwd)))
		n = snprintf(test_path_buf, sizeof(test_path_buf), "%s/%s", cwd, p);
	else
		n = -1;
	if (n < 0 || (size_t)n >= sizeof(test_path_buf)) {
		fprintf(stderr, "cell-init: --listen %s: path too long\n", p);
		return -1;
	}
	test_path = test_path_buf;
	return 0;
}

static int parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc) {
			if (set_test_path(argv[++i]) < 0)
				return -1;
		} else if (!strcmp(argv[i], "--oci")) {
			oci_requested = true;
		} else if (!strcmp(argv[i], "--debug")) {
			cell_log_set_level(CELL_LOG_DEBUG);
		} else if (!strcmp(argv[i], "--version")) {
			printf("cell-init %s\n", CELL_VERSION);
			exit(0);
		} else if (!strcmp(argv[i], "--help")) {
			usage(stdout);
			exit(0);
		} else {
			usage(stderr);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	cell_log_set_prefix("cell-init");
	if (parse_args(argc, argv) < 0)
		return 2;
	/* Executed from a memfd, PID 1's name would be "memfd:cell-init" in ps and top. */
	prctl(PR_SET_NAME, "cell-init", 0, 0, 0);

	/* Nobody inside may ptrace PID 1 or read its memory through /proc/1/mem: the
	 * /proc/self/exe overwrite class of CVE-2019-5736 starts there. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		log_warn("PR_SET_DUMPABLE: %s", strerror(errno));
	if (test_path && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		log_warn("PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
	umask(022);
	if (oci_requested && oci_mode_setup() < 0) {
		log_error("--oci: /dev/null: %s", strerror(errno));
		return 1;
	}
	int base = init_base_setup();

	int sfd = setup_signals();
	if (sfd < 0) {
		log_error("signalfd: %s", strerror(errno));
		return 1;
	}
	spare_fd = open("/", O_PATH | O_CLOEXEC);
	int watch = init_watch_setup();
	listen_fd = setup_listener();
	if (base < 0 || watch < 0 || listen_fd < 0) {
		log_error("cell-init setup failed: %s", strerror(base < 0    ? -base
								 : watch < 0 ? -watch
									     : errno));
		return 1;
	}
	conn_set_request(handle_request);
	int retry = conn_setup();
	if (retry < 0)
		log_warn("relay retry timer: %s (a send refused for memory ends its connection)",
			 strerror(-retry));

	/* Commands with a relative cwd, and nothing else, depend on where we stand: "/",
	 * whatever directory started us (and no directory stays pinned). */
	if (chdir("/") < 0) {
		log_error("chdir /: %s", strerror(errno));
		return 1;
	}

	exec_init();
	struct init_watch sig_w = {.fn = signal_event, .fd = sfd};
	struct init_watch listen_w = {.fn = accept_event, .fd = listen_fd};
	if (init_watch_add(&sig_w, EPOLLIN) < 0 || init_watch_add(&listen_w, EPOLLIN) < 0)
		return 1;
	log_debug("cell-init %s listening (%s)", CELL_VERSION, test_path ? test_path : "fd 3");

	while (!quit) {
		int r = init_watch_dispatch();
		if (r < 0) {
			log_error("epoll_wait: %s", strerror(-r));
			return 1;
		}
		conn_flush_dirty();
		bool freed = init_defer_reap();
		/* An idle sandbox should cost next to nothing: hand the heap that a burst of
		 * output queues grew back to the kernel once nobody is connected. */
		if (freed && conn_count() == 0)
			malloc_trim(0);
	}

	exec_kill_all();
	pty_kill_all();
	if (test_path)
		unlink(test_path);
	return oci_mode() ? oci_exit_status() : 0;
}
