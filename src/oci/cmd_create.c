/* cell-oci create [--bundle B] [--pid-file P] [--console-socket S] [--no-pivot]
 * [--no-new-keyring] ID: the container made, its process created and held until start.
 *
 * In order: the bundle read and translated (translate.c) → the container's directory
 * under --root, locked → a uid range → the namespaces to join entered (this process is
 * single-threaded) → cell_spawn with the bundle's root and cell-init --oci, which keeps
 * our stdio (the engine's) → OCI_CREATE over the relay (the terminal's master to the
 * console socket) → the pid file → state.json. A failure undoes what exists, newest first:
 * the container's init (its pid namespace with it), its cgroup, the range, the directory.
 * cell-init is our child: when we exit it is the engine shim's, which reaps it. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cell/cgroup.h"
#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cell/proto.h"
#include "cell/runtime.h"
#include "cell/seccomp.h"
#include "cli.h"
#include "container.h"
#include "hooks.h"
#include "ranges.h"
#include "relay.h"
#include "rootfs.h"
#include "spec.h"
#include "state.h"
#include "status.h"
#include "translate.h"

struct create_args {
	const char *bundle, *pid_file, *console_socket, *id;
};

struct creation {
	const struct oci_cli *cli;
	struct create_args a;
	char bundle[PATH_MAX], root_dir[PATH_MAX], dir[PATH_MAX];
	struct oci_spec *spec;
	struct oci_plan plan;
	struct oci_rootfs rootfs;
	int rootfd, dirfd, init_fd;
	int64_t uid_base;
	const struct cell_cgroup_ops *cg;
	struct cell_seccomp_prog seccomp;
	struct cell_spawn_result spawned;
	bool spawned_ok;
};

static int parse_args(int argc, char **argv, struct create_args *a, struct cell_error *err)
{
	static const struct option opts[] = {
	    {"bundle", required_argument, NULL, 'b'},
	    {"pid-file", required_argument, NULL, 'p'},
	    {"console-socket", required_argument, NULL, 'c'},
	    {"no-pivot", no_argument, NULL, 'n'},
	    {"no-new-keyring", no_argument, NULL, 'k'},
	    {"preserve-fds", required_argument, NULL, 'f'},
	    {NULL, 0, NULL, 0},
	};
	*a = (struct create_args){.bundle = "."};
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "+b:", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			a->bundle = optarg;
			break;
		case 'p':
			a->pid_file = optarg;
			break;
		case 'c':
			a->console_socket = optarg;
			break;
		case 'n': /* cell always pivots: the old root is detached, never reachable */
		case 'k': /* the container shares the session keyring of nobody: nothing to do */
			break;
		case 'f':
			if (strcmp(optarg, "0"))
				return cell_err_msg(err, EINVAL,
						    "--preserve-fds: only 0 is supported");
			break;
		default:
			return cell_err_msg(err, EINVAL, "create: unknown option");
		}
	}
	if (optind + 1 != argc)
		return cell_err_msg(err, EINVAL, "create: expected one container id");
	a->id = argv[optind];
	return 0;
}

static int read_spec(struct creation *cr, struct cell_error *err)
{
	if (!realpath(cr->a.bundle, cr->bundle))
		return cell_err(err, errno, "bundle %s", cr->a.bundle);
	int r = oci_bundle_spec(cr->bundle, &cr->spec, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < cr->spec->n_warnings; i++)
		log_warn("%s", cr->spec->warnings[i]);
	if (cr->spec->process.apparmor_profile || cr->spec->process.selinux_label)
		log_warn("process.apparmorProfile and selinuxLabel are not applied: cell's own "
			 "confinement (namespaces, seccomp, capabilities) is the container's");
	if (!cr->spec->has_process)
		return cell_err_msg(err, EINVAL, "%s/config.json: no process to run", cr->bundle);
	const char *root = cr->spec->root_path;
	int n = root[0] == '/'
		    ? snprintf(cr->root_dir, sizeof(cr->root_dir), "%s", root)
		    : snprintf(cr->root_dir, sizeof(cr->root_dir), "%s/%s", cr->bundle, root);
	if (n < 0 || (size_t)n >= sizeof(cr->root_dir))
		return cell_err(err, ENAMETOOLONG, "root.path");
	int r2 = oci_hooks_check(cr->spec, err);
	if (r2 == 0)
		r2 = oci_rootfs_read(cr->root_dir, &cr->rootfs, err);
	if (r2 == 0 && cr->rootfs.overlay && cr->spec->root_readonly)
		r2 = cell_err_msg(err, ENOTSUP,
				  "root.readonly on an overlay snapshot is not "
				  "supported yet");
	return r2 < 0 ? r2 : oci_plan_make(cr->spec, cr->a.id, &cr->plan, err);
}

static int load_runtime_parts(struct creation *cr, struct cell_error *err)
{
	char path[PATH_MAX];
	cell_pick_path(path, sizeof(path), cr->cli->init, "cell-init", X_OK,
		       CELL_LIBEXEC_DIR "/cell-init");
	cr->init_fd = cell_init_memfd(path, err);
	if (cr->init_fd < 0)
		return cell_err_wrap(err, "cell-init %s: ", path);
	char dir[PATH_MAX], file[PATH_MAX + 32];
	cell_pick_path(dir, sizeof(dir), cr->cli->policies, "../policies", R_OK | X_OK,
		       CELL_DATA_DIR "/policies");
	snprintf(file, sizeof(file), "%s/seccomp/default.json", dir);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	struct cell_seccomp_profile *prof = NULL;
	int r = cell_read_file_at(AT_FDCWD, file, CELL_SECCOMP_FILE_MAX, &text, &len, err);
	if (r == 0)
		r = cell_seccomp_profile_parse(file, "default", text, len, &prof, err);
	if (r == 0)
		r = cell_seccomp_compile(prof, false, &cr->seccomp, err);
	cell_seccomp_profile_free(prof);
	if (r < 0)
		return cell_err_wrap(err, "cell's seccomp profile: ");
	cell_cgroup_no_nesting();
	cr->cg = cell_cgroup_detect(err);
	return cr->cg ? 0 : -EIO;
}

static int join_namespaces(struct creation *cr, struct cell_error *err)
{
	for (int k = 0; k < 3; k++)
		if (cr->plan.join_fds[k] >= 0 &&
		    setns(cr->plan.join_fds[k], cr->plan.join_flags[k]) < 0)
			return cell_err(err, errno, "joining a namespace of the spec");
	return 0;
}

/* Without a hostname in the spec the container is named by its id, as far as a hostname
 * can say it (engines' ids are; else "cell"), never by the host's. */
static const char *hostname_of(const char *id)
{
	size_t len = strlen(id);
	if (!len || len > 63)
		return "cell";
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '-' || *c == '.'))
			return "cell";
	return id;
}

static int spawn(struct creation *cr, struct cell_error *err)
{
	struct cell_spawn_req req = {
	    .id = NULL,
	    .dir = cr->dir,
	    .uid_base = (uint32_t)cr->uid_base,
	    .hostname = cr->spec->hostname ? cr->spec->hostname : hostname_of(cr->a.id),
	    .init_exe_fd = cr->init_fd,
	    .cgroup = cr->cg,
	    .cgroup_rel = cr->plan.cgroup,
	    .volumes = cr->plan.volumes,
	    .n_volumes = cr->plan.n_volumes,
	    .tmpfs = cr->plan.tmpfs,
	    .n_tmpfs = cr->plan.n_tmpfs,
	    .limits = &cr->plan.limits,
	    .seccomp = &cr->seccomp,
	    .root_dir = cr->rootfs.overlay ? NULL : cr->root_dir,
	    .root_readonly = cr->spec->root_readonly,
	    /* An engine's overlay snapshot: made again from its layers (rootfs.h). */
	    .image_rootfs = cr->rootfs.overlay ? cr->rootfs.lowers[0] : NULL,
	    .image_layers = (const char *const *)cr->rootfs.lowers,
	    .n_image_layers = cr->rootfs.n_lowers,
	    .layer_dir = cr->rootfs.layer_dir,
	    .upper_name = cr->rootfs.upper_name,
	    .oci = true,
	    .keep_stdio = !cr->spec->process.terminal,
	    .joined_ns = cr->plan.joined_ns,
	};
	/* The runtime names a sandbox by a cell id; a container's id is the engine's. */
	char sid[64];
	snprintf(sid, sizeof(sid), "%016llx", (unsigned long long)(cr->uid_base >> 16));
	req.id = sid;
	int r = cell_spawn(&req, &cr->spawned, err);
	if (r == 0)
		cr->spawned_ok = true;
	return r;
}

static int create_process(struct creation *cr, struct cell_error *err)
{
	json_t *req = oci_process_request(cr->spec, &cr->spec->process, err);
	if (!req)
		return -err->code;
	_cleanup_close_ int sock = oci_relay_connect(cr->dirfd, cr->a.id, err);
	int master = -1;
	int r =
	    sock < 0 ? sock : oci_relay_call(sock, CELL_FRAME_OCI_CREATE, req, NULL, &master, err);
	json_decref(req);
	if (r == 0 && cr->spec->process.terminal) {
		if (master < 0)
			r = cell_err_msg(err, EPROTO, "cell-init sent no terminal");
		else if (!cr->a.console_socket)
			r = cell_err_msg(err, EINVAL, "process.terminal needs --console-socket");
		else
			r = oci_send_console(cr->a.console_socket, master, err);
	}
	if (master >= 0)
		close(master);
	return r;
}

static int record(struct creation *cr, struct cell_error *err)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct oci_state st = {
	    .bundle = cr->bundle,
	    .rootfs = cr->root_dir,
	    .cgroup = cr->plan.cgroup,
	    .pid = cr->spawned.pid,
	    .starttime = cr->spawned.starttime,
	    .uid_base = (uint32_t)cr->uid_base,
	    .created_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
	    .annotations = cr->spec->annotations,
	    .memory_bytes = cr->plan.limits.memory_bytes,
	    .cpu_millis = cr->plan.limits.cpu_millis,
	    .pids = cr->plan.limits.pids,
	};
	snprintf(st.id, sizeof(st.id), "%s", cr->a.id);
	return oci_state_write(cr->dirfd, &st, err);
}

/* prestart and createRuntime: the container's namespaces exist, its process waits. */
static int run_create_hooks(struct creation *cr, struct cell_error *err)
{
	struct oci_state st;
	int r = oci_state_read(cr->dirfd, &st, err);
	json_t *state = r == 0 ? oci_state_json(&st) : NULL;
	oci_state_clear(&st);
	if (r == 0 && !state)
		r = cell_err(err, ENOMEM, "state");
	if (r == 0)
		r = oci_hooks_run(cr->spec, OCI_HOOK_PRESTART, state, err);
	if (r == 0)
		r = oci_hooks_run(cr->spec, OCI_HOOK_CREATE_RUNTIME, state, err);
	json_decref(state);
	return r;
}

static void undo(struct creation *cr)
{
	if (cr->spawned_ok)
		cell_teardown(cr->spawned.pid, cr->spawned.pidfd, cr->spawned.starttime, cr->cg,
			      cr->plan.cgroup, NULL);
	if (cr->uid_base > 0)
		oci_range_release((uint32_t)cr->uid_base);
	if (cr->dirfd >= 0) {
		oci_container_remove(cr->rootfd, cr->a.id, cr->dirfd, NULL);
		cr->dirfd = -1;
	}
}

static int run(struct creation *cr, int argc, char **argv, struct cell_error *err)
{
	int r = parse_args(argc, argv, &cr->a, err);
	if (r == 0)
		r = read_spec(cr, err);
	if (r == 0)
		r = load_runtime_parts(cr, err);
	if (r == 0 && (cr->rootfd = oci_root_open(cr->cli->root, err)) < 0)
		r = cr->rootfd;
	if (r == 0 && (cr->dirfd = oci_container_make(cr->rootfd, cr->a.id, err)) < 0)
		r = cr->dirfd;
	if (r == 0 && snprintf(cr->dir, sizeof(cr->dir), "%s/%s", cr->cli->root, cr->a.id) >=
			  (int)sizeof(cr->dir))
		r = cell_err(err, ENAMETOOLONG, "container %s", cr->a.id);
	if (r == 0 && (cr->uid_base = oci_range_reserve(cr->cli->root, cr->a.id, err)) < 0)
		r = (int)cr->uid_base;
	if (r == 0)
		r = join_namespaces(cr, err);
	if (r == 0)
		r = spawn(cr, err);
	if (r == 0)
		r = create_process(cr, err);
	if (r == 0)
		r = oci_write_pid_file(cr->a.pid_file, cr->spawned.pid, err);
	if (r == 0)
		r = record(cr, err);
	if (r == 0)
		r = run_create_hooks(cr, err);
	return r;
}

int oci_cmd_create(const struct oci_cli *cli, int argc, char **argv)
{
	struct creation cr = {.cli = cli, .rootfd = -1, .dirfd = -1, .init_fd = -1};
	struct cell_error err = {0};
	int r = run(&cr, argc, argv, &err);
	if (r < 0 && cr.uid_base >= 0)
		undo(&cr);
	if (cr.spawned_ok)
		cell_closep(&cr.spawned.pidfd);
	oci_plan_clear(&cr.plan);
	oci_rootfs_clear(&cr.rootfs);
	oci_spec_free(cr.spec);
	cell_seccomp_prog_free(&cr.seccomp);
	cell_closep(&cr.init_fd);
	cell_closep(&cr.dirfd);
	cell_closep(&cr.rootfd);
	return r < 0 ? oci_fail(cli, &err) : 0;
}
