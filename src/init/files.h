/* File operations of cell-init, confined beneath its root (init_base.rootfd). */
#pragma once

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
