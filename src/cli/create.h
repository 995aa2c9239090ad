/* Creating a sandbox (POST /v1/sandboxes): shared by create, run and selftest. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cell/error.h"

struct cli_create_opts {
	const char *image;    /* NULL: "default" */
	const char *snapshot; /* snapshotId instead of an image; NULL: none */
	const char *name;     /* extensions["cell.name"], unique on the host; NULL: none */
	json_t *labels;	      /* --label k=v: the sandbox's metadata; or NULL */
	json_t *limits;	      /* --memory, --cpus, --pids-limit, --disk: resourceLimits */
	json_t *entrypoint;   /* --entrypoint, split at spaces; or NULL */
	const char *session;  /* extensions["cell.sessionKey"] */
	json_t
	    *volumes; /* cli_parse_volume's: host {"host","dest",..} or named {"pvc",..}; or NULL */
	json_t *env;  /* object, or NULL */
	json_t *secrets;     /* "secretEnv": NAME → value, or NULL */
	long long timeout_s; /* sandbox lifetime; 0: none */
	const char *seccomp; /* extensions["cell.seccomp"]; NULL: celld's default */
	bool seccomp_log;    /* extensions["cell.seccompLog"] */
	const char *network; /* extensions["cell.network"]; NULL: celld's default */
	/* --allow-host / --deny-host: the networkPolicy's rules (arrays of strings, or
	 * NULL); with any allow the default action is deny, else allow. */
	json_t *allow_hosts, *deny_hosts;
	/* extensions cell.idleTimeout, cell.stopAfter, cell.reclaimAfter, cell.onTimeout as
	 * given (celld checks them); NULL: the policy's */
	const char *idle_timeout, *stop_after, *reclaim_after, *on_timeout;
	/* --startup-script FILE (its text), --startup-timeout SEC, --skill NAME@VERSION
	 * (repeatable): extensions cell.startupScript, cell.startupTimeout, cell.skills. */
	char *startup_script;
	const char *startup_timeout;
	json_t *skills;
	bool code_interpreter; /* extensions["cell.codeInterpreter"] */
};

/* -I/--image, --snapshot, --name, --label, --memory, --cpus, --pids-limit, --disk,
 * --entrypoint and --code-interpreter of create and run (their optstring has "I:"). --env-file is
 * here too, as both take it, but each command reads it into its own -e object. */
enum {
	CLI_OPT_SNAPSHOT = 0x1500,
	CLI_OPT_NAME,
	CLI_OPT_LABEL,
	CLI_OPT_MEMORY,
	CLI_OPT_CPUS,
	CLI_OPT_PIDS_LIMIT,
	CLI_OPT_DISK,
	CLI_OPT_ENTRYPOINT,
	CLI_OPT_ENV_FILE,
	CLI_OPT_CODE_INTERPRETER
};
/* clang-format off */
#define CLI_SANDBOX_LONGOPTS                                           \
	{"image", required_argument, NULL, 'I'},                       \
	{"snapshot", required_argument, NULL, CLI_OPT_SNAPSHOT},       \
	{"name", required_argument, NULL, CLI_OPT_NAME},               \
	{"label", required_argument, NULL, CLI_OPT_LABEL},             \
	{"memory", required_argument, NULL, CLI_OPT_MEMORY},           \
	{"cpus", required_argument, NULL, CLI_OPT_CPUS},               \
	{"pids-limit", required_argument, NULL, CLI_OPT_PIDS_LIMIT},   \
	{"disk", required_argument, NULL, CLI_OPT_DISK},               \
	{"entrypoint", required_argument, NULL, CLI_OPT_ENTRYPOINT},   \
	{"env-file", required_argument, NULL, CLI_OPT_ENV_FILE},       \
	{"code-interpreter", no_argument, NULL, CLI_OPT_CODE_INTERPRETER}
/* clang-format on */
#define CLI_SANDBOX_HELP                                                                           \
	"  -I, --image NAME         image (default: default): one cell built, one of the\n"        \
	"                           store (cell image ls), or a registry reference\n"              \
	"                           (python:3.12-slim), pulled on first use\n"                     \
	"      --snapshot ID        start from snapshot ID (cell snapshot ls) instead of\n"        \
	"                           an image\n"                                                    \
	"      --name NAME          a name unique on this host, taken wherever an id is\n"         \
	"                           ([a-zA-Z0-9][a-zA-Z0-9_.-]*, at most 64)\n"                    \
	"      --label K=V          metadata of the sandbox (repeatable)\n"                        \
	"      --memory SIZE        memory limit (512m, 2g, 512Mi, 2Gi)\n"                         \
	"      --cpus N             CPU limit in cores (0.5, 2)\n"                                 \
	"      --pids-limit N       limit on its processes and threads\n"                          \
	"      --disk SIZE          size of its writable layer (10g, 10Gi)\n"                      \
	"      --entrypoint CMD     the sandbox's long-running process, split at spaces\n"         \
	"                           (default: the image's)\n"                                      \
	"      --env-file FILE      K=V lines as -e (# comments; K alone takes the value\n"        \
	"                           from this environment)\n"                                      \
	"      --code-interpreter   run the code interpreter as the entrypoint (cell's own\n"      \
	"                           service when the image has none; it needs python3)\n"
/* Handle one of CLI_SANDBOX_LONGOPTS but --env-file into o: 1 when c was one, 0 when not,
 * -1 (printed) when its value is refused. */
int cli_create_sandbox_opt(int c, const char *arg, struct cli_create_opts *o);

/* --seccomp NAME and --seccomp-log of create and run. */
enum { CLI_OPT_SECCOMP = 0x1100, CLI_OPT_SECCOMP_LOG };
/* clang-format off */
#define CLI_SECCOMP_LONGOPTS                                           \
	{"seccomp", required_argument, NULL, CLI_OPT_SECCOMP},         \
	{"seccomp-log", no_argument, NULL, CLI_OPT_SECCOMP_LOG}
/* clang-format on */
/* Handle one of CLI_SECCOMP_LONGOPTS into o: true when c was one. */
bool cli_create_seccomp_opt(int c, const char *arg, struct cli_create_opts *o);

/* --idle-timeout, --stop-after, --reclaim-after and --on-timeout of create and run. */
enum {
	CLI_OPT_IDLE_TIMEOUT = 0x1400,
	CLI_OPT_STOP_AFTER,
	CLI_OPT_RECLAIM_AFTER,
	CLI_OPT_ON_TIMEOUT
};
/* clang-format off */
#define CLI_TIMER_LONGOPTS                                                   \
	{"idle-timeout", required_argument, NULL, CLI_OPT_IDLE_TIMEOUT},     \
	{"stop-after", required_argument, NULL, CLI_OPT_STOP_AFTER},         \
	{"reclaim-after", required_argument, NULL, CLI_OPT_RECLAIM_AFTER},   \
	{"on-timeout", required_argument, NULL, CLI_OPT_ON_TIMEOUT}
/* clang-format on */
#define CLI_TIMER_HELP                                                                             \
	"      --idle-timeout S     pause it after S seconds without use (0: never)\n"             \
	"      --stop-after S       stop a paused one after S seconds (0: never)\n"                \
	"      --reclaim-after S    delete a stopped one after S seconds (0: never)\n"             \
	"      --on-timeout WHAT    at the end of --timeout: delete (default) or stop\n"
/* Handle one of CLI_TIMER_LONGOPTS into o: 1 when c was one, 0 when not, -1 after a usage
 * error naming the flag. */
int cli_create_timer_opt(int c, const char *arg, struct cli_create_opts *o);

/* --network MODE, --allow-host H and --deny-host H (repeatable) of create and run. */
enum { CLI_OPT_NETWORK = 0x1200, CLI_OPT_ALLOW_HOST, CLI_OPT_DENY_HOST };
/* clang-format off */
#define CLI_NETWORK_LONGOPTS                                           \
	{"network", required_argument, NULL, CLI_OPT_NETWORK},         \
	{"allow-host", required_argument, NULL, CLI_OPT_ALLOW_HOST},   \
	{"deny-host", required_argument, NULL, CLI_OPT_DENY_HOST}
/* clang-format on */
#define CLI_NETWORK_HELP                                                                           \
	"      --network MODE       none (loopback only), public (the internet, never the\n"       \
	"                           host or internal ranges) or limited (package\n"                \
	"                           registries); default: celld's --network-default\n"             \
	"      --allow-host H       allow only H (a name, *.name or IPv4 address) and the\n"       \
	"                           other --allow-host hosts (repeatable)\n"                       \
	"      --deny-host H        never H (repeatable); alone: everything public but H\n"
/* Handle one of CLI_NETWORK_LONGOPTS into o: 1 when c was one, 0 when not, -1 (printed)
 * when its value is refused. */
int cli_create_network_opt(int c, const char *arg, struct cli_create_opts *o);
/* --startup-script FILE, --startup-timeout SEC and --skill NAME@VERSION of create and run. */
enum { CLI_OPT_STARTUP_SCRIPT = 0x1300, CLI_OPT_STARTUP_TIMEOUT, CLI_OPT_SKILL };
/* clang-format off */
#define CLI_PROVISION_LONGOPTS                                                   \
	{"startup-script", required_argument, NULL, CLI_OPT_STARTUP_SCRIPT},     \
	{"startup-timeout", required_argument, NULL, CLI_OPT_STARTUP_TIMEOUT},   \
	{"skill", required_argument, NULL, CLI_OPT_SKILL}
/* clang-format on */
#define CLI_PROVISION_HELP                                                                         \
	"      --startup-script FILE  run FILE (bash) in /workspace at each start, until it\n"     \
	"                           succeeds once (again when it changes)\n"                       \
	"      --startup-timeout SEC  its bound, and each skill's (default 30, 1-600)\n"           \
	"      --skill NAME@VERSION   install a registered skill (cell skill; repeatable)\n"
/* Handle one of CLI_PROVISION_LONGOPTS into o: 1 when c was one, 0 when not, -1 (printed)
 * when its value is refused. */
int cli_create_provision_opt(int c, const char *arg, struct cli_create_opts *o);
/* Free what the network options allocated. */
void cli_create_opts_free(struct cli_create_opts *o);

/* POST /v1/sandboxes; on success the new (or resumed) sandbox's id is in id[] and its JSON
 * in *out (may be NULL). */
int cli_create_sandbox(const struct cli_create_opts *o, char *id, size_t id_size, json_t **out,
		       struct cell_error *err);
