/* cell-escape: the escape battery's helper. One static program (libc only, raw syscall()
 * where glibc has no wrapper) that runs inside a sandbox as its root and tries each way out
 * that cell's threat model (man/cell-security.7) says is closed, then checks that the
 * ordinary work an agent does (packages, compilers, debuggers on its own processes, a
 * server on port 80) still succeeds. It prints TAP:
 *
 *   1..N
 *   ok 3 - syscalls: add_key, keyctl and request_key are denied with EPERM
 *   not ok 4 - syscalls: bpf(BPF_MAP_CREATE) is denied with EPERM # succeeded (returned 3)
 *   ok 9 - ordinary: gcc compiles and runs a program # SKIP gcc is not in this image
 *
 * Every attempt asserts the precise outcome (an errno, not just "failed") and runs in a
 * forked child with a time limit, so a crash, a hang or a state change of one attempt
 * (a namespace, a personality) never touches the next. An attempt that succeeds undoes what
 * it did inside the sandbox (unmounts, detaches) and never writes to anything that reaches
 * outside it: files under /proc and /sys are opened for writing but never written.
 *
 *   cell-escape [--victim MARKER] [--victim-pid PID] [--victim-dir DIR] [--host-pid PID]
 *               [--host-path PATH]...       run the battery
 *   cell-escape --plant MARKER               plant another sandbox's secrets (the victim)
 *                                            and prove they are reachable there (controls)
 *   cell-escape --volume DIR                 on the host directory mounted at DIR: try the
 *                                            attempts that need one (device nodes, the
 *                                            host's own files) and plant the set-id files
 *                                            and the file capability the host side checks
 *   cell-escape --links HOSTDIR              make the symlinks and hard link that the host
 *                                            side's files-API attempts go through
 *   cell-escape --pools SECONDS              take all of each of the kernel's per-user pools
 *                                            the sandbox is given and hold it that long in
 *                                            processes of their own (the host side then
 *                                            checks that host root and another sandbox
 *                                            still get theirs)
 *   cell-escape --pools-some                 take a few of each pool (that other sandbox)
 *   cell-escape --list                       name every attempt, run nothing
 *
 * `cell selftest` uploads it, runs it and merges its TAP with the host-side attempts. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <linux/bpf.h>
#include <linux/if_alg.h>
#include <linux/io_uring.h>
#include <linux/kcmp.h>
#include <linux/kexec.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>
#include <linux/tiocl.h>
#include <linux/userfaultfd.h>
#include <linux/vm_sockets.h>

#include "../../include/cell/pool.h"

#ifndef PTRACE_SEIZE
#define PTRACE_SEIZE 0x4206
#endif
#ifndef PTRACE_TRACEME
#define PTRACE_TRACEME 0
#endif
#ifndef PTRACE_CONT
#define PTRACE_CONT 7
#endif
#ifndef PTRACE_DETACH
#define PTRACE_DETACH 17
#endif
#ifndef Q_SYNC
#define Q_SYNC 0x800001
#endif
#ifndef QCMD
#define QCMD(cmd, type) (((cmd) << 8) | ((type)&0x00ff))
#endif
#define X32_SYSCALL_BIT 0x40000000

enum verdict { PASS, FAIL, SKIP };

/* Shared with the attempt's child (MAP_SHARED): its verdict and what happened. */
struct result {
	int verdict; /* -1 until the attempt set one */
	char msg[1536];
};

struct attempt {
	const char *cls;
	const char *name;
	int (*fn)(void);
	int timeout_s;
};

/* Options from the command line. */
static struct {
	const char *victim;	/* marker of the victim sandbox's secrets */
	pid_t victim_pid;	/* host pid of the victim sandbox's PID 1 */
	const char *victim_dir; /* host dir of the victim sandbox */
	pid_t host_pid;		/* a process outside every sandbox (the cell CLI) */
	const char *host_paths[8];
	int n_host_paths;
	const char *volume;   /* a host directory mounted here (--volume) */
	const char *net_peer; /* the victim sandbox's address (--net-peer), or NULL */
	unsigned pools_hold;  /* --pools: seconds the pools are held */
} opt;

static struct result *R;
static char scratch[64];      /* private temp dir of this run */
static char initial_fds[512]; /* fds open when the helper started, "0 1 2" */
static char initial_cwd[PATH_MAX];
static int initial_cwd_errno;

/* ---- small utilities ---------------------------------------------------------------- */

static const char *ename(int e)
{
	static char buf[32];
	const char *n = e ? strerrorname_np(e) : "no error";
	if (n)
		return n;
	snprintf(buf, sizeof(buf), "errno %d", e);
	return buf;
}

static int note(int verdict, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int note(int verdict, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(R->msg, sizeof(R->msg), fmt, ap);
	va_end(ap);
	return verdict;
}

/* Append to R->msg (for attempts that look at several things). */
static void add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void add(const char *fmt, ...)
{
	size_t len = strlen(R->msg);
	if (len >= sizeof(R->msg) - 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(R->msg + len, sizeof(R->msg) - len, fmt, ap);
	va_end(ap);
}

struct outcome {
	const char *what;
	long rc;
	int err;
};

/* Evaluate a call and capture errno right after it (argument evaluation order is
 * unspecified, so errno must not be read in the same call's argument list). */
#define CALL(label, expr)                                                                          \
	({                                                                                         \
		errno = 0;                                                                         \
		long rc_ = (long)(expr);                                                           \
		int e_ = errno;                                                                    \
		(struct outcome){label, rc_, e_};                                                  \
	})

static bool is_one_of(int e, const int *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (e == want[i])
			return true;
	return false;
}

static void describe_want(const int *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		add("%s%s", i ? " or " : "", ename(want[i]));
}

/* Every outcome must be a failure with one of the wanted errnos. */
static int want_errs(const struct outcome *o, size_t n, const int *want, size_t nw)
{
	for (size_t i = 0; i < n; i++) {
		if (o[i].rc >= 0) {
			note(FAIL, "%s succeeded (returned %ld), want ", o[i].what, o[i].rc);
			describe_want(want, nw);
			return FAIL;
		}
		if (!is_one_of(o[i].err, want, nw)) {
			note(FAIL, "%s failed with %s, want ", o[i].what, ename(o[i].err));
			describe_want(want, nw);
			return FAIL;
		}
	}
	note(PASS, "denied");
	return PASS;
}

#define WANT(errs, ...)                                                                            \
	({                                                                                         \
		const struct outcome o_[] = {__VA_ARGS__};                                         \
		const int w_[] = {errs};                                                           \
		want_errs(o_, sizeof(o_) / sizeof(o_[0]), w_, sizeof(w_) / sizeof(w_[0]));         \
	})
#define WANT2(e1, e2, ...)                                                                         \
	({                                                                                         \
		const struct outcome o_[] = {__VA_ARGS__};                                         \
		const int w_[] = {e1, e2};                                                         \
		want_errs(o_, sizeof(o_) / sizeof(o_[0]), w_, 2);                                  \
	})

/* Close an fd an attempt got by succeeding where it should not have. */
static void close_if(long rc)
{
	if (rc >= 0)
		close((int)rc);
}

static void path_in_scratch(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", scratch, name);
}

static int mkdir_scratch(char *buf, size_t size, const char *name)
{
	path_in_scratch(buf, size, name);
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* Wait for a child; its status, or -1. */
static int reap(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return st;
}

/* Is pid a process of this sandbox's pid namespace? (A host pid given on the command line
 * may happen to be the number of one of ours; such attempts are skipped.) */
static bool pid_visible(pid_t pid)
{
	char p[32];
	snprintf(p, sizeof(p), "/proc/%d", (int)pid);
	return exists(p);
}

static unsigned long long proc_starttime(pid_t pid)
{
	char p[64], buf[1024];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *s = strrchr(buf, ')');
	if (!s)
		return 0;
	unsigned long long v = 0;
	/* fields after the comm: state is field 3, starttime field 22 */
	int field = 2;
	for (char *tok = strtok(s + 1, " "); tok; tok = strtok(NULL, " ")) {
		if (++field == 22) {
			v = strtoull(tok, NULL, 10);
			break;
		}
	}
	return v;
}

/* ---- syscalls the seccomp profile denies -------------------------------------------- */

static int t_keyrings(void)
{
	return WANT(
	    EPERM,
	    CALL("add_key(user)",
		 syscall(SYS_add_key, "user", "cell-escape", "x", 1, KEY_SPEC_PROCESS_KEYRING)),
	    CALL("keyctl(JOIN_SESSION_KEYRING)",
		 syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL)),
	    CALL("request_key", syscall(SYS_request_key, "user", "cell-escape-absent", NULL, 0)));
}

static int t_bpf(void)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_ARRAY;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = 1;
	struct outcome o =
	    CALL("bpf(BPF_MAP_CREATE)", syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a)));
	close_if(o.rc);
	return WANT(EPERM, o);
}

static int t_perf(void)
{
	struct perf_event_attr pa;
	memset(&pa, 0, sizeof(pa));
	pa.type = PERF_TYPE_SOFTWARE;
	pa.size = sizeof(pa);
	pa.config = PERF_COUNT_SW_TASK_CLOCK;
	pa.disabled = 1;
	pa.exclude_kernel = 1;
	pa.exclude_hv = 1;
	struct outcome o =
	    CALL("perf_event_open(own task)", syscall(SYS_perf_event_open, &pa, 0, -1, -1, 0));
	close_if(o.rc);
	return WANT(EPERM, o);
}

static int t_userfaultfd(void)
{
	struct outcome o = CALL("userfaultfd(UFFD_USER_MODE_ONLY)",
				syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
	close_if(o.rc);
	return WANT(EPERM, o);
}

static int t_io_uring_setup(void)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	struct outcome o = CALL("io_uring_setup", syscall(SYS_io_uring_setup, 2, &p));
	close_if(o.rc);
	return WANT(EPERM, o);
}

static int t_io_uring_other(void)
{
	return WANT(EPERM,
		    CALL("io_uring_enter", syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0)),
		    CALL("io_uring_register", syscall(SYS_io_uring_register, -1, 0, NULL, 0)));
}

static int t_kexec(void)
{
	return WANT(EPERM, CALL("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0)),
		    CALL("kexec_file_load",
			 syscall(SYS_kexec_file_load, -1, -1, 0, "", KEXEC_FILE_NO_INITRAMFS)));
}

struct handle_buf {
	unsigned int handle_bytes;
	int handle_type;
	unsigned char f_handle[128];
};

static int t_open_by_handle(void)
{
	/* The "shocker" attack: a forged handle opens any inode of the filesystem, outside the
	 * sandbox's root, on kernels where the caller holds CAP_DAC_READ_SEARCH. */
	struct handle_buf h = {.handle_bytes = 8, .handle_type = 1};
	h.f_handle[0] = 2; /* inode 2: the root of an ext4 filesystem */
	struct outcome o = CALL("open_by_handle_at(forged handle)",
				syscall(SYS_open_by_handle_at, AT_FDCWD, &h, O_RDONLY));
	close_if(o.rc);
	return WANT(EPERM, o);
}

static int t_name_to_handle(void)
{
	struct handle_buf h = {.handle_bytes = sizeof(h.f_handle)};
	int mnt = 0;
	return WANT(EPERM, CALL("name_to_handle_at(/)",
				syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &h, &mnt, 0)));
}

static int t_modules(void)
{
	return WANT(
	    EPERM, CALL("init_module", syscall(SYS_init_module, NULL, 0, "")),
	    CALL("finit_module", syscall(SYS_finit_module, -1, "", 0)),
	    CALL("delete_module", syscall(SYS_delete_module, "cell_escape_none", O_NONBLOCK)));
}

static int t_mount_tmpfs(void)
{
	char p[PATH_MAX];
	mkdir_scratch(p, sizeof(p), "tmpfs");
	struct outcome o = CALL("mount(tmpfs)", mount("none", p, "tmpfs", 0, "size=4k"));
	if (o.rc == 0)
		umount2(p, MNT_DETACH);
	return WANT(EPERM, o);
}

static int t_umount_mask(void)
{
	/* Unmounting a mask would uncover what it hides. */
	return WANT(EPERM, CALL("umount2(/proc/kcore)", umount2("/proc/kcore", MNT_DETACH)),
		    CALL("umount2(/proc/sys)", umount2("/proc/sys", MNT_DETACH | UMOUNT_NOFOLLOW)));
}

static int t_pivot_root(void)
{
	char p[PATH_MAX], old[PATH_MAX + 8];
	mkdir_scratch(p, sizeof(p), "pivot");
	snprintf(old, sizeof(old), "%s/old", p);
	mkdir(old, 0755);
	return WANT(EPERM, CALL("pivot_root", syscall(SYS_pivot_root, p, old)));
}

static int t_fsopen(void)
{
	struct outcome a = CALL("fsopen(tmpfs)", syscall(SYS_fsopen, "tmpfs", 0));
	close_if(a.rc);
	struct outcome b = CALL("fspick(/)", syscall(SYS_fspick, AT_FDCWD, "/", 0));
	close_if(b.rc);
	return WANT(EPERM, a, b);
}

static int t_open_tree(void)
{
	struct outcome o = CALL("open_tree(/, OPEN_TREE_CLONE)",
				syscall(SYS_open_tree, AT_FDCWD, "/", OPEN_TREE_CLONE | O_CLOEXEC));
	close_if(o.rc);
	return WANT(EPERM, o);
}

static int t_new_mount_api(void)
{
	return WANT(EPERM, CALL("move_mount", syscall(SYS_move_mount, -1, "", -1, "", 0)),
		    CALL("fsconfig", syscall(SYS_fsconfig, -1, FSCONFIG_CMD_CREATE, NULL, NULL, 0)),
		    CALL("fsmount", syscall(SYS_fsmount, -1, 0, 0)));
}

static int t_mount_setattr(void)
{
	/* nosuid on /tmp, which already has it: harmless if it were allowed. */
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID};
	return WANT(EPERM, CALL("mount_setattr(/tmp)", syscall(SYS_mount_setattr, AT_FDCWD, "/tmp",
							       0, &attr, sizeof(attr))));
}

static int t_unshare_user(void)
{
	return WANT(EPERM, CALL("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER)));
}

static int t_unshare_net(void)
{
	/* A new network namespace is the way to nf_tables as "root" (CVE-2022-1015,
	 * CVE-2023-32233 and their kin). */
	return WANT(EPERM, CALL("unshare(CLONE_NEWNET)", unshare(CLONE_NEWNET)));
}

static int t_unshare_ns(void)
{
	return WANT(EPERM, CALL("unshare(CLONE_NEWNS)", unshare(CLONE_NEWNS)),
		    CALL("unshare(CLONE_NEWCGROUP)", unshare(CLONE_NEWCGROUP)));
}

static int t_setns(void)
{
	int fd = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return note(FAIL, "open /proc/self/ns/uts: %s", ename(errno));
	return WANT(EPERM, CALL("setns(own uts namespace)", setns(fd, CLONE_NEWUTS)));
}

static int t_clone_ns(void)
{
	errno = 0;
	long rc = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, NULL, NULL, 0);
	int e = errno;
	if (rc == 0)
		syscall(SYS_exit, 0);
	if (rc > 0)
		reap((pid_t)rc);
	return WANT(EPERM, ((struct outcome){"clone(CLONE_NEWUSER)", rc, e}));
}

struct clone_args_v0 {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

static int t_clone3(void)
{
	/* clone3 passes its flags in memory, where a filter cannot look: the whole call is
	 * refused with ENOSYS, so libcs fall back to clone(), whose flags it can check. */
	struct clone_args_v0 ca = {.flags = CLONE_NEWNS, .exit_signal = SIGCHLD};
	errno = 0;
	long rc = syscall(SYS_clone3, &ca, sizeof(ca));
	int e = errno;
	if (rc == 0)
		syscall(SYS_exit, 0);
	if (rc > 0)
		reap((pid_t)rc);
	return WANT(ENOSYS, ((struct outcome){"clone3(CLONE_NEWNS)", rc, e}));
}

static int t_swap(void)
{
	char p[PATH_MAX];
	path_in_scratch(p, sizeof(p), "swapfile");
	return WANT(EPERM, CALL("swapon", syscall(SYS_swapon, p, 0)),
		    CALL("swapoff", syscall(SYS_swapoff, p)));
}

static int t_reboot(void)
{
	/* CAD_OFF: in a pid namespace an allowed reboot() answers EINVAL for it (and would
	 * only end the sandbox for RESTART or POWER_OFF); nothing reaches the host. */
	return WANT(EPERM, CALL("reboot(CAD_OFF)",
				syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2,
					LINUX_REBOOT_CMD_CAD_OFF, NULL)));
}

static int t_clock(void)
{
	struct timespec ts;
	struct timeval tv;
	clock_gettime(CLOCK_REALTIME, &ts);
	gettimeofday(&tv, NULL);
	return WANT(EPERM, CALL("clock_settime(REALTIME)", clock_settime(CLOCK_REALTIME, &ts)),
		    CALL("settimeofday", settimeofday(&tv, NULL)));
}

static int t_ioports(void)
{
#if defined(__x86_64__)
	return WANT(EPERM, CALL("iopl(3)", syscall(SYS_iopl, 3)),
		    CALL("ioperm(0x80)", syscall(SYS_ioperm, 0x80, 1, 1)));
#else
	return note(SKIP, "iopl and ioperm exist on x86 only");
#endif
}

static int t_syslog(void)
{
	char buf[64];
	return WANT(EPERM, CALL("syslog(READ_ALL)", syscall(SYS_syslog, 3, buf, sizeof(buf))),
		    CALL("syslog(CLEAR)", syscall(SYS_syslog, 5, NULL, 0)));
}

static int t_acct(void)
{
	char p[PATH_MAX];
	path_in_scratch(p, sizeof(p), "acct");
	close(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	struct outcome o = CALL("acct", syscall(SYS_acct, p));
	if (o.rc == 0)
		syscall(SYS_acct, NULL);
	return WANT(EPERM, o);
}

static int t_quotactl(void)
{
	return WANT(
	    EPERM, CALL("quotactl(Q_SYNC)", syscall(SYS_quotactl, QCMD(Q_SYNC, 0), NULL, 0, NULL)));
}

static int t_personality(void)
{
	/* READ_IMPLIES_EXEC makes every readable mapping executable. */
	return WANT(EPERM,
		    CALL("personality(READ_IMPLIES_EXEC)", syscall(SYS_personality, 0x0400000)));
}

/* A pty whose slave is the controlling terminal of a new session; the result of fn(slave)
 * becomes the attempt's. Run in a grandchild: setsid() needs a non-leader. */
static int with_ctty(int (*fn)(int slave))
{
	pid_t pid = fork();
	if (pid < 0)
		return note(FAIL, "fork: %s", ename(errno));
	if (pid == 0) {
		if (setsid() < 0)
			_exit(note(FAIL, "setsid: %s", ename(errno)) + 10);
		int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
			_exit(note(FAIL, "a pty: %s", ename(errno)) + 10);
		const char *sn = ptsname(m);
		int s = sn ? open(sn, O_RDWR | O_CLOEXEC) : -1; /* becomes the ctty */
		if (s < 0)
			_exit(note(FAIL, "opening the pty slave: %s", ename(errno)) + 10);
		_exit(fn(s) + 10);
	}
	int st = reap(pid);
	if (WIFEXITED(st) && WEXITSTATUS(st) >= 10 && WEXITSTATUS(st) <= 12)
		return WEXITSTATUS(st) - 10;
	return note(FAIL, "the pty child ended with status %#x", st);
}

static int tiocsti(int s)
{
	char c = '#';
	return WANT(EPERM, CALL("ioctl(TIOCSTI) on the controlling tty", ioctl(s, TIOCSTI, &c)));
}

static int tioclinux(int s)
{
	char sub = TIOCL_GETSHIFTSTATE;
	return WANT(EPERM, CALL("ioctl(TIOCLINUX)", ioctl(s, TIOCLINUX, &sub)));
}

static int t_tiocsti(void)
{
	return with_ctty(tiocsti);
}

static int t_tioclinux(void)
{
	return with_ctty(tioclinux);
}

static int t_af_alg(void)
{
	/* AF_ALG: the kernel crypto API, a long line of bugs (CVE-2015-8970, CVE-2017-17805). */
	struct outcome o = CALL("socket(AF_ALG)", socket(AF_ALG, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
	close_if(o.rc);
	return WANT(EPERM, o);
}

static int t_af_vsock(void)
{
	struct outcome o =
	    CALL("socket(AF_VSOCK)", socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0));
	close_if(o.rc);
	return WANT(EPERM, o);
}

static int t_int80(void)
{
#if defined(__x86_64__)
	/* The i386 entry point has its own syscall table, which a filter written for x86_64
	 * would not cover (the foreign-ABI bypass). getpid is 20 there. */
	pid_t pid = fork();
	if (pid < 0)
		return note(FAIL, "fork: %s", ename(errno));
	if (pid == 0) {
		long ret = 20;
		__asm__ volatile("int $0x80"
				 : "+a"(ret)
				 :
				 : "memory", "r8", "r9", "r10", "r11", "rcx");
		int v = ret == -EPERM ? note(PASS, "denied")
			: ret < 0     ? note(FAIL, "int 0x80 getpid failed with %s, want EPERM",
					     ename((int)-ret))
				      : note(FAIL, "int 0x80 getpid succeeded (returned %ld)", ret);
		_exit(v + 10);
	}
	int st = reap(pid);
	if (WIFSIGNALED(st) && (WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGILL))
		return note(SKIP, "this kernel has no i386 emulation (int 0x80 faults)");
	if (WIFEXITED(st) && WEXITSTATUS(st) >= 10 && WEXITSTATUS(st) <= 12)
		return WEXITSTATUS(st) - 10;
	return note(FAIL, "the int 0x80 child ended with status %#x", st);
#else
	return note(SKIP, "int 0x80 exists on x86_64 only");
#endif
}

static int t_x32(void)
{
#if defined(__x86_64__)
	return WANT(EPERM, CALL("x32 getpid", syscall(X32_SYSCALL_BIT | SYS_getpid)));
#else
	return note(SKIP, "the x32 ABI exists on x86_64 only");
#endif
}

/* ---- capabilities ------------------------------------------------------------------- */

static const char *const cap_names[] = {
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
};

/* The set the issue keeps: what package managers and servers need. */
#define CAPBIT(n) (1ULL << (n))
static const unsigned long long kept_caps = CAPBIT(0) | CAPBIT(1) | CAPBIT(3) | CAPBIT(4) |
					    CAPBIT(5) | CAPBIT(6) | CAPBIT(7) | CAPBIT(8) |
					    CAPBIT(10) | CAPBIT(18) | CAPBIT(29) | CAPBIT(31);

static void add_cap_list(unsigned long long mask)
{
	bool first = true;
	for (unsigned i = 0; i < 64; i++) {
		if (!(mask & (1ULL << i)))
			continue;
		if (i < sizeof(cap_names) / sizeof(cap_names[0]))
			add("%s%s", first ? "" : ",", cap_names[i]);
		else
			add("%scap%u", first ? "" : ",", i);
		first = false;
	}
}

static int status_field(const char *key, unsigned long long *v)
{
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return -errno;
	char line[256];
	size_t kl = strlen(key);
	int r = -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			*v = strtoull(line + kl + 1, NULL, 16);
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}

static int t_cap_sets(void)
{
	static const char *const sets[] = {"CapBnd", "CapPrm", "CapEff", "CapInh", "CapAmb"};
	note(PASS, "as kept");
	R->msg[0] = '\0';
	int v = PASS;
	for (size_t i = 0; i < 5; i++) {
		unsigned long long have = 0;
		if (status_field(sets[i], &have) < 0)
			return note(FAIL, "no %s in /proc/self/status", sets[i]);
		unsigned long long want = i < 3 ? kept_caps : 0;
		if (have == want)
			continue;
		v = FAIL;
		add("%s%s:", R->msg[0] ? "; " : "", sets[i]);
		if (have & ~want) {
			add(" extra ");
			add_cap_list(have & ~want);
		}
		if (want & ~have) {
			add(" missing ");
			add_cap_list(want & ~have);
		}
	}
	return v;
}

static int t_no_new_privs(void)
{
	int v = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	if (v == 1)
		return note(PASS, "set");
	return note(FAIL, "PR_GET_NO_NEW_PRIVS is %d (%s)", v, v < 0 ? ename(errno) : "off");
}

static int t_net_admin(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return note(FAIL, "socket(AF_INET): %s", ename(errno));
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFMTU, &ifr) < 0)
		return note(FAIL, "SIOCGIFMTU lo: %s", ename(errno));
	/* The same MTU again: a no-op if it were allowed. */
	return WANT(EPERM, CALL("SIOCSIFMTU on lo", ioctl(fd, SIOCSIFMTU, &ifr)));
}

static int t_sys_admin(void)
{
	char name[HOST_NAME_MAX + 1] = "";
	gethostname(name, sizeof(name));
	return WANT(EPERM, CALL("sethostname (same name)", sethostname(name, strlen(name))));
}

static int t_net_raw(void)
{
	struct outcome o = CALL("socket(AF_INET, SOCK_RAW, ICMP)",
				socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP));
	close_if(o.rc);
	struct outcome p =
	    CALL("socket(AF_PACKET, SOCK_RAW)", socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
	close_if(p.rc);
	return WANT(EPERM, o, p);
}

static int t_sys_resource(void)
{
	static const int res[] = {RLIMIT_RTPRIO, RLIMIT_CORE, RLIMIT_MSGQUEUE, RLIMIT_MEMLOCK,
				  RLIMIT_NPROC};
	for (size_t i = 0; i < sizeof(res) / sizeof(res[0]); i++) {
		struct rlimit rl;
		if (getrlimit(res[i], &rl) < 0 || rl.rlim_max == RLIM_INFINITY)
			continue;
		struct rlimit up = {.rlim_cur = rl.rlim_cur, .rlim_max = rl.rlim_max + 1};
		return WANT(EPERM, CALL("setrlimit raising a hard limit", setrlimit(res[i], &up)));
	}
	return note(SKIP, "every hard limit is already unlimited");
}

static int t_sys_nice(void)
{
	return WANT(EACCES, CALL("setpriority(-10)", setpriority(PRIO_PROCESS, 0, -10)));
}

/* ---- mounts ------------------------------------------------------------------------- */

static int mount_attempt(const char *what, const char *src, const char *type, const char *data)
{
	char p[PATH_MAX];
	mkdir_scratch(p, sizeof(p), type);
	struct outcome o = CALL(what, mount(src, p, type, MS_NOSUID | MS_NODEV | MS_NOEXEC, data));
	if (o.rc == 0)
		umount2(p, MNT_DETACH);
	return WANT(EPERM, o);
}

static int t_mount_proc(void)
{
	/* A fresh procfs would show what the masks hide. */
	return mount_attempt("mount(proc)", "proc", "proc", NULL);
}

static int t_mount_sysfs(void)
{
	return mount_attempt("mount(sysfs)", "sysfs", "sysfs", NULL);
}

static int t_mount_cgroup1(void)
{
	/* CVE-2022-0492: mount a v1 hierarchy, then write its release_agent, which the kernel
	 * runs as host root. */
	static const char *const ctl[] = {"rdma", "memory", "pids", "cpu"};
	char p[PATH_MAX];
	mkdir_scratch(p, sizeof(p), "cgroup1");
	for (size_t i = 0; i < sizeof(ctl) / sizeof(ctl[0]); i++) {
		errno = 0;
		int rc = mount("cgroup", p, "cgroup", MS_NOSUID | MS_NODEV | MS_NOEXEC, ctl[i]);
		int e = errno;
		if (rc == 0) {
			umount2(p, MNT_DETACH);
			return note(FAIL, "mounted the v1 '%s' hierarchy", ctl[i]);
		}
		if (e != EPERM)
			return note(FAIL, "mount(cgroup, %s) failed with %s, want EPERM", ctl[i],
				    ename(e));
	}
	return note(PASS, "denied");
}

static int t_mount_cgroup2(void)
{
	return mount_attempt("mount(cgroup2)", "none", "cgroup2", NULL);
}

static int t_mount_binfmt(void)
{
	/* binfmt_misc registers interpreters the kernel runs for matching files. */
	return mount_attempt("mount(binfmt_misc)", "binfmt_misc", "binfmt_misc", NULL);
}

static unsigned long mount_flags_of(const char *path)
{
	struct statvfs sv;
	if (statvfs(path, &sv) < 0)
		return 0;
	unsigned long f = 0;
	if (sv.f_flag & ST_RDONLY)
		f |= MS_RDONLY;
	if (sv.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	return f;
}

static int remount_attempt(const char *what, const char *path, unsigned long clear)
{
	unsigned long old = mount_flags_of(path);
	struct outcome o =
	    CALL(what, mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | (old & ~clear), NULL));
	if (o.rc == 0)
		mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | old, NULL);
	return WANT(EPERM, o);
}

static int t_remount_sys(void)
{
	return remount_attempt("remount /sys read-write", "/sys", MS_RDONLY);
}

static int t_remount_root(void)
{
	/* Device nodes and set-id files in the sandbox's own layer stay inert only while its
	 * root is nodev (and its volumes nosuid). */
	return remount_attempt("remount / with dev and suid", "/", MS_NODEV | MS_NOSUID);
}

static int t_chroot_breakout(void)
{
	/* The classic: chroot into a subdirectory, walk ".." from the old cwd, chroot there.
	 * It must end at the sandbox's own root: nothing of the host is above it. */
	struct stat root0, root1;
	if (stat("/", &root0) < 0)
		return note(FAIL, "stat /: %s", ename(errno));
	char p[PATH_MAX];
	mkdir_scratch(p, sizeof(p), "jail");
	if (chroot(p) < 0)
		return note(FAIL, "chroot %s: %s (CAP_SYS_CHROOT is kept for ordinary work)", p,
			    ename(errno));
	for (int i = 0; i < 64; i++)
		if (chdir("..") < 0)
			break;
	if (chroot(".") < 0)
		return note(FAIL, "chroot .: %s", ename(errno));
	if (stat("/", &root1) < 0)
		return note(FAIL, "stat / after the breakout: %s", ename(errno));
	if (root0.st_dev != root1.st_dev || root0.st_ino != root1.st_ino)
		return note(FAIL, "reached a root other than the sandbox's (dev %lu ino %lu)",
			    (unsigned long)root1.st_dev, (unsigned long)root1.st_ino);
	return note(PASS, "the sandbox's root");
}

static int scan_for_host_paths(const char *file)
{
	FILE *f = fopen(file, "re");
	if (!f)
		return errno == ENOENT ? 0 : note(FAIL, "%s: %s", file, ename(errno));
	char line[4096];
	int v = PASS;
	while (fgets(line, sizeof(line), f) && v == PASS)
		for (int i = 0; i < opt.n_host_paths; i++)
			if (strstr(line, opt.host_paths[i])) {
				line[strcspn(line, "\n")] = '\0';
				v = note(FAIL, "%s names the host path %s: %.300s", file,
					 opt.host_paths[i], line);
				break;
			}
	fclose(f);
	return v;
}

static int t_host_paths(void)
{
	if (!opt.n_host_paths)
		return note(SKIP, "no host path given (--host-path; cell selftest passes them)");
	static const char *const files[] = {"/proc/self/mountinfo", "/proc/net/unix",
					    "/proc/self/cgroup"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (scan_for_host_paths(files[i]) != PASS)
			return FAIL;
	return note(PASS, "none named");
}

/* ---- /proc and /sys writes ------------------------------------------------------------ */

/* path is on a read-only mount (statvfs), and opening probe (may be NULL) for writing fails
 * with one of the given errnos: EROFS from the mount, or EACCES when the permission check,
 * which the kernel makes first, already refuses (root here holds no CAP_NET_ADMIN, and
 * host-owned files are not its own). Nothing is ever written. */
static int ro_attempt(const char *path, const char *probe, const int *want, size_t nw)
{
	struct statvfs sv;
	if (statvfs(path, &sv) < 0) {
		if (errno == ENOENT)
			return note(SKIP, "%s does not exist on this kernel", path);
		return note(FAIL, "statvfs %s: %s", path, ename(errno));
	}
	if (!(sv.f_flag & ST_RDONLY))
		return note(FAIL, "%s is on a writable mount", path);
	if (!probe)
		return note(PASS, "read-only");
	struct outcome o = CALL(probe, open(probe, O_WRONLY | O_CLOEXEC | O_NOCTTY));
	close_if(o.rc);
	if (o.rc < 0 && o.err == ENOENT)
		return note(PASS, "read-only (%s absent)", probe);
	return want_errs(&o, 1, want, nw);
}

static const int erofs_eacces[] = {EROFS, EACCES};

static int t_proc_sys(void)
{
	/* ip_forward belongs to the sandbox's own network namespace, so only the read-only
	 * mount stands between root and it. */
	return ro_attempt("/proc/sys", "/proc/sys/net/ipv4/ip_forward", erofs_eacces, 2);
}

static int t_sysrq(void)
{
	return ro_attempt("/proc/sysrq-trigger", "/proc/sysrq-trigger", erofs_eacces, 2);
}

static int t_proc_irq(void)
{
	return ro_attempt("/proc/irq", "/proc/irq/default_smp_affinity", erofs_eacces, 2);
}

static int t_proc_bus(void)
{
	return ro_attempt("/proc/bus", NULL, NULL, 0);
}

static int t_proc_fs(void)
{
	return ro_attempt("/proc/fs", NULL, NULL, 0);
}

static int t_sys_ro(void)
{
	/* lo's mtu belongs to the sandbox's network namespace: only the read-only mount
	 * refuses it. */
	return ro_attempt("/sys", "/sys/class/net/lo/mtu", erofs_eacces, 2);
}

static int t_core_pattern(void)
{
	/* core_pattern with a leading '|' makes the kernel run a program as host root. */
	return ro_attempt("/proc/sys/kernel", "/proc/sys/kernel/core_pattern", erofs_eacces, 2);
}

static int t_modprobe_path(void)
{
	return ro_attempt("/proc/sys/kernel", "/proc/sys/kernel/modprobe", erofs_eacces, 2);
}

static int t_uevent_helper(void)
{
	return ro_attempt("/sys/kernel", "/sys/kernel/uevent_helper", erofs_eacces, 2);
}

static int t_binfmt_register(void)
{
	struct outcome o = CALL("open /proc/sys/fs/binfmt_misc/register for writing",
				open("/proc/sys/fs/binfmt_misc/register", O_WRONLY | O_CLOEXEC));
	close_if(o.rc);
	static const int w[] = {ENOENT, EROFS, EACCES};
	return want_errs(&o, 1, w, 3);
}

static int t_release_agent(void)
{
	/* CVE-2022-0492: a writable release_agent of a v1 hierarchy is host root. */
	static const char *const bases[] = {"/sys/fs/cgroup"};
	int found = 0;
	for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/release_agent", bases[b]);
		DIR *d = opendir(bases[b]);
		for (struct dirent *e; d && (e = readdir(d));) {
			if (e->d_name[0] == '.')
				continue;
			char q[PATH_MAX];
			snprintf(q, sizeof(q), "%s/%s/release_agent", bases[b], e->d_name);
			if (!exists(q))
				continue;
			found++;
			struct outcome o = CALL(q, open(q, O_WRONLY | O_CLOEXEC));
			close_if(o.rc);
			if (want_errs(&o, 1, erofs_eacces, 2) != PASS) {
				closedir(d);
				return FAIL;
			}
		}
		if (d)
			closedir(d);
		if (exists(p)) {
			found++;
			struct outcome o = CALL(p, open(p, O_WRONLY | O_CLOEXEC));
			close_if(o.rc);
			if (want_errs(&o, 1, erofs_eacces, 2) != PASS)
				return FAIL;
		}
	}
	return note(PASS, found ? "every release_agent refuses writing" : "none reachable");
}

/* One cgroup dir: on a read-only mount, no child cgroup can be made, and its control files
 * refuse writing. */
static int cgroup_dir_ro(const char *dir)
{
	struct statvfs sv;
	if (statvfs(dir, &sv) < 0)
		return note(FAIL, "statvfs %s: %s", dir, ename(errno));
	if (!(sv.f_flag & ST_RDONLY))
		return note(FAIL, "%s is on a writable mount", dir);
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/cell-escape-%d", dir, (int)getpid());
	struct outcome o = CALL(p, mkdir(p, 0755));
	if (o.rc == 0)
		rmdir(p);
	/* ENOENT: sysfs's own /sys/fs/cgroup when no cgroup filesystem is mounted on it */
	static const int no_child[] = {EROFS, ENOENT};
	if (want_errs(&o, 1, no_child, 2) != PASS)
		return FAIL;
	static const char *const files[] = {
	    "cgroup.procs",	     "tasks",	 "cgroup.subtree_control", "memory.max",
	    "memory.limit_in_bytes", "pids.max", "notify_on_release",	   "cgroup.freeze"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
		if (!exists(p))
			continue;
		struct outcome w = CALL(p, open(p, O_WRONLY | O_CLOEXEC));
		close_if(w.rc);
		if (want_errs(&w, 1, erofs_eacces, 2) != PASS)
			return FAIL;
	}
	return PASS;
}

static int t_cgroupfs(void)
{
	/* /sys/fs/cgroup and every hierarchy mounted below it (one level down). */
	if (cgroup_dir_ro("/sys/fs/cgroup") != PASS)
		return FAIL;
	DIR *d = opendir("/sys/fs/cgroup");
	int n = 1;
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char q[PATH_MAX];
		snprintf(q, sizeof(q), "/sys/fs/cgroup/%.200s", e->d_name);
		struct stat st;
		if (lstat(q, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		n++;
		if (cgroup_dir_ro(q) != PASS) {
			closedir(d);
			return FAIL;
		}
	}
	if (d)
		closedir(d);
	return note(PASS, "%d dirs read-only", n);
}

/* ---- masked paths ----------------------------------------------------------------------- */

/* Nothing of path can be read: a file reads 0 bytes, a directory is empty, or opening it
 * is refused (EACCES, EPERM). Absent paths are skipped: the kernel does not have them. */
static int masked(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		if (errno == ENOENT)
			return note(SKIP, "%s does not exist on this kernel", path);
		if (errno == EACCES || errno == EPERM)
			return note(PASS, "unreachable (%s)", ename(errno));
		return note(FAIL, "stat %s: %s", path, ename(errno));
	}
	if (S_ISDIR(st.st_mode)) {
		DIR *d = opendir(path);
		if (!d)
			return errno == EACCES || errno == EPERM
				   ? note(PASS, "unreadable (%s)", ename(errno))
				   : note(FAIL, "opendir %s: %s", path, ename(errno));
		int n = 0;
		char first[NAME_MAX + 1] = "";
		for (struct dirent *e; (e = readdir(d));) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (!n++)
				snprintf(first, sizeof(first), "%s", e->d_name);
		}
		closedir(d);
		if (n)
			return note(FAIL, "lists %d entries (%s, ...)", n, first);
		return note(PASS, "empty");
	}
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == EACCES || errno == EPERM
			   ? note(PASS, "unreadable (%s)", ename(errno))
			   : note(FAIL, "open %s: %s", path, ename(errno));
	char buf[256];
	ssize_t n = read(fd, buf, sizeof(buf));
	int e = errno;
	close(fd);
	if (n > 0) {
		buf[n < 80 ? n : 80] = '\0';
		for (char *c = buf; *c; c++)
			if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
				*c = '.';
		return note(FAIL, "reads %zd+ bytes: %s", n, buf);
	}
	if (n < 0 && e != EACCES && e != EPERM && e != EINVAL)
		return note(FAIL, "read %s: %s", path, ename(e));
	return note(PASS, "reads nothing");
}

#define MASKED(fnname, path)                                                                       \
	static int fnname(void)                                                                    \
	{                                                                                          \
		return masked(path);                                                               \
	}
MASKED(t_mask_kcore, "/proc/kcore")
MASKED(t_mask_keys, "/proc/keys")
MASKED(t_mask_key_users, "/proc/key-users")
MASKED(t_mask_timer_list, "/proc/timer_list")
MASKED(t_mask_sched_debug, "/proc/sched_debug")
MASKED(t_mask_latency_stats, "/proc/latency_stats")
MASKED(t_mask_interrupts, "/proc/interrupts")
MASKED(t_mask_acpi, "/proc/acpi")
MASKED(t_mask_scsi, "/proc/scsi")
MASKED(t_mask_asound, "/proc/asound")
MASKED(t_mask_firmware, "/sys/firmware")
MASKED(t_mask_powercap, "/sys/devices/virtual/powercap")

/* ---- device nodes --------------------------------------------------------------------- */

static int t_mknod_char(void)
{
	char p[PATH_MAX];
	path_in_scratch(p, sizeof(p), "mem");
	struct outcome o = CALL("mknod c 1 1 (/dev/mem)", mknod(p, S_IFCHR | 0600, makedev(1, 1)));
	if (o.rc == 0)
		unlink(p);
	return WANT(EPERM, o);
}

static int t_mknod_block(void)
{
	struct outcome o = CALL("mknod b 8 0 (/dev/sda)",
				mknod("/dev/shm/cell-escape-sda", S_IFBLK | 0600, makedev(8, 0)));
	if (o.rc == 0)
		unlink("/dev/shm/cell-escape-sda");
	return WANT(EPERM, o);
}

static bool allowed_node(const char *path, const struct stat *st)
{
	unsigned ma = major(st->st_rdev), mi = minor(st->st_rdev);
	if (S_ISBLK(st->st_mode))
		return false;
	if (ma == 1 && (mi == 3 || mi == 5 || mi == 7 || mi == 8 || mi == 9))
		return true; /* null zero full random urandom */
	if (ma == 5 && mi == 0)
		return true; /* tty */
	if (!strncmp(path, "/dev/pts/", 9))
		return (ma == 5 && mi == 2) || (ma >= 136 && ma <= 143);
	return false;
}

static int node_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type != FTW_F || !(S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)))
		return 0;
	if (allowed_node(path, st))
		return 0;
	add("%s%s %c %u:%u", R->msg[0] ? ", " : "", path, S_ISBLK(st->st_mode) ? 'b' : 'c',
	    major(st->st_rdev), minor(st->st_rdev));
	return 0;
}

static int t_dev_nodes(void)
{
	R->msg[0] = '\0';
	if (nftw("/dev", node_cb, 16, FTW_PHYS) < 0)
		return note(FAIL, "walking /dev: %s", ename(errno));
	if (R->msg[0]) {
		char list[sizeof(R->msg)];
		snprintf(list, sizeof(list), "%s", R->msg);
		return note(FAIL, "host device nodes reachable: %s", list);
	}
	return note(PASS, "null zero full random urandom tty and ptys only");
}

/* ---- ptrace and /proc/<pid> of PID 1 (cell-init: non-dumpable, no CAP_SYS_PTRACE here) ---- */

static int t_ptrace_init(void)
{
	/* PTRACE_SEIZE stops nothing; if it were allowed, this child's exit detaches. */
	return WANT(EPERM,
		    CALL("ptrace(PTRACE_SEIZE, 1)", syscall(SYS_ptrace, PTRACE_SEIZE, 1, 0, 0)));
}

static int t_vm_readv(void)
{
	char local[8];
	struct iovec l = {local, sizeof(local)}, r = {(void *)0x400000, sizeof(local)};
	return WANT(
	    EPERM, CALL("process_vm_readv(1)", syscall(SYS_process_vm_readv, 1, &l, 1, &r, 1, 0)),
	    CALL("process_vm_writev(1)", syscall(SYS_process_vm_writev, 1, &l, 1, &r, 1, 0)));
}

static int t_proc1_mem(void)
{
	struct outcome o = CALL("open /proc/1/mem", open("/proc/1/mem", O_RDONLY | O_CLOEXEC));
	close_if(o.rc);
	return WANT(EACCES, o);
}

static int t_proc1_environ(void)
{
	int fd = open("/proc/1/environ", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return WANT(EACCES, ((struct outcome){"open /proc/1/environ", fd, errno}));
	char buf[64];
	struct outcome o = CALL("read /proc/1/environ", read(fd, buf, sizeof(buf)));
	close(fd);
	if (o.rc == 0)
		return note(PASS, "empty");
	return WANT(EACCES, o);
}

static int t_kcmp(void)
{
	return WANT(EPERM,
		    CALL("kcmp(self, 1, KCMP_VM)", syscall(SYS_kcmp, getpid(), 1, KCMP_VM, 0, 0)));
}

/* An attempt on a host pid: ESRCH, skipped when that number is also one of ours. */
static int host_pid_attempt(pid_t pid, const char *what, struct outcome (*fn)(pid_t))
{
	if (pid <= 0)
		return note(SKIP, "no host pid given (cell selftest passes one)");
	if (pid_visible(pid))
		return note(SKIP, "host pid %d is also a pid in this sandbox", (int)pid);
	struct outcome o = fn(pid);
	(void)what;
	return WANT(ESRCH, o);
}

static struct outcome do_ptrace(pid_t pid)
{
	return CALL("ptrace(PTRACE_SEIZE, host pid)", syscall(SYS_ptrace, PTRACE_SEIZE, pid, 0, 0));
}

static struct outcome do_kill0(pid_t pid)
{
	return CALL("kill(host pid, 0)", kill(pid, 0));
}

static struct outcome do_pidfd(pid_t pid)
{
	struct outcome o = CALL("pidfd_open(host pid)", syscall(SYS_pidfd_open, pid, 0));
	close_if(o.rc);
	return o;
}

static int t_ptrace_victim(void)
{
	return host_pid_attempt(opt.victim_pid, "ptrace", do_ptrace);
}

static int t_ptrace_host(void)
{
	return host_pid_attempt(opt.host_pid, "ptrace", do_ptrace);
}

/* ---- signals ---------------------------------------------------------------------------- */

static int t_kill_init(void)
{
	unsigned long long before = proc_starttime(1);
	struct outcome o = CALL("kill(1, SIGKILL)", kill(1, SIGKILL));
	usleep(200 * 1000);
	unsigned long long after = proc_starttime(1);
	if (!before || after != before)
		return note(FAIL, "PID 1 is gone after kill(1, SIGKILL) (returned %ld)", o.rc);
	return note(PASS, "PID 1 survives");
}

static int t_kill_victim(void)
{
	return host_pid_attempt(opt.victim_pid, "kill", do_kill0);
}

static int t_kill_host(void)
{
	return host_pid_attempt(opt.host_pid, "kill", do_kill0);
}

static int t_pidfd_host(void)
{
	return host_pid_attempt(opt.host_pid, "pidfd_open", do_pidfd);
}

static int t_no_ctty(void)
{
	/* Commands start in a new session without a controlling terminal: no tty of celld's
	 * or of a user's can be reached with TIOCSTI. */
	struct outcome o = CALL("open /dev/tty", open("/dev/tty", O_RDWR | O_CLOEXEC));
	close_if(o.rc);
	return WANT(ENXIO, o);
}

/* ---- fds (CVE-2024-21626, CVE-2019-5736) --------------------------------------------------- */

static void record_initial_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d) {
		snprintf(initial_fds, sizeof(initial_fds), "? (%s)", ename(errno));
		return;
	}
	int dfd = dirfd(d);
	size_t len = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.' || atoi(e->d_name) == dfd)
			continue;
		char link[PATH_MAX] = "", p[64];
		snprintf(p, sizeof(p), "/proc/self/fd/%.32s", e->d_name);
		ssize_t n = readlink(p, link, sizeof(link) - 1);
		link[n > 0 ? n : 0] = '\0';
		int w = snprintf(initial_fds + len, sizeof(initial_fds) - len, "%s%s=%s",
				 len ? " " : "", e->d_name, link);
		if (w < 0 || (size_t)w >= sizeof(initial_fds) - len)
			break;
		len += (size_t)w;
	}
	closedir(d);
	if (!getcwd(initial_cwd, sizeof(initial_cwd)))
		initial_cwd_errno = errno;
}

static int t_fds(void)
{
	/* initial_fds: "0=/dev/null 1=pipe:[..] 2=pipe:[..]" */
	char copy[sizeof(initial_fds)];
	snprintf(copy, sizeof(copy), "%s", initial_fds);
	int n = 0;
	for (char *tok = strtok(copy, " "); tok; tok = strtok(NULL, " ")) {
		int fd = atoi(tok);
		if (fd > 2 || !strchr(tok, '='))
			return note(FAIL, "fds open at start: %s", initial_fds);
		n++;
	}
	return note(PASS, "%d", n);
}

static int t_cwd(void)
{
	/* A leaked host directory fd as cwd shows as "(unreachable)/..." or fails getcwd. */
	if (initial_cwd_errno)
		return note(FAIL, "getcwd: %s", ename(initial_cwd_errno));
	if (initial_cwd[0] != '/')
		return note(FAIL, "cwd is outside the root: %s", initial_cwd);
	struct stat a, b;
	if (stat(".", &a) < 0 || stat(initial_cwd, &b) < 0)
		return note(FAIL, "stat cwd: %s", ename(errno));
	if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return note(FAIL, "cwd %s is not the directory its path names", initial_cwd);
	return note(PASS, "%s", initial_cwd);
}

static int t_stdin(void)
{
	char link[PATH_MAX] = "";
	ssize_t n = readlink("/proc/self/fd/0", link, sizeof(link) - 1);
	if (n < 0)
		return note(FAIL, "readlink fd 0: %s", ename(errno));
	link[n] = '\0';
	if (strcmp(link, "/dev/null"))
		return note(FAIL, "stdin is %s, want /dev/null", link);
	return note(PASS, "/dev/null");
}

static int t_proc1_fd(void)
{
	/* Listing /proc/1/fd may be allowed (the dir belongs to the sandbox's root while PID 1
	 * is non-dumpable); following an entry needs ptrace access, which must be refused. */
	DIR *d = opendir("/proc/1/fd");
	if (!d)
		return WANT(EACCES, ((struct outcome){"opendir /proc/1/fd", -1, errno}));
	int tried = 0, v = PASS;
	for (struct dirent *e; v == PASS && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char p[64], link[PATH_MAX];
		snprintf(p, sizeof(p), "/proc/1/fd/%.32s", e->d_name);
		tried++;
		struct outcome o = CALL(p, open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK));
		close_if(o.rc);
		struct outcome l = CALL(p, readlink(p, link, sizeof(link)));
		v = WANT(EACCES, o, l);
	}
	closedir(d);
	if (v == PASS)
		note(PASS, "%d fds, none reachable", tried);
	return v;
}

static int t_proc1_exe(void)
{
	/* CVE-2019-5736: a write to the runtime's binary through /proc/<pid>/exe. If it opened,
	 * write back the byte that is already there: harmless, and must still fail. */
	int fd = open("/proc/1/exe", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		static const int w[] = {EACCES, ETXTBSY, EPERM};
		struct outcome o = {"open /proc/1/exe for writing", -1, errno};
		return want_errs(&o, 1, w, 3);
	}
	unsigned char b;
	if (pread(fd, &b, 1, 0) != 1) {
		close(fd);
		return note(FAIL, "opened /proc/1/exe for writing; pread: %s", ename(errno));
	}
	struct outcome o = CALL("opened /proc/1/exe; pwrite", pwrite(fd, &b, 1, 0));
	close(fd);
	return WANT(EPERM, o);
}

static int t_pidfd_getfd(void)
{
	int pfd = (int)syscall(SYS_pidfd_open, 1, 0);
	if (pfd < 0)
		return WANT(EPERM, ((struct outcome){"pidfd_open(1)", -1, errno}));
	struct outcome o = CALL("pidfd_getfd(PID 1, fd 3)", syscall(SYS_pidfd_getfd, pfd, 3, 0));
	close_if(o.rc);
	return WANT(EPERM, o);
}

/* ---- another sandbox (the victim planted by --plant MARKER) -------------------------------- */

static key_t victim_key(const char *marker)
{
	uint32_t h = 2166136261u;
	for (const char *c = marker; *c; c++)
		h = (h ^ (unsigned char)*c) * 16777619u;
	return (key_t)((h & 0x3fffffff) | 0x40000000);
}

static void secret_path(char *buf, size_t size, const char *dir, const char *marker)
{
	snprintf(buf, size, "%s/cell-secret-%s", dir, marker);
}

static int victim_skip(void)
{
	return note(SKIP, "no victim sandbox given (cell selftest plants one)");
}

static int secret_file(const char *dir)
{
	if (!opt.victim)
		return victim_skip();
	char p[PATH_MAX];
	secret_path(p, sizeof(p), dir, opt.victim);
	struct outcome o = CALL(p, open(p, O_RDONLY | O_CLOEXEC));
	close_if(o.rc);
	return WANT(ENOENT, o);
}

static int t_victim_tmp(void)
{
	return secret_file("/tmp");
}

static int t_victim_shm(void)
{
	return secret_file("/dev/shm");
}

static int t_victim_workspace(void)
{
	return secret_file("/workspace");
}

static int t_victim_sysv(void)
{
	if (!opt.victim)
		return victim_skip();
	key_t k = victim_key(opt.victim);
	return WANT(ENOENT, CALL("shmget(its key)", shmget(k, 0, 0)),
		    CALL("msgget(its key)", msgget(k, 0)),
		    CALL("semget(its key)", semget(k, 0, 0)));
}

static int abstract_addr(struct sockaddr_un *a, const char *marker)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "cell-secret-%s", marker);
	return (int)offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

static int t_victim_abstract(void)
{
	if (!opt.victim)
		return victim_skip();
	struct sockaddr_un a;
	socklen_t len = (socklen_t)abstract_addr(&a, opt.victim);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return note(FAIL, "socket(AF_UNIX): %s", ename(errno));
	return WANT(ECONNREFUSED,
		    CALL("connect(its abstract socket)", connect(fd, (struct sockaddr *)&a, len)));
}

static int t_victim_proc_root(void)
{
	if (!opt.victim)
		return victim_skip();
	DIR *d = opendir("/proc");
	if (!d)
		return note(FAIL, "opendir /proc: %s", ename(errno));
	int tried = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "/proc/%.32s/root/tmp/cell-secret-%.200s", e->d_name,
			 opt.victim);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		tried++;
		if (fd >= 0) {
			close(fd);
			closedir(d);
			return note(FAIL, "opened %s", p);
		}
	}
	closedir(d);
	return note(PASS, "not through any of %d processes", tried);
}

static int t_victim_procs(void)
{
	if (!opt.victim)
		return victim_skip();
	DIR *d = opendir("/proc");
	if (!d)
		return note(FAIL, "opendir /proc: %s", ename(errno));
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char p[PATH_MAX], comm[64] = "";
		snprintf(p, sizeof(p), "/proc/%s/comm", e->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		comm[n > 0 ? n : 0] = '\0';
		if (!strncmp(comm, "cell-victim", 11)) {
			closedir(d);
			return note(FAIL, "the victim's process is visible as pid %s", e->d_name);
		}
	}
	closedir(d);
	return note(PASS, "invisible");
}

static int t_victim_layer(void)
{
	if (!opt.victim)
		return victim_skip();
	if (!opt.victim_dir)
		return note(SKIP, "no host dir of the victim given (--victim-dir)");
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/upper/workspace/cell-secret-%s", opt.victim_dir, opt.victim);
	struct outcome a = CALL(p, open(p, O_RDONLY | O_CLOEXEC));
	close_if(a.rc);
	struct outcome b = CALL(opt.victim_dir, open(opt.victim_dir, O_RDONLY | O_CLOEXEC));
	close_if(b.rc);
	return WANT(ENOENT, a, b);
}

static int t_victim_pid_root(void)
{
	if (!opt.victim)
		return victim_skip();
	if (opt.victim_pid <= 0)
		return note(SKIP, "no host pid of the victim given (--victim-pid)");
	if (pid_visible(opt.victim_pid))
		return note(SKIP, "host pid %d is also a pid in this sandbox", (int)opt.victim_pid);
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "/proc/%d/root/tmp/cell-secret-%s", (int)opt.victim_pid, opt.victim);
	struct outcome o = CALL(p, open(p, O_RDONLY | O_CLOEXEC));
	close_if(o.rc);
	return WANT(ENOENT, o);
}

/* ---- ordinary work that must keep working -------------------------------------------------- */

static int t_fork_exec(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", "exit 7", (char *)NULL);
		_exit(127);
	}
	if (pid < 0)
		return note(FAIL, "fork: %s", ename(errno));
	int st = reap(pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 7)
		return note(FAIL, "/bin/sh -c 'exit 7' ended with status %#x", st);
	return note(PASS, "ok");
}

static void *thread_fn(void *arg)
{
	return (char *)arg + 1;
}

static int t_threads(void)
{
	/* glibc creates threads with clone3 and falls back to clone on ENOSYS. */
	pthread_t t;
	char x[2];
	int e = pthread_create(&t, NULL, thread_fn, x);
	if (e)
		return note(FAIL, "pthread_create: %s", ename(e));
	void *ret = NULL;
	pthread_join(t, &ret);
	return ret == x + 1 ? note(PASS, "ok") : note(FAIL, "the thread returned %p", ret);
}

static int t_port80(void)
{
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls < 0)
		return note(FAIL, "socket: %s", ename(errno));
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0)
		return note(FAIL, "bind 127.0.0.1:80: %s", ename(errno));
	if (listen(ls, 4) < 0)
		return note(FAIL, "listen: %s", ename(errno));
	pid_t pid = fork();
	if (pid == 0) {
		int c = accept(ls, NULL, NULL);
		char buf[16] = "";
		if (c >= 0 && read(c, buf, sizeof(buf)) > 0 && !strncmp(buf, "ping", 4))
			(void)!write(c, "pong", 4);
		_exit(0);
	}
	close(ls);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char buf[8] = "";
	int v;
	if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
		v = note(FAIL, "connect 127.0.0.1:80: %s", ename(errno));
	else if (write(c, "ping", 4) != 4 || read(c, buf, 4) != 4 || strncmp(buf, "pong", 4))
		v = note(FAIL, "no answer from the server on port 80");
	else
		v = note(PASS, "ok");
	close(c);
	kill(pid, SIGKILL);
	reap(pid);
	return v;
}

static int t_chown_setuid(void)
{
	char p[PATH_MAX];
	path_in_scratch(p, sizeof(p), "owned");
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return note(FAIL, "create %s: %s", p, ename(errno));
	close(fd);
	if (chown(p, 1000, 1000) < 0)
		return note(FAIL, "chown 1000:1000: %s", ename(errno));
	if (chown(p, 0, 0) < 0)
		return note(FAIL, "chown back to 0:0: %s", ename(errno));
	pid_t pid = fork();
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
			_exit(2);
		if (getuid() != 65534 || geteuid() != 65534)
			_exit(3);
		/* nobody cannot read root's 0600 file: the drop is real */
		_exit(open(p, O_RDONLY) < 0 && errno == EACCES ? 0 : 4);
	}
	int st = reap(pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return note(FAIL, "becoming nobody: step %d failed",
			    WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return note(PASS, "ok");
}

static int t_chroot(void)
{
	char p[PATH_MAX];
	mkdir_scratch(p, sizeof(p), "chroot");
	if (chroot(p) < 0 || chdir("/") < 0)
		return note(FAIL, "chroot %s: %s", p, ename(errno));
	return note(PASS, "ok");
}

static int t_ptrace_child(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0) < 0)
			_exit(2);
		raise(SIGSTOP);
		_exit(3);
	}
	int st = reap(pid);
	if (!WIFSTOPPED(st)) {
		return note(FAIL, "the traced child did not stop (status %#x%s)", st,
			    WIFEXITED(st) && WEXITSTATUS(st) == 2 ? ": PTRACE_TRACEME failed" : "");
	}
	if (syscall(SYS_ptrace, PTRACE_CONT, pid, 0, 0) < 0) {
		int e = errno;
		kill(pid, SIGKILL);
		reap(pid);
		return note(FAIL, "PTRACE_CONT: %s", ename(e));
	}
	st = reap(pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 3)
		return note(FAIL, "the traced child ended with status %#x", st);
	return note(PASS, "ok");
}

static int t_scm_rights(void)
{
	int sp[2], p[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 || pipe(p) < 0)
		return note(FAIL, "socketpair/pipe: %s", ename(errno));
	char byte = 'x';
	struct iovec iov = {&byte, 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &p[1], sizeof(int));
	if (sendmsg(sp[0], &m, 0) != 1)
		return note(FAIL, "sendmsg: %s", ename(errno));
	memset(&u, 0, sizeof(u));
	m.msg_controllen = sizeof(u.buf);
	if (recvmsg(sp[1], &m, 0) != 1 || !(c = CMSG_FIRSTHDR(&m)) || c->cmsg_type != SCM_RIGHTS)
		return note(FAIL, "recvmsg: no fd (%s)", ename(errno));
	int got;
	memcpy(&got, CMSG_DATA(c), sizeof(int));
	char out = 0;
	if (write(got, "y", 1) != 1 || read(p[0], &out, 1) != 1 || out != 'y')
		return note(FAIL, "the passed fd does not reach the pipe");
	return note(PASS, "ok");
}

static int t_files(void)
{
	char a[PATH_MAX], b[PATH_MAX], l[PATH_MAX], h[PATH_MAX];
	path_in_scratch(a, sizeof(a), "f1");
	path_in_scratch(b, sizeof(b), "f2");
	path_in_scratch(l, sizeof(l), "sym");
	path_in_scratch(h, sizeof(h), "hard");
	int fd = open(a, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, "data", 4) != 4)
		return note(FAIL, "write %s: %s", a, ename(errno));
	close(fd);
	if (rename(a, b) < 0 || symlink("f2", l) < 0 || link(b, h) < 0)
		return note(FAIL, "rename/symlink/link: %s", ename(errno));
	if (mkfifo(a, 0600) < 0)
		return note(FAIL, "mkfifo: %s", ename(errno));
	char buf[8] = "";
	fd = open(l, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, 4) != 4 || strncmp(buf, "data", 4))
		return note(FAIL, "reading through the symlink: %s", ename(errno));
	close(fd);
	return note(PASS, "ok");
}

static int t_personality_ok(void)
{
	/* Querying, and the plain Linux personality, stay allowed. */
	long cur = syscall(SYS_personality, 0xffffffff);
	if (cur < 0)
		return note(FAIL, "personality(query): %s", ename(errno));
	if (syscall(SYS_personality, PER_LINUX) < 0)
		return note(FAIL, "personality(PER_LINUX): %s", ename(errno));
	return note(PASS, "ok");
}

/* Is tool on PATH, as itself (a busybox applet of the same name is not the tool)? */
static bool have_tool(const char *tool)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];
	if (!path || !*path)
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ":");
		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, tool);
		char real[PATH_MAX];
		if (access(buf, X_OK) == 0 && realpath(buf, real)) {
			const char *base = strrchr(real, '/');
			return strcmp(base ? base + 1 : real, "busybox") != 0;
		}
		p += n;
		if (*p)
			p++;
	}
	return false;
}

/* Run script with /bin/sh -c; pass when it exits 0 and its output contains want. */
static int shell_check(const char *const *tools, const char *script, const char *want)
{
	for (const char *const *t = tools; *t; t++)
		if (!have_tool(*t))
			return note(SKIP, "%s is not in this image (or only as a busybox applet)",
				    *t);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return note(FAIL, "pipe: %s", ename(errno));
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		dup2(p[1], 1);
		dup2(p[1], 2);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	static char out[65536];
	size_t len = 0;
	for (;;) {
		char buf[4096];
		ssize_t n = read(p[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (len == sizeof(out) - 1) { /* keep the tail */
				memmove(out, out + sizeof(out) / 2, sizeof(out) / 2 - 1);
				len = sizeof(out) / 2 - 1;
			}
			out[len++] = buf[i];
		}
	}
	out[len] = '\0';
	close(p[0]);
	int st = reap(pid);
	for (char *c = out; *c; c++)
		if (*c == '\n' || *c == '\r' || *c == '\t')
			*c = ' ';
	const char *tail = len > 600 ? out + len - 600 : out;
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return note(FAIL, "exit status %d: %s", WIFEXITED(st) ? WEXITSTATUS(st) : -1, tail);
	if (!strstr(out, want))
		return note(FAIL, "output lacks '%s': %s", want, tail);
	return note(PASS, "ok");
}

#define SH_PRELUDE                                                                                 \
	"set -e; d=$(mktemp -d /tmp/cell-escape-work.XXXXXX); trap 'rm -rf \"$d\"' EXIT; "

static int t_dpkg(void)
{
	static const char *const tools[] = {"dpkg-deb", "dpkg", NULL};
	return shell_check(tools,
			   SH_PRELUDE
			   "mkdir -p $d/pkg/DEBIAN $d/pkg/usr/share/cell-selftest; "
			   "printf 'Package: cell-selftest\\nVersion: 1.0\\nArchitecture: all\\n"
			   "Maintainer: cell <selftest@example.invalid>\\n"
			   "Description: cell selftest package\\n' > $d/pkg/DEBIAN/control; "
			   "echo installed-by-dpkg > $d/pkg/usr/share/cell-selftest/marker; "
			   "dpkg-deb --root-owner-group --build $d/pkg $d/cell-selftest.deb; "
			   "dpkg -i $d/cell-selftest.deb; "
			   "m=$(cat /usr/share/cell-selftest/marker); "
			   "dpkg -r cell-selftest; "
			   "test ! -e /usr/share/cell-selftest/marker && echo \"$m dpkg-removed\"",
			   "installed-by-dpkg dpkg-removed");
}

static int t_apt(void)
{
	static const char *const tools[] = {"apt-get", "dpkg-deb", NULL};
	return shell_check(tools,
			   SH_PRELUDE
			   "chmod 755 $d; export DEBIAN_FRONTEND=noninteractive; "
			   "mkdir -p $d/pkg/DEBIAN $d/pkg/usr/share/cell-selftest-apt; "
			   "printf 'Package: cell-selftest-apt\\nVersion: 1.0\\n"
			   "Architecture: all\\nMaintainer: cell <selftest@example.invalid>\\n"
			   "Description: cell selftest package\\n' > $d/pkg/DEBIAN/control; "
			   "echo installed-by-apt > $d/pkg/usr/share/cell-selftest-apt/m; "
			   "dpkg-deb --root-owner-group --build $d/pkg $d/apt.deb; "
			   "chmod 644 $d/apt.deb; "
			   "apt-get install -y -q $d/apt.deb; "
			   "m=$(cat /usr/share/cell-selftest-apt/m); "
			   "apt-get remove -y -q cell-selftest-apt; "
			   "test ! -e /usr/share/cell-selftest-apt/m && echo \"$m apt-removed\"",
			   "installed-by-apt apt-removed");
}

static int t_pip(void)
{
	static const char *const tools[] = {"python3", NULL};
	/* A wheel made on the spot: pip installs it with no index and no build backend. */
	return shell_check(
	    tools,
	    SH_PRELUDE
	    "cd $d; python3 - <<'EOF'\n"
	    "import base64, hashlib, zipfile\n"
	    "files = {'cell_selftest.py': b'VALUE = 42\\n',\n"
	    " 'cell_selftest-1.0.dist-info/METADATA': b'Metadata-Version: 2.1\\nName: "
	    "cell-selftest\\nVersion: 1.0\\n',\n"
	    " 'cell_selftest-1.0.dist-info/WHEEL': b'Wheel-Version: 1.0\\nGenerator: "
	    "cell\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n'}\n"
	    "rec = []\n"
	    "with zipfile.ZipFile('cell_selftest-1.0-py3-none-any.whl', 'w') as z:\n"
	    "    for n, b in files.items():\n"
	    "        z.writestr(n, b)\n"
	    "        h = base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=')\n"
	    "        rec.append('%s,sha256=%s,%d' % (n, h.decode(), len(b)))\n"
	    "    rec.append('cell_selftest-1.0.dist-info/RECORD,,')\n"
	    "    z.writestr('cell_selftest-1.0.dist-info/RECORD', '\\n'.join(rec) + '\\n')\n"
	    "EOF\n"
	    "python3 -m venv v; "
	    "v/bin/pip install -q --no-index --disable-pip-version-check "
	    "cell_selftest-1.0-py3-none-any.whl; "
	    "v/bin/python -c 'import cell_selftest; print(\"pip-ok\", cell_selftest.VALUE)'",
	    "pip-ok 42");
}

static int t_npm(void)
{
	static const char *const tools[] = {"npm", "node", NULL};
	return shell_check(
	    tools,
	    SH_PRELUDE
	    "cd $d; mkdir lib app; "
	    "printf '{\"name\":\"cell-selftest-lib\",\"version\":\"1.0.0\","
	    "\"main\":\"index.js\"}\\n' > lib/package.json; "
	    "echo 'module.exports = 42;' > lib/index.js; "
	    "(cd lib && npm pack --silent >/dev/null); "
	    "cd app; printf '{\"name\":\"app\",\"version\":\"1.0.0\",\"private\":true}\\n'"
	    " > package.json; "
	    "npm install --offline --no-audit --no-fund --silent "
	    "../lib/cell-selftest-lib-1.0.0.tgz; "
	    "node -e 'console.log(\"npm-ok\", require(\"cell-selftest-lib\"))'",
	    "npm-ok 42");
}

static int t_git(void)
{
	static const char *const tools[] = {"git", NULL};
	return shell_check(tools,
			   SH_PRELUDE "cd $d; git init -q r; cd r; "
				      "git config user.email selftest@example.invalid; "
				      "git config user.name selftest; echo hi > f; git add f; "
				      "git commit -q -m selftest; git log --format=git-ok-%s",
			   "git-ok-selftest");
}

static int t_gcc(void)
{
	static const char *const tools[] = {"gcc", NULL};
	return shell_check(tools,
			   SH_PRELUDE "printf '#include <stdio.h>\\nint main(void) { "
				      "puts(\"gcc-ok\"); return 0; }\\n' > $d/h.c; "
				      "gcc -O1 -o $d/h $d/h.c; $d/h",
			   "gcc-ok");
}

static int t_strace(void)
{
	static const char *const tools[] = {"strace", NULL};
	return shell_check(tools,
			   SH_PRELUDE "strace -f -qq -o $d/log sh -c '/bin/true & wait'; "
				      "grep -q 'execve(\"/bin/true\"' $d/log && echo strace-ok",
			   "strace-ok");
}

static int t_gdb(void)
{
	static const char *const tools[] = {"gdb", NULL};
	return shell_check(tools,
			   SH_PRELUDE "gdb -q -batch -nx -ex run --args /bin/true > $d/out 2>&1; "
				      "cat $d/out; grep -q 'exited normally' $d/out && echo gdb-ok",
			   "gdb-ok");
}

/* ---- the battery ---------------------------------------------------------------------------- */

#define T(cls, name, fn)                                                                           \
	{                                                                                          \
		cls, name, fn, 30                                                                  \
	}
#define TOOL(name, fn)                                                                             \
	{                                                                                          \
		"ordinary", name, fn, 600                                                          \
	}

/* ---- the network: nothing of the host, the internal ranges or another sandbox ---- */

/* The default gateway of this sandbox (its host side), from /proc/net/route; 0 if none. */
static uint32_t default_gateway(void)
{
	FILE *f = fopen("/proc/net/route", "re");
	char line[256];
	uint32_t gw = 0;
	while (f && fgets(line, sizeof(line), f)) {
		char ifname[32];
		unsigned dst, g;
		if (sscanf(line, "%31s %x %x", ifname, &dst, &g) == 3 && dst == 0 && g)
			gw = g; /* network byte order, as the kernel prints it */
	}
	if (f)
		fclose(f);
	return gw;
}

struct net_target {
	char what[64];
	struct sockaddr_in sa;
	int fd;
	int err; /* 0 while pending; ETIMEDOUT when nothing answered */
};

static void net_target(struct net_target *t, const char *what, uint32_t addr_be, int port)
{
	snprintf(t->what, sizeof(t->what), "%s", what);
	t->sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	t->sa.sin_addr.s_addr = addr_be;
	t->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	t->err = t->fd < 0 ? errno : 0;
	if (t->fd >= 0 && connect(t->fd, (struct sockaddr *)&t->sa, sizeof(t->sa)) < 0 &&
	    errno != EINPROGRESS)
		t->err = errno;
	else if (t->fd >= 0 && !t->err)
		t->err = EINPROGRESS;
}

/* TCP connects to the host (its side of this sandbox's link, on ports other than DNS),
 * cloud metadata, the private and CGNAT ranges and the victim sandbox, all at once: each
 * must time out or be unreachable. A connection, or a refusal (a reset: the packet reached
 * something), fails. Dropped in the host's table, no packet leaves the machine. */
static int t_net_blocked(void)
{
	struct net_target t[12];
	size_t n = 0;
	uint32_t gw = default_gateway();
	struct in_addr a;
	if (gw) {
		net_target(&t[n++], "the host (gateway) port 22", gw, 22);
		net_target(&t[n++], "the host (gateway) port 80", gw, 80);
		net_target(&t[n++], "the host (gateway) port 44772", gw, 44772);
	}
	static const char *const internal[] = {"169.254.169.254", "10.0.0.1", "172.16.0.1",
					       "192.168.0.1", "100.64.0.1"};
	for (size_t i = 0; i < sizeof(internal) / sizeof(internal[0]); i++) {
		inet_pton(AF_INET, internal[i], &a);
		char w[64];
		snprintf(w, sizeof(w), "%s port 80", internal[i]);
		net_target(&t[n++], w, a.s_addr, 80);
	}
	if (opt.net_peer && inet_pton(AF_INET, opt.net_peer, &a) == 1) {
		net_target(&t[n++], "the victim sandbox port 80", a.s_addr, 80);
		net_target(&t[n++], "the victim sandbox port 22", a.s_addr, 22);
	}
	/* Two seconds for every attempt together: a dropped SYN is retried after one. */
	for (int waited = 0; waited < 2000; waited += 50) {
		bool pending = false;
		for (size_t i = 0; i < n; i++) {
			if (t[i].err != EINPROGRESS)
				continue;
			struct pollfd p = {.fd = t[i].fd, .events = POLLOUT};
			if (poll(&p, 1, 0) == 1) {
				int e = 0;
				socklen_t len = sizeof(e);
				getsockopt(t[i].fd, SOL_SOCKET, SO_ERROR, &e, &len);
				t[i].err = e ? e : EISCONN;
			} else {
				pending = true;
			}
		}
		if (!pending)
			break;
		usleep(50000);
	}
	char reached[1024] = "";
	for (size_t i = 0; i < n; i++) {
		int e = t[i].err == EINPROGRESS ? ETIMEDOUT : t[i].err;
		if (e == EISCONN || e == ECONNREFUSED)
			snprintf(reached + strlen(reached), sizeof(reached) - strlen(reached),
				 "%s%.63s (%s)", reached[0] ? ", " : "", t[i].what,
				 e == EISCONN ? "connected" : "answered with a reset");
		if (t[i].fd >= 0)
			close(t[i].fd);
	}
	if (reached[0])
		return note(FAIL, "reached: %s", reached);
	return note(PASS, "%zu targets: none answered%s", n,
		    gw ? "" : " (no network: every one unreachable)");
}

static const struct attempt battery[] = {
    T("syscalls", "add_key, keyctl and request_key (keyrings) are denied with EPERM", t_keyrings),
    T("syscalls", "bpf(BPF_MAP_CREATE) is denied with EPERM", t_bpf),
    T("syscalls", "perf_event_open on its own task is denied with EPERM", t_perf),
    T("syscalls", "userfaultfd, even user-mode only, is denied with EPERM", t_userfaultfd),
    T("syscalls", "io_uring_setup is denied with EPERM", t_io_uring_setup),
    T("syscalls", "io_uring_enter and io_uring_register are denied with EPERM", t_io_uring_other),
    T("syscalls", "kexec_load and kexec_file_load are denied with EPERM", t_kexec),
    T("syscalls", "open_by_handle_at with a forged handle is denied with EPERM", t_open_by_handle),
    T("syscalls", "name_to_handle_at is denied with EPERM", t_name_to_handle),
    T("syscalls", "init_module, finit_module and delete_module are denied with EPERM", t_modules),
    T("syscalls", "mount of a tmpfs is denied with EPERM", t_mount_tmpfs),
    T("syscalls", "umount2 of the masks on /proc/kcore and /proc/sys is denied with EPERM",
      t_umount_mask),
    T("syscalls", "pivot_root is denied with EPERM", t_pivot_root),
    T("syscalls", "fsopen and fspick are denied with EPERM", t_fsopen),
    T("syscalls", "open_tree(OPEN_TREE_CLONE) of / is denied with EPERM", t_open_tree),
    T("syscalls", "move_mount, fsconfig and fsmount are denied with EPERM", t_new_mount_api),
    T("syscalls", "mount_setattr is denied with EPERM", t_mount_setattr),
    T("syscalls", "unshare(CLONE_NEWUSER) is denied with EPERM", t_unshare_user),
    T("syscalls", "unshare(CLONE_NEWNET) (the way to nf_tables) is denied with EPERM",
      t_unshare_net),
    T("syscalls", "unshare(CLONE_NEWNS) and unshare(CLONE_NEWCGROUP) are denied with EPERM",
      t_unshare_ns),
    T("syscalls", "setns is denied with EPERM", t_setns),
    T("syscalls", "clone(CLONE_NEWUSER) is denied with EPERM", t_clone_ns),
    T("syscalls", "clone3 is refused with ENOSYS (libcs fall back to clone)", t_clone3),
    T("syscalls", "swapon and swapoff are denied with EPERM", t_swap),
    T("syscalls", "reboot is denied with EPERM", t_reboot),
    T("syscalls", "clock_settime and settimeofday are denied with EPERM", t_clock),
    T("syscalls", "iopl and ioperm are denied with EPERM", t_ioports),
    T("syscalls", "syslog (reading and clearing the kernel log) is denied with EPERM", t_syslog),
    T("syscalls", "acct is denied with EPERM", t_acct),
    T("syscalls", "quotactl is denied with EPERM", t_quotactl),
    T("syscalls", "personality(READ_IMPLIES_EXEC) is denied with EPERM", t_personality),
    T("syscalls", "ioctl(TIOCSTI) on a controlling tty is denied with EPERM", t_tiocsti),
    T("syscalls", "ioctl(TIOCLINUX) is denied with EPERM", t_tioclinux),
    T("syscalls", "socket(AF_ALG) is denied with EPERM", t_af_alg),
    T("syscalls", "socket(AF_VSOCK) is denied with EPERM", t_af_vsock),
    T("syscalls", "i386 syscalls through int 0x80 are denied with EPERM", t_int80),
    T("syscalls", "x32 syscalls are denied with EPERM", t_x32),
    T("capabilities",
      "bounding, permitted and effective sets are the kept set; inheritable "
      "and ambient are empty",
      t_cap_sets),
    T("capabilities", "no_new_privs is set", t_no_new_privs),
    T("capabilities", "CAP_NET_ADMIN: setting lo's MTU is denied with EPERM", t_net_admin),
    T("capabilities", "CAP_SYS_ADMIN: sethostname is denied with EPERM", t_sys_admin),
    T("capabilities", "CAP_NET_RAW: raw IP and packet sockets are denied with EPERM", t_net_raw),
    T("network",
      "the host, cloud metadata, the private and CGNAT ranges and the other sandbox "
      "answer no connection",
      t_net_blocked),
    T("capabilities", "CAP_SYS_RESOURCE: raising a hard rlimit is denied with EPERM",
      t_sys_resource),
    T("capabilities", "CAP_SYS_NICE: raising its own priority is denied with EACCES", t_sys_nice),
    T("mounts", "a fresh procfs (around the masks) cannot be mounted: EPERM", t_mount_proc),
    T("mounts", "a fresh sysfs cannot be mounted: EPERM", t_mount_sysfs),
    T("mounts", "a cgroup v1 hierarchy cannot be mounted (CVE-2022-0492): EPERM", t_mount_cgroup1),
    T("mounts", "a cgroup2 filesystem cannot be mounted: EPERM", t_mount_cgroup2),
    T("mounts", "binfmt_misc cannot be mounted: EPERM", t_mount_binfmt),
    T("mounts", "/sys cannot be remounted read-write: EPERM", t_remount_sys),
    T("mounts", "/ cannot be remounted with dev and suid: EPERM", t_remount_root),
    T("mounts", "a chroot breakout reaches only the sandbox's own root", t_chroot_breakout),
    T("mounts", "mountinfo, /proc/net/unix and /proc/self/cgroup name no host path", t_host_paths),
    T("proc-sys", "/proc/sys is a read-only mount (ip_forward of its own netns refused)",
      t_proc_sys),
    T("proc-sys", "/proc/sysrq-trigger is read-only", t_sysrq),
    T("proc-sys", "/proc/irq is read-only", t_proc_irq),
    T("proc-sys", "/proc/bus is read-only", t_proc_bus),
    T("proc-sys", "/proc/fs is read-only", t_proc_fs),
    T("proc-sys", "/sys is a read-only mount (lo's mtu refused)", t_sys_ro),
    T("proc-sys", "core_pattern cannot be opened for writing", t_core_pattern),
    T("proc-sys", "the modprobe path cannot be opened for writing", t_modprobe_path),
    T("proc-sys", "uevent_helper cannot be opened for writing", t_uevent_helper),
    T("proc-sys", "binfmt_misc's register cannot be opened for writing", t_binfmt_register),
    T("proc-sys", "no release_agent can be opened for writing (CVE-2022-0492)", t_release_agent),
    T("proc-sys", "every cgroup mount is read-only (no mkdir; cgroup.procs, tasks refused)",
      t_cgroupfs),
    T("masked", "/proc/kcore shows nothing", t_mask_kcore),
    T("masked", "/proc/keys shows nothing", t_mask_keys),
    T("masked", "/proc/key-users shows nothing", t_mask_key_users),
    T("masked", "/proc/timer_list shows nothing", t_mask_timer_list),
    T("masked", "/proc/sched_debug shows nothing", t_mask_sched_debug),
    T("masked", "/proc/latency_stats shows nothing", t_mask_latency_stats),
    T("masked", "/proc/interrupts shows nothing", t_mask_interrupts),
    T("masked", "/proc/acpi is empty", t_mask_acpi),
    T("masked", "/proc/scsi is empty", t_mask_scsi),
    T("masked", "/proc/asound is empty", t_mask_asound),
    T("masked", "/sys/firmware is empty", t_mask_firmware),
    T("masked", "/sys/devices/virtual/powercap is empty", t_mask_powercap),
    T("devices", "mknod of a character device (1:1, /dev/mem) is denied with EPERM", t_mknod_char),
    T("devices", "mknod of a block device (8:0) is denied with EPERM", t_mknod_block),
    T("devices",
      "/dev holds no host device node beyond null, zero, full, random, urandom, "
      "tty and ptys",
      t_dev_nodes),
    T("ptrace", "PTRACE_SEIZE of PID 1 (cell-init) is denied with EPERM", t_ptrace_init),
    T("ptrace", "process_vm_readv and process_vm_writev of PID 1 are denied with EPERM",
      t_vm_readv),
    T("ptrace", "/proc/1/mem cannot be opened: EACCES", t_proc1_mem),
    T("ptrace", "/proc/1/environ cannot be read: EACCES", t_proc1_environ),
    T("ptrace", "kcmp with PID 1 is denied with EPERM", t_kcmp),
    T("ptrace", "ptrace of another sandbox's init (a host pid) fails with ESRCH", t_ptrace_victim),
    T("ptrace", "ptrace of a host process fails with ESRCH", t_ptrace_host),
    T("signals", "SIGKILL to PID 1 from inside leaves it running", t_kill_init),
    T("signals", "a signal to another sandbox's init (a host pid) fails with ESRCH", t_kill_victim),
    T("signals", "a signal to a host process fails with ESRCH", t_kill_host),
    T("signals", "pidfd_open of a host process fails with ESRCH", t_pidfd_host),
    T("signals", "no controlling terminal: /dev/tty gives ENXIO (TIOCSTI to a user's tty)",
      t_no_ctty),
    T("fds", "only fds 0, 1 and 2 are open when a command starts (CVE-2024-21626)", t_fds),
    T("fds", "the working directory is inside the sandbox's root (CVE-2024-21626)", t_cwd),
    T("fds", "stdin is /dev/null", t_stdin),
    T("fds", "PID 1's fds cannot be opened or read through /proc/1/fd: EACCES", t_proc1_fd),
    T("fds", "cell-init's binary cannot be written through /proc/1/exe (CVE-2019-5736)",
      t_proc1_exe),
    T("fds", "pidfd_getfd of PID 1's relay socket is denied with EPERM", t_pidfd_getfd),
    T("other-sandbox", "its /tmp file is not reachable: ENOENT", t_victim_tmp),
    T("other-sandbox", "its /dev/shm file is not reachable: ENOENT", t_victim_shm),
    T("other-sandbox", "its /workspace file is not reachable: ENOENT", t_victim_workspace),
    T("other-sandbox",
      "its SysV shared memory, message queue and semaphores are not "
      "reachable: ENOENT",
      t_victim_sysv),
    T("other-sandbox", "its abstract unix socket refuses connections: ECONNREFUSED",
      t_victim_abstract),
    T("other-sandbox", "its files are not reachable through any /proc/*/root", t_victim_proc_root),
    T("other-sandbox", "its processes are not visible in /proc", t_victim_procs),
    T("other-sandbox", "its layer's host path is not reachable: ENOENT", t_victim_layer),
    T("other-sandbox", "its init's host pid gives no /proc/<pid>/root: ENOENT", t_victim_pid_root),
    T("ordinary", "fork and exec of /bin/sh", t_fork_exec),
    T("ordinary", "threads (clone3 falls back to clone)", t_threads),
    T("ordinary", "a server on port 80 answers on 127.0.0.1", t_port80),
    T("ordinary", "chown, and setuid to nobody, work", t_chown_setuid),
    T("ordinary", "chroot works", t_chroot),
    T("ordinary", "ptrace of its own child works", t_ptrace_child),
    T("ordinary", "fd passing with SCM_RIGHTS between its own processes works", t_scm_rights),
    T("ordinary", "files: write, rename, symlink, hard link, mkfifo", t_files),
    T("ordinary", "personality: query and PER_LINUX", t_personality_ok),
    TOOL("dpkg-deb --build and dpkg -i / -r of a local package", t_dpkg),
    TOOL("apt-get install / remove of a local .deb", t_apt),
    TOOL("pip install --no-index of a local wheel into a venv", t_pip),
    TOOL("npm install of a local tarball, offline", t_npm),
    TOOL("git init and commit", t_git),
    TOOL("gcc compiles and runs a program", t_gcc),
    TOOL("strace -f of its own child", t_strace),
    TOOL("gdb -batch runs its own child", t_gdb),
};

/* ---- the victim's side: plant, then prove each secret is reachable where it lives -------- */

static int plant_files(void)
{
	static const char *const dirs[] = {"/tmp", "/dev/shm", "/workspace"};
	for (size_t i = 0; i < 3; i++) {
		char p[PATH_MAX];
		secret_path(p, sizeof(p), dirs[i], opt.victim);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, opt.victim, strlen(opt.victim)) < 0)
			return note(FAIL, "writing %s: %s", p, ename(errno));
		close(fd);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return note(FAIL, "reading back %s: %s", p, ename(errno));
		close(fd);
	}
	return note(PASS, "ok");
}

static int plant_sysv(void)
{
	key_t k = victim_key(opt.victim);
	if (shmget(k, 4096, IPC_CREAT | 0600) < 0 || msgget(k, IPC_CREAT | 0600) < 0 ||
	    semget(k, 1, IPC_CREAT | 0600) < 0)
		return note(FAIL, "creating SysV objects: %s", ename(errno));
	if (shmget(k, 0, 0) < 0 || msgget(k, 0) < 0 || semget(k, 0, 0) < 0)
		return note(FAIL, "finding them again: %s", ename(errno));
	return note(PASS, "ok");
}

/* A daemon in its own session that holds the abstract socket and answers the marker. */
static int plant_daemon(void)
{
	struct sockaddr_un a;
	socklen_t len = (socklen_t)abstract_addr(&a, opt.victim);
	int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, len) < 0 || listen(ls, 8) < 0)
		return note(FAIL, "abstract socket: %s", ename(errno));
	pid_t pid = fork();
	if (pid < 0)
		return note(FAIL, "fork: %s", ename(errno));
	if (pid == 0) {
		if (fork() != 0)
			_exit(0);
		setsid();
		prctl(PR_SET_NAME, "cell-victim");
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		for (;;) {
			int c = accept(ls, NULL, NULL);
			if (c < 0)
				continue;
			(void)!write(c, opt.victim, strlen(opt.victim));
			close(c);
		}
	}
	reap(pid);
	close(ls);
	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char buf[128] = "";
	if (c < 0 || connect(c, (struct sockaddr *)&a, len) < 0)
		return note(FAIL, "connecting to it: %s", ename(errno));
	ssize_t n = read(c, buf, sizeof(buf) - 1);
	close(c);
	if (n <= 0 || strncmp(buf, opt.victim, strlen(opt.victim)))
		return note(FAIL, "it did not answer the marker");
	return note(PASS, "ok");
}

static int plant_visible(void)
{
	/* The daemon is visible here (the other sandbox must not see it). */
	for (int i = 0; i < 50; i++) {
		DIR *d = opendir("/proc");
		for (struct dirent *e; d && (e = readdir(d));) {
			char p[PATH_MAX], comm[64] = "";
			snprintf(p, sizeof(p), "/proc/%s/comm", e->d_name);
			int fd = open(p, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue;
			ssize_t n = read(fd, comm, sizeof(comm) - 1);
			close(fd);
			if (n > 0 && !strncmp(comm, "cell-victim", 11)) {
				closedir(d);
				return note(PASS, "pid %s", e->d_name);
			}
		}
		if (d)
			closedir(d);
		usleep(20 * 1000);
	}
	return note(FAIL, "the daemon cell-victim is not in /proc");
}

/* ---- volumes (cell-escape --volume DIR) ------------------------------------------------- */

/* The host side planted DIR/host-secret (root, 0600), DIR/host-public (root, 0644) and
 * DIR/host-null (the null device) before the sandbox was made. */
static void in_volume(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", opt.volume, name);
}

static int t_vol_mknod(void)
{
	char p[PATH_MAX];
	in_volume(p, sizeof(p), "made-null");
	struct outcome o =
	    CALL("mknod c 1 3 on the volume", mknod(p, S_IFCHR | 0666, makedev(1, 3)));
	if (o.rc == 0)
		unlink(p);
	return WANT(EPERM, o);
}

static int t_vol_host_node(void)
{
	char p[PATH_MAX];
	in_volume(p, sizeof(p), "host-null");
	struct outcome o = CALL("open of the host's device node", open(p, O_RDWR | O_CLOEXEC));
	close_if(o.rc);
	return WANT(EACCES, o);
}

static int t_vol_host_secret(void)
{
	char p[PATH_MAX];
	in_volume(p, sizeof(p), "host-secret");
	struct outcome o = CALL("open of root's 0600 file", open(p, O_RDONLY | O_CLOEXEC));
	close_if(o.rc);
	return WANT(EACCES, o);
}

static int t_vol_host_public(void)
{
	char p[PATH_MAX];
	in_volume(p, sizeof(p), "host-public");
	struct outcome w = CALL("open for writing", open(p, O_WRONLY | O_APPEND | O_CLOEXEC));
	close_if(w.rc);
	struct outcome m = CALL("chmod 4777", chmod(p, 04777));
	struct outcome c = CALL("chown to the sandbox's root", chown(p, 0, 0));
	/* Root's ids are none of the sandbox's: its capabilities do not reach the file
	 * (EACCES, EPERM), and ids it cannot map are refused as such (EOVERFLOW). */
	const int want[] = {EACCES, EPERM, EOVERFLOW};
	const struct outcome o[] = {w, m, c};
	return want_errs(o, 3, want, 3);
}

/* What the host side checks afterwards: who owns these on the host, and what the file
 * capability is bound to. Refusals are fine too (then there is nothing to check). */
static int t_vol_plant(void)
{
	static const struct {
		const char *name;
		mode_t mode;
		bool other_id; /* chown to sandbox uid 1 first */
	} files[] = {{"planted-suid", 04755, false},
		     {"planted-sgid", 02755, false},
		     {"planted-other", 06755, true},
		     {"planted-capped", 0755, false}};
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return note(FAIL, "readlink /proc/self/exe: %s", ename(errno));
	self[n] = '\0';
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char p[PATH_MAX], cmd[2 * PATH_MAX + 16];
		in_volume(p, sizeof(p), files[i].name);
		snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", self, p);
		if (system(cmd) != 0)
			return note(FAIL, "copying the helper to %s failed", p);
		if (files[i].other_id && chown(p, 1, 1) < 0)
			add("chown 1:1 %s: %s; ", files[i].name, ename(errno));
		if (chmod(p, files[i].mode) < 0)
			add("chmod %s: %s; ", files[i].name, ename(errno));
	}
	char p[PATH_MAX];
	in_volume(p, sizeof(p), "planted-capped");
	/* cap_setuid+ep as setcap(8) writes it (version 2); the kernel rebinds it. */
	const uint32_t cap[5] = {0x02000001u, 1u << 7, 0, 0, 0};
	if (setxattr(p, "security.capability", cap, sizeof(cap), 0) < 0)
		add("setxattr security.capability: %s; ", ename(errno));
	add("planted; the host side checks them");
	return PASS;
}

static const struct attempt volume_attempts[] = {
    T("volumes", "a device node cannot be made on a volume", t_vol_mknod),
    T("volumes", "a device node of the host on a volume opens nothing", t_vol_host_node),
    T("volumes", "root's 0600 file on a volume cannot be read", t_vol_host_secret),
    T("volumes", "root's file on a volume cannot be written, chmod-ed or chown-ed",
      t_vol_host_public),
    T("volumes", "planting set-id files and a file capability (checked on the host)", t_vol_plant),
};

static const struct attempt plant[] = {
    T("other-sandbox",
      "control: its /tmp, /dev/shm and /workspace files are readable in their "
      "own sandbox",
      plant_files),
    T("other-sandbox", "control: its SysV objects exist in their own sandbox", plant_sysv),
    T("other-sandbox", "control: its abstract socket answers in its own sandbox", plant_daemon),
    T("other-sandbox", "control: its process is visible in its own sandbox", plant_visible),
};

/* ---- pools: the kernel's per-user pools (--pools, --pools-some) -------------------------- */

/* Take all of pool p in a process of a session of its own, which outlives the attempt and
 * holds it for opt.pools_hold seconds with none of the exec's fds open: how many, and in
 * *why the errno that ended it. -1 when the holder did not report. */
static long hold_all(enum pool p, int *why)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		if (fork() != 0)
			_exit(0);
		setsid();
		close(fds[0]);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		for (int fd = 0; fd < 3; fd++)
			dup2(null, fd);
		long got[2];
		int w = 0;
		got[0] = pool_take_all(p, 1000000, &w);
		got[1] = w;
		if (write(fds[1], got, sizeof(got)) != sizeof(got))
			_exit(1);
		close(fds[1]);
		sleep(opt.pools_hold);
		_exit(0);
	}
	close(fds[1]);
	if (pid > 0)
		reap(pid);
	long got[2];
	ssize_t n = pid > 0 ? read(fds[0], got, sizeof(got)) : -1;
	close(fds[0]);
	if (n != sizeof(got))
		return -1;
	*why = (int)got[1];
	return got[0];
}

/* The sandbox takes all of p it is given, refused with want at the end, at most at_most
 * (0: no bound but the kernel's). */
static int pool_runs_out(enum pool p, int want, long at_most)
{
	int why = 0;
	long n = hold_all(p, &why);
	if (n < 0)
		return note(FAIL, "the holder of %s did not report", pool_names[p]);
	if (n == 0 || why != want)
		return note(FAIL, "took %ld, then %s (want %s)", n, ename(why), ename(want));
	if (at_most && n > at_most)
		return note(FAIL, "took %ld, more than %ld", n, at_most);
	return note(PASS, "took %ld, then %s", n, ename(why));
}

static int pools_inotify(void)
{
	return pool_runs_out(POOL_INOTIFY, EMFILE, 0);
}

static int pools_timers(void)
{
	return pool_runs_out(POOL_TIMERS, EAGAIN, 0);
}

static int pools_mqueue(void)
{
	return pool_runs_out(POOL_MQUEUE, EMFILE, 0);
}

static int pools_ptys(void)
{
	return pool_runs_out(POOL_PTYS, ENOSPC, 256);
}

/* A few of p, in the other sandbox while the first holds all of its own. */
static int pool_some(enum pool p)
{
	int why = 0;
	long n = pool_take_all(p, 8, &why);
	return n == 8 ? note(PASS, "took 8") : note(FAIL, "took %ld of 8, then %s", n, ename(why));
}

static int some_inotify(void)
{
	return pool_some(POOL_INOTIFY);
}

static int some_timers(void)
{
	return pool_some(POOL_TIMERS);
}

static int some_mqueue(void)
{
	return pool_some(POOL_MQUEUE);
}

static int some_ptys(void)
{
	return pool_some(POOL_PTYS);
}

static const struct attempt pools[] = {
    T("pools", "inotify instances run out at the sandbox's own share (EMFILE)", pools_inotify),
    T("pools", "queued signals and POSIX timers run out at the sandbox's own share (EAGAIN)",
      pools_timers),
    T("pools", "message queue bytes run out at the sandbox's own share (EMFILE)", pools_mqueue),
    T("pools", "at most 256 terminals (ENOSPC)", pools_ptys),
};

static const struct attempt pools_other[] = {
    T("pools", "another sandbox still gets inotify instances", some_inotify),
    T("pools", "another sandbox still gets POSIX timers", some_timers),
    T("pools", "another sandbox still gets message queues", some_mqueue),
    T("pools", "another sandbox still gets terminals", some_ptys),
};

/* ---- runner ----------------------------------------------------------------------------- */

static void sanitize(char *s)
{
	for (; *s; s++)
		if (*s == '\n' || *s == '\r')
			*s = ' ';
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Run one attempt in a child of its own process group; print its TAP line. */
static int run_one(const struct attempt *a, int n)
{
	memset(R, 0, sizeof(*R));
	R->verdict = -1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		printf("not ok %d - %s: %s # fork: %s\n", n, a->cls, a->name, ename(errno));
		return FAIL;
	}
	if (pid == 0) {
		setpgid(0, 0);
		R->verdict = a->fn();
		_exit(0);
	}
	setpgid(pid, pid);
	int st = 0;
	bool timed_out = false;
	int64_t deadline = now_ms() + (int64_t)a->timeout_s * 1000;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			st = 0;
			break;
		}
		if (now_ms() > deadline) {
			timed_out = true;
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			reap(pid);
			break;
		}
		usleep(5000);
	}
	kill(-pid, SIGKILL); /* whatever the attempt left running */
	int v = R->verdict;
	if (timed_out)
		v = note(FAIL, "did not finish within %d s", a->timeout_s);
	else if (WIFSIGNALED(st))
		v = note(FAIL, "the attempt was killed by %s",
			 sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "a signal");
	else if (v < 0)
		v = note(FAIL, "the attempt ended without a verdict (status %#x)", st);
	sanitize(R->msg);
	if (v == PASS)
		printf("ok %d - %s: %s\n", n, a->cls, a->name);
	else if (v == SKIP)
		printf("ok %d - %s: %s # SKIP %s\n", n, a->cls, a->name, R->msg);
	else
		printf("not ok %d - %s: %s # %s\n", n, a->cls, a->name, R->msg);
	fflush(stdout);
	return v;
}

static int run_all(const struct attempt *list, size_t n)
{
	printf("1..%zu\n", n);
	int failed = 0;
	for (size_t i = 0; i < n; i++)
		if (run_one(&list[i], (int)i + 1) == FAIL)
			failed++;
	return failed ? 1 : 0;
}

static int rm_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st, (void)ftw;
	if (type == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

/* Refuse to run in the host's user namespace: the attempts assume a sandbox around them. */
static bool in_sandbox(void)
{
	FILE *f = fopen("/proc/self/uid_map", "re");
	if (!f)
		return false;
	unsigned long inside, outside, len;
	int n = fscanf(f, "%lu %lu %lu", &inside, &outside, &len);
	fclose(f);
	return n == 3 && !(inside == 0 && outside == 0 && len == 4294967295UL);
}

static int make_links(const char *hostdir)
{
	/* For the host side's files-API attempts: each points at the host's marker dir. */
	char target[PATH_MAX], rel[PATH_MAX] = "";
	if (mkdir("/workspace/cell-links", 0755) < 0 && errno != EEXIST)
		return perror("mkdir /workspace/cell-links"), 1;
	for (int i = 0; i < 16; i++)
		strcat(rel, "../");
	struct {
		const char *name;
		char target[PATH_MAX * 2];
	} l[] = {{"abs", ""}, {"rel", ""}, {"dir", ""}, {"updir", ""}, {"file", ""}};
	snprintf(target, sizeof(target), "%s/marker", hostdir);
	snprintf(l[0].target, sizeof(l[0].target), "%s", target);
	snprintf(l[1].target, sizeof(l[1].target), "%s%s", rel, target + 1);
	snprintf(l[2].target, sizeof(l[2].target), "%s", hostdir);
	snprintf(l[3].target, sizeof(l[3].target), "%s/dropzone", hostdir);
	snprintf(l[4].target, sizeof(l[4].target), "%s", target);
	for (size_t i = 0; i < sizeof(l) / sizeof(l[0]); i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "/workspace/cell-links/%s", l[i].name);
		unlink(p);
		if (symlink(l[i].target, p) < 0)
			return perror(p), 1;
	}
	/* A hard link to a file of the image (copied up by the link, so the image below is
	 * never written), then a write through it. */
	unlink("/workspace/cell-links/hard");
	if (link("/etc/passwd", "/workspace/cell-links/hard") < 0)
		return perror("link /etc/passwd"), 1;
	int fd = open("/workspace/cell-links/hard", O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0 || write(fd, "# cell selftest\n", 16) != 16)
		return perror("writing through the hard link"), 1;
	close(fd);
	printf("links made\n");
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: cell-escape [--victim MARKER] [--victim-pid PID] [--victim-dir DIR]\n"
		   "                   [--host-pid PID] [--host-path PATH]... [--net-peer ADDR]\n"
		   "       cell-escape --plant MARKER | --links HOSTDIR | --volume DIR | --list\n"
		   "       cell-escape --pools SECONDS | --pools-some\n"
		   "Runs cell's escape battery inside a sandbox (as its root) and prints TAP.\n"
		   "Normally run by `cell selftest`.\n");
}

int main(int argc, char **argv)
{
	record_initial_fds();
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *plant_marker = NULL, *links = NULL;
	bool list = false, pools_some = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--list")) {
			list = true;
			continue;
		}
		if (!strcmp(a, "--pools-some")) {
			pools_some = true;
			continue;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		if (!v) {
			usage(stderr);
			return 2;
		}
		i++;
		if (!strcmp(a, "--victim"))
			opt.victim = v;
		else if (!strcmp(a, "--victim-pid"))
			opt.victim_pid = atoi(v);
		else if (!strcmp(a, "--victim-dir"))
			opt.victim_dir = v;
		else if (!strcmp(a, "--host-pid"))
			opt.host_pid = atoi(v);
		else if (!strcmp(a, "--host-path") && opt.n_host_paths < 8)
			opt.host_paths[opt.n_host_paths++] = v;
		else if (!strcmp(a, "--plant"))
			plant_marker = v;
		else if (!strcmp(a, "--links"))
			links = v;
		else if (!strcmp(a, "--volume"))
			opt.volume = v;
		else if (!strcmp(a, "--net-peer"))
			opt.net_peer = v;
		else if (!strcmp(a, "--pools"))
			opt.pools_hold = (unsigned)atoi(v);
		else {
			usage(stderr);
			return 2;
		}
	}
	if (list) {
		for (size_t i = 0; i < sizeof(battery) / sizeof(battery[0]); i++)
			printf("%s: %s\n", battery[i].cls, battery[i].name);
		return 0;
	}
	if (!in_sandbox()) {
		fprintf(stderr, "cell-escape: this is the host's user namespace; the battery runs "
				"only inside a sandbox (cell selftest)\n");
		return 2;
	}
	if (links)
		return make_links(links);
	R = mmap(NULL, sizeof(*R), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (R == MAP_FAILED)
		return perror("mmap"), 2;
	if (plant_marker) {
		opt.victim = plant_marker;
		return run_all(plant, sizeof(plant) / sizeof(plant[0]));
	}
	if (opt.volume)
		return run_all(volume_attempts,
			       sizeof(volume_attempts) / sizeof(volume_attempts[0]));
	if (opt.pools_hold)
		return run_all(pools, sizeof(pools) / sizeof(pools[0]));
	if (pools_some)
		return run_all(pools_other, sizeof(pools_other) / sizeof(pools_other[0]));
	snprintf(scratch, sizeof(scratch), "/tmp/cell-escape.XXXXXX");
	if (!mkdtemp(scratch))
		return perror("mkdtemp"), 2;
	int rc = run_all(battery, sizeof(battery) / sizeof(battery[0]));
	nftw(scratch, rm_cb, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	return rc;
}
