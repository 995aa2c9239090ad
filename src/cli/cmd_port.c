/* cell port (a sandbox port's preview URL) and cell forward (a local TCP port joined to
 * one inside a sandbox, for as long as the command runs). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/splice.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "output.h"
#include "parse.h"
#include "signals.h"

/* ---- cell port ---- */

static void port_usage(FILE *f)
{
	fprintf(f, "Usage: cell port ID PORT\n"
		   "\n"
		   "Print the preview URL of PORT in sandbox ID: the port proxy of celld's TCP\n"
		   "listener (or of its --preview-domain), with the port's preview token, so a\n"
		   "browser opens it without the API key. Anyone holding the URL can open that\n"
		   "port (and no other) until the sandbox is deleted. With --json: celld's\n"
		   "endpoint answer (endpoint, headers, url).\n"
		   "\n"
		   "Options:\n"
		   "      --socket PATH  celld's socket\n"
		   "      --json         the whole endpoint answer\n"
		   "  -h, --help         this help\n");
}

int cmd_port(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "h", "port", port_usage);
	if (rc >= 0)
		return rc;
	if (argc - optind != 2)
		return cli_error_usage("port", CLI_EXIT_USAGE, "expected a sandbox id and a port");
	const char *id = cli_resolve_id(argv[optind]);
	unsigned port;
	if (!id)
		return CLI_EXIT_FAIL;
	if (!cli_parse_port(argv[optind + 1], false, &port))
		return cli_error_usage("port", CLI_EXIT_USAGE,
				       "port '%s': expected a number from 1 to 65535",
				       argv[optind + 1]);
	json_t *ans = NULL;
	_cleanup_free_ char *url = NULL;
	struct cell_error err = {0};
	int r = cli_client_preview_url(id, port, &url, &ans, &err);
	rc = CLI_EXIT_OK;
	if (cli.json && ans) {
		cli_output_json(ans);
	} else if (r < 0) {
		cli_error("%s", err.msg);
		rc = CLI_EXIT_FAIL;
	} else {
		printf("%s\n", url);
	}
	json_decref(ans);
	return rc;
}

/* ---- cell forward ---- */

static void forward_usage(FILE *f)
{
	fprintf(f, "Usage: cell forward ID [ADDR:]LOCAL:PORT\n"
		   "\n"
		   "Listen on ADDR:LOCAL (default address 127.0.0.1; LOCAL 0 picks a free port)\n"
		   "and join each connection to PORT inside sandbox ID: raw TCP both ways (ssh,\n"
		   "a database, a dev server), through celld, also for a sandbox without a\n"
		   "network. Prints \"Forwarding ADDR:LOCAL -> ID:PORT\" and runs until ^C.\n"
		   "\n"
		   "Options:\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

struct forward {
	struct cell_client client; /* endpoint and timeouts only: each tunnel has its socket */
	const char *id;
	unsigned port;
};

struct conn {
	const struct forward *fw;
	int local;
};

static void *conn_thread(void *arg)
{
	struct conn *c = arg;
	struct cell_error err = {0};
	int tunnel = cell_client_tunnel(&c->fw->client, c->fw->id, c->fw->port, &err);
	if (tunnel < 0) {
		cli_error("forward: %s", err.msg);
	} else {
		int rc = cell_splice(c->local, tunnel, NULL);
		if (rc < 0 && rc != -ECONNRESET && rc != -EPIPE)
			cli_error("forward: a connection to %s:%u: %s", c->fw->id, c->fw->port,
				  strerror(-rc));
		close(tunnel);
	}
	close(c->local);
	free(c);
	return NULL;
}

/* [ADDR:]LOCAL:PORT into a bound, listening socket and PORT: the fd, or -1 with *code the
 * exit code (said why). */
static int listen_spec(const char *spec, unsigned *port, struct sockaddr_in *bound, int *code)
{
	*code = CLI_EXIT_USAGE;
	_cleanup_free_ char *s = strdup(spec);
	if (!s)
		return cli_error("out of memory"), -1;
	char *last = strrchr(s, ':');
	if (!last)
		return cli_error_usage("forward", CLI_EXIT_USAGE,
				       "'%s': expected [ADDR:]LOCAL:PORT", spec),
		       -1;
	*last = '\0';
	char *mid = strrchr(s, ':');
	const char *addr = "127.0.0.1", *local = s;
	if (mid) {
		*mid = '\0';
		addr = s;
		local = mid + 1;
	}
	unsigned lport;
	if (!cli_parse_port(local, true, &lport) || !cli_parse_port(last + 1, false, port))
		return cli_error_usage("forward", CLI_EXIT_USAGE,
				       "'%s': LOCAL is 0-65535 and PORT 1-65535", spec),
		       -1;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)lport)};
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return cli_error_usage("forward", CLI_EXIT_USAGE,
				       "address '%s': expected an IPv4 address such as 127.0.0.1",
				       addr),
		       -1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	socklen_t len = sizeof(*bound);
	*code = CLI_EXIT_FAIL;
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)bound, &len) < 0) {
		cli_error("forward: listening on %s:%u: %s", addr, lport, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

int cmd_forward(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "h", "forward", forward_usage);
	if (rc >= 0)
		return rc;
	if (argc - optind != 2)
		return cli_error_usage("forward", CLI_EXIT_USAGE,
				       "expected a sandbox id and [ADDR:]LOCAL:PORT");
	struct forward fw = {.id = cli_resolve_id(argv[optind])};
	if (!fw.id)
		return CLI_EXIT_FAIL;
	struct sockaddr_in bound;
	int code;
	_cleanup_close_ int lfd = listen_spec(argv[optind + 1], &fw.port, &bound, &code);
	if (lfd < 0)
		return code;
	/* The sandbox must exist now; each connection then finds out whether it still runs and
	 * whether anything listens on the port. */
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "/v1/sandboxes/%s", fw.id) < 0)
		return cli_error("out of memory"), CLI_EXIT_FAIL;
	struct cell_error err = {0};
	if (cli_client_api("GET", path, NULL, fw.id, NULL, NULL, &err) < 0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_FAIL;
	}
	cell_client_init(&fw.client, cli.socket);
	cli_signals_install();
	char addr[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &bound.sin_addr, addr, sizeof(addr));
	printf("Forwarding %s:%u -> %s:%u\n", addr, ntohs(bound.sin_port), fw.id, fw.port);
	fflush(stdout);
	while (!cli_signals_caught) {
		struct pollfd p = {.fd = lfd, .events = POLLIN};
		if (poll(&p, 1, 500) <= 0)
			continue; /* a signal (EINTR) or the half-second check */
		int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0)
			continue;
		struct conn *c = malloc(sizeof(*c));
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (!c ||
		    (*c = (struct conn){&fw, cfd}, pthread_create(&t, &attr, conn_thread, c))) {
			cli_error("forward: no thread for a connection: out of resources");
			free(c);
			close(cfd);
		}
		pthread_attr_destroy(&attr);
	}
	/* ^C: open connections end with the process, as ssh -L's do. */
	return CLI_EXIT_OK;
}
