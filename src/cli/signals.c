/* Signals of the cell CLI: recorded by the handler, acted on by whoever polls the flag. */
#include <signal.h>
#include <stddef.h>

#include "signals.h"

volatile sig_atomic_t cli_signals_caught;

static void on_signal(int sig)
{
	cli_signals_caught = sig;
}

void cli_signals_install(void)
{
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	/* SA_RESTART: libcurl's poll loop keeps running; its progress callback notices the
	 * flag within a second and aborts the transfer cleanly, so cleanup always runs. */
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}
