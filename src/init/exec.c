/* EXEC: running one command per connection and streaming what it prints.
 *
 * A command is a direct child of cell-init in its own session and process group, stdin
 * /dev/null, stdout/stderr on two pipes, no other fd. The child reports a failed chdir or
 * execve through a CLOEXEC error pipe: EOF on it means the exec happened (STARTED), a
 * record means it did not (ERROR, no STARTED). Until then the output pipes are not even
 * watched, so STARTED always precedes the first output frame.
 *
 * PID 1's loop never waits for a child: the spawner thread clones it, or the loop forks it
 * (see "starting the child"), and the error pipe tells later how the start went. Root inside can
 * stop any process of the sandbox but PID 1 (kill(-1, SIGSTOP)); a child stopped before its execve,
 * or not through it within START_DEADLINE_MS (an execve waiting on a lease break, say), is killed
 * and the request answered ERROR, so a start costs the client a bounded wait and PID 1 nothing.
 *
 * When the main process is reaped, what is already in its pipes is sent, then EXIT, and
 * the connection ends. The pipes stay open and are read and discarded until EOF, so a
 * background child (`nohup server &`) never takes a SIGPIPE for writing to a closed pipe.
 * The same discarding happens when celld hangs up early: the command is not killed. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cell/codec.h"
#include "cell/error.h"
#include "cell/log.h"
#include "cell/proto.h"
#include "base.h"
#include "conn.h"
#include "defer.h"
#include "exec.h"
#include "feed.h"
#include "files.h"
#include "proc.h"
#include "watch.h"

#define DEFAULT_CWD   "/workspace"
#define DEFAULT_PATH  "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define KILL_GRACE_MS 2000
/* A child does a handful of system calls before its execve; this is only ever reached when
 * something in the sandbox holds it back. Below celld's wait for STARTED, so the client
 * gets this answer rather than a relay timeout. */
#define START_DEADLINE_MS     20000
#define PIPE_READS_PER_WAKEUP 16
#define PIPE_GROWN_SIZE	      (1 << 20)
#define ID_MAX		      0xfffffffeu /* (uid_t)-1 means "unchanged" to the kernel */

struct exec_req {
	char **argv; /* decoded, NULL-terminated */
	size_t argc;
	const char **envp; /* strings owned by the request JSON */
	const char *cwd;
	uint64_t timeout_ms;
	uint32_t uid, gid;
	bool set_ids;
	bool stdin_pipe; /* "stdin":true: STDIN frames feed a pipe instead of /dev/null */
};

struct cmd;

struct pipe_end {
	struct init_watch w;
	struct cmd *cmd;
	uint16_t type; /* CELL_FRAME_STDOUT or CELL_FRAME_STDERR */
	bool grown;
};

struct cmd {
	struct init_deferred dead;
	struct cmd *next, **pprev;
	pid_t pid; /* 0 while the spawner has not reported it (cmd_pid() knows it earlier) */
	struct exec_req req;  /* until the child has its own copy (forked, or exec'd) */
	json_t *req_json;     /* holds the strings req.envp points at */
	int child_fd[4];      /* PID 1's copies of the child's stdout, stderr, error pipe, stdin */
	uint64_t queued_sigs; /* bit N-1: signal N asked for before the child existed */
	bool spawning;	      /* the spawner thread is cloning it */
	struct conn *conn;    /* NULL once EXIT is sent or celld hung up */
	struct pipe_end out, err;
	struct init_watch errp;	 /* read end of the exec error pipe */
	struct init_watch timer; /* the timeout, then the SIGKILL grace */
	struct feed in;		 /* its stdin pipe with "stdin":true (fd -1 otherwise) */
	int status;
	bool started, reaped, timed_out, grace, paused;
	bool stdin_asked; /* "stdin":true: STDIN and STDIN_CLOSE frames are welcome */
	uint64_t start_ns, end_ns;
	uint64_t timeout_ms; /* 0: none */
};

/* What the child writes to the error pipe when it cannot exec. Smaller than PIPE_BUF, so
 * the write is atomic. */
struct child_err {
	int32_t err;
	char msg[256];
};

static struct cmd *cmds;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- request parsing ---- */

static void req_free(struct exec_req *r)
{
	if (r->argv)
		for (size_t i = 0; i < r->argc; i++)
			free(r->argv[i]);
	free(r->argv);
	free(r->envp);
	r->argv = NULL;
	r->envp = NULL;
}

/* Strict base64 → bytes that may become a C string: a NUL would silently cut the command
 * short, so it is refused. */
static int decode_arg(json_t *j, const char *field, char **out, struct cell_error *err)
{
	if (!json_is_string(j))
		return cell_err(err, EINVAL, "EXEC: %s must be a base64 string", field);
	uint8_t *buf;
	size_t len;
	int r = cell_base64_decode(json_string_value(j), json_string_length(j), &buf, &len);
	if (r < 0)
		return cell_err(err, -r, "EXEC: %s is not valid base64", field);
	if (memchr(buf, '\0', len)) {
		free(buf);
		return cell_err(err, EINVAL, "EXEC: %s contains a NUL byte", field);
	}
	*out = (char *)buf;
	return 0;
}

static int get_uint(json_t *req, const char *key, uint64_t max, uint64_t *out, bool *present,
		    struct cell_error *err)
{
	json_t *j = json_object_get(req, key);
	if (present)
		*present = j != NULL;
	if (!j)
		return 0;
	if (!json_is_integer(j) || json_integer_value(j) < 0 ||
	    (uint64_t)json_integer_value(j) > max)
		return cell_err(err, EINVAL, "EXEC: %s must be an integer in 0..%llu", key,
				(unsigned long long)max);
	*out = (uint64_t)json_integer_value(j);
	return 0;
}

static int parse_argv(json_t *req, struct exec_req *r, struct cell_error *err)
{
	json_t *cmd = json_object_get(req, "command");
	json_t *argv = json_object_get(req, "argv");
	if (cmd && argv)
		return cell_err(err, EINVAL, "EXEC: command and argv are mutually exclusive");
	if (!cmd && !argv)
		return cell_err(err, EINVAL, "EXEC: command or argv is required");
	if (cmd) {
		/* An image without a shell (a distroless one) runs argv alone: say so rather than
		 * "No such file or directory". */
		if (access("/bin/sh", X_OK) < 0)
			return cell_err(
			    err, ENOENT,
			    "this image has no /bin/sh to run a shell command: give the "
			    "command as argv");
		r->argv = calloc(4, sizeof(char *));
		if (!r->argv)
			return cell_err(err, ENOMEM, "EXEC: command");
		r->argc = 3;
		r->argv[0] = strdup("/bin/sh");
		r->argv[1] = strdup("-c");
		if (!r->argv[0] || !r->argv[1])
			return cell_err(err, ENOMEM, "EXEC: command");
		return decode_arg(cmd, "command", &r->argv[2], err);
	}
	if (!json_is_array(argv) || json_array_size(argv) == 0)
		return cell_err(err, EINVAL, "EXEC: argv must be a non-empty array");
	size_t n = json_array_size(argv);
	r->argv = calloc(n + 1, sizeof(char *));
	if (!r->argv)
		return cell_err(err, ENOMEM, "EXEC: argv");
	r->argc = n;
	for (size_t i = 0; i < n; i++) {
		char field[32];
		snprintf(field, sizeof(field), "argv[%zu]", i);
		int ret = decode_arg(json_array_get(argv, i), field, &r->argv[i], err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int parse_env(json_t *req, struct exec_req *r, struct cell_error *err)
{
	json_t *env = json_object_get(req, "env");
	size_t n = 0;
	if (env && !json_is_array(env))
		return cell_err(err, EINVAL, "EXEC: env must be an array of \"K=V\" strings");
	if (env)
		n = json_array_size(env);
	r->envp = calloc(n + 1, sizeof(char *));
	if (!r->envp)
		return cell_err(err, ENOMEM, "EXEC: env");
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(env, i);
		const char *s = json_string_value(e);
		/* No name, or no '=': not an environment entry. */
		if (!s || s[0] == '=' || !strchr(s, '='))
			return cell_err(err, EINVAL, "EXEC: env[%zu] must be a \"K=V\" string", i);
		r->envp[i] = s;
	}
	return 0;
}

/* celld leaves HOME out of a non-root command's environment when its client did not set
 * one ("home_from_passwd"): the user's home from the sandbox's passwd goes in, "/" when it
 * names none (as login does), never root's. */
static int add_home(json_t *req, uint32_t uid, struct cell_error *err)
{
	if (!json_is_true(json_object_get(req, "home_from_passwd")))
		return 0;
	json_t *env = json_object_get(req, "env");
	char home[PATH_MAX];
	if (!files_user_home(uid, home, sizeof(home)))
		snprintf(home, sizeof(home), "/");
	char entry[PATH_MAX + 8];
	snprintf(entry, sizeof(entry), "HOME=%s", home);
	if (!json_is_array(env) || json_array_append_new(env, json_string(entry)) < 0)
		return cell_err(err, EINVAL, "EXEC: home_from_passwd needs an env array");
	return 0;
}

/* A number within the sandbox's ids, else a name looked up by lookup. */
static int id_of(const char *s, int (*lookup)(const char *, uint32_t *), uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (s[0] >= '0' && s[0] <= '9' && !*end)
		return v <= ID_MAX ? (*out = (uint32_t)v, 0) : -ERANGE;
	return lookup(s, out);
}

/* "user" (an image's User: "name", "uid", "name:group", "uid:gid") as "uid" and "gid",
 * its names looked up in the sandbox's own passwd and group (an image without them takes
 * numbers alone). A request naming a uid has no user. */
static int resolve_user(json_t *req, struct cell_error *err)
{
	json_t *u = json_object_get(req, "user");
	if (!u)
		return 0;
	const char *s = json_string_value(u);
	if (!s || !s[0] || strlen(s) > 256)
		return cell_err(err, EINVAL, "EXEC: user must be a name or an id");
	char name[257];
	snprintf(name, sizeof(name), "%s", s);
	char *group = strchr(name, ':');
	if (group)
		*group++ = '\0';
	uint32_t uid, gid;
	if (id_of(name, files_user_uid, &uid) < 0)
		return cell_err(err, ENOENT,
				"the image's user '%s' is not in the sandbox's /etc/passwd", name);
	if (json_object_set_new(req, "uid", json_integer(uid)) < 0)
		return cell_err(err, ENOMEM, "EXEC");
	if (!group || json_object_get(req, "gid"))
		return 0;
	if (id_of(group, files_group_gid, &gid) < 0)
		return cell_err(err, ENOENT,
				"the image's group '%s' is not in the sandbox's /etc/group", group);
	return json_object_set_new(req, "gid", json_integer(gid)) < 0
		   ? cell_err(err, ENOMEM, "EXEC")
		   : 0;
}

static int req_parse(json_t *req, struct exec_req *r, struct cell_error *err)
{
	int ret = parse_argv(req, r, err);
	if (ret < 0)
		return ret;
	if ((ret = resolve_user(req, err)) < 0)
		return ret;
	uint64_t uid = 0;
	if ((ret = get_uint(req, "uid", ID_MAX, &uid, NULL, err)) < 0 ||
	    (ret = add_home(req, (uint32_t)uid, err)) < 0)
		return ret;
	ret = parse_env(req, r, err);
	if (ret < 0)
		return ret;
	json_t *cwd = json_object_get(req, "cwd");
	if (cwd && (!json_is_string(cwd) || json_string_length(cwd) == 0 ||
		    json_string_length(cwd) >= PATH_MAX))
		return cell_err(err, EINVAL, "EXEC: cwd must be a non-empty path");
	r->cwd = cwd ? json_string_value(cwd) : DEFAULT_CWD;

	uint64_t v = 0;
	bool has_uid = false, has_gid = false;
	/* timeout bounded to ~30 days: far beyond any sane command, well inside timerfd. */
	if ((ret = get_uint(req, "timeout_ms", 30ull * 24 * 3600 * 1000, &v, NULL, err)) < 0)
		return ret;
	r->timeout_ms = v;
	v = 0;
	if ((ret = get_uint(req, "uid", ID_MAX, &v, &has_uid, err)) < 0)
		return ret;
	r->uid = (uint32_t)v;
	v = 0;
	if ((ret = get_uint(req, "gid", ID_MAX, &v, &has_gid, err)) < 0)
		return ret;
	r->gid = (uint32_t)v;
	/* uid without gid: the user's primary group from the sandbox's passwd, as execd does;
	 * group 0 when passwd names no such user or an id out of range. */
	uint32_t pg;
	if (has_uid && !has_gid)
		r->gid = files_user_gid(r->uid, &pg) && pg <= ID_MAX ? pg : 0;
	r->set_ids = has_uid || has_gid;
	json_t *in = json_object_get(req, "stdin");
	if (in && !json_is_boolean(in))
		return cell_err(err, EINVAL, "EXEC: stdin must be a boolean");
	r->stdin_pipe = json_is_true(in);
	return 0;
}

/* ---- the child, between fork and execve ---- */

static void __attribute__((noreturn, format(printf, 3, 4)))
child_fail(int errfd, int e, const char *fmt, ...)
{
	struct child_err ce = {.err = e};
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(ce.msg, sizeof(ce.msg), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(ce.msg))
		snprintf(ce.msg + n, sizeof(ce.msg) - n, ": %s", strerror(e));
	ssize_t w = write(errfd, &ce, sizeof(ce));
	(void)w;
	_exit(127);
}

static const char *env_get(const char *const *envp, const char *name)
{
	size_t n = strlen(name);
	for (; *envp; envp++)
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

/* execvpe() semantics, but searching the PATH of the request's environment rather than
 * cell-init's own (which is empty). */
static void __attribute__((noreturn)) exec_search(char **argv, const char **envp, int errfd)
{
	char *const *av = argv;
	char *const *ev = (char *const *)envp;
	const char *file = argv[0];
	if (!file[0])
		child_fail(errfd, ENOENT, "executing ''");
	if (strchr(file, '/')) {
		execve(file, av, ev);
		child_fail(errfd, errno, "executing %s", file);
	}
	const char *path = env_get(envp, "PATH");
	if (!path)
		path = DEFAULT_PATH;
	bool eacces = false;
	size_t flen = strlen(file);
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		size_t dlen = end - p;
		char buf[PATH_MAX];
		if (dlen + 1 + flen < sizeof(buf)) {
			/* An empty PATH element means the current directory. */
			if (dlen == 0)
				buf[dlen++] = '.';
			else
				memcpy(buf, p, dlen);
			buf[dlen] = '/';
			memcpy(buf + dlen + 1, file, flen + 1);
			execve(buf, av, ev);
			switch (errno) {
			case EACCES:
				eacces = true;
				break;
			case ENOENT:
			case ENOTDIR:
			case ESTALE:
			case ENODEV:
			case ETIMEDOUT:
				break;
			case ENOEXEC: {
				/* A script without #!: the shell runs it, as execvp does. */
				size_t n = 0;
				while (argv[n])
					n++;
				char **sh = alloca((n + 2) * sizeof(char *));
				sh[0] = "/bin/sh";
				sh[1] = buf;
				for (size_t i = 1; i <= n; i++)
					sh[i + 1] = argv[i];
				execve("/bin/sh", sh, ev);
				child_fail(errfd, errno, "executing %s", buf);
			}
			default:
				child_fail(errfd, errno, "executing %s", buf);
			}
		}
		if (!*end)
			break;
		p = end;
	}
	child_fail(errfd, eacces ? EACCES : ENOENT, "executing %s (PATH=%s)", file, path);
}

static void __attribute__((noreturn))
child_run(const struct exec_req *r, int in_r, int out_w, int err_w, int errfd)
{
	if (setsid() < 0)
		child_fail(errfd, errno, "setsid");
	/* cell-init blocks every signal and reads them from a signalfd; the command starts
	 * from a clean slate. The mask itself is cleared last, just before execve. */
	proc_default_signals();
	/* stdin: the pipe of "stdin":true, else /dev/null. */
	if (dup2(in_r >= 0 ? in_r : init_base.devnull_fd, 0) < 0 || dup2(out_w, 1) < 0 ||
	    dup2(err_w, 2) < 0)
		child_fail(errfd, errno, "setting up stdio");
	if (errfd != 3) {
		if (dup3(errfd, 3, O_CLOEXEC) < 0)
			child_fail(errfd, errno, "moving the error pipe");
		errfd = 3;
	}
	/* Only 0-2 (and the CLOEXEC error pipe) survive into the command: the relay
	 * socket, other commands' pipes and the O_PATH root fd must never leak (the leaked-fd
	 * class of CVE-2024-21626). */
	proc_close_fds_from(4);
	proc_command_limits();
	if (r->set_ids) {
		/* Only forked children get here with other ids (spawn_child), so PID 1's own
		 * dumpable flag stays 0. */
		const char *step = "";
		int e = proc_set_ids(r->uid, r->gid, &step);
		if (e < 0)
			child_fail(errfd, -e, "%s %u:%u", step, r->uid, r->gid);
	}
	/* After the id change, so the directory is checked with the command's own
	 * permissions. */
	if (chdir(r->cwd) < 0)
		child_fail(errfd, errno, "cwd %s", r->cwd);
	proc_unblock_signals();
	exec_search(r->argv, r->envp, errfd);
}

/* ---- starting the child ---- */

/* PID 1's loop waits for no child. A command that keeps cell-init's ids (every root
 * command) is cloned with CLONE_VM | CLONE_VFORK, as posix_spawn does: no page tables to
 * copy and no copy-on-write fault later for every page cell-init touches, which on a
 * virtualised host costs more than the rest of starting a short command. That clone runs
 * on the spawner thread, which waits in it until the child has exec'd or died; the main
 * thread goes on serving. Root inside can stop that child before its execve
 * (kill(-1, SIGSTOP)): the main thread sees the stop (WUNTRACED) and kills it, and any
 * command that comes while the spawner is busy is forked instead.
 *
 * The child runs on the spawner's stack area and thread-local storage (errno) while the
 * main thread runs on: it writes nothing else, takes no lock (no malloc, no stdio), and
 * reads only what the main thread leaves alone until the spawner reports back (the
 * request, the child's fds, the globals set at start).
 *
 * A command with other ids is forked: the id change makes the kernel set the dumpable flag
 * of the child's mm from fs.suid_dumpable, and in a shared mm that flag is PID 1's: with
 * fs.suid_dumpable=1 root inside could then ptrace PID 1 and take its relay socket with
 * pidfd_getfd. */
#define CHILD_STACK_SIZE   (8u << 20) /* as large as a main thread's: exec_search allocas */
#define SPAWNER_STACK_SIZE (64u << 10)

struct child_args {
	const struct exec_req *r;
	int in_r, out_w, err_w, errfd;
};

/* The one start the spawner works on. The main thread fills it while the spawner is idle
 * (cmd == NULL), the spawner writes pid and err, the kernel writes tid. */
static struct {
	struct cmd *cmd; /* main thread only */
	struct child_args args;
	pid_t tid; /* CLONE_PARENT_SETTID: the child's pid, from before it first runs */
	pid_t pid; /* clone's result */
	int err;
} slot;
static int spawner_wake_fd = -1;		    /* eventfd: a start is in the slot */
static struct init_watch spawner_done = {.fd = -1}; /* eventfd: the spawner is done */
static char *child_stack_top;
static uid_t self_uid;
static gid_t self_gid;

static int child_entry(void *p)
{
	const struct child_args *a = p;
	child_run(a->r, a->in_r, a->out_w, a->err_w, a->errfd);
}

static void *spawner_main(void *arg)
{
	(void)arg;
	for (;;) {
		uint64_t n;
		if (read(spawner_wake_fd, &n, sizeof(n)) != sizeof(n))
			continue; /* EINTR */
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		pid_t pid = clone(child_entry, child_stack_top,
				  CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | SIGCHLD,
				  &slot.args, &slot.tid);
		slot.err = pid < 0 ? errno : 0;
		__atomic_store_n(&slot.pid, pid, __ATOMIC_RELEASE);
		n = 1;
		while (write(spawner_done.fd, &n, sizeof(n)) < 0 && errno == EINTR)
			;
	}
	return NULL;
}

static void spawner_done_event(struct init_watch *w, uint32_t events);

void exec_init(void)
{
	self_uid = geteuid();
	self_gid = getegid();
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0)
		page = 4096;
	char *base = mmap(NULL, CHILD_STACK_SIZE + (size_t)page, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (base == MAP_FAILED || mprotect(base, (size_t)page, PROT_NONE) < 0)
		goto fail;
	spawner_wake_fd = eventfd(0, EFD_CLOEXEC);
	spawner_done.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	spawner_done.fn = spawner_done_event;
	if (spawner_wake_fd < 0 || spawner_done.fd < 0 ||
	    init_watch_add(&spawner_done, EPOLLIN) < 0)
		goto fail;
	/* Every signal is blocked already (main blocks them before this): the thread takes
	 * none, they all stay for the signalfd. */
	pthread_attr_t attr;
	pthread_t th;
	int r = pthread_attr_init(&attr);
	if (r == 0) {
		pthread_attr_setstacksize(&attr, SPAWNER_STACK_SIZE);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		r = pthread_create(&th, &attr, spawner_main, NULL);
		pthread_attr_destroy(&attr);
	}
	if (r == 0) {
		child_stack_top = base + (size_t)page + CHILD_STACK_SIZE;
		return;
	}
	errno = r;
fail:
	log_warn("no spawner thread (%s): every command is forked", strerror(errno));
	if (base != MAP_FAILED)
		munmap(base, CHILD_STACK_SIZE + (size_t)page);
	if (spawner_done.fd >= 0) {
		init_watch_del(&spawner_done);
		close(spawner_done.fd);
		spawner_done.fd = -1;
	}
	if (spawner_wake_fd >= 0)
		close(spawner_wake_fd);
	spawner_wake_fd = -1;
}

/* Its pid as far as PID 1 knows it: 0 before the spawner's clone has made the child. */
static pid_t cmd_pid(const struct cmd *cmd)
{
	if (cmd->pid || !cmd->spawning)
		return cmd->pid;
	return __atomic_load_n(&slot.tid, __ATOMIC_ACQUIRE);
}

static void child_fds_close(struct cmd *cmd)
{
	for (int i = 0; i < 4; i++) {
		if (cmd->child_fd[i] >= 0)
			close(cmd->child_fd[i]);
		cmd->child_fd[i] = -1;
	}
}

static void req_release(struct cmd *cmd)
{
	req_free(&cmd->req);
	json_decref(cmd->req_json);
	cmd->req_json = NULL;
}

/* 0: started (the spawner's clone or a fork); -errno: no child was made. */
static int spawn_child(struct cmd *cmd)
{
	const struct exec_req *r = &cmd->req;
	bool same_ids = !r->set_ids || (r->uid == self_uid && r->gid == self_gid);
	if (same_ids && child_stack_top && !slot.cmd) {
		slot.cmd = cmd;
		slot.args = (struct child_args){r, cmd->child_fd[3], cmd->child_fd[0],
						cmd->child_fd[1], cmd->child_fd[2]};
		slot.tid = 0;
		slot.pid = 0;
		cmd->spawning = true;
		__atomic_thread_fence(__ATOMIC_RELEASE);
		uint64_t one = 1;
		if (write(spawner_wake_fd, &one, sizeof(one)) == sizeof(one))
			return 0;
		cmd->spawning = false;
		slot.cmd = NULL;
	}
	pid_t pid = fork();
	if (pid == 0)
		child_run(r, cmd->child_fd[3], cmd->child_fd[0], cmd->child_fd[1],
			  cmd->child_fd[2]);
	int e = errno;
	child_fds_close(cmd);
	req_release(cmd);
	if (pid < 0)
		return -e;
	cmd->pid = pid;
	log_debug("command %d forked for a relay connection", (int)pid);
	return 0;
}

/* ---- the parent side ---- */

static void cmd_maybe_free(struct cmd *cmd)
{
	if (!cmd->reaped || cmd->spawning || cmd->errp.fd >= 0 || cmd->out.w.fd >= 0 ||
	    cmd->err.w.fd >= 0)
		return;
	if (cmd->conn)
		conn_finish(cmd->conn); /* calls cmd_closed */
	init_watch_close(&cmd->timer);
	feed_drop(&cmd->in);
	*cmd->pprev = cmd->next;
	if (cmd->next)
		cmd->next->pprev = cmd->pprev;
	init_defer_free(&cmd->dead, cmd);
}

static void cmd_pause(struct cmd *cmd)
{
	init_watch_del(&cmd->out.w);
	init_watch_del(&cmd->err.w);
	cmd->paused = true;
	conn_want_drain(cmd->conn);
}

static void cmd_resume(struct cmd *cmd)
{
	if (!cmd->paused)
		return;
	cmd->paused = false;
	if (cmd->out.w.fd >= 0 && !cmd->out.w.active)
		init_watch_add(&cmd->out.w, EPOLLIN);
	if (cmd->err.w.fd >= 0 && !cmd->err.w.active)
		init_watch_add(&cmd->err.w, EPOLLIN);
}

static void cmd_kill(struct cmd *cmd, int sig)
{
	/* Only while the main process is unreaped: until then its pid (= its process
	 * group id, thanks to setsid) cannot name anything else. */
	if (cmd->reaped)
		return;
	pid_t pid = cmd_pid(cmd);
	if (!pid) {
		/* The spawner has not made it yet: it gets the signal as soon as it exists. */
		cmd->queued_sigs |= 1ull << (sig - 1);
		return;
	}
	if (kill(-pid, sig) < 0 && errno == ESRCH)
		kill(pid, sig); /* not yet through setsid() */
}

static int timer_arm(struct cmd *cmd, uint64_t ms)
{
	if (cmd->timer.fd < 0) {
		int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (fd < 0)
			return -errno;
		cmd->timer.fd = fd;
		int r = init_watch_add(&cmd->timer, EPOLLIN);
		if (r < 0) {
			close(fd);
			cmd->timer.fd = -1;
			return r;
		}
	}
	struct itimerspec its = {.it_value = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000}};
	if (timerfd_settime(cmd->timer.fd, 0, &its, NULL) < 0)
		return -errno;
	return 0;
}

/* SIGTERM to the whole process group, SIGKILL if the main process outlives the grace.
 * SIGCONT follows the SIGTERM, so a stopped command acts on it now rather than be killed
 * after the grace. */
static void cmd_terminate(struct cmd *cmd)
{
	cmd_kill(cmd, SIGTERM);
	cmd_kill(cmd, SIGCONT);
	if (cmd->grace)
		return;
	cmd->grace = true;
	int r = timer_arm(cmd, KILL_GRACE_MS);
	if (r < 0) {
		log_warn("command %d: no grace timer (%s): killing now", (int)cmd_pid(cmd),
			 strerror(-r));
		cmd_kill(cmd, SIGKILL);
	}
}

static bool start_settle(struct cmd *cmd);
static void start_failed(struct cmd *cmd, int e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void timer_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	struct cmd *cmd = init_container_of(w, struct cmd, timer);
	uint64_t ticks;
	if (read(w->fd, &ticks, sizeof(ticks)) != sizeof(ticks) || cmd->reaped)
		return;
	if (!cmd->grace) {
		cmd->timed_out = true;
		cmd_terminate(cmd);
	} else {
		cmd_kill(cmd, SIGKILL);
	}
}

/* One timer for the start deadline of every command not started yet (a timer of its own
 * would cost each start four more system calls): armed for the oldest. */
static void start_watch_event(struct init_watch *w, uint32_t events);
static struct init_watch start_watch = {.fn = start_watch_event, .fd = -1};
static bool start_watch_armed;

static void start_watch_arm(uint64_t ms)
{
	if (start_watch.fd < 0) {
		start_watch.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (start_watch.fd < 0 || init_watch_add(&start_watch, EPOLLIN) < 0) {
			log_warn("no start deadline timer: %s", strerror(errno));
			if (start_watch.fd >= 0)
				close(start_watch.fd);
			start_watch.fd = -1;
			return;
		}
	}
	struct itimerspec its = {.it_value = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000}};
	start_watch_armed = timerfd_settime(start_watch.fd, 0, &its, NULL) == 0;
}

static void start_watch_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	uint64_t ticks;
	if (read(w->fd, &ticks, sizeof(ticks)) != sizeof(ticks))
		return;
	start_watch_armed = false;
	uint64_t now = now_ns(), deadline = (uint64_t)START_DEADLINE_MS * 1000000, next = 0;
	for (struct cmd *cmd = cmds, *nx; cmd; cmd = nx) {
		nx = cmd->next; /* start_failed may unlink cmd */
		if (cmd->started || cmd->errp.fd < 0)
			continue;
		if (now - cmd->start_ns < deadline) {
			uint64_t left = deadline - (now - cmd->start_ns);
			next = next && next < left ? next : left;
		} else if (!start_settle(cmd)) {
			start_failed(cmd, ETIMEDOUT,
				     "command %d did not reach its execve within %d s (held back "
				     "by a process in the sandbox?)",
				     (int)cmd_pid(cmd), START_DEADLINE_MS / 1000);
		}
	}
	if (next)
		start_watch_arm(next / 1000000 + 1);
}

static void pipe_close(struct pipe_end *p)
{
	init_watch_close(&p->w);
}

/* A heavy producer gets a bigger pipe: fewer wakeups per megabyte. Pipes stay at the
 * default otherwise, since every sandbox shares one per-user pipe-memory budget. */
static void pipe_grow(struct pipe_end *p)
{
	p->grown = true;
	fcntl(p->w.fd, F_SETPIPE_SZ, PIPE_GROWN_SIZE);
}

static void pipe_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	struct pipe_end *p = init_container_of(w, struct pipe_end, w);
	struct cmd *cmd = p->cmd;
	for (int i = 0; i < PIPE_READS_PER_WAKEUP; i++) {
		long n;
		if (cmd->conn) {
			if (conn_queued(cmd->conn) >= CONN_HIGH_WATER) {
				cmd_pause(cmd);
				return;
			}
			n = conn_send_from_fd(cmd->conn, p->type, w->fd, CELL_FRAME_CHUNK, -1);
			if (n == CELL_FRAME_CHUNK && !p->grown) {
				pipe_grow(p);
				conn_grow_sndbuf(cmd->conn);
			}
		} else {
			n = init_read_discard(w->fd);
		}
		if (n == -EAGAIN || n == -ENOMEM)
			return;
		if (n <= 0) {
			pipe_close(p);
			cmd_maybe_free(cmd);
			return;
		}
	}
}

/* Send what the main process left in a pipe before it exited (bounded by what is there
 * now: a background child writing forever cannot hold EXIT back). */
static void pipe_drain(struct cmd *cmd, struct pipe_end *p)
{
	int avail = 0;
	if (p->w.fd < 0 || ioctl(p->w.fd, FIONREAD, &avail) < 0)
		return;
	while (avail > 0 && cmd->conn) {
		uint32_t want =
		    (uint32_t)avail < CELL_FRAME_CHUNK ? (uint32_t)avail : CELL_FRAME_CHUNK;
		long n = conn_send_from_fd(cmd->conn, p->type, p->w.fd, want, -1);
		if (n == 0)
			pipe_close(p);
		if (n <= 0)
			return;
		avail -= (int)n;
	}
}

static void cmd_report_exit(struct cmd *cmd)
{
	if (!cmd->conn)
		return;
	pipe_drain(cmd, &cmd->out);
	pipe_drain(cmd, &cmd->err);
	if (!cmd->conn)
		return;
	int st = cmd->status;
	int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + sig;
	json_t *o = json_pack("{s:i,s:i,s:b,s:I}", "exit_code", code, "signal", sig, "timed_out",
			      cmd->timed_out, "duration_ms",
			      (json_int_t)((cmd->end_ns - cmd->start_ns) / 1000000));
	conn_send_json(cmd->conn, CELL_FRAME_EXIT, o);
	if (cmd->conn)
		conn_finish(cmd->conn); /* cmd_closed: from here on, output is discarded */
}

/* The child never got to run the command (its error record, a stop, the deadline): ERROR
 * instead of STARTED. The child is killed first: it is still cell-init's code, whatever
 * holds it (a SIGSTOP, a blocked execve) or is about to _exit anyway. */
static void start_failed(struct cmd *cmd, int e, const char *fmt, ...)
{
	char msg[sizeof(((struct child_err *)0)->msg) + 64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cmd_kill(cmd, SIGKILL);
	if (cmd->conn) {
		conn_send_error(cmd->conn, e, msg);
		if (cmd->conn)
			conn_finish(cmd->conn);
	}
	init_watch_close(&cmd->errp);
	pipe_close(&cmd->out);
	pipe_close(&cmd->err);
	init_watch_close(&cmd->timer);
	cmd_maybe_free(cmd);
}

/* Once started, the timer counts the command's own timeout, from the request on (unless a
 * SIGTERM's grace runs already). */
static void timeout_arm(struct cmd *cmd)
{
	if (cmd->grace || cmd->reaped)
		return;
	if (!cmd->timeout_ms) {
		init_watch_close(&cmd->timer);
		return;
	}
	uint64_t ran = (now_ns() - cmd->start_ns) / 1000000;
	int r = timer_arm(cmd, cmd->timeout_ms > ran ? cmd->timeout_ms - ran : 1);
	if (r < 0) {
		log_warn("command %d: no timeout timer (%s): killing it", (int)cmd_pid(cmd),
			 strerror(-r));
		cmd_kill(cmd, SIGKILL);
	}
}

static void start_ok(struct cmd *cmd)
{
	init_watch_close(&cmd->errp);
	cmd->started = true;
	timeout_arm(cmd);
	if (cmd->conn)
		conn_send_json(cmd->conn, CELL_FRAME_STARTED,
			       json_pack("{s:i}", "pid", cmd_pid(cmd)));
	if (init_watch_add(&cmd->out.w, EPOLLIN) < 0 || init_watch_add(&cmd->err.w, EPOLLIN) < 0) {
		/* Unwatchable output would block the command forever: give up on it. */
		pipe_close(&cmd->out);
		pipe_close(&cmd->err);
	}
	if (cmd->reaped)
		cmd_report_exit(cmd);
	cmd_maybe_free(cmd);
}

/* Read what the error pipe says by now: true when the start is settled (STARTED or ERROR
 * sent), false while the child has not reached its execve. */
static bool start_settle(struct cmd *cmd)
{
	if (cmd->errp.fd < 0)
		return true;
	/* Once the spawner's child has a pid, it has its own copy of the fd table (the kernel
	 * reports the pid after copying it): our copies of its pipe ends can go, so that EOF
	 * says it is past its execve even before the spawner has run again. */
	if (cmd->spawning && cmd_pid(cmd)) {
		cmd->pid = cmd_pid(cmd);
		child_fds_close(cmd);
	}
	struct child_err ce;
	ssize_t n = read(cmd->errp.fd, &ce, sizeof(ce));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return false;
	if (n == 0) {
		start_ok(cmd);
		return true;
	}
	if (n != (ssize_t)sizeof(ce)) {
		ce.err = EIO;
		snprintf(ce.msg, sizeof(ce.msg), "command %d: unreadable exec status",
			 (int)cmd_pid(cmd));
	}
	ce.msg[sizeof(ce.msg) - 1] = '\0';
	start_failed(cmd, ce.err, "%s", ce.msg);
	return true;
}

static void errp_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	start_settle(init_container_of(w, struct cmd, errp));
}

static struct cmd *cmd_find(pid_t pid)
{
	struct cmd *cmd = cmds;
	while (cmd && (cmd_pid(cmd) != pid || cmd->reaped))
		cmd = cmd->next;
	return cmd;
}

void exec_stopped(int pid, int sig)
{
	struct cmd *cmd = cmd_find(pid);
	/* A command stopped after its execve is its own business (job control, a debugger). */
	if (!cmd || cmd->started || start_settle(cmd))
		return;
	start_failed(cmd, EINTR,
		     "command %d was stopped by signal %d before it could start (a process in the "
		     "sandbox stops others, kill -STOP -1?)",
		     pid, sig);
}

bool exec_reaped(int pid, int status)
{
	struct cmd *cmd = cmd_find(pid);
	if (!cmd)
		return false;
	cmd->pid = pid; /* known now even if the spawner has not reported yet */
	cmd->reaped = true;
	cmd->status = status;
	cmd->end_ns = now_ns();
	/* The timeout and the grace apply to the main process only: background children
	 * it left behind keep running. */
	init_watch_close(&cmd->timer);
	if (cmd->started)
		cmd_report_exit(cmd);
	cmd_maybe_free(cmd);
	return true;
}

void exec_kill_all(void)
{
	for (struct cmd *cmd = cmds; cmd; cmd = cmd->next)
		if ((!cmd->reaped || cmd->out.w.fd >= 0 || cmd->err.w.fd >= 0) && cmd_pid(cmd))
			kill(-cmd_pid(cmd), SIGKILL);
}

/* ---- the connection's view ---- */

/* The command took (or input dropped) n bytes: celld's window opens by as much. */
static void cmd_stdin_taken(struct feed *f, size_t n)
{
	struct cmd *cmd = init_container_of(f, struct cmd, in);
	if (cmd->conn)
		conn_send_json(cmd->conn, CELL_FRAME_STDIN_TAKEN,
			       json_pack("{s:I}", "bytes", (json_int_t)n));
}

static void cmd_frame(void *op, struct conn *c, uint16_t type, uint8_t *payload, uint32_t len)
{
	struct cmd *cmd = op;
	if (type == CELL_FRAME_STDIN || type == CELL_FRAME_STDIN_CLOSE) {
		if (!cmd->stdin_asked) {
			conn_fail(c, EPROTO, "%s: the command was started without \"stdin\":true",
				  cell_frame_type_name(type));
			return;
		}
		if (type == CELL_FRAME_STDIN_CLOSE) {
			feed_close(&cmd->in);
			return;
		}
		/* After a STDIN_CLOSE, or once the command closed its stdin: dropped. */
		if (feed_write(&cmd->in, payload, len) == -ENOBUFS)
			conn_fail(c, ENOBUFS,
				  "STDIN: more than %u bytes wait for the command to read them",
				  FEED_MAX);
		return;
	}
	int sig = conn_parse_signal(c, type, payload, len, "a command");
	if (sig < 0)
		return;
	if (sig == SIGTERM)
		cmd_terminate(cmd);
	else
		cmd_kill(cmd, sig);
}

static void cmd_drain(void *op, struct conn *c)
{
	(void)c;
	cmd_resume(op);
}

static void cmd_closed(void *op, struct conn *c)
{
	(void)c;
	struct cmd *cmd = op;
	cmd->conn = NULL;
	feed_close(&cmd->in); /* what was sent still goes in, then end of file */
	cmd_resume(cmd);      /* discard from now on, never leave the writer blocked */
}

static const struct conn_handler cmd_handler = {
    .frame = cmd_frame,
    .drain = cmd_drain,
    .closed = cmd_closed,
    .keep_on_eof = true,
};

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
	p[0] = p[1] = -1;
}

static int make_pipes(int out[2], int err[2], int errp[2], int in[2])
{
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
	    (in && pipe2(in, O_CLOEXEC) < 0))
		return -errno;
	if (fcntl(out[0], F_SETFL, O_NONBLOCK) < 0 || fcntl(err[0], F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(errp[0], F_SETFL, O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* The spawner has cloned (or failed to clone) the command in the slot. */
static void spawner_done_event(struct init_watch *w, uint32_t events)
{
	(void)events;
	uint64_t n;
	if (read(w->fd, &n, sizeof(n)) != sizeof(n) || !slot.cmd)
		return;
	struct cmd *cmd = slot.cmd;
	pid_t pid = __atomic_load_n(&slot.pid, __ATOMIC_ACQUIRE);
	slot.cmd = NULL;
	cmd->spawning = false;
	/* The child has exec'd or died: it has left the memory it shared with us. Closing
	 * our copies of its pipe ends lets EOF on the error pipe say which. */
	child_fds_close(cmd);
	req_release(cmd);
	/* A child that shares our mm never changes ids, so this is 0 still; checked anyway,
	 * since a dumpable PID 1 is open to ptrace and pidfd_getfd from root inside. */
	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) {
		log_warn("PID 1 became dumpable after a start: made non-dumpable again");
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	}
	if (pid < 0) {
		cmd->reaped = true; /* no child to wait for */
		start_failed(cmd, slot.err, "EXEC: starting the command: %s", strerror(slot.err));
		return;
	}
	if (!cmd->pid)
		cmd->pid = pid;
	log_debug("command %d cloned for a relay connection", (int)pid);
	uint64_t sigs = cmd->queued_sigs;
	cmd->queued_sigs = 0;
	for (int sig = 1; sigs; sig++, sigs >>= 1)
		if (sigs & 1)
			cmd_kill(cmd, sig);
	/* Its EOF is there by now, or is about to be (the error pipe closes just after the
	 * execve's switch of memory): reading now saves a turn of the loop. start_settle
	 * frees what is done with; a start settled already (killed while cloned) is freed
	 * here. */
	if (cmd->errp.fd < 0)
		cmd_maybe_free(cmd);
	else
		start_settle(cmd);
}

void exec_start(struct conn *c, json_t *req)
{
	struct cell_error err = {0};
	struct cmd *cmd = calloc(1, sizeof(*cmd));
	if (!cmd) {
		conn_fail(c, ENOMEM, "EXEC: out of memory");
		return;
	}
	cmd->child_fd[0] = cmd->child_fd[1] = cmd->child_fd[2] = cmd->child_fd[3] = -1;
	cmd->in = (struct feed){.w = {.fd = -1}, .taken = cmd_stdin_taken};
	if (req_parse(req, &cmd->req, &err) < 0) {
		req_free(&cmd->req);
		free(cmd);
		conn_fail(c, err.code, "%s", err.msg);
		return;
	}
	int out[2] = {-1, -1}, errs[2] = {-1, -1}, errp[2] = {-1, -1}, in[2] = {-1, -1};
	int ret = make_pipes(out, errs, errp, cmd->req.stdin_pipe ? in : NULL);
	if (ret < 0) {
		close_pair(out);
		close_pair(errs);
		close_pair(errp);
		close_pair(in);
		req_free(&cmd->req);
		free(cmd);
		conn_fail(c, -ret, "EXEC: creating pipes: %s", strerror(-ret));
		return;
	}
	cmd->req_json = json_incref(req);
	cmd->start_ns = now_ns();
	cmd->timeout_ms = cmd->req.timeout_ms;
	cmd->child_fd[0] = out[1];
	cmd->child_fd[1] = errs[1];
	cmd->child_fd[2] = errp[1];
	cmd->child_fd[3] = in[0];
	cmd->stdin_asked = cmd->req.stdin_pipe;
	cmd->out = (struct pipe_end){
	    .w = {.fn = pipe_event, .fd = out[0]}, .cmd = cmd, .type = CELL_FRAME_STDOUT};
	cmd->err = (struct pipe_end){
	    .w = {.fn = pipe_event, .fd = errs[0]}, .cmd = cmd, .type = CELL_FRAME_STDERR};
	cmd->errp = (struct init_watch){.fn = errp_event, .fd = errp[0]};
	cmd->timer = (struct init_watch){.fn = timer_event, .fd = -1};
	cmd->next = cmds;
	cmd->pprev = &cmds;
	if (cmds)
		cmds->pprev = &cmd->next;
	cmds = cmd;
	cmd->conn = c;
	conn_attach(c, &cmd_handler, cmd);
	/* PID 1 holds the write end of the stdin pipe: STDIN frames go in from the start (a
	 * pipe's worth is taken even before the execve). */
	ret = feed_open(&cmd->in, in[1]);

	/* Supervised from before it exists: a child nobody watches must not run. */
	if (ret == 0)
		ret = init_watch_add(&cmd->errp, EPOLLIN);
	if (ret == 0 && !start_watch_armed)
		start_watch_arm(START_DEADLINE_MS);
	if (ret == 0)
		ret = spawn_child(cmd);
	if (ret < 0) {
		child_fds_close(cmd);
		req_release(cmd);
		cmd->reaped = true; /* no child to wait for */
		start_failed(cmd, -ret, "EXEC: starting the command: %s", strerror(-ret));
		return;
	}
}
