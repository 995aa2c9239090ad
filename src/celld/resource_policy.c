/* Resource limits: the policy in policies/resources/default.json (defaults, per-sandbox
 * maxima, rlimits), read once at start, and a create's resourceLimits checked against it
 * and against what the host can hold.
 *
 * A request names each field as a string (resourceLimits is a map of strings, as in the
 * OpenSandbox API): cpu "500m"/"2", memory "512Mi"/"2Gi", pids "1024", disk "10Gi", io
 * "rbps=50Mi,wbps=50Mi,riops=1000,wiops=1000" (any subset). Fields left out take the
 * policy's default. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cell/quantity.h"
#include "cell/quota.h"
#include "config.h"
#include "fields.h"
#include "resource_policy.h"

#define POLICY_FILE "resources/default.json"
#define POLICY_MAX  (64u << 10)
#define MEMORY_MIN  (8ull << 20) /* below this cell-init and a shell do not fit */
#define PIDS_MIN    8
/* Tasks kept for the host out of its pid space. celld itself runs a thread per API
 * connection, up to 4096 on each of its two listeners (http.c), all of them clients' and
 * none a sandbox's doing; the kernel's threads (a few per CPU), the host's services and an
 * administrator's login to set things right need some more. 8192, or an eighth of a
 * larger space; half of a tiny one. */
#define PIDS_HEADROOM 8192
/* cgroup v1: a sandbox's socket buffers may take a quarter of its memory limit beside it
 * (v2 counts them in the limit itself). A loopback workload needs far less (a busy
 * connection a few MiB), and the sandbox's total stays within 1.25 times its limit. */
#define SOCKET_SHARE 4

enum field { F_CPU, F_MEMORY, F_PIDS, F_DISK, F_COUNT };

static const char *const field_names[F_COUNT] = {"cpu", "memory", "pids", "disk"};

static struct {
	uint64_t defaults[F_COUNT], maximum[F_COUNT];
	/* What all sandboxes together may hold (the instance cgroup's pids.max, and on v1 its
	 * socket buffer limit), and why the pids maximum is lower than the policy's, if it is. */
	uint64_t total_pids, total_socket_bytes;
	char pids_note[160];
	struct cell_rlimit rlimits[CELL_MAX_RLIMITS];
	size_t n_rlimits;
	dev_t io_device; /* whole-disk device of the state dir, 0 when none */
	char io_note[160];
} policy;

static const struct {
	const char *name;
	int resource;
	bool bytes; /* values may be quantities ("8Mi") */
} rlimit_names[] = {
    {"core", RLIMIT_CORE, true},       {"nofile", RLIMIT_NOFILE, false},
    {"stack", RLIMIT_STACK, true},     {"msgqueue", RLIMIT_MSGQUEUE, true},
    {"memlock", RLIMIT_MEMLOCK, true}, {"nproc", RLIMIT_NPROC, false},
    {"fsize", RLIMIT_FSIZE, true},     {"sigpending", RLIMIT_SIGPENDING, false},
    {"data", RLIMIT_DATA, true},       {"as", RLIMIT_AS, true},
    {"cpu", RLIMIT_CPU, false},	       {"locks", RLIMIT_LOCKS, false},
    {"nice", RLIMIT_NICE, false},      {"rtprio", RLIMIT_RTPRIO, false},
};

/* One field's text → value; -EINVAL/-ERANGE. */
static int parse_field(enum field f, const char *text, uint64_t *out)
{
	switch (f) {
	case F_CPU:
		return cell_parse_cpu(text, out);
	case F_PIDS:
		return cell_parse_count(text, out);
	default:
		return cell_parse_bytes(text, out);
	}
}

static const char *field_hint(enum field f)
{
	switch (f) {
	case F_CPU:
		return "cores like \"2\" or \"0.5\", or millicores like \"500m\"";
	case F_PIDS:
		return "a whole number like \"1024\"";
	default:
		return "bytes with a suffix like \"512Mi\", \"2Gi\" or \"10G\"";
	}
}

/* ---- the policy file ---- */

static int policy_fail(struct cell_error *err, const char *field, const char *why)
{
	return cell_err_msg(err, EINVAL, "%s/%s: %s %s", celld.policies_dir, POLICY_FILE, field,
			    why);
}

/* A policy value: a string in the field's syntax (integers also for pids). */
static int policy_value(json_t *obj, const char *section, enum field f, uint64_t *out,
			struct cell_error *err)
{
	char name[64];
	snprintf(name, sizeof(name), "%s.%s", section, field_names[f]);
	json_t *v = json_object_get(obj, field_names[f]);
	if (!v)
		return policy_fail(err, name, "is missing");
	if (json_is_integer(v) && f == F_PIDS && json_integer_value(v) > 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v) || parse_field(f, json_string_value(v), out) < 0 || *out == 0) {
		char why[200];
		snprintf(why, sizeof(why), "must be %s (non-zero)", field_hint(f));
		return policy_fail(err, name, why);
	}
	return 0;
}

static int rlimit_value(json_t *v, bool bytes, uint64_t *out)
{
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return -EINVAL;
	if (!strcmp(json_string_value(v), "unlimited")) {
		*out = RLIM_INFINITY;
		return 0;
	}
	return bytes ? cell_parse_bytes(json_string_value(v), out)
		     : cell_parse_count(json_string_value(v), out);
}

/* An rlimit above celld's own hard limit cannot be set from inside the sandbox's user
 * namespace (raising a hard limit needs CAP_SYS_RESOURCE on the host): lower it to that,
 * and say so, rather than failing every create. */
static void clamp_to_own(struct cell_rlimit *rl, const char *name)
{
	struct rlimit own;
	if (getrlimit(rl->resource, &own) < 0 || own.rlim_max == RLIM_INFINITY ||
	    rl->hard <= own.rlim_max)
		return;
	log_info("policy rlimits.%s: hard %" PRIu64 " is above celld's own (%llu); using that",
		 name, rl->hard, (unsigned long long)own.rlim_max);
	rl->hard = own.rlim_max;
	if (rl->soft > rl->hard)
		rl->soft = rl->hard;
}

static int load_rlimits(json_t *obj, struct cell_error *err)
{
	const char *key;
	json_t *v;
	if (obj && !json_is_object(obj))
		return policy_fail(err, "rlimits", "must be an object");
	json_object_foreach(obj, key, v)
	{
		char name[80];
		snprintf(name, sizeof(name), "rlimits.%.60s", key);
		size_t i = 0;
		while (i < CELL_ARRAY_SIZE(rlimit_names) && strcmp(rlimit_names[i].name, key))
			i++;
		if (i == CELL_ARRAY_SIZE(rlimit_names))
			return policy_fail(err, name,
					   "is not a known rlimit (core, nofile, stack, ...)");
		if (!json_is_object(v))
			return policy_fail(err, name, "must be {\"soft\": N, \"hard\": N}");
		struct cell_rlimit *rl = &policy.rlimits[policy.n_rlimits++];
		rl->resource = rlimit_names[i].resource;
		if (rlimit_value(json_object_get(v, "soft"), rlimit_names[i].bytes, &rl->soft) <
			0 ||
		    rlimit_value(json_object_get(v, "hard"), rlimit_names[i].bytes, &rl->hard) < 0)
			return policy_fail(err, name,
					   "soft and hard must be numbers or \"unlimited\"");
		if (rl->soft > rl->hard)
			return policy_fail(err, name, "soft is above hard");
		clamp_to_own(rl, key);
	}
	return 0;
}

/* "total": {"pids": N}, optional: a bound on all sandboxes together, below the host's. */
static int load_total(json_t *obj, struct cell_error *err)
{
	const char *key;
	json_t *v;
	if (!obj)
		return 0;
	if (!json_is_object(obj))
		return policy_fail(err, "total", "must be an object");
	json_object_foreach(obj, key, v)
	{
		if (strcmp(key, field_names[F_PIDS])) {
			char name[80];
			snprintf(name, sizeof(name), "total.%.60s", key);
			return policy_fail(err, name, "is not a known total (pids)");
		}
	}
	return policy_value(obj, "total", F_PIDS, &policy.total_pids, err);
}

static uint64_t read_sysctl(const char *path, int field)
{
	_cleanup_free_ char *text = NULL;
	if (cell_read_file_at(AT_FDCWD, path, 256, &text, NULL, NULL) < 0)
		return 0;
	char *c = text;
	for (int i = 0; i < field && *c; i++)
		c += strcspn(c, " \t"), c += strspn(c, " \t");
	return strtoull(c, NULL, 10);
}

/* Every task of every sandbox takes a pid of the host's pid space (kernel.pid_max) and a
 * slot of its task table (kernel.threads-max): at either limit, fork fails host-wide, for
 * celld and the host's services too. All sandboxes together (the instance cgroup's
 * pids.max, enforced by the kernel) and so each one get the lower of the two less a
 * headroom for the host, or the policy's total when that is lower still; a per-sandbox
 * maximum or default above that is lowered to it, and said. */
static void bound_pids(void)
{
	uint64_t pid_max = read_sysctl("/proc/sys/kernel/pid_max", 0);
	uint64_t threads = read_sysctl("/proc/sys/kernel/threads-max", 0);
	bool by_threads = threads && threads < pid_max;
	uint64_t host = by_threads ? threads : pid_max;
	uint64_t keep = host / 8 > PIDS_HEADROOM ? host / 8 : PIDS_HEADROOM;
	if (keep > host / 2)
		keep = host / 2;
	uint64_t total = host - keep;
	char why[sizeof(policy.pids_note)];
	snprintf(why, sizeof(why), "%s %" PRIu64 " less %" PRIu64 " kept for the host",
		 by_threads ? "kernel.threads-max" : "kernel.pid_max", host, keep);
	if (policy.total_pids && (!host || policy.total_pids <= total)) {
		total = policy.total_pids;
		snprintf(why, sizeof(why), "the policy's total.pids");
	} else if (policy.total_pids) {
		log_info("policy total.pids %" PRIu64 " is above what the host can give (%" PRIu64
			 ": %s); using that",
			 policy.total_pids, total, why);
	}
	policy.total_pids = total;
	if (!total) {
		log_warn("resources: kernel.pid_max unreadable: the sandboxes' tasks are bounded "
			 "per sandbox only");
		return;
	}
	log_info("resources: all sandboxes together: at most %" PRIu64 " tasks (%s)", total, why);
	if (policy.maximum[F_PIDS] <= total)
		return;
	snprintf(policy.pids_note, sizeof(policy.pids_note), "%s", why);
	log_info("policy maximum.pids %" PRIu64 " is above what all sandboxes together may hold "
		 "(%" PRIu64 ": %s); using that",
		 policy.maximum[F_PIDS], total, why);
	policy.maximum[F_PIDS] = total;
	if (policy.defaults[F_PIDS] > total) {
		log_info("policy defaults.pids %" PRIu64 " lowered to %" PRIu64,
			 policy.defaults[F_PIDS], total);
		policy.defaults[F_PIDS] = total;
	}
}

/* cgroup v1 charges socket buffers apart from memory (SOCKET_SHARE). All sandboxes
 * together may hold half of net.ipv4.tcp_mem's pressure threshold (its second field, in
 * pages): the host's own TCP keeps the other half before the kernel even starts to squeeze
 * buffers, and the hard limit, at which every TCP socket of the host fails to send, stays
 * out of the sandboxes' reach. v2 charges them to each sandbox's memory instead. */
static void bound_sockets(void)
{
	if (!celld.cgroup || !celld.cgroup->socket_memory_apart)
		return;
	uint64_t pressure = read_sysctl("/proc/sys/net/ipv4/tcp_mem", 1);
	long page = sysconf(_SC_PAGESIZE);
	policy.total_socket_bytes = page > 0 ? pressure * (uint64_t)page / 2 : 0;
	if (policy.total_socket_bytes)
		log_info("resources: socket buffers: a quarter of a sandbox's memory limit each, "
			 "%" PRIu64 " bytes for all together (half of net.ipv4.tcp_mem's pressure "
			 "threshold)",
			 policy.total_socket_bytes);
	else
		log_warn("resources: net.ipv4.tcp_mem unreadable: socket buffers are bounded per "
			 "sandbox only");
}

/* The whole disk that holds the state dir, for io.max / blkio.throttle: those take no
 * partition, and a state dir on an overlay, tmpfs, btrfs subvolume or other anonymous
 * device (major 0) has no block device to throttle at all. */
static void find_io_device(void)
{
	struct stat st;
	if (stat(celld.state_dir, &st) < 0 || major(st.st_dev) == 0) {
		snprintf(policy.io_note, sizeof(policy.io_note),
			 "the state dir %.100s is not on a block device", celld.state_dir);
		return;
	}
	char path[PATH_MAX], real[PATH_MAX];
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	if (!realpath(path, real)) {
		snprintf(policy.io_note, sizeof(policy.io_note),
			 "device %u:%u of %.100s is not a block device", major(st.st_dev),
			 minor(st.st_dev), celld.state_dir);
		return;
	}
	char part[PATH_MAX + 16];
	snprintf(part, sizeof(part), "%s/partition", real);
	if (access(part, F_OK) == 0)
		*strrchr(real, '/') = '\0'; /* the partition's disk */
	snprintf(part, sizeof(part), "%s/dev", real);
	_cleanup_free_ char *dev = NULL;
	unsigned maj, min;
	if (cell_read_file_at(AT_FDCWD, part, 64, &dev, NULL, NULL) < 0 ||
	    sscanf(dev, "%u:%u", &maj, &min) != 2) {
		snprintf(policy.io_note, sizeof(policy.io_note), "no disk found for %.100s", real);
		return;
	}
	/* Loop devices and device-mapper targets have no queue of their own to throttle
	 * fairly; they are still block devices, so they are accepted. */
	policy.io_device = makedev(maj, min);
}

int limits_load(struct cell_error *err)
{
	json_t *root;
	int r = config_policy_json(POLICY_FILE, POLICY_MAX, &root, err);
	if (r < 0)
		return r;
	json_t *def = json_object_get(root, "defaults"), *max = json_object_get(root, "maximum");
	r = 0;
	if (!json_is_object(def))
		r = policy_fail(err, "defaults", "must be an object");
	else if (!json_is_object(max))
		r = policy_fail(err, "maximum", "must be an object");
	for (int f = 0; r == 0 && f < F_COUNT; f++) {
		r = policy_value(def, "defaults", f, &policy.defaults[f], err);
		if (r == 0)
			r = policy_value(max, "maximum", f, &policy.maximum[f], err);
		if (r == 0 && policy.defaults[f] > policy.maximum[f]) {
			char name[64];
			snprintf(name, sizeof(name), "defaults.%s", field_names[f]);
			r = policy_fail(err, name, "is above maximum");
		}
	}
	if (r == 0)
		r = load_total(json_object_get(root, "total"), err);
	if (r == 0)
		r = load_rlimits(json_object_get(root, "rlimits"), err);
	json_decref(root);
	if (r < 0)
		return r;
	bound_pids();
	bound_sockets();
	find_io_device();
	if (policy.io_device)
		log_info("resources: io limits apply to device %u:%u", major(policy.io_device),
			 minor(policy.io_device));
	else
		log_info("resources: io limits unavailable: %s", policy.io_note);
	return 0;
}

json_t *limits_json(const struct cell_limits *l)
{
	json_t *o = json_pack("{s:I, s:I, s:I, s:I}", "cpuMillis", (json_int_t)l->cpu_millis,
			      "memoryBytes", (json_int_t)l->memory_bytes, "pids",
			      (json_int_t)l->pids, "diskBytes", (json_int_t)l->disk_bytes);
	/* null: socket buffers count in memoryBytes (cgroup v2), or the sandbox predates
	 * their limit. */
	if (o)
		json_object_set_new(o, "socketMemoryBytes",
				    l->socket_bytes ? json_integer((json_int_t)l->socket_bytes)
						    : json_null());
	return o;
}

const struct cell_rlimit *limits_rlimits(size_t *n)
{
	*n = policy.n_rlimits;
	return policy.rlimits;
}

/* ---- a create's resourceLimits ---- */

static int io_field(const char *item, struct cell_limits *out)
{
	static const struct {
		const char *key;
		bool bytes;
		size_t off;
	} keys[] = {
	    {"rbps", true, offsetof(struct cell_limits, io_read_bps)},
	    {"wbps", true, offsetof(struct cell_limits, io_write_bps)},
	    {"riops", false, offsetof(struct cell_limits, io_read_iops)},
	    {"wiops", false, offsetof(struct cell_limits, io_write_iops)},
	};
	const char *eq = strchr(item, '=');
	for (size_t i = 0; eq && i < CELL_ARRAY_SIZE(keys); i++) {
		if (strlen(keys[i].key) != (size_t)(eq - item) ||
		    strncmp(item, keys[i].key, eq - item))
			continue;
		uint64_t *v = (uint64_t *)((char *)out + keys[i].off);
		int r = keys[i].bytes ? cell_parse_bytes(eq + 1, v) : cell_parse_count(eq + 1, v);
		return r < 0 || *v == 0 ? -EINVAL : 0;
	}
	return -EINVAL;
}

static int parse_io(const char *text, struct cell_limits *out, struct cell_error *err)
{
	_cleanup_free_ char *buf = strdup(text);
	if (!buf)
		return cell_err(err, ENOMEM, "resourceLimits.io");
	char *save = NULL;
	int items = 0;
	for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save), items++)
		if (io_field(it, out) < 0)
			return field_fail(err,
					  "resourceLimits.io: '%.40s' is not one of rbps=, wbps= "
					  "(bytes/s like \"50Mi\"), riops=, wiops= (operations/s)",
					  it);
	if (!items)
		return field_fail(err,
				  "resourceLimits.io must list rbps=, wbps=, riops= or wiops=");
	return 0;
}

/* What the host can hold: -EAGAIN with the rule that failed (the host is short of it). */
static int check_host(const uint64_t v[F_COUNT], bool disk_given, struct cell_error *err)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus > 0 && v[F_CPU] > (uint64_t)cpus * 1000)
		return cell_err_msg(err, EAGAIN,
				    "resourceLimits.cpu %" PRIu64 "m is more than the host's %ld "
				    "online CPUs",
				    v[F_CPU], cpus);
	struct sysinfo si;
	if (sysinfo(&si) == 0 && v[F_MEMORY] / si.mem_unit > si.totalram)
		return cell_err_msg(err, EAGAIN,
				    "resourceLimits.memory %" PRIu64
				    " bytes is more than the host's "
				    "memory (%llu bytes)",
				    v[F_MEMORY], (unsigned long long)si.totalram * si.mem_unit);
	struct statvfs sv;
	/* Only an explicit disk request is held against free space: the default is a cap on
	 * growth, not a reservation. */
	if (disk_given && statvfs(celld.state_dir, &sv) == 0 &&
	    v[F_DISK] / sv.f_frsize > sv.f_bavail)
		return cell_err_msg(err, EAGAIN,
				    "resourceLimits.disk %" PRIu64 " bytes is more than the free "
				    "space of the state dir's filesystem (%llu bytes)",
				    v[F_DISK], (unsigned long long)sv.f_bavail * sv.f_frsize);
	return 0;
}

static int check_field(enum field f, const char *text, uint64_t *v, struct cell_error *err)
{
	if (parse_field(f, text, v) < 0)
		return field_fail(err, "resourceLimits.%s '%.40s' is malformed: use %s",
				  field_names[f], text, field_hint(f));
	if (*v == 0 || (f == F_MEMORY && *v < MEMORY_MIN) || (f == F_PIDS && *v < PIDS_MIN))
		return field_fail(err, "resourceLimits.%s '%.40s' is too small%s", field_names[f],
				  text,
				  f == F_MEMORY ? " (at least 8Mi)"
				  : f == F_PIDS ? " (at least 8)"
						: "");
	if (*v > policy.maximum[f] && f == F_PIDS && policy.pids_note[0])
		return field_fail(err,
				  "resourceLimits.%s '%.40s' is above the per-sandbox maximum of "
				  "this host, %" PRIu64 " (%s)",
				  field_names[f], text, policy.maximum[f], policy.pids_note);
	if (*v > policy.maximum[f])
		return field_fail(err,
				  "resourceLimits.%s '%.40s' is above the per-sandbox maximum of "
				  "this host's policy (%s)",
				  field_names[f], text, POLICY_FILE);
	return 0;
}

/* A key cell does not enforce is refused rather than ignored: a client asking for a GPU
 * must not get a sandbox without one. "gpu" is OpenSandbox's own key: "0" asks for
 * nothing and is taken. "cell.egress" is the network's (network.c). */
static int check_keys(json_t *request, struct cell_error *err)
{
	const char *key;
	json_t *v;
	json_object_foreach(request, key, v)
	{
		bool known = !strcmp(key, "io") || !strcmp(key, "cell.egress");
		for (int f = 0; f < F_COUNT && !known; f++)
			known = !strcmp(key, field_names[f]);
		if (known || (!strcmp(key, "gpu") && !strcmp(json_string_value(v), "0")))
			continue;
		return field_fail(err,
				  "resourceLimits.%.40s is not supported by cell (it enforces cpu, "
				  "memory, pids, disk, io and cell.egress%s)",
				  key, strcmp(key, "gpu") ? "" : "; a sandbox has no GPU");
	}
	return 0;
}

int limits_resolve(json_t *request, struct cell_limits *out, bool check, struct cell_error *err)
{
	uint64_t v[F_COUNT];
	*out = (struct cell_limits){0};
	if (check && check_keys(request, err) < 0)
		return -EINVAL;
	for (int f = 0; f < F_COUNT; f++) {
		json_t *given = json_object_get(request, field_names[f]);
		v[f] = policy.defaults[f];
		int r = given ? check_field(f, json_string_value(given), &v[f], err) : 0;
		if (r < 0)
			return r;
	}
	json_t *io = json_object_get(request, "io");
	int r = io ? parse_io(json_string_value(io), out, err) : 0;
	if (r < 0)
		return r;
	out->cpu_millis = v[F_CPU];
	out->memory_bytes = v[F_MEMORY];
	if (celld.cgroup && celld.cgroup->socket_memory_apart)
		out->socket_bytes = v[F_MEMORY] / SOCKET_SHARE;
	out->pids = v[F_PIDS];
	out->disk_bytes = v[F_DISK];
	out->total_pids = policy.total_pids;
	out->total_socket_bytes = policy.total_socket_bytes;
	if (!check)
		return 0;
	if (io && !policy.io_device)
		return cell_err_msg(err, EAGAIN, "resourceLimits.io cannot be enforced: %s",
				    policy.io_note);
	out->io_device = io ? policy.io_device : 0;
	return check_host(v, json_object_get(request, field_names[F_DISK]) != NULL, err);
}

void limits_complete(const char *id, json_t *request, struct cell_limits *l)
{
	l->total_pids = policy.total_pids;
	l->total_socket_bytes = policy.total_socket_bytes;
	json_t *io = json_object_get(request, "io");
	if (!io)
		return;
	struct cell_limits parsed = {0};
	struct cell_error err = {0};
	if (parse_io(json_string_value(io), &parsed, &err) < 0) {
		log_warn("sandbox %s: its recorded resourceLimits.io is not applied: %s", id,
			 err.msg);
		return;
	}
	if (!policy.io_device) {
		log_warn("sandbox %s: its resourceLimits.io cannot be enforced on this host: %s",
			 id, policy.io_note);
		return;
	}
	l->io_read_bps = parsed.io_read_bps;
	l->io_write_bps = parsed.io_write_bps;
	l->io_read_iops = parsed.io_read_iops;
	l->io_write_iops = parsed.io_write_iops;
	l->io_device = policy.io_device;
}

int limits_volume_bytes(const char *text, const char *field, uint64_t *out, struct cell_error *err)
{
	if (!text) {
		*out = policy.defaults[F_DISK];
		return 0;
	}
	uint64_t v;
	if (cell_parse_bytes(text, &v) < 0)
		return field_fail(err, "%s '%.40s' is malformed: use %s", field, text,
				  field_hint(F_DISK));
	if (v < CELL_QUOTA_LOOP_MIN)
		return field_fail(err, "%s '%.40s' is too small (at least %lluMi)", field, text,
				  CELL_QUOTA_LOOP_MIN >> 20);
	if (v > policy.maximum[F_DISK])
		return field_fail(err,
				  "%s '%.40s' is above the maximum disk of this host's policy (%s)",
				  field, text, POLICY_FILE);
	struct statvfs sv;
	if (statvfs(celld.state_dir, &sv) == 0 && v / sv.f_frsize > sv.f_bavail)
		return cell_err_msg(err, EAGAIN,
				    "%s %" PRIu64 " bytes is more than the free space of the state "
				    "dir's filesystem (%llu bytes)",
				    field, v, (unsigned long long)sv.f_bavail * sv.f_frsize);
	*out = v;
	return 0;
}
