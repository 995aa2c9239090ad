/* The shared steps of cell-init's children (proc.h) and the signalling of a session's
 * members. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "proc.h"

void proc_default_signals(void)
{
	struct sigaction sa = {.sa_handler = SIG_DFL};
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &sa, NULL);
}

void proc_unblock_signals(void)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

void proc_close_fds_from(int first)
{
	if (syscall(SYS_close_range, (unsigned)first, ~0u, 0) == 0)
		return;
	/* Kernel without close_range: close up to our own descriptor limit. */
	struct rlimit rl;
	long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (long)rl.rlim_cur : 65536;
	for (long fd = first; fd < max; fd++)
		close((int)fd);
}

void proc_command_limits(void)
{
	/* PID 1 runs at -1000, never an OOM victim (celld sets it: spawn.c's protect_init);
	 * a command starts at 500, so a hog in it goes before anything else. Raising
	 * oom_score_adj needs no privilege. A failure only changes which command an OOM kill
	 * picks. */
	int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (oom >= 0) {
		ssize_t w = write(oom, "500", 3);
		(void)w;
		close(oom);
	}
	if (init_base.nofile_orig.rlim_cur)
		setrlimit(RLIMIT_NOFILE, &init_base.nofile_orig);
}

int proc_set_ids(uint32_t uid, uint32_t gid, const char **step)
{
	/* An id change also makes the kernel set the mm's dumpable flag from
	 * fs.suid_dumpable: only forked children (their own mm) get here. setgroups may be
	 * denied in a user namespace; that is only a failure when there is a group left to
	 * drop (the runtime normally starts us with none). */
	if (syscall(SYS_setgroups, 0, NULL) < 0 && getgroups(0, NULL) != 0) {
		*step = "dropping supplementary groups";
		return -errno;
	}
	if (syscall(SYS_setresgid, gid, gid, gid) < 0) {
		*step = "setgid";
		return -errno;
	}
	if (syscall(SYS_setresuid, uid, uid, uid) < 0) {
		*step = "setuid";
		return -errno;
	}
	return 0;
}

uint64_t proc_boot_ticks(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	long hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		hz = 100;
	return (uint64_t)ts.tv_sec * (uint64_t)hz +
	       (uint64_t)ts.tv_nsec / (1000000000u / (uint64_t)hz);
}

void proc_signal_session(pid_t sid, int sig, uint64_t since)
{
	if (sid <= 0)
		return;
	DIR *d = opendir("/proc");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 1 || pid == sid)
			continue;
		char path[64], buf[1024];
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		/* After the command name's last ')': state ppid pgrp session ... field 22 is
		 * starttime (the 20th after the name). */
		char *p = strrchr(buf, ')');
		if (!p)
			continue;
		unsigned long long f[20] = {0};
		char st;
		if (sscanf(p + 1,
			   " %c %llu %llu %llu %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
			   "%*s %*s %*s %llu",
			   &st, &f[0], &f[1], &f[2], &f[3]) != 5)
			continue;
		if ((pid_t)f[2] != sid || (since && f[3] < since))
			continue;
		kill((pid_t)pid, sig);
	}
	closedir(d);
}
