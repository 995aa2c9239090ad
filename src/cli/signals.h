/* Signals of the cell CLI: SIGINT/SIGTERM/SIGHUP are recorded, not obeyed at once, so the
 * CLI can interrupt the command and delete a --rm sandbox before it exits. */
#pragma once

#include <signal.h>

/* The signal that arrived (SIGINT/SIGTERM/SIGHUP) after cli_signals_install; 0 when none. */
extern volatile sig_atomic_t cli_signals_caught;

/* Install handlers for SIGINT/SIGTERM/SIGHUP that only record the signal, and ignore
 * SIGPIPE. */
void cli_signals_install(void);
