/* cell-oci's commands, one cmd_*.c each (main.c's table names them). */
#pragma once

#include "cli.h"

oci_cmd_fn oci_cmd_create, oci_cmd_start, oci_cmd_state, oci_cmd_list, oci_cmd_kill, oci_cmd_delete,
    oci_cmd_ps, oci_cmd_pause, oci_cmd_resume, oci_cmd_exec, oci_cmd_features, oci_cmd_update,
    oci_cmd_refused;
