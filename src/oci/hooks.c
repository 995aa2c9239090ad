/* The spec's hooks (hooks.h). A hook is the engine's program (a device plugin's, a network
 * plugin's): it runs as cell-oci does, on the host, with no fd of ours but its stdin. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "hooks.h"

#define HOOK_TIMEOUT_DEFAULT 30

static const char *const kind_names[OCI_HOOK_KINDS] = {
    "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"};

int oci_hooks_check(const struct oci_spec *s, struct cell_error *err)
{
	for (int k = OCI_HOOK_CREATE_CONTAINER; k <= OCI_HOOK_START_CONTAINER; k++)
		if (s->n_hooks[k])
			return cell_err_msg(err, EINVAL,
					    "hooks.%s: hooks inside the container's namespaces are "
					    "not supported",
					    kind_names[k]);
	return 0;
}

/* Wait for the hook by its pidfd until the deadline; SIGKILL past it. */
static int wait_hook(pid_t pid, int timeout, const char *path, struct cell_error *err)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct pollfd p = {pidfd, POLLIN, 0};
	int ready = pidfd >= 0 ? poll(&p, 1, timeout * 1000) : 1;
	if (ready == 0)
		kill(pid, SIGKILL);
	if (pidfd >= 0)
		close(pidfd);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (ready == 0)
		return cell_err_msg(err, ETIMEDOUT, "hook %s: no end within %d s", path, timeout);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return cell_err_msg(err, EIO, "hook %s failed (%s %d)", path,
				    WIFEXITED(st) ? "status" : "signal",
				    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	return 0;
}

static int run_one(const struct oci_hook *h, const char *state, struct cell_error *err)
{
	int in[2];
	if (pipe2(in, O_CLOEXEC) < 0)
		return cell_err(err, errno, "hook %s", h->path);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		char *argv0[] = {h->path, NULL};
		char *envp0[] = {NULL};
		execve(h->path, h->args.n ? h->args.v : argv0, h->env.n ? h->env.v : envp0);
		_exit(127);
	}
	close(in[0]);
	if (pid < 0) {
		close(in[1]);
		return cell_err(err, errno, "hook %s", h->path);
	}
	/* The state is small; a hook that never reads it still gets its EOF. */
	signal(SIGPIPE, SIG_IGN);
	int w = cell_write_all(in[1], state, strlen(state));
	(void)w;
	close(in[1]);
	return wait_hook(pid, h->timeout > 0 ? h->timeout : HOOK_TIMEOUT_DEFAULT, h->path, err);
}

int oci_hooks_run(const struct oci_spec *s, enum oci_hook_kind kind, const json_t *state,
		  struct cell_error *err)
{
	if (!s->n_hooks[kind])
		return 0;
	_cleanup_free_ char *text = json_dumps(state, JSON_COMPACT);
	if (!text)
		return cell_err(err, ENOMEM, "hooks.%s", kind_names[kind]);
	for (size_t i = 0; i < s->n_hooks[kind]; i++) {
		int r = run_one(&s->hooks[kind][i], text, err);
		if (r < 0)
			return cell_err_wrap(err, "hooks.%s[%zu]: ", kind_names[kind], i);
	}
	return 0;
}
