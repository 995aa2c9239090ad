/* Isolation: what a sandbox can see of the host and of other sandboxes. Each test creates
 * its own sandboxes; the harness deletes them even when the test fails. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cell/codec.h"
#include "cell/id.h"
#include "cell/proto.h"
#include "harness.h"

static char *rand_token(const char *prefix)
{
	char r[CELL_ID_RANDOM_LEN + 1];
	ck_assert_int_eq(cell_id_random(r), 0);
	return h_fmt("%s-%s", prefix, r);
}

/* A file on the host, under T, that no sandbox may ever read or write. */
struct marker {
	char *path;
	char *secret;
};

static struct marker host_marker(void)
{
	struct marker m;
	char *name = rand_token("marker");
	m.path = h_fmt("%s/%s", H.dir, name);
	m.secret = rand_token("HOST-SECRET");
	h_write_file(m.path, m.secret, 0644);
	free(name);
	return m;
}

static void marker_free(struct marker *m)
{
	unlink(m->path);
	free(m->path);
	free(m->secret);
}

START_TEST(pid1_is_cell_init)
{
	char *id = h_create("busybox", NULL);
	char *out = h_sh(id, "tr '\\0' ' ' < /proc/1/cmdline");
	ck_assert_msg(strstr(out, "cell-init"), "PID 1 is '%s'", out);
	free(out);
	out = h_sh(id, "cat /proc/1/comm");
	ck_assert_str_eq(out, "cell-init\n"); /* ps and top show this, not memfd:cell-init */
	free(out);
	/* The command itself runs in the sandbox's pid namespace, with a small pid. */
	out = h_sh(id, "echo $$");
	ck_assert_int_gt(atoi(out), 1);
	ck_assert_int_lt(atoi(out), 1000);
	free(out);
	free(id);
}
END_TEST

/* The /proc/self/exe overwrite class (CVE-2019-5736): PID 1 runs from a sealed memfd, so
 * root inside can neither write nor truncate the binary it sees as /proc/1/exe, and the
 * copy on the host stays byte-identical. */
START_TEST(init_binary_not_writable)
{
	char *id = h_create("busybox", NULL);
	char *before = h_sh(id, "md5sum < /proc/1/exe 2>&1 || echo unreadable");
	ck_assert_int_ne(h_sh_code(id, "echo x >> /proc/1/exe"), 0);
	ck_assert_int_ne(h_sh_code(id, "echo x > /proc/1/exe"), 0);
	ck_assert_int_ne(h_sh_code(id, "dd if=/dev/zero of=/proc/1/exe bs=1 count=1 "
				       "conv=notrunc 2>/dev/null"),
			 0);
	char *after = h_sh(id, "md5sum < /proc/1/exe 2>&1 || echo unreadable");
	ck_assert_str_eq(before, after);
	char *host = h_fmt("md5sum < %s/cell-init", H.bin);
	char *argv[] = {"/bin/sh", "-c", host, NULL};
	struct h_proc p = {0};
	ck_assert_int_eq(h_run(argv, NULL, 30, &p), 0);
	if (strcmp(before, "unreadable\n") != 0)
		ck_assert_str_eq(before, p.out);
	h_proc_free(&p);
	/* and init still answers */
	char *out = h_sh(id, "echo alive");
	ck_assert_str_eq(out, "alive\n");
	free(out);
	free(host);
	free(after);
	free(before);
	free(id);
}
END_TEST

START_TEST(host_processes_invisible)
{
	char *const argv[] = {"/bin/sleep", "987123", NULL};
	pid_t host_pid = h_spawn(argv);
	char *id = h_create("busybox", NULL);
	char *out =
	    h_sh(id, "for p in /proc/[0-9]*; do "
		     "printf '%s: ' \"${p#/proc/}\"; tr '\\0' ' ' < $p/cmdline; echo; done");
	ck_assert_msg(!strstr(out, "987123"), "host process visible inside:\n%s", out);
	ck_assert_msg(!strstr(out, "celld"), "celld visible inside:\n%s", out);
	/* Only the sandbox's own few processes exist there. */
	int n = 0;
	for (char *p = out; (p = strchr(p, '\n')); p++)
		n++;
	ck_assert_msg(n <= 8, "%d processes visible in a fresh sandbox:\n%s", n, out);
	free(out);
	/* The host pid number means nothing inside: whatever has it is not our sleep. */
	char *cmd = h_fmt("tr '\\0' ' ' < /proc/%d/cmdline 2>/dev/null; true", (int)host_pid);
	out = h_sh(id, cmd);
	ck_assert_msg(!strstr(out, "987123"), "host pid %d readable inside", (int)host_pid);
	free(out);
	free(cmd);
	free(id);
}
END_TEST

START_TEST(uid_map_is_sandbox_range)
{
	char *id = h_create("busybox", NULL);
	json_t *ins = h_inspect(id);
	long long start = h_jint(ins, "uidMap.hostStart");
	ck_assert_int_eq(h_jint(ins, "uidMap.insideStart"), 0);
	ck_assert_int_eq(h_jint(ins, "uidMap.length"), 65536);
	ck_assert_int_eq(h_jint(ins, "gidMap.hostStart"), start);
	ck_assert_int_eq(h_jint(ins, "gidMap.length"), 65536);
	ck_assert_msg(start >= 0x40000000 && (start - 0x40000000) % 65536 == 0,
		      "hostStart %lld is not a slot of the sandbox uid space", start);

	char *out = h_sh(id, "cat /proc/self/uid_map");
	unsigned long in0, host0, len;
	ck_assert_msg(sscanf(out, "%lu %lu %lu", &in0, &host0, &len) == 3, "uid_map: %s", out);
	ck_assert_uint_eq(in0, 0);
	ck_assert_uint_eq(host0, (unsigned long)start);
	ck_assert_uint_eq(len, 65536);
	ck_assert_msg(!strchr(strchr(out, '\n') + 1, '\n'), "more than one uid_map line: %s", out);
	free(out);
	out = h_sh(id, "cat /proc/self/gid_map");
	ck_assert_int_eq(sscanf(out, "%lu %lu %lu", &in0, &host0, &len), 3);
	ck_assert_uint_eq(host0, (unsigned long)start);
	free(out);

	out = h_sh(id, "id -u; id -g");
	ck_assert_str_eq(out, "0\n0\n");
	free(out);

	/* Seen from the host, the sandbox's root is the range's first uid. */
	long long pid = h_jint(ins, "pid");
	ck_assert_int_gt(pid, 1);
	char *status_path = h_fmt("/proc/%lld/status", pid);
	char *status = h_read_file(status_path);
	ck_assert_ptr_nonnull(status);
	unsigned long ruid = 0;
	const char *u = strstr(status, "\nUid:");
	ck_assert_ptr_nonnull(u);
	ck_assert_int_eq(sscanf(u + 5, "%lu", &ruid), 1);
	ck_assert_uint_eq(ruid, (unsigned long)start);
	free(status);
	free(status_path);

	/* Its namespaces are its own. */
	static const char *const kinds[] = {"user", "mnt", "pid", "net", "ipc", "uts"};
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		char *key = h_fmt("namespaces.%s", kinds[i]);
		char *self = h_fmt("/proc/self/ns/%s", kinds[i]);
		char host_ns[128] = "";
		ssize_t n = readlink(self, host_ns, sizeof(host_ns) - 1);
		ck_assert_int_gt(n, 0);
		host_ns[n] = '\0';
		const char *sb_ns = h_jstr(ins, key);
		ck_assert_msg(*sb_ns, "inspect has no %s", key);
		ck_assert_msg(strcmp(sb_ns, host_ns) != 0, "%s namespace shared with the host",
			      kinds[i]);
		free(key);
		free(self);
	}
	json_decref(ins);
	free(id);
}
END_TEST

START_TEST(host_files_unreachable_by_exec)
{
	struct marker m = host_marker();
	char *id = h_create("busybox", NULL);
	char *cmd = h_fmt("cat '%s' /proc/1/root'%s' /proc/self/root'%s' 2>&1; "
			  "ls -la '%s' 2>&1; true",
			  m.path, m.path, m.path, H.dir);
	char *out = h_sh(id, cmd);
	ck_assert_msg(!strstr(out, m.secret), "host file read from inside:\n%s", out);
	ck_assert_msg(!strstr(out, "celld.log"), "host dir T listed from inside:\n%s", out);
	free(out);
	free(cmd);
	free(id);
	marker_free(&m);
}
END_TEST

/* Download and stat through a hostile path: never the host's content, never a 5xx. When the
 * sandbox has its own file where the path resolves inside, that one is fine. */
static void expect_no_host_file(const char *id, const char *path, const struct marker *m,
				const char *own)
{
	struct h_resp r;
	long st = h_download(id, path, &r);
	ck_assert_msg(!memmem(r.body, r.len, m->secret, strlen(m->secret)),
		      "download of %s returned the host file", path);
	ck_assert_msg(st == 200 || (st >= 400 && st < 500),
		      "download of %s: HTTP %ld (want 200 with the sandbox's file, or 4xx): %s",
		      path, st, r.body);
	if (st == 200)
		ck_assert_msg(own && r.len == strlen(own) && !memcmp(r.body, own, r.len),
			      "download of %s gave '%.*s'", path, (int)r.len, r.body);
	h_resp_free(&r);

	st = h_file_info(id, path, &r);
	ck_assert_msg(st == 200 || (st >= 400 && st < 500), "info of %s: HTTP %ld: %s", path, st,
		      r.body);
	h_resp_free(&r);
}

START_TEST(host_files_unreachable_by_files_api)
{
	struct marker m = host_marker();
	char *id = h_create("busybox", NULL);
	char *dotdot = h_fmt("../../../../../../..%s", m.path);
	char *wsdotdot = h_fmt("/workspace/../../../../../..%s", m.path);
	char *proc1 = h_fmt("/proc/1/root%s", m.path);
	char *procself = h_fmt("/proc/self/root%s", m.path);
	char *proccwd = h_fmt("/proc/1/cwd/../../../../..%s", m.path);
	char *cmd = h_fmt("ln -s '%s' /workspace/abs && ln -s '../../../../../../..%s' "
			  "/workspace/rel && ln -s /proc/1/root /workspace/magic",
			  m.path, m.path);
	free(h_sh(id, cmd));
	char *magic = h_fmt("/workspace/magic%s", m.path);
	const char *paths[] = {dotdot,		 wsdotdot,	   m.path,
			       "/workspace/abs", "/workspace/rel", proc1,
			       procself,	 proccwd,	   magic};
	const size_t np = sizeof(paths) / sizeof(paths[0]);

	/* 1: nothing at the mirrored path inside → 404-ish, never the host file */
	for (size_t i = 0; i < np; i++)
		expect_no_host_file(id, paths[i], &m, NULL);

	/* 2: the sandbox's own file at the same path: paths resolving inside may return it */
	char *own_cmd = h_fmt("mkdir -p '%s' && printf SANDBOX-OWN > '%s'", H.dir, m.path);
	free(h_sh(id, own_cmd));
	for (size_t i = 0; i < np; i++)
		expect_no_host_file(id, paths[i], &m, "SANDBOX-OWN");
	struct h_resp r;
	ck_assert_int_eq(h_download(id, "/workspace/abs", &r), 200);
	ck_assert_str_eq(r.body, "SANDBOX-OWN");
	h_resp_free(&r);

	/* 3: uploads through the same paths never write the host */
	const char *upaths[] = {"/workspace/abs", "/workspace/rel", dotdot, proc1, magic};
	for (size_t i = 0; i < sizeof(upaths) / sizeof(upaths[0]); i++) {
		long st = h_upload(id, upaths[i], "PWNED", 5, 0644, &r);
		ck_assert_msg(st < 500, "upload to %s: HTTP %ld: %s", upaths[i], st, r.body);
		h_resp_free(&r);
		char *now = h_read_file(m.path);
		ck_assert_msg(now && !strcmp(now, m.secret), "upload to %s changed the host file",
			      upaths[i]);
		free(now);
	}
	char *created = h_fmt("%s.new", m.path);
	char *up_new = h_fmt("../../../../../../..%s", created);
	h_upload(id, up_new, "PWNED", 5, 0644, &r);
	h_resp_free(&r);
	ck_assert_msg(access(created, F_OK) != 0, "upload created %s on the host", created);
	free(up_new);
	free(created);

	free(own_cmd);
	free(magic);
	free(cmd);
	free(proccwd);
	free(procself);
	free(proc1);
	free(wsdotdot);
	free(dotdot);
	free(id);
	marker_free(&m);
}
END_TEST

START_TEST(files_api_round_trip)
{
	char *id = h_create("busybox", NULL);
	size_t n = (1u << 20) + 77;
	unsigned char *data = malloc(n);
	unsigned int seed = 42;
	for (size_t i = 0; i < n; i++)
		data[i] = (unsigned char)rand_r(&seed);
	memset(data + 1000, 0, 5000);
	char sha[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(data, n, sha);

	struct h_resp r;
	long st = h_upload(id, "/workspace/d/e/f.bin", data, n, 0600, &r);
	ck_assert_msg(st == 200, "upload: HTTP %ld: %s", st, r.body);
	h_resp_free(&r);

	ck_assert_int_eq(h_download(id, "/workspace/d/e/f.bin", &r), 200);
	ck_assert_uint_eq(r.len, n);
	ck_assert_msg(!memcmp(r.body, data, n), "downloaded bytes differ");
	h_resp_free(&r);

	char *out =
	    h_sh(id, "sha256sum /workspace/d/e/f.bin; stat -c '%a %s' /workspace/d/e/f.bin");
	ck_assert_msg(!strncmp(out, sha, CELL_SHA256_HEX_LEN), "sha256 inside: %s", out);
	char *want = h_fmt("600 %zu\n", n);
	ck_assert_msg(strstr(out, want), "mode/size inside: %s", out);
	free(want);
	free(out);

	ck_assert_int_eq(h_file_info(id, "/workspace/d/e/f.bin", &r), 200);
	json_t *fi = json_object_get(r.json, "/workspace/d/e/f.bin");
	ck_assert_msg(fi, "info has no entry for the path: %s", r.body);
	ck_assert_str_eq(h_jstr(fi, "type"), "file");
	ck_assert_int_eq(h_jint(fi, "size"), (long long)n);
	ck_assert_int_eq(h_jint(fi, "mode"), 600);
	/* owner names come from the sandbox's /etc/passwd, else the number */
	const char *owner = h_jstr(fi, "owner");
	ck_assert_msg(!strcmp(owner, "root") || !strcmp(owner, "0"), "owner '%s'", owner);
	h_resp_free(&r);

	/* A file written by a command is downloadable, ranges too. */
	free(h_sh(id, "printf 0123456789 > /workspace/digits"));
	ck_assert_int_eq(h_download(id, "/workspace/digits", &r), 200);
	ck_assert_str_eq(r.body, "0123456789");
	h_resp_free(&r);
	/* ranged reads: the Range header (206, Content-Range; 416 past the end) */
	char *url = h_fmt("/v1/sandboxes/%s/proxy/44772/files/download?path=/workspace/digits", id);
	static const char *const range[] = {"Range: bytes=3-6", NULL};
	struct h_req req = {.method = "GET", .path = url, .headers = range};
	ck_assert_int_eq(h_request(&req, &r), 206);
	ck_assert_str_eq(r.body, "3456");
	h_resp_free(&r);
	static const char *const tail[] = {"Range: bytes=7-", NULL};
	req.headers = tail;
	ck_assert_int_eq(h_request(&req, &r), 206);
	ck_assert_str_eq(r.body, "789");
	h_resp_free(&r);
	static const char *const past[] = {"Range: bytes=100-200", NULL};
	req.headers = past;
	ck_assert_int_eq(h_request(&req, &r), 416);
	h_resp_free(&r);
	free(url);

	st = h_download(id, "/workspace/missing", &r);
	ck_assert_int_eq(st, 404);
	ck_assert_str_eq(h_err_code(&r), "FILE_NOT_FOUND");
	h_resp_free(&r);
	st = h_file_info(id, "/workspace/missing", &r);
	ck_assert_int_eq(st, 404);
	h_resp_free(&r);
	free(data);
	free(id);
}
END_TEST

START_TEST(sandboxes_isolated_from_each_other)
{
	char *a = h_create("busybox", NULL);
	char *b = h_create("busybox", NULL);
	free(h_sh(a, H_NOHUP
		  "echo A-SECRET > /workspace/secret; nohup sleep 765432 >/dev/null 2>&1 &"));
	free(h_sh(a, "echo a-page > /workspace/index.html; httpd -p 127.0.0.1:8000 -h /workspace"));

	char *out = h_sh(b, "cat /workspace/secret 2>&1; for p in /proc/[0-9]*; do "
			    "tr '\\0' ' ' < $p/cmdline; echo; done; true");
	ck_assert_msg(!strstr(out, "A-SECRET"), "B read A's file:\n%s", out);
	ck_assert_msg(!strstr(out, "765432"), "B sees A's process:\n%s", out);
	free(out);
	/* A's loopback is not B's: the same address and port in B reach nothing. */
	out = h_sh(a, H_FETCH "for i in 1 2 3 4 5 6 7 8 9 10; do "
			      "o=$(fetch 8000 index.html); [ -n \"$o\" ] && "
			      "{ echo \"$o\"; exit 0; }; sleep 0.3; done; exit 1");
	ck_assert_str_eq(out, "a-page\n");
	free(out);
	out = h_sh(b, H_FETCH "fetch 8000 index.html; true");
	ck_assert_msg(!strstr(out, "a-page"), "B reached A's server on its loopback");
	free(out);

	struct h_resp r;
	ck_assert_int_eq(h_download(b, "/workspace/secret", &r), 404);
	h_resp_free(&r);

	json_t *ia = h_inspect(a), *ib = h_inspect(b);
	long long sa = h_jint(ia, "uidMap.hostStart"), sb = h_jint(ib, "uidMap.hostStart");
	ck_assert_msg(sa + 65536 <= sb || sb + 65536 <= sa, "uid ranges overlap: %lld %lld", sa,
		      sb);
	static const char *const kinds[] = {"namespaces.user", "namespaces.mnt", "namespaces.pid",
					    "namespaces.net", "namespaces.ipc"};
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		ck_assert_str_ne(h_jstr(ia, kinds[i]), h_jstr(ib, kinds[i]));
	ck_assert_str_ne(h_jstr(ia, "dir"), h_jstr(ib, "dir"));
	json_decref(ia);
	json_decref(ib);
	free(a);
	free(b);
}
END_TEST

/* The relay socket is celld's door into the sandbox: nothing inside may find it by path,
 * and commands inherit no socket from init. */
START_TEST(init_socket_unreachable)
{
	char *id = h_create("busybox", NULL);
	json_t *ins = h_inspect(id);
	char *sock = h_fmt("%s/init.sock", h_jstr(ins, "dir"));
	struct stat st;
	ck_assert_msg(stat(sock, &st) == 0 && S_ISSOCK(st.st_mode), "no relay socket at %s", sock);
	char *cmd = h_fmt("ls -la '%s'", sock);
	ck_assert_msg(h_sh_code(id, cmd) != 0, "relay socket path %s exists inside", sock);
	free(cmd);
	/* no socket anywhere in the sandbox's file tree (outside /proc and /sys) */
	char *out = h_sh(id, "find / -path /proc -prune -o -path /sys -prune -o -type s -print "
			     "2>/dev/null; true");
	ck_assert_msg(!*out, "sockets visible inside:\n%s", out);
	free(out);
	/* and none among a command's fds */
	out = h_sh(id, "ls -l /proc/$$/fd/ | grep socket; true");
	ck_assert_msg(!*out, "a command holds a socket fd:\n%s", out);
	free(out);
	free(sock);
	json_decref(ins);
	free(id);
}
END_TEST

/* A compromised cell-init (root inside can ptrace PID 1) may send anything. Stand in for
 * it: replace the sandbox's relay socket with our own listener and answer every request
 * celld makes with one kind of garbage. */
enum garbage {
	G_CLOSE,	   /* hang up without a word */
	G_RESERVED_BITS,   /* header with reserved bits set */
	G_HUGE_LEN,	   /* length 0xffffffff */
	G_UNKNOWN_TYPE,	   /* frame type 99 */
	G_HALF_HEADER,	   /* 3 bytes, then EOF */
	G_BAD_JSON,	   /* STARTED "not json" */
	G_OUTPUT_FIRST,	   /* STDOUT before STARTED */
	G_WRONG_REPLY,	   /* PONG where STARTED belongs */
	G_EXIT_WRONG_TYPE, /* EXIT {"exit_code":"x"} */
	G_EXIT_ABSURD,	   /* EXIT with out-of-range numbers */
	G_NO_EXIT,	   /* STARTED, 4 MiB of output, EOF without EXIT */
	G_ERROR_GARBAGE,   /* ERROR with wrong types and a control-character message */
	G_COUNT,
	G_SLOW = G_COUNT, /* a right STAT for every FILE_STAT, SLOW_ANSWER_MS late (not looped) */
};

/* Later than a healthy init ever is, within celld's 30 s for one step, and three such
 * answers take more than the 30 s one request may wait in all (RELAY_BUDGET_MS). */
#define SLOW_ANSWER_MS 12000
#define SEEN_MAX       16

struct fake_init {
	int lfd;
	volatile int mode;
	volatile int served;
	pthread_t th;
	char seen[SEEN_MAX][160]; /* G_SLOW: the path of each FILE_STAT */
	int n_seen;
};

/* G_SLOW: answer late, unless celld hangs up first. */
static void answer_late(struct fake_init *f, int c)
{
	struct cell_frame req;
	if (cell_frame_recv(c, &req, CELL_FRAME_MAX, NULL) == 0) {
		json_t *j =
		    req.len ? json_loadb((const char *)req.payload, req.len, 0, NULL) : NULL;
		if (req.type == CELL_FRAME_FILE_STAT && f->n_seen < SEEN_MAX)
			snprintf(f->seen[f->n_seen++], sizeof(f->seen[0]), "%s",
				 json_string_value(json_object_get(j, "path")) ?: "-");
		json_decref(j);
		cell_frame_free(&req);
		struct pollfd p = {.fd = c, .events = POLLRDHUP};
		if (poll(&p, 1, SLOW_ANSWER_MS) == 0)
			cell_frame_send_str(
			    c, CELL_FRAME_STAT,
			    "{\"path\":\"/x\",\"type\":\"file\",\"size\":1,\"mode\":420,"
			    "\"uid\":0,\"gid\":0,\"mtime\":0,\"ctime\":0}",
			    NULL);
	}
	close(c);
}

static void put_header(int fd, uint16_t type, uint32_t len)
{
	uint8_t h[CELL_FRAME_HEADER];
	cell_frame_header_encode(h, type, len);
	ssize_t w = send(fd, h, sizeof(h), MSG_NOSIGNAL);
	(void)w;
}

static void serve_garbage(int c, int mode)
{
	struct cell_frame req;
	if (mode != G_CLOSE && cell_frame_recv(c, &req, CELL_FRAME_MAX, NULL) == 0)
		cell_frame_free(&req);
	static uint8_t junk[CELL_FRAME_CHUNK];
	switch (mode) {
	case G_RESERVED_BITS: {
		uint8_t h[CELL_FRAME_HEADER];
		cell_frame_header_encode(h, CELL_FRAME_STARTED, 2);
		h[6] = 0x80;
		ssize_t w = send(c, h, sizeof(h), MSG_NOSIGNAL);
		w = send(c, "{}", 2, MSG_NOSIGNAL);
		(void)w;
		break;
	}
	case G_HUGE_LEN:
		put_header(c, CELL_FRAME_STDOUT, 0xffffffffu);
		break;
	case G_UNKNOWN_TYPE:
		put_header(c, 99, 0);
		break;
	case G_HALF_HEADER: {
		ssize_t w = send(c, "\0\0\0", 3, MSG_NOSIGNAL);
		(void)w;
		break;
	}
	case G_BAD_JSON:
		cell_frame_send_str(c, CELL_FRAME_STARTED, "not json", NULL);
		cell_frame_send_str(c, CELL_FRAME_STAT, "{\"path\":", NULL);
		break;
	case G_OUTPUT_FIRST:
		cell_frame_send_str(c, CELL_FRAME_STDOUT, "early", NULL);
		cell_frame_send_str(c, CELL_FRAME_DATA, "early", NULL);
		break;
	case G_WRONG_REPLY:
		cell_frame_send_str(c, CELL_FRAME_PONG, "{\"pid\":1}", NULL);
		break;
	case G_EXIT_WRONG_TYPE:
		cell_frame_send_str(c, CELL_FRAME_STARTED, "{\"pid\":2}", NULL);
		cell_frame_send_str(c, CELL_FRAME_STDOUT, "hi", NULL);
		cell_frame_send_str(c, CELL_FRAME_EXIT,
				    "{\"exit_code\":\"x\",\"signal\":[],\"timed_out\":\"no\"}",
				    NULL);
		break;
	case G_EXIT_ABSURD:
		cell_frame_send_str(c, CELL_FRAME_STARTED, "{\"pid\":-7}", NULL);
		cell_frame_send_str(c, CELL_FRAME_EXIT,
				    "{\"exit_code\":99999999999999,\"signal\":-5,"
				    "\"timed_out\":false,\"duration_ms\":-1}",
				    NULL);
		break;
	case G_NO_EXIT:
		cell_frame_send_str(c, CELL_FRAME_STARTED, "{\"pid\":2}", NULL);
		cell_frame_send_str(c, CELL_FRAME_STAT,
				    "{\"path\":\"/x\",\"type\":\"file\",\"size\":1}", NULL);
		for (int i = 0; i < 64; i++)
			if (cell_frame_send(c, CELL_FRAME_STDOUT, junk, sizeof(junk), NULL) < 0)
				break;
		break;
	case G_ERROR_GARBAGE:
		cell_frame_send_str(c, CELL_FRAME_ERROR,
				    "{\"errno\":\"ENOENT\",\"message\":\"\\u001b[2J\\u0007evil\"}",
				    NULL);
		break;
	default:
		break;
	}
	close(c);
}

static void *fake_init_main(void *arg)
{
	struct fake_init *f = arg;
	for (;;) {
		int c = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			return NULL;
		if (f->mode == G_SLOW)
			answer_late(f, c);
		else
			serve_garbage(c, f->mode);
		f->served++;
	}
}

static void fake_init_start(struct fake_init *f, const char *sock)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	ck_assert_uint_lt(strlen(sock), sizeof(sa.sun_path));
	strcpy(sa.sun_path, sock);
	ck_assert_int_eq(unlink(sock), 0);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(f->lfd, 0);
	ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(f->lfd, 64), 0);
	ck_assert_int_eq(pthread_create(&f->th, NULL, fake_init_main, f), 0);
}

static void fake_init_stop(struct fake_init *f)
{
	shutdown(f->lfd, SHUT_RDWR);
	close(f->lfd);
	pthread_join(f->th, NULL);
}

START_TEST(hostile_relay_peer)
{
	char *victim = h_create("busybox", NULL);
	char *good = h_create("busybox", NULL);
	json_t *ins = h_inspect(victim);
	char *sock = h_fmt("%s/init.sock", h_jstr(ins, "dir"));
	struct fake_init f = {.lfd = -1};
	fake_init_start(&f, sock);
	for (int mode = 0; mode < G_COUNT; mode++) {
		f.mode = mode;
		struct h_exec r;
		struct h_exec_opts o = {.max_seconds = 60};
		int rc = h_exec(victim, "echo hi", &o, &r);
		ck_assert_msg(rc == 0 || r.status != 200,
			      "garbage %d: the exec request hung or broke", mode);
		ck_assert_msg(!r.complete, "garbage %d: reported as a successful command", mode);
		h_exec_free(&r);

		struct h_resp d;
		long st = h_download(victim, "/etc/passwd", &d);
		ck_assert_msg(st != 200 || mode == G_NO_EXIT,
			      "garbage %d: download answered 200 (%zu bytes)", mode, d.len);
		ck_assert_msg(st != 0, "garbage %d: download got no HTTP answer", mode);
		h_resp_free(&d);
		st = h_file_info(victim, "/etc/passwd", &d);
		ck_assert_msg(st != 0 && st != 200, "garbage %d: info HTTP %ld: %s", mode, st,
			      d.body);
		h_resp_free(&d);

		ck_assert_msg(h_celld_alive(), "celld died on garbage %d", mode);
		char *out = h_sh(good, "echo fine");
		ck_assert_str_eq(out, "fine\n");
		free(out);
	}
	fake_init_stop(&f);
	/* celld really talked to the impostor: exec, download and info for every kind */
	ck_assert_int_ge(f.served, 3 * G_COUNT);
	ck_assert_int_eq(h_delete(victim), 204);
	ck_assert_msg(!h_pid_alive((pid_t)h_jint(ins, "pid")), "victim's init survived delete");
	struct stat st;
	ck_assert_msg(stat(h_jstr(ins, "dir"), &st) < 0, "victim's state dir survived delete");
	free(sock);
	json_decref(ins);
	free(good);
	free(victim);
}
END_TEST

/* A cell-init that answers every step, each one late but within a step's timeout, still
 * costs a request no more than one budget of celld's over all its steps: an info over three
 * paths fails on the third instead of waiting three times. */
START_TEST(slow_relay_costs_one_budget)
{
	char *victim = h_create("busybox", NULL);
	json_t *ins = h_inspect(victim);
	char *sock = h_fmt("%s/init.sock", h_jstr(ins, "dir"));
	struct fake_init f = {.lfd = -1, .mode = G_SLOW};
	fake_init_start(&f, sock);
	char *url = h_fmt("/v1/sandboxes/%s/proxy/44772/files/info?path=/slow/a&path=/slow/b&"
			  "path=/slow/c",
			  victim);
	struct h_resp r;
	long st = h_http("GET", url, NULL, &r);
	fake_init_stop(&f);
	ck_assert_msg(st >= 500 && r.body && strstr(r.body, "within this request's"),
		      "info over three late answers: HTTP %ld %s", st, r.body);
	h_resp_free(&r);
	/* It did ask for each path in turn: the third ran out of the budget the first two
	 * had used. */
	ck_assert_int_eq(f.n_seen, 3);
	ck_assert_str_eq(f.seen[2], "/slow/c");
	ck_assert_int_eq(h_delete(victim), 204);
	free(url);
	free(sock);
	json_decref(ins);
	free(victim);
}
END_TEST

static Suite *isolation_suite(void)
{
	Suite *s = suite_create("isolation");
	tcase_add_test(h_tcase(s, "pid1_is_cell_init", 120), pid1_is_cell_init);
	tcase_add_test(h_tcase(s, "init_binary_not_writable", 120), init_binary_not_writable);
	tcase_add_test(h_tcase(s, "host_processes_invisible", 120), host_processes_invisible);
	tcase_add_test(h_tcase(s, "uid_map_is_sandbox_range", 120), uid_map_is_sandbox_range);
	tcase_add_test(h_tcase(s, "host_files_unreachable_by_exec", 120),
		       host_files_unreachable_by_exec);
	tcase_add_test(h_tcase(s, "host_files_unreachable_by_files_api", 180),
		       host_files_unreachable_by_files_api);
	tcase_add_test(h_tcase(s, "files_api_round_trip", 180), files_api_round_trip);
	tcase_add_test(h_tcase(s, "sandboxes_isolated_from_each_other", 180),
		       sandboxes_isolated_from_each_other);
	tcase_add_test(h_tcase(s, "init_socket_unreachable", 120), init_socket_unreachable);
	tcase_add_test(h_tcase(s, "hostile_relay_peer", 300), hostile_relay_peer);
	tcase_add_test(h_tcase(s, "slow_relay_costs_one_budget", 300), slow_relay_costs_one_budget);
	return s;
}

int main(void)
{
	return h_main(isolation_suite());
}
