/* FILE_TAR: a directory of the sandbox as a tar stream (tar.c). */
#pragma once

#include <jansson.h>

struct conn;

/* {"path"} → STAT, then DATA* and END (or ERROR, the archive cut short). */
void tar_start(struct conn *c, json_t *req);
