/* What an adversarial review of cell found holding, kept so: each test is one attack that
 * failed then and must keep failing (the review's "Held" list; cell-security(7) names
 * them). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* dir holds nothing; else fail with what, naming the entry. */
static void expect_empty_dir(const char *dir, const char *what)
{
	DIR *d = opendir(dir);
	ck_assert_msg(d, "%s: %s", dir, strerror(errno));
	for (struct dirent *e; (e = readdir(d));)
		ck_assert_msg(!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."), "%s: %s/%s",
			      what, dir, e->d_name);
	closedir(d);
}

/* Files that never end, block or belong to PID 1: every download is refused or empty, in
 * byte mode, in line mode and with a Range, and none of them hangs (each request carries
 * the harness's hang guard). */
START_TEST(endless_and_blocking_files_do_not_hang_downloads)
{
	char *id = h_create("busybox", NULL);
	free(h_sh(id, "mkfifo /tmp/fifo"));
	static const char *const paths[] = {"/tmp/fifo", "/dev/zero", "/dev/urandom",
					    "/proc/1/mem"};
	static const char *const modes[] = {"", "&offset=1&limit=10", "&offset=2"};
	for (size_t i = 0; i < 4; i++) {
		for (size_t m = 0; m < 3; m++) {
			char *enc = h_urlencode(paths[i]);
			char *url = h_fmt("/v1/sandboxes/%s/proxy/44772/files/download?path=%s%s",
					  id, enc, modes[m]);
			struct h_resp r;
			long st = h_http("GET", url, NULL, &r);
			ck_assert_msg(st >= 400 || (st == 200 && r.len == 0),
				      "download of %s%s: HTTP %ld with %zu bytes", paths[i],
				      modes[m], st, r.len);
			h_resp_free(&r);
			free(url);
			free(enc);
		}
		char *enc = h_urlencode(paths[i]);
		char *url = h_fmt("/v1/sandboxes/%s/proxy/44772/files/download?path=%s", id, enc);
		const char *const range[] = {"Range: bytes=0-99", NULL};
		struct h_req req = {.method = "GET", .path = url, .headers = range};
		struct h_resp r;
		long st = h_request(&req, &r);
		ck_assert_msg(st >= 400 || r.len == 0, "ranged download of %s: HTTP %ld, %zu bytes",
			      paths[i], st, r.len);
		h_resp_free(&r);
		free(url);
		free(enc);
	}
	/* the sandbox and its init are fine afterwards */
	char *out = h_sh(id, "echo alive");
	ck_assert_str_eq(out, "alive\n");
	free(out);
	free(id);
}
END_TEST

/* Uploads while root inside swaps a directory on their path with a symlink to a host
 * directory (RENAME_EXCHANGE, as fast as it can): each lands inside the sandbox or fails,
 * none reaches the host directory. */
START_TEST(uploads_race_a_swapped_symlink_inside)
{
	char *host = h_fmt("%s/race-target", H.dir);
	ck_assert_int_eq(mkdir(host, 0777), 0);
	ck_assert_int_eq(chmod(host, 0777), 0);
	char *id = h_create("busybox", NULL);
	h_upload_helper(id, "exchange_probe");
	char *setup = h_fmt("mkdir -p /workspace/race/d && ln -s %s /workspace/race/l && "
			    "nohup /root/exchange_probe /workspace/race/d /workspace/race/l "
			    ">/dev/null 2>&1 & " H_WAIT_PIDOF("exchange_probe", 1),
			    host);
	free(h_sh(id, setup));
	free(setup);
	int landed = 0;
	for (int i = 0; i < 150; i++) {
		char *path = h_fmt("/workspace/race/d/up-%d", i);
		struct h_resp r;
		long st = h_upload(id, path, "raced\n", 6, 0644, &r);
		ck_assert_msg(st == 200 || (st >= 400 && st < 500), "upload %d: HTTP %ld %s", i, st,
			      r.body);
		landed += st == 200;
		h_resp_free(&r);
		free(path);
	}
	char *count = h_sh(id, "kill -9 $(pidof exchange_probe); sleep 0.1; find / /tmp -xdev "
			       "-name 'up-*' -type f | wc -l");
	/* every upload that succeeded is in the sandbox's own tree (through the symlink, a
	 * path like the host's made inside it) */
	ck_assert_int_eq(atoi(count), landed);
	free(count);
	expect_empty_dir(host, "an upload reached the host");
	rmdir(host);
	free(host);
	free(id);
}
END_TEST

/* Output that looks like the event stream stays output: it arrives as the text of stdout
 * events, and the stream ends with the command's own end. */
START_TEST(fake_events_in_output_stay_output)
{
	char *id = h_create("busybox", NULL);
	static const char fake[] =
	    "\n\ndata: {\"type\":\"execution_complete\",\"execution_time\":1}"
	    "\n\n{\"type\":\"error\",\"error\":{\"evalue\":\"0\"}}\n\n";
	char *cmd = h_fmt("printf '%%s' '%s'; exit 7", fake);
	struct h_exec e;
	ck_assert_int_eq(h_exec(id, cmd, NULL, &e), 0);
	ck_assert_int_eq(e.bad_events, 0);
	ck_assert_msg(!e.complete && e.errored && e.exit_code == 7,
		      "fake events ended the stream: complete %d, exit %d", e.complete,
		      e.exit_code);
	ck_assert_str_eq(e.out, fake);
	h_exec_free(&e);
	free(cmd);
	free(id);
}
END_TEST

/* The API key is never written to celld's log, whether a request carries it or a wrong
 * one. */
START_TEST(api_key_never_logged)
{
	struct h_resp r;
	struct h_req ok = {.method = "GET", .path = "/v1/info", .via = H_TCP};
	ck_assert_int_eq(h_request(&ok, &r), 200);
	h_resp_free(&r);
	char *wrong = h_fmt("OPEN-SANDBOX-API-KEY: %.60sx", H.key);
	const char *const hdrs[] = {wrong, NULL};
	struct h_req bad = {
	    .method = "GET", .path = "/v1/info", .via = H_TCP_NOKEY, .headers = hdrs};
	ck_assert_int_eq(h_request(&bad, &r), 401);
	h_resp_free(&r);
	char *log = h_read_file(H.log);
	ck_assert_ptr_nonnull(log);
	ck_assert_msg(!strstr(log, H.key), "celld's log holds the API key");
	ck_assert_msg(!strstr(log, wrong + 22), "celld's log holds a presented key");
	free(log);
	free(wrong);
}
END_TEST

/* Many creates and deletes at once leave nothing behind (the suite's end checks mounts,
 * cgroups, processes and files; here the registry and the uid ranges too). */
enum { PARALLEL = 100 };

struct create_delete {
	long create, delete;
	char why[256];
};

static void *create_delete(void *arg)
{
	struct create_delete *cd = arg;
	struct h_resp r;
	cd->create = h_create_ex("busybox", NULL, H_UNIX, &r);
	snprintf(cd->why, sizeof(cd->why), "%.200s", r.body ? r.body : "");
	char *id = cd->create == 202 ? strdup(h_jstr(r.json, "id")) : NULL;
	h_resp_free(&r);
	cd->delete = id ? h_delete(id) : 0;
	free(id);
	return NULL;
}

START_TEST(parallel_creates_and_deletes_leave_nothing)
{
	pthread_t th[PARALLEL];
	static struct create_delete cd[PARALLEL];
	for (int i = 0; i < PARALLEL; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, create_delete, &cd[i]), 0);
	for (int i = 0; i < PARALLEL; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < PARALLEL; i++)
		ck_assert_msg(cd[i].create == 202 && cd[i].delete == 204,
			      "create %d: HTTP %ld (%s), delete %ld", i, cd[i].create, cd[i].why,
			      cd[i].delete);
	ck_assert_int_eq(h_sandbox_count(), 0);
	char *dir = h_fmt("%s/sandboxes", H.state);
	expect_empty_dir(dir, "a sandbox dir is left");
	free(dir);
}
END_TEST

static Suite *held_suite(void)
{
	Suite *s = suite_create("held");
	tcase_add_test(h_tcase(s, "endless_and_blocking_files_do_not_hang_downloads", 120),
		       endless_and_blocking_files_do_not_hang_downloads);
	tcase_add_test(h_tcase(s, "uploads_race_a_swapped_symlink_inside", 180),
		       uploads_race_a_swapped_symlink_inside);
	tcase_add_test(h_tcase(s, "fake_events_in_output_stay_output", 120),
		       fake_events_in_output_stay_output);
	tcase_add_test(h_tcase(s, "api_key_never_logged", 60), api_key_never_logged);
	tcase_add_test(h_tcase(s, "parallel_creates_and_deletes_leave_nothing", 300),
		       parallel_creates_and_deletes_leave_nothing);
	return s;
}

int main(void)
{
	return h_main(held_suite());
}
