/* cell-oci kill [--all] ID [SIGNAL]: a signal to the container's init (cell-init, which
 * passes it to the process), or with --all to every process of its cgroup. SIGNAL is a
 * number or a name with or without SIG (default SIGTERM), as runc takes it. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cell/cgroup.h"
#include "cell/cleanup.h"
#include "container.h"
#include "status.h"

static const struct {
	const char *name;
	int sig;
} signals[] = {
    {"HUP", SIGHUP},	   {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},
    {"TRAP", SIGTRAP},	   {"ABRT", SIGABRT}, {"BUS", SIGBUS},	   {"FPE", SIGFPE},
    {"KILL", SIGKILL},	   {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},	   {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
    {"CONT", SIGCONT},	   {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU},	   {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
    {"PWR", SIGPWR},	   {"SYS", SIGSYS},
};

static int parse_signal(const char *s)
{
	char *end;
	long n = strtol(s, &end, 10);
	if (s[0] >= '0' && s[0] <= '9')
		return *end || n <= 0 || n >= NSIG ? -1 : (int)n;
	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		if (!strcmp(s, signals[i].name))
			return signals[i].sig;
	return -1;
}

/* The init by pidfd, after its start time said it is still the one create made. */
static int signal_init(const struct oci_state *st, int sig, struct cell_error *err)
{
	int pidfd = (int)syscall(SYS_pidfd_open, st->pid, 0);
	if (pidfd < 0 || !oci_init_alive(st)) {
		if (pidfd >= 0)
			close(pidfd);
		return cell_err_msg(err, ESRCH, "container %s is not running", st->id);
	}
	int r = (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
	int e = errno;
	close(pidfd);
	return r < 0 ? cell_err(err, e, "signalling container %s", st->id) : 0;
}

static int signal_all(const struct oci_state *st, int sig, struct cell_error *err)
{
	const struct cell_cgroup_ops *cg = oci_cgroups(err);
	if (!cg)
		return -EIO;
	_cleanup_free_ pid_t *pids = NULL;
	size_t n = 0;
	int r = cg->list_pids(st->cgroup, &pids, &n, err);
	for (size_t i = 0; r == 0 && i < n; i++)
		kill(pids[i], sig);
	return r;
}

int oci_cmd_kill(const struct oci_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {{"all", no_argument, NULL, 'a'}, {NULL, 0, NULL, 0}};
	struct cell_error err = {0};
	bool all = false;
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "+a", opts, NULL)) != -1;)
		if (c == 'a')
			all = true;
		else
			return cell_err_msg(&err, EINVAL, "kill: [--all] ID [SIGNAL]"),
			       oci_fail(cli, &err);
	if (optind >= argc || argc - optind > 2)
		return cell_err_msg(&err, EINVAL, "kill: [--all] ID [SIGNAL]"), oci_fail(cli, &err);
	int sig = argc - optind == 2 ? parse_signal(argv[optind + 1]) : SIGTERM;
	if (sig < 0)
		return cell_err_msg(&err, EINVAL, "kill: unknown signal '%s'", argv[optind + 1]),
		       oci_fail(cli, &err);
	struct oci_container c;
	int r = oci_container_load(cli, argv[optind], &c, &err);
	if (r == 0)
		r = all ? signal_all(&c.st, sig, &err) : signal_init(&c.st, sig, &err);
	oci_container_close(&c);
	return r < 0 ? oci_fail(cli, &err) : 0;
}
