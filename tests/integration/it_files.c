/* The execd files and directories routes beyond upload/download/info: POST and DELETE
 * /directories, DELETE /files, a directory downloaded as a tar archive. Paths resolve inside the
 * sandbox; symlinks are never followed out; a process racing a recursive delete never makes it
 * reach past the tree it names. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char *route(const char *id, const char *what)
{
	return h_fmt("/v1/sandboxes/%s/proxy/44772/%s", id, what);
}

static long call(const char *id, const char *method, const char *what, const char *body,
		 struct h_resp *r)
{
	char *url = route(id, what);
	long st = h_http(method, url, body, r);
	free(url);
	return st;
}

/* A 4xx with the given code whose message names field. */
static void expect_fail(const char *what, long st, struct h_resp *r, long want, const char *code,
			const char *field)
{
	ck_assert_msg(st == want, "%s: HTTP %ld (want %ld): %.300s", what, st, want, r->body);
	ck_assert_msg(!strcmp(h_err_code(r), code), "%s: code %s (want %s): %.300s", what,
		      h_err_code(r), code, r->body);
	if (field)
		ck_assert_msg(strstr(h_jstr(r->json, "message"), field),
			      "%s: message does not name %s: %.300s", what, field, r->body);
	h_resp_free(r);
}

static void expect_ok(const char *what, long st, struct h_resp *r)
{
	ck_assert_msg(st == 200, "%s: HTTP %ld: %.300s", what, st, r->body);
	h_resp_free(r);
}

static void expect_empty_dir(const char *dir, const char *what)
{
	DIR *d = opendir(dir);
	ck_assert_msg(d, "%s: %s", dir, strerror(errno));
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	ck_assert_msg(n == 0, "%s: %s holds %d entries", what, dir, n);
}

static void expect_sh(const char *id, const char *cmd, const char *want)
{
	char *out = h_sh(id, cmd);
	ck_assert_msg(!strcmp(out, want), "%s: got '%s', want '%s'", cmd, out, want);
	free(out);
}

/* mkdir -p with mode and owner/group by name (the sandbox's own /etc/passwd, /etc/group)
 * or number; an existing directory is left as it is; DELETE /files removes files and
 * links, DELETE /directories whole trees. */
START_TEST(directories_create_and_delete)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "echo 'crew:x:4242:4343::/:/bin/false' >>/etc/passwd; "
		      "echo 'crewg:x:4343:' >>/etc/group"));
	struct h_resp r;
	expect_ok(
	    "create",
	    call(id, "POST", "directories",
		 "{\"/workspace/a/b/c\":{\"mode\":750,\"owner\":\"crew\",\"group\":\"crewg\"},"
		 "\"/workspace/n\":{\"mode\":700,\"owner\":4000,\"group\":\"4001\"},"
		 "\"/workspace/plain\":{}}",
		 &r),
	    &r);
	expect_sh(id,
		  "stat -c '%a %u %g' /workspace/a/b/c /workspace/a/b /workspace/n "
		  "/workspace/plain",
		  "750 4242 4343\n755 0 0\n700 4000 4001\n755 0 0\n");
	/* The info route reports the names back. */
	long st = h_file_info(id, "/workspace/a/b/c", &r);
	ck_assert_msg(st == 200, "info: %ld %s", st, r.body);
	ck_assert_msg(strstr(r.body, "\"owner\":\"crew\"") && strstr(r.body, "\"group\":\"crewg\""),
		      "info does not name crew/crewg: %s", r.body);
	h_resp_free(&r);
	/* Again on an existing directory: 200, left as it is. */
	expect_ok("create again",
		  call(id, "POST", "directories", "{\"/workspace/a/b/c\":{\"mode\":700}}", &r), &r);
	expect_sh(id, "stat -c '%a' /workspace/a/b/c", "750\n");
	free(h_sh(id, "echo x >/workspace/a/b/c/f; echo y >/workspace/a/g; "
		      "ln -s /workspace/a/g /workspace/a/link"));
	expect_ok(
	    "delete files",
	    call(id, "DELETE", "files?path=/workspace/a/b/c/f&path=/workspace/a/link", NULL, &r),
	    &r);
	expect_sh(id, "ls /workspace/a/b/c; ls /workspace/a", "b\ng\n");
	expect_fail("delete a directory as a file",
		    call(id, "DELETE", "files?path=/workspace/a/b", NULL, &r), &r, 400,
		    "INVALID_ARGUMENT", "directory");
	expect_fail("delete a file as a directory",
		    call(id, "DELETE", "directories?path=/workspace/a/g", NULL, &r), &r, 400,
		    "INVALID_ARGUMENT", "not a directory");
	expect_ok("delete directories",
		  call(id, "DELETE", "directories?path=/workspace/a&path=/workspace/n", NULL, &r),
		  &r);
	expect_sh(id, "ls /workspace", "plain\n");
	free(id);
}
END_TEST

/* Bad input is a 400 naming the field and changes nothing; a missing path is 404
 * FILE_NOT_FOUND. */
START_TEST(bad_input_and_missing_paths)
{
	char *id = h_create("busybox", NULL);
	struct h_resp r;
	static const struct {
		const char *body, *field;
	} bad[] = {
	    {"{\"relative/x\":{\"mode\":755}}", "path"},
	    {"{\"/workspace/x\":{\"mode\":999}}", "mode"},
	    {"{\"/workspace/x\":{\"mode\":4755}}", "mode"},
	    {"{\"/workspace/x\":{\"mode\":\"rwx\"}}", "mode"},
	    {"{\"/workspace/x\":{\"owner\":\"a b\"}}", "owner"},
	    {"{\"/workspace/x\":{\"owner\":99999999}}", "owner"},
	    {"{\"/workspace/x\":{\"group\":[1]}}", "group"},
	    {"{\"/workspace/x\":7}", "/workspace/x"},
	    {"{}", "body"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_fail(bad[i].body, call(id, "POST", "directories", bad[i].body, &r), &r, 400,
			    "INVALID_ARGUMENT", bad[i].field);
	/* A name the sandbox does not know: 400 naming owner, nothing created. */
	expect_fail("unknown owner",
		    call(id, "POST", "directories",
			 "{\"/workspace/x/y\":{\"mode\":755,\"owner\":\"ghost\"}}", &r),
		    &r, 400, "INVALID_ARGUMENT", "owner");
	expect_fail("unknown group",
		    call(id, "POST", "directories",
			 "{\"/workspace/x/y\":{\"mode\":755,\"group\":\"ghosts\"}}", &r),
		    &r, 400, "INVALID_ARGUMENT", "group");
	expect_sh(id, "ls /workspace | wc -l", "0\n");
	expect_fail("delete files without path", call(id, "DELETE", "files", NULL, &r), &r, 400,
		    "INVALID_ARGUMENT", "path");
	expect_fail("delete directories without path", call(id, "DELETE", "directories", NULL, &r),
		    &r, 400, "INVALID_ARGUMENT", "path");
	expect_fail("delete relative", call(id, "DELETE", "files?path=etc/passwd", NULL, &r), &r,
		    400, "INVALID_ARGUMENT", "path");
	expect_fail("delete /", call(id, "DELETE", "directories?path=/", NULL, &r), &r, 400,
		    "INVALID_ARGUMENT", NULL);
	expect_fail("delete /..", call(id, "DELETE", "directories?path=/workspace/..", NULL, &r),
		    &r, 400, "INVALID_ARGUMENT", NULL);
	expect_fail("missing file", call(id, "DELETE", "files?path=/workspace/nope", NULL, &r), &r,
		    404, "FILE_NOT_FOUND", "/workspace/nope");
	expect_fail("missing directory",
		    call(id, "DELETE", "directories?path=/nope/deeper", NULL, &r), &r, 404,
		    "FILE_NOT_FOUND", "/nope/deeper");
	/* A process's state in /proc is never touched. */
	expect_fail("delete /proc/1", call(id, "DELETE", "directories?path=/proc/1", NULL, &r), &r,
		    403, "FORBIDDEN", NULL);
	expect_sh(id, "test -x /bin/sh && test -s /etc/passwd && echo intact", "intact\n");
	free(id);
}
END_TEST

/* Symlinks are removed as links, never followed: not a link given as the path, not one
 * met inside a tree, not one pointing at the host's paths or the sandbox's own /. */
START_TEST(symlinks_are_never_followed)
{
	char *host = h_fmt("%s/files-host", H.dir);
	ck_assert_int_eq(mkdir(host, 0777), 0);
	char *hostfile = h_fmt("%s/keep", host);
	h_write_file(hostfile, "host\n", 0644);
	char *id = h_create("busybox", NULL);
	char *setup = h_fmt("mkdir -p /workspace/keep /workspace/t/sub && echo k "
			    ">/workspace/keep/k && ln -s / /workspace/rootlink && "
			    "ln -s /workspace/keep /workspace/t/sub/in && "
			    "ln -s / /workspace/t/root && ln -s %s /workspace/t/host && "
			    "ln -s %s /workspace/hostlink",
			    host, host);
	free(h_sh(id, setup));
	free(setup);
	struct h_resp r;
	expect_fail("a link to / as a directory",
		    call(id, "DELETE", "directories?path=/workspace/rootlink", NULL, &r), &r, 400,
		    "INVALID_ARGUMENT", "symlink");
	expect_ok("a tree holding links",
		  call(id, "DELETE", "directories?path=/workspace/t", NULL, &r), &r);
	expect_ok("a link as a file",
		  call(id, "DELETE", "files?path=/workspace/rootlink", NULL, &r), &r);
	/* Through a link to the host's path: resolved inside the sandbox, where it names
	 * nothing. */
	char *q = h_fmt("directories?path=/workspace/hostlink/keep");
	expect_fail("through a host link", call(id, "DELETE", q, NULL, &r), &r, 404,
		    "FILE_NOT_FOUND", NULL);
	free(q);
	char *body = h_fmt("{\"%s/made\":{\"mode\":755}}", host);
	expect_ok("create at the host's path", call(id, "POST", "directories", body, &r), &r);
	free(body);
	expect_sh(id, "cat /workspace/keep/k; ls /workspace; test -x /bin/sh && echo sh",
		  "k\nhostlink\nkeep\nsh\n");
	char *back = h_read_file(hostfile);
	ck_assert_str_eq(back, "host\n");
	free(back);
	char *made = h_fmt("%s/made", host);
	struct stat st;
	ck_assert_msg(stat(made, &st) < 0, "a directory was created on the host: %s", made);
	free(made);
	unlink(hostfile);
	expect_empty_dir(host, "host dir");
	rmdir(host);
	free(hostfile);
	free(host);
	free(id);
}
END_TEST

/* A process inside swaps a directory of the tree being deleted with a symlink to another
 * directory, as fast as it can: each recursive delete either removes the tree or fails
 * cleanly, and the link's target is never emptied. */
START_TEST(recursive_delete_races_a_swapped_symlink)
{
	char *id = h_create("busybox", NULL);
	h_upload_helper(id, "exchange_probe");
	free(h_sh(id, "mkdir -p /workspace/keep/deep && echo k >/workspace/keep/k && "
		      "echo d >/workspace/keep/deep/d"));
	int removed = 0;
	for (int i = 0; i < 30; i++) {
		char *setup = h_fmt(
		    "mkdir -p /workspace/race/%d/d/s1/s2 && "
		    "for f in a b c e f g; do echo $f >/workspace/race/%d/d/$f; "
		    "echo $f >/workspace/race/%d/d/s1/$f; done && "
		    "ln -s /workspace/keep /workspace/race/%d/l && "
		    "nohup /root/exchange_probe /workspace/race/%d/d "
		    "/workspace/race/%d/l >/dev/null 2>&1 & " H_WAIT_PIDOF("exchange_probe", 1),
		    i, i, i, i, i, i);
		free(h_sh(id, setup));
		free(setup);
		char *q = h_fmt("directories?path=/workspace/race/%d", i);
		struct h_resp r;
		long st = call(id, "DELETE", q, NULL, &r);
		ck_assert_msg(st == 200 || st == 409, "race %d: HTTP %ld %s", i, st, r.body);
		removed += st == 200;
		h_resp_free(&r);
		free(q);
		free(h_sh(id, "kill -9 $(pidof exchange_probe) 2>/dev/null; sleep 0.05; true"));
	}
	expect_sh(id, "cat /workspace/keep/k /workspace/keep/deep/d", "k\nd\n");
	ck_assert_msg(removed > 0, "no delete succeeded in 30 races");
	free(h_sh(id, "rm -rf /workspace/race"));
	free(id);
}
END_TEST

/* The "path" of each element of a JSON array answer, one per line. */
static char *paths_of(const struct h_resp *r)
{
	ck_assert_msg(json_is_array(r->json), "not an array: %.300s", r->body);
	size_t len = 0, i;
	json_t *e;
	json_array_foreach(r->json, i, e) len += strlen(h_jstr(e, "path")) + 1;
	char *out = calloc(1, len + 1);
	json_array_foreach(r->json, i, e)
	{
		strcat(out, h_jstr(e, "path"));
		strcat(out, "\n");
	}
	return out;
}

static void expect_paths(const char *id, const char *what, const char *want)
{
	struct h_resp r;
	long st = call(id, "GET", what, NULL, &r);
	ck_assert_msg(st == 200, "%s: HTTP %ld %.300s", what, st, r.body);
	char *got = paths_of(&r);
	ck_assert_msg(!strcmp(got, want), "%s:\ngot:\n%swant:\n%s", what, got, want);
	free(got);
	h_resp_free(&r);
}

/* Listing: lexical order, descendants after their parent, up to depth; symlinks reported
 * with type symlink and never entered; a symlink as the path is 400; the entry bound is a
 * 413. */
START_TEST(directories_list)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "mkdir -p /workspace/l/sub/deep && cd /workspace/l && echo bb >b.txt && "
		      "echo a >a.txt && echo c >sub/c.txt && echo d >sub/deep/d.txt && "
		      "ln -s / link && chown 4242:4343 a.txt && chmod 640 a.txt"));
	expect_paths(id, "directories/list?path=/workspace/l",
		     "/workspace/l/a.txt\n/workspace/l/b.txt\n/workspace/l/link\n"
		     "/workspace/l/sub\n");
	expect_paths(id, "directories/list?path=/workspace/l/&depth=2",
		     "/workspace/l/a.txt\n/workspace/l/b.txt\n/workspace/l/link\n"
		     "/workspace/l/sub\n/workspace/l/sub/c.txt\n/workspace/l/sub/deep\n");
	expect_paths(id, "directories/list?path=/workspace/l&depth=32",
		     "/workspace/l/a.txt\n/workspace/l/b.txt\n/workspace/l/link\n"
		     "/workspace/l/sub\n/workspace/l/sub/c.txt\n/workspace/l/sub/deep\n"
		     "/workspace/l/sub/deep/d.txt\n");
	struct h_resp r;
	ck_assert_int_eq(call(id, "GET", "directories/list?path=/workspace/l", NULL, &r), 200);
	json_t *a = json_array_get(r.json, 0), *l = json_array_get(r.json, 2);
	ck_assert_str_eq(h_jstr(a, "type"), "file");
	ck_assert_int_eq(h_jint(a, "size"), 2);
	ck_assert_int_eq(h_jint(a, "mode"), 640);
	ck_assert_str_eq(h_jstr(a, "owner"), "4242");
	ck_assert_msg(*h_jstr(a, "modified_at") && *h_jstr(a, "created_at"), "%s", r.body);
	ck_assert_str_eq(h_jstr(l, "type"), "symlink");
	ck_assert_str_eq(h_jstr(json_array_get(r.json, 3), "type"), "directory");
	h_resp_free(&r);
	/* Names come from the sandbox's own database, read once per listing. */
	free(h_sh(id, "echo 'crew:x:4242:4343::/:/bin/false' >>/etc/passwd"));
	ck_assert_int_eq(call(id, "GET", "directories/list?path=/workspace/l", NULL, &r), 200);
	ck_assert_str_eq(h_jstr(json_array_get(r.json, 0), "owner"), "crew");
	h_resp_free(&r);
	expect_fail("a symlink as the path",
		    call(id, "GET", "directories/list?path=/workspace/l/link", NULL, &r), &r, 400,
		    "INVALID_ARGUMENT", "symbolic link");
	expect_fail("a file as the path",
		    call(id, "GET", "directories/list?path=/workspace/l/a.txt", NULL, &r), &r, 400,
		    "INVALID_ARGUMENT", "not a directory");
	expect_fail("missing", call(id, "GET", "directories/list?path=/workspace/nope", NULL, &r),
		    &r, 404, "FILE_NOT_FOUND", "/workspace/nope");
	expect_fail("no path", call(id, "GET", "directories/list", NULL, &r), &r, 400,
		    "INVALID_ARGUMENT", "path");
	static const char *const bad_depth[] = {"0", "33", "-1", "x", "1e3"};
	for (size_t i = 0; i < 5; i++) {
		char *q = h_fmt("directories/list?path=/workspace/l&depth=%s", bad_depth[i]);
		expect_fail(q, call(id, "GET", q, NULL, &r), &r, 400, "INVALID_ARGUMENT", "depth");
		free(q);
	}
	expect_fail("a process's state", call(id, "GET", "directories/list?path=/proc/1", NULL, &r),
		    &r, 403, "FORBIDDEN", NULL);
	/* The bound: 10000 entries per answer. */
	free(h_sh(id, "mkdir /workspace/big && cd /workspace/big && seq 10000 | xargs touch"));
	ck_assert_int_eq(call(id, "GET", "directories/list?path=/workspace/big", NULL, &r), 200);
	ck_assert_int_eq(json_array_size(r.json), 10000);
	h_resp_free(&r);
	free(h_sh(id, "touch /workspace/big/one-more"));
	expect_fail("over the bound",
		    call(id, "GET", "directories/list?path=/workspace/big", NULL, &r), &r, 413,
		    "REQUEST_TOO_LARGE", "10000");
	free(id);
}
END_TEST

/* Search: glob on names (or on the path below the root with '/' and **), files only,
 * never through a symlink, the same bounds as a listing. */
START_TEST(files_search)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "mkdir -p /workspace/s/sub/deep && cd /workspace/s && echo b >b.txt && "
		      "echo a >a.md && echo c >sub/c.txt && echo d >sub/deep/d.txt && "
		      "ln -s / link && ln -s /etc sub/etc"));
	expect_paths(id, "files/search?path=/workspace/s&pattern=*.txt",
		     "/workspace/s/b.txt\n/workspace/s/sub/c.txt\n/workspace/s/sub/deep/d.txt\n");
	expect_paths(id, "files/search?path=/workspace/s&pattern=sub/**/*.txt",
		     "/workspace/s/sub/c.txt\n/workspace/s/sub/deep/d.txt\n");
	expect_paths(id, "files/search?path=/workspace/s&pattern=sub/*.txt",
		     "/workspace/s/sub/c.txt\n");
	expect_paths(id, "files/search?path=/workspace/s",
		     "/workspace/s/a.md\n/workspace/s/b.txt\n/workspace/s/link\n"
		     "/workspace/s/sub/c.txt\n/workspace/s/sub/deep/d.txt\n/workspace/s/sub/etc\n");
	expect_paths(id, "files/search?path=/workspace/s&pattern=passwd", "");
	struct h_resp r;
	expect_fail("missing",
		    call(id, "GET", "files/search?path=/workspace/nope&pattern=*", NULL, &r), &r,
		    404, "FILE_NOT_FOUND", NULL);
	expect_fail("relative", call(id, "GET", "files/search?path=workspace&pattern=*", NULL, &r),
		    &r, 400, "INVALID_ARGUMENT", "path");
	char *longpat = calloc(1, 1100);
	memset(longpat, 'a', 1099);
	char *q = h_fmt("files/search?path=/workspace/s&pattern=%s", longpat);
	expect_fail("long pattern", call(id, "GET", q, NULL, &r), &r, 400, "INVALID_ARGUMENT",
		    "pattern");
	free(q);
	free(longpat);
	free(id);
}
END_TEST

/* A process inside swaps a directory of the searched tree with a symlink to / as fast as
 * it can: no search or listing ever reports a file from outside the tree (at most the
 * tree under both of its names, when a swap falls between two entries). */
START_TEST(search_races_a_swapped_symlink)
{
	char *id = h_create("busybox", NULL);
	h_upload_helper(id, "exchange_probe");
	free(h_sh(id, "mkdir -p /workspace/s/d/x && echo f >/workspace/s/d/x/f && "
		      "ln -s / /workspace/s/l && nohup /root/exchange_probe /workspace/s/d "
		      "/workspace/s/l >/dev/null 2>&1 & " H_WAIT_PIDOF("exchange_probe", 1)));
	int found = 0;
	for (int i = 0; i < 200; i++) {
		struct h_resp r;
		long st = call(id, "GET", "files/search?path=/workspace/s&pattern=**", NULL, &r);
		ck_assert_msg(st == 200, "search %d: HTTP %ld %.300s", i, st, r.body);
		ck_assert_msg(!strstr(r.body, "passwd") && !strstr(r.body, "/bin/") &&
				  json_array_size(r.json) <= 4,
			      "search %d reached outside: %.600s", i, r.body);
		found += strstr(r.body, "/x/f\"") != NULL;
		h_resp_free(&r);
		r = (struct h_resp){0};
		st = call(id, "GET", "directories/list?path=/workspace/s&depth=8", NULL, &r);
		/* The tree seen under both names at most (d, d/x, d/x/f, the same under l). */
		ck_assert_msg(st == 200 && json_array_size(r.json) <= 6 &&
				  !strstr(r.body, "passwd"),
			      "list %d: HTTP %ld, %zu entries: %.3000s", i, st,
			      json_array_size(r.json), r.body);
		h_resp_free(&r);
	}
	free(h_sh(id, "kill -9 $(pidof exchange_probe); true"));
	ck_assert_msg(found > 0, "the file in the tree was never found");
	free(id);
}
END_TEST

/* mv: rename within and across directories (the target's directory must exist), a
 * symlink moved as a link; bad input 400 naming the element's field, missing 404. */
START_TEST(files_move)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "mkdir -p /workspace/m/to /workspace/keep && echo a >/workspace/m/a && "
		      "echo k >/workspace/keep/k && ln -s /workspace/keep /workspace/m/link && "
		      "mkdir /workspace/m/dir && echo in >/workspace/m/dir/in"));
	struct h_resp r;
	expect_ok("move",
		  call(id, "POST", "files/mv",
		       "[{\"src\":\"/workspace/m/a\",\"dest\":\"/workspace/m/to/b\"},"
		       "{\"src\":\"/workspace/m/link\",\"dest\":\"/workspace/m/to/link2\"},"
		       "{\"src\":\"/workspace/m/dir\",\"dest\":\"/workspace/m/to/\"}]",
		       &r),
		  &r);
	expect_sh(
	    id,
	    "cat /workspace/m/to/b; readlink /workspace/m/to/link2; cat /workspace/m/to/dir/in; "
	    "ls /workspace/m; ls /workspace/keep",
	    "a\n/workspace/keep\nin\nto\nk\n");
	expect_fail("missing src",
		    call(id, "POST", "files/mv",
			 "[{\"src\":\"/workspace/m/nope\",\"dest\":\"/workspace/m/x\"}]", &r),
		    &r, 404, "FILE_NOT_FOUND", "/workspace/m/nope");
	expect_fail("missing dest dir",
		    call(id, "POST", "files/mv",
			 "[{\"src\":\"/workspace/m/to/b\",\"dest\":\"/workspace/none/x\"}]", &r),
		    &r, 404, "FILE_NOT_FOUND", NULL);
	expect_fail(
	    "relative dest",
	    call(id, "POST", "files/mv", "[{\"src\":\"/workspace/m/to/b\",\"dest\":\"x\"}]", &r),
	    &r, 400, "INVALID_ARGUMENT", "[0].dest");
	expect_fail(
	    "no src",
	    call(id, "POST", "files/mv",
		 "[{\"src\":\"/workspace/m/to/b\",\"dest\":\"/workspace/y\"},{\"dest\":\"/x\"}]",
		 &r),
	    &r, 400, "INVALID_ARGUMENT", "[1].src");
	expect_fail("not an array", call(id, "POST", "files/mv", "{\"src\":\"/a\"}", &r), &r, 400,
		    "INVALID_ARGUMENT", "array");
	expect_fail("into itself",
		    call(id, "POST", "files/mv",
			 "[{\"src\":\"/workspace/m\",\"dest\":\"/workspace/m/to/m\"}]", &r),
		    &r, 400, "INVALID_ARGUMENT", NULL);
	expect_fail("the root",
		    call(id, "POST", "files/mv", "[{\"src\":\"/\",\"dest\":\"/workspace/r\"}]", &r),
		    &r, 400, "INVALID_ARGUMENT", NULL);
	/* nothing of the refused requests happened (the first element of "no src" neither) */
	expect_sh(id, "cat /workspace/m/to/b; ls /workspace", "a\nkeep\nm\n");
	free(id);
}
END_TEST

/* permissions: mode and owner/group by name or number on the entry itself; a symlink is
 * refused, its target unchanged. */
START_TEST(files_permissions)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "echo 'crew:x:4242:4343::/:/bin/false' >>/etc/passwd; "
		      "echo 'crewg:x:4343:' >>/etc/group; mkdir -p /workspace/p/d && "
		      "echo f >/workspace/p/f && ln -s /etc/passwd /workspace/p/link"));
	struct h_resp r;
	expect_ok("permissions",
		  call(id, "POST", "files/permissions",
		       "{\"/workspace/p/f\":{\"mode\":600,\"owner\":\"crew\",\"group\":\"crewg\"},"
		       "\"/workspace/p/d\":{\"mode\":\"711\",\"owner\":5000}}",
		       &r),
		  &r);
	expect_sh(id, "stat -c '%a %u %g' /workspace/p/f /workspace/p/d",
		  "600 4242 4343\n711 5000 0\n");
	expect_fail("a symlink",
		    call(id, "POST", "files/permissions",
			 "{\"/workspace/p/link\":{\"mode\":777,\"owner\":\"crew\"}}", &r),
		    &r, 400, "INVALID_ARGUMENT", "symbolic link");
	expect_sh(id, "stat -c '%a %u' /etc/passwd", "644 0\n");
	expect_fail(
	    "bad mode",
	    call(id, "POST", "files/permissions", "{\"/workspace/p/f\":{\"mode\":888}}", &r), &r,
	    400, "INVALID_ARGUMENT", "mode");
	expect_fail("unknown owner",
		    call(id, "POST", "files/permissions",
			 "{\"/workspace/p/f\":{\"mode\":644,\"owner\":\"ghost\"}}", &r),
		    &r, 400, "INVALID_ARGUMENT", "owner");
	expect_fail(
	    "missing",
	    call(id, "POST", "files/permissions", "{\"/workspace/p/nope\":{\"mode\":644}}", &r), &r,
	    404, "FILE_NOT_FOUND", "/workspace/p/nope");
	expect_fail(
	    "process state",
	    call(id, "POST", "files/permissions", "{\"/proc/1/environ\":{\"mode\":644}}", &r), &r,
	    403, "FORBIDDEN", NULL);
	expect_sh(id, "stat -c '%a %u %g' /workspace/p/f", "600 4242 4343\n");
	free(id);
}
END_TEST

/* replace: every occurrence, owner and mode kept, counts with verbose=true; a symlink is
 * refused, a missing file 404, bad input 400 naming the field. */
START_TEST(files_replace)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "mkdir -p /workspace/r && printf 'a=1\\nb=1\\na=1\\n' >/workspace/r/f && "
		      "chown 7:8 /workspace/r/f && chmod 640 /workspace/r/f && "
		      "echo none >/workspace/r/g && ln -s /etc/passwd /workspace/r/link"));
	struct h_resp r;
	long st = call(id, "POST", "files/replace?verbose=true",
		       "{\"/workspace/r/f\":{\"old\":\"a=1\",\"new\":\"a=22\"},"
		       "\"/workspace/r/g\":{\"old\":\"zzz\",\"new\":\"y\"}}",
		       &r);
	ck_assert_msg(st == 200, "replace: %ld %s", st, r.body);
	ck_assert_int_eq(h_jint(h_jget(r.json, "/workspace/r/f"), "replacedCount"), 2);
	ck_assert_int_eq(h_jint(json_object_get(r.json, "/workspace/r/g"), "replacedCount"), 0);
	h_resp_free(&r);
	expect_sh(id, "cat /workspace/r/f; stat -c '%a %u %g' /workspace/r/f; ls -a /workspace/r",
		  "a=22\nb=1\na=22\n640 7 8\n.\n..\nf\ng\nlink\n");
	st = call(id, "POST", "files/replace",
		  "{\"/workspace/r/f\":{\"old\":\"b=1\",\"new\":\"\"}}", &r);
	ck_assert_msg(st == 200 && r.len == 0, "not verbose: %ld '%s'", st, r.body);
	h_resp_free(&r);
	expect_sh(id, "cat /workspace/r/f", "a=22\n\na=22\n");
	expect_fail("a symlink",
		    call(id, "POST", "files/replace",
			 "{\"/workspace/r/link\":{\"old\":\"root\",\"new\":\"toor\"}}", &r),
		    &r, 400, "INVALID_ARGUMENT", "symbolic link");
	expect_sh(id, "head -c 4 /etc/passwd", "root");
	expect_fail("empty old",
		    call(id, "POST", "files/replace",
			 "{\"/workspace/r/f\":{\"old\":\"\",\"new\":\"x\"}}", &r),
		    &r, 400, "INVALID_ARGUMENT", "old");
	expect_fail("no new",
		    call(id, "POST", "files/replace", "{\"/workspace/r/f\":{\"old\":\"a\"}}", &r),
		    &r, 400, "INVALID_ARGUMENT", "new");
	expect_fail("bad verbose",
		    call(id, "POST", "files/replace?verbose=yes",
			 "{\"/workspace/r/f\":{\"old\":\"a\",\"new\":\"b\"}}", &r),
		    &r, 400, "INVALID_ARGUMENT", "verbose");
	expect_fail("missing",
		    call(id, "POST", "files/replace",
			 "{\"/workspace/r/nope\":{\"old\":\"a\",\"new\":\"b\"}}", &r),
		    &r, 404, "FILE_NOT_FOUND", "/workspace/r/nope");
	expect_fail("a directory",
		    call(id, "POST", "files/replace",
			 "{\"/workspace/r\":{\"old\":\"a\",\"new\":\"b\"}}", &r),
		    &r, 400, "INVALID_ARGUMENT", "directory");
	/* Never a process's state, never a FIFO waited on. */
	expect_fail("process state",
		    call(id, "POST", "files/replace",
			 "{\"/proc/1/environ\":{\"old\":\"a\",\"new\":\"b\"}}", &r),
		    &r, 403, "FORBIDDEN", NULL);
	free(h_sh(id, "mkfifo /workspace/r/fifo"));
	expect_fail("a FIFO",
		    call(id, "POST", "files/replace",
			 "{\"/workspace/r/fifo\":{\"old\":\"a\",\"new\":\"b\"}}", &r),
		    &r, 400, "INVALID_ARGUMENT", "regular");
	expect_sh(id, "cat /workspace/r/f", "a=22\n\na=22\n");
	free(id);
}
END_TEST

/* A process inside swaps a directory with a symlink to another directory while files are
 * moved out of it: every move lands inside the sandbox, the link's target is never
 * touched, nothing reaches the host. */
/* Put k back into /workspace/keep from the swapped directory, whichever name it has. */
static void fetch_k_back(const char *id)
{
	free(h_sh(id, "for x in /workspace/mv/*/k /workspace/mv/*/*/k; do "
		      "[ -f \"$x\" ] && mv \"$x\" /workspace/keep/k; done; true"));
}

START_TEST(move_races_a_swapped_symlink)
{
	char *host = h_fmt("%s/move-host", H.dir);
	ck_assert_int_eq(mkdir(host, 0777), 0);
	char *id = h_create("busybox", NULL);
	h_upload_helper(id, "exchange_probe");
	char *setup = h_fmt("mkdir -p /workspace/mv/d /workspace/out /workspace/keep && "
			    "echo k >/workspace/keep/k && ln -s %s /workspace/mv/l && "
			    "for i in $(seq 0 59); do echo $i >/workspace/mv/d/f$i; done && "
			    "nohup /root/exchange_probe /workspace/mv/d /workspace/mv/l >/dev/null "
			    "2>&1 & " H_WAIT_PIDOF("exchange_probe", 1),
			    host);
	free(h_sh(id, setup));
	free(setup);
	int moved = 0;
	for (int i = 0; i < 60; i++) {
		char *body = h_fmt(
		    "[{\"src\":\"/workspace/mv/d/f%d\",\"dest\":\"/workspace/out/f%d\"}]", i, i);
		struct h_resp r;
		long st = call(id, "POST", "files/mv", body, &r);
		ck_assert_msg(st == 200 || st == 404, "move %d: HTTP %ld %s", i, st, r.body);
		moved += st == 200;
		h_resp_free(&r);
		free(body);
		/* and into the swapped directory: lands in the sandbox's tree, whichever name */
		st = call(id, "POST", "files/mv",
			  "[{\"src\":\"/workspace/keep/k\",\"dest\":\"/workspace/mv/d/k\"}]", &r);
		ck_assert_msg(st == 200 || st == 404, "move k %d: HTTP %ld %s", i, st, r.body);
		h_resp_free(&r);
		fetch_k_back(id);
	}
	free(h_sh(id, "kill -9 $(pidof exchange_probe); true"));
	/* The last fetch may have raced a swap (the name it tested became the symlink before
	 * its mv): once nothing swaps, one more finds k wherever inside the sandbox it is. */
	fetch_k_back(id);
	char *n = h_sh(id, "ls /workspace/out | wc -l");
	ck_assert_int_eq(atoi(n), moved);
	free(n);
	ck_assert_msg(moved > 0, "no move succeeded");
	expect_sh(id, "cat /workspace/keep/k", "k\n");
	expect_empty_dir(host, "a move reached the host");
	rmdir(host);
	free(host);
	free(id);
}
END_TEST

/* A multipart upload of one file with the given metadata JSON. */
static long upload_meta(const char *id, const char *meta, const char *content, struct h_resp *r)
{
	char *body =
	    h_fmt("--XyZ\r\nContent-Disposition: form-data; name=\"metadata\"; "
		  "filename=\"metadata\"\r\nContent-Type: application/json\r\n\r\n%s\r\n"
		  "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n"
		  "Content-Type: application/octet-stream\r\n\r\n%s\r\n--XyZ--\r\n",
		  meta, content);
	char *url = route(id, "files/upload");
	struct h_req req = {.method = "POST",
			    .path = url,
			    .body = body,
			    .content_type = "multipart/form-data; boundary=XyZ"};
	long st = h_request(&req, r);
	free(url);
	free(body);
	return st;
}

/* Upload owner and group given as names resolve in the sandbox's own /etc/passwd and
 * /etc/group (numbers and root as before); an unknown name is a 400 naming the field and
 * writes nothing. */
START_TEST(upload_owner_by_name)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "echo 'crew:x:4242:4343::/:/bin/false' >>/etc/passwd; "
		      "echo 'crewg:x:4343:' >>/etc/group; mkdir -p /workspace"));
	struct h_resp r;
	expect_ok("by name",
		  upload_meta(id,
			      "{\"path\":\"/workspace/u1\",\"mode\":640,\"owner\":\"crew\","
			      "\"group\":\"crewg\"}",
			      "one", &r),
		  &r);
	expect_ok("by number and root",
		  upload_meta(id,
			      "{\"path\":\"/workspace/u2\",\"owner\":\"4000\",\"group\":\"root\"}",
			      "two", &r),
		  &r);
	expect_sh(id, "stat -c '%a %u %g' /workspace/u1 /workspace/u2; cat /workspace/u1",
		  "640 4242 4343\n644 4000 0\none");
	long st = upload_meta(id, "{\"path\":\"/workspace/u3\",\"owner\":\"ghost\"}", "x", &r);
	ck_assert_msg(st == 400 && strstr(r.body, "owner") && strstr(r.body, "ghost"),
		      "unknown owner: %ld %s", st, r.body);
	h_resp_free(&r);
	st = upload_meta(id, "{\"path\":\"/workspace/u3\",\"group\":\"ghosts\"}", "x", &r);
	ck_assert_msg(st == 400 && strstr(r.body, "group"), "unknown group: %ld %s", st, r.body);
	h_resp_free(&r);
	st = upload_meta(id, "{\"path\":\"/workspace/u3\",\"owner\":\"a:b\"}", "x", &r);
	ck_assert_msg(st == 400 && strstr(r.body, "metadata.owner"), "bad owner: %ld %s", st,
		      r.body);
	h_resp_free(&r);
	expect_sh(id, "ls -a /workspace", ".\n..\nu1\nu2\n");
	free(id);
}
END_TEST

/* A recursive delete removes at most 100000 entries, for at most 10 s, per request: past
 * either, 413 naming the bounds, what was removed stays removed, and repeating the request
 * finishes the job (on a fast host the entry bound ends the first one with 1 entry left; a
 * slow one, an emulated machine, reaches the time first). */
START_TEST(recursive_delete_bound)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "mkdir -p /workspace/big && cd /workspace/big && seq 100001 | xargs touch"));
	struct h_resp r;
	expect_fail("over the bound",
		    call(id, "DELETE", "directories?path=/workspace/big", NULL, &r), &r, 413,
		    "REQUEST_TOO_LARGE", "100000 entries or 10 s");
	char *left = h_sh(id, "ls /workspace/big | wc -l");
	ck_assert_msg(atol(left) >= 1 && atol(left) < 100001, "%s entries left", left);
	free(left);
	long st = 413;
	for (int i = 0; i < 30 && st == 413; i++) {
		st = call(id, "DELETE", "directories?path=/workspace/big", NULL, &r);
		ck_assert_msg(st == 200 || st == 413, "again: HTTP %ld %s", st, r.body);
		h_resp_free(&r);
	}
	ck_assert_int_eq(st, 200);
	expect_sh(id, "ls /workspace", "");
	free(id);
}
END_TEST

/* ---- format=tar ---- */

/* GET files/download?path=...&format=tar into <H.dir>/<name>.tar; the file's path. */
static char *get_tar(const char *id, const char *path, const char *name, struct h_resp *r)
{
	char *enc = h_urlencode(path);
	char *q = h_fmt("files/download?path=%s&format=tar", enc);
	long st = call(id, "GET", q, NULL, r);
	free(q);
	free(enc);
	ck_assert_msg(st == 200, "tar of %s: HTTP %ld %.300s", path, st, r->body);
	char *file = h_fmt("%s/%s.tar", H.dir, name);
	FILE *f = fopen(file, "w");
	ck_assert_msg(f && fwrite(r->body, 1, r->len, f) == r->len && fclose(f) == 0, "%s", file);
	return file;
}

/* A complete archive ends with two zero blocks (after the last entry's own blocks). */
static bool ends_complete(const struct h_resp *r)
{
	if (r->len < 1024 || r->len % 512)
		return false;
	for (size_t i = r->len - 1024; i < r->len; i++)
		if (r->body[i])
			return false;
	return true;
}

/* Run the host's tar with args (NULL-terminated); its stdout. */
static char *host_tar(const char *const *args)
{
	char *argv[16] = {"/usr/bin/tar"};
	int n = 1;
	for (; args[n - 1] && n < 15; n++)
		argv[n] = (char *)args[n - 1];
	argv[n] = NULL;
	struct h_proc p;
	h_run(argv, NULL, 60, &p);
	ck_assert_msg(p.status == 0, "tar %s %s: exit %d: %s", args[0], args[1], p.status, p.err);
	char *out = strdup(p.out ? p.out : "");
	h_proc_free(&p);
	return out;
}

static char *read_host(const char *path)
{
	char *s = h_read_file(path);
	ck_assert_msg(s, "%s: %s", path, strerror(errno));
	return s;
}

/* A tree with nested directories, a symlink pointing out, a name over 100 bytes, a link
 * target over 100 bytes, a sparse file, a fifo (skipped), modes, owners and an old mtime:
 * the host's tar lists and extracts it, and what comes out is what the sandbox holds. */
START_TEST(download_tar_of_a_tree)
{
	char *id = h_create("busybox", NULL);
	char longname[121];
	memset(longname, 'n', 120);
	longname[120] = '\0';
	char *setup = h_fmt(
	    "set -e; mkdir -p /workspace/proj/a/b/c && cd /workspace/proj && echo hello >a/f.txt "
	    "&& printf abc >a/b/c/d && seq 1000 >a/b/%s && ln -s /etc/passwd a/out && "
	    "ln -s /%0200d long-link && mkfifo fifo && dd if=/dev/urandom of=rand bs=1k "
	    "count=300 2>/dev/null && truncate -s 3M sparse && chmod 640 a/f.txt && "
	    "chown 1000:1000 a/f.txt && touch -d @1000000000 a/b/c/d && "
	    "echo later >future && touch -d @9999999999 future && "
	    "sha256sum rand | cut -c1-64",
	    longname, 0);
	char *sum = h_sh(id, setup);
	free(setup);
	struct h_resp r;
	char *file = get_tar(id, "/workspace/proj", "tree", &r);
	ck_assert_msg(r.content_type && !strcmp(r.content_type, "application/x-tar"),
		      "content type %s", r.content_type);
	ck_assert_msg(ends_complete(&r), "the archive has no end-of-archive blocks");
	h_resp_free(&r);

	char *list = host_tar((const char *[]){"-tvf", file, "--numeric-owner", NULL});
	ck_assert_msg(strstr(list, "proj/a/out -> /etc/passwd"), "no link out: %s", list);
	ck_assert_msg(strstr(list, "1000/1000") && strstr(list, "-rw-r-----"),
		      "owner or mode of f.txt lost: %s", list);
	ck_assert_msg(!strstr(list, "fifo"), "a fifo was archived: %s", list);
	ck_assert_msg(strstr(list, longname), "the long name is missing: %s", list);
	free(list);
	/* owner names from the sandbox's /etc/passwd and /etc/group where it has them */
	list = host_tar((const char *[]){"-tvf", file, NULL});
	ck_assert_msg(strstr(list, "root/root") && strstr(list, "1000/1000"), "names: %s", list);
	free(list);

	/* the headers: an archive named after the directory */
	char *url = route(id, "files/download?path=/workspace/proj&format=tar");
	int fd = h_open_stream(H_UNIX, url, 0);
	char head[4096];
	size_t hlen = 0;
	while (hlen < sizeof(head) - 1 && !memmem(head, hlen, "\r\n\r\n", 4)) {
		ssize_t k = read(fd, head + hlen, sizeof(head) - 1 - hlen);
		ck_assert_int_gt(k, 0);
		hlen += (size_t)k;
	}
	head[hlen] = '\0';
	close(fd);
	free(url);
	ck_assert_msg(strcasestr(head, "Content-Disposition: attachment; filename=\"proj.tar\"") &&
			  strcasestr(head, "Transfer-Encoding: chunked") &&
			  !strcasestr(head, "Content-Length"),
		      "headers (a streamed archive, named after the directory): %s", head);

	char *dir = h_fmt("%s/tree-x", H.dir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	free(host_tar((const char *[]){"-xf", file, "-C", dir, "--numeric-owner", NULL}));
	char *p = h_fmt("%s/proj/a/f.txt", dir);
	char *got = read_host(p);
	ck_assert_str_eq(got, "hello\n");
	struct stat st;
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_msg((st.st_mode & 07777) == 0640 && st.st_uid == 1000 && st.st_gid == 1000,
		      "f.txt: mode %o uid %u gid %u", st.st_mode & 07777, st.st_uid, st.st_gid);
	free(got);
	free(p);
	p = h_fmt("%s/proj/a/b/c/d", dir);
	got = read_host(p);
	ck_assert_str_eq(got, "abc");
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mtime, 1000000000);
	free(got);
	free(p);
	p = h_fmt("%s/proj/a/b/%s", dir, longname);
	got = read_host(p);
	ck_assert_msg(strlen(got) == 3893 && !strncmp(got, "1\n2\n", 4), "long name: %zu bytes",
		      strlen(got));
	free(got);
	free(p);
	char target[300];
	p = h_fmt("%s/proj/a/out", dir);
	ssize_t n = readlink(p, target, sizeof(target) - 1);
	ck_assert_msg(n == 11 && !memcmp(target, "/etc/passwd", 11), "a/out: %zd", n);
	free(p);
	p = h_fmt("%s/proj/long-link", dir);
	n = readlink(p, target, sizeof(target) - 1);
	ck_assert_msg(n == 201, "long-link: %zd", n);
	free(p);
	/* an mtime past 2242 needs a pax header */
	p = h_fmt("%s/proj/future", dir);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mtime, 9999999999LL);
	free(p);
	p = h_fmt("%s/proj/sparse", dir);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_size, 3 << 20);
	free(p);
	p = h_fmt("%s/proj/rand", dir);
	char *cmd[] = {"/usr/bin/sha256sum", p, NULL};
	struct h_proc sp;
	h_run(cmd, NULL, 30, &sp);
	ck_assert_msg(sp.status == 0 && !strncmp(sp.out, sum, 64), "rand differs: %s vs %s", sp.out,
		      sum);
	h_proc_free(&sp);
	free(p);
	free(sum);

	/* One file with format=tar: an archive of that one file. */
	free(file);
	file = get_tar(id, "/workspace/proj/a/f.txt", "one", &r);
	h_resp_free(&r);
	list = host_tar((const char *[]){"-tf", file, NULL});
	ck_assert_str_eq(list, "f.txt\n");
	free(list);
	free(file);
	free(dir);
	free(id);
}
END_TEST

/* format: tar, raw or nothing; zip is refused naming tar; an offset, limit or Range with
 * tar is a 400; a missing path 404; a fifo or /proc cannot be archived. */
START_TEST(download_tar_bad_input)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "mkdir -p /workspace/t && echo x >/workspace/t/x && mkfifo /workspace/p"));
	struct h_resp r;
	expect_fail("zip", call(id, "GET", "files/download?path=/workspace/t&format=zip", NULL, &r),
		    &r, 400, "INVALID_ARGUMENT", "format=tar");
	expect_fail("bogus",
		    call(id, "GET", "files/download?path=/workspace/t&format=cpio", NULL, &r), &r,
		    400, "INVALID_ARGUMENT", "format");
	expect_fail(
	    "lines",
	    call(id, "GET", "files/download?path=/workspace/t&format=tar&offset=2", NULL, &r), &r,
	    400, "INVALID_ARGUMENT", "format=tar");
	char *url = route(id, "files/download?path=/workspace/t&format=tar");
	long st =
	    h_request(&(struct h_req){.method = "GET",
				      .path = url,
				      .headers = (const char *const[]){"Range: bytes=0-9", NULL}},
		      &r);
	free(url);
	expect_fail("range", st, &r, 400, "INVALID_ARGUMENT", "Range");
	expect_fail("missing",
		    call(id, "GET", "files/download?path=/workspace/none&format=tar", NULL, &r), &r,
		    404, "FILE_NOT_FOUND", "/workspace/none");
	expect_fail("fifo",
		    call(id, "GET", "files/download?path=/workspace/p&format=tar", NULL, &r), &r,
		    400, "INVALID_ARGUMENT", "not a directory or a regular file");
	expect_fail("proc", call(id, "GET", "files/download?path=/proc/sys&format=tar", NULL, &r),
		    &r, 400, "INVALID_ARGUMENT", "/proc");
	/* format=raw is today's download. */
	st = call(id, "GET", "files/download?path=/workspace/t/x&format=raw", NULL, &r);
	ck_assert_msg(st == 200 && !strcmp(r.body, "x\n"), "raw: HTTP %ld %s", st, r.body);
	h_resp_free(&r);
	free(id);
}
END_TEST

/* A process inside swaps a directory of the archived tree with a symlink to / as fast as it
 * can: every archive is complete, holds the link as a link, and never a file from outside
 * the tree (at most the tree under both of its names). */
START_TEST(download_tar_races_a_swapped_symlink)
{
	char *id = h_create("busybox", NULL);
	h_upload_helper(id, "exchange_probe");
	free(h_sh(id, "mkdir -p /workspace/t/d/x && echo inside >/workspace/t/d/x/f && "
		      "ln -s / /workspace/t/l && nohup /root/exchange_probe /workspace/t/d "
		      "/workspace/t/l >/dev/null 2>&1 & " H_WAIT_PIDOF("exchange_probe", 1)));
	int found = 0;
	for (int i = 0; i < 100; i++) {
		struct h_resp r;
		long st = call(id, "GET", "files/download?path=/workspace/t&format=tar", NULL, &r);
		ck_assert_msg(st == 200, "tar %d: HTTP %ld %.300s", i, st, r.body);
		ck_assert_msg(ends_complete(&r), "tar %d: cut short (%zu bytes)", i, r.len);
		ck_assert_msg(!memmem(r.body, r.len, "passwd", 6) &&
				  !memmem(r.body, r.len, "root:x:0", 8) &&
				  !memmem(r.body, r.len, "t/d/bin", 7) &&
				  !memmem(r.body, r.len, "t/l/bin", 7) && r.len <= 16 * 512,
			      "tar %d reached outside (%zu bytes)", i, r.len);
		found += memmem(r.body, r.len, "inside\n", 7) != NULL;
		h_resp_free(&r);
	}
	free(h_sh(id, "kill -9 $(pidof exchange_probe); true"));
	ck_assert_msg(found > 0, "the file in the tree was never archived");
	free(id);
}
END_TEST

/* Past FILES_DEPTH_MAX levels or FILES_ENTRIES_MAX entries the archive is cut short: the
 * answer started (200) but ends without the end-of-archive blocks (and the chunked body
 * without its last chunk); cell-init goes on answering. */
START_TEST(download_tar_bounds)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "mkdir -p /workspace/deep/$(seq -s/ 33) && echo x >/workspace/deep/0 && "
		      "mkdir -p /workspace/ok/$(seq -s/ 32)"));
	struct h_resp r;
	long st = call(id, "GET", "files/download?path=/workspace/deep&format=tar", NULL, &r);
	ck_assert_msg(st == 200 && !ends_complete(&r) && memmem(r.body, r.len, "deep/0", 6),
		      "deep: HTTP %ld, %zu bytes", st, r.len);
	h_resp_free(&r);
	/* 32 levels below is the bound, not past it. */
	st = call(id, "GET", "files/download?path=/workspace/ok&format=tar", NULL, &r);
	ck_assert_msg(st == 200 && ends_complete(&r), "32 levels: HTTP %ld, %zu bytes", st, r.len);
	h_resp_free(&r);
	free(h_sh(id, "mkdir -p /workspace/big && cd /workspace/big && seq 100001 | xargs touch"));
	st = call(id, "GET", "files/download?path=/workspace/big&format=tar", NULL, &r);
	ck_assert_msg(st == 200 && !ends_complete(&r), "entries: HTTP %ld, %zu bytes", st, r.len);
	h_resp_free(&r);
	free(h_sh(id, "rm /workspace/big/1"));
	st = call(id, "GET", "files/download?path=/workspace/big&format=tar", NULL, &r);
	ck_assert_msg(st == 200 && ends_complete(&r), "100000 entries: HTTP %ld, %zu bytes", st,
		      r.len);
	h_resp_free(&r);
	expect_sh(id, "echo alive", "alive\n");
	/* 100000 files left to the sandbox's deletion keep its disk's loop device busy for a
	 * while after the suite ends. */
	free(h_sh(id, "rm -rf /workspace/big"));
	free(id);
}
END_TEST

/* Clients that stop reading stall only their own archives: cell-init goes on answering
 * commands, file calls and another archive meanwhile; past 8 archives at once the next is
 * 409, and once the stalled ones are gone archives are made again. */
START_TEST(download_tar_slow_clients)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "mkdir -p /workspace/big /workspace/small && "
		      "truncate -s 256M /workspace/big/zeros && echo s >/workspace/small/s"));
	char *url = route(id, "files/download?path=/workspace/big&format=tar");
	int fds[8];
	for (int i = 0; i < 8; i++)
		fds[i] = h_open_stream(H_UNIX, url, 4096);
	expect_sh(id, "echo alive", "alive\n");
	struct h_resp r;
	long st = call(id, "GET", "files/info?path=/workspace/small/s", NULL, &r);
	expect_ok("info", st, &r);
	st = call(id, "GET", "files/download?path=/workspace/small&format=tar", NULL, &r);
	ck_assert_msg(st == 409 && strstr(h_jstr(r.json, "message"), "8 archives"),
		      "a 9th archive: HTTP %ld %.300s", st, r.body);
	h_resp_free(&r);
	for (int i = 0; i < 8; i++)
		close(fds[i]);
	/* cell-init sees the closed relays as celld drops them */
	bool ok = false;
	for (int i = 0; i < 100 && !ok; i++) {
		st = call(id, "GET", "files/download?path=/workspace/small&format=tar", NULL, &r);
		ok = st == 200 && ends_complete(&r) && memmem(r.body, r.len, "small/s", 7);
		h_resp_free(&r);
		if (!ok)
			h_sleep_ms(100);
	}
	ck_assert_msg(ok, "no archive once the stalled clients were gone");
	free(url);
	free(id);
}
END_TEST

static Suite *files_suite(void)
{
	Suite *s = suite_create("files");
	tcase_add_test(h_tcase(s, "directories_create_and_delete", 120),
		       directories_create_and_delete);
	tcase_add_test(h_tcase(s, "bad_input_and_missing_paths", 120), bad_input_and_missing_paths);
	tcase_add_test(h_tcase(s, "symlinks_are_never_followed", 120), symlinks_are_never_followed);
	tcase_add_test(h_tcase(s, "recursive_delete_races_a_swapped_symlink", 240),
		       recursive_delete_races_a_swapped_symlink);
	tcase_add_test(h_tcase(s, "recursive_delete_bound", 240), recursive_delete_bound);
	tcase_add_test(h_tcase(s, "directories_list", 180), directories_list);
	tcase_add_test(h_tcase(s, "files_search", 120), files_search);
	tcase_add_test(h_tcase(s, "search_races_a_swapped_symlink", 240),
		       search_races_a_swapped_symlink);
	tcase_add_test(h_tcase(s, "files_move", 120), files_move);
	tcase_add_test(h_tcase(s, "files_permissions", 120), files_permissions);
	tcase_add_test(h_tcase(s, "files_replace", 120), files_replace);
	tcase_add_test(h_tcase(s, "move_races_a_swapped_symlink", 240),
		       move_races_a_swapped_symlink);
	tcase_add_test(h_tcase(s, "upload_owner_by_name", 120), upload_owner_by_name);
	tcase_add_test(h_tcase(s, "download_tar_of_a_tree", 120), download_tar_of_a_tree);
	tcase_add_test(h_tcase(s, "download_tar_bad_input", 120), download_tar_bad_input);
	tcase_add_test(h_tcase(s, "download_tar_races_a_swapped_symlink", 240),
		       download_tar_races_a_swapped_symlink);
	tcase_add_test(h_tcase(s, "download_tar_bounds", 240), download_tar_bounds);
	tcase_add_test(h_tcase(s, "download_tar_slow_clients", 120), download_tar_slow_clients);
	return s;
}

int main(void)
{
	return h_main(files_suite());
}
