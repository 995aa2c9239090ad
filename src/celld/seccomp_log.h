/* seccomp_log.c: denied calls of sandboxes created with cell.seccompLog */
#pragma once

#include <stdbool.h>

#include <jansson.h>

#include "cell/error.h"

int seccomp_log_start(struct cell_error *err);
/* Take over the listener of sandbox id (closed on failure too); its denied calls are
 * answered with the profile's errno and recorded. */
int seccomp_log_attach(const char *id, const char *profile, int listener, struct cell_error *err);
/* Close the listener and forget the record (the sandbox is deleted). */
void seccomp_log_detach(const char *id);
/* inspect's "seccomp": {profile, log, and with log: denied, listening, recent[]}. */
json_t *seccomp_log_json(const char *id, const char *profile, bool log);
