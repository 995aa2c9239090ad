/* cell_spawn: every step of creating a sandbox, in its one fixed order.
 *
 * Two lists, read side by side: parent_steps (celld, host root) and child_steps (the
 * clone3'd child, fork-like). The parent's steps before clone_sandbox prepare what the
 * child reads; after it, the child waits on the sync socket for its mounts while the
 * parent maps its ids and builds them:
 *
 *   parent (parent_steps)                  child (child_steps)
 *   state dirs, relay socket, cgroup
 *   cgroup join fds, sync sockets
 *   clone3(NEWUSER|NEWNS|NEWPID|NEWNET|NEWIPC|NEWUTS) into the cgroup, as euid
 *   uid_base (the user namespace's owner: per-user kernel pools are the sandbox's own)
 *                                          join the v1 cgroups, restore securebits,
 *                                          reset signals
 *   uid/gid maps 0 -> uid_base             waits for its mounts on the sync socket
 *   oom_score_adj -1000 (PID 1 never the OOM victim)
 *   attach to the cgroup (fallback)
 *   idmapped image + overlay, volumes  --> receive the mount fds (SCM_RIGHTS)
 *                                          private propagation, host device nodes,
 *                                          overlay on <dir>/rootfs (still fsuid 0)
 *                                          become the mapped root, cgroup namespace
 *                                          /proc /sys /dev /tmp /workspace volumes,
 *                                          /sys/fs/cgroup
 *                                          pivot_root, masks, hostname, lo up, fds,
 *                                          rlimits, capabilities, seccomp, exec
 *   EOF on the sync socket = exec'd   <--  (or a struct cell_child_err, then _exit)
 *   take the seccomp listener
 *
 * The undo rule: a parent step records what it made in struct spawn_parent as soon as it
 * exists, and never undoes anything itself; parent_undo, the one undo path, undoes what
 * the struct holds, newest first, whichever step failed. On success hand_over moves what
 * the sandbox keeps out of the struct first, so the same call then only closes the
 * parent's temporaries. The child undoes nothing: on failure it reports and exits, and
 * the parent's undo kills it.
 *
 * The child runs in a copy of a multi-threaded process: it only makes system calls and
 * reads what the parent prepared (see internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/sched.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/id.h"
#include "cell/log.h"
#include "cell/proto.h"
#include "cell/runtime.h"
#include "internal.h"

#define SETUP_TIMEOUT_MS 30000
#define HOSTNAME_MAX	 64

/* Everything the child reads, computed by the parent before clone. */
struct child_plan {
	struct cell_mount_plan mounts;
	int sync_fd;   /* the child's end of the socketpair */
	int parent_fd; /* the parent's end, closed first thing in the child */
	int listen_fd; /* relay socket, becomes fd 3 */
	int exe_fd;    /* sealed cell-init memfd */
	const char *hostname;
	const char *resolv_conf; /* NULL: the image's /etc/resolv.conf stays */
	const struct cell_cgroup_join *join;
	const struct cell_cgroup_ops *cgroup;
	const struct cell_rlimit *rlimits;
	size_t n_rlimits;
	const struct cell_seccomp_prog *seccomp; /* NULL: none */
	int notify_fd;				 /* child's end for the seccomp listener, or -1 */
	int notify_parent_fd;			 /* parent's end, closed in the child */
	bool allow_setuid;			 /* struct cell_spawn_req */
	bool oci;				 /* struct cell_spawn_req */
	bool keep_stdio;			 /* struct cell_spawn_req */
	int joined_ns;				 /* struct cell_spawn_req */
	int rootfd;	   /* the child's own: O_PATH of the new root, from child_prepare_root on */
	uint32_t ns_owner; /* the host uid that owns the sandbox's user namespace */
	int securebits;	   /* to restore first thing in the child; -1: unchanged */
};

/* ---- child ---------------------------------------------------------------------------- */

/* celld's handlers and ignored signals (SIGPIPE) must not survive into the sandbox: an
 * ignored disposition would be inherited across exec by init and every command. */
static void child_reset_signals(void)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &dfl, NULL); /* glibc-internal signals refuse: fine */
}

static int child_reset_process(struct child_plan *cp, struct cell_child_err *ce)
{
	/* The clone kept its capabilities through acting as the namespace's owner: from here
	 * on a change of uid must drop them again as usual. */
	int r = cp->securebits < 0 ? 0 : cell_userns_owner_reset(cp->securebits);
	if (r < 0)
		return cell_child_fail(ce, CELL_STEP_CAPS, r, "restoring the securebits", NULL);
	child_reset_signals();
	umask(022);
	return 0;
}

static int child_recv_mounts(struct child_plan *cp, struct cell_child_err *ce)
{
	int r = cell_recv_fd(cp->sync_fd, &cp->mounts.overlay_fd);
	for (size_t i = 0; r == 0 && i < cp->mounts.n_volumes; i++)
		r = cell_recv_fd(cp->sync_fd, &cp->mounts.volume_fds[i]);
	return r < 0 ? cell_child_fail(ce, CELL_STEP_RECV, r, "receiving mounts from celld", NULL)
		     : 0;
}

static int child_prepare_root(struct child_plan *cp, struct cell_child_err *ce)
{
	cp->rootfd = cell_child_mount_prepare(&cp->mounts, ce);
	return cp->rootfd < 0 ? cp->rootfd : 0;
}

/* fsuid kuid 0 until now (enough to reach the 0700 sandbox dir; the euid was uid_base, the
 * user namespace's owner, and the other ids kuid 0); from here on the mapped root, host
 * uid_base for every id. Raw system calls: glibc's wrappers would try to signal celld's other
 * threads, which do not exist in this process. */
static int child_become_root(struct child_plan *cp, struct cell_child_err *ce)
{
	(void)cp;
	if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, 0, 0, 0) < 0 ||
	    syscall(SYS_setresuid, 0, 0, 0) < 0)
		return cell_child_fail(ce, CELL_STEP_IDS, errno, "switching to the sandbox's root",
				       NULL);
	return 0;
}

/* The cgroup joined first thing becomes the root of what the sandbox sees. */
static int child_unshare_cgroupns(struct child_plan *cp, struct cell_child_err *ce)
{
	(void)cp;
	if (unshare(CLONE_NEWCGROUP) < 0)
		return cell_child_fail(ce, CELL_STEP_CGROUPNS, errno, "cgroup namespace", NULL);
	return 0;
}

static int child_populate(struct child_plan *cp, struct cell_child_err *ce)
{
	return cell_child_mount_populate(&cp->mounts, cp->rootfd, ce);
}

static int child_mount_cgroupfs(struct child_plan *cp, struct cell_child_err *ce)
{
	return cp->cgroup->mount_inside(cp->rootfd, ce);
}

static int child_pivot_root(struct child_plan *cp, struct cell_child_err *ce)
{
	return cell_child_pivot_root(cp->rootfd, ce);
}

static int child_mask_paths(struct child_plan *cp, struct cell_child_err *ce)
{
	(void)cp;
	return cell_child_mask_paths(ce);
}

static int child_give_boot_id(struct child_plan *cp, struct cell_child_err *ce)
{
	(void)cp;
	return cell_child_boot_id(ce);
}

static int child_set_hostname(struct child_plan *cp, struct cell_child_err *ce)
{
	if (cp->joined_ns & CLONE_NEWUTS)
		return 0; /* a joined UTS namespace (a pod's) keeps its name */
	if (sethostname(cp->hostname, strlen(cp->hostname)) < 0)
		return cell_child_fail(ce, CELL_STEP_HOSTNAME, errno, "sethostname", cp->hostname);
	return 0;
}

/* The sandbox's name resolves, as on any Debian host (127.0.1.1 in /etc/hosts): sudo and
 * `hostname -f` ask for it, and sudo warns on every run when it does not. Added once, to
 * the sandbox's own /etc/hosts (its upper layer); a file the sandbox has made something
 * other than a regular file, or that names the host already, is left as it is. */
#define HOSTS_READ_MAX (16u << 10) /* on the stack of the thread that cloned */
static int child_add_hostname_to_hosts(struct child_plan *cp, struct cell_child_err *ce)
{
	if (cp->oci || (cp->joined_ns & CLONE_NEWUTS))
		return 0; /* an OCI engine brings its own /etc/hosts */
	_cleanup_close_ int fd =
	    open("/etc/hosts", O_RDWR | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > HOSTS_READ_MAX)
		return 0;
	char buf[HOSTS_READ_MAX + 1];
	ssize_t n = pread(fd, buf, HOSTS_READ_MAX, 0);
	if (n < 0)
		return 0;
	buf[n] = '\0';
	size_t hl = strlen(cp->hostname);
	for (const char *p = buf; (p = strstr(p, cp->hostname)); p += hl) {
		bool start = p == buf || p[-1] == ' ' || p[-1] == '\t';
		bool end = !p[hl] || p[hl] == ' ' || p[hl] == '\t' || p[hl] == '\n';
		if (start && end)
			return 0;
	}
	char line[128];
	int len = snprintf(line, sizeof(line), "%s127.0.1.1\t%s\n",
			   n && buf[n - 1] != '\n' ? "\n" : "", cp->hostname);
	if (len < 0 || (size_t)len >= sizeof(line) || write(fd, line, (size_t)len) != len)
		return cell_child_fail(ce, CELL_STEP_HOSTNAME, errno ? errno : EIO, "writing",
				       "/etc/hosts");
	return 0;
}

/* The sandbox's resolver, written into its own root (the overlay's upper layer) as its
 * root: a symlink the image has there (to a stub resolver's file) is replaced by a file. */
static int child_write_resolv_conf(struct child_plan *cp, struct cell_child_err *ce)
{
	if (!cp->resolv_conf)
		return 0;
	if (mkdir("/etc", 0755) < 0 && errno != EEXIST)
		return cell_child_fail(ce, CELL_STEP_RESOLV, errno, "creating", "/etc");
	if (unlink("/etc/resolv.conf") < 0 && errno != ENOENT)
		return cell_child_fail(ce, CELL_STEP_RESOLV, errno, "replacing",
				       "/etc/resolv.conf");
	_cleanup_close_ int fd =
	    open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	size_t len = strlen(cp->resolv_conf);
	if (fd < 0 || write(fd, cp->resolv_conf, len) != (ssize_t)len)
		return cell_child_fail(ce, CELL_STEP_RESOLV, fd < 0 ? errno : EIO, "writing",
				       "/etc/resolv.conf");
	return 0;
}

static int child_loopback_up(struct child_plan *cp, struct cell_child_err *ce)
{
	if (cp->joined_ns & CLONE_NEWNET)
		return 0; /* a joined network (a pod's, the host's) is its owner's to set up */
	_cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return cell_child_fail(ce, CELL_STEP_LOOPBACK, errno, "socket for", "lo");
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return cell_child_fail(ce, CELL_STEP_LOOPBACK, errno, "reading flags of", "lo");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		return cell_child_fail(ce, CELL_STEP_LOOPBACK, errno, "bringing up", "lo");
	return 0;
}

/* cell-init gets /dev/null on 0-2, the relay socket on 3, and nothing else of celld's:
 * every other fd (client sockets, other sandboxes' fds) is close-on-exec. */
static int child_setup_fds(struct child_plan *cp, struct cell_child_err *ce)
{
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul < 0)
		return cell_child_fail(ce, CELL_STEP_FDS, errno, "opening", "/dev/null");
	/* Park the fds we keep above 0-3 first, so filling 0-3 cannot clobber one. */
	int *keep[] = {&nul, &cp->listen_fd, &cp->exe_fd, &cp->sync_fd, &cp->notify_fd};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(keep); i++) {
		if (*keep[i] < 0)
			continue;
		int fd = fcntl(*keep[i], F_DUPFD_CLOEXEC, 10);
		if (fd < 0)
			return cell_child_fail(ce, CELL_STEP_FDS, errno, "duplicating fds", NULL);
		*keep[i] = fd;
	}
	/* An OCI container's stdio is the engine's (its pipes, or a terminal): cell-init hands
	 * it to the container's process. */
	for (int fd = 0; fd < 3 && !cp->keep_stdio; fd++)
		if (dup3(nul, fd, 0) < 0)
			return cell_child_fail(ce, CELL_STEP_FDS, errno, "stdio on", "/dev/null");
	if (dup3(cp->listen_fd, CELL_INIT_LISTEN_FD, 0) < 0)
		return cell_child_fail(ce, CELL_STEP_FDS, errno, "relay socket to fd 3", NULL);
	if (close_range(CELL_INIT_LISTEN_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		return cell_child_fail(ce, CELL_STEP_FDS, errno, "marking fds close-on-exec", NULL);
	return 0;
}

static int child_set_rlimits(struct child_plan *cp, struct cell_child_err *ce)
{
	return cell_child_set_rlimits(cp->rlimits, cp->n_rlimits, ce);
}

static int child_drop_privileges(struct child_plan *cp, struct cell_child_err *ce)
{
	return cell_child_drop_privileges(cp->allow_setuid, ce);
}

/* The filter goes in last, right before exec, under no_new_privs; without no_new_privs
 * (allow_setuid) it goes in before the capabilities are dropped, while CAP_SYS_ADMIN is
 * still held: the one step that moves. The capability calls after it are ones every
 * profile allows (capset, prctl). */
static int child_apply_seccomp_early(struct child_plan *cp, struct cell_child_err *ce)
{
	return cp->seccomp && cp->allow_setuid
		   ? cell_child_apply_seccomp(cp->seccomp, true, cp->notify_fd, ce)
		   : 0;
}

static int child_apply_seccomp(struct child_plan *cp, struct cell_child_err *ce)
{
	return cp->seccomp && !cp->allow_setuid
		   ? cell_child_apply_seccomp(cp->seccomp, false, cp->notify_fd, ce)
		   : 0;
}

static int child_exec(struct child_plan *cp, struct cell_child_err *ce)
{
	/* A clean environment: nothing of celld's enters the sandbox. */
	static char *const argv[] = {"cell-init", NULL};
	static char *const oci_argv[] = {"cell-init", "--oci", NULL};
	static char *const envp[] = {
	    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	    "HOME=/root",
	    "LANG=C.UTF-8",
	    "TERM=xterm",
	    NULL,
	};
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	syscall(SYS_execveat, cp->exe_fd, "", cp->oci ? oci_argv : argv, envp, AT_EMPTY_PATH);
	return cell_child_fail(ce, CELL_STEP_EXEC, errno, "executing cell-init", NULL);
}

/* Move into the sandbox's v1 cgroups (see struct cell_cgroup_join): first thing, so nothing
 * the child does is accounted outside them. */
static int child_join_cgroups(struct child_plan *cp, struct cell_child_err *ce)
{
	const struct cell_cgroup_join *j = cp->join;
	for (size_t i = 0; i < j->n_task_fds; i++) {
		ssize_t n;
		do
			n = write(j->task_fds[i], "0", 1);
		while (n < 0 && errno == EINTR);
		if (n != 1)
			return cell_child_fail(ce, CELL_STEP_CGROUP, n < 0 ? errno : EIO,
					       "joining the sandbox's cgroup", NULL);
		close(j->task_fds[i]);
	}
	return 0;
}

typedef int child_step_fn(struct child_plan *cp, struct cell_child_err *ce);

/* The child's steps, in order: each returns 0, or fills ce and stops the list. The
 * cgroup is joined before anything runs in it; seccomp comes last, right before exec
 * (before the capabilities are dropped when set-user-ID programs are allowed). */
static child_step_fn *const child_steps[] = {
    child_join_cgroups,
    child_reset_process,
    child_recv_mounts,
    child_prepare_root,
    child_become_root,
    child_unshare_cgroupns,
    child_populate,
    child_mount_cgroupfs,
    child_pivot_root,
    child_mask_paths,
    child_give_boot_id,
    child_set_hostname,
    child_add_hostname_to_hosts,
    child_write_resolv_conf,
    child_loopback_up,
    child_setup_fds,
    child_set_rlimits,
    child_apply_seccomp_early,
    child_drop_privileges,
    child_apply_seccomp,
    child_exec,
};

/* Runs the steps; the last one execs, so this only returns through a failure report. */
static _Noreturn void child_main(struct child_plan *cp)
{
	struct cell_child_err ce;
	memset(&ce, 0, sizeof(ce));
	close(cp->parent_fd); /* so the parent's death reads as EOF */
	if (cp->notify_parent_fd >= 0)
		close(cp->notify_parent_fd);
	for (size_t i = 0; i < CELL_ARRAY_SIZE(child_steps); i++)
		if (child_steps[i](cp, &ce) < 0)
			break;
	cell_child_exit(cp->sync_fd, &ce);
}

/* ---- parent --------------------------------------------------------------------------- */

/* Everything the parent makes for one sandbox, each recorded as soon as it exists: -1 /
 * false / 0 until then. parent_undo is the only place any of it is undone. */
struct spawn_parent {
	const struct cell_spawn_req *req;
	char rootfs[PATH_MAX], sock_path[PATH_MAX];
	int listen_fd;	  /* relay socket at sock_path (the path is removed by undo) */
	bool cgroup_made; /* create was tried: undo removes the cgroup, half-made or not */
	struct cell_cgroup_join join;
	int sync[2], notify[2]; /* [0] the parent's end, [1] the child's until clone */
	struct child_plan child;
	pid_t pid; /* the child, once cloned */
	int pidfd;
	bool clone_by_pid; /* born outside its cgroup2 cgroup: attach_by_pid moves it */
	int userns;	   /* the child's user namespace, for idmapping its mounts */
	int overlay;	   /* the root overlay; the runtime holds it once handed over */
	int listener;	   /* seccomp user-notification fd */
	bool handed_over;  /* the sandbox is the caller's: undo only closes temporaries */
};

static bool hostname_valid(const char *h)
{
	size_t len = strlen(h);
	if (len == 0 || len > HOSTNAME_MAX)
		return false;
	for (; *h; h++)
		if (!(*h >= 'a' && *h <= 'z') && !(*h >= 'A' && *h <= 'Z') &&
		    !(*h >= '0' && *h <= '9') && *h != '-' && *h != '.')
			return false;
	return true;
}

static int check_req(const struct cell_spawn_req *req, struct cell_error *err)
{
	if (!req->id || !cell_id_valid(req->id))
		return cell_err(err, EINVAL, "spawn: invalid sandbox id");
	if (!req->dir || req->dir[0] != '/')
		return cell_err(err, EINVAL, "spawn: sandbox dir must be an absolute path");
	if (strlen(req->dir) + sizeof("/init.sock") > sizeof(((struct sockaddr_un *)0)->sun_path))
		return cell_err(err, ENAMETOOLONG, "spawn: sandbox dir %s is too long for %s",
				req->dir, "init.sock");
	if (req->root_dir ? req->root_dir[0] != '/'
			  : !req->image_rootfs || req->image_rootfs[0] != '/')
		return cell_err(err, EINVAL,
				"spawn: the root (an image rootfs or a directory) "
				"must be an absolute path");
	if (req->joined_ns & ~(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS))
		return cell_err(err, EINVAL, "spawn: only net, ipc and uts may be joined");
	if (req->n_image_layers > CELL_IMAGE_LAYERS_MAX)
		return cell_err(err, EINVAL, "spawn: %zu image layers (at most %d)",
				req->n_image_layers, CELL_IMAGE_LAYERS_MAX);
	for (size_t i = 0; i < req->n_image_layers; i++)
		if (!req->image_layers[i] || req->image_layers[i][0] != '/')
			return cell_err(err, EINVAL,
					"spawn: image layer %zu must be an absolute path", i);
	/* Host root (and every id below the first slot) must never be inside a sandbox's
	 * range, and the range must not wrap or reach the invalid id 0xffffffff. */
	if (req->uid_base < CELL_UID_RANGE || req->uid_base > UINT32_MAX - CELL_UID_RANGE)
		return cell_err(err, EINVAL, "spawn: uid_base %u out of range", req->uid_base);
	if (req->hostname && !hostname_valid(req->hostname))
		return cell_err(err, EINVAL, "spawn: invalid hostname '%s'", req->hostname);
	if (req->init_exe_fd < 0)
		return cell_err(err, EBADF, "spawn: no cell-init memfd");
	if (!req->cgroup || !req->cgroup_rel)
		return cell_err(err, EINVAL, "spawn: no cgroup");
	if (req->upper_name && (!req->upper_name[0] || strchr(req->upper_name, '/') ||
				!strcmp(req->upper_name, ".") || !strcmp(req->upper_name, "..")))
		return cell_err(err, EINVAL, "spawn: upper dir name must be one component");
	if (req->layer_dir && req->layer_dir[0] != '/')
		return cell_err(err, EINVAL, "spawn: layer dir must be an absolute path");
	if (req->n_rlimits > CELL_MAX_RLIMITS || (req->n_rlimits && !req->rlimits))
		return cell_err(err, E2BIG, "spawn: at most %d rlimits", CELL_MAX_RLIMITS);
	if (req->seccomp && (!req->seccomp->filter || !req->seccomp->len))
		return cell_err(err, EINVAL, "spawn: empty seccomp filter");
	if (req->n_tmpfs > CELL_MAX_TMPFS || (req->n_tmpfs && !req->tmpfs))
		return cell_err(err, E2BIG, "spawn: at most %d tmpfs mounts", CELL_MAX_TMPFS);
	for (size_t i = 0; i < req->n_tmpfs; i++) {
		int r = cell_mount_check_dest(req->tmpfs[i].dest, err);
		if (r < 0)
			return r;
	}
	if (req->n_volumes > CELL_MAX_VOLUMES || (req->n_volumes && !req->volumes))
		return cell_err(err, E2BIG, "spawn: at most %d volumes", CELL_MAX_VOLUMES);
	for (size_t i = 0; i < req->n_volumes; i++) {
		const struct cell_volume *v = &req->volumes[i];
		if (v->host ? v->host[0] != '/' : v->source_fd < 0)
			return cell_err(err, EINVAL,
					"volume %zu: host path must be absolute, or a named "
					"volume's fd given",
					i);
		int r = cell_mount_check_dest(v->dest, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* <dir>/<name>, created if missing, then (re)set to mode and owner. Opened with O_NOFOLLOW:
 * a symlink in its place is refused, never followed. */
static int make_dir(int dirfd, const char *dir, const char *name, mode_t mode, uid_t owner,
		    struct cell_error *err)
{
	if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST)
		return cell_err(err, errno, "creating %s/%s", dir, name);
	_cleanup_close_ int fd =
	    openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "opening %s/%s", dir, name);
	if (fchown(fd, owner, owner) < 0 || fchmod(fd, mode) < 0)
		return cell_err(err, errno, "setting owner and mode of %s/%s", dir, name);
	return 0;
}

static const char *layer_dir(const struct cell_spawn_req *req)
{
	return req->layer_dir ? req->layer_dir : req->dir;
}

static int make_state_dirs(struct spawn_parent *p, struct cell_error *err)
{
	const struct cell_spawn_req *req = p->req;
	_cleanup_close_ int dirfd = open(req->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return cell_err(err, errno, "opening sandbox dir %s", req->dir);
	if (req->root_dir)
		return make_dir(dirfd, req->dir, "rootfs", 0755, 0, err);
	const char *layers = layer_dir(req);
	_cleanup_close_ int layerfd = open(layers, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (layerfd < 0)
		return cell_err(err, errno, "opening layer dir %s", layers);
	int r = make_dir(layerfd, layers, req->upper_name ? req->upper_name : "upper", 0755,
			 req->uid_base, err);
	if (r == 0)
		r = make_dir(layerfd, layers, "work", 0700, req->uid_base, err);
	if (r == 0)
		r = make_dir(dirfd, req->dir, "rootfs", 0755, 0, err);
	return r;
}

/* <dir>/init.sock: only host root can reach it (the dir is 0700 root, the socket 0600), and
 * the sandbox cannot see the path at all; it only holds the listening fd. */
static int make_relay_socket(const char *path, struct cell_error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(path);
	if (len >= sizeof(sa.sun_path))
		return cell_err(err, ENAMETOOLONG, "relay socket path %s", path);
	memcpy(sa.sun_path, path, len + 1);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return cell_err(err, errno, "socket for %s", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return cell_err(err, errno, "removing stale %s", path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return cell_err(err, errno, "binding %s", path);
	if (chmod(path, 0600) < 0 || listen(fd, 128) < 0)
		return cell_err(err, errno, "listening on %s", path);
	return move_fd(fd);
}

static int make_relay(struct spawn_parent *p, struct cell_error *err)
{
	int fd = make_relay_socket(p->sock_path, err);
	if (fd < 0)
		return fd;
	p->listen_fd = fd;
	return 0;
}

/* Limits go in before the child is born, so it never runs unbounded. */
static int make_cgroup(struct spawn_parent *p, struct cell_error *err)
{
	const struct cell_spawn_req *req = p->req;
	p->cgroup_made = true;
	int r = req->cgroup->create(req->cgroup_rel, err);
	if (r == 0 && req->limits && req->cgroup->set_limits)
		r = req->cgroup->set_limits(req->cgroup_rel, req->limits, err);
	return r;
}

static int open_cgroup_join(struct spawn_parent *p, struct cell_error *err)
{
	return cell_cgroup_join_open(p->req->cgroup, p->req->cgroup_rel, &p->join, err);
}

static int make_socket_pair(struct spawn_parent *p, int pair[2], struct cell_error *err)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return cell_err(err, errno, "socketpair for sandbox %s", p->req->id);
	pair[0] = sp[0];
	pair[1] = sp[1];
	return 0;
}

/* The sync socket: mounts go to the child, its failure (or the EOF of its exec) comes
 * back. The notify socket carries the seccomp listener back, when there is one. */
static int make_sync_sockets(struct spawn_parent *p, struct cell_error *err)
{
	const struct cell_seccomp_prog *sc = p->req->seccomp;
	int r = make_socket_pair(p, p->sync, err);
	if (r == 0 && sc && sc->notify)
		r = make_socket_pair(p, p->notify, err);
	return r;
}

static void plan_child(struct spawn_parent *p)
{
	const struct cell_spawn_req *req = p->req;
	p->child = (struct child_plan){
	    .mounts = {.rootfs = p->rootfs,
		       .volumes = req->volumes,
		       .n_volumes = req->n_volumes,
		       .oci = req->oci,
		       .tmpfs = req->tmpfs,
		       .n_tmpfs = req->n_tmpfs},
	    .sync_fd = p->sync[1],
	    .parent_fd = p->sync[0],
	    .listen_fd = p->listen_fd,
	    .exe_fd = req->init_exe_fd,
	    .hostname = req->hostname ? req->hostname : req->id,
	    .resolv_conf = req->resolv_conf,
	    .join = &p->join,
	    .cgroup = req->cgroup,
	    .rlimits = req->rlimits,
	    .n_rlimits = req->n_rlimits,
	    .seccomp = req->seccomp,
	    .notify_fd = p->notify[1],
	    .notify_parent_fd = p->notify[0],
	    .allow_setuid = req->allow_setuid,
	    .oci = req->oci,
	    .keep_stdio = req->keep_stdio,
	    .joined_ns = req->joined_ns,
	    .rootfd = -1,
	    .ns_owner = req->uid_base,
	    .securebits = -1,
	};
	if (req->limits && req->limits->memory_bytes)
		snprintf(p->child.mounts.tmpfs_size, sizeof(p->child.mounts.tmpfs_size), "%llu",
			 (unsigned long long)(req->limits->memory_bytes / 2));
}

static atomic_bool owner_unchanged_said;

/* The sandbox's user namespace is to be owned by its first host uid (userns.c says why).
 * A celld that cannot act as another uid (no CAP_SETPCAP, locked securebits) makes it
 * owned by root, as the log says once: its sandboxes then share root's per-user pools. */
static void owner_begin(struct child_plan *cp)
{
	struct cell_error err = {0};
	if (cell_userns_owner_begin(cp->ns_owner, &cp->securebits, &err) == 0)
		return;
	cp->securebits = -1;
	if (!atomic_exchange(&owner_unchanged_said, true))
		log_warn("sandboxes' user namespaces stay owned by root, sharing its per-user "
			 "kernel pools (inotify, signals, mqueues): %s",
			 err.msg);
}

/* into_fd: the cgroup2 cgroup the child is born in (CLONE_INTO_CGROUP), or -1. */
static pid_t clone_child(struct child_plan *cp, int into_fd, int *pidfd)
{
	/* No handler of celld's may run in the child before it resets them. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	owner_begin(cp);
	struct clone_args args = {
	    .flags = ((CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
		       CLONE_NEWUTS) &
		      ~(uint64_t)cp->joined_ns) |
		     CLONE_PIDFD | (into_fd >= 0 ? CLONE_INTO_CGROUP : 0),
	    .pidfd = (uint64_t)(uintptr_t)pidfd,
	    .exit_signal = SIGCHLD,
	    .cgroup = into_fd >= 0 ? (uint64_t)into_fd : 0,
	};
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid == 0)
		child_main(cp);
	int saved = errno;
	if (cp->securebits >= 0)
		cell_userns_owner_end(cp->securebits);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return (pid_t)pid;
}

/* clone3 into the cgroup2 cgroup; should the kernel refuse CLONE_INTO_CGROUP for this
 * cgroup, clone plainly and have the parent attach the child by pid (*by_pid). */
static pid_t clone_into(struct child_plan *cp, const struct cell_cgroup_join *j, int *pidfd,
			bool *by_pid)
{
	*by_pid = false;
	if (j->clone_fd < 0)
		return clone_child(cp, -1, pidfd);
	pid_t pid = clone_child(cp, j->clone_fd, pidfd);
	if (pid >= 0 || (errno != EINVAL && errno != E2BIG && errno != EOPNOTSUPP &&
			 errno != EBUSY && errno != ENOSYS))
		return pid;
	*by_pid = true;
	return clone_child(cp, -1, pidfd);
}

static int clone_sandbox(struct spawn_parent *p, struct cell_error *err)
{
	plan_child(p);
	int pidfd = -1;
	pid_t pid = clone_into(&p->child, &p->join, &pidfd, &p->clone_by_pid);
	int clone_errno = errno;
	/* The child's ends are the child's now. */
	cell_closep(&p->sync[1]);
	cell_closep(&p->notify[1]);
	if (pid < 0)
		return cell_err(err, clone_errno, "clone3 for sandbox %s", p->req->id);
	p->pid = pid;
	p->pidfd = pidfd;
	return 0;
}

static int write_id_maps(struct spawn_parent *p, struct cell_error *err)
{
	return cell_userns_write_maps(p->pid, p->req->uid_base, err);
}

/* The sandbox's PID 1 is never the OOM killer's victim (-1000). Written from here, as
 * root of the host, while the child still waits before its exec: no other process of the
 * sandbox exists yet. Without it, a memory kill of the last other process of a sandbox
 * that ends while its socket buffers are still charged (an exit frees the memory map
 * before the files) leaves PID 1 as the only candidate of the next kill, which takes the
 * whole sandbox along. The write also sets the floor that processes forked from PID 1
 * inherit: cell-init raises each command to 500 (cell-init's exec.c), and a command may
 * lower itself back as far as -1000, making itself unkillable inside its own sandbox
 * only: its memory stays within the limit, and deleting or stopping the sandbox still
 * kills it (cgroup.kill). Lowering takes CAP_SYS_RESOURCE: a celld without it (a
 * container that withholds it) leaves PID 1 at 0, as the log says once. */
static atomic_bool oom_unprotected_said;

static int protect_init(struct spawn_parent *p, struct cell_error *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)p->pid);
	struct cell_error werr = {0};
	int r = cell_write_string(path, "-1000", &werr);
	if (r == -EACCES && !atomic_exchange(&oom_unprotected_said, true))
		log_warn("sandboxes' PID 1 stays an OOM candidate (oom_score_adj 0): %s (celld "
			 "lacks CAP_SYS_RESOURCE)",
			 werr.msg);
	if (r < 0 && r != -EACCES)
		return cell_err_msg(err, -r, "%s", werr.msg);
	return 0;
}

/* The parent's part of joining the cgroup, when the child could not be born into it. */
static int attach_by_pid(struct spawn_parent *p, struct cell_error *err)
{
	const struct cell_spawn_req *req = p->req;
	const struct cell_cgroup_join *j = &p->join;
	if (j->by_pid) {
		int r = req->cgroup->attach(req->cgroup_rel, p->pid, err);
		return r < 0 ? cell_err_wrap(err, "attaching to cgroup %s: ", req->cgroup_rel) : 0;
	}
	if (!p->clone_by_pid)
		return 0;
	_cleanup_close_ int fd = openat(j->clone_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	char val[24];
	int len = snprintf(val, sizeof(val), "%d", (int)p->pid);
	if (fd < 0 || write(fd, val, len) != len)
		return cell_err(err, errno, "attaching to cgroup %s", req->cgroup_rel);
	return 0;
}

static int open_child_userns(struct spawn_parent *p, struct cell_error *err)
{
	int fd = cell_userns_open(p->pid, err);
	if (fd < 0)
		return fd;
	p->userns = fd;
	return 0;
}

/* The image idmapped to the child's user namespace, under the sandbox's upper layer. */
static int send_rootfs(struct spawn_parent *p, struct cell_error *err)
{
	const struct cell_spawn_req *req = p->req;
	const char *const *lowers = req->n_image_layers ? req->image_layers : &req->image_rootfs;
	size_t n = req->n_image_layers ? req->n_image_layers : 1;
	int fd = req->root_dir
		     ? cell_mount_dir_tree_fd(req->root_dir, p->userns, req->root_readonly, err)
		     : cell_mount_overlay_fd(lowers, n, layer_dir(req), req->upper_name, p->rootfs,
					     p->userns, err);
	if (fd < 0)
		return fd;
	p->overlay = fd;
	int r = cell_send_fd(p->sync[0], p->overlay);
	return r < 0 ? cell_err(err, r, "handing the rootfs to the sandbox") : 0;
}

static int send_volumes(struct spawn_parent *p, struct cell_error *err)
{
	const struct cell_spawn_req *req = p->req;
	for (size_t i = 0; i < req->n_volumes; i++) {
		_cleanup_close_ int vol = cell_mount_volume_fd(&req->volumes[i], req->uid_base,
							       p->userns, p->rootfs, err);
		if (vol < 0)
			return vol;
		int r = cell_send_fd(p->sync[0], vol);
		if (r < 0)
			return cell_err(err, r, "handing volume %s to the sandbox",
					req->volumes[i].dest);
	}
	return 0;
}

static long ms_since(const struct timespec *start)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - start->tv_sec) * 1000 + (now.tv_nsec - start->tv_nsec) / 1000000;
}

/* EOF on the sync socket: the child exec'd cell-init (close-on-exec) — or died. */
static int wait_child(int sync_fd, int pidfd, struct cell_error *err)
{
	struct cell_child_err ce;
	size_t got = 0;
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (got < sizeof(ce)) {
		long left = SETUP_TIMEOUT_MS - ms_since(&start);
		struct pollfd pfd = {.fd = sync_fd, .events = POLLIN};
		int r = left > 0 ? poll(&pfd, 1, (int)left) : 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return cell_err(err, errno, "sandbox setup: waiting for the child");
		if (r == 0)
			return cell_err(err, ETIMEDOUT, "sandbox setup: no answer from the child");
		ssize_t n = read(sync_fd, (char *)&ce + got, sizeof(ce) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return cell_err(err, errno, "sandbox setup: reading the child's status");
		if (n == 0)
			break;
		got += n;
	}
	if (got == sizeof(ce)) {
		ce.what[sizeof(ce.what) - 1] = '\0';
		int e = ce.errno_value > 0 && ce.errno_value < 4096 ? ce.errno_value : EIO;
		return cell_err(err, e, "sandbox setup: %s", ce.what);
	}
	if (got)
		return cell_err(err, EPROTO, "sandbox setup: truncated status from the child");
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (waitid(P_PIDFD, pidfd, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid)
		return cell_err(err, ECHILD,
				"sandbox setup: the child ended (%s %d) before "
				"running cell-init",
				si.si_code == CLD_EXITED ? "status" : "signal", si.si_status);
	return 0;
}

static int wait_for_exec(struct spawn_parent *p, struct cell_error *err)
{
	return wait_child(p->sync[0], p->pidfd, err);
}

/* The child sent the listener before its exec, which closed the sync socket: it is already
 * queued, so this does not wait. */
static int take_seccomp_listener(struct spawn_parent *p, struct cell_error *err)
{
	if (p->notify[0] < 0)
		return 0;
	int fd = -1;
	int r = cell_recv_fd(p->notify[0], &fd);
	if (r < 0)
		return cell_err(err, -r, "taking the seccomp listener of the sandbox");
	p->listener = fd;
	return 0;
}

typedef int parent_step_fn(struct spawn_parent *p, struct cell_error *err);

/* The parent's steps, in order; each undone by parent_undo. */
static parent_step_fn *const parent_steps[] = {
    make_state_dirs,
    make_relay,
    make_cgroup,
    open_cgroup_join,
    make_sync_sockets,
    clone_sandbox,
    write_id_maps,
    protect_init,
    attach_by_pid,
    /* No network step: the net namespace is born with loopback alone, and celld attaches
     * the sandbox's interface after the spawn (network.c, network_attach). */
    open_child_userns,
    send_rootfs,
    send_volumes,
    wait_for_exec,
    take_seccomp_listener,
};

static void parent_init(struct spawn_parent *p, const struct cell_spawn_req *req)
{
	*p = (struct spawn_parent){
	    .req = req,
	    .listen_fd = -1,
	    .join = {.clone_fd = -1},
	    .sync = {-1, -1},
	    .notify = {-1, -1},
	    .pidfd = -1,
	    .userns = -1,
	    .overlay = -1,
	    .listener = -1,
	};
	snprintf(p->rootfs, sizeof(p->rootfs), "%s/rootfs", req->dir);
	snprintf(p->sock_path, sizeof(p->sock_path), "%s/init.sock", req->dir);
}

/* Once the child exists, an error names the sandbox. */
static int parent_run(struct spawn_parent *p, struct cell_error *err)
{
	for (size_t i = 0; i < CELL_ARRAY_SIZE(parent_steps); i++) {
		int r = parent_steps[i](p, err);
		if (r < 0)
			return p->pid > 0 ? cell_err_wrap(err, "sandbox %s: ", p->req->id) : r;
	}
	return 0;
}

/* What the sandbox keeps leaves the struct: the caller owns the pidfd and the listener,
 * the runtime holds the overlay, and the cgroup and relay socket stay. */
static void hand_over(struct spawn_parent *p, struct cell_spawn_result *out)
{
	cell_mount_hold(p->pid, move_fd(p->overlay));
	out->pid = p->pid;
	out->pidfd = move_fd(p->pidfd);
	out->starttime = cell_proc_starttime(p->pid);
	out->seccomp_listener = move_fd(p->listener);
	p->handed_over = true;
}

/* The one undo path (see the top of this file), newest first. The state dirs stay: <dir>
 * is the caller's. */
static void parent_undo(struct spawn_parent *p)
{
	const struct cell_spawn_req *req = p->req;
	cell_closep(&p->listener);
	cell_closep(&p->overlay);
	cell_closep(&p->userns);
	cell_cgroup_join_close(&p->join);
	if (!p->handed_over && p->pidfd >= 0)
		/* Its PID 1 takes the whole pid namespace along; then the cgroup goes. */
		cell_teardown(p->pid, p->pidfd, 0, req->cgroup, req->cgroup_rel, NULL);
	else if (!p->handed_over && p->cgroup_made)
		req->cgroup->destroy(req->cgroup_rel, NULL);
	cell_closep(&p->pidfd);
	for (int i = 0; i < 2; i++) {
		cell_closep(&p->notify[i]);
		cell_closep(&p->sync[i]);
	}
	if (!p->handed_over && p->listen_fd >= 0)
		unlink(p->sock_path);
	cell_closep(&p->listen_fd);
}

int cell_spawn(const struct cell_spawn_req *req, struct cell_spawn_result *out,
	       struct cell_error *err)
{
	if (!req || !out)
		return cell_err(err, EINVAL, "spawn: no request");
	int r = check_req(req, err);
	if (r < 0)
		return r;
	struct spawn_parent p;
	parent_init(&p, req);
	r = parent_run(&p, err);
	if (r == 0)
		hand_over(&p, out);
	parent_undo(&p);
	return r;
}
