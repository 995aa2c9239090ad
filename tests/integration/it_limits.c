/* Resource limits: resourceLimits checked (400 naming the field, 503 beyond the host),
 * the sandbox's cgroup visible read-only inside with its limits, usage and execd metrics
 * from the cgroup's counters, and containment: a memory hog is OOM-killed inside its
 * sandbox only, a fork bomb stops at the pids limit while others go on, a busy loop under
 * cpu "500m" is held to its quota (the cgroup's bandwidth files and the kernel's counters,
 * never a wall clock), socket buffers of every kind (TCP queues, UDP queues, Unix streams,
 * left unread by the static helper sockmem_probe) stay within the memory limit, and the
 * sandboxes' tasks stay below the host's pid space, each and all together (the instance
 * cgroup's pids.max). */
#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static char *create_limited(const char *limits_json)
{
	json_t *extra = json_pack("{s:o}", "resourceLimits", json_loads(limits_json, 0, NULL));
	char *id = h_create("busybox", extra);
	json_decref(extra);
	return id;
}

static long create_status(const char *limits_json, struct h_resp *r)
{
	json_t *extra = json_pack("{s:o}", "resourceLimits", json_loads(limits_json, 0, NULL));
	long st = h_create_ex("busybox", extra, H_UNIX, r);
	json_decref(extra);
	return st;
}

/* Is the sandbox's view cgroup v2 (one mount) rather than the v1 hierarchies? */
static bool inside_v2(const char *id)
{
	return h_sh_code(id, "test -f /sys/fs/cgroup/memory.max") == 0;
}

START_TEST(limits_visible_read_only)
{
	char *id = create_limited("{\"cpu\":\"500m\",\"memory\":\"256Mi\",\"pids\":\"200\"}");
	char *mem, *cpu, *pids;
	if (inside_v2(id)) {
		mem = h_sh(id, "cat /sys/fs/cgroup/memory.max");
		cpu = h_sh(id, "cat /sys/fs/cgroup/cpu.max");
		pids = h_sh(id, "cat /sys/fs/cgroup/pids.max");
		ck_assert_str_eq(h_trim(cpu), "50000 100000");
	} else {
		mem = h_sh(id, "cat /sys/fs/cgroup/memory/memory.limit_in_bytes");
		cpu = h_sh(id, "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us");
		pids = h_sh(id, "cat /sys/fs/cgroup/pids/pids.max");
		ck_assert_str_eq(h_trim(cpu), "50000");
		/* The v1 view shows the sandbox's own cgroup as its root: no host cgroups. */
		char *tasks = h_sh(id, "wc -l < /sys/fs/cgroup/memory/cgroup.procs");
		ck_assert_int_ge(atoi(tasks), 1);
		free(tasks);
	}
	ck_assert_str_eq(h_trim(mem), "268435456");
	ck_assert_str_eq(h_trim(pids), "200");
	/* Root inside can neither raise its limits nor create cgroups nor write anything. */
	ck_assert_int_ne(h_sh_code(id, "for f in $(find /sys/fs/cgroup -name pids.max -o -name "
				       "memory.max -o -name memory.limit_in_bytes -o -name "
				       "cgroup.procs -o -name freezer.state); do echo 1 > $f && "
				       "exit 0; done; exit 1"),
			 0);
	ck_assert_int_ne(h_sh_code(id, "mkdir /sys/fs/cgroup/x || mkdir /sys/fs/cgroup/memory/x"),
			 0);
	ck_assert_int_ne(h_sh_code(id, "touch /sys/fs/cgroup/x"), 0);
	char *ro = h_sh(id, "grep ' /sys/fs/cgroup' /proc/mounts | grep -vc ' ro,' || true");
	ck_assert_str_eq(h_trim(ro), "0");
	free(ro);
	free(mem);
	free(cpu);
	free(pids);
	free(id);
}
END_TEST

/* Is the io controller (v2's io, v1's blkio: one subsystem, "blkio" in /proc/cgroups)
 * enabled in this kernel? */
static bool io_controller_enabled(void)
{
	char *text = h_read_file("/proc/cgroups");
	bool on = false;
	for (char *save = NULL, *l = text ? strtok_r(text, "\n", &save) : NULL; l && !on;
	     l = strtok_r(NULL, "\n", &save)) {
		char name[32];
		int enabled = 0;
		on = sscanf(l, "%31s %*d %*d %d", name, &enabled) == 2 && enabled == 1 &&
		     (!strcmp(name, "blkio") || !strcmp(name, "io"));
	}
	free(text);
	return on;
}

/* The host's part of io throttling, decided before asking celld, so that an error answer
 * on a host that can throttle fails the test: the io controller, the kernel's throttling
 * (CONFIG_BLK_DEV_THROTTLING, when the kernel's config is readable) and a state dir on a
 * block device (celld throttles the disk that holds it; a state dir on tmpfs or an overlay
 * has none: CELL_TEST_TMP puts the test dirs elsewhere). Skips, naming the probe, when
 * the host lacks one. */
static void io_probe_or_skip(void)
{
	if (!io_controller_enabled())
		h_skip_host("cgroup-io-controller",
			    "no enabled io/blkio controller in /proc/cgroups");
	if (h_kernel_config("CONFIG_BLK_DEV_THROTTLING") == 'n')
		h_skip_host("kernel-blk-dev-throttling",
			    "the kernel has no CONFIG_BLK_DEV_THROTTLING");
	struct stat st;
	ck_assert_int_eq(stat(H.state, &st), 0);
	char *dev = h_fmt("/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	bool block = major(st.st_dev) != 0 && access(dev, F_OK) == 0;
	free(dev);
	if (!block)
		h_skip_host("state-dir-block-device", "the state dir %s is not on a block device",
			    H.state);
}

/* A sandbox created with io limits (the host can throttle io: io_probe_or_skip first). */
static char *create_with_io_limits(void)
{
	struct h_resp r;
	long st = create_status("{\"io\":\"rbps=1Mi,wbps=2Mi,riops=300,wiops=400\"}", &r);
	ck_assert_msg(st == 202 || st == 200,
		      "create with io limits on a host that can throttle io: HTTP %ld %s", st,
		      r.body);
	char *id = strdup(h_jstr(r.json, "id"));
	h_resp_free(&r);
	return id;
}

/* The io limits of create_with_io_limits, as the sandbox sees them (read-only). */
static void expect_io_limits(const char *id)
{
	char *out;
	if (inside_v2(id)) {
		out = h_sh(id, "cat /sys/fs/cgroup/io.max");
		ck_assert_msg(strstr(out, "rbps=1048576 wbps=2097152 riops=300 wiops=400"),
			      "io.max: %s", out);
	} else {
		out = h_sh(id, "cd /sys/fs/cgroup/blkio && cat blkio.throttle.read_bps_device "
			       "blkio.throttle.write_bps_device blkio.throttle.read_iops_device "
			       "blkio.throttle.write_iops_device | awk '{print $2}'");
		ck_assert_str_eq(out, "1048576\n2097152\n300\n400\n");
	}
	free(out);
}

/* io limits land on the disk of the state dir, visible (read-only) inside. */
START_TEST(io_limits_applied)
{
	io_probe_or_skip();
	char *id = create_with_io_limits();
	expect_io_limits(id);
	free(id);
}
END_TEST

/* A Failed sandbox started again from its record by a restarted celld is held to every
 * limit of its create, the io limits included (the record keeps the request, celld fills
 * in the device). */
START_TEST(io_limits_kept_when_started_again)
{
	io_probe_or_skip();
	char *id = create_with_io_limits();
	json_t *ins = h_inspect(id);
	pid_t init = (pid_t)h_jint(ins, "pid");
	json_decref(ins);
	ck_assert_int_gt(init, 0);
	h_celld_kill();
	ck_assert_int_eq(kill(init, SIGKILL), 0);
	h_celld_start();
	ck_assert_str_eq(h_wait_state(id, "Failed", 30), "Failed");
	char *path = h_fmt("/v1/sandboxes/%s/resume", id);
	struct h_resp r;
	long st = h_http("POST", path, NULL, &r);
	ck_assert_msg(st == 202 || st == 200, "resume answered %ld: %s", st, r.body);
	h_resp_free(&r);
	free(path);
	ck_assert_str_eq(h_wait_state(id, "Running", 10), "Running");
	expect_io_limits(id);
	free(id);
}
END_TEST

static void expect_400(const char *limits, const char *field)
{
	struct h_resp r;
	ck_assert_int_eq(create_status(limits, &r), 400);
	ck_assert_str_eq(h_err_code(&r), "INVALID_ARGUMENT");
	ck_assert_msg(strstr(h_jstr(r.json, "message"), field), "%s: message '%s' misses %s",
		      limits, h_jstr(r.json, "message"), field);
	h_resp_free(&r);
}

START_TEST(bad_limits_refused)
{
	int before = h_sandbox_count();
	expect_400("{\"memory\":\"2GB\"}", "resourceLimits.memory");
	expect_400("{\"memory\":\"1Ti\"}", "resourceLimits.memory"); /* above the maximum */
	expect_400("{\"memory\":\"1Mi\"}", "resourceLimits.memory"); /* too small */
	expect_400("{\"cpu\":\"lots\"}", "resourceLimits.cpu");
	expect_400("{\"cpu\":\"64\"}", "resourceLimits.cpu");
	expect_400("{\"cpu\":\"0\"}", "resourceLimits.cpu");
	expect_400("{\"pids\":\"1k\"}", "resourceLimits.pids");
	expect_400("{\"pids\":\"999999999\"}", "resourceLimits.pids");
	expect_400("{\"disk\":\"10 Gi\"}", "resourceLimits.disk");
	expect_400("{\"io\":\"rbps=fast\"}", "resourceLimits.io");
	expect_400("{\"memory\":512}", "resourceLimits");
	/* What cell does not enforce is refused, not ignored (a GPU above all). */
	expect_400("{\"gpu\":\"1\"}", "resourceLimits.gpu is not supported");
	expect_400("{\"cpu\":\"1\",\"ephemeral-storage\":\"1Gi\"}",
		   "resourceLimits.ephemeral-storage is not supported");
	/* Within the policy's maximum (8 cores) but more than this host has: 503. */
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus < 8) {
		struct h_resp r;
		ck_assert_int_eq(create_status("{\"cpu\":\"8\"}", &r), 503);
		ck_assert_str_eq(h_err_code(&r), "HOST_OUT_OF_CAPACITY");
		ck_assert_msg(strstr(h_jstr(r.json, "message"), "resourceLimits.cpu"), "%s",
			      r.body);
		h_resp_free(&r);
	}
	ck_assert_int_eq(h_sandbox_count(), before);
}
END_TEST

START_TEST(usage_and_metrics)
{
	/* "gpu": "0" asks for nothing, and is taken. */
	char *id = create_limited("{\"cpu\":\"1500m\",\"memory\":\"300Mi\",\"gpu\":\"0\"}");
	char *path = h_fmt("/v1/sandboxes/%s", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "resourceLimits.memory"), "300Mi");
	ck_assert_msg(json_is_number(h_jget(r.json, "usage.cpuSeconds")), "%s", r.body);
	ck_assert_int_gt(h_jint(r.json, "usage.memoryBytes"), 0);
	ck_assert_int_ge(h_jint(r.json, "usage.memoryPeakBytes"), 0);
	ck_assert_int_ge(h_jint(r.json, "usage.pids"), 1);
	h_resp_free(&r);

	char *mpath = h_fmt("/v1/sandboxes/%s/proxy/44772/metrics", id);
	ck_assert_int_eq(h_http("GET", mpath, NULL, &r), 200);
	ck_assert_msg(json_number_value(h_jget(r.json, "cpu_count")) == 2.0, "%s", r.body);
	ck_assert_msg(json_number_value(h_jget(r.json, "mem_total_mib")) == 300.0, "%s", r.body);
	ck_assert_msg(json_number_value(h_jget(r.json, "mem_used_mib")) > 0, "%s", r.body);
	ck_assert_msg(json_is_number(h_jget(r.json, "cpu_used_pct")), "%s", r.body);
	ck_assert_int_gt(h_jint(r.json, "timestamp"), 1700000000000LL);
	h_resp_free(&r);

	json_t *ins = h_inspect(id);
	ck_assert_int_eq(h_jint(ins, "limits.memoryBytes"), 300LL << 20);
	ck_assert_int_eq(h_jint(ins, "limits.cpuMillis"), 1500);
	ck_assert_int_eq(h_jint(ins, "limits.pids"), 1024); /* the policy's default */
	json_decref(ins);
	free(mpath);
	free(path);
	free(id);
}
END_TEST

/* Has this process (root, as celld) CAP_SYS_RESOURCE, which lowering a process's
 * oom_score_adj takes? Some containers withhold it. */
static bool has_sys_resource(void)
{
	char *status = h_read_file("/proc/self/status");
	ck_assert(status);
	const char *eff = strstr(status, "CapEff:");
	ck_assert(eff);
	unsigned long long caps = strtoull(eff + 7, NULL, 16);
	free(status);
	return caps >> 24 & 1; /* CAP_SYS_RESOURCE */
}

START_TEST(memory_hog_oom_killed_inside_only)
{
	char *id = create_limited("{\"memory\":\"64Mi\"}");
	struct h_exec e;
	/* dd allocates and fills a 256 MiB buffer: four times the limit. */
	ck_assert_int_eq(h_exec(id, "dd if=/dev/zero of=/dev/null bs=256M count=1", NULL, &e), 0);
	ck_assert_msg(e.errored, "the hog was not killed: %s", e.err);
	ck_assert_int_eq(e.exit_code, 137);
	char *ev = json_dumps(e.error, JSON_COMPACT);
	ck_assert_msg(strstr(ev, "OOM"), "no OOM note in %s", ev);
	free(ev);
	char *cid = strdup(e.cmd_id);
	h_exec_free(&e);

	char *spath = h_fmt("/v1/sandboxes/%s/proxy/44772/command/status/%s", id, cid);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", spath, NULL, &r), 200);
	ck_assert_msg(strstr(h_jstr(r.json, "error"), "OOM"), "status without OOM: %s", r.body);
	h_resp_free(&r);

	/* The sandbox lives on (its init is never the victim, where celld may say so) and
	 * celld is untouched. */
	char *out = h_sh(id, "echo alive; cat /proc/1/oom_score_adj /proc/self/oom_score_adj");
	ck_assert_str_eq(out, has_sys_resource() ? "alive\n-1000\n500\n" : "alive\n0\n500\n");
	ck_assert(h_celld_alive());
	char *path = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(h_jstr(r.json, "status.state"), "Running");
	ck_assert_int_ge(h_jint(r.json, "usage.oomKills"), 1);
	h_resp_free(&r);
	free(path);
	free(out);
	free(spath);
	free(cid);
	free(id);
}
END_TEST

/* tmpfs pages are charged to the sandbox's memory but cannot be reclaimed by an OOM kill:
 * /tmp and /dev/shm are sized at half the memory limit, so filling one ends in ENOSPC and
 * the sandbox keeps memory to run the rm. */
START_TEST(tmpfs_sized_by_memory)
{
	char *id = create_limited("{\"memory\":\"64Mi\"}");
	char *df = h_sh(id, "df -k /tmp /dev/shm | awk 'NR>1 {print $2}'");
	ck_assert_str_eq(df, "32768\n32768\n");
	char *out = h_sh(id, "dd if=/dev/zero of=/tmp/fill bs=1M count=48 2>&1; echo rc=$?");
	ck_assert_msg(strstr(out, "No space left on device") && strstr(out, "rc=1"),
		      "filling /tmp past half of 64Mi: %s", out);
	ck_assert_int_eq(h_sh_code(id, "rm /tmp/fill && echo ok >/tmp/after"), 0);
	free(out);
	free(df);
	free(id);
}
END_TEST

START_TEST(fork_bomb_hits_pids_limit)
{
	char *bomb = create_limited("{\"pids\":\"64\"}");
	char *other = h_create("busybox", NULL);
	struct h_exec e;
	struct h_exec_opts bg = {.background = true};
	ck_assert_int_eq(h_exec(bomb, "b() { b | b & }; b", &bg, &e), 0);
	h_exec_free(&e);
	h_sleep_ms(1500);
	/* The other sandbox and celld carry on. */
	char *out = h_sh(other, "echo fine");
	ck_assert_str_eq(out, "fine\n");
	free(out);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", "/v1/info", NULL, &r), 200);
	h_resp_free(&r);
	char *path = h_fmt("/v1/sandboxes/%s", bomb);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	long long pids = h_jint(r.json, "usage.pids");
	ck_assert_msg(pids > 0 && pids <= 64, "pids %lld", pids);
	h_resp_free(&r);
	/* The limit was reached, not merely approached: the pids controller counted forks it
	 * refused (read from the sandbox's own read-only view of its cgroup). */
	long refused = -1;
	for (int i = 0; i < 20 && refused < 0; i++) { /* a fork of its own may be refused too */
		struct h_exec ev;
		h_exec(bomb,
		       "cat /sys/fs/cgroup/pids.events 2>/dev/null || "
		       "cat /sys/fs/cgroup/pids/pids.events",
		       NULL, &ev);
		if (ev.complete && ev.out && !strncmp(ev.out, "max ", 4))
			refused = atol(ev.out + 4);
		h_exec_free(&ev);
		if (refused < 0)
			h_sleep_ms(500);
	}
	ck_assert_msg(refused > 0, "pids.events shows no refused fork (%ld)", refused);
	ck_assert_int_eq(h_delete(bomb), 204);
	free(path);
	free(other);
	free(bomb);
}
END_TEST

/* ---- socket buffers ---- */

#define SOCK_MEMORY (32ull << 20)

/* Field field (from 0) of a /proc/sys file of numbers. */
static uint64_t sysctl_field(const char *path, int field)
{
	char *text = h_read_file(path);
	ck_assert_msg(text, "reading %s", path);
	char *c = text, *end;
	uint64_t v = strtoull(c, &end, 10);
	for (int i = 0; i < field; i++) {
		ck_assert_msg(end != c, "%s has no field %d: %s", path, field, text);
		c = end;
		v = strtoull(c, &end, 10);
	}
	ck_assert_msg(end != c, "%s has no field %d: %s", path, field, text);
	free(text);
	return v;
}

/* Pages of socket memory the host's protocol proto ("TCP:", "UDP:") holds now. */
static uint64_t sockstat_pages(const char *proto)
{
	char *text = h_read_file("/proc/net/sockstat");
	ck_assert(text);
	const char *line = strstr(text, proto), *m = line ? strstr(line, " mem ") : NULL;
	uint64_t v = m ? strtoull(m + 5, NULL, 10) : 0;
	free(text);
	return v;
}

/* What the helper may queue: four times the sandbox's memory, but never more than half of
 * what separates this shared host from the lowest of its socket memory thresholds (the
 * first field of net.ipv4.tcp_mem and udp_mem, below which the kernel does not regulate at
 * all), so that even an unbounded sandbox does not squeeze anyone else's sockets. 0 when
 * that leaves too little to tell a bound from none. */
static uint64_t socket_target(void)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t tcp = sysctl_field("/proc/sys/net/ipv4/tcp_mem", 0);
	uint64_t udp = sysctl_field("/proc/sys/net/ipv4/udp_mem", 0);
	uint64_t tcp_used = sockstat_pages("TCP:"), udp_used = sockstat_pages("UDP:");
	uint64_t room = tcp > tcp_used ? tcp - tcp_used : 0;
	if (udp < room + udp_used)
		room = udp > udp_used ? udp - udp_used : 0;
	uint64_t target = room * page / 2;
	if (target > 4 * SOCK_MEMORY)
		target = 4 * SOCK_MEMORY;
	return target >= 2 * SOCK_MEMORY ? target : 0;
}

struct sock_reading {
	unsigned long long sockets, payload, mem;
	bool any;
	char end[16]; /* how the probe ended: "target", "refused", "stopped"; "" when killed */
};

/* Run sockmem_probe KIND in a sandbox limited to SOCK_MEMORY; its last reading. The probe
 * ends on its own when the kernel stops giving buffers, or is OOM-killed (v2 charges the
 * buffers to memory, so it may meet the limit there first). */
static struct sock_reading fill_sockets(const char *id, const char *kind, uint64_t target)
{
	h_upload_helper(id, "sockmem_probe");
	char *cmd = h_fmt("/root/sockmem_probe %s %" PRIu64, kind, target);
	struct h_exec e;
	struct h_exec_opts o = {.max_seconds = 240};
	ck_assert_int_eq(h_exec(id, cmd, &o, &e), 0);
	struct sock_reading r = {0};
	char *out = strdup(e.out); /* e.out stays whole for the message */
	for (char *save = NULL, *line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		struct sock_reading l;
		if (sscanf(line, "sockets %llu payload %llu mem %llu", &l.sockets, &l.payload,
			   &l.mem) == 3)
			r.sockets = l.sockets, r.payload = l.payload, r.mem = l.mem, r.any = true;
		sscanf(line, "end %15s", r.end);
	}
	free(out);
	char *why = e.error ? json_dumps(e.error, JSON_COMPACT) : NULL;
	ck_assert_msg(r.any && (r.end[0] || e.exit_code == 137),
		      "%s probe: exit %d, error %.300s, out '%.300s', err '%.200s'", kind,
		      e.exit_code, why ? why : "none", e.out, e.err);
	free(why);
	fprintf(stderr, "it_limits: %s: %llu sockets queued %llu bytes, holding %llu (%s)\n", kind,
		r.sockets, r.payload, r.mem, r.end[0] ? r.end : "OOM-killed");
	h_exec_free(&e);
	free(cmd);
	return r;
}

static void sockets_within_memory(const char *kind)
{
	uint64_t target = socket_target();
	if (!target)
		h_skip_host("tcp-udp-mem-headroom",
			    "%s buffers: net.ipv4.tcp_mem/udp_mem pressure minus the host's "
			    "use leaves less than %llu bytes",
			    kind, 2 * SOCK_MEMORY);
	char *id = create_limited("{\"memory\":\"32Mi\"}");
	struct sock_reading r = fill_sockets(id, kind, target);
	/* The probe works: the first socket gets buffers. */
	ck_assert_msg(r.payload >= (64u << 10), "%s: only %llu bytes queued", kind, r.payload);
	/* Within the limit, give or take what the kernel lets each socket take for its
	 * progress past any limit: a datagram or a segment (64 KiB at most) per socket, a
	 * quarter of the limit in all at most, and an eighth more of bookkeeping. The more
	 * sockets the probe opened before new ones stopped gaining, the more of it: a
	 * sandbox without the limit reaches the probe's target (at least twice the limit)
	 * through few, full sockets, far past this. */
	unsigned long long slack = r.sockets * (64ull << 10);
	if (slack > SOCK_MEMORY / 4)
		slack = SOCK_MEMORY / 4;
	ck_assert_msg(r.payload <= SOCK_MEMORY + slack &&
			  r.mem <= SOCK_MEMORY + SOCK_MEMORY / 8 + slack,
		      "%s: a sandbox limited to %llu bytes of memory queued %llu bytes (holding "
		      "%llu) in %llu sockets' buffers",
		      kind, SOCK_MEMORY, r.payload, r.mem, r.sockets);
	free(id);
}

/* The host-side path of file in the sandbox's cgroup (instance: in the cgroup that holds
 * every sandbox of this celld), in the hierarchy of controller ("" for cgroup v2), from the
 * sandbox init's /proc/PID/cgroup. */
static char *cgroup_file(const char *id, const char *controller, const char *file, bool instance)
{
	json_t *ins = h_inspect(id);
	long long pid = h_jint(ins, "pid");
	json_decref(ins);
	ck_assert_int_gt(pid, 0);
	char *proc = h_fmt("/proc/%lld/cgroup", pid);
	char *cg = h_read_file(proc);
	ck_assert_msg(cg, "reading %s", proc);
	free(proc);
	char *found = NULL;
	for (char *save = NULL, *line = strtok_r(cg, "\n", &save); line && !found;
	     line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		const char *ctl = c1 + 1;
		bool match = controller[0] ? !strcmp(ctl, controller) ||
						 (strstr(ctl, controller) && strchr(ctl, ','))
					   : !ctl[0];
		char *slash = strrchr(c2 + 1, '/');
		if (!match || !slash)
			continue;
		if (instance)
			*slash = '\0'; /* the sandbox's dir → the instance dir */
		found = h_fmt("/sys/fs/cgroup%s%s%s/%s", ctl[0] ? "/" : "", ctl, c2 + 1, file);
	}
	free(cg);
	ck_assert_msg(found, "no %s cgroup for sandbox %s", controller[0] ? controller : "v2", id);
	return found;
}

static char *instance_file(const char *id, const char *controller, const char *file)
{
	return cgroup_file(id, controller, file, true);
}

static bool backend_v2(const char *id)
{
	json_t *ins = h_inspect(id);
	bool v2 = !strcmp(h_jstr(ins, "cgroup.backend"), "v2");
	json_decref(ins);
	return v2;
}

START_TEST(tcp_buffers_within_memory)
{
	sockets_within_memory("tcp");
}
END_TEST

START_TEST(udp_buffers_within_memory)
{
	sockets_within_memory("udp");
}
END_TEST

START_TEST(unix_buffers_within_memory)
{
	sockets_within_memory("unix");
}
END_TEST

/* Where socket buffers are charged apart from memory (cgroup v1), their limit is shown,
 * and all sandboxes together are held below the host's TCP pressure threshold. */
START_TEST(socket_limits_shown)
{
	char *id = create_limited("{\"memory\":\"64Mi\"}");
	json_t *ins = h_inspect(id);
	json_t *sock = h_jget(ins, "limits.socketMemoryBytes");
	ck_assert_msg(json_is_integer(h_jget(ins, "usage.socketMemoryBytes")), "no usage");
	if (backend_v2(id)) {
		ck_assert_msg(json_is_null(sock), "v2 socket limit shown apart");
	} else {
		ck_assert_int_eq(json_integer_value(sock), 16ll << 20);
		char *path = instance_file(id, "memory", "memory.kmem.tcp.limit_in_bytes");
		char *v = h_read_file(path);
		ck_assert_msg(v, "reading %s", path);
		uint64_t total = strtoull(v, NULL, 10);
		uint64_t pressure =
		    sysctl_field("/proc/sys/net/ipv4/tcp_mem", 1) * (uint64_t)sysconf(_SC_PAGESIZE);
		ck_assert_msg(total > 0 && total <= pressure / 2,
			      "%s: %" PRIu64 " (tcp_mem pressure %" PRIu64 " bytes)", path, total,
			      pressure);
		free(v);
		free(path);
	}
	json_decref(ins);
	free(id);
}
END_TEST

/* ---- the host's pid space ---- */

static uint64_t host_tasks(const char **what)
{
	uint64_t pid_max = sysctl_field("/proc/sys/kernel/pid_max", 0);
	uint64_t threads = sysctl_field("/proc/sys/kernel/threads-max", 0);
	*what = threads && threads < pid_max ? "kernel.threads-max" : "kernel.pid_max";
	return threads && threads < pid_max ? threads : pid_max;
}

/* No sandbox may ask for the host's whole pid space, and the cgroup over all of them is
 * bounded below it. */
START_TEST(pids_below_host)
{
	const char *what;
	uint64_t host = host_tasks(&what);
	/* The policy's maximum (32768) unless the host has less. */
	if (host <= 32768) {
		struct h_resp r;
		char *lim = h_fmt("{\"pids\":\"%" PRIu64 "\"}", host);
		long st = create_status(lim, &r);
		ck_assert_msg(st == 400, "pids %" PRIu64 " (all of %s): HTTP %ld", host, what, st);
		char *num = h_fmt("%s %" PRIu64, what, host);
		const char *msg = h_jstr(r.json, "message");
		ck_assert_msg(strstr(msg, "resourceLimits.pids") && strstr(msg, num),
			      "message '%s' misses the field or '%s'", msg, num);
		free(num);
		free(lim);
		h_resp_free(&r);
	}
	char *id = h_create("busybox", NULL);
	char *path = instance_file(id, backend_v2(id) ? "" : "pids", "pids.max");
	char *v = h_read_file(path);
	ck_assert_msg(v, "reading %s", path);
	uint64_t total = strtoull(v, NULL, 10);
	ck_assert_msg(total >= 1024 && total < host, "%s: %s (%s %" PRIu64 ")", path, h_trim(v),
		      what, host);
	free(v);
	free(path);
	free(id);
}
END_TEST

/* A policy dir T/<name> holding resources/default.json = json and the source tree's
 * seccomp profiles; returns its path. */
static char *policy_dir(const char *name, const char *json)
{
	char *pol = h_fmt("%s/%s", H.dir, name);
	char *res = h_fmt("%s/resources", pol);
	char *file = h_fmt("%s/default.json", res);
	char *seccomp = h_fmt("%s/seccomp", pol);
	char *real_seccomp = h_fmt("%s/policies/seccomp", H.src);
	mkdir(pol, 0755);
	mkdir(res, 0755);
	if (access(seccomp, F_OK) != 0)
		ck_assert_int_eq(symlink(real_seccomp, seccomp), 0);
	char *network = h_fmt("%s/network", pol);
	char *real_network = h_fmt("%s/policies/network", H.src);
	if (access(network, F_OK) != 0)
		ck_assert_int_eq(symlink(real_network, network), 0);
	free(network);
	free(real_network);
	h_write_file(file, json, 0644);
	free(real_seccomp);
	free(seccomp);
	free(file);
	free(res);
	return pol;
}

static long long pids_of(const char *id)
{
	char *path = h_fmt("/v1/sandboxes/%s", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	long long n = h_jint(r.json, "usage.pids");
	h_resp_free(&r);
	free(path);
	return n;
}

/* Sandbox id starts 90 sleepers (more than its own limit allows) and keeps what it got. */
static long long start_sleepers(const char *id)
{
	struct h_exec e;
	/* Their output goes elsewhere, or the command would not end before they do. */
	h_exec(id,
	       "i=0; while [ $i -lt 90 ]; do sleep 1000 >/dev/null 2>&1 & i=$((i+1)); done "
	       "2>/dev/null",
	       NULL, &e);
	h_exec_free(&e);
	return pids_of(id);
}

/* The total is enforced by the kernel, not merely checked: two sandboxes whose own pids
 * limits add up to more than the policy's total.pids get no more than that together. */
START_TEST(pids_total_enforced)
{
	char *src = h_fmt("%s/policies/resources/default.json", H.src);
	json_t *pol = json_load_file(src, 0, NULL);
	ck_assert(pol);
	json_object_set_new(pol, "total", json_pack("{s:s}", "pids", "100"));
	char *text = json_dumps(pol, JSON_INDENT(2));
	char *dir = policy_dir("totalpolicy", text);
	h_celld_restart_with((const char *const[]){"--policies", dir, NULL});

	char *a = create_limited("{\"pids\":\"80\"}");
	char *b = create_limited("{\"pids\":\"80\"}");
	long long na = start_sleepers(a), nb = start_sleepers(b);
	fprintf(stderr, "it_limits: under total.pids 100: %lld + %lld tasks\n", na, nb);
	ck_assert_msg(na >= 60, "the first sandbox got only %lld tasks", na);
	ck_assert_msg(na + nb <= 100 && nb < 80,
		      "two sandboxes limited to 80 tasks each hold %lld + %lld under total.pids "
		      "100",
		      na, nb);
	/* The bound is the instance cgroup's, and no sandbox may ask for more on its own. */
	char *path = instance_file(a, backend_v2(a) ? "" : "pids", "pids.max");
	char *max = h_read_file(path);
	ck_assert_msg(max && atoi(max) == 100, "%s: %s", path, max ? max : "missing");
	struct h_resp r;
	ck_assert_int_eq(create_status("{\"pids\":\"101\"}", &r), 400);
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "total.pids"), "%s", r.body);
	h_resp_free(&r);
	ck_assert_int_eq(h_delete(a), 204);
	ck_assert_int_eq(h_delete(b), 204);
	free(max);
	free(path);
	free(b);
	free(a);
	free(dir);
	free(text);
	json_decref(pol);
	free(src);
}
END_TEST

static double cpu_seconds(const char *id)
{
	char *path = h_fmt("/v1/sandboxes/%s", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	double v = json_number_value(h_jget(r.json, "usage.cpuSeconds"));
	h_resp_free(&r);
	free(path);
	return v;
}

/* The sandbox's cgroup file (host side) read whole; asserts. */
static char *sandbox_cgroup_read(const char *id, const char *controller, const char *file)
{
	char *path = cgroup_file(id, controller, file, false);
	char *text = h_read_file(path);
	ck_assert_msg(text, "reading %s", path);
	free(path);
	return text;
}

/* The value of "key N" in a cgroup's flat keyed file (cpu.stat); -1 when missing. */
static long long keyed(const char *text, const char *key)
{
	size_t n = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, n) && p[n] == ' ')
			return atoll(p + n + 1);
	return -1;
}

/* The kernel's bandwidth counters of a sandbox's cgroup: periods in which it ran under its
 * quota, periods it was throttled in, and the CPU time it used (microseconds). */
struct cpu_counters {
	long long periods, throttled, usage_us;
};

static struct cpu_counters cpu_counters(const char *id, bool v2)
{
	struct cpu_counters c;
	char *stat = sandbox_cgroup_read(id, v2 ? "" : "cpu", "cpu.stat");
	c.periods = keyed(stat, "nr_periods");
	c.throttled = keyed(stat, "nr_throttled");
	if (v2) {
		c.usage_us = keyed(stat, "usage_usec");
	} else {
		char *ns = sandbox_cgroup_read(id, "cpuacct", "cpuacct.usage");
		c.usage_us = atoll(ns) / 1000;
		free(ns);
	}
	ck_assert_msg(c.periods >= 0 && c.throttled >= 0 && c.usage_us >= 0, "cpu.stat: %s", stat);
	free(stat);
	return c;
}

/* cpu "500m" is the kernel's bandwidth control of the sandbox's cgroup: its files hold 50
 * ms of every 100 ms, and with two spinning shells (two cores' worth, unlimited) the kernel
 * throttles it period after period and, by its own counters, lets it use no more than its
 * quota in each. No wall clock decides: a loaded host only lowers what the loops use. The
 * share a busy loop gets, in cores, is a number for `make bench`. */
START_TEST(busy_loop_gets_half_a_core)
{
	char *id = create_limited("{\"cpu\":\"500m\"}");
	bool v2 = backend_v2(id);
	char *max = sandbox_cgroup_read(id, v2 ? "" : "cpu", v2 ? "cpu.max" : "cpu.cfs_quota_us");
	ck_assert_str_eq(h_trim(max), v2 ? "50000 100000" : "50000");
	free(max);
	if (!v2) {
		max = sandbox_cgroup_read(id, "cpu", "cpu.cfs_period_us");
		ck_assert_str_eq(h_trim(max), "100000");
		free(max);
	}
	struct h_exec e;
	struct h_exec_opts bg = {.background = true};
	ck_assert_int_eq(h_exec(id, "while :; do :; done & while :; do :; done", &bg, &e), 0);
	h_exec_free(&e);
	struct cpu_counters a = cpu_counters(id, v2), b = a;
	double c0 = cpu_seconds(id);
	/* a hang guard: twenty throttled periods come within a few seconds on any host */
	for (int i = 0; i < 600 && b.throttled - a.throttled < 20; i++) {
		h_sleep_ms(100);
		b = cpu_counters(id, v2);
	}
	double c1 = cpu_seconds(id);
	ck_assert_msg(b.throttled - a.throttled >= 20, "throttled in %lld of %lld periods",
		      b.throttled - a.throttled, b.periods - a.periods);
	ck_assert_msg(c1 > c0, "celld's usage.cpuSeconds did not grow (%.3f)", c0);
	/* at most the quota in every period, and one more for the periods at either end, plus
	 * what the kernel lets a CPU run past the quota before it notices (a tick each) */
	long long periods = b.periods - a.periods, used = b.usage_us - a.usage_us;
	long long bound = (periods + 2) * 50000 + 2 * 10000;
	fprintf(stderr, "it_limits: cpu 500m: %lld us in %lld periods (%.2f cores)\n", used,
		periods, periods ? used / (periods * 100000.0) : 0);
	ck_assert_msg(used <= bound, "%lld us of CPU in %lld periods of 50000 us each", used,
		      periods);
	free(id);
}
END_TEST

/* A celld whose resource policy is wrong refuses to start, naming the file and the field. */
static void expect_policy_refused(const char *json, const char *field)
{
	char *pol = policy_dir("badpolicy", json);
	char *state = h_fmt("%s/badpolicy-state", H.dir);
	char *sock = h_fmt("%s/badpolicy.sock", H.dir);
	char *celld = h_fmt("%s/celld", H.bin);
	char *init = h_fmt("%s/cell-init", H.bin);
	char *argv[] = {celld,	    "--state-dir", state, "--images",	H.images, "--socket", sock,
			"--no-tcp", "--init",	   init,  "--policies", pol,	  NULL};
	struct h_proc p = {0};
	h_run(argv, NULL, 30, &p);
	ck_assert_msg(p.status == 1, "celld started with policy %s", json);
	ck_assert_msg(p.err && strstr(p.err, "resources/default.json") && strstr(p.err, field),
		      "refusal does not name %s: %s", field, p.err ? p.err : "");
	ck_assert_msg(access(sock, F_OK) != 0, "the refused celld left its socket");
	h_proc_free(&p);
	free(init);
	free(celld);
	free(sock);
	free(state);
	free(pol);
}

START_TEST(bad_policy_refuses_start)
{
	static const char rl[] = "\"rlimits\": {\"core\": {\"soft\": 0, \"hard\": 0}}";
	char *j = h_fmt("{\"defaults\": {\"cpu\": \"1\", \"memory\": \"2GB\", \"pids\": \"10\", "
			"\"disk\": \"1Gi\"}, \"maximum\": {\"cpu\": \"2\", \"memory\": \"4Gi\", "
			"\"pids\": \"100\", \"disk\": \"2Gi\"}, %s}",
			rl);
	expect_policy_refused(j, "defaults.memory");
	free(j);
	j = h_fmt("{\"defaults\": {\"cpu\": \"4\", \"memory\": \"1Gi\", \"pids\": \"10\", "
		  "\"disk\": \"1Gi\"}, \"maximum\": {\"cpu\": \"2\", \"memory\": \"4Gi\", "
		  "\"pids\": \"100\", \"disk\": \"2Gi\"}, %s}",
		  rl);
	expect_policy_refused(j, "defaults.cpu");
	free(j);
	expect_policy_refused("{\"defaults\": {\"cpu\": \"1\", \"memory\": \"1Gi\", \"pids\": "
			      "\"10\", \"disk\": \"1Gi\"}, \"maximum\": {\"cpu\": \"2\", "
			      "\"memory\": \"4Gi\", \"pids\": \"100\", \"disk\": \"2Gi\"}, "
			      "\"rlimits\": {\"cores\": {\"soft\": 0, \"hard\": 0}}}",
			      "rlimits.cores");
	j = h_fmt("{\"defaults\": {\"cpu\": \"1\", \"memory\": \"1Gi\", \"pids\": \"10\", "
		  "\"disk\": \"1Gi\"}, \"maximum\": {\"cpu\": \"2\", \"memory\": \"4Gi\", "
		  "\"pids\": \"100\", \"disk\": \"2Gi\"}, \"total\": {\"pid\": \"50\"}, %s}",
		  rl);
	expect_policy_refused(j, "total.pid");
	free(j);
	expect_policy_refused("{\"defaults\": {}, \"maximum\": {}}", "defaults.cpu is missing");
	expect_policy_refused("not json", "not a JSON object");
}
END_TEST

static Suite *limits_suite(void)
{
	Suite *s = suite_create("limits");
	tcase_add_test(h_tcase(s, "limits_visible_read_only", 120), limits_visible_read_only);
	tcase_add_test(h_tcase(s, "bad_limits_refused", 120), bad_limits_refused);
	tcase_add_test(h_tcase(s, "usage_and_metrics", 120), usage_and_metrics);
	tcase_add_test(h_tcase(s, "memory_hog_oom_killed_inside_only", 120),
		       memory_hog_oom_killed_inside_only);
	tcase_add_test(h_tcase(s, "fork_bomb_hits_pids_limit", 120), fork_bomb_hits_pids_limit);
	tcase_add_test(h_tcase(s, "tmpfs_sized_by_memory", 120), tmpfs_sized_by_memory);
	tcase_add_test(h_tcase(s, "io_limits_applied", 120), io_limits_applied);
	tcase_add_test(h_tcase(s, "io_limits_kept_when_started_again", 120),
		       io_limits_kept_when_started_again);
	tcase_add_test(h_tcase(s, "busy_loop_gets_half_a_core", 120), busy_loop_gets_half_a_core);
	tcase_add_test(h_tcase(s, "bad_policy_refuses_start", 120), bad_policy_refuses_start);
	tcase_add_test(h_tcase(s, "tcp_buffers_within_memory", 300), tcp_buffers_within_memory);
	tcase_add_test(h_tcase(s, "udp_buffers_within_memory", 300), udp_buffers_within_memory);
	tcase_add_test(h_tcase(s, "unix_buffers_within_memory", 300), unix_buffers_within_memory);
	tcase_add_test(h_tcase(s, "socket_limits_shown", 120), socket_limits_shown);
	tcase_add_test(h_tcase(s, "pids_below_host", 120), pids_below_host);
	tcase_add_test(h_tcase(s, "pids_total_enforced", 180), pids_total_enforced);
	return s;
}

int main(void)
{
	return h_main(limits_suite());
}
