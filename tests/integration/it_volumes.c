/* Host volumes: whatever a sandbox writes into a host directory, nobody on the host gains
 * host root (or any system account) from it. The sandbox's root is the directory's owner
 * when an ordinary account owns it, the sandbox's own uid range otherwise, host root only on
 * an explicit identity map. Covered: set-id files, file capabilities, chown to other ids,
 * device nodes, and the root-owned files already in the directory. Also the device nodes
 * cell binds into /dev: the sandbox cannot change them on the host. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cell/id.h"
#include "harness.h"

#define OWNER 4242u /* an ordinary account (login.defs: 1000-60000) */
#define PROBE "/root/volume_probe"

/* A fresh host dir under T, traversable, owned by uid:gid. */
static char *host_dir(const char *name, uid_t uid, gid_t gid, mode_t mode)
{
	char rnd[CELL_ID_RANDOM_LEN + 1];
	ck_assert_int_eq(cell_id_random(rnd), 0);
	char *dir = h_fmt("%s/%s-%s", H.dir, name, rnd);
	ck_assert_int_eq(mkdir(dir, mode), 0);
	ck_assert_int_eq(chown(dir, uid, gid), 0);
	ck_assert_int_eq(chmod(dir, mode), 0);
	return dir;
}

/* A sandbox with the volumes (a JSON array) and the probe uploaded. */
static char *sandbox_with(json_t *volumes, struct h_resp *created)
{
	char *text = json_dumps(volumes, JSON_COMPACT);
	json_t *extra = json_pack("{s:{s:s}}", "extensions", "cell.volumes", text);
	struct h_resp r;
	long st = h_create_ex("busybox", extra, H_UNIX, &r);
	ck_assert_msg(st == 202, "create with volumes %s: HTTP %ld %s", text, st, r.body);
	char *id = strdup(h_jstr(r.json, "id"));
	if (created)
		*created = r;
	else
		h_resp_free(&r);
	json_decref(extra);
	free(text);

	h_upload_helper(id, "volume_probe"); /* as PROBE */
	return id;
}

static json_t *volume(const char *host, const char *dest, const char *map)
{
	json_t *v = json_pack("{s:s, s:s}", "host", host, "dest", dest);
	if (map)
		json_object_set_new(v, "map", json_string(map));
	return v;
}

static struct stat stat_of(const char *dir, const char *name)
{
	char *p = h_fmt("%s/%s", dir, name);
	struct stat st;
	ck_assert_msg(lstat(p, &st) == 0, "%s: %s", p, strerror(errno));
	free(p);
	return st;
}

/* Run the file as nobody on the host, through an fd (no path traversal needed), and return
 * what it printed; NULL when it could not run. */
static char *run_on_host_as_nobody(const char *path, const char *arg)
{
	int fd = open(path, O_PATH | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(p[1], 1);
		char *const argv[] = {"probe", (char *)arg, NULL};
		char *const envp[] = {NULL};
		if (setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0)
			execveat(fd, "", argv, envp, AT_EMPTY_PATH);
		_exit(127);
	}
	close(p[1]);
	close(fd);
	char buf[128] = "";
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	int status;
	waitpid(pid, &status, 0);
	if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		return NULL;
	buf[n] = '\0';
	return strdup(h_trim(buf));
}

static bool nosuid_here(const char *dir)
{
	char *cmd[] = {"/usr/bin/findmnt", "-no", "OPTIONS", "-T", (char *)dir, NULL};
	struct h_proc p = {0};
	bool nosuid = h_run(cmd, NULL, 10, &p) == 0 && p.out && strstr(p.out, "nosuid");
	h_proc_free(&p);
	return nosuid;
}

/* The finding: `cp /bin/bash /v/sh; chmod 4755 /v/sh` inside, and on the host an
 * unprivileged user runs it as root. With the owner map it is the owner's own set-id file,
 * something the owner could make anyway; never root's. */
START_TEST(owner_map_setuid_is_the_owners_not_roots)
{
	char *dir = host_dir("owned", OWNER, OWNER, 0755);
	json_t *vols = json_pack("[o]", volume(dir, "/v", NULL));
	char *id = sandbox_with(vols, NULL);
	json_decref(vols);

	char *out = h_sh(id, "stat -c '%u %g' /v; cp " PROBE " /v/suid; chmod 4755 /v/suid; "
			     "cp " PROBE " /v/sgid; chmod 2755 /v/sgid; echo made > /v/made; "
			     "stat -c '%u %g' /v/made");
	ck_assert_str_eq(out, "0 0\n0 0\n"); /* the owner's directory is the sandbox root's */
	free(out);
	struct stat st = stat_of(dir, "suid");
	ck_assert_msg(st.st_uid == OWNER && st.st_gid == OWNER,
		      "the set-id file landed as %u:%u, not the owner %u", (unsigned)st.st_uid,
		      (unsigned)st.st_gid, OWNER);
	st = stat_of(dir, "made");
	ck_assert_uint_eq(st.st_uid, OWNER);
	ck_assert_uint_eq(st.st_gid, OWNER);

	if (!nosuid_here(dir)) {
		char *f = h_fmt("%s/suid", dir);
		char *who = run_on_host_as_nobody(f, "euid");
		ck_assert_msg(who, "the planted file did not run on the host");
		ck_assert_msg(!strncmp(who, "4242 ", 5),
			      "nobody running the planted set-uid file became '%s', not the "
			      "owner 4242",
			      who);
		free(who);
		free(f);
		f = h_fmt("%s/sgid", dir);
		who = run_on_host_as_nobody(f, "euid");
		ck_assert_msg(who && !strcmp(who, "65534 4242"),
			      "nobody running the planted set-gid file became '%s'", who);
		free(who);
		free(f);
	}

	/* Other sandbox ids land in the sandbox's own range, never on a host account. */
	json_t *ins = h_inspect(id);
	uint32_t base = (uint32_t)h_jint(ins, "uidMap.hostStart");
	ck_assert_str_eq(h_jstr(json_array_get(json_object_get(ins, "volumes"), 0), "map"),
			 "owner");
	json_decref(ins);
	free(h_sh(id, "touch /v/theirs; chown 1:1 /v/theirs; cp " PROBE " /v/suid1; "
		      "chown 1:1 /v/suid1; chmod 6755 /v/suid1"));
	st = stat_of(dir, "theirs");
	ck_assert_msg(st.st_uid == base + 1 && st.st_gid == base + 1,
		      "sandbox uid 1 landed as host %u:%u, not %u", (unsigned)st.st_uid,
		      (unsigned)st.st_gid, base + 1);
	st = stat_of(dir, "suid1");
	ck_assert_uint_eq(st.st_uid, base + 1);
	free(id);
	free(dir);
}
END_TEST

/* A directory a system account owns (root here) gets the sandbox's own ids: it cannot write
 * root's directory, and what it writes where others may (a 1777 dir) belongs to its range. */
START_TEST(system_owned_dir_gets_the_sandbox_range)
{
	char *dir = host_dir("rootdir", 0, 0, 0755);
	char *shared = host_dir("shared", 0, 0, 01777);
	json_t *vols = json_pack("[o, o]", volume(dir, "/r", NULL), volume(shared, "/s", NULL));
	struct h_resp created;
	char *id = sandbox_with(vols, &created);
	json_decref(vols);
	json_t *warn = json_object_get(created.json, "warnings");
	ck_assert_msg(json_array_size(warn) == 2 &&
			  strstr(json_string_value(json_array_get(warn, 0)), "system account"),
		      "the create did not warn about the range map: %s", created.body);
	h_resp_free(&created);

	ck_assert_int_ne(h_sh_code(id, "touch /r/x"), 0);
	char *out = h_sh(id, "stat -c '%u %g' /r; cp " PROBE " /s/suid && chmod 4755 /s/suid; "
			     "echo ok");
	ck_assert_str_eq(out, "65534 65534\nok\n");
	free(out);
	json_t *ins = h_inspect(id);
	uint32_t base = (uint32_t)h_jint(ins, "uidMap.hostStart");
	ck_assert_str_eq(h_jstr(json_array_get(json_object_get(ins, "volumes"), 0), "map"),
			 "range");
	json_decref(ins);
	struct stat st = stat_of(shared, "suid");
	ck_assert_msg(st.st_uid == base && st.st_gid == base,
		      "the sandbox's root wrote as host %u:%u, not its range base %u",
		      (unsigned)st.st_uid, (unsigned)st.st_gid, base);

	/* asking for the owner map on a system account's directory is refused */
	json_t *bad = json_pack("[o]", volume(dir, "/r", "owner"));
	char *text = json_dumps(bad, JSON_COMPACT);
	json_t *extra = json_pack("{s:{s:s}}", "extensions", "cell.volumes", text);
	struct h_resp r;
	ck_assert_int_eq(h_create_ex("busybox", extra, H_UNIX, &r), 400);
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "system account"), "%s", r.body);
	h_resp_free(&r);
	json_decref(extra);
	free(text);
	json_decref(bad);
	free(id);
	free(shared);
	free(dir);
}
END_TEST

/* File capabilities written from inside never act for host root: the kernel binds them to
 * the uid the sandbox's root has on the volume (version 3), which must not be 0. */
static void expect_namespaced_cap(const char *dir, const char *name, uint32_t want_rootid)
{
	char *f = h_fmt("%s/%s", dir, name);
	unsigned char buf[64];
	ssize_t n = getxattr(f, "security.capability", buf, sizeof(buf));
	ck_assert_msg(n > 0, "no capability on %s: %s", f, strerror(errno));
	uint32_t magic = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
			 (uint32_t)buf[3] << 24;
	ck_assert_msg((magic & 0xff000000u) == 0x03000000u && n >= 24,
		      "%s carries a version %u capability (%zd bytes): it acts for host root", f,
		      magic >> 24, n);
	uint32_t rootid = (uint32_t)buf[20] | (uint32_t)buf[21] << 8 | (uint32_t)buf[22] << 16 |
			  (uint32_t)buf[23] << 24;
	ck_assert_msg(rootid == want_rootid, "%s: capability bound to uid %u, want %u", f, rootid,
		      want_rootid);
	free(f);
}

START_TEST(file_capabilities_never_act_for_host_root)
{
	char *owned = host_dir("caps-owned", OWNER, OWNER, 0755);
	char *shared = host_dir("caps-shared", 0, 0, 01777);
	json_t *vols = json_pack("[o, o]", volume(owned, "/v", NULL), volume(shared, "/s", NULL));
	char *id = sandbox_with(vols, NULL);
	json_decref(vols);
	json_t *ins = h_inspect(id);
	uint32_t base = (uint32_t)h_jint(ins, "uidMap.hostStart");
	json_decref(ins);
	char *out = h_sh(id, "cp " PROBE " /v/capped; " PROBE " setcap /v/capped; "
			     "cp " PROBE " /s/capped; " PROBE " setcap /s/capped");
	ck_assert_str_eq(out, "ok\nok\n");
	free(out);
	expect_namespaced_cap(owned, "capped", OWNER);
	expect_namespaced_cap(shared, "capped", base);
	free(id);
	free(shared);
	free(owned);
}
END_TEST

/* What the host already keeps in a shared directory stays the host's: root's files, a
 * set-uid-root binary and a device node. */
START_TEST(host_files_in_the_volume_stay_the_hosts)
{
	char *dir = host_dir("planted", OWNER, OWNER, 0755);
	char *secret = h_fmt("%s/secret", dir);
	h_write_file(secret, "root only\n", 0600);
	char *pub = h_fmt("%s/public", dir);
	h_write_file(pub, "root's\n", 0644);
	char *suid = h_fmt("%s/suid-root", dir);
	char *probe = h_fmt("%s/tests/integration/volume_probe", H.bin);
	char *cp[] = {"/bin/cp", probe, suid, NULL};
	struct h_proc p = {0};
	ck_assert_int_eq(h_run(cp, NULL, 10, &p), 0);
	h_proc_free(&p);
	ck_assert_int_eq(chmod(suid, 04755), 0);
	char *node = h_fmt("%s/null", dir);
	ck_assert_int_eq(mknod(node, S_IFCHR | 0666, makedev(1, 3)), 0);
	struct stat before = stat_of(dir, "public");

	json_t *vols = json_pack("[o]", volume(dir, "/v", NULL));
	char *id = sandbox_with(vols, NULL);
	json_decref(vols);
	/* root's files are nobody's inside: not readable past their mode, not changeable */
	ck_assert_int_ne(h_sh_code(id, "cat /v/secret"), 0);
	ck_assert_int_ne(h_sh_code(id, "echo more >> /v/public"), 0);
	ck_assert_int_ne(h_sh_code(id, "chmod 4777 /v/public"), 0);
	ck_assert_int_ne(h_sh_code(id, "chown 0:0 /v/public"), 0);
	ck_assert_int_ne(h_sh_code(id, "chmod 777 /v/suid-root"), 0);
	/* the set-uid-root binary gives nobody inside nothing (the volume is nosuid, and its
	 * owner is no id of the sandbox's) */
	struct h_exec_opts nobody = {
	    .argv = (const char *const[]){"/v/suid-root", "euid", NULL},
	    .as_user = true,
	    .uid = 65534,
	    .gid = 65534,
	};
	struct h_exec r;
	h_exec(id, NULL, &nobody, &r);
	ck_assert_msg(r.complete, "the binary did not run as nobody: %s", r.err);
	ck_assert_str_eq(r.out, "65534 65534\n");
	h_exec_free(&r);
	/* ...and a device node there opens nothing; none can be made */
	ck_assert_int_ne(h_sh_code(id, "head -c1 /v/null"), 0);
	ck_assert_int_ne(h_sh_code(id, "mknod /v/made c 1 3"), 0);
	struct stat after = stat_of(dir, "public");
	ck_assert_int_eq(after.st_mode, before.st_mode);
	ck_assert_uint_eq(after.st_uid, 0);
	ck_assert_int_eq(after.st_size, before.st_size);
	char *made = h_fmt("%s/made", dir);
	ck_assert_int_ne(access(made, F_OK), 0);
	free(made);
	free(id);
	free(node);
	free(probe);
	free(suid);
	free(pub);
	free(secret);
	free(dir);
}
END_TEST

/* The old one-to-one map only when asked for by name; the create says what it means. */
START_TEST(identity_map_only_when_asked)
{
	char *dir = host_dir("identity", 0, 0, 0755);
	json_t *vols = json_pack("[o]", volume(dir, "/v", "identity"));
	struct h_resp created;
	char *id = sandbox_with(vols, &created);
	json_decref(vols);
	const char *warning =
	    json_string_value(json_array_get(json_object_get(created.json, "warnings"), 0));
	ck_assert_msg(warning && strstr(warning, "host root"),
		      "no warning for the identity map: %s", created.body);
	h_resp_free(&created);
	free(h_sh(id, "echo x > /v/f"));
	ck_assert_uint_eq(stat_of(dir, "f").st_uid, 0);
	ck_assert_msg(strstr(h_celld_log_tail(), "identity map"), "celld did not log it");
	free(id);
	free(dir);
}
END_TEST

/* cell binds the host's null, zero, full, random, urandom and tty into /dev: they work, but
 * the sandbox cannot change the host's nodes (their times, here). */
START_TEST(dev_nodes_unchangeable)
{
	static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
	struct stat before[6];
	for (size_t i = 0; i < 6; i++) {
		char *p = h_fmt("/dev/%s", nodes[i]);
		ck_assert_int_eq(stat(p, &before[i]), 0);
		free(p);
	}
	char *id = h_create("busybox", NULL);
	/* touch needs only write permission (the nodes are 0666) to set the times to now */
	for (size_t i = 0; i < 6; i++) {
		char *cmd = h_fmt("touch /dev/%s", nodes[i]);
		ck_assert_msg(h_sh_code(id, cmd) != 0, "%s succeeded", cmd);
		free(cmd);
	}
	char *out = h_sh(id, "echo gone > /dev/null; head -c 3 /dev/zero | wc -c; "
			     "head -c 3 /dev/urandom | wc -c");
	ck_assert_str_eq(out, "3\n3\n");
	free(out);
	for (size_t i = 0; i < 6; i++) {
		char *p = h_fmt("/dev/%s", nodes[i]);
		struct stat st;
		ck_assert_int_eq(stat(p, &st), 0);
		ck_assert_msg(st.st_mtim.tv_sec == before[i].st_mtim.tv_sec &&
				  st.st_mtim.tv_nsec == before[i].st_mtim.tv_nsec,
			      "the sandbox changed the host's %s", p);
		free(p);
	}
	free(id);
}
END_TEST

static Suite *volumes_suite(void)
{
	Suite *s = suite_create("volumes");
	tcase_add_test(h_tcase(s, "owner_map_setuid_is_the_owners_not_roots", 120),
		       owner_map_setuid_is_the_owners_not_roots);
	tcase_add_test(h_tcase(s, "system_owned_dir_gets_the_sandbox_range", 120),
		       system_owned_dir_gets_the_sandbox_range);
	tcase_add_test(h_tcase(s, "file_capabilities_never_act_for_host_root", 120),
		       file_capabilities_never_act_for_host_root);
	tcase_add_test(h_tcase(s, "host_files_in_the_volume_stay_the_hosts", 120),
		       host_files_in_the_volume_stay_the_hosts);
	tcase_add_test(h_tcase(s, "identity_map_only_when_asked", 120),
		       identity_map_only_when_asked);
	tcase_add_test(h_tcase(s, "dev_nodes_unchangeable", 120), dev_nodes_unchangeable);
	return s;
}

int main(void)
{
	return h_main(volumes_suite());
}
