/* cell: the command-line client of celld. Global flags, dispatch, shared option parsing. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "cell/id.h"
#include "cell/version.h"
#include "cli.h"

struct cli_global cli;
volatile sig_atomic_t cli_interrupted;

struct cli_command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct cli_command commands[] = {
    {"run", cmd_run, "create a sandbox, run a command in it, pass its output and exit code"},
    {"create", cmd_create, "create a sandbox and print its id"},
    {"exec", cmd_exec, "run a command in an existing sandbox"},
    {"ls", cmd_ls, "list sandboxes"},
    {"inspect", cmd_inspect, "show a sandbox's kernel-level details (JSON)"},
    {"rm", cmd_rm, "delete sandboxes"},
    {"pause", cmd_pause, "freeze every process of sandboxes (memory kept)"},
    {"resume", cmd_resume, "thaw paused sandboxes"},
    {"cp", cmd_cp, "copy a file into or out of a sandbox"},
    {"image", cmd_image, "build and list local images"},
    {"info", cmd_info, "show celld's version, cgroup backend and directories"},
    {"selftest", cmd_selftest, "run the escape battery on this host and kernel (TAP report)"},
    {"version", cmd_version, "print the version of cell"},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: cell [--socket PATH] [--json] COMMAND [ARGS...]\n"
		   "\n"
		   "Isolated Linux sandboxes, driven through celld.\n"
		   "\n"
		   "Commands:\n");
	for (size_t i = 0; i < CELL_ARRAY_SIZE(commands); i++)
		fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
	fprintf(
	    f,
	    "\n"
	    "Global options:\n"
	    "  --socket PATH  celld's Unix socket (env CELL_SOCKET, default %s)\n"
	    "  --json         machine-readable output (ls, inspect, create, info, image ls)\n"
	    "  -h, --help     this help ('cell COMMAND --help' for one command)\n"
	    "  -V, --version  print the version\n"
	    "\n"
	    "Example: cell run --rm -v \"$PWD\":/workspace/src -w /workspace/src -- make test\n",
	    CLI_DEFAULT_SOCKET);
}

bool cli_global_opt(int c, const char *arg)
{
	switch (c) {
	case CLI_OPT_SOCKET:
		cli.socket = arg;
		return true;
	case CLI_OPT_JSON:
		cli.json = true;
		return true;
	default:
		return false;
	}
}

void cli_fputs_safe(const char *s, FILE *f)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char ch = *p;
		/* Control bytes from a server message could be terminal escape sequences. */
		if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f)
			ch = '?';
		fputc(ch, f);
	}
}

void cli_error(const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fputs("cell: ", stderr);
	cli_fputs_safe(msg, stderr);
	fputc('\n', stderr);
}

int cli_usage_error(const char *cmd, int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "cell %s: ", cmd);
	cli_fputs_safe(msg, stderr);
	fprintf(stderr, "\nTry 'cell %s --help'.\n", cmd);
	return code;
}

int cli_bad_option(const char *cmd, int code)
{
	fprintf(stderr, "Try 'cell %s --help'.\n", cmd);
	return code;
}

int cli_global_opts_only(int argc, char **argv, const char *optstring, const char *cmd,
			 void (*help)(FILE *))
{
	static const struct option longopts[] = {CLI_GLOBAL_LONGOPTS, {0}};
	int c;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			help(stdout);
			return CLI_EXIT_OK;
		}
		return cli_bad_option(cmd, CLI_EXIT_USAGE);
	}
	return -1;
}

bool cli_check_id(const char *id)
{
	if (cell_id_valid(id))
		return true;
	cli_error("invalid sandbox id '%s': expected 1-%d characters of [a-z0-9-]", id,
		  CELL_ID_MAX);
	return false;
}

int cli_parse_env(json_t *obj, const char *arg)
{
	const char *eq = strchr(arg, '=');
	_cleanup_free_ char *key = strndup(arg, eq ? (size_t)(eq - arg) : strlen(arg));
	if (!key)
		return -ENOMEM;
	if (!key[0]) {
		cli_error("-e '%s': empty variable name", arg);
		return -EINVAL;
	}
	const char *val = eq ? eq + 1 : getenv(key);
	if (!val) {
		cli_error("-e %s: not set in this environment (use -e %s=VALUE)", key, key);
		return -EINVAL;
	}
	if (json_object_set_new(obj, key, json_string(val)) < 0) {
		cli_error("-e %s: value is not valid UTF-8", key);
		return -EINVAL;
	}
	return 0;
}

/* The options after DEST: "ro", "rw", "map=owner|range|identity", comma-separated. 1 when
 * text is such a list (ro and map filled), 0 when it is not one (it is part of DEST). */
static int volume_options(const char *text, bool *ro, const char **map)
{
	static const char *const maps[] = {"owner", "range", "identity"};
	bool ro_seen = false;
	const char *map_seen = NULL;
	for (const char *p = text; *p;) {
		size_t len = strcspn(p, ",");
		if (len == 2 && (!strncmp(p, "ro", 2) || !strncmp(p, "rw", 2))) {
			ro_seen = p[1] == 'o';
		} else if (len > 4 && !strncmp(p, "map=", 4)) {
			map_seen = NULL;
			for (size_t i = 0; i < CELL_ARRAY_SIZE(maps); i++)
				if (len - 4 == strlen(maps[i]) && !strncmp(p + 4, maps[i], len - 4))
					map_seen = maps[i];
			if (!map_seen)
				return 0;
		} else {
			return 0;
		}
		p += len;
		p += *p == ',';
	}
	*ro = ro_seen;
	*map = map_seen;
	return 1;
}

int cli_parse_volume(json_t *arr, const char *arg)
{
	_cleanup_free_ char *spec = strdup(arg);
	if (!spec)
		return -ENOMEM;
	bool ro = false;
	const char *map = NULL;
	char *colon = strchr(spec, ':');
	if (!colon || colon == spec || !colon[1]) {
		cli_error("-v '%s': expected HOST:DEST[:OPTIONS]", arg);
		return -EINVAL;
	}
	*colon = '\0';
	char *dest = colon + 1;
	char *opts = strrchr(dest, ':');
	if (opts && volume_options(opts + 1, &ro, &map) == 1)
		*opts = '\0';
	else if (opts && opts[1] && !strchr(opts + 1, '/')) {
		cli_error("-v '%s': options '%s' are not ro, rw or map=owner|range|identity", arg,
			  opts + 1);
		return -EINVAL;
	}
	if (dest[0] != '/') {
		cli_error("-v '%s': destination '%s' must be an absolute path", arg, dest);
		return -EINVAL;
	}
	_cleanup_free_ char *host = realpath(spec, NULL);
	if (!host) {
		cli_error("-v '%s': host path %s: %s", arg, spec, strerror(errno));
		return -errno;
	}
	json_t *v = json_pack("{s:s, s:s, s:b}", "host", host, "dest", dest, "readOnly", ro);
	if (!v) {
		cli_error("-v '%s': paths must be valid UTF-8", arg);
		return -EINVAL;
	}
	if (map)
		json_object_set_new(v, "map", json_string(map));
	return json_array_append_new(arr, v) < 0 ? -ENOMEM : 0;
}

int cli_parse_seconds_ms(const char *arg, long long *ms)
{
	char *end = NULL;
	errno = 0;
	double s = strtod(arg, &end);
	if (errno || end == arg || *end || !isfinite(s) || s <= 0 || s > 1e9) {
		cli_error("--timeout '%s': expected a positive number of seconds", arg);
		return -EINVAL;
	}
	double x = s * 1000.0;
	*ms = (long long)x;
	if ((double)*ms < x) /* round up: 0.0005 s is 1 ms, never "no timeout" */
		(*ms)++;
	return 0;
}

static void on_signal(int sig)
{
	cli_interrupted = sig;
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

static void version_usage(FILE *f)
{
	fprintf(f, "Usage: cell version\n\nPrint the version of the cell CLI.\n");
}

int cmd_version(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "+h", "version", version_usage);
	if (rc >= 0)
		return rc;
	if (optind != argc)
		return cli_usage_error("version", CLI_EXIT_USAGE, "takes no arguments");
	if (cli.json)
		printf("{\"version\": \"%s\"}\n", CELL_VERSION);
	else
		printf("cell %s\n", CELL_VERSION);
	return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    CLI_GLOBAL_LONGOPTS, {"version", no_argument, NULL, 'V'}, {0}};
	cli.socket = getenv("CELL_SOCKET");
	if (!cli.socket || !cli.socket[0])
		cli.socket = CLI_DEFAULT_SOCKET;

	int c;
	/* '+': stop at the command name; each command parses its own options. */
	while ((c = getopt_long(argc, argv, "+hV", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == 'V') {
			optind = 0; /* cmd_version parses its own (empty) argv from the start */
			return cmd_version(1, (char *[]){"version", NULL});
		}
		fprintf(stderr, "Try 'cell --help'.\n");
		return CLI_EXIT_USAGE;
	}
	if (optind >= argc) {
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	const char *name = argv[optind];
	for (size_t i = 0; i < CELL_ARRAY_SIZE(commands); i++) {
		if (strcmp(name, commands[i].name))
			continue;
		int sub_argc = argc - optind;
		char **sub_argv = argv + optind;
		/* getopt's own messages then read "cell run: unrecognized option ...". */
		char prog[64];
		snprintf(prog, sizeof(prog), "cell %s", commands[i].name);
		sub_argv[0] = prog;
		optind = 0; /* full re-initialisation of getopt for the command's own parse */
		int rc = commands[i].fn(sub_argc, sub_argv);
		cli_client_cleanup();
		if (fflush(stdout) == EOF && rc == 0) {
			cli_error("writing to stdout: %s", strerror(errno));
			rc = CLI_EXIT_FAIL;
		}
		return rc;
	}
	if (!strcmp(name, "help")) {
		/* "cell help run" is "cell run --help". */
		for (size_t i = 0; optind + 1 < argc && i < CELL_ARRAY_SIZE(commands); i++) {
			if (strcmp(argv[optind + 1], commands[i].name))
				continue;
			char *help_argv[] = {(char *)commands[i].name, "--help", NULL};
			optind = 0;
			return commands[i].fn(2, help_argv);
		}
		usage(stdout);
		return CLI_EXIT_OK;
	}
	cli_error("unknown command '%s'", name);
	fprintf(stderr, "Try 'cell --help'.\n");
	return CLI_EXIT_USAGE;
}
