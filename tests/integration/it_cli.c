/* The cell CLI against the suite's celld (over --socket). Only the busybox image exists in
 * the test world, so every create names it. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <poll.h>

#include "cell/codec.h"
#include "cell/fsutil.h"
#include "cell/id.h"
#include "harness.h"

/* Run `cell --socket T/cell.sock ARGS...` (NULL-terminated), with a hang guard. */
START_TEST(run_rm_passes_exit_code)
{
	int before = h_sandbox_count();
	struct h_proc p;
	h_cell(&p, "run", "--rm", "--image", "busybox", "--", "sh", "-c",
	       "echo out; echo err >&2; "
	       "exit 7",
	       NULL);
	ck_assert_msg(p.status == 7, "exit %d, stderr: %s", p.status, p.err);
	ck_assert_str_eq(p.out, "out\n");
	ck_assert_msg(strstr(p.err, "err\n"), "stderr: %s", p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_sandbox_count(), before);

	h_cell(&p, "run", "--rm", "--image", "busybox", "--", "sh", "-c", "kill -9 $$", NULL);
	ck_assert_msg(p.status == 137, "exit %d, stderr: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "run", "--rm", "-I", "busybox", "--timeout", "0.5", "--", "sleep", "30", NULL);
	ck_assert_msg(p.status == 124, "exit %d, stderr: %s", p.status, p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_sandbox_count(), before);
}
END_TEST

START_TEST(run_failures_are_125)
{
	struct h_proc p;
	char *argv[] = {
	    NULL,   "--socket", "/nonexistent/cell.sock", "run", "--rm", "--image", "busybox", "--",
	    "true", NULL};
	argv[0] = h_fmt("%s/cell", H.bin);
	h_run(argv, NULL, 60, &p);
	ck_assert_msg(p.status == 125, "unreachable celld: exit %d", p.status);
	ck_assert_msg(strstr(p.err, "/nonexistent/cell.sock"),
		      "message does not name the socket:"
		      " %s",
		      p.err);
	h_proc_free(&p);
	free(argv[0]);

	int before = h_sandbox_count();
	h_cell(&p, "run", "--rm", "--image", "no-such-image", "--", "true", NULL);
	ck_assert_msg(p.status == 125, "unknown image: exit %d", p.status);
	ck_assert_msg(strstr(p.err, "no-such-image") || strstr(p.err, "IMAGE_NOT_FOUND"),
		      "message does not name the image: %s", p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_sandbox_count(), before);
}
END_TEST

/* A CI checkout belongs to the user who runs the job: the sandbox's root works on it as that
 * user, and what it writes comes back theirs. */
#define CI_USER 4242

START_TEST(run_with_volume)
{
	char rnd[CELL_ID_RANDOM_LEN + 1];
	ck_assert_int_eq(cell_id_random(rnd), 0);
	char *hostdir = h_fmt("%s/host-%s", H.dir, rnd);
	ck_assert_int_eq(mkdir(hostdir, 0755), 0);
	char *file = h_fmt("%s/file", hostdir);
	char *content = h_fmt("host-content-%s\n", rnd);
	h_write_file(file, content, 0644);
	ck_assert_int_eq(chown(hostdir, CI_USER, CI_USER), 0);
	ck_assert_int_eq(chown(file, CI_USER, CI_USER), 0);
	char *vol = h_fmt("%s:/mnt", hostdir);
	struct h_proc p;
	h_cell(&p, "run", "--rm", "--image", "busybox", "-v", vol, "--", "cat", "/mnt/file", NULL);
	ck_assert_msg(p.status == 0, "exit %d, stderr: %s", p.status, p.err);
	ck_assert_str_eq(p.out, content);
	ck_assert_str_eq(p.err, ""); /* the owner map needs no warning */
	h_proc_free(&p);

	/* the owner's files are root's inside; what root writes there comes back the owner's */
	h_cell(&p, "run", "--rm", "--image", "busybox", "-v", vol, "--", "sh", "-c",
	       "echo from-sandbox > /mnt/new; stat -c %u /mnt/file", NULL);
	ck_assert_msg(p.status == 0, "exit %d, stderr: %s", p.status, p.err);
	ck_assert_str_eq(p.out, "0\n");
	h_proc_free(&p);
	char *newf = h_fmt("%s/new", hostdir);
	char *got = h_read_file(newf);
	ck_assert_msg(got && !strcmp(got, "from-sandbox\n"), "host file: %s", got);
	struct stat st;
	ck_assert_int_eq(stat(newf, &st), 0);
	ck_assert_uint_eq(st.st_uid, CI_USER);
	ck_assert_uint_eq(st.st_gid, CI_USER);
	free(got);

	/* a directory of root's: the sandbox gets its own ids there, and the CLI says so */
	char *rootdir = h_fmt("%s/rootdir-%s", H.dir, rnd);
	ck_assert_int_eq(mkdir(rootdir, 0755), 0);
	char *rootvol = h_fmt("%s:/mnt", rootdir);
	h_cell(&p, "run", "--rm", "--image", "busybox", "-v", rootvol, "--", "touch", "/mnt/x",
	       NULL);
	ck_assert_int_ne(p.status, 0);
	ck_assert_msg(strstr(p.err, "cell: warning: volume") && strstr(p.err, "system account"),
		      "no warning on stderr: %s", p.err);
	h_proc_free(&p);
	free(rootvol);
	free(rootdir);

	/* map=identity only when named: root's writes are host root's */
	char *idvol = h_fmt("%s:/mnt:map=identity", hostdir);
	h_cell(&p, "run", "--rm", "--image", "busybox", "-v", idvol, "--", "touch", "/mnt/as-root",
	       NULL);
	ck_assert_msg(p.status == 0, "exit %d, stderr: %s", p.status, p.err);
	ck_assert_msg(strstr(p.err, "host root"), "no warning for the identity map: %s", p.err);
	h_proc_free(&p);
	char *asroot = h_fmt("%s/as-root", hostdir);
	ck_assert_int_eq(stat(asroot, &st), 0);
	ck_assert_uint_eq(st.st_uid, 0);
	free(asroot);
	free(idvol);

	/* read-only volumes are read-only */
	char *rovol = h_fmt("%s:/mnt:ro", hostdir);
	h_cell(&p, "run", "--rm", "--image", "busybox", "-v", rovol, "--", "sh", "-c",
	       "echo x > /mnt/ro-write", NULL);
	ck_assert_int_ne(p.status, 0);
	h_proc_free(&p);
	char *rofile = h_fmt("%s/ro-write", hostdir);
	ck_assert_msg(access(rofile, F_OK) != 0, "wrote through a read-only volume");
	free(rofile);
	free(rovol);
	free(newf);
	free(vol);
	free(content);
	free(file);
	free(hostdir);
}
END_TEST

START_TEST(create_session_same_id)
{
	char rnd[CELL_ID_RANDOM_LEN + 1], want[CELL_ID_RANDOM_LEN + 1];
	ck_assert_int_eq(cell_id_random(rnd), 0);
	char *key = h_fmt("cli-session-%s", rnd);
	cell_id_from_session_key(key, strlen(key), want);
	struct h_proc p;
	h_cell(&p, "create", "--image", "busybox", "--session", key, NULL);
	ck_assert_msg(p.status == 0, "exit %d, stderr: %s", p.status, p.err);
	h_track_sandbox(want);
	ck_assert_str_eq(h_trim(p.out), want);
	h_proc_free(&p);
	h_cell(&p, "create", "--image", "busybox", "--session", key, NULL);
	ck_assert_msg(p.status == 0, "exit %d, stderr: %s", p.status, p.err);
	ck_assert_str_eq(h_trim(p.out), want);
	h_proc_free(&p);

	h_cell(&p, "ls", NULL);
	ck_assert_int_eq(p.status, 0);
	ck_assert_msg(strstr(p.out, want), "ls does not list %s:\n%s", want, p.out);
	h_proc_free(&p);
	h_cell(&p, "inspect", want, NULL);
	ck_assert_int_eq(p.status, 0);
	json_t *j = json_loads(p.out, 0, NULL);
	ck_assert_msg(j, "inspect output is not JSON: %s", p.out);
	ck_assert_str_eq(h_jstr(j, "id"), want);
	json_decref(j);
	h_proc_free(&p);
	h_cell(&p, "rm", want, NULL);
	ck_assert_int_eq(p.status, 0);
	h_proc_free(&p);
	char *path = h_fmt("/v1/sandboxes/%s", want);
	ck_assert_int_eq(h_http("GET", path, NULL, NULL), 404);
	free(path);
	free(key);
}
END_TEST

/* `cell create --image busybox`, which must succeed: the id it printed (tracked for the
 * teardown). */
static char *cli_create_busybox(void)
{
	struct h_proc p;
	h_cell(&p, "create", "--image", "busybox", NULL);
	ck_assert_msg(p.status == 0, "exit %d, stderr: %s", p.status, p.err);
	char *id = strdup(h_trim(p.out));
	h_track_sandbox(id);
	h_proc_free(&p);
	return id;
}

START_TEST(exec_and_cp_round_trip)
{
	struct h_proc p;
	char *id = cli_create_busybox();

	/* binary content with NULs, in and out */
	char *src = h_fmt("%s/cp-src", H.dir);
	size_t n = 200000;
	unsigned char *data = malloc(n);
	for (size_t i = 0; i < n; i++)
		data[i] = (unsigned char)(i * 131 + (i >> 9));
	memset(data + 100, 0, 1000);
	FILE *f = fopen(src, "we");
	ck_assert_uint_eq(fwrite(data, 1, n, f), n);
	fclose(f);
	char sha[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(data, n, sha);

	char *dst = h_fmt("%s:/workspace/in.bin", id);
	h_cell(&p, "cp", src, dst, NULL);
	ck_assert_msg(p.status == 0, "cp in: exit %d, stderr: %s", p.status, p.err);
	h_proc_free(&p);

	h_cell(&p, "exec", id, "--", "sha256sum", "/workspace/in.bin", NULL);
	ck_assert_msg(p.status == 0, "exec: exit %d, stderr: %s", p.status, p.err);
	ck_assert_msg(!strncmp(p.out, sha, CELL_SHA256_HEX_LEN), "inside: %s want %s", p.out, sha);
	h_proc_free(&p);

	h_cell(&p, "exec", id, "--", "sh", "-c", "exit 4", NULL);
	ck_assert_int_eq(p.status, 4);
	h_proc_free(&p);
	h_cell(&p, "exec", "-w", "/tmp", "-e", "X=y z", id, "--", "sh", "-c", "echo \"$X\"; pwd",
	       NULL);
	ck_assert_msg(p.status == 0, "exec -w -e: exit %d, stderr: %s", p.status, p.err);
	ck_assert_str_eq(p.out, "y z\n/tmp\n");
	h_proc_free(&p);

	char *back = h_fmt("%s/cp-back", H.dir);
	char *from = h_fmt("%s:/workspace/in.bin", id);
	h_cell(&p, "cp", from, back, NULL);
	ck_assert_msg(p.status == 0, "cp out: exit %d, stderr: %s", p.status, p.err);
	h_proc_free(&p);
	char *got = NULL;
	size_t got_len = 0;
	ck_assert_int_eq(cell_read_file_at(AT_FDCWD, back, 1u << 20, &got, &got_len, NULL), 0);
	ck_assert_uint_eq(got_len, n);
	ck_assert_msg(!memcmp(got, data, n), "round-tripped bytes differ");
	free(got);

	/* to stdout */
	h_cell(&p, "cp", from, "-", NULL);
	ck_assert_int_eq(p.status, 0);
	ck_assert_uint_eq(p.out_len, n);
	ck_assert_msg(!memcmp(p.out, data, n), "cp to stdout differs");
	h_proc_free(&p);

	/* a missing file is an error naming it */
	char *missing = h_fmt("%s:/workspace/missing", id);
	h_cell(&p, "cp", missing, back, NULL);
	ck_assert_int_ne(p.status, 0);
	ck_assert_msg(strstr(p.err, "/workspace/missing"), "stderr: %s", p.err);
	h_proc_free(&p);

	free(missing);
	free(from);
	free(back);
	free(dst);
	free(data);
	free(src);
	free(id);
}
END_TEST

/* cp of a directory out of a sandbox: its tar archive unpacked into a new DST or into
 * DST/<name> when DST is a directory (links made as links, set-id bits dropped), or written
 * to stdout with "-"; an archive cut short in the sandbox (past 32 levels) fails the cp. */
START_TEST(cp_directory_out)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "mkdir -p /workspace/proj/a/b && echo deep >/workspace/proj/a/b/f && "
		      "ln -s /etc/passwd /workspace/proj/out && echo s >/workspace/proj/suid && "
		      "chmod 4755 /workspace/proj/suid && "
		      "mkdir -p /workspace/deep/$(seq -s/ 33) && echo x >/workspace/deep/0"));
	struct h_proc p;
	char *from = h_fmt("%s:/workspace/proj", id);
	char *dst = h_fmt("%s/cp-dir", H.dir);
	h_cell(&p, "cp", from, dst, NULL);
	ck_assert_msg(p.status == 0, "cp dir: exit %d, stderr: %s", p.status, p.err);
	h_proc_free(&p);
	char *f = h_fmt("%s/a/b/f", dst);
	char *got = h_read_file(f);
	ck_assert_msg(got && !strcmp(got, "deep\n"), "%s: %s", f, got ? got : strerror(errno));
	free(got);
	free(f);
	f = h_fmt("%s/out", dst);
	char target[64];
	ssize_t n = readlink(f, target, sizeof(target));
	ck_assert_msg(n == 11 && !memcmp(target, "/etc/passwd", 11), "out: %zd", n);
	free(f);
	f = h_fmt("%s/suid", dst);
	struct stat st;
	ck_assert_int_eq(lstat(f, &st), 0);
	ck_assert_msg(S_ISREG(st.st_mode) && !(st.st_mode & 07000) && (st.st_mode & 0700) == 0700,
		      "suid: mode %o", st.st_mode);
	free(f);

	/* into an existing directory: DST/proj */
	h_cell(&p, "cp", from, dst, NULL);
	ck_assert_msg(p.status == 0, "cp dir again: exit %d, stderr: %s", p.status, p.err);
	h_proc_free(&p);
	f = h_fmt("%s/proj/a/b/f", dst);
	ck_assert_msg(access(f, F_OK) == 0, "%s: %s", f, strerror(errno));
	free(f);

	/* to stdout: the archive itself */
	h_cell(&p, "cp", from, "-", NULL);
	ck_assert_msg(p.status == 0 && p.out_len >= 1024 && p.out_len % 512 == 0 &&
			  !strncmp(p.out, "proj/", 5),
		      "cp dir -: exit %d, %zu bytes, stderr: %s", p.status, p.out_len, p.err);
	h_proc_free(&p);

	/* cut short in the sandbox: an error, what came is there */
	char *deep = h_fmt("%s:/workspace/deep", id);
	char *ddst = h_fmt("%s/cp-deep", H.dir);
	h_cell(&p, "cp", deep, ddst, NULL);
	ck_assert_msg(p.status != 0, "cp of a cut archive succeeded");
	h_proc_free(&p);
	f = h_fmt("%s/0", ddst);
	ck_assert_msg(access(f, F_OK) == 0, "%s: %s", f, strerror(errno));
	free(f);
	free(ddst);
	free(deep);
	free(dst);
	free(from);
	free(id);
}
END_TEST

/* --user UID[:GID]: the command runs with those ids (GID defaults to UID), root without. */
START_TEST(exec_user)
{
	char *id = h_create("busybox", NULL);
	struct h_proc p;
	h_cell(&p, "exec", "--user", "1000", id, "--", "id", "-u", NULL);
	ck_assert_msg(p.status == 0, "exec --user 1000: exit %d: %s", p.status, p.err);
	ck_assert_str_eq(p.out, "1000\n");
	h_proc_free(&p);
	h_cell(&p, "exec", "-u", "1000:2000", id, "--", "sh", "-c",
	       "id -u; id -g; id -G; grep NoNewPrivs /proc/self/status", NULL);
	ck_assert_msg(p.status == 0, "exec -u 1000:2000: exit %d: %s", p.status, p.err);
	ck_assert_str_eq(p.out, "1000\n2000\n2000\nNoNewPrivs:\t1\n");
	h_proc_free(&p);
	h_cell(&p, "exec", "--user", "1000", id, "--", "touch", "/root/by-user", NULL);
	ck_assert_msg(p.status == 1 && strstr(p.err, "Permission denied"),
		      "touch /root as 1000: exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "exec", "--user", "0", id, "--", "id", "-u", NULL);
	ck_assert_str_eq(p.out, "0\n");
	h_proc_free(&p);
	h_cell(&p, "exec", id, "--", "id", "-u", NULL);
	ck_assert_str_eq(p.out, "0\n");
	h_proc_free(&p);
	h_cell(&p, "run", "--rm", "--image", "busybox", "--user", "4242:4243", "--", "sh", "-c",
	       "id -u; id -g", NULL);
	ck_assert_msg(p.status == 0, "run --user 4242:4243: exit %d: %s", p.status, p.err);
	ck_assert_str_eq(p.out, "4242\n4243\n");
	h_proc_free(&p);
	free(id);
}
END_TEST

/* A bad --user is refused before anything is sent: exit 125, a message naming the option
 * and the value, no command run, no sandbox created. */
START_TEST(exec_user_refused)
{
	static const char *const bad[] = {
	    "",	     "user", "root",  "-1",    "65536", "1000:", ":1000",
	    "1:2:3", "0x10", " 1000", "1000 ", "1e3",	"+5",	 "99999999999999999999",
	    "1000:x"};
	char *id = h_create("busybox", NULL);
	int before = h_sandbox_count();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *want = h_fmt("--user '%s'", bad[i]);
		struct h_proc p;
		h_cell(&p, "exec", "--user", bad[i], id, "--", "touch", "/tmp/ran", NULL);
		ck_assert_msg(p.status == 125 && strstr(p.err, want) && !p.out[0],
			      "exec --user '%s': exit %d, stdout [%s], stderr %s", bad[i], p.status,
			      p.out, p.err);
		h_proc_free(&p);
		h_cell(&p, "run", "--rm", "--image", "busybox", "--user", bad[i], "--", "true",
		       NULL);
		ck_assert_msg(p.status == 125 && strstr(p.err, want),
			      "run --user '%s': exit %d, stderr %s", bad[i], p.status, p.err);
		h_proc_free(&p);
		free(want);
	}
	struct h_proc p;
	h_cell(&p, "exec", "--user", "user", id, "--", "true", NULL);
	ck_assert_msg(strstr(p.err, "names are not resolved"), "stderr: %s", p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_sh_code(id, "test -e /tmp/ran"), 1);
	ck_assert_int_eq(h_sandbox_count(), before);
	free(id);
}
END_TEST

/* `cell fs ARGS...` must exit `want`; the output stays in p (free with h_proc_free). */
static void fs_check(struct h_proc *p, int want, const char *sub)
{
	ck_assert_msg(p->status == want, "cell fs %s: exit %d (want %d), stdout: %s stderr: %s",
		      sub, p->status, want, p->out, p->err);
}
#define FS(p, want, sub, ...)                                                                      \
	do {                                                                                       \
		h_cell((p), "fs", (sub), __VA_ARGS__, NULL);                                       \
		fs_check((p), (want), (sub));                                                      \
	} while (0)

/* cell fs: every subcommand against a real sandbox, through what the sandbox itself sees. */
START_TEST(fs_family)
{
	struct h_proc p;
	char *id = cli_create_busybox();

	/* mkdir -p with a mode and an owner */
	FS(&p, 0, "mkdir", "-m", "750", "--owner", "1000", "--group", "1000", id,
	   "/workspace/a/b/c", "/workspace/d");
	h_proc_free(&p);
	h_cell(&p, "exec", id, "--", "stat", "-c", "%a %u %g", "/workspace/a/b/c", "/workspace/d",
	       "/workspace/a", NULL);
	ck_assert_msg(p.status == 0, "stat: %s", p.err);
	ck_assert_str_eq(p.out, "750 1000 1000\n750 1000 1000\n755 0 0\n");
	h_proc_free(&p);
	h_cell(&p, "exec", id, "--", "sh", "-c",
	       "echo hi > /workspace/a/b/f.txt && echo x > /workspace/a/g.c && "
	       "ln -s /etc /workspace/a/l",
	       NULL);
	ck_assert_int_eq(p.status, 0);
	h_proc_free(&p);

	/* ls: one level by default, -R all; the table has the header and the paths */
	FS(&p, 0, "ls", id, "/workspace/a");
	ck_assert_msg(strstr(p.out, "TYPE") && strstr(p.out, "/workspace/a/b\n") &&
			  strstr(p.out, "/workspace/a/g.c\n") && !strstr(p.out, "f.txt"),
		      "ls: %s", p.out);
	h_proc_free(&p);
	FS(&p, 0, "ls", "-R", id, "/workspace/a");
	ck_assert_msg(strstr(p.out, "/workspace/a/b/f.txt\n") &&
			  strstr(p.out, "/workspace/a/b/c\n"),
		      "ls -R: %s", p.out);
	h_proc_free(&p);
	FS(&p, 0, "ls", "--depth", "2", "--json", id, "/workspace/a");
	json_t *j = json_loads(p.out, 0, NULL);
	ck_assert_msg(json_is_array(j), "ls --json: %s", p.out);
	ck_assert_uint_eq(json_array_size(j), 5); /* b, b/c, b/f.txt, g.c, l */
	json_decref(j);
	h_proc_free(&p);

	/* stat: type, mode, size per path */
	FS(&p, 0, "stat", id, "/workspace/a/b/f.txt", "/workspace/d");
	ck_assert_msg(strstr(p.out, "file") && strstr(p.out, "directory") && strstr(p.out, "750") &&
			  strstr(p.out, "/workspace/a/b/f.txt"),
		      "stat: %s", p.out);
	h_proc_free(&p);
	FS(&p, 0, "stat", "--json", id, "/workspace/a/b/f.txt");
	j = json_loads(p.out, 0, NULL);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_object_get(j, "/workspace/a/b/f.txt"), "size")),
	    3);
	json_decref(j);
	h_proc_free(&p);

	/* find: by name at any depth, and by a path pattern */
	FS(&p, 0, "find", id, "/workspace", "*.txt");
	ck_assert_str_eq(p.out, "/workspace/a/b/f.txt\n");
	h_proc_free(&p);
	FS(&p, 0, "find", id, "/workspace/a", "**/*.c");
	ck_assert_str_eq(p.out, "/workspace/a/g.c\n");
	h_proc_free(&p);

	/* chmod with an owner; mv into a directory */
	FS(&p, 0, "chmod", "--owner", "1000", "--group", "root", "600", id, "/workspace/a/g.c");
	h_proc_free(&p);
	FS(&p, 0, "mv", id, "/workspace/a/g.c", "/workspace/d/");
	h_proc_free(&p);
	h_cell(&p, "exec", id, "--", "stat", "-c", "%a %u %g", "/workspace/d/g.c", NULL);
	ck_assert_msg(p.status == 0, "moved file: %s", p.err);
	ck_assert_str_eq(p.out, "600 1000 0\n");
	h_proc_free(&p);

	/* rm a file, then rm -r a tree */
	FS(&p, 0, "rm", id, "/workspace/d/g.c");
	h_proc_free(&p);
	FS(&p, 0, "rm", "-r", id, "/workspace/a");
	h_proc_free(&p);
	h_cell(&p, "exec", id, "--", "ls", "-A", "/workspace/d", "/workspace", NULL);
	ck_assert_int_eq(p.status, 0);
	ck_assert_msg(!strstr(p.out, "g.c") && !strstr(p.out, "a\n"), "after rm: %s", p.out);
	h_proc_free(&p);
	free(id);
}
END_TEST

/* cell fs rm -r does what rm -r does: a file, a symbolic link (not what it points to) and
 * a directory with everything in it, in one command; a missing path removes nothing. */
START_TEST(fs_rm_recursive_takes_files)
{
	struct h_proc p;
	char *id = cli_create_busybox();
	h_cell(&p, "exec", id, "--", "sh", "-c",
	       "mkdir -p /workspace/d/e /workspace/keep && echo x > /workspace/d/e/f && "
	       "echo y > /workspace/f && echo z > /workspace/keep/k && "
	       "ln -s /workspace/keep /workspace/l",
	       NULL);
	ck_assert_int_eq(p.status, 0);
	h_proc_free(&p);

	FS(&p, 0, "rm", "-r", id, "/workspace/f");
	h_proc_free(&p);
	FS(&p, 1, "rm", "-r", id, "/workspace/d", "/workspace/missing", "/workspace/l");
	ck_assert_msg(strstr(p.err, "/workspace/missing"), "rm -r missing: %s", p.err);
	h_proc_free(&p);
	h_cell(&p, "exec", id, "--", "ls", "/workspace", NULL);
	ck_assert_str_eq(p.out, "d\nkeep\nl\n");
	h_proc_free(&p);
	FS(&p, 0, "rm", "-r", id, "/workspace/d", "/workspace/l");
	h_proc_free(&p);
	h_cell(&p, "exec", id, "--", "sh", "-c", "ls /workspace; cat /workspace/keep/k", NULL);
	ck_assert_str_eq(p.out, "keep\nz\n");
	h_proc_free(&p);
	free(id);
}
END_TEST

/* cell fs: a missing path is the server's message and exit 1; bad usage is 2, naming it. */
START_TEST(fs_errors)
{
	struct h_proc p;
	char *id = cli_create_busybox();

	const char *miss = "/workspace/missing";
	FS(&p, 1, "ls", id, miss);
	ck_assert_msg(strstr(p.err, miss) && strstr(p.err, "FILE_NOT_FOUND"), "ls: %s", p.err);
	h_proc_free(&p);
	FS(&p, 1, "stat", id, miss);
	ck_assert_msg(strstr(p.err, miss), "stat: %s", p.err);
	h_proc_free(&p);
	FS(&p, 1, "rm", id, miss);
	ck_assert_msg(strstr(p.err, miss), "rm: %s", p.err);
	h_proc_free(&p);
	FS(&p, 1, "mv", id, miss, "/workspace/x");
	ck_assert_msg(strstr(p.err, "fs mv"), "mv: %s", p.err);
	h_proc_free(&p);
	FS(&p, 1, "chmod", "644", id, miss);
	ck_assert_msg(strstr(p.err, miss), "chmod: %s", p.err);
	h_proc_free(&p);
	FS(&p, 1, "find", id, miss, "*");
	ck_assert_msg(strstr(p.err, "fs find"), "find: %s", p.err);
	h_proc_free(&p);
	/* rm without -r refuses a directory */
	FS(&p, 1, "rm", id, "/workspace");
	h_proc_free(&p);
	/* an unknown sandbox */
	FS(&p, 1, "ls", "nosuchsandbox", "/");
	h_proc_free(&p);

	/* usage errors name what was wrong and change nothing */
	FS(&p, 2, "ls", "--depth", "0", id, "/");
	ck_assert_msg(strstr(p.err, "--depth"), "%s", p.err);
	h_proc_free(&p);
	FS(&p, 2, "rm", "-m", "7", id, "/workspace");
	ck_assert_msg(strstr(p.err, "-m") && strstr(p.err, "fs rm --help"), "%s", p.err);
	h_proc_free(&p);
	FS(&p, 2, "rm", "-rx", id, "/workspace");
	ck_assert_msg(strstr(p.err, "unknown option '-x'"), "%s", p.err);
	h_proc_free(&p);
	FS(&p, 2, "mkdir", id, "/workspace/n", "--owner");
	ck_assert_msg(strstr(p.err, "--owner"), "%s", p.err);
	h_proc_free(&p);
	FS(&p, 2, "mkdir", "-m", "rwx", id, "/workspace/n");
	ck_assert_msg(strstr(p.err, "mode 'rwx'"), "%s", p.err);
	h_proc_free(&p);
	FS(&p, 2, "mkdir", id, "relative");
	ck_assert_msg(strstr(p.err, "absolute"), "%s", p.err);
	h_proc_free(&p);
	FS(&p, 2, "mv", id, "/workspace");
	h_proc_free(&p);
	FS(&p, 2, "frob", id);
	h_proc_free(&p);
	h_cell(&p, "exec", id, "--", "ls", "/workspace/n", NULL);
	ck_assert_int_ne(p.status, 0);
	h_proc_free(&p);

	/* help of the family and of each subcommand */
	const char *subs[] = {"ls", "stat", "find", "mkdir", "rm", "mv", "chmod"};
	h_cell(&p, "fs", "--help", NULL);
	fs_check(&p, 0, "--help");
	ck_assert_msg(strstr(p.out, "Usage: cell fs"), "%s", p.out);
	h_proc_free(&p);
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		FS(&p, 0, subs[i], "--help");
		ck_assert_msg(strstr(p.out, subs[i]), "%s --help: %s", subs[i], p.out);
		h_proc_free(&p);
	}
	free(id);
}
END_TEST

/* ---- cell port, cell forward ---- */

START_TEST(port_prints_preview_url)
{
	char *id = h_create("busybox", NULL);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	struct h_proc p;
	h_cell(&p, "port", id, "8080", NULL);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	/* Over the socket, the URL names celld's TCP listener, with the port's token. */
	char *want = h_fmt("http://%s/v1/sandboxes/%s/proxy/8080/?cell_token=", H.listen, id);
	ck_assert_msg(!strncmp(p.out, want, strlen(want)), "%s", p.out);
	ck_assert_uint_eq(strlen(p.out), strlen(want) + 43 + 1);
	ck_assert_int_eq(p.out[strlen(p.out) - 1], '\n');
	/* The same token the endpoint answer gives. */
	char *path = h_fmt("/v1/sandboxes/%s/endpoints/8080", id);
	struct h_resp r;
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(p.out + strlen(want),
			 h_fmt("%s\n", h_jstr(r.json, "headers.X-Cell-Preview-Token")));
	h_resp_free(&r);
	h_proc_free(&p);
	h_cell(&p, "port", id, "44772", NULL);
	ck_assert_msg(p.status == 1 && strstr(p.err, "no preview URL"), "exit %d: %s", p.status,
		      p.err);
	h_proc_free(&p);
	h_cell(&p, "port", id, "0", NULL);
	ck_assert_msg(p.status == 2 && strstr(p.err, "1 to 65535"), "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "port", "no-such-sandbox", "8080", NULL);
	ck_assert_msg(p.status == 1, "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	free(path);
	free(want);
	free(id);
}
END_TEST

/* `cell forward` started in the background: its pid, its stdout's first line read. */
static pid_t start_forward(const char *id, const char *spec, int *err_fd, char *line, size_t size)
{
	int out[2], err[2];
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(err, O_CLOEXEC), 0);
	char *bin = h_fmt("%s/cell", H.bin);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		execl(bin, "cell", "--socket", H.socket, "forward", id, spec, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	size_t n = 0;
	while (n + 1 < size) {
		ssize_t r = read(out[0], line + n, 1);
		if (r <= 0 || line[n] == '\n')
			break;
		n++;
	}
	line[n] = '\0';
	close(out[0]);
	*err_fd = err[0];
	free(bin);
	return pid;
}

static int connect_local(unsigned port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct timeval tv = {.tv_sec = 30};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Send len bytes through fd to an echo server, reading the echo as it comes: whether it
 * came back whole and unchanged; then the half-close, and the server's end. */
static void echo_round_trip(int fd, size_t len)
{
	unsigned char *data = malloc(len), *back = malloc(len);
	ck_assert(data && back);
	for (size_t i = 0; i < len; i++)
		data[i] = (unsigned char)((i * 2654435761u) >> 11);
	size_t sent = 0, got = 0;
	while (got < len) {
		if (sent < len) {
			size_t n = len - sent < 16384 ? len - sent : 16384;
			ssize_t w = send(fd, data + sent, n, MSG_NOSIGNAL);
			ck_assert_int_gt(w, 0);
			sent += (size_t)w;
		}
		while (got < sent) {
			ssize_t r = recv(fd, back + got, sent - got, 0);
			ck_assert_msg(r > 0, "the echo stopped at %zu of %zu bytes", got, len);
			got += (size_t)r;
		}
	}
	ck_assert(!memcmp(data, back, len));
	ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
	char c;
	ck_assert_int_eq(recv(fd, &c, 1, 0), 0); /* cat saw the end, the server closed */
	free(data);
	free(back);
}

START_TEST(forward_joins_a_local_port)
{
	char *id = h_create("busybox", NULL);
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	free(h_sh(id, "nohup nc -ll -p 9000 -e cat >/dev/null 2>&1 &"));
	char line[256];
	int err_fd;
	pid_t pid = start_forward(id, "0:9000", &err_fd, line, sizeof(line));
	unsigned lport = 0;
	char *want = h_fmt("-> %s:9000", id);
	ck_assert_msg(sscanf(line, "Forwarding 127.0.0.1:%u", &lport) == 1 && lport &&
			  strstr(line, want),
		      "first line: %s", line);
	/* nc may take a moment to listen: the first connection is retried. */
	int ok = 0;
	for (int i = 0; i < 50 && !ok; i++) {
		int fd = connect_local(lport);
		if (send(fd, "x", 1, MSG_NOSIGNAL) == 1) {
			char c;
			ok = recv(fd, &c, 1, 0) == 1 && c == 'x';
		}
		close(fd);
		if (!ok)
			h_sleep_ms(100);
	}
	ck_assert_msg(ok, "no echo through the forward");
	/* Bytes intact both ways, twice at once. */
	int a = connect_local(lport), b = connect_local(lport);
	echo_round_trip(a, 3u << 20);
	echo_round_trip(b, 100000);
	close(a);
	close(b);
	/* ^C: it stops cleanly. */
	ck_assert_int_eq(kill(pid, SIGINT), 0);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	close(err_fd);

	/* Nothing listens on the port: the local connection is closed, the reason told. */
	pid = start_forward(id, "127.0.0.1:0:9001", &err_fd, line, sizeof(line));
	ck_assert_int_eq(sscanf(line, "Forwarding 127.0.0.1:%u", &lport), 1);
	int fd = connect_local(lport);
	char c;
	ck_assert_int_le(recv(fd, &c, 1, 0), 0);
	close(fd);
	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	char errtext[2048];
	ssize_t n = read(err_fd, errtext, sizeof(errtext) - 1);
	errtext[n > 0 ? n : 0] = '\0';
	ck_assert_msg(strstr(errtext, "PROXY_CONNECT_FAILED"), "stderr: %s", errtext);
	close(err_fd);

	/* Bad specs and ids are refused before anything listens. */
	struct h_proc p;
	h_cell(&p, "forward", id, "9000", NULL);
	ck_assert_msg(p.status == 2, "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "forward", id, "0:70000", NULL);
	ck_assert_msg(p.status == 2, "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "forward", "no-such-sandbox", "0:9000", NULL);
	ck_assert_msg(p.status == 1, "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	free(want);
	free(id);
}
END_TEST

/* ---- run and create as docker's ---- */

/* cell ARGS... on a new terminal (a pty of ours as its stdin, stdout and stderr), with
 * input written to it: what it printed there, and its exit status in *status. */
static char *cell_on_pty(const char *input, int *status, const char *const *args)
{
	int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	ck_assert_int_ge(master, 0);
	ck_assert_int_eq(grantpt(master), 0);
	ck_assert_int_eq(unlockpt(master), 0);
	char *slave = strdup(ptsname(master));
	char *bin = h_fmt("%s/cell", H.bin);
	char *sock = h_fmt("%s/cell.sock", H.dir);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setsid();
		int fd = open(slave, O_RDWR);
		if (fd < 0)
			_exit(126);
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		const char *argv[32] = {bin, "--socket", sock};
		size_t n = 3;
		for (size_t i = 0; args[i] && n < 31; i++)
			argv[n++] = args[i];
		argv[n] = NULL;
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	if (input)
		ck_assert_int_eq(write(master, input, strlen(input)), (ssize_t)strlen(input));
	size_t len = 0, cap = 1 << 16;
	char *out = calloc(1, cap);
	for (int rounds = 0; rounds < 600 && len + 1 < cap; rounds++) {
		struct pollfd pfd = {.fd = master, .events = POLLIN};
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		ssize_t n = read(master, out + len, cap - len - 1);
		if (n <= 0)
			break; /* EIO: every holder of the slave is gone */
		len += (size_t)n;
	}
	out[len] = '\0';
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	close(master);
	free(slave);
	free(bin);
	free(sock);
	return out;
}

START_TEST(run_it_is_a_throwaway_shell)
{
	int before = h_sandbox_count();
	int status;
	const char *args[] = {"run", "-it",  "--rm", "-I", "busybox",
			      "-w",  "/etc", "--",   "sh", NULL};
	char *out = cell_on_pty("tty; echo got-$((40+2)) in $PWD; exit 5\r", &status, args);
	ck_assert_msg(status == 5, "exit %d, terminal: %s", status, out);
	ck_assert_msg(strstr(out, "got-42 in /etc"), "terminal: %s", out);
	ck_assert_msg(strstr(out, "/dev/pts/"), "no terminal in the sandbox: %s", out);
	free(out);
	ck_assert_int_eq(h_sandbox_count(), before);
}
END_TEST

START_TEST(run_i_is_not_image)
{
	int before = h_sandbox_count();
	struct h_proc p;
	h_cell(&p, "run", "-i", "busybox", "--", "true", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "-i is --interactive") &&
			  strstr(p.err, "--image busybox"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "create", "-I", "busybox", "--timeout", "5", NULL);
	ck_assert_msg(p.status == 2 && strstr(p.err, "--timeout '5'") &&
			  strstr(p.err, "at least 60"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "create", "-i", "busybox", NULL);
	ck_assert_msg(p.status == 2 && strstr(p.err, "--interactive") && strstr(p.err, "-I"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	/* -i alone feeds the command this input */
	char *bin = h_fmt("%s/cell", H.bin);
	char *sock = h_fmt("%s/cell.sock", H.dir);
	char *cmd =
	    h_fmt("echo piped-in | %s --socket %s run -i --rm -I busybox -- cat", bin, sock);
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	h_run(argv, NULL, 120, &p);
	ck_assert_msg(p.status == 0 && !strcmp(p.out, "piped-in\n"), "exit %d: %s %s", p.status,
		      p.out, p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_sandbox_count(), before);
	free(cmd);
	free(sock);
	free(bin);
}
END_TEST

START_TEST(run_detach_publish_and_limits)
{
	char rnd[CELL_ID_RANDOM_LEN + 1];
	ck_assert_int_eq(cell_id_random(rnd), 0);
	char *envfile = h_fmt("%s/env-%s", H.dir, rnd);
	h_write_file(envfile, "# a comment\nFROM_FILE=one two\n\nFROM_HOST\n", 0644);
	setenv("FROM_HOST", "host-value", 1);
	struct h_proc p;
	h_cell(&p, "run", "-d", "-p", "8080", "-I", "busybox", "--label", "team=cli", "--memory",
	       "256m", "--cpus", "0.5", "--pids-limit", "200", "--env-file", envfile, "--", "sh",
	       "-c", "echo \"$FROM_FILE/$FROM_HOST\" > /tmp/started; sleep 300", NULL);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	char *id = strdup(h_trim(p.out));
	h_track_sandbox(id);
	ck_assert_msg(cell_id_valid(id), "-d printed '%s'", id);
	char *want = h_fmt("cell: port 8080: http://%s/v1/sandboxes/%s/proxy/8080/", H.listen, id);
	ck_assert_msg(strstr(p.err, want), "stderr: %s", p.err);
	h_proc_free(&p);

	/* the command runs on in the background, with the file's environment */
	char *got = NULL;
	for (int i = 0; i < 100 && !got; i++) {
		h_cell(&p, "exec", id, "--", "cat", "/tmp/started", NULL);
		if (p.status == 0)
			got = strdup(p.out);
		else
			usleep(100 * 1000);
		h_proc_free(&p);
	}
	ck_assert_msg(got && !strcmp(got, "one two/host-value\n"), "background: %s", got);
	/* the limits' cgroup files, v2's or v1's */
	h_cell(&p, "exec", id, "--", "sh", "-c",
	       "cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max 2>/dev/null || cat "
	       "/sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max",
	       NULL);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	ck_assert_str_eq(p.out, "268435456\n200\n");
	h_proc_free(&p);
	h_cell(&p, "inspect", id, NULL);
	json_t *j = json_loads(p.out, 0, NULL);
	ck_assert_msg(j, "inspect: %s", p.out);
	ck_assert_str_eq(h_jstr(j, "metadata.team"), "cli");
	ck_assert_str_eq(h_jstr(j, "resourceLimits.cpu"), "0.5");
	json_decref(j);
	h_proc_free(&p);

	/* refusals name the flag, and leave nothing behind */
	int before = h_sandbox_count();
	h_cell(&p, "run", "--rm", "-I", "busybox", "--memory", "lots", "--", "true", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "--memory") &&
			  !strstr(p.err, "resourceLimits"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "run", "-d", "-t", "--rm", "-I", "busybox", "--", "true", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "-d -t does not take --rm"), "exit %d: %s",
		      p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "run", "-d", "-i", "--timeout", "5", "-I", "busybox", "--", "true", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "-d -i does not take --timeout"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "run", "-d", "-i", "-u", "1000", "-I", "busybox", "--", "true", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "-d -i does not take --user"), "exit %d: %s",
		      p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "run", "--rm", "-I", "busybox", "--env-file", "/nonexistent/env", "--", "true",
	       NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "--env-file /nonexistent/env"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "run", "--rm", "-I", "busybox", "--snapshot", "nosuch", "--", "true", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "--image and --snapshot"), "exit %d: %s",
		      p.status, p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_sandbox_count(), before);
	unsetenv("FROM_HOST");
	free(got);
	free(want);
	free(id);
	free(envfile);
}
END_TEST

/* What `cell run -d ...` answered in p, which must be a success: the id it printed
 * (tracked). p is freed. */
static char *detached_id(struct h_proc *p)
{
	ck_assert_msg(p->status == 0, "exit %d: %s", p->status, p->err);
	char *id = strdup(h_trim(p->out));
	ck_assert_msg(cell_id_valid(id), "-d printed '%s'", id);
	h_track_sandbox(id);
	h_proc_free(p);
	return id;
}

/* -d --rm: celld deletes the sandbox when the detached command ends. */
START_TEST(run_detach_rm)
{
	struct h_proc p;
	h_cell(&p, "run", "-d", "--rm", "-I", "busybox", "--", "sh", "-c", "sleep 1", NULL);
	char *id = detached_id(&p);
	char *path = h_fmt("/v1/sandboxes/%s", id);
	long st = 0;
	for (int i = 0; i < 300 && (st = h_http("GET", path, NULL, NULL)) == 200; i++)
		h_sleep_ms(100);
	ck_assert_int_eq(st, 404);
	/* a command that does not start: the CLI deletes the sandbox itself */
	int before = h_sandbox_count();
	h_cell(&p, "run", "-d", "--rm", "-I", "busybox", "--", "/nonexistent", NULL);
	ck_assert_msg(p.status != 0, "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_sandbox_count(), before);
	free(path);
	free(id);
}
END_TEST

/* -d --timeout: the detached command is killed after it. */
START_TEST(run_detach_timeout)
{
	struct h_proc p;
	h_cell(&p, "run", "-d", "--timeout", "1", "-I", "busybox", "--", "sh", "-c",
	       "echo $$ > /tmp/pid; exec sleep 1000", NULL);
	char *id = detached_id(&p);
	int alive = 0;
	for (int i = 0; i < 300; i++) {
		alive = h_sh_code(id, "test -s /tmp/pid && ! kill -0 $(cat /tmp/pid)");
		if (alive == 0)
			break;
		h_sleep_ms(100);
	}
	ck_assert_msg(alive == 0, "the detached command outlived its --timeout");
	free(id);
}
END_TEST

/* -d -t or -d -i: the command on a terminal session nobody attached to, running at once;
 * `cell attach` to it later replays what it wrote and takes it to its end (its input
 * ends here, /dev/null: the terminal's end-of-file ends its read). */
static void detached_session(const char *flag)
{
	struct h_proc p;
	h_cell(&p, "run", "-d", flag, "-I", "busybox", "--", "sh", "-c",
	       "echo hello-pty; read x; echo bye-$x", NULL);
	char *err = strdup(p.err);
	char *id = detached_id(&p);
	char *want = h_fmt("cell attach %s ", id);
	char *at = strstr(err, want);
	ck_assert_msg(at, "stderr: %s", err);
	char *sid = strdup(h_trim(at + strlen(want)));
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/pty/%s", id, sid);
	struct h_resp r = {0};
	long off = 0;
	for (int i = 0; i < 100 && off == 0; i++) {
		ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
		ck_assert(json_is_true(h_jget(r.json, "running")));
		off = h_jint(r.json, "output_offset");
		h_resp_free(&r);
		if (off == 0)
			h_sleep_ms(100);
	}
	ck_assert_msg(off > 0, "the session wrote nothing");
	h_cell(&p, "attach", id, sid, NULL);
	ck_assert_msg(p.status == 0 && strstr(p.out, "hello-pty") && strstr(p.out, "bye-"),
		      "attach: exit %d: %s %s", p.status, p.out, p.err);
	h_proc_free(&p);
	free(path);
	free(sid);
	free(want);
	free(err);
	free(id);
}

START_TEST(run_detach_tty_session)
{
	detached_session("-t");
	detached_session("-i");
}
END_TEST

START_TEST(run_entrypoint)
{
	struct h_proc p;
	h_cell(&p, "create", "-I", "busybox", "--entrypoint", "sleep 1000", NULL);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	char *id = strdup(h_trim(p.out));
	h_track_sandbox(id);
	h_proc_free(&p);
	h_cell(&p, "exec", id, "--", "sh", "-c",
	       "cat /proc/1/cmdline /proc/[0-9]*/cmdline | tr '\\0' ' '", NULL);
	ck_assert_msg(strstr(p.out, "sleep 1000"), "no entrypoint: %s %s", p.out, p.err);
	h_proc_free(&p);
	free(id);
}
END_TEST

/* ---- names and ids as the user gives them ---- */

/* `cell create -I busybox --name PREFIX<random>`, which must succeed: the name in *name
 * (malloc'd), the id (tracked) returned. */
static char *cli_create_named(const char *prefix, char **name)
{
	char rnd[CELL_ID_RANDOM_LEN + 1];
	ck_assert_int_eq(cell_id_random(rnd), 0);
	*name = h_fmt("%s%s", prefix, rnd);
	struct h_proc p;
	h_cell(&p, "create", "-I", "busybox", "--name", *name, NULL);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	char *id = strdup(h_trim(p.out));
	h_track_sandbox(id);
	h_proc_free(&p);
	return id;
}

START_TEST(names_are_unique_and_taken_for_ids)
{
	char *name;
	char *id = cli_create_named("web-", &name);
	struct h_proc p;

	/* a second create of the name is refused by celld, naming the flag */
	int before = h_sandbox_count();
	h_cell(&p, "create", "-I", "busybox", "--name", name, NULL);
	ck_assert_msg(p.status == 1 && strstr(p.err, "--name") && strstr(p.err, "taken"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	char *body =
	    h_fmt("{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.name\":\"%s\"}}", name);
	ck_assert_int_eq(h_http("POST", "/v1/sandboxes", body, NULL), 409);
	ck_assert_int_eq(h_http("POST", "/v1/sandboxes",
				"{\"image\":{\"uri\":\"busybox\"},\"extensions\":{\"cell.name\":"
				"\"-bad/name\"}}",
				NULL),
			 400);
	ck_assert_int_eq(h_sandbox_count(), before);

	/* the name, and a unique start of the id, wherever an id is taken */
	h_cell(&p, "exec", name, "--", "echo", "by-name", NULL);
	ck_assert_msg(p.status == 0 && !strcmp(p.out, "by-name\n"), "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "ls", NULL);
	ck_assert_msg(strstr(p.out, "NAME") && strstr(p.out, name), "ls: %s", p.out);
	h_proc_free(&p);
	h_cell(&p, "ls", "-q", NULL);
	ck_assert_msg(strstr(p.out, id) && !strstr(p.out, "NAME") && !strstr(p.out, name),
		      "ls -q: %s", p.out);
	h_proc_free(&p);
	json_t *j;
	char *line = h_fmt("%s %s\tRunning\n", id, name);
	h_cell(&p, "ls", "--format", "{{.ID}} {{ .Name }}\\t{{.State}}", NULL);
	ck_assert_msg(p.status == 0 && strstr(p.out, line), "ls --format: %s %s", p.out, p.err);
	h_proc_free(&p);
	h_cell(&p, "ls", "--format", "json", NULL);
	j = json_loads(p.out, 0, NULL);
	ck_assert_msg(json_is_array(j) && strstr(p.out, name), "ls --format json: %s", p.out);
	json_decref(j);
	h_proc_free(&p);
	h_cell(&p, "ls", "--format", "{{.ID}} {{.Nmae}}", NULL);
	ck_assert_msg(p.status == 2 && strstr(p.err, "{{.Nmae}} is not a field") && !p.out[0],
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	free(line);
	char *other = cli_create_busybox();
	h_cell(&p, "inspect", name, other, NULL);
	j = json_loads(p.out, 0, NULL);
	ck_assert_msg(p.status == 0 && json_array_size(j) == 2, "inspect: %s %s", p.out, p.err);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(j, 0), "name")), name);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(j, 1), "id")), other);
	json_decref(j);
	h_proc_free(&p);
	/* "" is the start of every id: ambiguous, the candidates listed */
	h_cell(&p, "exec", "", "--", "true", NULL);
	ck_assert_msg(p.status == 125, "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "exec", "nosuch-name", "--", "true", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "no sandbox has the id or name"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	char *start = strndup(id, 12);
	h_cell(&p, "rm", start, NULL);
	ck_assert_msg(p.status == 0, "rm by prefix: exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	/* the name is free again */
	h_cell(&p, "create", "-I", "busybox", "--name", name, NULL);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	h_track_sandbox(h_trim(p.out));
	h_proc_free(&p);
	free(start);
	free(other);
	free(body);
	free(id);
	free(name);
}
END_TEST

/* ---- what a failure says ---- */

START_TEST(exec_says_why_it_failed)
{
	char *id = cli_create_busybox();
	struct h_proc p;
	h_cell(&p, "exec", "-w", "/nonexistent", id, "--", "true", NULL);
	ck_assert_msg(p.status == 125 &&
			  strstr(p.err, "-w /nonexistent: no such directory in the sandbox"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	int before = h_sandbox_count();
	h_cell(&p, "run", "--rm", "-I", "busybox", "-w", "/nonexistent", "--", "true", NULL);
	ck_assert_msg(p.status == 125 &&
			  strstr(p.err, "-w /nonexistent: no such directory in the sandbox"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_sandbox_count(), before);
	int status;
	const char *args[] = {"exec", "-it", "-w", "/nonexistent", id, "--", "true", NULL};
	char *out = cell_on_pty(NULL, &status, args);
	ck_assert_msg(status == 125 && strstr(out, "-w /nonexistent: no such directory"),
		      "exec -it -w: exit %d: %s", status, out);
	free(out);

	/* the sandbox deleted under a running command: 125, and why */
	char *bin = h_fmt("%s/cell", H.bin);
	char *sock = h_fmt("%s/cell.sock", H.dir);
	/* rm once the command has started (its marker is there), then wait for its exec */
	char *cmd = h_fmt("C='%s --socket %s'; $C exec %s -- sh -c 'touch /tmp/started; exec sleep "
			  "60' & until $C exec %s -- test -f /tmp/started 2>/dev/null; do sleep "
			  "0.1; done; $C rm %s >/dev/null; wait $!",
			  bin, sock, id, id, id);
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	h_run(argv, NULL, 120, &p);
	ck_assert_msg(p.status == 125 && (strstr(p.err, "was deleted while the command ran") ||
					  strstr(p.err, "the sandbox is being deleted")),
		      "exit %d, stderr: '%s'", p.status, p.err);
	h_proc_free(&p);

	/* the flag named, not celld's field (cwd, argv) */
	h_cell(&p, "exec", "-w", "relative", id, "--", "true", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "-w 'relative': must be an absolute") &&
			  !strstr(p.err, "cwd"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	before = h_sandbox_count();
	h_cell(&p, "run", "--rm", "-I", "busybox", "--", "", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "expected a command") &&
			  !strstr(p.err, "argv"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_sandbox_count(), before);

	h_cell(&p, "help", "nosuch", NULL);
	ck_assert_msg(p.status == 2 && strstr(p.err, "nosuch"), "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	free(cmd);
	free(sock);
	free(bin);
	free(id);
}
END_TEST

START_TEST(rm_all_takes_the_stopped)
{
	char *stopped = cli_create_busybox(), *running = cli_create_busybox();
	struct h_proc p;
	h_cell(&p, "stop", stopped, NULL);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "rm", "--all", NULL);
	ck_assert_msg(p.status == 0 && strstr(p.out, stopped) && !strstr(p.out, running),
		      "exit %d: %s %s", p.status, p.out, p.err);
	h_proc_free(&p);
	char *path = h_fmt("/v1/sandboxes/%s", stopped);
	ck_assert_int_eq(h_http("GET", path, NULL, NULL), 404);
	free(path);
	path = h_fmt("/v1/sandboxes/%s", running);
	ck_assert_int_eq(h_http("GET", path, NULL, NULL), 200);
	h_cell(&p, "rm", "--all", running, NULL);
	ck_assert_msg(p.status == 2 && strstr(p.err, "--all takes no id"), "exit %d: %s", p.status,
		      p.err);
	h_proc_free(&p);
	h_cell(&p, "rm", "-f", running, NULL);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_http("GET", path, NULL, NULL), 404);
	free(path);
	free(stopped);
	free(running);
}
END_TEST

/* Creates of one name that race: celld lets exactly one through. */
/* --code-interpreter reaches celld: busybox has no python3, and celld's refusal says so. */
START_TEST(create_code_interpreter_needs_python)
{
	int before = h_sandbox_count();
	struct h_proc p;
	h_cell(&p, "create", "-I", "busybox", "--code-interpreter", NULL);
	ck_assert_msg(p.status != 0 && strstr(p.err, "image busybox has no python3") &&
			  strstr(p.err, "code interpreter"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	ck_assert_int_eq(h_sandbox_count(), before);
}
END_TEST

/* ---- stop -t: a grace before the kill ---- */

/* A sandbox whose entrypoint is `sh -c script`, created through the API (--entrypoint
 * splits at spaces); the id, tracked. */
static char *create_with_script(const char *script)
{
	json_t *extra = json_pack("{s:[s,s,s]}", "entrypoint", "sh", "-c", script);
	char *id = h_create("busybox", extra);
	json_decref(extra);
	/* the shell has set its trap once it wrote this */
	for (int i = 0; i < 100 && h_sh_code(id, "test -e /tmp/ready") != 0; i++)
		h_sleep_ms(100);
	ck_assert_int_eq(h_sh_code(id, "test -e /tmp/ready"), 0);
	return id;
}

static void cli_stop(const char *id, const char *grace)
{
	struct h_proc p;
	h_cell(&p, "stop", "-t", grace, id, NULL);
	ck_assert_msg(p.status == 0 && !strcmp(h_trim(p.out), id), "exit %d: %s %s", p.status,
		      p.out, p.err);
	h_proc_free(&p);
	json_t *ins = h_inspect(id);
	ck_assert_str_eq(h_jstr(ins, "state"), "Stopped");
	json_decref(ins);
}

/* An entrypoint that ends on SIGTERM after writing to the disk: with a grace it gets to
 * write (the file is there when the sandbox starts again); with -t 0 it is killed first. */
START_TEST(stop_grace_lets_processes_finish)
{
	const char *script = "trap 'echo bye > /root/bye; exit 0' TERM; touch /tmp/ready; "
			     "while :; do sleep 1; done";
	char *graceful = create_with_script(script), *at_once = create_with_script(script),
	     *paused = create_with_script(script);
	cli_stop(graceful, "5");
	cli_stop(at_once, "0");
	/* a paused one's processes are frozen: killed at once, whatever the grace */
	char *path = h_fmt("/v1/sandboxes/%s/pause", paused);
	long st = h_http("POST", path, NULL, NULL);
	ck_assert_msg(st == 202 || st == 204, "pause: HTTP %ld", st);
	cli_stop(paused, "5");
	/* an exec starts each again on its kept disk */
	char *out = h_sh(graceful, "cat /root/bye");
	ck_assert_str_eq(out, "bye\n");
	free(out);
	ck_assert_int_ne(h_sh_code(at_once, "test -e /root/bye"), 0);
	ck_assert_int_ne(h_sh_code(paused, "test -e /root/bye"), 0);
	free(path);
	free(graceful);
	free(at_once);
	free(paused);
}
END_TEST

/* A process that outlives the grace (it handles TERM and goes on) is killed after it; bad
 * graces are refused, naming the flag or the parameter, and change nothing. */
START_TEST(stop_grace_then_kill)
{
	char *id = create_with_script("trap 'echo got >> /root/term' TERM; touch /tmp/ready; "
				      "while :; do sleep 1; done");
	struct h_proc p;
	h_cell(&p, "stop", "--time", "soon", id, NULL);
	ck_assert_msg(p.status == 2 && strstr(p.err, "-t/--time"), "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "stop", "-t", "301", id, NULL);
	ck_assert_msg(p.status == 2 && strstr(p.err, "-t/--time"), "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	struct h_resp r;
	char *path = h_fmt("/v1/sandboxes/%s/stop?timeout=-1", id);
	ck_assert_int_eq(h_http("POST", path, NULL, &r), 400);
	ck_assert_msg(strstr(h_jstr(r.json, "message"), "timeout"), "%s",
		      h_jstr(r.json, "message"));
	h_resp_free(&r);
	json_t *ins = h_inspect(id);
	ck_assert_str_eq(h_jstr(ins, "state"), "Running");
	json_decref(ins);

	cli_stop(id, "1");
	/* it saw the TERM, handled it, and was killed all the same */
	char *out = h_sh(id, "cat /root/term");
	ck_assert_str_eq(out, "got\n");
	free(out);
	free(path);
	free(id);
}
END_TEST

/* Only the host's SIGTERM makes cell-init pass it on: root inside sending one to PID 1
 * ends nothing (the trap never runs, the sandbox stays Running). */
START_TEST(sigterm_from_inside_ignored)
{
	char *id = create_with_script("trap 'echo got > /root/term' TERM; touch /tmp/ready; "
				      "while :; do sleep 1; done");
	ck_assert_int_eq(h_sh_code(id, "kill -TERM 1"), 0);
	for (int i = 0; i < 20; i++) {
		ck_assert_int_ne(h_sh_code(id, "test -e /root/term"), 0);
		h_sleep_ms(100);
	}
	json_t *ins = h_inspect(id);
	ck_assert_str_eq(h_jstr(ins, "state"), "Running");
	json_decref(ins);
	free(id);
}
END_TEST

START_TEST(a_name_raced_is_given_once)
{
	char rnd[CELL_ID_RANDOM_LEN + 1];
	ck_assert_int_eq(cell_id_random(rnd), 0);
	int before = h_sandbox_count();
	char *bin = h_fmt("%s/cell", H.bin);
	char *sock = h_fmt("%s/cell.sock", H.dir);
	/* each one's stderr a file of its own, shown one after the other */
	char *cmd = h_fmt("for i in 1 2 3 4; do %s --socket %s create -I busybox --name race-%s "
			  "2>%s/race-%s-$i & done; wait; cat %s/race-%s-* >&2",
			  bin, sock, rnd, H.dir, rnd, H.dir, rnd);
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	struct h_proc p;
	h_run(argv, NULL, 120, &p);
	char id[CELL_ID_MAX + 1];
	ck_assert_msg(sscanf(p.out, "%64s", id) == 1, "no create succeeded: %s", p.err);
	h_track_sandbox(id);
	ck_assert_msg(!strchr(h_trim(p.out), '\n'), "more than one create: %s", p.out);
	int taken = 0;
	for (const char *e = p.err; (e = strstr(e, "--name: the name is taken")); e++)
		taken++;
	ck_assert_msg(taken == 3, "refusals: %s", p.err);
	ck_assert_int_eq(h_sandbox_count(), before + 1);
	h_proc_free(&p);
	free(cmd);
	free(sock);
	free(bin);
}
END_TEST

START_TEST(run_from_a_snapshot_by_name)
{
	char *name;
	char *id = cli_create_named("Src_v1.", &name);
	struct h_proc p;
	/* cp, fs and snapshot take the name too */
	char *file = h_fmt("%s/snap-%s", H.dir, id);
	h_write_file(file, "kept-in-the-snapshot\n", 0644);
	char *dst = h_fmt("%s:/workspace/f", name);
	h_cell(&p, "cp", file, dst, NULL);
	ck_assert_msg(p.status == 0, "cp: exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "fs", "ls", name, "/workspace", NULL);
	ck_assert_msg(p.status == 0 && strstr(p.out, "f"), "fs ls: exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "snapshot", name, NULL);
	ck_assert_msg(p.status == 0, "snapshot: exit %d: %s", p.status, p.err);
	char *snap = strdup(h_trim(p.out));
	h_proc_free(&p);
	h_cell(&p, "run", "--rm", "--snapshot", snap, "--", "cat", "/workspace/f", NULL);
	ck_assert_msg(p.status == 0 && !strcmp(p.out, "kept-in-the-snapshot\n"),
		      "run --snapshot: exit %d: %s %s", p.status, p.out, p.err);
	h_proc_free(&p);
	h_cell(&p, "run", "--rm", "--snapshot", "nosuchsnapshot", "--", "true", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "nosuchsnapshot not found") &&
			  !strstr(p.err, "snapshotId"),
		      "exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	h_cell(&p, "snapshot", "rm", snap, NULL);
	h_proc_free(&p);
	free(snap);
	free(dst);
	free(file);
	free(name);
	free(id);
}
END_TEST

static Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	tcase_add_test(h_tcase(s, "run_rm_passes_exit_code", 180), run_rm_passes_exit_code);
	tcase_add_test(h_tcase(s, "run_failures_are_125", 120), run_failures_are_125);
	tcase_add_test(h_tcase(s, "run_with_volume", 180), run_with_volume);
	tcase_add_test(h_tcase(s, "create_session_same_id", 120), create_session_same_id);
	tcase_add_test(h_tcase(s, "exec_and_cp_round_trip", 120), exec_and_cp_round_trip);
	tcase_add_test(h_tcase(s, "cp_directory_out", 120), cp_directory_out);
	tcase_add_test(h_tcase(s, "exec_user", 120), exec_user);
	tcase_add_test(h_tcase(s, "exec_user_refused", 120), exec_user_refused);
	tcase_add_test(h_tcase(s, "fs_family", 120), fs_family);
	tcase_add_test(h_tcase(s, "fs_errors", 120), fs_errors);
	tcase_add_test(h_tcase(s, "fs_rm_recursive_takes_files", 120), fs_rm_recursive_takes_files);
	tcase_add_test(h_tcase(s, "port_prints_preview_url", 120), port_prints_preview_url);
	tcase_add_test(h_tcase(s, "forward_joins_a_local_port", 180), forward_joins_a_local_port);
	tcase_add_test(h_tcase(s, "run_it_is_a_throwaway_shell", 120), run_it_is_a_throwaway_shell);
	tcase_add_test(h_tcase(s, "run_i_is_not_image", 120), run_i_is_not_image);
	tcase_add_test(h_tcase(s, "run_detach_publish_and_limits", 180),
		       run_detach_publish_and_limits);
	tcase_add_test(h_tcase(s, "run_entrypoint", 120), run_entrypoint);
	tcase_add_test(h_tcase(s, "run_detach_rm", 120), run_detach_rm);
	tcase_add_test(h_tcase(s, "run_detach_timeout", 120), run_detach_timeout);
	tcase_add_test(h_tcase(s, "run_detach_tty_session", 120), run_detach_tty_session);
	tcase_add_test(h_tcase(s, "names_are_unique_and_taken_for_ids", 120),
		       names_are_unique_and_taken_for_ids);
	tcase_add_test(h_tcase(s, "exec_says_why_it_failed", 120), exec_says_why_it_failed);
	tcase_add_test(h_tcase(s, "rm_all_takes_the_stopped", 120), rm_all_takes_the_stopped);
	tcase_add_test(h_tcase(s, "a_name_raced_is_given_once", 120), a_name_raced_is_given_once);
	tcase_add_test(h_tcase(s, "stop_grace_lets_processes_finish", 120),
		       stop_grace_lets_processes_finish);
	tcase_add_test(h_tcase(s, "stop_grace_then_kill", 120), stop_grace_then_kill);
	tcase_add_test(h_tcase(s, "sigterm_from_inside_ignored", 120), sigterm_from_inside_ignored);
	tcase_add_test(h_tcase(s, "create_code_interpreter_needs_python", 120),
		       create_code_interpreter_needs_python);
	tcase_add_test(h_tcase(s, "run_from_a_snapshot_by_name", 180), run_from_a_snapshot_by_name);
	return s;
}

int main(void)
{
	return h_main(cli_suite());
}
