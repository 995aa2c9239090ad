/* Host-wide uid ranges and the cap on kept command output.
 *
 * Ranges: a second celld ("B", its own state dir under T/b, the same host-wide reservations
 * dir as the suite's celld "A") runs beside A: their sandboxes never share a range, a
 * restarted celld keeps its sandboxes' ranges, deleting releases the reservation file, a
 * stale reservation is reclaimed (a live unheld one is not), adoption recreates a missing
 * reservation and marks a sandbox Failed rather than share a range held by someone else,
 * and celld refuses to start when a host account has an id inside the range space.
 *
 * Output: many commands with huge output never keep more than the sandbox's cap, and
 * status and logs keep answering coherently. */
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cell/fsutil.h"
#include "harness.h"

#define RANGES_DIR "/run/cell/uid-ranges"
#define UID_FIRST  0x40000000u
#define RANGE	   65536u
#define SLOTS	   16384u

#define LOG_CAP	    (64ull << 20) /* CMD_TABLE_LOG_MAX */
#define LOG_MAX	    (8ull << 20)  /* CMD_LOG_MAX */
#define BIG_OUT	    (9ull << 20)
#define BIG_OUT_CMD "dd if=/dev/zero bs=65536 count=144 2>/dev/null | tr '\\0' a"

/* ------------------------------------------------------------------------------------ */
/* celld B                                                                                */

/* B: a world of its own (T/b), without TCP. The harness's teardown deletes its sandboxes,
 * stops it and removes T/b after every test, also a failed one. */
static struct h_world *B;

static void b_start(void)
{
	if (!B)
		B = h_world_add(&(struct h_world_opts){.name = "b"});
	else
		h_world_start(B);
}

static void b_kill(void)
{
	ck_assert_msg(h_world_alive(B), "celld B is not running");
	h_world_kill(B);
}

/* The world a sandbox of the two-sided tests lives in. */
static struct h_world *side(bool on_b)
{
	return on_b ? B : &H;
}

/* ------------------------------------------------------------------------------------ */
/* reservation files                                                                      */

static int slot_of(json_t *ins)
{
	long long base = h_jint(ins, "uidMap.hostStart");
	ck_assert_msg(base >= UID_FIRST && (base - UID_FIRST) % RANGE == 0, "hostStart %lld", base);
	return (int)((base - UID_FIRST) / RANGE);
}

static char *slot_path(int slot)
{
	return h_fmt(RANGES_DIR "/%d", slot);
}

/* Content of a reservation file, or NULL when there is none. */
static char *reservation(int slot)
{
	char *p = slot_path(slot);
	char *text = h_read_file(p);
	free(p);
	return text;
}

static void expect_reserved(int slot, const char *state, const char *id)
{
	char *text = reservation(slot);
	char *want = h_fmt("%s\n%s\n", state, id);
	ck_assert_msg(text && !strcmp(text, want), "%s/%d holds '%s', not '%s'", RANGES_DIR, slot,
		      text ? text : "(missing)", want);
	free(want);
	free(text);
}

/* Released: gone, or (another celld may have taken the slot since) naming someone else. */
static void expect_released(int slot, const char *state, const char *id)
{
	char *text = reservation(slot);
	char *ours = h_fmt("%s\n%s\n", state, id);
	ck_assert_msg(!text || strcmp(text, ours), "%s/%d still names %s", RANGES_DIR, slot, id);
	free(ours);
	free(text);
}

/* Is someone holding the file's flock (a running celld)? */
static bool reservation_held(int slot)
{
	char *p = slot_path(slot);
	int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	free(p);
	ck_assert_msg(fd >= 0, "no reservation file for slot %d", slot);
	bool held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

/* After SIGKILL the thread-group leader can be reaped-visible (zombie) while celld's other
 * threads are still exiting and the shared fd table, with its flocks, is not yet released:
 * give the kernel a bounded moment instead of sampling once. */
static bool reservation_released_soon(int slot)
{
	for (int i = 0; i < 200; i++) {
		if (!reservation_held(slot))
			return true;
		h_sleep_ms(10);
	}
	return false;
}

/* The reservations dir locked as every celld locks it (scans and creations exclude). */
static int ranges_lock(void)
{
	int fd = open(RANGES_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "%s: %s", RANGES_DIR, strerror(errno));
	ck_assert_int_eq(flock(fd, LOCK_EX), 0);
	return fd;
}

/* Write a reservation file for slot (lock held), replacing any. */
static void plant(int slot, const char *content)
{
	char *tmp = h_fmt(RANGES_DIR "/.it-ranges-%d", (int)getpid());
	h_write_file(tmp, content, 0600);
	char *p = slot_path(slot);
	ck_assert_msg(rename(tmp, p) == 0, "rename %s: %s", p, strerror(errno));
	free(p);
	free(tmp);
}

/* Lowest slot without a file (lock held): where the next reservation goes. */
static int lowest_free(void)
{
	for (unsigned s = 0; s < SLOTS; s++) {
		char *p = slot_path((int)s);
		struct stat st;
		bool exists = lstat(p, &st) == 0;
		free(p);
		if (!exists)
			return (int)s;
	}
	ck_abort_msg("no free slot in %s", RANGES_DIR);
	return -1;
}

/* Remove a planted file if it still holds content. */
static void unplant(int slot, const char *content)
{
	int lock = ranges_lock();
	char *text = reservation(slot);
	if (text && !strcmp(text, content)) {
		char *p = slot_path(slot);
		unlink(p);
		free(p);
	}
	free(text);
	close(lock);
}

/* A state dir with sandboxes/<id>/state.json recording slot's uidBase: what an unheld but
 * live reservation points at. */
static char *fake_owner(const char *name, const char *id, int slot)
{
	char *state = h_fmt("%s/%s/state", H.dir, name);
	char *dir = h_fmt("%s/sandboxes/%s", state, id);
	struct cell_error err = {0};
	ck_assert_msg(cell_mkdir_p(dir, 0700, &err) == 0, "%s", err.msg);
	char *path = h_fmt("%s/state.json", dir);
	char *json = h_fmt("{\"id\":\"%s\",\"uidBase\":%u,\"slot\":%d}\n", id,
			   UID_FIRST + (unsigned)slot * RANGE, slot);
	h_write_file(path, json, 0600);
	free(json);
	free(path);
	free(dir);
	return state;
}

static unsigned long host_uid_of(pid_t pid)
{
	char *path = h_fmt("/proc/%d/status", (int)pid);
	char *st = h_read_file(path);
	free(path);
	ck_assert_msg(st, "pid %d is gone", (int)pid);
	unsigned long uid = 0;
	const char *u = strstr(st, "\nUid:");
	ck_assert_msg(u && sscanf(u + 5, "%lu", &uid) == 1, "no Uid line for %d", (int)pid);
	free(st);
	return uid;
}

/* ------------------------------------------------------------------------------------ */
/* tests: ranges                                                                          */

#define PER_SIDE 3

/* Create n sandboxes on B in a child process while the caller creates on A. */
static pid_t create_on_b_async(int n, const char *ids_file)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		FILE *f = fopen(ids_file, "we");
		int bad = !f;
		for (int i = 0; f && i < n; i++) {
			struct h_resp r;
			long st = h_world_create_ex(B, "busybox", NULL, H_UNIX, &r);
			if (st == 202)
				fprintf(f, "%s\n", h_jstr(r.json, "id"));
			else
				bad = 1;
			h_resp_free(&r);
		}
		if (f)
			fclose(f);
		_exit(bad);
	}
	return pid;
}

START_TEST(two_celld_distinct_ranges)
{
	b_start();
	char *ids_file = h_fmt("%s/b-ids", B->dir);
	pid_t child = create_on_b_async(PER_SIDE, ids_file);
	char *a_ids[PER_SIDE], *b_ids[PER_SIDE];
	for (int i = 0; i < PER_SIDE; i++)
		a_ids[i] = h_create("busybox", NULL);
	int status = 0;
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	char *text = h_read_file(ids_file);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0 && text,
		      "creating on B failed; B's log:\n%s", h_world_log_tail(B));
	char *save = NULL, *tok = strtok_r(text, "\n", &save);
	for (int i = 0; i < PER_SIDE; i++, tok = strtok_r(NULL, "\n", &save)) {
		ck_assert_msg(tok, "B created fewer than %d sandboxes", PER_SIDE);
		b_ids[i] = strdup(tok);
		h_world_track_sandbox(B, tok);
	}

	unsigned long uids[2 * PER_SIDE];
	int slots[2 * PER_SIDE];
	for (int i = 0; i < 2 * PER_SIDE; i++) {
		bool on_b = i >= PER_SIDE;
		const char *id = on_b ? b_ids[i - PER_SIDE] : a_ids[i];
		json_t *ins = h_world_inspect(side(on_b), id);
		slots[i] = slot_of(ins);
		pid_t pid1 = (pid_t)h_jint(ins, "pid");
		uids[i] = host_uid_of(pid1);
		ck_assert_uint_eq(uids[i], (unsigned long)h_jint(ins, "uidMap.hostStart"));
		ck_assert_int_eq(h_jint(ins, "gidMap.hostStart"), h_jint(ins, "uidMap.hostStart"));
		expect_reserved(slots[i], side(on_b)->state, id);
		ck_assert_msg(reservation_held(slots[i]), "slot %d is not held by its celld",
			      slots[i]);
		json_decref(ins);
	}
	for (int i = 0; i < 2 * PER_SIDE; i++)
		for (int j = i + 1; j < 2 * PER_SIDE; j++)
			ck_assert_msg(uids[i] != uids[j],
				      "sandboxes %d and %d share host uid %lu (slot %d)", i, j,
				      uids[i], slots[i]);

	/* Deleting releases each reservation file. */
	for (int i = 0; i < 2 * PER_SIDE; i++) {
		bool on_b = i >= PER_SIDE;
		const char *id = on_b ? b_ids[i - PER_SIDE] : a_ids[i];
		ck_assert_int_eq(h_world_delete(side(on_b), id), 204);
		expect_released(slots[i], side(on_b)->state, id);
	}
	for (int i = 0; i < PER_SIDE; i++) {
		free(a_ids[i]);
		free(b_ids[i]);
	}
	free(text);
	free(ids_file);
}
END_TEST

START_TEST(restart_keeps_reservation)
{
	/* B restarts while A creates. */
	b_start();
	char *b1 = h_world_create(B, "busybox", NULL);
	json_t *ins = h_world_inspect(B, b1);
	int b_slot = slot_of(ins);
	pid_t b1_init = (pid_t)h_jint(ins, "pid");
	json_decref(ins);
	b_kill();
	ck_assert_msg(h_pid_alive(b1_init), "the sandbox died with celld B");
	expect_reserved(b_slot, B->state, b1);
	ck_assert_msg(reservation_released_soon(b_slot), "slot %d still held 2 s after B died",
		      b_slot);
	char *a_ids[3];
	for (int i = 0; i < 3; i++) {
		a_ids[i] = h_create("busybox", NULL);
		json_t *ai = h_inspect(a_ids[i]);
		ck_assert_msg(slot_of(ai) != b_slot, "A took slot %d of B's sandbox %s", b_slot,
			      b1);
		json_decref(ai);
	}
	b_start();
	ck_assert_str_eq(h_world_wait_state(B, b1, "Running", 30), "Running");
	ins = h_world_inspect(B, b1);
	ck_assert_int_eq(slot_of(ins), b_slot);
	ck_assert_int_eq(h_jint(ins, "pid"), b1_init);
	json_decref(ins);
	expect_reserved(b_slot, B->state, b1);
	ck_assert_msg(reservation_held(b_slot), "B did not take slot %d back", b_slot);

	/* A restarts while B creates. */
	json_t *ai = h_inspect(a_ids[0]);
	int a_slot = slot_of(ai);
	json_decref(ai);
	h_celld_kill();
	char *b2 = h_world_create(B, "busybox", NULL);
	ins = h_world_inspect(B, b2);
	int b2_slot = slot_of(ins);
	json_decref(ins);
	ck_assert_msg(b2_slot != a_slot, "B took slot %d of A's sandbox %s", a_slot, a_ids[0]);
	h_celld_start();
	ck_assert_str_eq(h_wait_state(a_ids[0], "Running", 30), "Running");
	expect_reserved(a_slot, H.state, a_ids[0]);
	ck_assert_msg(reservation_held(a_slot), "A did not take slot %d back", a_slot);

	ck_assert_int_eq(h_world_delete(B, b1), 204);
	ck_assert_int_eq(h_world_delete(B, b2), 204);
	expect_released(b_slot, B->state, b1);
	expect_released(b2_slot, B->state, b2);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(h_delete(a_ids[i]), 204);
	expect_released(a_slot, H.state, a_ids[0]);
	for (int i = 0; i < 3; i++)
		free(a_ids[i]);
	free(b1);
	free(b2);
}
END_TEST

/* A file at the lowest free slot whose owner is gone (a missing state dir, or nothing
 * readable at all) is reclaimed by the next create; one whose owner's state.json still
 * records the slot's range is left alone although nobody holds it. */
START_TEST(stale_reservation_reclaimed)
{
	static const char *const stale[] = {
	    "/nonexistent/cell-it-ranges/state\nabcdef0123456789\n", /* state dir gone */
	    "",							     /* died before filling it */
	};
	for (size_t k = 0; k < 2; k++) {
		int lock = ranges_lock();
		int slot = lowest_free();
		plant(slot, stale[k]);
		close(lock);
		char *id = h_create("busybox", NULL);
		json_t *ins = h_inspect(id);
		int got = slot_of(ins);
		json_decref(ins);
		char *text = reservation(slot);
		ck_assert_msg(!text || strcmp(text, stale[k]), "stale %s/%d was not reclaimed",
			      RANGES_DIR, slot);
		free(text);
		/* Unless another celld on the host reclaimed it first, it went to us. */
		if (got == slot)
			expect_reserved(slot, H.state, id);
		ck_assert_int_eq(h_delete(id), 204);
		expect_released(got, H.state, id);
		free(id);
	}

	/* Live though unheld: its celld is down, its sandbox's state is there. */
	int lock = ranges_lock();
	int slot = lowest_free();
	char *owner = fake_owner("fake-live", "f00dfeed00000001", slot);
	char *content = h_fmt("%s\nf00dfeed00000001\n", owner);
	plant(slot, content);
	close(lock);
	char *id = h_create("busybox", NULL);
	json_t *ins = h_inspect(id);
	ck_assert_msg(slot_of(ins) != slot, "a live reservation (slot %d) was taken", slot);
	json_decref(ins);
	char *text = reservation(slot);
	ck_assert_msg(text && !strcmp(text, content), "the live reservation changed: '%s'",
		      text ? text : "(missing)");
	free(text);
	ck_assert_int_eq(h_delete(id), 204);
	unplant(slot, content);
	free(content);
	free(owner);
	free(id);
}
END_TEST

/* Adoption: a missing reservation is recreated; one held by another live owner makes the
 * sandbox Failed (its processes stopped) instead of sharing the range. */
START_TEST(adoption_rereserves)
{
	b_start();
	char *b1 = h_world_create(B, "busybox", NULL);
	json_t *ins = h_world_inspect(B, b1);
	int slot = slot_of(ins);
	json_decref(ins);

	/* The file went missing while B was down: B recreates it. */
	b_kill();
	int lock = ranges_lock();
	char *p = slot_path(slot);
	ck_assert_int_eq(unlink(p), 0);
	free(p);
	close(lock);
	b_start();
	ck_assert_str_eq(h_world_wait_state(B, b1, "Running", 30), "Running");
	free(h_world_sh(B, b1, "true"));
	expect_reserved(slot, B->state, b1);
	ck_assert_msg(reservation_held(slot), "B did not hold slot %d again", slot);

	/* Someone else owns it by the time B comes back. */
	ins = h_world_inspect(B, b1);
	pid_t init = (pid_t)h_jint(ins, "pid");
	json_decref(ins);
	b_kill();
	char *owner = fake_owner("fake-owner", "0123456789abcdef", slot);
	char *content = h_fmt("%s\n0123456789abcdef\n", owner);
	lock = ranges_lock();
	plant(slot, content);
	close(lock);
	b_start();
	ck_assert_str_eq(h_world_wait_state(B, b1, "Failed", 30), "Failed");
	char *path = h_fmt("/v1/sandboxes/%s", b1);
	struct h_resp r;
	ck_assert_int_eq(h_world_http(B, "GET", path, NULL, &r), 200);
	const char *reason = h_jstr(r.json, "status.reason");
	const char *message = h_jstr(r.json, "status.message");
	ck_assert_msg(strstr(reason, "uid range") || strstr(message, "uid range"),
		      "Failed without naming the range: %s", r.body);
	h_resp_free(&r);
	free(path);
	for (int i = 0; i < 300 && h_pid_alive(init); i++)
		h_sleep_ms(10);
	ck_assert_msg(!h_pid_alive(init), "init %d of the Failed sandbox still runs", (int)init);
	char *log = h_read_file(B->log);
	ck_assert_msg(log && strstr(log, "0123456789abcdef") && strstr(log, b1),
		      "B's log does not name both sandboxes");
	free(log);
	ck_assert_int_eq(h_world_delete(B, b1), 204);
	char *text = reservation(slot);
	ck_assert_msg(text && !strcmp(text, content), "deleting B's sandbox touched slot %d: '%s'",
		      slot, text ? text : "(missing)");
	free(text);
	unplant(slot, content);
	free(content);
	free(owner);
	free(b1);
}
END_TEST

/* celld in a private mount namespace, with file bind-mounted over target. */
static void expect_refused(const char *target, const char *line, const char *name)
{
	char *fake = h_fmt("%s/fake-%s", H.dir, strrchr(target, '/') + 1);
	char *orig = h_read_file(target);
	ck_assert_ptr_nonnull(orig);
	char *text = h_fmt("%s%s", orig, line);
	h_write_file(fake, text, 0644);
	char *state = h_fmt("%s/refused/state", H.dir);
	char *sock = h_fmt("%s/refused/cell.sock", H.dir);
	char *celld = h_fmt("%s/celld", H.bin), *init = h_fmt("%s/cell-init", H.bin);
	char *policies = h_fmt("%s/policies", H.src);
	char *const argv[] = {"/usr/bin/unshare",
			      "--mount",
			      "--propagation",
			      "private",
			      "/bin/sh",
			      "-c",
			      "mount --bind \"$0\" \"$1\" && shift && exec \"$@\"",
			      fake,
			      (char *)target,
			      celld,
			      "--state-dir",
			      state,
			      "--images",
			      H.images,
			      "--socket",
			      sock,
			      "--no-tcp",
			      "--init",
			      init,
			      "--policies",
			      policies,
			      NULL};
	struct h_proc pr;
	h_run(argv, NULL, 30, &pr);
	ck_assert_msg(pr.status == 1 && strstr(pr.err, name) &&
			  strstr(pr.err, "inside the sandbox uid range space"),
		      "celld with %s in %s: status %d\nstdout: %s\nstderr: %s", name, target,
		      pr.status, pr.out, pr.err);
	struct stat st;
	ck_assert_msg(stat(sock, &st) < 0, "the refused celld made its socket");
	h_proc_free(&pr);
	free(celld);
	free(init);
	free(policies);
	free(sock);
	free(state);
	free(text);
	free(orig);
	unlink(fake);
	free(fake);
}

START_TEST(host_users_in_range_refused)
{
	expect_refused("/etc/passwd", "cellbad:x:1073741829:100::/nonexistent:/bin/false\n",
		       "cellbad");
	expect_refused("/etc/group", "cellgrp:x:2147483647:\n", "cellgrp");
}
END_TEST

/* ------------------------------------------------------------------------------------ */
/* tests: kept output                                                                     */

struct logs {
	long status;
	char *body;
	size_t len;
	unsigned long long tail;
};

static size_t logs_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct logs *l = ud;
	size_t n = size * nmemb;
	char *nb = realloc(l->body, l->len + n + 1);
	ck_assert_ptr_nonnull(nb);
	memcpy(nb + l->len, ptr, n);
	l->body = nb;
	l->len += n;
	l->body[l->len] = '\0';
	return n;
}

static size_t logs_header(char *line, size_t size, size_t nmemb, void *ud)
{
	struct logs *l = ud;
	static const char name[] = "execd-commands-tail-cursor:";
	size_t n = size * nmemb;
	if (n > sizeof(name) - 1 && !strncasecmp(line, name, sizeof(name) - 1))
		l->tail = strtoull(line + sizeof(name) - 1, NULL, 10);
	return n;
}

static void get_logs(const char *id, const char *cmd, unsigned long long cursor, struct logs *l)
{
	memset(l, 0, sizeof(*l));
	CURL *c = curl_easy_init();
	char *url =
	    h_fmt("http://localhost/v1/sandboxes/%s/proxy/44772/command/%s/logs?cursor=%llu", id,
		  cmd, cursor);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, H.socket);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROXY, "");
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, logs_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, l);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, logs_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, l);
	ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &l->status);
	curl_easy_cleanup(c);
	free(url);
	if (!l->body)
		l->body = strdup("");
	ck_assert_msg(l->status == 200, "logs of %s: HTTP %ld: %s", cmd, l->status, l->body);
}

static json_t *cmd_status(const char *id, const char *cmd)
{
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/command/status/%s", id, cmd);
	struct h_resp r;
	long st = h_http("GET", path, NULL, &r);
	ck_assert_msg(st == 200 && r.json, "status of %s: HTTP %ld: %s", cmd, st, r.body);
	json_t *j = json_incref(r.json);
	h_resp_free(&r);
	free(path);
	return j;
}

static char *start_bg(const char *id, const char *cmd)
{
	struct h_exec_opts o = {.background = true};
	struct h_exec res;
	h_exec(id, cmd, &o, &res);
	ck_assert_msg(res.status == 200 && res.cmd_id && *res.cmd_id, "background %s: HTTP %ld",
		      cmd, res.status);
	char *cid = strdup(res.cmd_id);
	h_exec_free(&res);
	return cid;
}

#define N_BIG 10

START_TEST(kept_output_capped_finished)
{
	char *id = h_create("busybox", NULL);
	char *cmds[N_BIG];
	for (int i = 0; i < N_BIG; i++) {
		cmds[i] = start_bg(id, BIG_OUT_CMD);
		bool running = true;
		for (int t = 0; t < 600 && running; t++) {
			json_t *st = cmd_status(id, cmds[i]);
			running = json_is_true(json_object_get(st, "running"));
			json_decref(st);
			if (running)
				h_sleep_ms(100);
		}
		ck_assert_msg(!running, "command %d still running after 60 s", i);
	}
	unsigned long long kept = 0;
	for (int i = 0; i < N_BIG; i++) {
		struct logs l;
		get_logs(id, cmds[i], 0, &l);
		/* The end offset is everything the command wrote, dropped or not. */
		ck_assert_msg(l.tail == BIG_OUT, "command %d: tail cursor %llu, wrote %llu", i,
			      l.tail, BIG_OUT);
		ck_assert_msg(l.len <= LOG_MAX, "command %d keeps %zu bytes", i, l.len);
		for (size_t k = 0; k < l.len; k++)
			if (l.body[k] != 'a')
				ck_abort_msg("command %d: byte %zu of its log is %d", i, k,
					     l.body[k]);
		kept += l.len;
		json_t *st = cmd_status(id, cmds[i]);
		bool dropped = json_is_true(json_object_get(st, "log_dropped"));
		ck_assert_msg(!dropped || l.len == 0, "command %d: dropped but %zu bytes", i,
			      l.len);
		if (i == 0)
			ck_assert_msg(dropped && *h_jstr(st, "log_note"),
				      "the oldest log was not dropped: %s",
				      json_dumps(st, JSON_COMPACT));
		if (i == N_BIG - 1)
			ck_assert_msg(!dropped && l.len >= LOG_MAX * 3 / 4,
				      "the newest command keeps only %zu bytes", l.len);
		ck_assert_int_eq(h_jint(st, "exit_code"), 0);
		json_decref(st);
		free(l.body);
	}
	ck_assert_msg(kept <= LOG_CAP, "the sandbox keeps %llu bytes of output (cap %llu)", kept,
		      LOG_CAP);

	/* Cursors: before the kept window → from its start; inside → from there; past the
	 * end → nothing, and the tail never moves backwards. */
	struct logs all, part, past, gone;
	get_logs(id, cmds[N_BIG - 1], 0, &all);
	get_logs(id, cmds[N_BIG - 1], BIG_OUT - 10, &part);
	get_logs(id, cmds[N_BIG - 1], BIG_OUT + 1000, &past);
	get_logs(id, cmds[0], 5, &gone);
	ck_assert_uint_eq(part.len, 10);
	ck_assert_uint_eq(past.len, 0);
	ck_assert_uint_eq(gone.len, 0);
	ck_assert_msg(all.tail == BIG_OUT && part.tail == BIG_OUT && past.tail == BIG_OUT &&
			  gone.tail == BIG_OUT,
		      "tail cursors %llu %llu %llu %llu", all.tail, part.tail, past.tail,
		      gone.tail);
	free(all.body);
	free(part.body);
	free(past.body);
	free(gone.body);
	for (int i = 0; i < N_BIG; i++)
		free(cmds[i]);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
}
END_TEST

START_TEST(kept_output_capped_running)
{
	char *id = h_create("busybox", NULL);
	char *cmds[N_BIG];
	for (int i = 0; i < N_BIG; i++)
		cmds[i] = start_bg(id, BIG_OUT_CMD "; sleep 600");
	/* Every command has written all of its output and still runs. */
	for (int i = 0; i < N_BIG; i++) {
		struct logs l = {0};
		for (int t = 0; t < 600; t++) {
			get_logs(id, cmds[i], BIG_OUT, &l);
			free(l.body);
			if (l.tail >= BIG_OUT)
				break;
			h_sleep_ms(100);
		}
		ck_assert_msg(l.tail == BIG_OUT, "command %d wrote %llu bytes in 60 s", i, l.tail);
	}
	unsigned long long kept = 0;
	for (int i = 0; i < N_BIG; i++) {
		struct logs l;
		get_logs(id, cmds[i], 0, &l);
		kept += l.len;
		ck_assert_msg(l.tail == BIG_OUT, "command %d: tail %llu", i, l.tail);
		free(l.body);
		json_t *st = cmd_status(id, cmds[i]);
		ck_assert_msg(json_is_true(json_object_get(st, "running")), "command %d ended", i);
		json_decref(st);
	}
	ck_assert_msg(kept <= LOG_CAP, "running commands keep %llu bytes (cap %llu)", kept,
		      LOG_CAP);
	ck_assert_msg(kept >= LOG_CAP / 2, "only %llu bytes kept: the cap starves them", kept);
	/* The sandbox still works. */
	char *out = h_sh(id, "echo ok");
	ck_assert_str_eq(out, "ok\n");
	free(out);
	for (int i = 0; i < N_BIG; i++)
		free(cmds[i]);
	ck_assert_int_eq(h_delete(id), 204);
	free(id);
}
END_TEST

static Suite *ranges_suite(void)
{
	Suite *s = suite_create("ranges");
	tcase_add_test(h_tcase(s, "two_celld_distinct_ranges", 240), two_celld_distinct_ranges);
	tcase_add_test(h_tcase(s, "restart_keeps_reservation", 240), restart_keeps_reservation);
	tcase_add_test(h_tcase(s, "stale_reservation_reclaimed", 180), stale_reservation_reclaimed);
	tcase_add_test(h_tcase(s, "adoption_rereserves", 240), adoption_rereserves);
	tcase_add_test(h_tcase(s, "host_users_in_range_refused", 120), host_users_in_range_refused);
	tcase_add_test(h_tcase(s, "kept_output_capped_finished", 300), kept_output_capped_finished);
	tcase_add_test(h_tcase(s, "kept_output_capped_running", 300), kept_output_capped_running);
	return s;
}

int main(void)
{
	return h_main(ranges_suite());
}
