/* File operations of cell-init, confined beneath its root (init_base.rootfd). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/stat.h>

#include <jansson.h>

#include "cell/error.h"

struct conn;

/* Bounds of the walks below a directory (listing, search, recursive delete, archive). */
#define FILES_DEPTH_MAX	  32	 /* directory levels below the one named */
#define FILES_ENTRIES_MAX 100000 /* entries one recursive delete or archive handles */

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
/* The uid of the user name in the sandbox's /etc/passwd: 0, or -ENOENT when no line names
 * it. */
int files_user_uid(const char *name, uint32_t *uid);
/* The same for a group name in the sandbox's /etc/group. */
int files_group_gid(const char *name, uint32_t *gid);

/* 0, or -EACCES with err set when fd (any fd, O_PATH included) is the state of a process
 * in /proc (/proc/<pid>, self, thread-self or below): files operations never reach it. */
int files_refuse_process_state(int fd, const char *what, const char *path, struct cell_error *err);
/* The STAT frame's object for path. */
json_t *files_stat_json(const char *path, const struct stat *st);

/* The sandbox's /etc/passwd or /etc/group read once (confined, bounded) and indexed by id. */
struct name_entry;
struct files_names {
	char *buf;
	struct name_entry *v;
	size_t n;
};
void files_names_load(struct files_names *ix, const char *db);
void files_names_free(struct files_names *ix);
/* The name of the first line naming id (not NUL-terminated, *len bytes), or NULL. */
const char *files_names_find(const struct files_names *ix, uint32_t id, size_t *len);
