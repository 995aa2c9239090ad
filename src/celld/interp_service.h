/* interp_service.c: cell's code-interpreter service (src/interpreter, installed under
 * <datadir>/cell/interpreter) offered to any image with Python and ipykernel: bound
 * read-only at /opt/code-interpreter of a sandbox whose image lacks it, its launcher the
 * entrypoint */
#pragma once

#include <stdbool.h>

#include "cell/error.h"
#include "cell/runtime.h"
#include "create_spec.h"

#define INTERP_SERVICE_DEST	"/opt/code-interpreter"
#define INTERP_SERVICE_LAUNCHER INTERP_SERVICE_DEST "/code-interpreter.sh"

/* The host's copy of the service: dir must hold code-interpreter.sh and
 * code_interpreter.py. A missing one is no error (celld runs without it: a create that
 * asks for it is refused, naming dir); one that is there but cannot be resolved is. */
int interp_service_init(const char *dir, struct cell_error *err);

/* Once spec's image is found and its entrypoint taken: whether the sandbox gets the host's
 * service (spec->interpreter_bind): when the entrypoint is the launcher (asked for with
 * extensions["cell.codeInterpreter"] or an E2B template marked "codeInterpreter", which
 * make it the entrypoint when the request names none; or named by the request, as
 * OpenSandbox's clients do whatever the image) and the image lacks it. -ENOEXEC naming the
 * image when it has no python3, or when this host has no copy of the service and the
 * interpreter was asked for. */
int interp_service_choose(struct create_spec *spec, struct cell_error *err);

/* The read-only bind a start adds for a sandbox recorded with interpreter_bind (files of
 * host root: nobody's inside). -ENOENT when this host no longer has the service. */
int interp_service_volume(struct cell_volume *vol, struct cell_error *err);
