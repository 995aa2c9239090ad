/* File operations of cell-init, confined beneath its root (init_base.rootfd). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct conn;

void files_stat(struct conn *c, json_t *req);
void files_read(struct conn *c, json_t *req);
void files_write(struct conn *c, json_t *req);
void files_mkdir(struct conn *c, json_t *req);
void files_remove(struct conn *c, json_t *req);
void files_list(struct conn *c, json_t *req);
void files_move(struct conn *c, json_t *req);
void files_chmod(struct conn *c, json_t *req);
void files_replace(struct conn *c, json_t *req);
/* The primary group of uid in the sandbox's /etc/passwd: true when a line names uid. */
bool files_user_gid(uint32_t uid, uint32_t *gid);
/* The home directory of uid in the sandbox's /etc/passwd (read as the owner names are:
 * confined, bounded, never a process's state) into buf: true when a line names uid with an
 * absolute home that fits. */
bool files_user_home(uint32_t uid, char *buf, size_t size);
