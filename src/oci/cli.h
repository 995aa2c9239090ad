/* cell-oci's command line: the global options runc takes (as containerd's shim and dockerd
 * pass them) and what every command shares. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

struct oci_cli {
	const char *root;     /* --root: the containers' records (default /run/cell-oci) */
	const char *log;      /* --log FILE, else stderr */
	bool log_json;	      /* --log-format json */
	bool systemd_cgroup;  /* --systemd-cgroup */
	const char *init;     /* --cell-init PATH (default: beside cell-oci, else installed) */
	const char *policies; /* --policies DIR (cell's seccomp profile) */
};

/* A command: 0 on success, else 1 with the error logged (runc's exit codes). argv[0] is
 * the command's name. */
typedef int oci_cmd_fn(const struct oci_cli *cli, int argc, char **argv);

/* Log err as the failure of the command (to --log, and to stderr when --log is a file) and
 * return 1. */
struct cell_error;
int oci_fail(const struct oci_cli *cli, const struct cell_error *err);
/* --pid-file: pid written for the engine (nothing when path is NULL). */
int oci_write_pid_file(const char *path, pid_t pid, struct cell_error *err);
/* A terminal's master to the engine's --console-socket PATH. */
int oci_send_console(const char *path, int master, struct cell_error *err);
/* The log goes to --log's file (fd): failures are said on stderr too. */
void oci_log_to_file(int fd);
/* A process that outlives the command (exec --detach's mirror): every fd but 0-2, the log
 * and keep closed, so nothing the engine gave the command stays open with it. */
void oci_close_inherited(int keep);
