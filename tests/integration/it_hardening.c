/* Hardening of the runtime: the capability sets and no_new_privs of cell-init and its
 * commands, masked and read-only /proc and /sys paths, device nodes, the hygiene of a
 * command's start (fds, session, cwd, PID 1's binary), and the kernel's per-user pools
 * (inotify, queued signals and POSIX timers, mqueue bytes, terminals), each sandbox's own. Each
 * check looks at the settings from inside a real sandbox; the escape battery (tests/security/) goes
 * further. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <linux/nsfs.h>

#include "cell/pool.h"
#include "harness.h"

/* The kept set of man/cell-policy.5, written out independently of src/runtime/caps.c:
 * CHOWN 0, DAC_OVERRIDE 1, FOWNER 3, FSETID 4, KILL 5, SETGID 6, SETUID 7, SETPCAP 8,
 * NET_BIND_SERVICE 10, SYS_CHROOT 18, AUDIT_WRITE 29, SETFCAP 31. */
#define KEPT_CAPS "00000000a00405fb"
#define NO_CAPS	  "0000000000000000"

#define STATUS_FIELDS                                                                              \
	"grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status | "         \
	"tr -d '\\t' | tr '\\n' ' '"

static const char *const caps_as_root = "CapInh:" NO_CAPS " CapPrm:" KEPT_CAPS " CapEff:" KEPT_CAPS
					" CapBnd:" KEPT_CAPS " CapAmb:" NO_CAPS " NoNewPrivs:1 ";

/* A command run through the API with a uid and gid (and optionally a cwd): stdout, and the
 * exit code (-1 without an end event) in *code. The text of stdout events is collected
 * from the event stream. */
static char *exec_as(const char *id, const char *cmd, int uid, const char *cwd, int *code)
{
	json_t *body = json_pack("{s:s, s:i, s:i, s:b}", "command", cmd, "uid", uid, "gid", uid,
				 "rawOutput", 1); /* the bytes exactly, not execd's lines */
	if (cwd)
		json_object_set_new(body, "cwd", json_string(cwd));
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/command", id);
	struct h_req req = {.method = "POST", .path = path, .body = text};
	struct h_resp resp;
	long status = h_request(&req, &resp);
	ck_assert_msg(status == 200, "exec as %d: HTTP %ld %s", uid, status,
		      resp.body ? resp.body : "");
	*code = -1;
	size_t cap = resp.len + 1, len = 0;
	char *out = calloc(1, cap);
	ck_assert_ptr_nonnull(out);
	for (char *ev = resp.body; ev && *ev;) {
		char *end = strstr(ev, "\n\n");
		if (end)
			*end = '\0';
		json_t *j = json_loads(ev, 0, NULL);
		const char *type = h_jstr(j, "type");
		if (!strcmp(type, "stdout")) {
			const char *t = h_jstr(j, "text");
			size_t n = strlen(t);
			ck_assert_uint_lt(len + n, cap);
			memcpy(out + len, t, n);
			len += n;
		} else if (!strcmp(type, "execution_complete")) {
			*code = 0;
		} else if (!strcmp(type, "error")) {
			*code = atoi(h_jstr(j, "error.evalue"));
			if (*code == 0)
				*code = 255; /* an error that is no exit code (cwd, exec) */
		}
		json_decref(j);
		ev = end ? end + 2 : NULL;
	}
	h_resp_free(&resp);
	free(path);
	free(text);
	return out;
}

START_TEST(caps_of_root_commands)
{
	char *id = h_create("busybox", NULL);
	char *out = h_sh(id, STATUS_FIELDS);
	ck_assert_str_eq(out, caps_as_root);
	free(out);
	/* cell-init itself (PID 1): the same sets, so nothing it starts can have more. */
	out = h_sh(id, "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' "
		       "/proc/1/status | tr -d '\\t' | tr '\\n' ' '");
	ck_assert_str_eq(out, caps_as_root);
	free(out);
	free(id);
}
END_TEST

/* A non-root command loses every capability at its setuid; the bounding set stays the
 * kept one and no_new_privs stays on, so no setuid binary gives root back. */
START_TEST(caps_of_uid_1000_commands)
{
	char *id = h_create("busybox", NULL);
	int code;
	char *out = exec_as(id, "id -u; id -g; " STATUS_FIELDS, 1000, "/", &code);
	ck_assert_int_eq(code, 0);
	ck_assert_str_eq(out, "1000\n1000\nCapInh:" NO_CAPS " CapPrm:" NO_CAPS " CapEff:" NO_CAPS
			      " CapBnd:" KEPT_CAPS " CapAmb:" NO_CAPS " NoNewPrivs:1 ");
	free(out);
	free(id);
}
END_TEST

START_TEST(root_can_do_ordinary_admin_work)
{
	char *id = h_create("busybox", NULL);
	/* chown to another uid (CHOWN), become nobody (SETUID, SETGID), chroot (SYS_CHROOT). */
	char *out = h_sh(id, "touch /tmp/f && chown 65534:65534 /tmp/f && stat -c %u:%g /tmp/f && "
			     "su -s /bin/sh -c 'id -u' nobody && "
			     "chroot / /bin/true && echo chroot-ok");
	ck_assert_str_eq(out, "65534:65534\n65534\nchroot-ok\n");
	free(out);
	/* Root writes a file it does not own (DAC_OVERRIDE) and chmods it (FOWNER). */
	out = h_sh(id, "chmod 600 /tmp/f && echo x > /tmp/f && chmod 640 /tmp/f && "
		       "stat -c %a /tmp/f");
	ck_assert_str_eq(out, "640\n");
	free(out);
	/* Root signals a process of another uid (KILL). */
	out =
	    h_sh(id, "su -s /bin/sh -c 'exec sleep 100' nobody & p=$!; "
		     "until grep -q '^Uid:[[:space:]]*65534' /proc/$p/status; do sleep 0.05; done; "
		     "kill $p && wait $p; echo killed $?");
	ck_assert_str_eq(out, "killed 143\n");
	free(out);
	free(id);
}
END_TEST

/* A server on a port below 1024 as root (NET_BIND_SERVICE), none as another uid. */
START_TEST(root_binds_port_80)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "mkdir -p /tmp/www && echo served > /tmp/www/index.html && "
		      "httpd -p 127.0.0.1:80 -h /tmp/www </dev/null >/dev/null 2>&1"));
	char *out = h_sh(id, H_FETCH "fetch 80 index.html");
	ck_assert_str_eq(out, "served\n");
	free(out);
	int code;
	out = exec_as(id, "httpd -p 127.0.0.1:81 -h /tmp/www </dev/null >/dev/null 2>&1", 1000, "/",
		      &code);
	ck_assert_msg(code != 0, "uid 1000 bound port 81");
	free(out);
	free(id);
}
END_TEST

START_TEST(mknod_of_devices_fails)
{
	char *id = h_create("busybox", NULL);
	ck_assert_int_ne(h_sh_code(id, "mknod /tmp/mem c 1 1"), 0);
	ck_assert_int_ne(h_sh_code(id, "mknod /tmp/sda b 8 0"), 0);
	ck_assert_int_ne(h_sh_code(id, "mknod /workspace/null c 1 3"), 0);
	/* mknod itself works: a fifo is no device. */
	char *out = h_sh(id, "mknod /tmp/fifo p && stat -c %F /tmp/fifo");
	ck_assert_str_eq(out, "fifo\n");
	free(out);
	free(id);
}
END_TEST

/* Every char or block device the sandbox can reach is one of the runtime's. */
START_TEST(no_host_device_nodes)
{
	char *id = h_create("busybox", NULL);
	char *out = h_sh(id, "find / \\( -path /proc -o -path /sys -o -path /dev/pts \\) -prune -o "
			     "\\( -type c -o -type b \\) -exec stat -c '%F %t:%T %n' {} \\;");
	static const char *const allowed[] = {
	    "character special file 1:3 /dev/null",    "character special file 1:5 /dev/zero",
	    "character special file 1:7 /dev/full",    "character special file 1:8 /dev/random",
	    "character special file 1:9 /dev/urandom", "character special file 5:0 /dev/tty",
	};
	size_t seen = 0;
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		bool ok = false;
		for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
			ok = ok || !strcmp(line, allowed[i]);
		ck_assert_msg(ok, "device node reachable in the sandbox: %s", line);
		seen++;
	}
	ck_assert_uint_eq(seen, 6);
	free(out);
	free(id);
}
END_TEST

/* Masked files read empty (or not at all); masked dirs are empty and read-only. The host
 * has the paths checked first, so the test cannot pass on a kernel lacking them. */
START_TEST(masked_paths_are_empty)
{
	static const char *const files[] = {
	    "/proc/kcore",	 "/proc/keys",		"/proc/timer_list", "/proc/interrupts",
	    "/proc/sched_debug", "/proc/latency_stats", "/proc/key-users"};
	static const char *const dirs[] = {
	    "/sys/firmware", "/sys/devices/virtual/powercap",
	    "/proc/acpi",    "/proc/asound",
	    "/proc/scsi",    "/sys/devices/system/cpu/cpu0/thermal_throttle"};
	char *id = h_create("busybox", NULL);
	int checked = 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (access(files[i], F_OK) != 0)
			continue;
		/* The null device, read-only: reads are empty, writes vanish. */
		char *cmd = h_fmt("stat -c '%%F %%t:%%T' %s; n=$(cat %s | wc -c); echo $n",
				  files[i], files[i]);
		char *out = h_sh(id, cmd);
		ck_assert_msg(!strcmp(out, "character special file 1:3\n0\n"),
			      "%s in the sandbox: %s", files[i], out);
		free(out);
		free(cmd);
		checked++;
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (access(dirs[i], F_OK) != 0)
			continue;
		char *cmd = h_fmt("ls -A %s; touch %s/x 2>/dev/null && echo WRITABLE; true",
				  dirs[i], dirs[i]);
		char *out = h_sh(id, cmd);
		ck_assert_msg(!strcmp(out, ""), "%s in the sandbox: %s", dirs[i], out);
		free(out);
		free(cmd);
		checked++;
	}
	/* The ones every kernel this runs on has. */
	ck_assert_int_ge(checked, 4);
	ck_assert_int_eq(access("/proc/keys", F_OK), 0);
	ck_assert_int_eq(access("/sys/firmware", F_OK), 0);
	/* What is masked is still shown as present (programs that stat it keep working). */
	char *out = h_sh(id, "test -e /proc/keys && test -d /sys/firmware && echo present");
	ck_assert_str_eq(out, "present\n");
	free(out);
	free(id);
}
END_TEST

/* Mount options of a mount point, from the sandbox's mountinfo (last mount wins). */
static char *mount_opts(const char *id, const char *mnt)
{
	char *cmd =
	    h_fmt("awk '$5 == \"%s\" { o = $6 } END { print o }' /proc/self/mountinfo", mnt);
	char *out = h_trim(h_sh(id, cmd));
	free(cmd);
	return out;
}

static bool has_opt(const char *opts, const char *opt)
{
	size_t n = strlen(opt);
	for (const char *p = opts; p && *p;) {
		if (!strncmp(p, opt, n) && (p[n] == ',' || !p[n]))
			return true;
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	return false;
}

START_TEST(read_only_proc_and_sys)
{
	char *id = h_create("busybox", NULL);
	static const char *const ro[] = {
	    "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/sys"};
	for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++) {
		if (access(ro[i], F_OK) != 0)
			continue;
		char *opts = mount_opts(id, ro[i]);
		ck_assert_msg(has_opt(opts, "ro") && has_opt(opts, "nosuid") &&
				  has_opt(opts, "nodev") && has_opt(opts, "noexec"),
			      "%s is mounted %s", ro[i], opts);
		free(opts);
	}
	/* Knobs of the sandbox's own network namespace, which root there could otherwise
	 * write: the read-only mounts are what stop them. (A new namespace starts with the
	 * host's ip_forward, whatever it is: the write tries the other value.) */
	char *before = h_sh(id, "cat /proc/sys/net/ipv4/ip_forward");
	ck_assert_int_ne(h_sh_code(id, "v=$(cat /proc/sys/net/ipv4/ip_forward); "
				       "echo $((1 - v)) > /proc/sys/net/ipv4/ip_forward"),
			 0);
	ck_assert_int_ne(h_sh_code(id, "echo 100 > /sys/class/net/lo/tx_queue_len"), 0);
	ck_assert_int_ne(h_sh_code(id, "touch /sys/x"), 0);
	ck_assert_int_ne(h_sh_code(id, "mkdir /sys/fs/cgroup/x"), 0);
	/* 'h' only prints help to the kernel log, should the write ever go through. */
	ck_assert_int_ne(h_sh_code(id, "echo h > /proc/sysrq-trigger"), 0);
	char *out = h_sh(id, "cat /proc/sys/net/ipv4/ip_forward");
	ck_assert_str_eq(out, before);
	free(out);
	free(before);
	free(id);
}
END_TEST

/* The host-wide helpers a write could point at a sandbox's binary (CVE-2022-0492 class:
 * release_agent; core_pattern; binfmt_misc). The same value is written back, so nothing
 * changes even if a write went through. */
START_TEST(no_escape_knob_writable)
{
	char *id = h_create("busybox", NULL);
	ck_assert_int_ne(h_sh_code(id, "v=$(cat /proc/sys/kernel/core_pattern) && "
				       "printf '%s\\n' \"$v\" > /proc/sys/kernel/core_pattern"),
			 0);
	ck_assert_int_ne(h_sh_code(id, "v=$(cat /proc/sys/kernel/modprobe) && "
				       "printf '%s\\n' \"$v\" > /proc/sys/kernel/modprobe"),
			 0);
	/* binfmt_misc: neither mountable nor, if present, registrable. */
	ck_assert_int_ne(h_sh_code(id, "mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc"),
			 0);
	char *out = h_sh(id, "for f in /proc/sys/fs/binfmt_misc/register "
			     "$(find /sys/fs/cgroup -name release_agent 2>/dev/null); do "
			     "[ -e \"$f\" ] && (: >> \"$f\") 2>/dev/null && echo \"WRITABLE $f\"; "
			     "done; true");
	ck_assert_msg(!strcmp(out, ""), "%s", out);
	free(out);
	/* No cgroup hierarchy can be mounted to get a release_agent of one's own. */
	ck_assert_int_ne(h_sh_code(id, "mkdir -p /tmp/cg && "
				       "mount -t cgroup -o none,name=cellhardening cgroup /tmp/cg"),
			 0);
	ck_assert_int_ne(h_sh_code(id, "mount -t cgroup2 none /tmp/cg"), 0);
	free(id);
}
END_TEST

/* Without CAP_SYS_ADMIN the masks stay: no umount, no remount, no fresh proc beside them. */
START_TEST(masks_cannot_be_removed)
{
	char *id = h_create("busybox", NULL);
	ck_assert_int_ne(h_sh_code(id, "umount /proc/keys"), 0);
	ck_assert_int_ne(h_sh_code(id, "umount -l /proc/keys"), 0);
	ck_assert_int_ne(h_sh_code(id, "umount -l /sys/firmware"), 0);
	ck_assert_int_ne(h_sh_code(id, "umount -l /proc/sys"), 0);
	ck_assert_int_ne(h_sh_code(id, "mount -o remount,rw /proc/sys"), 0);
	ck_assert_int_ne(h_sh_code(id, "mkdir -p /tmp/p && mount -t proc proc /tmp/p"), 0);
	/* Nor in a nested user namespace, where the mounts are copies the kernel locks (if
	 * such a namespace can be made at all). */
	char *out = h_sh(id, "unshare -r -m sh -c 'umount -l /proc/keys && echo UNMOUNTED; "
			     "mount -o remount,rw,bind /proc/sys 2>/dev/null && echo REMOUNTED' "
			     "2>/dev/null; true");
	ck_assert_msg(!strcmp(out, ""), "%s", out);
	free(out);
	/* A nested pid or network namespace gets no fresh proc or sysfs without the masks:
	 * the kernel refuses those beside ones with locked mounts over them. */
	out = h_sh(id, "mkdir -p /tmp/p /tmp/s; "
		       "unshare -r -m -p -f sh -c 'mount -t proc proc /tmp/p && echo PROC' "
		       "2>/dev/null; "
		       "unshare -r -m -n sh -c 'mount -t sysfs sysfs /tmp/s && echo SYSFS' "
		       "2>/dev/null; true");
	ck_assert_msg(!strcmp(out, ""), "%s", out);
	free(out);
	out = h_sh(id, "cat /proc/keys | wc -c; awk '$5 == \"/proc/keys\"' /proc/self/mountinfo "
		       "| wc -l");
	ck_assert_str_eq(out, "0\n1\n");
	free(out);
	free(id);
}
END_TEST

/* PID 1 is not dumpable and root inside has no CAP_SYS_PTRACE: its binary, memory and
 * environment are out of reach, and its binary cannot be opened for writing (CVE-2019-5736
 * class). A command's own processes stay inspectable. */
START_TEST(pid1_out_of_reach)
{
	char *id = h_create("busybox", NULL);
	ck_assert_int_ne(h_sh_code(id, "exec 3>>/proc/1/exe"), 0);
	ck_assert_int_ne(h_sh_code(id, "exec 3</proc/1/exe"), 0);
	ck_assert_int_ne(h_sh_code(id, "readlink /proc/1/exe"), 0);
	ck_assert_int_ne(h_sh_code(id, "cat /proc/1/environ"), 0);
	ck_assert_int_ne(h_sh_code(id, "exec 3</proc/1/mem"), 0);
	char *out = h_sh(id, "sleep 100 & p=$!; readlink /proc/$p/exe; "
			     "cat /proc/$p/environ >/dev/null && echo readable; kill $p");
	ck_assert_str_eq(out, "/bin/busybox\nreadable\n");
	free(out);
	free(id);
}
END_TEST

/* A command starts with fds 0-2 only, in a session of its own without a controlling
 * terminal (TIOCSTI has nothing to push into), and a cwd that is checked after the id
 * change and cannot be a leaked fd (CVE-2024-21626 class). */
START_TEST(command_start_hygiene)
{
	char *id = h_create("busybox", NULL);
	/* ls run directly (no shell, which keeps fds of its own): 0-2, and at most the one ls
	 * opened to list the directory. */
	static const char *const ls_fds[] = {"ls", "-l", "/proc/self/fd", NULL};
	struct h_exec_opts lso = {.argv = ls_fds};
	struct h_exec ls;
	h_exec(id, NULL, &lso, &ls);
	ck_assert_msg(ls.complete, "ls /proc/self/fd: %s", ls.err);
	int stdio = 0;
	for (char *line = strtok(ls.out, "\n"); line; line = strtok(NULL, "\n")) {
		char *arrow = strstr(line, " -> ");
		if (!arrow)
			continue;
		char *num = arrow;
		while (num > line && num[-1] != ' ')
			num--;
		int fd = atoi(num);
		const char *target = arrow + 4;
		size_t tl = strlen(target);
		ck_assert_msg(fd < 3 || (fd == 3 && tl > 3 && !strcmp(target + tl - 3, "/fd")),
			      "fd %d of a new command: %s", fd, target);
		stdio += fd < 3;
	}
	ck_assert_int_eq(stdio, 3);
	h_exec_free(&ls);
	char *out = h_sh(id, "echo $(( $(cut -d' ' -f6 /proc/$$/stat) == $$ ))");
	ck_assert_str_eq(out, "1\n");
	free(out);
	ck_assert_int_ne(h_sh_code(id, "exec 3</dev/tty"), 0);
	for (int fd = 3; fd < 10; fd++) {
		char *cwd = h_fmt("/proc/self/fd/%d", fd);
		struct h_exec_opts o = {.cwd = cwd};
		struct h_exec r;
		h_exec(id, "pwd", &o, &r);
		ck_assert_msg(!r.complete, "a command started in %s: %s", cwd, r.out);
		h_exec_free(&r);
		free(cwd);
	}
	free(h_sh(id, "mkdir -m 700 /root/private"));
	int code;
	out = exec_as(id, "pwd", 1000, "/root/private", &code);
	ck_assert_msg(code != 0, "uid 1000 started in a root-only dir: %s", out);
	free(out);
	free(id);
}
END_TEST

/* ICMP echo without CAP_NET_RAW: raw sockets are refused, and the sandbox's ping_group_range
 * covers all its gids, for ping programs that use the kernel's ICMP sockets. (This image's
 * ping only knows raw sockets; the default image's uses the ICMP sockets.) */
START_TEST(ping_without_net_raw)
{
	char *id = h_create("busybox", NULL);
	char *out = h_sh(id, "cat /proc/sys/net/ipv4/ping_group_range");
	ck_assert_str_eq(out, "0\t65535\n");
	free(out);
	struct h_exec r;
	h_exec(id, "ping -c 1 -W 5 127.0.0.1", NULL, &r);
	ck_assert_msg(!r.complete && strstr(r.err, "permission denied"),
		      "raw ICMP socket as root: %s%s", r.out, r.err);
	h_exec_free(&r);
	free(id);
}
END_TEST

/* ---- the kernel's per-user pools ---- */

/* The sandbox's user namespace is owned by its own first host uid, not by root: what its
 * processes take of the kernel's per-user pools is charged to that uid at the host's level. */
START_TEST(user_namespace_owned_by_the_sandbox_uid)
{
	char *id = h_create("busybox", NULL);
	json_t *ins = h_inspect(id);
	char *path = h_fmt("/proc/%lld/ns/user", h_jint(ins, "pid"));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	uid_t owner = (uid_t)-1;
	ck_assert_int_eq(ioctl(fd, NS_GET_OWNER_UID, &owner), 0);
	close(fd);
	ck_assert_uint_eq(owner, (uid_t)h_jint(ins, "uidMap.hostStart"));
	json_decref(ins);
	free(path);
	free(id);
}
END_TEST

/* pool_probe's "took N errno NAME" line from sandbox id, once it is there. */
static void probe_result(const char *id, long *n, char *err, size_t err_size)
{
	char fmt[32];
	snprintf(fmt, sizeof(fmt), "took %%ld errno %%%zus", err_size - 1);
	for (int i = 0; i < 600; i++) {
		char *out = h_sh(id, "cat /root/probe.out 2>/dev/null; true");
		int got = sscanf(out, fmt, n, err);
		free(out);
		if (got == 2)
			return;
		h_sleep_ms(100);
	}
	ck_abort_msg("pool_probe in %s said nothing in 60 s", id);
}

/* Sandbox a takes all of kind the kernel lets it have and holds it; host root and sandbox
 * b still get theirs. At most max of it (0: no bound but the kernel's) goes to a. */
static void pool_is_the_sandbox_own(const char *kind, long max)
{
	char *a = h_create("busybox", NULL), *b = h_create("busybox", NULL);
	h_upload_helper(a, "pool_probe");
	h_upload_helper(b, "pool_probe");
	char *cmd = h_fmt("nohup /root/pool_probe %s 600 >/root/probe.out 2>&1 &", kind);
	free(h_sh(a, cmd));
	long n = 0;
	char err[32];
	probe_result(a, &n, err, sizeof(err));
	ck_assert_msg(n > 0 && strcmp(err, "none"), "%s: sandbox took %ld, then %s", kind, n, err);
	if (max)
		ck_assert_msg(n <= max, "%s: one sandbox took %ld (at most %ld)", kind, n, max);
	if (strcmp(kind, "ptys")) {
		int r = pool_try(pool_named(kind)); /* host root's */
		ck_assert_msg(r == 0, "%s: host root refused while a sandbox holds %ld: %s", kind,
			      n, strerror(-r));
	}
	char *other = h_fmt("/root/pool_probe %s 0 8", kind);
	char *out = h_sh(b, other);
	ck_assert_msg(!strcmp(out, "took 8 errno none\n"), "%s: another sandbox: %s", kind, out);
	free(out);
	h_delete(a);
	h_delete(b);
	free(other);
	free(cmd);
	free(a);
	free(b);
}

START_TEST(inotify_instances_are_the_sandbox_own)
{
	pool_is_the_sandbox_own("inotify", 0);
}
END_TEST

START_TEST(queued_signals_and_timers_are_the_sandbox_own)
{
	pool_is_the_sandbox_own("timers", 0);
}
END_TEST

START_TEST(mqueue_bytes_are_the_sandbox_own)
{
	pool_is_the_sandbox_own("mqueue", 0);
}
END_TEST

/* devpts max=256 (src/runtime/mount.c): the host's spare terminals are shared by all. */
START_TEST(terminals_are_bounded_per_sandbox)
{
	pool_is_the_sandbox_own("ptys", 256);
}
END_TEST

static Suite *hardening_suite(void)
{
	Suite *s = suite_create("hardening");
	tcase_add_test(h_tcase(s, "caps_of_root_commands", 120), caps_of_root_commands);
	tcase_add_test(h_tcase(s, "caps_of_uid_1000_commands", 120), caps_of_uid_1000_commands);
	tcase_add_test(h_tcase(s, "root_can_do_ordinary_admin_work", 120),
		       root_can_do_ordinary_admin_work);
	tcase_add_test(h_tcase(s, "root_binds_port_80", 120), root_binds_port_80);
	tcase_add_test(h_tcase(s, "mknod_of_devices_fails", 120), mknod_of_devices_fails);
	tcase_add_test(h_tcase(s, "no_host_device_nodes", 120), no_host_device_nodes);
	tcase_add_test(h_tcase(s, "masked_paths_are_empty", 120), masked_paths_are_empty);
	tcase_add_test(h_tcase(s, "read_only_proc_and_sys", 120), read_only_proc_and_sys);
	tcase_add_test(h_tcase(s, "no_escape_knob_writable", 120), no_escape_knob_writable);
	tcase_add_test(h_tcase(s, "masks_cannot_be_removed", 120), masks_cannot_be_removed);
	tcase_add_test(h_tcase(s, "pid1_out_of_reach", 120), pid1_out_of_reach);
	tcase_add_test(h_tcase(s, "command_start_hygiene", 120), command_start_hygiene);
	tcase_add_test(h_tcase(s, "ping_without_net_raw", 120), ping_without_net_raw);
	tcase_add_test(h_tcase(s, "user_namespace_owned_by_the_sandbox_uid", 120),
		       user_namespace_owned_by_the_sandbox_uid);
	tcase_add_test(h_tcase(s, "inotify_instances_are_the_sandbox_own", 180),
		       inotify_instances_are_the_sandbox_own);
	tcase_add_test(h_tcase(s, "queued_signals_and_timers_are_the_sandbox_own", 180),
		       queued_signals_and_timers_are_the_sandbox_own);
	tcase_add_test(h_tcase(s, "mqueue_bytes_are_the_sandbox_own", 180),
		       mqueue_bytes_are_the_sandbox_own);
	tcase_add_test(h_tcase(s, "terminals_are_bounded_per_sandbox", 180),
		       terminals_are_bounded_per_sandbox);
	return s;
}

int main(void)
{
	return h_main(hardening_suite());
}
