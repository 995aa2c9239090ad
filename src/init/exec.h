/* Commands of cell-init: spawned by a second thread, their output relayed, their exit
 * reported. */
#pragma once

#include <stdbool.h>

#include <jansson.h>

struct conn;

/* Start the spawner thread (after the epoll set exists, with every signal blocked). */
void exec_init(void);
void exec_start(struct conn *c, json_t *req);
/* A child was reaped; returns true when it was the main process of a command. */
bool exec_reaped(int pid, int status);
/* A child stopped (signal sig): one that has not reached its execve yet is killed and its
 * request answered ERROR. */
void exec_stopped(int pid, int sig);
/* Test mode shutdown: SIGKILL every command's process group. */
void exec_kill_all(void);
