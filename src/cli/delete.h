/* Deleting a sandbox (DELETE /v1/sandboxes/{id}): shared by rm, run and selftest. */
#pragma once

#include "cell/error.h"

/* DELETE /v1/sandboxes/{id}. */
int cli_delete_sandbox(const char *id, struct cell_error *err);
