/* oci.c: cell-init as an OCI container's PID 1 (cell-init --oci): the container's process,
 * created and held (OCI_CREATE), let go (OCI_START), its end ending cell-init with its
 * status, the host's signals passed to it. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <jansson.h>

struct conn;

/* --oci: keep fds 0-2 (the engine's stdio) for the process, /dev/null on them. */
int oci_mode_setup(void);
bool oci_mode(void);
void oci_create(struct conn *c, json_t *req);
void oci_start(struct conn *c, json_t *req);
/* true when pid was the container's process: cell-init is to exit with
 * oci_exit_status(). */
bool oci_reaped(pid_t pid, int status);
int oci_exit_status(void);
/* A signal from the host, for the process (while it runs). */
void oci_forward_signal(int sig);
