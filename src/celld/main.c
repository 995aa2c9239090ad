/* celld: flags, configuration, the API key, listeners, adoption of the sandboxes an earlier
 * run left, and signals. The only place in celld that may exit. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cell/quantity.h"
#include "cell/version.h"
#include "admission.h"
#include "commands.h"
#include "config.h"
#include "e2b_templates.h"
#include "lifecycle.h"
#include "network.h"
#include "seccomp_log.h"
#include "seccomp_policy.h"
#include "timer_policy.h"
#include "timers.h"
#include "uidrange.h"
#include "volstore.h"
#include "watch.h"
#include "fields.h"
#include "http/gate.h"
#include "image_policy.h"
#include "image_pull.h"
#include "image_store.h"
#include "interp_service.h"
#include "http/keys.h"
#include "resource_policy.h"
#include "audit.h"
#include "preview.h"
#include "server.h"
#include "snapshots.h"

#define DEFAULT_SOCKET	 "/run/cell/cell.sock"
#define DEFAULT_LISTEN	 "127.0.0.1:8080"
#define SHUTDOWN_GRACE_S 5

static uint64_t audit_max_bytes;	  /* --audit-max-bytes; 0: AUDIT_MAX_DEFAULT */
static uint64_t audit_security_max_bytes; /* --audit-security-max-bytes; 0: the same */

struct flags {
	const char *state_dir, *images, *socket, *listen, *e2b_listen, *key_file, *keys_file, *init,
	    *uid_ranges, *policies, *output_budget, *audit_max, *audit_security_max, *interpreter,
	    *fd_limit;
	bool no_tcp, version, debug, log_json;
	struct image_pull_config pull;
};

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: celld [options]\n"
	    "  --state-dir DIR     state directory (default " CELL_DEFAULT_STATE_DIR ")\n"
	    "  --images DIR        images directory (default <state>/images)\n"
	    "  --socket PATH       Unix socket, mode 0660, group cell (default " DEFAULT_SOCKET
	    ")\n"
	    "  --listen HOST:PORT  TCP listener, API key required (default " DEFAULT_LISTEN ")\n"
	    "  --no-tcp            no TCP listener\n"
	    "  --e2b-listen HOST:PORT\n"
	    "                      a second TCP listener speaking E2B's API (its control plane\n"
	    "                      and envd), the same API key (header X-API-Key); off by\n"
	    "                      default\n"
	    "  --tcp-pending-max N TCP connections held before their first request has shown\n"
	    "                      the API key (default %u); when full, the oldest is closed\n"
	    "  --tcp-pending-per-ip N\n"
	    "                      of those, from one client address or IPv6 /64 (default %u);\n"
	    "                      past it, that client's oldest is closed\n"
	    "  --tcp-keyless-per-ip N\n"
	    "                      connections the HTTP server holds for one client whose\n"
	    "                      credential anyone may be handed (a preview or traffic\n"
	    "                      token, a signed URL, a public port; default %u); all such\n"
	    "                      clients together get a quarter of its connections; past\n"
	    "                      either, 503 and the connection is closed\n"
	    "  --tcp-head-timeout SECONDS\n"
	    "                      for the whole head of a TCP connection's first request, at\n"
	    "                      most " GATE_HEAD_MAX_TEXT " (default %u); then the connection "
	    "is closed\n"
	    "  --proxy-max-connections N\n"
	    "                      requests the port proxy (/proxy/{port}/) forwards to one\n"
	    "                      sandbox at once (default %u); past it, 429\n"
	    "  --preview-domain DOMAIN\n"
	    "                      host-name routing of preview URLs: a request to\n"
	    "                      <port>-<id>.DOMAIN is the port proxy of that sandbox and\n"
	    "                      port, at the app's \"/\" (point a wildcard DNS name at the\n"
	    "                      TCP listener, or a TLS proxy in front of it)\n"
	    "  --e2b-domain DOMAIN E2B's host names on the E2B listener (the SDK's E2B_DOMAIN):\n"
	    "                      <port>-<id>.DOMAIN is that sandbox's port, with E2B's\n"
	    "                      traffic token (e2b-traffic-access-token) unless the sandbox\n"
	    "                      allows public traffic; any other host is E2B's API\n"
	    "  --api-key-file F    API key file (default <state>/api-key; generated when "
	    "missing;\n"
	    "                      the environment variable CELL_API_KEY overrides it)\n"
	    "  --api-keys-file F   one key per tenant, lines \"NAME KEY\" (default\n"
	    "                      <state>/api-keys; none when missing). From a second key on,\n"
	    "                      each key sees only the sandboxes, snapshots and volumes it\n"
	    "                      made; the Unix socket sees all\n"
	    "  --init PATH         cell-init binary (default: next to celld, else "
	    "%s/cell-init)\n"
	    "  --policies DIR      seccomp profiles, resource policy, quotas (default: policies/ "
	    "of\n"
	    "                      the source tree celld was built in, else %s/policies)\n"
	    "  --interpreter DIR   cell's code-interpreter service, bound read-only at\n"
	    "                      /opt/code-interpreter of a sandbox whose image lacks it\n"
	    "                      (default: src/interpreter of the source tree celld was\n"
	    "                      built in, else %s/interpreter)\n"
	    "  --fd-limit N        file descriptors celld may hold (default: as many as the\n"
	    "                      kernel lets root have, fs.nr_open)\n"
	    "  --output-budget SIZE\n"
	    "                      command output kept by all sandboxes together, for\n"
	    "                      /command/{id}/logs (default 1Gi; each sandbox keeps at\n"
	    "                      most 64Mi): past it the oldest finished commands' output\n"
	    "                      goes first\n"
	    "  --audit-max-bytes SIZE\n"
	    "                      size of <state>/audit/audit.log past which it is rotated\n"
	    "                      (audit.log.1 ... .4 kept; default 16Mi, at least 4Ki)\n"
	    "  --audit-security-max-bytes SIZE\n"
	    "                      the same for <state>/audit/security.log: lifecycle,\n"
	    "                      network decisions, failed authentication, dropped-record\n"
	    "                      summaries (default 16Mi, at least 4Ki)\n"
	    "  --volume-root DIR   a host directory whose subtree TCP clients may mount as a\n"
	    "                      volume (volumes[].host.path; repeatable). Without it only\n"
	    "                      the Unix socket may mount host paths\n"
	    "  --volume-shared-writers\n"
	    "                      allow pvc.accessModes ReadWriteMany: several sandboxes\n"
	    "                      writing one named volume at once (default: one writer)\n"
	    "  --network-default MODE\n"
	    "                      a sandbox's network when its create names none: none\n"
	    "                      (loopback only), public (the internet, never the host or\n"
	    "                      internal ranges) or limited (package registries); default\n"
	    "                      public\n"
	    "  --subnet CIDR       the sandboxes' addresses, IPv4, /8 to /28 (default\n"
	    "                      " CELLD_DEFAULT_SUBNET "); each sandbox takes two\n"
	    "  --dns-upstream ADDR[:PORT]\n"
	    "                      where the sandboxes' resolver forwards the names it allows\n"
	    "                      (default: the first IPv4 nameserver of /etc/resolv.conf)\n"
	    "  --nflog-group N     the NFLOG group (1 to 65535) through which the kernel hands\n"
	    "                      celld the packets it drops for sandboxes, each logged with\n"
	    "                      its sandbox; 0: no packet log (default %u; only one program\n"
	    "                      of a network namespace may bind a group: give a second\n"
	    "                      celld on this host another)\n"
	    "  --uid-ranges-dir DIR\n"
	    "                      host-wide uid range reservations, shared by every celld on\n"
	    "                      the host (default " CELLD_UID_RANGES_DIR ", 0700 root)\n"
	    "  --registries-conf FILE\n"
	    "                      registries.conf for pulls, read alone (default:\n"
	    "                      $CONTAINERS_REGISTRIES_CONF, else " PULL_REGCONF_DEFAULT "\n"
	    "                      and the drop-ins), read again for every pull\n"
	    "  --registries-conf-dir DIR\n"
	    "                      its drop-ins, *.conf (default " PULL_REGCONF_DIR_DEFAULT ")\n"
	    "  --registry-certs-dir DIR\n"
	    "                      a registry's own CAs: DIR/HOST[:PORT]/*.crt (default\n"
	    "                      " PULL_CERTS_DIR_DEFAULT ")\n"
	    "  --auth-file FILE    the operator's registry credentials (auth.json; default\n"
	    "                      $REGISTRY_AUTH_FILE, /run/containers/0/auth.json, root's\n"
	    "                      ~/.docker/config.json)\n"
	    "  --pull-stall-timeout SECONDS\n"
	    "                      a pull's transfer that moves no byte this long fails\n"
	    "                      (default %u)\n"
	    "  --log-format FORMAT text (the default) or json: one JSON object per line\n"
	    "                      (time, level, program, pid, message)\n"
	    "  --debug             log debug messages\n"
	    "  --version           print the version and the cgroup backend\n"
	    "  --help              this text\n",
	    CELLD_DEFAULT_PENDING_MAX, CELLD_DEFAULT_PENDING_PER_IP, CELLD_DEFAULT_KEYLESS_PER_IP,
	    CELLD_DEFAULT_HEAD_TIMEOUT_S, CELLD_DEFAULT_PROXY_MAX, CELL_LIBEXEC_DIR, CELL_DATA_DIR,
	    CELL_DATA_DIR, CELLD_DEFAULT_NFLOG_GROUP, PULL_STALL_DEFAULT_S);
}

/* optarg as a whole number from 1 to max. */
static int uint_flag(const char *name, unsigned max, unsigned *out)
{
	int64_t v;
	if (parse_int64(optarg, 1, max, &v) < 0) {
		fprintf(stderr, "celld: %s %s: expected a whole number from 1 to %u\n", name,
			optarg, max);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

/* --nflog-group: 0 (no packet log) to 65535. */
static int nflog_group_flag(const char *arg)
{
	int64_t v;
	if (parse_int64(arg, 0, 65535, &v) < 0) {
		fprintf(stderr,
			"celld: --nflog-group %s: expected a whole number from 0 to 65535\n", arg);
		return -EINVAL;
	}
	celld.nflog_group = (unsigned)v;
	return 0;
}

static int network_default_flag(const char *mode)
{
	if (strcmp(mode, "none") && strcmp(mode, "public") && strcmp(mode, "limited")) {
		fprintf(stderr, "celld: --network-default %s: expected none, public or limited\n",
			mode);
		return -EINVAL;
	}
	snprintf(celld.network_default, sizeof(celld.network_default), "%s", mode);
	return 0;
}

static int log_format_flag(const char *format, bool *json)
{
	if (strcmp(format, "text") && strcmp(format, "json")) {
		fprintf(stderr, "celld: --log-format %s: expected text or json\n", format);
		return -EINVAL;
	}
	*json = !strcmp(format, "json");
	return 0;
}

/* A host-name routing domain (--preview-domain, --e2b-domain) into *out: a DNS name of at
 * least two labels, letters, digits and '-', kept in lowercase. */
static int domain_flag(const char *flag, const char *arg, char **out)
{
	size_t n = strlen(arg);
	bool ok =
	    n >= 3 && n <= 200 && strchr(arg, '.') && arg[0] != '.' && arg[n - 1] != '.' &&
	    !strstr(arg, "..") && arg[0] != '-' &&
	    strspn(arg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") == n;
	if (!ok) {
		fprintf(stderr,
			"celld: --%s %s: expected a DNS name such as "
			"sandbox.example.com (letters, digits, '-' and '.')\n",
			flag, arg);
		return -EINVAL;
	}
	free(*out);
	*out = strdup(arg);
	if (!*out)
		return -ENOMEM;
	for (char *p = *out; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	return 0;
}

static int parse_flags(int argc, char **argv, struct flags *f)
{
	static const struct option opts[] = {
	    {"state-dir", required_argument, NULL, 's'},
	    {"images", required_argument, NULL, 'i'},
	    {"socket", required_argument, NULL, 'S'},
	    {"listen", required_argument, NULL, 'l'},
	    {"no-tcp", no_argument, NULL, 'n'},
	    {"e2b-listen", required_argument, NULL, 'E'},
	    {"tcp-pending-max", required_argument, NULL, 'm'},
	    {"tcp-pending-per-ip", required_argument, NULL, 'p'},
	    {"tcp-head-timeout", required_argument, NULL, 't'},
	    {"tcp-keyless-per-ip", required_argument, NULL, 'L'},
	    {"proxy-max-connections", required_argument, NULL, 'X'},
	    {"api-key-file", required_argument, NULL, 'k'},
	    {"api-keys-file", required_argument, NULL, 'K'},
	    {"init", required_argument, NULL, 'I'},
	    {"uid-ranges-dir", required_argument, NULL, 'U'},
	    {"policies", required_argument, NULL, 'P'},
	    {"interpreter", required_argument, NULL, 'J'},
	    {"output-budget", required_argument, NULL, 'O'},
	    {"fd-limit", required_argument, NULL, 'F'},
	    {"audit-max-bytes", required_argument, NULL, 'Y'},
	    {"audit-security-max-bytes", required_argument, NULL, 'y'},
	    {"volume-root", required_argument, NULL, 'R'},
	    {"volume-shared-writers", no_argument, NULL, 'W'},
	    {"network-default", required_argument, NULL, 'N'},
	    {"subnet", required_argument, NULL, 'A'},
	    {"dns-upstream", required_argument, NULL, 'D'},
	    {"nflog-group", required_argument, NULL, 'G'},
	    {"preview-domain", required_argument, NULL, 'H'},
	    {"e2b-domain", required_argument, NULL, 'B'},
	    {"registries-conf", required_argument, NULL, 'r'},
	    {"registries-conf-dir", required_argument, NULL, 'Q'},
	    {"registry-certs-dir", required_argument, NULL, 'C'},
	    {"auth-file", required_argument, NULL, 'a'},
	    {"pull-stall-timeout", required_argument, NULL, 'T'},
	    {"log-format", required_argument, NULL, 'f'},
	    {"debug", no_argument, NULL, 'd'},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c, r = config_set_subnet(CELLD_DEFAULT_SUBNET);
	while (r == 0 && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			f->state_dir = optarg;
			break;
		case 'i':
			f->images = optarg;
			break;
		case 'S':
			f->socket = optarg;
			break;
		case 'l':
			f->listen = optarg;
			break;
		case 'n':
			f->no_tcp = true;
			break;
		case 'E':
			f->e2b_listen = optarg;
			break;
		case 'm':
			r = uint_flag("--tcp-pending-max", 65536, &celld.tcp_pending_max);
			break;
		case 'p':
			r = uint_flag("--tcp-pending-per-ip", 65536, &celld.tcp_pending_per_ip);
			break;
		case 't':
			r = uint_flag("--tcp-head-timeout", 300, &celld.tcp_head_timeout_s);
			break;
		case 'L':
			r = uint_flag("--tcp-keyless-per-ip", 65536, &celld.tcp_keyless_per_ip);
			break;
		case 'X':
			r = uint_flag("--proxy-max-connections", 65536, &celld.proxy_max);
			break;
		case 'k':
			f->key_file = optarg;
			break;
		case 'K':
			f->keys_file = optarg;
			break;
		case 'I':
			f->init = optarg;
			break;
		case 'U':
			f->uid_ranges = optarg;
			break;
		case 'P':
			f->policies = optarg;
			break;
		case 'J':
			f->interpreter = optarg;
			break;
		case 'O':
			f->output_budget = optarg;
			break;
		case 'F':
			f->fd_limit = optarg;
			break;
		case 'Y':
			f->audit_max = optarg;
			break;
		case 'y':
			f->audit_security_max = optarg;
			break;
		case 'R':
			r = config_add_volume_root(optarg);
			break;
		case 'W':
			celld.volume_shared_writers = true;
			break;
		case 'N':
			r = network_default_flag(optarg);
			break;
		case 'A':
			r = config_set_subnet(optarg);
			break;
		case 'D':
			celld.dns_upstream = optarg;
			break;
		case 'G':
			r = nflog_group_flag(optarg);
			break;
		case 'H':
			r = domain_flag("preview-domain", optarg, &celld.preview_domain);
			break;
		case 'B':
			r = domain_flag("e2b-domain", optarg, &celld.e2b_domain);
			break;
		case 'r':
			f->pull.registries_conf = optarg;
			break;
		case 'Q':
			f->pull.registries_conf_dir = optarg;
			break;
		case 'C':
			f->pull.certs_dir = optarg;
			break;
		case 'a':
			f->pull.auth_file = optarg;
			break;
		case 'T':
			r = uint_flag("--pull-stall-timeout", 3600, &f->pull.stall_timeout_s);
			break;
		case 'f':
			r = log_format_flag(optarg, &f->log_json);
			break;
		case 'd':
			f->debug = true;
			break;
		case 'V':
			f->version = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (r < 0)
		return r;
	if (optind < argc) {
		fprintf(stderr, "celld: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	uint64_t budget;
	if (f->output_budget &&
	    (cell_parse_bytes(f->output_budget, &budget) < 0 || budget < CMD_LOG_MAX)) {
		fprintf(stderr,
			"celld: --output-budget %s: expected a size of at least 8Mi (\"512Mi\", "
			"\"2Gi\")\n",
			f->output_budget);
		return -EINVAL;
	}
	if (f->output_budget)
		cmd_output_budget_set(budget);
	if (f->audit_max && (cell_parse_bytes(f->audit_max, &audit_max_bytes) < 0 ||
			     audit_max_bytes < AUDIT_MAX_MIN)) {
		fprintf(stderr,
			"celld: --audit-max-bytes %s: expected a size of at least 4Ki (\"16Mi\", "
			"\"1Gi\")\n",
			f->audit_max);
		return -EINVAL;
	}
	if (f->audit_security_max &&
	    (cell_parse_bytes(f->audit_security_max, &audit_security_max_bytes) < 0 ||
	     audit_security_max_bytes < AUDIT_MAX_MIN)) {
		fprintf(stderr,
			"celld: --audit-security-max-bytes %s: expected a size of at least 4Ki "
			"(\"16Mi\", \"1Gi\")\n",
			f->audit_security_max);
		return -EINVAL;
	}
	if (f->no_tcp && f->listen) {
		fprintf(stderr, "celld: --listen and --no-tcp exclude each other\n");
		return -EINVAL;
	}
	if (celld.tcp_pending_per_ip > celld.tcp_pending_max)
		celld.tcp_pending_per_ip = celld.tcp_pending_max;
	return 0;
}

static int print_version(void)
{
	struct cell_error err = {0};
	const struct cell_cgroup_ops *cg = cell_cgroup_detect(&err);
	printf("celld %s\ncgroup: %s\n", CELL_VERSION, cg ? cg->name : "unavailable");
	if (!cg)
		fprintf(stderr, "celld: %s\n", err.msg);
	return 0;
}

/* ---- kernel ---- */

/* Idmapped mounts as overlayfs lower layers (how the image appears owned by each sandbox's
 * root) arrived in Linux 5.19; on an older kernel every create would fail deep in the
 * runtime with EINVAL, so say it once, plainly, at start. */
static int check_kernel(struct cell_error *err)
{
	struct utsname u;
	unsigned major = 0, minor = 0;
	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return 0; /* unknown: let the first create tell */
	if (major > 5 || (major == 5 && minor >= 19))
		return 0;
	return cell_err(err, ENOTSUP,
			"Linux %s is too old: cell needs 5.19 or later (idmapped overlayfs lower "
			"layers)",
			u.release);
}

/* With fs.suid_dumpable other than 0, a process that changes its ids stays dumpable: ptrace
 * and /proc/<pid>/mem then reach it from its own uid. cell-init keeps PID 1 out of that
 * (no child of it shares its memory across an id change), but every setuid program in a
 * sandbox, and on the host, is exposed; say so once, at start. */
static void check_suid_dumpable(void)
{
	char *text = NULL;
	size_t len = 0;
	struct cell_error err = {0};
	if (cell_read_file_at(AT_FDCWD, "/proc/sys/fs/suid_dumpable", 64, &text, &len, &err) < 0)
		return;
	while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
		text[--len] = '\0';
	if (strcmp(text, "0"))
		log_warn(
		    "fs.suid_dumpable is %s: processes that change ids stay dumpable (ptrace, "
		    "/proc/<pid>/mem); set fs.suid_dumpable=0 (sysctl -w fs.suid_dumpable=0, and "
		    "in /etc/sysctl.d to keep it)",
		    text);
	free(text);
}

/* ---- directories ---- */

#define STATE_LOCK_WAIT_MS 5000

/* One celld per state dir: two would adopt, reap and delete each other's sandboxes. The
 * flock lives as long as this process. A predecessor killed a moment ago can still hold it
 * while its threads finish exiting (the fd table goes with the last thread), so a restart
 * waits for it a bounded while before refusing. */
static int lock_state_dir(int state_fd, struct cell_error *err)
{
	int fd = openat(state_fd, "celld.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return cell_err(err, errno, "opening %s/celld.lock", celld.state_dir);
	for (int waited = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; waited += 10) {
		if (errno != EWOULDBLOCK || waited >= STATE_LOCK_WAIT_MS) {
			int e = errno;
			char pid[32] = "";
			ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
			pid[n > 0 ? n : 0] = '\0';
			pid[strcspn(pid, "\n")] = '\0';
			close(fd);
			if (e != EWOULDBLOCK)
				return cell_err(err, e, "locking %s/celld.lock", celld.state_dir);
			return cell_err(err, EBUSY, "another celld (pid %s) runs on state dir %s",
					pid[0] ? pid : "unknown", celld.state_dir);
		}
		usleep(10000);
	}
	char line[32];
	int len = snprintf(line, sizeof(line), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, line, len, 0) != len)
		log_warn("writing the pid into %s/celld.lock: %s", celld.state_dir,
			 strerror(errno));
	return 0; /* fd deliberately kept open: the lock is held until celld exits */
}

/* <state>/audit/audit.log (audit.h), before anything it records can happen. */
static int open_audit(struct cell_error *err)
{
	_cleanup_free_ char *dir = NULL;
	if (asprintf(&dir, "%s/audit", celld.state_dir) < 0)
		return cell_err(err, ENOMEM, "audit dir");
	return audit_open(dir, audit_max_bytes, audit_security_max_bytes, err);
}

static int setup_dirs(const struct flags *f, struct cell_error *err)
{
	const char *state = f->state_dir ? f->state_dir : CELL_DEFAULT_STATE_DIR;
	if (state[0] != '/')
		return cell_err(err, EINVAL, "--state-dir %s must be absolute", state);
	int r = cell_mkdir_p(state, 0711, err);
	if (r < 0)
		return r;
	celld.state_dir = realpath(state, NULL);
	if (!celld.state_dir)
		return cell_err(err, errno, "resolving %s", state);
	/* 0711: others may traverse (the kernel resolves overlay paths below), not list. */
	if (chmod(celld.state_dir, 0711) < 0)
		return cell_err(err, errno, "chmod %s", celld.state_dir);
	_cleanup_close_ int sfd = open(celld.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0)
		return cell_err(err, errno, "opening %s", celld.state_dir);
	if (mkdirat(sfd, "sandboxes", 0711) < 0 && errno != EEXIST)
		return cell_err(err, errno, "creating %s/sandboxes", celld.state_dir);
	if ((r = lock_state_dir(sfd, err)) < 0)
		return r;
	celld.sandboxes_fd =
	    openat(sfd, "sandboxes", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (celld.sandboxes_fd < 0)
		return cell_err(err, errno, "opening %s/sandboxes", celld.state_dir);

	_cleanup_free_ char *images = NULL;
	if (f->images)
		images = strdup(f->images);
	else if (asprintf(&images, "%s/images", celld.state_dir) < 0)
		images = NULL;
	if (!images)
		return cell_err(err, ENOMEM, "images dir");
	if (images[0] != '/')
		return cell_err(err, EINVAL, "--images %s must be absolute", images);
	if ((r = cell_mkdir_p(images, 0755, err)) < 0)
		return r;
	celld.images_dir = realpath(images, NULL);
	if (!celld.images_dir)
		return cell_err(err, errno, "resolving %s", images);

	/* The cgroup instance dir for the start-up log: the runtime's naming rule (one per state
	 * dir, so several celld side by side never collide), minus the sandbox part. */
	char *prefix = celld.cgroup_prefix;
	if (cell_cgroup_name(celld.state_dir, "0", prefix, sizeof(celld.cgroup_prefix)) < 0)
		return cell_err(err, ENAMETOOLONG, "cgroup name for %s", celld.state_dir);
	*strrchr(prefix, '/') = '\0';
	celld.socket_path = strdup(f->socket ? f->socket : DEFAULT_SOCKET);
	if (!celld.socket_path)
		return cell_err(err, ENOMEM, "socket path");
	if (celld.socket_path[0] != '/')
		return cell_err(err, EINVAL, "--socket %s must be absolute", celld.socket_path);
	return 0;
}

/* ---- API key ---- */

static int generate_key(const char *path, struct cell_error *err)
{
	unsigned char raw[32];
	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return cell_err(err, EIO, "generating an API key");
	/* "e2b_" and lowercase hex: the shape E2B's Python SDK insists on (^e2b_[0-9a-f]+$),
	 * so that one key serves both APIs' clients. */
	char key[4 + 2 * sizeof(raw) + 1] = "e2b_";
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(key + 4 + 2 * i, 3, "%02x", raw[i]);
	_cleanup_free_ char *dir = strdup(path);
	if (!dir)
		return cell_err(err, ENOMEM, "API key");
	char *slash = strrchr(dir, '/');
	const char *name = slash ? slash + 1 : dir;
	if (slash == dir)
		dir[1] = '\0';
	else if (slash)
		*slash = '\0';
	_cleanup_close_ int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return cell_err(err, errno, "opening the directory of %s", path);
	char line[sizeof(key) + 1];
	snprintf(line, sizeof(line), "%s\n", key);
	int r = cell_write_file_atomic(dfd, slash == dir ? path + 1 : name, line, strlen(line),
				       0600, err);
	if (r < 0)
		return r;
	celld.api_key = strdup(key);
	if (!celld.api_key)
		return cell_err(err, ENOMEM, "API key");
	if (keys_add(KEYS_DEFAULT, key, err) < 0)
		return -EINVAL;
	printf("API key: %s (stored in %s)\n", key, path);
	fflush(stdout);
	return 0;
}

static int load_key(const char *key_file, struct cell_error *err)
{
	const char *env = getenv("CELL_API_KEY");
	if (env && env[0]) {
		celld.api_key = strdup(env);
		if (!celld.api_key)
			return cell_err(err, ENOMEM, "API key");
		return keys_add(KEYS_DEFAULT, env, err);
	}
	_cleanup_free_ char *def = NULL;
	if (!key_file) {
		if (asprintf(&def, "%s/api-key", celld.state_dir) < 0)
			return cell_err(err, ENOMEM, "API key path");
		key_file = def;
	}
	char *text = NULL;
	size_t len = 0;
	struct cell_error rerr = {0};
	int r = cell_read_file_at(AT_FDCWD, key_file, 4096, &text, &len, &rerr);
	if (r == -ENOENT)
		return generate_key(key_file, err);
	if (r < 0)
		return cell_err(err, -r, "reading API key %s: %s", key_file, rerr.msg);
	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
		text[--len] = '\0';
	if (!len || strlen(text) != len) {
		free(text);
		return cell_err(err, EINVAL, "API key file %s is empty or malformed", key_file);
	}
	struct stat st;
	if (stat(key_file, &st) == 0 && (st.st_mode & 077))
		log_warn("API key file %s is readable by others (mode %o)", key_file,
			 st.st_mode & 0777);
	celld.api_key = text;
	if (keys_add(KEYS_DEFAULT, text, err) < 0)
		return -EINVAL;
	log_info("TCP API key: the one stored in %s (header OPEN-SANDBOX-API-KEY%s)", key_file,
		 celld.e2b_listen ? "; X-API-Key on the E2B listener" : "");
	return 0;
}

/* The keys file (keys.h): --api-keys-file, else <state>/api-keys when there is one. */
static int load_tenant_keys(const char *keys_file, struct cell_error *err)
{
	_cleanup_free_ char *def = NULL;
	if (!keys_file) {
		if (asprintf(&def, "%s/api-keys", celld.state_dir) < 0)
			return cell_err(err, ENOMEM, "keys file path");
		keys_file = def;
	} else if (access(keys_file, F_OK) < 0) {
		return cell_err(err, errno, "keys file %s", keys_file);
	}
	int r = keys_load_file(keys_file, err);
	if (r == 0 && keys_tenancy())
		log_info("tenancy: %zu API keys; each sees only what it made", keys_count());
	return r;
}

/* ---- the preview secret ---- */

/* <state>/preview-secret: 32 random bytes, root's alone (0600), made on the first start and
 * kept, so preview tokens (preview.h) survive a restart; removing it (and restarting)
 * revokes every token. */
static int load_preview_secret(struct cell_error *err)
{
	_cleanup_close_ int sfd = open(celld.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0)
		return cell_err(err, errno, "opening %s", celld.state_dir);
	unsigned char s[PREVIEW_SECRET_LEN];
	char *text = NULL;
	size_t len = 0;
	struct cell_error rerr = {0};
	int r = cell_read_file_at(sfd, "preview-secret", 4096, &text, &len, &rerr);
	if (r == -ENOENT) {
		if (RAND_bytes(s, sizeof(s)) != 1)
			return cell_err(err, EIO, "generating the preview secret");
		r = cell_write_file_atomic(sfd, "preview-secret", (const char *)s, sizeof(s), 0600,
					   err);
		if (r < 0)
			return cell_err_wrap(err, "storing the preview secret: ");
		log_info("preview secret: made %s/preview-secret", celld.state_dir);
	} else if (r < 0) {
		return cell_err(err, -r, "reading %s/preview-secret: %s", celld.state_dir,
				rerr.msg);
	} else {
		bool ok = len == sizeof(s);
		if (ok)
			memcpy(s, text, sizeof(s));
		OPENSSL_cleanse(text, len);
		free(text);
		if (!ok)
			return cell_err(err, EINVAL,
					"%s/preview-secret holds %zu bytes, not %zu: remove it to "
					"make a new one (every preview token changes)",
					celld.state_dir, len, sizeof(s));
		struct stat st;
		if (fstatat(sfd, "preview-secret", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    (st.st_mode & 077))
			log_warn("%s/preview-secret is readable by others (mode %o)",
				 celld.state_dir, st.st_mode & 0777);
	}
	preview_secret_set(s);
	OPENSSL_cleanse(s, sizeof(s));
	return 0;
}

/* ---- files celld loads at start ---- */

/* The path of a file celld loads: flag when given, else <dir of celld>/beside when it is
 * there (a build dir, or the source tree next to it), else the installed one. */
static int load_init(const char *flag, struct cell_error *err)
{
	char path[PATH_MAX];
	cell_pick_path(path, sizeof(path), flag, "cell-init", X_OK, CELL_LIBEXEC_DIR "/cell-init");
	int fd = cell_init_memfd(path, err);
	if (fd < 0)
		return cell_err_wrap(err, "loading cell-init: ");
	celld.init_fd = fd;
	log_info("cell-init: %s", path);
	return 0;
}

/* The policies: --policies, else the source tree's policies/ when celld runs from its
 * build dir (<src>/build/celld), else the installed copy. */
static int open_policies(const char *flag, struct cell_error *err)
{
	char path[PATH_MAX];
	cell_pick_path(path, sizeof(path), flag, "../policies", R_OK | X_OK,
		       CELL_DATA_DIR "/policies");
	celld.policies_dir = realpath(path, NULL);
	if (!celld.policies_dir)
		return cell_err(err, errno, "policies directory %s", path);
	celld.policies_fd = open(celld.policies_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (celld.policies_fd < 0)
		return cell_err(err, errno, "opening policies directory %s", celld.policies_dir);
	log_info("policies: %s", celld.policies_dir);
	return 0;
}

/* The code-interpreter service: --interpreter, else the source tree's when celld runs from
 * its build dir, else the installed copy. */
static int find_interpreter(const char *flag, struct cell_error *err)
{
	char path[PATH_MAX];
	cell_pick_path(path, sizeof(path), flag, "../src/interpreter", R_OK | X_OK,
		       CELL_DATA_DIR "/interpreter");
	return interp_service_init(path, err);
}

/* ---- process setup ---- */

/* Every sandbox holds a few descriptors here (its pidfd, its directory, its relay while a
 * command runs) and every connection a socket: 10,000 sandboxes need tens of thousands.
 * Root may raise its hard limit up to fs.nr_open, so celld takes that (a plain `sudo
 * celld` starts with 1024:524288 or less), else its hard limit; --fd-limit sets it
 * instead. It says what it got. */
static int set_nofile(const char *flag)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 0;
	_cleanup_free_ char *text = NULL;
	unsigned long long nr_open = 0, n = 0;
	if (cell_read_file_at(AT_FDCWD, "/proc/sys/fs/nr_open", 64, &text, NULL, NULL) == 0)
		nr_open = strtoull(text, NULL, 10);
	char *end = NULL;
	if (flag && (n = strtoull(flag, &end, 10), flag[0] < '0' || flag[0] > '9' || *end ||
						       n < 64 || (nr_open && n > nr_open))) {
		fprintf(stderr, "celld: --fd-limit %s: expected a number from 64 to %llu\n", flag,
			nr_open);
		return -1;
	}
	struct rlimit want = rl;
	if (flag)
		want.rlim_max = n;
	else if (nr_open > rl.rlim_max && rl.rlim_max != RLIM_INFINITY)
		want.rlim_max = nr_open;
	want.rlim_cur = want.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &want) < 0) {
		if (flag) {
			fprintf(stderr, "celld: --fd-limit %s: %s\n", flag, strerror(errno));
			return -1;
		}
		want.rlim_cur = want.rlim_max = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &want);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		log_info("file descriptors: up to %llu (fs.nr_open %llu)",
			 (unsigned long long)rl.rlim_cur, nr_open);
	return 0;
}

static void *shutdown_watchdog(void *arg)
{
	(void)arg;
	sleep(SHUTDOWN_GRACE_S);
	log_warn("connections did not finish within %d s; exiting", SHUTDOWN_GRACE_S);
	_exit(0);
}

static int run(const struct flags *f)
{
	struct cell_error err = {0};
	if (setup_dirs(f, &err) < 0 || uidrange_init(f->uid_ranges, &err) < 0 ||
	    volstore_init(celld.state_dir, &err) < 0 || snapshots_init(&err) < 0 ||
	    store_init(celld.images_dir, &err) < 0 ||
	    image_pull_init(celld.images_dir, &f->pull, &err) < 0 || load_preview_secret(&err) < 0)
		goto fail;
	if (check_kernel(&err) < 0)
		goto fail;
	check_suid_dumpable();
	celld.cgroup = cell_cgroup_detect(&err);
	if (!celld.cgroup)
		goto fail;
	if (!f->no_tcp && !(celld.listen = strdup(f->listen ? f->listen : DEFAULT_LISTEN)))
		goto fail_nomem;
	if (f->e2b_listen && !(celld.e2b_listen = strdup(f->e2b_listen)))
		goto fail_nomem;
	if ((celld.listen || celld.e2b_listen) &&
	    (load_key(f->key_file, &err) < 0 || load_tenant_keys(f->keys_file, &err) < 0))
		goto fail;
	if (load_init(f->init, &err) < 0 || open_policies(f->policies, &err) < 0 ||
	    find_interpreter(f->interpreter, &err) < 0 || limits_load(&err) < 0 ||
	    admission_load(&err) < 0 || timer_policy_load(&err) < 0 ||
	    audit_policy_load(&err) < 0 || image_policy_load(&err) < 0)
		goto fail;
	snapshots_charge();
	if (seccomp_policies_load(&err) < 0 || seccomp_log_start(&err) < 0 ||
	    network_load_policies(&err) < 0)
		goto fail;
	if (celld.e2b_listen && e2b_templates_load(&err) < 0)
		goto fail;
	log_info("celld %s: state %s, images %s, cgroup %s (%s/...), uid ranges %s", CELL_VERSION,
		 celld.state_dir, celld.images_dir, celld.cgroup->name, celld.cgroup_prefix,
		 uidrange_dir());
	if (open_audit(&err) < 0)
		goto fail;
	command_set_sandbox_end(lifecycle_delete_after_command);
	if (watch_start(lifecycle_init_died, &err) < 0 || timers_start(&err) < 0)
		goto fail;
	lifecycle_adopt_all();
	if (server_start(&err) < 0)
		goto fail;

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	for (;;) {
		int sig = sigwaitinfo(&set, NULL);
		if (sig == SIGTERM || sig == SIGINT)
			break;
		if (sig == SIGHUP)
			log_info("SIGHUP: nothing to reload");
	}
	/* Sandboxes keep running: the next celld adopts them. */
	log_info("shutting down; sandboxes keep running");
	pthread_t wd;
	if (pthread_create(&wd, NULL, shutdown_watchdog, NULL) == 0)
		pthread_detach(wd);
	server_stop();
	network_shutdown();
	/* What the audit budget dropped is told before celld goes. */
	audit_flush_drops();
	unlink(celld.socket_path);
	return 0;
fail_nomem:
	cell_err(&err, ENOMEM, "out of memory");
fail:
	log_error("%s", err.msg);
	return 1;
}

int main(int argc, char **argv)
{
	struct flags f = {0};
	cell_log_set_prefix("celld");
	if (parse_flags(argc, argv, &f) < 0)
		return 2;
	if (f.version)
		return print_version();
	if (f.debug)
		cell_log_set_level(CELL_LOG_DEBUG);
	cell_log_set_json(f.log_json);
	if (geteuid() != 0) {
		fprintf(stderr, "celld: must run as root\n");
		return 1;
	}
	umask(022);
	if (set_nofile(f.fd_limit) < 0)
		return 2;
	/* Signals are taken synchronously by the main thread; every thread started from here
	 * on inherits the block. SIGCHLD keeps its default: init is reaped by pidfd. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	return run(&f);
}
