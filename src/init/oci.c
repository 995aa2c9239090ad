/* cell-init as an OCI container's PID 1 (`cell-init --oci`, spawned by cell-oci).
 *
 * The runtime leaves the engine's stdio (its pipes, or nothing) on fds 0-2; they are kept
 * aside for the container's process and cell-init itself goes on /dev/null. OCI_CREATE
 * (cell-oci create) forks the process, which sets up its terminal or stdio and then waits
 * on a pipe; OCI_START (cell-oci start) lets it go: ids, umask, limits, capabilities,
 * seccomp, cwd, execve, each in that order in the child. When it ends, cell-init exits
 * with its status (128+n for a signal n), which is what the engine's shim waits for, and
 * the kernel ends the rest of the container with its PID 1. A signal the host sends to
 * cell-init (the shim's kill, docker stop) goes to the process.
 *
 * Everything here runs once per container; errors go back on the relay as ERROR. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/log.h"
#include "cell/proto.h"
#include "conn.h"
#include "oci.h"
#include "proc.h"

#define OCI_ARGS_MAX	  4096
#define OCI_GIDS_MAX	  256
#define OCI_RLIMITS_MAX	  16
#define OCI_START_WAIT_MS 10000

struct oci_proc {
	char **argv, **envp;
	char *cwd;
	uint32_t uid, gid, gids[OCI_GIDS_MAX];
	size_t n_gids;
	int umask; /* -1: keep 022 */
	bool terminal;
	unsigned rows, cols;
	bool caps_given;
	uint64_t bounding, effective, permitted, inheritable, ambient;
	bool has_oom;
	int oom_score_adj;
	struct {
		int resource;
		uint64_t soft, hard;
	} rlimits[OCI_RLIMITS_MAX];
	size_t n_rlimits;
	struct sock_filter *filter; /* the spec's seccomp program, or NULL */
	unsigned short filter_len;
};

static bool mode;
static int stdio_fds[3] = {-1, -1, -1};
static pid_t main_pid;	/* the container's process, once created */
static int go_fd = -1;	/* its start pipe's write end, until start */
static int err_fd = -1; /* its exec-error pipe's read end, until start */
static int exit_status = -1;

bool oci_mode(void)
{
	return mode;
}

int oci_mode_setup(void)
{
	mode = true;
	for (int i = 0; i < 3; i++)
		stdio_fds[i] = fcntl(i, F_DUPFD_CLOEXEC, 10);
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul < 0)
		return -errno;
	for (int i = 0; i < 3; i++)
		dup3(nul, i, 0);
	close(nul);
	return 0;
}

int oci_exit_status(void)
{
	return exit_status < 0 ? 255 : exit_status;
}

/* ---- the request ---- */

static int fail(struct cell_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct cell_error *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = cell_err_vmsg(err, EINVAL, fmt, ap);
	va_end(ap);
	return r;
}

static void proc_free(struct oci_proc *p)
{
	for (char **a = p->argv; a && *a; a++)
		free(*a);
	free(p->argv);
	for (char **e = p->envp; e && *e; e++)
		free(*e);
	free(p->envp);
	free(p->cwd);
	free(p->filter);
}

static int strings(json_t *arr, bool base64, const char *what, char ***out, struct cell_error *err)
{
	if (!json_is_array(arr) || json_array_size(arr) > OCI_ARGS_MAX)
		return fail(err, "OCI_CREATE: %s must be an array of at most %d strings", what,
			    OCI_ARGS_MAX);
	*out = calloc(json_array_size(arr) + 1, sizeof(char *));
	if (!*out)
		return cell_err(err, ENOMEM, "OCI_CREATE");
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const char *s = json_string_value(json_array_get(arr, i));
		if (!s)
			return fail(err, "OCI_CREATE: %s[%zu] must be a string", what, i);
		if (!base64) {
			if (!((*out)[i] = strdup(s)))
				return cell_err(err, ENOMEM, "OCI_CREATE");
			continue;
		}
		uint8_t *buf;
		size_t len;
		if (cell_base64_decode(s, strlen(s), &buf, &len) < 0 || memchr(buf, 0, len)) {
			if (buf)
				free(buf);
			return fail(err, "OCI_CREATE: %s[%zu] is not base64 of a string", what, i);
		}
		(*out)[i] = (char *)buf;
	}
	return 0;
}

static uint64_t num(json_t *o, const char *key, uint64_t dflt)
{
	json_t *v = json_object_get(o, key);
	return json_is_integer(v) && json_integer_value(v) >= 0 ? (uint64_t)json_integer_value(v)
								: dflt;
}

static int parse_caps(json_t *req, struct oci_proc *p)
{
	json_t *caps = json_object_get(req, "caps");
	if (!json_is_object(caps))
		return 0;
	p->caps_given = true;
	p->bounding = num(caps, "bounding", 0);
	p->effective = num(caps, "effective", 0);
	p->permitted = num(caps, "permitted", 0);
	p->inheritable = num(caps, "inheritable", 0);
	p->ambient = num(caps, "ambient", 0);
	return 0;
}

static int parse_limits(json_t *req, struct oci_proc *p, struct cell_error *err)
{
	json_t *rl = json_object_get(req, "rlimits");
	if (rl && (!json_is_array(rl) || json_array_size(rl) > OCI_RLIMITS_MAX))
		return fail(err, "OCI_CREATE: rlimits must be an array of at most %d",
			    OCI_RLIMITS_MAX);
	for (size_t i = 0; rl && i < json_array_size(rl); i++) {
		json_t *e = json_array_get(rl, i);
		p->rlimits[i].resource = (int)num(e, "type", RLIM_NLIMITS);
		p->rlimits[i].soft = num(e, "soft", 0);
		p->rlimits[i].hard = num(e, "hard", 0);
		if (p->rlimits[i].resource >= RLIM_NLIMITS)
			return fail(err, "OCI_CREATE: rlimits[%zu].type is not a resource", i);
		p->n_rlimits++;
	}
	json_t *oom = json_object_get(req, "oom_score_adj");
	if (json_is_integer(oom)) {
		if (json_integer_value(oom) < -1000 || json_integer_value(oom) > 1000)
			return fail(err, "OCI_CREATE: oom_score_adj out of range");
		p->has_oom = true;
		p->oom_score_adj = (int)json_integer_value(oom);
	}
	return 0;
}

static int parse_seccomp(json_t *req, struct oci_proc *p, struct cell_error *err)
{
	const char *b = json_string_value(json_object_get(req, "seccomp"));
	if (!b)
		return 0;
	uint8_t *buf = NULL;
	size_t len = 0;
	if (cell_base64_decode(b, strlen(b), &buf, &len) < 0 || !len ||
	    len % sizeof(struct sock_filter) || len / sizeof(struct sock_filter) > BPF_MAXINSNS) {
		free(buf);
		return fail(err, "OCI_CREATE: seccomp is not a BPF program");
	}
	p->filter = (struct sock_filter *)buf;
	p->filter_len = (unsigned short)(len / sizeof(struct sock_filter));
	return 0;
}

static int parse(json_t *req, struct oci_proc *p, struct cell_error *err)
{
	*p = (struct oci_proc){.umask = -1};
	int r = strings(json_object_get(req, "argv"), true, "argv", &p->argv, err);
	if (r == 0 && !p->argv[0])
		r = fail(err, "OCI_CREATE: argv is empty");
	if (r == 0)
		r = strings(json_object_get(req, "env"), false, "env", &p->envp, err);
	if (r < 0)
		return r;
	const char *cwd = json_string_value(json_object_get(req, "cwd"));
	if (!cwd || cwd[0] != '/' || !(p->cwd = strdup(cwd)))
		return fail(err, "OCI_CREATE: cwd must be an absolute path");
	p->uid = (uint32_t)num(req, "uid", 0);
	p->gid = (uint32_t)num(req, "gid", 0);
	json_t *gids = json_object_get(req, "gids");
	for (size_t i = 0; json_is_array(gids) && i < json_array_size(gids); i++) {
		json_t *g = json_array_get(gids, i);
		if (p->n_gids == OCI_GIDS_MAX)
			return fail(err, "OCI_CREATE: more than %d groups", OCI_GIDS_MAX);
		if (!json_is_integer(g) || json_integer_value(g) < 0 ||
		    json_integer_value(g) > UINT32_MAX)
			return fail(err, "OCI_CREATE: gids[%zu] is not a gid", i);
		p->gids[p->n_gids++] = (uint32_t)json_integer_value(g);
	}
	if (json_is_integer(json_object_get(req, "umask")))
		p->umask = (int)(num(req, "umask", 022) & 0777);
	p->terminal = json_is_true(json_object_get(req, "terminal"));
	p->rows = (unsigned)num(req, "rows", 0);
	p->cols = (unsigned)num(req, "cols", 0);
	if ((r = parse_caps(req, p)) < 0 || (r = parse_limits(req, p, err)) < 0)
		return r;
	return parse_seccomp(req, p, err);
}

/* ---- the child ---- */

/* The child's failure before its execve: errno and the step, on the error pipe. */
static _Noreturn void child_fail(int efd, int errnum, const char *step)
{
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "%d %s", errnum, step);
	ssize_t w = write(efd, msg, n > 0 ? (size_t)n : 0);
	(void)w;
	_exit(127);
}

/* The bounding set to the spec's, while the process is still root (it takes CAP_SETPCAP). */
static int drop_bounding(const struct oci_proc *p)
{
	for (int cap = 0; cap <= 63; cap++)
		if (!(p->bounding & (1ull << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 &&
		    errno != EINVAL)
			return -1;
	return 0;
}

/* The spec's capability sets, within what cell-init holds (cell's set for the container):
 * a capability cell withholds is not granted, whatever the spec asks. */
static int set_caps(const struct oci_proc *p)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct own[2];
	if (syscall(SYS_capget, &h, own) < 0)
		return -1;
	uint64_t held = own[0].permitted | (uint64_t)own[1].permitted << 32;
	uint64_t eff = p->effective & held, perm = p->permitted & held, inh = p->inheritable & held,
		 amb = p->ambient & perm & inh;
	struct __user_cap_data_struct d[2] = {
	    {(uint32_t)eff, (uint32_t)perm, (uint32_t)inh},
	    {(uint32_t)(eff >> 32), (uint32_t)(perm >> 32), (uint32_t)(inh >> 32)}};
	if (syscall(SYS_capset, &h, d) < 0)
		return -1;
	for (int cap = 0; cap <= 63; cap++)
		if ((amb & (1ull << cap)) &&
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
			return -1;
	return 0;
}

static void child_stdio(const struct oci_proc *p, int tty, int efd)
{
	if (tty >= 0) {
		if (ioctl(tty, TIOCSCTTY, 0) < 0)
			child_fail(efd, errno, "taking the terminal");
		for (int i = 0; i < 3; i++)
			if (dup2(tty, i) < 0)
				child_fail(efd, errno, "terminal on stdio");
		if (p->rows && p->cols) {
			struct winsize ws = {.ws_row = (unsigned short)p->rows,
					     .ws_col = (unsigned short)p->cols};
			ioctl(0, TIOCSWINSZ, &ws);
		}
		return;
	}
	for (int i = 0; i < 3; i++)
		if (stdio_fds[i] >= 0 && dup2(stdio_fds[i], i) < 0)
			child_fail(efd, errno, "stdio");
}

static _Noreturn void child_main(const struct oci_proc *p, int go, int efd, int tty)
{
	proc_default_signals();
	setsid();
	child_stdio(p, tty, efd);
	char b;
	if (read(go, &b, 1) != 1) /* create undone before start: nothing runs */
		_exit(127);
	if (p->umask >= 0)
		umask((mode_t)p->umask);
	for (size_t i = 0; i < p->n_rlimits; i++) {
		struct rlimit rl = {p->rlimits[i].soft, p->rlimits[i].hard};
		if (setrlimit(p->rlimits[i].resource, &rl) < 0)
			child_fail(efd, errno, "setrlimit");
	}
	if (p->has_oom) {
		int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
		char v[16];
		int n = snprintf(v, sizeof(v), "%d", p->oom_score_adj);
		if (fd < 0 || write(fd, v, (size_t)n) != n)
			child_fail(efd, errno, "oom_score_adj");
		close(fd);
	}
	/* Keep the capabilities across the id change; set exactly the spec's after it. */
	if (p->caps_given && drop_bounding(p) < 0)
		child_fail(efd, errno, "dropping from the bounding set");
	if (p->caps_given && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		child_fail(efd, errno, "PR_SET_KEEPCAPS");
	if (syscall(SYS_setgroups, p->n_gids, p->gids) < 0 ||
	    syscall(SYS_setresgid, p->gid, p->gid, p->gid) < 0 ||
	    syscall(SYS_setresuid, p->uid, p->uid, p->uid) < 0)
		child_fail(efd, errno, "setting the process's user and groups");
	if (p->caps_given && set_caps(p) < 0)
		child_fail(efd, errno, "setting capabilities");
	if (chdir(p->cwd) < 0)
		child_fail(efd, errno, "entering cwd");
	extern char **environ;
	environ = p->envp;
	/* The spec's seccomp filter last: it may forbid the calls above. no_new_privs is on
	 * (cell-init has it, its children keep it). */
	if (p->filter) {
		struct sock_fprog prog = {.len = p->filter_len, .filter = p->filter};
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
			child_fail(efd, errno, "installing the spec's seccomp filter");
	}
	proc_unblock_signals();
	execvp(p->argv[0], p->argv);
	child_fail(efd, errno, p->argv[0]);
}

/* ---- requests ---- */

static int open_terminal(int *master, int *slave)
{
	*master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*master < 0)
		return -errno;
	int unlock = 0, n;
	if (ioctl(*master, TIOCSPTLCK, &unlock) < 0 || ioctl(*master, TIOCGPTN, &n) < 0)
		return -errno;
	*slave = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	return *slave < 0 ? -errno : 0;
}

void oci_create(struct conn *c, json_t *req)
{
	struct cell_error err = {0};
	struct oci_proc p;
	if (!mode || main_pid) {
		conn_fail(c, EEXIST, "OCI_CREATE: %s",
			  mode ? "the container's process exists" : "not an OCI container");
		return;
	}
	if (parse(req, &p, &err) < 0) {
		conn_fail(c, err.code, "%s", err.msg);
		proc_free(&p);
		return;
	}
	int go[2] = {-1, -1}, ep[2] = {-1, -1}, master = -1, slave = -1;
	int r = pipe2(go, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0 ? -errno : 0;
	if (r == 0 && p.terminal)
		r = open_terminal(&master, &slave);
	pid_t pid = r < 0 ? -1 : fork();
	if (pid == 0)
		child_main(&p, go[0], ep[1], slave);
	if (pid < 0 && r == 0)
		r = -errno;
	close(go[0]);
	close(ep[1]);
	if (slave >= 0)
		close(slave);
	proc_free(&p);
	if (r < 0) {
		close(go[1]);
		close(ep[0]);
		if (master >= 0)
			close(master);
		conn_fail(c, -r, "OCI_CREATE: %s", strerror(-r));
		return;
	}
	main_pid = pid;
	go_fd = go[1];
	err_fd = ep[0];
	json_t *ok = json_pack("{s:i}", "pid", (int)pid);
	if (master >= 0) {
		conn_send_json_with_fd(c, CELL_FRAME_OK, ok, master);
		close(master);
	} else {
		conn_send_json(c, CELL_FRAME_OK, ok);
	}
	conn_finish(c);
}

/* After the go byte: the error pipe's EOF is the execve (close-on-exec), a record its
 * failure. */
static int wait_exec(char *msg, size_t size)
{
	struct pollfd pfd = {.fd = err_fd, .events = POLLIN};
	if (poll(&pfd, 1, OCI_START_WAIT_MS) <= 0)
		return -ETIMEDOUT;
	ssize_t n = read(err_fd, msg, size - 1);
	if (n <= 0)
		return 0;
	msg[n] = '\0';
	return -EIO;
}

void oci_start(struct conn *c, json_t *req)
{
	(void)req;
	if (!main_pid || go_fd < 0) {
		conn_fail(c, EINVAL, "OCI_START: %s",
			  main_pid ? "the process was started already" : "no process created");
		return;
	}
	ssize_t w = write(go_fd, "g", 1);
	close(go_fd);
	go_fd = -1;
	char msg[192] = "";
	int r = w == 1 ? wait_exec(msg, sizeof(msg)) : -EPIPE;
	close(err_fd);
	err_fd = -1;
	if (r == -EIO) {
		char *sp = strchr(msg, ' ');
		int e = atoi(msg);
		conn_fail(c, e > 0 && e < 4096 ? e : EIO, "%s: %s", sp ? sp + 1 : "exec",
			  strerror(e > 0 && e < 4096 ? e : EIO));
		return;
	}
	if (r < 0) {
		conn_fail(c, -r, "OCI_START: the process %s",
			  r == -EPIPE ? "is gone" : "did not run in time");
		return;
	}
	conn_send_json(c, CELL_FRAME_OK, json_object());
	conn_finish(c);
}

bool oci_reaped(pid_t pid, int status)
{
	if (!mode || !main_pid || pid != main_pid)
		return false;
	exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	log_debug("the container's process ended: %d", exit_status);
	return true;
}

void oci_forward_signal(int sig)
{
	if (main_pid > 0 && exit_status < 0)
		kill(main_pid, sig);
}
