/* Disk quota on the writable layer (resourceLimits.disk): a fill past the quota fails with
 * ENOSPC or EDQUOT inside, the host's disk use stays within the quota, deleting the file
 * makes the sandbox usable again, the quota survives a celld restart, and a delete (or a
 * failed create) leaves no loop device, mount or image behind.
 *
 * On a state dir without project quotas (this harness's temp dir on a plain ext4 or tmpfs)
 * the layer is an ext4 image <dir>/disk.img on a loop device; with project quotas it is
 * <dir>/layers. The tests check whichever the sandbox got. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "harness.h"

#define QUOTA	    "64Mi"
#define QUOTA_BYTES (64ull << 20)
#define MIB	    (1ull << 20)

static char *create_with_disk(const char *disk)
{
	json_t *extra = json_pack("{s:{s:s}}", "resourceLimits", "disk", disk);
	char *id = h_create("busybox", extra);
	json_decref(extra);
	return id;
}

/* Loop devices whose backing file is under dir; the first one's name into first. */
static int loops_under(const char *dir, char *first, size_t size)
{
	glob_t g;
	int n = 0;
	if (glob("/sys/block/loop*/loop/backing_file", 0, NULL, &g) != 0)
		return 0;
	size_t len = strlen(dir);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		char *back = h_read_file(g.gl_pathv[i]);
		if (back && !strncmp(back, dir, len) && back[len] == '/') {
			if (!n++ && first)
				snprintf(first, size, "%s (%s)", g.gl_pathv[i], h_trim(back));
		}
		free(back);
	}
	globfree(&g);
	return n;
}

/* The overlay's final release (and with it the layer's unmount and the loop device's
 * autoclear) happens just after a delete answers: wait for it, bounded. */
static void expect_layer_gone(const char *dir)
{
	char first[1024] = "";
	for (int i = 0; i < 200 && loops_under(dir, NULL, 0); i++)
		h_sleep_ms(50);
	ck_assert_msg(loops_under(dir, first, sizeof(first)) == 0, "loop device left: %s", first);
	ck_assert_msg(!h_mountinfo_mentions(dir), "a mount under %s is left", dir);
	struct stat st;
	ck_assert_msg(stat(dir, &st) < 0 && errno == ENOENT, "state dir %s is left", dir);
}

static int sandboxes_in_state(void)
{
	char *p = h_fmt("%s/sandboxes", H.state);
	DIR *d = opendir(p);
	free(p);
	int n = 0;
	for (struct dirent *de; d && (de = readdir(d));)
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* The sandbox's layer is under a quota of QUOTA_BYTES: its image on a loop device, or a
 * project-quota dir. Returns true for the image. */
static bool expect_quota_layer(const char *dir)
{
	char *img = h_fmt("%s/disk.img", dir);
	char *layers = h_fmt("%s/layers", dir);
	struct stat st;
	bool loop = stat(img, &st) == 0;
	if (loop) {
		ck_assert_msg((unsigned long long)st.st_size == QUOTA_BYTES,
			      "image %s is %lld bytes", img, (long long)st.st_size);
		ck_assert_msg(loops_under(dir, NULL, 0) == 1, "%s is not on one loop device", img);
	} else {
		ck_assert_msg(stat(layers, &st) == 0 && S_ISDIR(st.st_mode),
			      "sandbox %s has neither disk.img nor layers/", dir);
	}
	free(img);
	free(layers);
	return loop;
}

/* Write 100 MiB; returns the output (dd's complaint) with "rc=N" appended. */
static char *fill(const char *id, const char *path)
{
	char *cmd = h_fmt("dd if=/dev/zero of=%s bs=1M count=100 2>&1; echo rc=$?", path);
	char *out = h_sh(id, cmd);
	free(cmd);
	return out;
}

static void expect_full(const char *out)
{
	ck_assert_msg(strstr(out, "No space left on device") || strstr(out, "Disk quota exceeded"),
		      "no ENOSPC/EDQUOT from dd: %s", out);
	ck_assert_msg(!strstr(out, "rc=0"), "dd succeeded: %s", out);
}

START_TEST(fill_fails_then_recovers)
{
	char *id = create_with_disk(QUOTA);
	json_t *ins = h_inspect(id);
	char *dir = strdup(h_jstr(ins, "dir"));
	bool loop = expect_quota_layer(dir);

	/* The sandbox sees its quota as the size of / (the overlay reports its upper fs). */
	char *out = h_sh(id, "df -k / | tail -n 1 | awk '{print $2}'");
	long long kib = atoll(out);
	ck_assert_msg(kib > 0 && (unsigned long long)kib * 1024 <= QUOTA_BYTES,
		      "df of / says %lld KiB (quota " QUOTA ")", kib);
	free(out);

	out = fill(id, "/workspace/f");
	expect_full(out);
	free(out);
	/* the root (same overlay) is full too; /workspace is part of it */
	out = fill(id, "/root/g");
	expect_full(out);
	free(out);
	/* An upload into the full sandbox is its disk at its quota (507), not the host out
	 * of capacity (503). */
	size_t big = 4 * MIB;
	char *data = calloc(1, big);
	struct h_resp resp = {0};
	ck_assert_int_eq(h_upload(id, "/workspace/up", data, big, 0644, &resp), 507);
	ck_assert_str_eq(h_err_code(&resp), "INSUFFICIENT_STORAGE");
	h_resp_free(&resp);
	free(data);
	out = h_sh(id, "sync; stat -c %s /workspace/f");
	unsigned long long written = strtoull(out, NULL, 10);
	ck_assert_msg(written >= 32 * MIB && written <= QUOTA_BYTES,
		      "/workspace/f holds %llu bytes", written);
	free(out);

	if (loop) {
		/* The data went into the image, and the image never outgrew the quota. */
		char *img = h_fmt("%s/disk.img", dir);
		struct stat st;
		ck_assert_int_eq(stat(img, &st), 0);
		unsigned long long host = (unsigned long long)st.st_blocks * 512;
		ck_assert_msg(host >= written && host <= QUOTA_BYTES,
			      "image uses %llu bytes on the host for %llu written (quota %llu)",
			      host, written, QUOTA_BYTES);
		free(img);
	}

	/* Deleting the file makes the sandbox usable again. */
	out = h_sh(id, "rm /workspace/f /root/g; dd if=/dev/zero of=/workspace/h bs=1M count=1 "
		       "2>&1 && sync && stat -c %s /workspace/h");
	ck_assert_msg(strstr(out, "1048576\n"), "writing 1 MiB after rm: %s", out);
	free(out);

	ck_assert_int_eq(h_delete(id), 204);
	expect_layer_gone(dir);
	json_decref(ins);
	free(dir);
	free(id);
}
END_TEST

/* inspect's "disk": the quota and at least `used` bytes in use, within the quota. */
static void expect_disk_usage(const char *id, unsigned long long used)
{
	json_t *ins = h_inspect(id);
	const char *kind = h_jstr(ins, "disk.quota");
	ck_assert_msg(!strcmp(kind, "loop") || !strcmp(kind, "project"), "disk.quota '%s'", kind);
	ck_assert_int_eq(h_jint(ins, "disk.limitBytes"), (long long)QUOTA_BYTES);
	long long u = h_jint(ins, "disk.usedBytes"), a = h_jint(ins, "disk.availBytes");
	ck_assert_msg(u >= (long long)used && u <= (long long)QUOTA_BYTES,
		      "disk.usedBytes %lld, want %llu..%llu", u, used, QUOTA_BYTES);
	ck_assert_msg(a >= 0 && u + a <= (long long)QUOTA_BYTES, "disk.availBytes %lld", a);
	json_decref(ins);
}

/* celld dies and comes back: the adopted sandbox keeps its files and its quota, and its
 * delete still releases the layer. */
START_TEST(restart_keeps_quota)
{
	char *id = create_with_disk(QUOTA);
	json_t *ins = h_inspect(id);
	char *dir = strdup(h_jstr(ins, "dir"));
	expect_quota_layer(dir);
	free(h_sh(id, "dd if=/dev/zero of=/workspace/keep bs=1M count=8 2>/dev/null; sync"));
	expect_disk_usage(id, 8 * MIB);

	h_celld_kill();
	h_celld_start();
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	expect_disk_usage(id, 8 * MIB); /* measured through the adopted sandbox */

	char *out = h_sh(id, "stat -c %s /workspace/keep");
	ck_assert_str_eq(out, "8388608\n");
	free(out);
	out = fill(id, "/workspace/f");
	expect_full(out);
	free(out);

	ck_assert_int_eq(h_delete(id), 204);
	expect_layer_gone(dir);
	json_decref(ins);
	free(dir);
	free(id);
}
END_TEST

/* Two sandboxes with quotas are independent: filling one leaves the other's room. */
START_TEST(quotas_are_per_sandbox)
{
	char *a = create_with_disk(QUOTA);
	char *b = create_with_disk("32Mi");
	json_t *ia = h_inspect(a), *ib = h_inspect(b);
	char *out = fill(a, "/workspace/f");
	expect_full(out);
	free(out);
	out = h_sh(b, "dd if=/dev/zero of=/workspace/f bs=1M count=16 2>&1 && sync && "
		      "stat -c %s /workspace/f");
	ck_assert_msg(strstr(out, "16777216\n"), "the other sandbox could not write: %s", out);
	free(out);
	out = fill(b, "/workspace/g");
	expect_full(out);
	free(out);
	ck_assert_int_eq(h_delete(a), 204);
	ck_assert_int_eq(h_delete(b), 204);
	expect_layer_gone(h_jstr(ia, "dir"));
	expect_layer_gone(h_jstr(ib, "dir"));
	json_decref(ia);
	json_decref(ib);
	free(a);
	free(b);
}
END_TEST

/* A quota too small for a layer is refused, and the refused create leaves nothing. */
START_TEST(too_small_refused_cleanly)
{
	int before = sandboxes_in_state();
	json_t *extra = json_pack("{s:{s:s}}", "resourceLimits", "disk", "1Mi");
	struct h_resp r;
	long st = h_create_ex("busybox", extra, H_UNIX, &r);
	json_decref(extra);
	ck_assert_msg(st >= 400, "a 1Mi disk quota was accepted: HTTP %ld %s", st, r.body);
	h_resp_free(&r);
	ck_assert_int_eq(sandboxes_in_state(), before);
	ck_assert_msg(loops_under(H.state, NULL, 0) == 0, "loop device left for %s", H.state);
	ck_assert_msg(!h_mountinfo_mentions(H.state), "a mount under %s is left", H.state);
}
END_TEST

/* ---- project quotas: a celld whose state dir enforces them ---- */

struct pq {
	char *img, *mnt, *state, *sock, *log;
	pid_t celld;
};

/* Run argv (argv[0] looked up in PATH); returns the exit status, *out its stdout
 * (malloc'd). */
static int run(char *const argv[], char **out)
{
	char *args[16] = {"/usr/bin/env", NULL};
	for (size_t i = 0; argv[i] && i + 2 < CELL_ARRAY_SIZE(args); i++)
		args[i + 1] = argv[i];
	struct h_proc p;
	int st = h_run(args, NULL, 120, &p);
	if (out)
		*out = p.out ? strdup(p.out) : strdup("");
	h_proc_free(&p);
	return st;
}

/* The kernel's part of project quotas, decided before mounting, so that a failed mount on
 * a kernel that can do it fails the test: loop devices (CONFIG_BLK_DEV_LOOP) and ext4's
 * quota feature (CONFIG_QUOTA with the quota format CONFIG_QFMT_V2, a module on Debian's
 * kernels: loaded first, and it must then be loaded). Read from the kernel's config; when
 * that is unreadable, nothing is skipped. */
static void pq_probe_or_skip(void)
{
	char *modprobe[] = {"modprobe", "-q", "quota_v2", NULL};
	run(modprobe, NULL);
	if (h_kernel_config("CONFIG_BLK_DEV_LOOP") == 'n')
		h_skip_host("kernel-blk-dev-loop", "the kernel has no loop devices");
	char quota = h_kernel_config("CONFIG_QUOTA"), v2 = h_kernel_config("CONFIG_QFMT_V2");
	if (quota == 'n' || v2 == 'n')
		h_skip_host("kernel-qfmt-v2",
			    "the kernel cannot mount ext4 with prjquota (CONFIG_QUOTA=%c, "
			    "CONFIG_QFMT_V2=%c)",
			    quota, v2);
	struct stat st;
	if (v2 == 'm' && stat("/sys/module/quota_v2", &st) < 0)
		h_skip_host("kernel-qfmt-v2",
			    "quota_v2 is a module of this kernel that modprobe did not load");
}

/* An ext4 with project quotas, mounted with prjquota under T; asserts (the probe said
 * this kernel can). */
static void pq_mount(struct pq *pq)
{
	char *trunc[] = {"truncate", "-s", "512M", pq->img, NULL};
	char *mkfs[] = {"mkfs.ext4", "-q", "-F", "-O", "quota,project", pq->img, NULL};
	char *mount[] = {"/bin/mount", "-o", "loop,prjquota", pq->img, pq->mnt, NULL};
	ck_assert_int_eq(run(trunc, NULL), 0);
	ck_assert_int_eq(run(mkfs, NULL), 0);
	ck_assert_int_eq(mkdir(pq->mnt, 0700), 0);
	struct h_proc p;
	int st = h_run(mount, NULL, 120, &p);
	if (st != 0) {
		rmdir(pq->mnt);
		unlink(pq->img);
	}
	ck_assert_msg(st == 0, "mount -o loop,prjquota on a kernel with project quotas: %d %s", st,
		      p.err);
	h_proc_free(&p);
}

static char *pq_curl(const struct pq *pq, const char *method, const char *path, const char *body)
{
	char *url = h_fmt("http://cell%s", path);
	char *argv[] = {
	    "curl", "-sS", "--unix-socket", pq->sock, "-X", (char *)method, url, NULL, NULL, NULL,
	    NULL,   NULL};
	if (body) { /* appended after the url */
		argv[7] = "-H";
		argv[8] = "Content-Type: application/json";
		argv[9] = "--data-binary";
		argv[10] = (char *)body;
	}
	char *out = NULL;
	run(argv, &out);
	free(url);
	return out;
}

static json_t *pq_json(const struct pq *pq, const char *method, const char *path, const char *body)
{
	char *out = pq_curl(pq, method, path, body);
	json_t *j = json_loads(out, 0, NULL);
	free(out);
	return j;
}

static char *pq_exec(const struct pq *pq, const char *id, const char *cmd)
{
	char *cell = h_fmt("%s/cell", H.bin);
	char *argv[] = {cell, "--socket", pq->sock, "exec",	 (char *)id,
			"--", "sh",	  "-c",	    (char *)cmd, NULL};
	char *out = NULL;
	run(argv, &out);
	free(cell);
	return out;
}

static bool pq_start(struct pq *pq, char *why, size_t size)
{
	char *celld = h_fmt("%s/celld", H.bin);
	char *init = h_fmt("%s/cell-init", H.bin);
	char *policies = h_fmt("%s/policies", H.src);
	char *argv[] = {celld,	      "--state-dir", pq->state,		  "--images", H.images,
			"--socket",   pq->sock,	     "--no-tcp",	  "--init",   init,
			"--policies", policies,	     "--network-default", "none",     NULL};
	pq->celld = h_spawn_celld(argv, pq->log);
	free(celld);
	free(init);
	free(policies);
	for (int i = 0; pq->celld > 0 && i < 600; i++) {
		json_t *info = pq_json(pq, "GET", "/v1/info", NULL);
		bool up = info != NULL;
		json_decref(info);
		if (up)
			return true;
		h_sleep_ms(50);
	}
	snprintf(why, size, "celld on %s did not start; log tail: %s", pq->state,
		 h_read_file(pq->log));
	return false;
}

/* The scenario; fills why on the first failure (asserting here would skip the cleanup). */
static void pq_scenario(struct pq *pq, char *why, size_t size)
{
	if (!pq_start(pq, why, size))
		return;
	json_t *c = pq_json(pq, "POST", "/v1/sandboxes",
			    "{\"image\":{\"uri\":\"busybox\"},\"resourceLimits\":{\"disk\":\"" QUOTA
			    "\"}}");
	const char *id = h_jstr(c, "id");
	if (!*id) {
		snprintf(why, size, "create on the project-quota state dir failed: %s",
			 c ? json_dumps(c, 0) : "(no JSON)");
		json_decref(c);
		return;
	}
	char *dir = h_fmt("%s/sandboxes/%s", pq->state, id);
	char *path = h_fmt("/v1/sandboxes/%s/inspect", id);
	json_t *ins = pq_json(pq, "GET", path, NULL);
	char *img = h_fmt("%s/disk.img", dir), *layers = h_fmt("%s/layers", dir);
	struct stat st;
	char *out = NULL;
	if (stat(img, &st) == 0 || stat(layers, &st) < 0) {
		snprintf(why, size, "%s: no layers/ under a project quota (or a disk.img)", dir);
	} else if (strcmp(h_jstr(ins, "disk.quota"), "project") ||
		   h_jint(ins, "disk.limitBytes") != (long long)QUOTA_BYTES) {
		snprintf(why, size, "inspect's disk: %s",
			 json_dumps(json_object_get(ins, "disk"), 0));
	} else {
		out = pq_exec(pq, id,
			      "dd if=/dev/zero of=/workspace/f bs=1M count=100 2>&1; "
			      "echo rc=$?");
		if (!strstr(out, "Disk quota exceeded") && !strstr(out, "No space left"))
			snprintf(why, size, "no EDQUOT/ENOSPC past the project quota: %s", out);
		free(out);
		out = NULL;
	}
	json_decref(ins);
	if (!why[0]) {
		ins = pq_json(pq, "GET", path, NULL);
		long long used = h_jint(ins, "disk.usedBytes");
		if (used < (long long)(32 * MIB) || used > (long long)QUOTA_BYTES)
			snprintf(why, size, "disk.usedBytes %lld after the fill", used);
		json_decref(ins);
	}
	if (!why[0]) {
		out = pq_exec(pq, id,
			      "rm /workspace/f; dd if=/dev/zero of=/workspace/g bs=1M "
			      "count=1 2>&1 && sync && stat -c %s /workspace/g");
		if (!strstr(out, "1048576\n"))
			snprintf(why, size, "writing 1 MiB after rm: %s", out);
		free(out);
	}
	free(path);
	path = h_fmt("/v1/sandboxes/%s", id);
	free(pq_curl(pq, "DELETE", path, NULL));
	if (!why[0] && stat(dir, &st) == 0)
		snprintf(why, size, "%s left after delete", dir);
	free(path);
	free(img);
	free(layers);
	free(dir);
	json_decref(c);
}

static void pq_cleanup(struct pq *pq)
{
	if (pq->celld > 0) {
		kill(pq->celld, SIGTERM);
		for (int i = 0; i < 400 && waitpid(pq->celld, NULL, WNOHANG) == 0; i++)
			h_sleep_ms(50);
		kill(pq->celld, SIGKILL);
		waitpid(pq->celld, NULL, 0);
	}
	char *umount[] = {"umount", "-l", pq->mnt, NULL};
	run(umount, NULL);
	rmdir(pq->mnt);
	unlink(pq->img);
	unlink(pq->log);
}

/* The project-quota way end to end: only where the kernel has quota support (Debian's,
 * which the VM test boots); elsewhere a host skip (pq_probe_or_skip). */
START_TEST(project_quota_state_dir)
{
	pq_probe_or_skip();
	struct pq pq = {
	    .img = h_fmt("%s/pq.img", H.dir),
	    .mnt = h_fmt("%s/pq", H.dir),
	    .sock = h_fmt("%s/pq.sock", H.dir),
	    .log = h_fmt("%s/pq-celld.log", H.dir),
	};
	pq.state = h_fmt("%s/state", pq.mnt);
	pq_mount(&pq);
	char why[4096] = "";
	pq_scenario(&pq, why, sizeof(why));
	pq_cleanup(&pq);
	ck_assert_msg(!why[0], "%s", why);
}
END_TEST

static Suite *disk_suite(void)
{
	Suite *s = suite_create("disk");
	tcase_add_test(h_tcase(s, "fill_fails_then_recovers", 180), fill_fails_then_recovers);
	tcase_add_test(h_tcase(s, "restart_keeps_quota", 180), restart_keeps_quota);
	tcase_add_test(h_tcase(s, "quotas_are_per_sandbox", 180), quotas_are_per_sandbox);
	tcase_add_test(h_tcase(s, "too_small_refused_cleanly", 120), too_small_refused_cleanly);
	tcase_add_test(h_tcase(s, "project_quota_state_dir", 300), project_quota_state_dir);
	return s;
}

int main(void)
{
	return h_main(disk_suite());
}
