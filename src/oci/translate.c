/* An OCI spec in the runtime's terms (translate.h).
 *
 * What cell does with each part of a bundle:
 * - namespaces: user, mount, pid and cgroup are always new (cell's isolation, whatever
 *   the spec asks); net, ipc and uts are new when the spec lists them without a path,
 *   joined when it gives one (a pod's), and the host's when it leaves them out (docker
 *   --network host). A path for pid, mount, user or cgroup is refused.
 * - mounts: cell sets up /proc, /sys, /dev (its device nodes, devpts, shm) itself, so the
 *   spec's mounts of those kinds there are satisfied; a bind mount becomes a volume of
 *   the runtime (the engine's /etc/hosts, /etc/resolv.conf, a docker -v), with host ids
 *   kept (identity map, as without a user namespace); any other mount is refused, naming
 *   it.
 * - linux.devices: cell's own nodes (null, zero, full, random, urandom, tty, a pty
 *   instance) are every container's; a spec asking for another (a host device) is refused.
 * - linux.resources: memory.limit, cpu quota/period, pids.limit as cell_limits; the
 *   device rules are moot (no host device is there to allow).
 * - process: cell-init's OCI_CREATE (its capabilities, rlimits, ids, terminal, and the
 *   spec's seccomp program compiled here, installed by cell-init after cell's own). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/filter.h>

#include "cell/codec.h"
#include "cell/seccomp.h"
#include "translate.h"

/* Mounts cell makes itself: an OCI engine's default list names these. */
static const struct {
	const char *dest, *type;
} own_mounts[] = {
    {"/proc", "proc"},
    {"/dev", "tmpfs"},
    {"/dev/pts", "devpts"},
    {"/dev/shm", "tmpfs"},
    {"/dev/mqueue", "mqueue"},
    {"/sys", "sysfs"},
    {"/sys/fs/cgroup", "cgroup"},
    {"/sys/fs/cgroup", "cgroup2"},
};

static bool has_option(const struct oci_mount *m, const char *opt)
{
	for (size_t i = 0; i < m->options.n; i++)
		if (!strcmp(m->options.v[i], opt))
			return true;
	return false;
}

static bool is_bind(const struct oci_mount *m)
{
	return (m->type && !strcmp(m->type, "bind")) || has_option(m, "bind") ||
	       has_option(m, "rbind");
}

static bool cell_makes(const struct oci_mount *m)
{
	for (size_t i = 0; i < sizeof(own_mounts) / sizeof(own_mounts[0]); i++)
		if (!strcmp(m->destination, own_mounts[i].dest) && m->type &&
		    !strcmp(m->type, own_mounts[i].type))
			return true;
	return false;
}

/* A tmpfs mount: its mode= and size= kept, noexec and ro honoured (nosuid and nodev are
 * always on); any other option is refused, naming it. */
static int plan_tmpfs(const struct oci_mount *m, size_t i, struct oci_plan *plan,
		      struct cell_error *err)
{
	if (plan->n_tmpfs == CELL_MAX_TMPFS)
		return cell_err_msg(err, E2BIG, "mounts: more than %d tmpfs", CELL_MAX_TMPFS);
	int r = cell_mount_check_dest(m->destination, err);
	if (r < 0)
		return cell_err_wrap(err, "mounts[%zu]: ", i);
	struct cell_tmpfs *t = &plan->tmpfs[plan->n_tmpfs];
	*t = (struct cell_tmpfs){.dest = m->destination};
	for (size_t k = 0; k < m->options.n; k++) {
		const char *o = m->options.v[k];
		if (!strncmp(o, "mode=", 5) && strlen(o + 5) < sizeof(t->mode) &&
		    strspn(o + 5, "01234567") == strlen(o + 5))
			snprintf(t->mode, sizeof(t->mode), "%s", o + 5);
		else if (!strncmp(o, "size=", 5) && strlen(o + 5) < sizeof(t->size) &&
			 strspn(o + 5, "0123456789kmgKMG%") == strlen(o + 5))
			snprintf(t->size, sizeof(t->size), "%s", o + 5);
		else if (!strcmp(o, "noexec"))
			t->noexec = true;
		else if (!strcmp(o, "ro"))
			t->read_only = true;
		else if (strcmp(o, "nosuid") && strcmp(o, "nodev") && strcmp(o, "rw") &&
			 strcmp(o, "exec") && strcmp(o, "strictatime") && strcmp(o, "relatime") &&
			 strcmp(o, "noatime") && strcmp(o, "private") && strcmp(o, "rprivate"))
			return cell_err_msg(err, EINVAL,
					    "mounts[%zu]: tmpfs option '%.40s' is not "
					    "supported",
					    i, o);
	}
	plan->n_tmpfs++;
	return 0;
}

static int plan_mounts(const struct oci_spec *s, struct oci_plan *plan, struct cell_error *err)
{
	for (size_t i = 0; i < s->n_mounts; i++) {
		const struct oci_mount *m = &s->mounts[i];
		if (cell_makes(m))
			continue;
		if (m->type && !strcmp(m->type, "tmpfs") && !is_bind(m)) {
			int r = plan_tmpfs(m, i, plan, err);
			if (r < 0)
				return r;
			continue;
		}
		if (!is_bind(m))
			return cell_err_msg(
			    err, EINVAL,
			    "mounts[%zu]: a %s mount at %s is not supported (cell "
			    "makes /proc, /sys and /dev itself; others must be binds "
			    "or tmpfs)",
			    i, m->type ? m->type : "typeless", m->destination);
		if (!m->source || m->source[0] != '/')
			return cell_err_msg(err, EINVAL,
					    "mounts[%zu]: a bind needs an absolute source", i);
		if (plan->n_volumes == CELL_MAX_VOLUMES)
			return cell_err_msg(err, E2BIG, "mounts: more than %d binds",
					    CELL_MAX_VOLUMES);
		int r = cell_mount_check_dest(m->destination, err);
		if (r < 0)
			return cell_err_wrap(err, "mounts[%zu]: ", i);
		plan->volumes[plan->n_volumes++] = (struct cell_volume){
		    .host = m->source,
		    .dest = m->destination,
		    .read_only = has_option(m, "ro"),
		    .map = CELL_VOLUME_MAP_IDENTITY,
		    .source_fd = -1,
		};
	}
	return 0;
}

/* "/default/ID" (cgroupfs form); the systemd form "slice:prefix:name" is refused for
 * now. Empty: cell-oci/<id>. */
static int plan_cgroup(const struct oci_spec *s, const char *id, struct oci_plan *plan,
		       struct cell_error *err)
{
	const char *p = s->cgroups_path;
	if (!p || !p[0]) {
		snprintf(plan->cgroup, sizeof(plan->cgroup), "cell-oci/%s", id);
		return 0;
	}
	if (strchr(p, ':'))
		return cell_err_msg(err, EINVAL,
				    "linux.cgroupsPath '%.200s': the systemd form is not supported "
				    "yet (run without --systemd-cgroup)",
				    p);
	while (*p == '/')
		p++;
	if (snprintf(plan->cgroup, sizeof(plan->cgroup), "%s", p) >= (int)sizeof(plan->cgroup))
		return cell_err_msg(err, ENAMETOOLONG, "linux.cgroupsPath is too long");
	return 0;
}

static int plan_limits(const struct oci_spec *s, struct oci_plan *plan)
{
	const struct oci_resources *r = &s->resources;
	if (r->has_memory_limit && r->memory_limit > 0)
		plan->limits.memory_bytes = (uint64_t)r->memory_limit;
	if (r->has_cpu_quota && r->cpu_quota > 0) {
		uint64_t period = r->has_cpu_period && r->cpu_period ? r->cpu_period : 100000;
		plan->limits.cpu_millis = (uint64_t)r->cpu_quota * 1000 / period;
		if (!plan->limits.cpu_millis)
			plan->limits.cpu_millis = 1;
	}
	if (r->has_pids_limit && r->pids_limit > 0)
		plan->limits.pids = (uint64_t)r->pids_limit;
	return 0;
}

static int plan_namespaces(const struct oci_spec *s, struct oci_plan *plan, struct cell_error *err)
{
	static const int joinable[3] = {CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS};
	static const char *const names[3] = {"network", "ipc", "uts"};
	for (size_t i = 0; i < s->n_namespaces; i++) {
		const struct oci_namespace *ns = &s->namespaces[i];
		bool may_join = ns->flag == CLONE_NEWNET || ns->flag == CLONE_NEWIPC ||
				ns->flag == CLONE_NEWUTS;
		if (ns->path && !may_join)
			return cell_err_msg(err, EINVAL,
					    "linux.namespaces[%zu]: joining %s by path is not "
					    "supported (cell makes user, mount, pid and cgroup "
					    "namespaces of its own)",
					    i, ns->path);
	}
	const struct oci_namespace *uts = oci_spec_namespace(s, CLONE_NEWUTS);
	if (s->hostname && (!uts || uts->path))
		return cell_err_msg(
		    err, EINVAL,
		    "hostname: a hostname needs a new UTS namespace (linux.namespaces "
		    "has none, or joins one)");
	for (int k = 0; k < 3; k++) {
		plan->join_fds[k] = -1;
		plan->join_flags[k] = joinable[k];
		const struct oci_namespace *ns = oci_spec_namespace(s, joinable[k]);
		if (ns && !ns->path)
			continue; /* a new one */
		plan->joined_ns |= joinable[k];
		if (!ns)
			continue; /* the host's, as the spec leaves it out */
		plan->join_fds[k] = open(ns->path, O_RDONLY | O_CLOEXEC);
		if (plan->join_fds[k] < 0)
			return cell_err(err, errno, "the %s namespace %s", names[k], ns->path);
	}
	return 0;
}

/* cell gives every container its own device nodes and no host device: a spec's device is
 * taken only when it is one of those. */
static int check_devices(const struct oci_spec *s, struct cell_error *err)
{
	static const char *const cells[] = {"/dev/null",   "/dev/zero",	   "/dev/full",
					    "/dev/random", "/dev/urandom", "/dev/tty",
					    "/dev/ptmx",   "/dev/console"};
	for (size_t i = 0; i < s->n_devices; i++) {
		size_t k = 0;
		while (k < sizeof(cells) / sizeof(cells[0]) && strcmp(s->devices[i].path, cells[k]))
			k++;
		if (k == sizeof(cells) / sizeof(cells[0]))
			return cell_err_msg(err, EPERM,
					    "linux.devices[%zu]: %.200s: cell gives a container no "
					    "host device",
					    i, s->devices[i].path);
	}
	return 0;
}

int oci_plan_make(const struct oci_spec *s, const char *id, struct oci_plan *plan,
		  struct cell_error *err)
{
	*plan = (struct oci_plan){.join_fds = {-1, -1, -1}};
	int r = check_devices(s, err);
	if (r == 0 && s->sysctl && json_object_size(s->sysctl))
		r = cell_err_msg(err, ENOTSUP,
				 "linux.sysctl: setting sysctls is not supported yet");
	if (r == 0)
		r = plan_mounts(s, plan, err);
	if (r == 0)
		r = plan_cgroup(s, id, plan, err);
	if (r == 0)
		r = plan_limits(s, plan);
	if (r == 0)
		r = plan_namespaces(s, plan, err);
	return r;
}

void oci_plan_clear(struct oci_plan *plan)
{
	for (int k = 0; k < 3; k++)
		if (plan->join_fds[k] >= 0) {
			close(plan->join_fds[k]);
			plan->join_fds[k] = -1;
		}
}

/* ---- the process ---- */

static json_t *b64_array(const struct oci_strv *v)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < v->n; i++) {
		char *b = cell_base64_encode(v->v[i], strlen(v->v[i]));
		if (!b || json_array_append_new(a, json_string(b)) < 0) {
			free(b);
			json_decref(a);
			return NULL;
		}
		free(b);
	}
	return a;
}

static json_t *str_array(const struct oci_strv *v)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < v->n; i++)
		if (json_array_append_new(a, json_string(v->v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static int add_seccomp(const struct oci_spec *s, json_t *req, struct cell_error *err)
{
	if (!s || !s->seccomp)
		return 0;
	struct cell_seccomp_prog prog;
	int r = cell_seccomp_compile_oci(s->seccomp, &prog, NULL, err);
	if (r < 0)
		return r;
	char *b = cell_base64_encode(prog.filter, prog.len * sizeof(prog.filter[0]));
	cell_seccomp_prog_free(&prog);
	if (!b || json_object_set_new(req, "seccomp", json_string(b)) < 0) {
		free(b);
		return cell_err(err, ENOMEM, "linux.seccomp");
	}
	free(b);
	return 0;
}

json_t *oci_process_request(const struct oci_spec *s, const struct oci_process *p,
			    struct cell_error *err)
{
	json_t *gids = json_array();
	for (size_t i = 0; gids && i < p->n_additional_gids; i++)
		json_array_append_new(gids, json_integer(p->additional_gids[i]));
	json_t *rl = json_array();
	for (size_t i = 0; rl && i < p->n_rlimits; i++)
		json_array_append_new(rl,
				      json_pack("{s:i, s:I, s:I}", "type", p->rlimits[i].resource,
						"soft", (json_int_t)p->rlimits[i].soft, "hard",
						(json_int_t)p->rlimits[i].hard));
	json_t *req =
	    json_pack("{s:o, s:o, s:s, s:I, s:I, s:o, s:b, s:i, s:i, s:o}", "argv",
		      b64_array(&p->args), "env", str_array(&p->env), "cwd", p->cwd, "uid",
		      (json_int_t)p->uid, "gid", (json_int_t)p->gid, "gids", gids, "terminal",
		      p->terminal, "rows", (int)p->rows, "cols", (int)p->cols, "rlimits", rl);
	if (!req) {
		cell_err(err, ENOMEM, "process");
		return NULL;
	}
	if (p->has_umask)
		json_object_set_new(req, "umask", json_integer(p->umask));
	if (p->has_oom_score_adj)
		json_object_set_new(req, "oom_score_adj", json_integer(p->oom_score_adj));
	if (p->caps.given)
		json_object_set_new(req, "caps",
				    json_pack("{s:I, s:I, s:I, s:I, s:I}", "bounding",
					      (json_int_t)p->caps.bounding, "effective",
					      (json_int_t)p->caps.effective, "permitted",
					      (json_int_t)p->caps.permitted, "inheritable",
					      (json_int_t)p->caps.inheritable, "ambient",
					      (json_int_t)p->caps.ambient));
	if (add_seccomp(s, req, err) < 0) {
		json_decref(req);
		return NULL;
	}
	return req;
}
