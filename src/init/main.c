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
 * only the connection that carried it. */
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
#include "init.h"

#define MAX_CONNS	   4096
#define ACCEPTS_PER_WAKEUP 64
#define NOFILE_WANTED	   65536

int init_rootfd = -1;
int init_devnull_fd = -1;
struct rlimit init_nofile_orig;

static int epfd = -1;
static int listen_fd = -1;
static int spare_fd = -1;     /* given up to accept-and-close when out of fds */
static const char *test_path; /* --listen PATH, made absolute */
static char test_path_buf[PATH_MAX];
static bool quit;
static struct init_deferred *graveyard;

/* ---- event loop ---- */

int init_watch_add(struct init_watch *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, w->fd, &ev) < 0) {
		int e = errno;
		log_error("epoll add fd %d: %s", w->fd, strerror(e));
		return -e;
	}
	w->active = true;
	return 0;
}

int init_watch_mod(struct init_watch *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};
	if (epoll_ctl(epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0) {
		int e = errno;
		log_error("epoll mod fd %d: %s", w->fd, strerror(e));
		return -e;
	}
	return 0;
}

void init_watch_del(struct init_watch *w)
{
	if (!w->active)
		return;
	epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
	w->active = false;
}

void init_defer_free(struct init_deferred *d, void *obj)
{
	d->obj = obj;
	d->next = graveyard;
	graveyard = d;
}

static void reap_graveyard(void)
{
	while (graveyard) {
		struct init_deferred *d = graveyard;
		graveyard = d->next;
		free(d->obj); /* d lives inside obj */
	}
}

/* ---- JSON helpers shared by exec.c and files.c ---- */

static size_t utf8_seq_len(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (n > left)
		return 0;
	/* Refuse overlong forms, UTF-16 surrogates and code points above U+10FFFF. */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

json_t *init_json_string_lossy(const char *msg, size_t len)
{
	char *buf = malloc(len + 1);
	if (!buf)
		return NULL;
	const unsigned char *s = (const unsigned char *)msg;
	size_t i = 0;
	while (i < len) {
		if (s[i] >= 0x80) {
			size_t n = utf8_seq_len(s + i, len - i);
			if (n) {
				memcpy(buf + i, s + i, n);
				i += n;
				continue;
			}
		}
		buf[i] = (s[i] == 0 || s[i] >= 0x80) ? '?' : (char)s[i];
		i++;
	}
	json_t *j = json_stringn(buf, len);
	free(buf);
	return j;
}

json_t *init_parse_json(struct conn *c, const uint8_t *payload, uint32_t len, const char *what)
{
	json_error_t jerr;
	/* jansson refuses \u0000 in strings (no JSON_ALLOW_NUL), so every string below is a
	 * C string without an embedded NUL, and bounds nesting depth itself. */
	json_t *o = json_loadb((const char *)payload, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o) {
		conn_fail(c, EINVAL, "%s: malformed JSON at offset %d: %s", what, jerr.position,
			  jerr.text);
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		conn_fail(c, EINVAL, "%s: payload is not a JSON object", what);
		return NULL;
	}
	return o;
}

/* ---- requests ---- */

static void handle_ping(struct conn *c)
{
	json_t *o = json_pack("{s:i,s:s}", "pid", (int)getpid(), "version", CELL_VERSION);
	conn_send_json(c, CELL_FRAME_PONG, o);
	conn_finish(c);
}

void init_request(struct conn *c, uint16_t type, uint8_t *payload, uint32_t len)
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
	default:
		conn_fail(c, EPROTO, "unexpected %s frame as a request",
			  cell_frame_type_name(type));
		return;
	}
	json_t *req = init_parse_json(c, payload, len, cell_frame_type_name(type));
	if (!req)
		return;
	op(c, req);
	json_decref(req);
}

/* ---- signals and children ---- */

static void reap_children(void)
{
	for (;;) {
		int status;
		/* WUNTRACED: a command's child stopped before its execve must not hold its
		 * request (and the client) until a deadline. */
		pid_t pid = waitpid(-1, &status, WNOHANG | WUNTRACED);
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid <= 0)
			return;
		if (WIFSTOPPED(status)) {
			exec_stopped(pid, WSTOPSIG(status));
			continue;
		}
		/* Orphans reparented to us are reaped and forgotten. */
		if (!exec_reaped(pid, status))
			log_debug("reaped orphan %d", (int)pid);
	}
}

static void signal_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	bool child = false;
	for (;;) {
		struct signalfd_siginfo si[16];
		ssize_t n = read(w->fd, si, sizeof(si));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (size_t i = 0; i < (size_t)n / sizeof(si[0]); i++) {
			switch (si[i].ssi_signo) {
			case SIGCHLD:
				child = true;
				break;
			case SIGTERM:
			case SIGINT:
				/* As PID 1 these come only from inside the sandbox (the
				 * runtime stops a sandbox with SIGKILL): ignored. */
				if (test_path)
					quit = true;
				break;
			default:
				break; /* everything else is drained and dropped */
			}
		}
	}
	if (child)
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

/* fds 0-2 must be open so no pipe or socket made later lands there and gets confused with
 * a command's stdio. */
static void ensure_std_fds(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		int n = open("/dev/null", O_RDWR);
		if (n < 0)
			n = open("/", O_RDONLY | O_DIRECTORY);
		if (n >= 0 && n != fd) {
			dup2(n, fd);
			close(n);
		}
	}
}

static int open_devnull(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode))
		return fd;
	if (fd >= 0)
		close(fd);
	/* No /dev/null in this image: an empty pipe whose writer is gone reads as EOF. */
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	close(p[1]);
	return p[0];
}

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

static void raise_nofile(void)
{
	if (getrlimit(RLIMIT_NOFILE, &init_nofile_orig) < 0)
		return;
	struct rlimit r = init_nofile_orig;
	if (r.rlim_cur >= NOFILE_WANTED)
		return;
	r.rlim_cur = r.rlim_max < NOFILE_WANTED ? r.rlim_max : NOFILE_WANTED;
	setrlimit(RLIMIT_NOFILE, &r);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cell-init                 (PID 1 of a sandbox, relay socket at fd %d)\n"
		"       cell-init --listen PATH   (test mode: bind PATH itself)\n"
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

	/* Nobody inside may ptrace PID 1 or read its memory through /proc/1/mem: the
	 * /proc/self/exe overwrite class of CVE-2019-5736 starts there. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		log_warn("PR_SET_DUMPABLE: %s", strerror(errno));
	if (test_path && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		log_warn("PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
	umask(022);
	ensure_std_fds();
	raise_nofile();

	int sfd = setup_signals();
	if (sfd < 0) {
		log_error("signalfd: %s", strerror(errno));
		return 1;
	}
	init_rootfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	init_devnull_fd = open_devnull();
	spare_fd = open("/", O_PATH | O_CLOEXEC);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	listen_fd = setup_listener();
	if (init_rootfd < 0 || init_devnull_fd < 0 || epfd < 0 || listen_fd < 0) {
		log_error("cell-init setup failed: %s", strerror(errno));
		return 1;
	}

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
		struct epoll_event evs[64];
		int n = epoll_wait(epfd, evs, (int)CELL_ARRAY_SIZE(evs), -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("epoll_wait: %s", strerror(errno));
			return 1;
		}
		for (int i = 0; i < n; i++) {
			struct init_watch *w = evs[i].data.ptr;
			if (w->active)
				w->fn(w, evs[i].events);
		}
		conn_flush_dirty();
		bool freed = graveyard != NULL;
		reap_graveyard();
		/* An idle sandbox should cost next to nothing: hand the heap that a burst of
		 * output queues grew back to the kernel once nobody is connected. */
		if (freed && conn_count() == 0)
			malloc_trim(0);
	}

	exec_kill_all();
	if (test_path)
		unlink(test_path);
	return 0;
}
