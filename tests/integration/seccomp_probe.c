/* seccomp_probe: a static helper run inside a sandbox by it_seccomp. It makes one call of
 * each class a profile denies (and a few it must allow) and prints one line per call:
 * "<name> ok" or "<name> <ERRNO>". Arguments are chosen so that, without the filter, the
 * kernel would answer something else than the filter does (ENOENT, EBADF, EINVAL, success),
 * so a missing rule shows as a different answer rather than a coincidental EPERM.
 *
 *   seccomp_probe [NAME...]   (no NAME: every check)
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/reboot.h>
#include <linux/sched.h>

#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#define HIGH_BITS	  0x100000000ull /* set in the upper half of a 32-bit argument */
#define X32_BIT		  0x40000000L
#define NR_OPEN_TREE_ATTR 467 /* Linux 6.15, newer than the libseccomp of the build host */

static long sys(long nr, long a, long b, long c, long d, long e)
{
	return syscall(nr, a, b, c, d, e);
}

/* A child made with raw clone flags; it exits at once. */
static long clone_flags(unsigned long flags)
{
	long pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	return pid;
}

static long clone3_plain(void)
{
	struct clone_args args = {.exit_signal = SIGCHLD};
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	return pid;
}

static long fork_plain(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return pid;
}

/* getpid through the i386 entry (int 0x80): a foreign ABI of an x86_64 process. */
static long i386_getpid(void)
{
#if defined(__x86_64__)
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
#else
	errno = ENOSYS;
	return -1;
#endif
}

static long vm_read_self(void)
{
	char src[8] = "probe", dst[8];
	struct iovec l = {dst, sizeof(dst)}, r = {src, sizeof(src)};
	return process_vm_readv(getpid(), &l, 1, &r, 1, 0);
}

static long sock(long family, int type)
{
	long fd = syscall(SYS_socket, family, type, 0);
	if (fd >= 0)
		close((int)fd);
	return fd;
}

static long per(unsigned long p)
{
	long r = syscall(SYS_personality, p);
	if (r >= 0 && p != 0xffffffffUL)
		syscall(SYS_personality, PER_LINUX);
	return r;
}

static long unshare_flags(unsigned long flags)
{
	return syscall(SYS_unshare, flags);
}

static long run(const char *name)
{
	char handle[128] = {0};
	int mount_id;
	unsigned long sti = TIOCSTI;
	char c = 'x';
	if (!strcmp(name, "keyctl"))
		return sys(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3 /* session */, 0, 0, 0);
	if (!strcmp(name, "add_key"))
		return sys(SYS_add_key, (long)"user", (long)"probe", (long)"x", 1, -2);
	if (!strcmp(name, "request_key"))
		return sys(SYS_request_key, (long)"user", (long)"probe", 0, 0, 0);
	if (!strcmp(name, "bpf"))
		return sys(SYS_bpf, 9999, 0, 0, 0, 0);
	if (!strcmp(name, "perf_event_open"))
		return sys(SYS_perf_event_open, 0, 0, -1, -1, 0);
	if (!strcmp(name, "userfaultfd"))
		return sys(SYS_userfaultfd, 0xffff, 0, 0, 0, 0);
	if (!strcmp(name, "io_uring_setup"))
		return sys(SYS_io_uring_setup, 1, 0, 0, 0, 0);
	if (!strcmp(name, "kexec_load"))
		return sys(SYS_kexec_load, 0, 0, 0, 0, 0);
	if (!strcmp(name, "open_by_handle_at"))
		return sys(SYS_open_by_handle_at, -1, (long)handle, O_RDONLY, 0, 0);
	if (!strcmp(name, "name_to_handle_at")) {
		((unsigned *)handle)[0] = sizeof(handle) - 8;
		return sys(SYS_name_to_handle_at, AT_FDCWD, (long)"/", (long)handle,
			   (long)&mount_id, 0);
	}
	if (!strcmp(name, "finit_module"))
		return sys(SYS_finit_module, -1, (long)"", 0, 0, 0);
	if (!strcmp(name, "delete_module"))
		return sys(SYS_delete_module, (long)"cell_probe_none", 0, 0, 0, 0);
	if (!strcmp(name, "mount"))
		return sys(SYS_mount, (long)"none", (long)"/nonexistent-probe", (long)"tmpfs", 0,
			   0);
	if (!strcmp(name, "umount2"))
		return sys(SYS_umount2, (long)"/nonexistent-probe", 0, 0, 0, 0);
	if (!strcmp(name, "pivot_root"))
		return sys(SYS_pivot_root, (long)"/nonexistent-probe", (long)"/nonexistent-probe",
			   0, 0, 0);
	if (!strcmp(name, "fsopen"))
		return sys(SYS_fsopen, (long)"nonexistentfs", 0, 0, 0, 0);
	if (!strcmp(name, "fsmount"))
		return sys(SYS_fsmount, -1, 0, 0, 0, 0);
	if (!strcmp(name, "open_tree"))
		return sys(SYS_open_tree, AT_FDCWD, (long)"/nonexistent-probe", 0, 0, 0);
	if (!strcmp(name, "move_mount"))
		return sys(SYS_move_mount, -1, (long)"", -1, (long)"", 0);
	if (!strcmp(name, "mount_setattr"))
		return sys(SYS_mount_setattr, -1, (long)"", 0, 0, 0);
	if (!strcmp(name, "setns"))
		return sys(SYS_setns, -1, 0, 0, 0, 0);
	if (!strcmp(name, "unshare_user"))
		return unshare_flags(CLONE_NEWUSER);
	if (!strcmp(name, "unshare_net_high"))
		return unshare_flags(CLONE_NEWNET | HIGH_BITS);
	if (!strcmp(name, "unshare_files"))
		return unshare_flags(CLONE_FILES);
	if (!strcmp(name, "clone_newuser"))
		return clone_flags(CLONE_NEWUSER);
	if (!strcmp(name, "clone_newns"))
		return clone_flags(CLONE_NEWNS);
	if (!strcmp(name, "clone_plain"))
		return clone_flags(0);
	if (!strcmp(name, "clone3"))
		return clone3_plain();
	if (!strcmp(name, "fork"))
		return fork_plain();
	if (!strcmp(name, "swapon"))
		return sys(SYS_swapon, (long)"/nonexistent-probe", 0, 0, 0, 0);
	if (!strcmp(name, "swapoff"))
		return sys(SYS_swapoff, (long)"/nonexistent-probe", 0, 0, 0, 0);
	if (!strcmp(name, "reboot"))
		return sys(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2,
			   LINUX_REBOOT_CMD_CAD_OFF, 0, 0);
	if (!strcmp(name, "settimeofday"))
		return sys(SYS_settimeofday, 1 /* bad pointer */, 0, 0, 0, 0);
	if (!strcmp(name, "clock_settime"))
		return sys(SYS_clock_settime, 9999, 0, 0, 0, 0);
	if (!strcmp(name, "iopl"))
		return sys(SYS_iopl, 9, 0, 0, 0, 0);
	if (!strcmp(name, "ioperm"))
		return sys(SYS_ioperm, 0, 0, 1, 0, 0);
	if (!strcmp(name, "syslog"))
		return sys(SYS_syslog, 9999, 0, 0, 0, 0);
	if (!strcmp(name, "acct"))
		return sys(SYS_acct, (long)"/nonexistent-probe", 0, 0, 0, 0);
	if (!strcmp(name, "quotactl"))
		return sys(SYS_quotactl, 0, (long)"/nonexistent-probe", 0, 0, 0);
	if (!strcmp(name, "personality_rie"))
		return per(READ_IMPLIES_EXEC);
	if (!strcmp(name, "personality_bsd"))
		return per(6 /* PER_BSD */);
	if (!strcmp(name, "personality_query"))
		return per(0xffffffffUL);
	if (!strcmp(name, "personality_norandom"))
		return per(ADDR_NO_RANDOMIZE);
	if (!strcmp(name, "tiocsti"))
		return ioctl(0, sti, &c);
	if (!strcmp(name, "tiocsti_high"))
		return sys(SYS_ioctl, 0, (long)(HIGH_BITS | TIOCSTI), (long)&c, 0, 0);
	if (!strcmp(name, "tioclinux"))
		return sys(SYS_ioctl, 0, TIOCLINUX, (long)&c, 0, 0);
	if (!strcmp(name, "af_alg"))
		return sock(AF_ALG, SOCK_SEQPACKET);
	if (!strcmp(name, "af_alg_high"))
		return sock((long)(HIGH_BITS | AF_ALG), SOCK_SEQPACKET);
	if (!strcmp(name, "af_vsock"))
		return sock(AF_VSOCK, SOCK_STREAM);
	if (!strcmp(name, "af_inet"))
		return sock(AF_INET, SOCK_STREAM);
	if (!strcmp(name, "af_unix"))
		return sock(AF_UNIX, SOCK_STREAM);
	if (!strcmp(name, "af_packet"))
		return sock(AF_PACKET, SOCK_DGRAM);
	if (!strcmp(name, "i386_getpid"))
		return i386_getpid();
	if (!strcmp(name, "x32_getpid"))
		return syscall(X32_BIT | SYS_getpid);
	if (!strcmp(name, "open_tree_attr"))
		return sys(NR_OPEN_TREE_ATTR, AT_FDCWD, (long)"/", 0, 0, 0);
	if (!strcmp(name, "process_vm_readv"))
		return vm_read_self();
	if (!strcmp(name, "ptrace_peek"))
		return sys(SYS_ptrace, 9999 /* bad request */, getpid(), 0, 0, 0);
	errno = EINVAL;
	return -2;
}

static const char *const all[] = {
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "kexec_load",
    "open_by_handle_at",
    "name_to_handle_at",
    "finit_module",
    "delete_module",
    "mount",
    "umount2",
    "pivot_root",
    "fsopen",
    "fsmount",
    "open_tree",
    "move_mount",
    "mount_setattr",
    "setns",
    "unshare_user",
    "unshare_net_high",
    "unshare_files",
    "clone_newuser",
    "clone_newns",
    "clone_plain",
    "clone3",
    "fork",
    "swapon",
    "swapoff",
    "reboot",
    "settimeofday",
    "clock_settime",
    "iopl",
    "ioperm",
    "syslog",
    "acct",
    "quotactl",
    "personality_rie",
    "personality_bsd",
    "personality_query",
    "personality_norandom",
    "tiocsti",
    "tiocsti_high",
    "tioclinux",
    "af_alg",
    "af_alg_high",
    "af_vsock",
    "af_inet",
    "af_unix",
    "af_packet",
    "i386_getpid",
    "x32_getpid",
    "open_tree_attr",
    "process_vm_readv",
    "ptrace_peek",
};

/* Kernels without ia32 emulation answer int 0x80 with SIGSEGV: try it in a child. */
static bool report_i386(void)
{
	int fds[2];
	if (pipe(fds) < 0)
		return false;
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		errno = 0;
		long r = i386_getpid();
		const char *e = r >= 0 ? "ok" : strerrorname_np(errno);
		if (write(fds[1], e ? e : "E?", strlen(e ? e : "E?")) < 0)
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	char buf[32] = "";
	ssize_t n = pid > 0 ? read(fds[0], buf, sizeof(buf) - 1) : -1;
	close(fds[0]);
	int st = 0;
	if (pid > 0)
		waitpid(pid, &st, 0);
	buf[n > 0 ? n : 0] = '\0';
	printf("i386_getpid %s\n", n > 0 ? buf : WIFSIGNALED(st) ? "no-ia32" : "E?");
	return true;
}

static void report(const char *name)
{
	if (!strcmp(name, "i386_getpid") && report_i386())
		return;
	errno = 0;
	long r = run(name);
	if (r == -2 && errno == EINVAL) {
		printf("%s unknown-check\n", name);
		return;
	}
	if (r >= 0) {
		printf("%s ok\n", name);
		return;
	}
	const char *e = strerrorname_np(errno);
	printf("%s %s\n", name, e ? e : "E?");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1)
		for (int i = 1; i < argc; i++)
			report(argv[i]);
	else
		for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
			report(all[i]);
	return 0;
}
