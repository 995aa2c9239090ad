/* What every process cell-init starts (a command, a session's shell, a PTY session's
 * process) does between its fork or clone and its execve, and the signalling of a session's
 * members. The child-side functions make system calls only: they run in forked children of
 * a threaded process and in clones that share PID 1's memory. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

/* Every signal's disposition back to its default (cell-init blocks them all and reads them
 * from a signalfd). The mask itself is cleared by proc_unblock_signals, last. */
void proc_default_signals(void);
void proc_unblock_signals(void);
/* Close every fd from first on. */
void proc_close_fds_from(int first);
/* oom_score_adj 500 (PID 1 runs at -1000: a hog in a command goes first) and the original
 * RLIMIT_NOFILE back. */
void proc_command_limits(void);
/* No supplementary groups, then gid, then uid (raw system calls: glibc's set*id would have
 * every thread of a shared memory change ids). 0, or -errno with *step naming the step. */
int proc_set_ids(uint32_t uid, uint32_t gid, const char **step);

/* Parent side. Send sig to the processes of session sid other than its leader; with since,
 * only those started at or after that tick (proc_boot_ticks). */
void proc_signal_session(pid_t sid, int sig, uint64_t since);
/* Now in the clock ticks of /proc/<pid>/stat's starttime. */
uint64_t proc_boot_ticks(void);
