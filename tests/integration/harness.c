/* Integration test harness: see harness.h. Talks to celld only over its Unix socket and
 * 127.0.0.1, through the client library (include/cell/client.h) except where a test sends
 * raw bytes on purpose; never through a proxy, so no test packet leaves the loopback. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "harness.h"

/* The worlds, shared with forked test children: a test may kill a celld and start
 * another one, or start another world. worlds[0] is the suite's own. */
#define WORLDS_MAX 4

struct h_shared {
	struct h_world worlds[WORLDS_MAX];
};
static struct h_shared *shared;
struct h_world *h_default_world;

/* Leaks of the worlds tests added, found by the per-test teardowns (in the runner). */
static int added_world_leaks;

#define PROTO_IMAGE  "/tmp/proto/img/rootfs"
#define EXECD_PREFIX "/v1/sandboxes/%s" CELL_CLIENT_EXECD_PREFIX

/* ------------------------------------------------------------------------------------ */
/* small utilities                                                                        */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void hlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void hlog(const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "harness: %s\n", line);
}

char *h_fmt(const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0) {
		fprintf(stderr, "harness: out of memory\n");
		abort();
	}
	return s;
}

void h_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void h_write_file(const char *path, const char *content, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ck_assert_msg(fd >= 0, "creating %s: %s", path, strerror(errno));
	size_t n = strlen(content);
	ck_assert_msg(write(fd, content, n) == (ssize_t)n, "writing %s", path);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

char *h_read_file(const char *path)
{
	char *out = NULL;
	size_t len;
	if (cell_read_file_at(AT_FDCWD, path, 64u << 20, &out, &len, NULL) < 0)
		return NULL;
	return out;
}

char *h_trim(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = '\0';
	return s;
}

char *h_urlencode(const char *s)
{
	char *out = cell_client_urlencode(s);
	if (!out)
		abort();
	return out;
}

json_t *h_jget(json_t *root, const char *path)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", path);
	json_t *cur = root;
	for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok && cur;
	     tok = strtok_r(NULL, ".", &save))
		cur = json_is_object(cur) ? json_object_get(cur, tok) : NULL;
	return cur;
}

const char *h_jstr(json_t *root, const char *path)
{
	json_t *v = h_jget(root, path);
	return json_is_string(v) ? json_string_value(v) : "";
}

long long h_jint(json_t *root, const char *path)
{
	json_t *v = h_jget(root, path);
	return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* Append a line to a file with one write (O_APPEND: safe from threads and children). */
static void append_line(const char *path, const char *line)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	char *l = h_fmt("%s\n", line);
	ssize_t w = write(fd, l, strlen(l));
	(void)w;
	free(l);
	close(fd);
}

/* ------------------------------------------------------------------------------------ */
/* processes                                                                             */

uint64_t h_proc_starttime(pid_t pid, char *state)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm may contain spaces and parentheses: fields start after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	if (state)
		*state = p[2];
	unsigned long long start = 0;
	/* field 3 is state; starttime is field 22 */
	if (sscanf(p + 2,
		   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
		   "%*d %*d %llu",
		   &start) != 1)
		return 0;
	return start;
}

bool h_pid_alive(pid_t pid)
{
	char state = 0;
	if (pid <= 0)
		return false;
	/* Reap it if it is our child; a zombie counts as dead. */
	waitpid(pid, NULL, WNOHANG);
	return h_proc_starttime(pid, &state) != 0 && state != 'Z' && state != 'X';
}

static bool wait_gone(pid_t pid, int timeout_ms)
{
	int64_t end = now_ms() + timeout_ms;
	while (h_pid_alive(pid)) {
		if (now_ms() > end)
			return false;
		h_sleep_ms(10);
	}
	return true;
}

/* Read everything from two pipes until EOF, with a deadline. */
static void drain2(int fds[2], char **bufs, size_t *lens, int64_t deadline)
{
	size_t caps[2] = {0, 0};
	int open_n = 2;
	while (open_n > 0) {
		struct pollfd pfd[2];
		for (int i = 0; i < 2; i++) {
			pfd[i].fd = fds[i];
			pfd[i].events = POLLIN;
		}
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return;
		int r = poll(pfd, 2, (int)(left > 1000 ? 1000 : left));
		if (r < 0 && errno == EINTR)
			continue;
		for (int i = 0; i < 2; i++) {
			if (fds[i] < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (lens[i] + 65536 + 1 > caps[i]) {
				caps[i] = (lens[i] + 65536 + 1) * 2;
				bufs[i] = realloc(bufs[i], caps[i]);
				if (!bufs[i])
					abort();
				/* terminated even when the first read is the end */
				bufs[i][lens[i]] = '\0';
			}
			ssize_t n = read(fds[i], bufs[i] + lens[i], 65536);
			if (n > 0) {
				lens[i] += n;
				bufs[i][lens[i]] = '\0';
			} else if (n == 0 || errno != EINTR) {
				close(fds[i]);
				fds[i] = -1;
				open_n--;
			}
		}
	}
}

int h_run(char *const argv[], char *const env[], int timeout_s, struct h_proc *res)
{
	memset(res, 0, sizeof(*res));
	int out[2], err[2];
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
		return res->status = -1;
	pid_t pid = fork();
	if (pid < 0)
		return res->status = -1;
	if (pid == 0) {
		setpgid(0, 0);
		int devnull = open("/dev/null", O_RDONLY);
		dup2(devnull, 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		for (size_t i = 0; env && env[i]; i++)
			putenv(env[i]);
		execv(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	int fds[2] = {out[0], err[0]};
	char *bufs[2] = {NULL, NULL};
	size_t lens[2] = {0, 0};
	int64_t deadline = now_ms() + (int64_t)timeout_s * 1000;
	drain2(fds, bufs, lens, deadline);
	int status = 0;
	bool timed_out = false;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			break;
		if (now_ms() > deadline && !timed_out) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			timed_out = true;
		}
		h_sleep_ms(10);
	}
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	res->out = bufs[0] ? bufs[0] : strdup("");
	res->err = bufs[1] ? bufs[1] : strdup("");
	res->out_len = lens[0];
	res->err_len = lens[1];
	if (timed_out)
		res->status = -1;
	else if (WIFEXITED(status))
		res->status = WEXITSTATUS(status);
	else
		res->status = 128 + WTERMSIG(status);
	return res->status;
}

void h_proc_free(struct h_proc *res)
{
	free(res->out);
	free(res->err);
	res->out = res->err = NULL;
}

#define CLI_MAX_ARGS 32

int h_cell(struct h_proc *res, ...)
{
	va_list ap;
	va_start(ap, res);
	int status = h_cell_v(res, 120, ap);
	va_end(ap);
	return status;
}

int h_cell_v(struct h_proc *res, int timeout_s, va_list ap)
{
	char *argv[CLI_MAX_ARGS];
	int n = 0;
	argv[n++] = h_fmt("%s/cell", H.bin);
	argv[n++] = "--socket";
	argv[n++] = H.socket;
	const char *a;
	while ((a = va_arg(ap, const char *)) && n < CLI_MAX_ARGS - 1)
		argv[n++] = (char *)a;
	argv[n] = NULL;
	h_run(argv, NULL, timeout_s, res);
	free(argv[0]);
	return res->status;
}

static char pids_file[H_PATH + 16], sysctls_file[H_PATH + 16], skips_file[H_PATH + 16];

pid_t h_spawn(char *const argv[])
{
	return h_spawn_log(argv, NULL);
}

pid_t h_spawn_log(char *const argv[], const char *log)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setsid();
		int devnull = open("/dev/null", O_RDWR);
		int out =
		    log ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : devnull;
		dup2(devnull, 0);
		dup2(out < 0 ? devnull : out, 1);
		dup2(out < 0 ? devnull : out, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	char line[32];
	snprintf(line, sizeof(line), "%d %llu", (int)pid,
		 (unsigned long long)h_proc_starttime(pid, NULL));
	append_line(pids_file, line);
	return pid;
}

/* ------------------------------------------------------------------------------------ */
/* HTTP                                                                                   */

struct body_buf {
	char *data;
	size_t len, cap;
};

static void buf_append(struct body_buf *b, const void *data, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		b->data = realloc(b->data, cap);
		if (!b->data)
			abort();
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, n);
	b->len += n;
	b->data[b->len] = '\0';
}

/* A free port for w's TCP listener, and the URL its TCP client sends to. Its clients hold
 * a pointer to w->url (in the memory the runner shares with the tests), so every request
 * made after this, from any process, goes to the new port. */
static void world_new_port(struct h_world *w)
{
	snprintf(w->listen, sizeof(w->listen), "127.0.0.1:%u", h_free_port());
	snprintf(w->url, sizeof(w->url), "http://%s", w->listen);
}

/* The world's endpoints (see struct h_world), once its socket, port and key are set. */
static void world_clients(struct h_world *w)
{
	cell_client_init(&w->unix_client, w->socket);
	/* Never a proxy (the environment may name one): everything stays on loopback. */
	w->unix_client.no_proxy = true;
	cell_client_init(&w->tcp_client, NULL);
	w->tcp_client.no_proxy = true;
	w->url[0] = '\0';
	if (w->listen[0]) {
		snprintf(w->url, sizeof(w->url), "http://%s", w->listen);
		w->tcp_client.url = w->url;
	}
	w->tcp_client.api_key = w->key;
}

/* A client of its own for one request to w over via (release with cell_client_close). */
static struct cell_client world_client(const struct h_world *w, enum h_via via, long timeout_s)
{
	struct cell_client c = via == H_UNIX ? w->unix_client : w->tcp_client;
	if (via == H_TCP_NOKEY)
		c.api_key = NULL;
	else if (via == H_TCP_BADKEY)
		c.api_key = "not-the-key";
	c.timeout_s = timeout_s;
	return c;
}

/* Move the library's answer (rc: its result) into resp; returns the status. */
static long resp_take(struct h_resp *resp, int rc, struct cell_client_resp *cr)
{
	resp->status = cr->status;
	resp->curl_code = rc < 0 && !cr->status ? -rc : 0;
	resp->request_id = cell_client_resp_header(cr, "X-Request-ID");
	resp->content_type = cell_client_resp_header(cr, "Content-Type");
	resp->len = cr->body.len;
	resp->body = cr->body.data ? cr->body.data : strdup("");
	if (!resp->body)
		abort();
	cr->body = (struct cell_client_buf){0};
	resp->json = resp->len ? json_loadb(resp->body, resp->len, JSON_ALLOW_NUL, NULL) : NULL;
	cell_client_resp_free(cr);
	return resp->status;
}

long h_world_request(struct h_world *w, const struct h_req *req, struct h_resp *resp)
{
	struct h_resp local;
	struct h_resp *r = resp ? resp : &local;
	memset(r, 0, sizeof(*r));
	struct cell_client c = world_client(w, req->via, 120);
	struct cell_client_req creq = {
	    .method = req->method,
	    .path = req->path,
	    .body = req->body,
	    .body_len = req->body_len,
	    .content_type = req->content_type,
	    .headers = req->headers,
	    .chunked = req->chunked,
	    .max_body = SIZE_MAX, /* a test reads whatever celld sends */
	};
	struct cell_client_resp cr;
	struct cell_error err = {0};
	int rc = cell_client_request(&c, &creq, &cr, &err);
	cell_client_close(&c);
	long status = resp_take(r, rc, &cr);
	if (!resp)
		h_resp_free(r);
	return status;
}

long h_request(const struct h_req *req, struct h_resp *resp)
{
	return h_world_request(&H, req, resp);
}

long h_world_http(struct h_world *w, const char *method, const char *path, const char *json_body,
		  struct h_resp *resp)
{
	struct h_req req = {.method = method, .path = path, .body = json_body};
	return h_world_request(w, &req, resp);
}

double h_metric(const char *text, const char *series)
{
	char *want = h_fmt("\n%s ", series);
	const char *at = strstr(text, want);
	double v = at ? strtod(at + strlen(want), NULL) : -1;
	free(want);
	return v;
}

double h_world_metric(struct h_world *w, const char *series)
{
	struct h_resp r;
	ck_assert_int_eq(h_world_http(w, "GET", "/metrics", NULL, &r), 200);
	double v = h_metric(r.body, series);
	h_resp_free(&r);
	return v;
}

long h_http(const char *method, const char *path, const char *json_body, struct h_resp *resp)
{
	return h_world_http(&H, method, path, json_body, resp);
}

void h_resp_free(struct h_resp *resp)
{
	free(resp->body);
	free(resp->request_id);
	free(resp->content_type);
	json_decref(resp->json);
	memset(resp, 0, sizeof(*resp));
}

const char *h_err_code(const struct h_resp *resp)
{
	return h_jstr(resp->json, "code");
}

const char *h_world_log_tail(const struct h_world *w)
{
	static char tail[4096];
	tail[0] = '\0';
	int fd = open(w->log, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tail;
	off_t size = lseek(fd, 0, SEEK_END);
	off_t from = size > (off_t)sizeof(tail) - 1 ? size - (off_t)sizeof(tail) + 1 : 0;
	ssize_t n = pread(fd, tail, sizeof(tail) - 1, from);
	close(fd);
	tail[n > 0 ? n : 0] = '\0';
	return tail;
}

const char *h_celld_log_tail(void)
{
	return h_world_log_tail(&H);
}

/* ------------------------------------------------------------------------------------ */
/* sandboxes                                                                              */

void h_world_track_sandbox(struct h_world *w, const char *id)
{
	append_line(w->created, id);
}

void h_track_sandbox(const char *id)
{
	h_world_track_sandbox(&H, id);
}

long h_world_create_ex(struct h_world *w, const char *image, json_t *extra, enum h_via via,
		       struct h_resp *resp)
{
	json_t *body = json_pack("{s:{s:s}}", "image", "uri", image);
	if (extra)
		json_object_update(body, extra);
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	struct h_req req = {.method = "POST", .path = "/v1/sandboxes", .body = text, .via = via};
	long status = h_world_request(w, &req, resp);
	free(text);
	const char *id = h_jstr(resp->json, "id");
	if (status >= 200 && status < 300 && *id)
		h_world_track_sandbox(w, id);
	return status;
}

long h_create_ex(const char *image, json_t *extra, enum h_via via, struct h_resp *resp)
{
	return h_world_create_ex(&H, image, extra, via, resp);
}

char *h_world_create(struct h_world *w, const char *image, json_t *extra)
{
	struct h_resp resp;
	long status = h_world_create_ex(w, image, extra, H_UNIX, &resp);
	ck_assert_msg(status == 202 || status == 200,
		      "create %s: HTTP %ld (curl %d): %s\n--- celld log tail (%s):\n%s", image,
		      status, resp.curl_code, resp.body, w->dir, h_world_log_tail(w));
	const char *id = h_jstr(resp.json, "id");
	ck_assert_msg(*id, "create answered without an id: %s", resp.body);
	ck_assert_str_eq(h_jstr(resp.json, "status.state"), "Running");
	char *out = strdup(id);
	h_resp_free(&resp);
	return out;
}

char *h_create(const char *image, json_t *extra)
{
	return h_world_create(&H, image, extra);
}

long h_world_delete(struct h_world *w, const char *id)
{
	char *path = h_fmt("/v1/sandboxes/%s", id);
	long status = h_world_http(w, "DELETE", path, NULL, NULL);
	free(path);
	return status;
}

long h_delete(const char *id)
{
	return h_world_delete(&H, id);
}

int h_world_sandbox_count(struct h_world *w)
{
	struct h_resp r;
	ck_assert_int_eq(h_world_http(w, "GET", "/v1/sandboxes?pageSize=1000", NULL, &r), 200);
	int n = (int)json_array_size(json_object_get(r.json, "items"));
	h_resp_free(&r);
	return n;
}

int h_sandbox_count(void)
{
	return h_world_sandbox_count(&H);
}

json_t *h_world_inspect(struct h_world *w, const char *id)
{
	char *path = h_fmt("/v1/sandboxes/%s/inspect", id);
	struct h_resp resp;
	long status = h_world_http(w, "GET", path, NULL, &resp);
	free(path);
	ck_assert_msg(status == 200 && resp.json, "inspect %s: HTTP %ld: %s", id, status,
		      resp.body);
	json_t *j = json_incref(resp.json);
	h_resp_free(&resp);
	return j;
}

json_t *h_inspect(const char *id)
{
	return h_world_inspect(&H, id);
}

const char *h_world_wait_state(struct h_world *w, const char *id, const char *state, int timeout_s)
{
	static char last[64];
	char *path = h_fmt("/v1/sandboxes/%s", id);
	int64_t end = now_ms() + (int64_t)timeout_s * 1000;
	for (;;) {
		struct h_resp resp;
		long status = h_world_http(w, "GET", path, NULL, &resp);
		if (status == 200)
			snprintf(last, sizeof(last), "%s", h_jstr(resp.json, "status.state"));
		else
			snprintf(last, sizeof(last), "HTTP %ld", status);
		h_resp_free(&resp);
		if (!strcmp(last, state) || now_ms() > end)
			break;
		h_sleep_ms(100);
	}
	free(path);
	return last;
}

const char *h_wait_state(const char *id, const char *state, int timeout_s)
{
	return h_world_wait_state(&H, id, state, timeout_s);
}

/* ------------------------------------------------------------------------------------ */
/* exec: the SSE stream                                                                   */

struct exec_read {
	struct h_exec *res;
	const struct h_exec_opts *opts;
	struct body_buf out, err;
	EVP_MD_CTX *md;
};

/* Output event text into out/err (or the hash of stdout); false when it is malformed. */
static bool exec_output(struct exec_read *x, json_t *ev, bool is_out)
{
	json_t *t = json_object_get(ev, "text");
	const char *enc = h_jstr(ev, "encoding");
	const char *data = json_string_value(t);
	size_t dlen = json_string_length(t);
	uint8_t *dec = NULL;
	bool ok = true;
	if (!json_is_string(t)) {
		ok = false;
		data = "";
		dlen = 0;
	} else if (!strcmp(enc, "base64")) {
		if (cell_base64_decode(data, dlen, &dec, &dlen) < 0) {
			ok = false;
			dlen = 0;
		}
		data = (const char *)dec;
	} else if (*enc) {
		ok = false;
	}
	if (is_out && x->opts->hash_stdout) {
		EVP_DigestUpdate(x->md, data, dlen);
		x->res->out_hashed += dlen;
	} else {
		buf_append(is_out ? &x->out : &x->err, data ? data : "", data ? dlen : 0);
	}
	free(dec);
	return ok;
}

static void exec_end_error(struct h_exec *res, json_t *ev)
{
	res->errored = true;
	json_decref(res->error);
	res->error = json_incref(json_object_get(ev, "error"));
	json_t *ev_val = h_jget(ev, "error.evalue");
	if (json_is_string(ev_val)) {
		char *e;
		long v = strtol(json_string_value(ev_val), &e, 10);
		res->exit_code = *e ? -2 : (int)v;
	} else {
		res->exit_code = -2;
		res->bad_events++;
	}
}

/* One event from the library's framer. Malformed ones are counted, never fatal: a test
 * asserts how many there were. */
static int exec_event(void *ctx, const char *text, size_t len)
{
	struct exec_read *x = ctx;
	struct h_exec *res = x->res;
	json_t *ev = json_loadb(text, len, 0, NULL);
	const char *type = json_is_object(ev) ? h_jstr(ev, "type") : "";
	if (!*type) {
		res->bad_events++;
		json_decref(ev);
		return 0;
	}
	bool keep = true;
	if (!strcmp(type, "init")) {
		free(res->cmd_id);
		res->cmd_id = strdup(h_jstr(ev, "text"));
		if (x->opts->on_init)
			x->opts->on_init(res->cmd_id, x->opts->on_init_arg);
	} else if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
		bool is_out = type[3] == 'o';
		if (!exec_output(x, ev, is_out))
			res->bad_events++;
		keep = !(is_out && x->opts->hash_stdout);
	} else if (!strcmp(type, "execution_complete")) {
		res->complete = true;
		res->exit_code = 0;
	} else if (!strcmp(type, "error")) {
		exec_end_error(res, ev);
	}
	if (keep)
		json_array_append(res->events, ev);
	json_decref(ev);
	return 0;
}

static char *exec_body(const char *cmd, const struct h_exec_opts *opts)
{
	json_t *body = json_object();
	if (cmd)
		json_object_set_new(body, "command", json_string(cmd));
	if (opts->argv) {
		json_t *a = json_array();
		for (size_t i = 0; opts->argv[i]; i++)
			json_array_append_new(a, json_string(opts->argv[i]));
		json_object_set_new(body, "argv", a);
	}
	if (opts->cwd)
		json_object_set_new(body, "cwd", json_string(opts->cwd));
	if (opts->timeout_ms)
		json_object_set_new(body, "timeout", json_integer(opts->timeout_ms));
	if (opts->as_user) {
		json_object_set_new(body, "uid", json_integer(opts->uid));
		if (opts->gid >= 0)
			json_object_set_new(body, "gid", json_integer(opts->gid));
	}
	if (opts->background)
		json_object_set_new(body, "background", json_true());
	if (!opts->lines)
		json_object_set_new(body, "rawOutput", json_true());
	if (opts->envs) {
		json_t *e = json_object();
		for (size_t i = 0; opts->envs[i] && opts->envs[i + 1]; i += 2)
			json_object_set_new(e, opts->envs[i], json_string(opts->envs[i + 1]));
		json_object_set_new(body, "envs", e);
	}
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	return text;
}

/* The decoded output into res; the hash of stdout when it was hashed. */
static void exec_finish(struct exec_read *x)
{
	struct h_exec *res = x->res;
	if (!x->out.data)
		buf_append(&x->out, "", 0);
	if (!x->err.data)
		buf_append(&x->err, "", 0);
	res->out = x->out.data;
	res->out_len = x->out.len;
	res->err = x->err.data;
	res->err_len = x->err.len;
	if (x->md) {
		unsigned char md[32];
		unsigned int mdlen = 0;
		EVP_DigestFinal_ex(x->md, md, &mdlen);
		EVP_MD_CTX_free(x->md);
		for (unsigned int i = 0; i < mdlen; i++)
			sprintf(res->out_sha256 + 2 * i, "%02x", md[i]);
	}
}

int h_world_exec(struct h_world *w, const char *id, const char *cmd, const struct h_exec_opts *opts,
		 struct h_exec *res)
{
	static const struct h_exec_opts none;
	static const char *const accept[] = {"Accept: text/event-stream", NULL};
	if (!opts)
		opts = &none;
	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	res->events = json_array();
	struct exec_read x = {.res = res, .opts = opts};
	if (opts->hash_stdout) {
		x.md = EVP_MD_CTX_new();
		EVP_DigestInit_ex(x.md, EVP_sha256(), NULL);
	}
	char *text = exec_body(cmd, opts);
	char *path = opts->session ? h_fmt(EXECD_PREFIX "/session/%s/run", id, opts->session)
				   : h_fmt(EXECD_PREFIX "/command", id);
	struct cell_client_buf other = {0};
	struct cell_client_req req = {.method = "POST",
				      .path = path,
				      .body = text,
				      .content_type = "application/json",
				      .headers = accept,
				      .error_body = &other};
	struct cell_client c =
	    world_client(w, opts->via, opts->max_seconds ? opts->max_seconds : 300);
	struct cell_error err = {0};
	int r = cell_client_stream(&c, &req, exec_event, &x, "exec", &res->status, &err);
	cell_client_close(&c);
	free(path);
	free(text);
	/* A 200 stream that broke off (or held an event too large) is a bad event; any other
	 * answer is the body's to explain. */
	bool answered = res->status && (r == 0 || res->status != 200);
	if (r < 0 && res->status == 200)
		res->bad_events++;
	if (other.data)
		res->body = json_loadb(other.data, other.len, 0, NULL);
	cell_client_buf_free(&other);
	exec_finish(&x);
	return answered ? 0 : -EIO;
}

/* ---- bash sessions ---- */

/* POST .../session with body; the session id (malloc'd), asserting 200 and the shell. */
char *h_session_open(const char *id, const char *body, const char *shell)
{
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/session", id);
	struct h_resp resp;
	long st = h_http("POST", path, body, &resp);
	ck_assert_msg(st == 200, "session: HTTP %ld %s", st, resp.body);
	ck_assert_str_eq(h_jstr(resp.json, "shell"), shell);
	char *sid = strdup(h_jstr(resp.json, "session_id"));
	h_resp_free(&resp);
	free(path);
	return sid;
}

/* One run in session sid (execd's line events); asserts an answer came. */
void h_session_run(const char *id, const char *sid, const char *cmd, long timeout_ms,
		   struct h_exec *r)
{
	struct h_exec_opts o = {
	    .session = sid, .lines = true, .timeout_ms = timeout_ms, .max_seconds = 60};
	ck_assert_int_eq(h_exec(id, cmd, &o, r), 0);
}

/* The stdout events of r, each line ended by a newline again (malloc'd). */
char *h_out_lines(const struct h_exec *r)
{
	char *out = strdup("");
	size_t i;
	json_t *ev;
	json_array_foreach(r->events, i, ev)
	{
		if (strcmp(h_jstr(ev, "type"), "stdout"))
			continue;
		char *more = h_fmt("%s%s\n", out, h_jstr(ev, "text"));
		free(out);
		out = more;
	}
	return out;
}

/* srun that must complete; its stdout (malloc'd). */
char *h_session_ok(const char *id, const char *sid, const char *cmd)
{
	struct h_exec r;
	h_session_run(id, sid, cmd, 0, &r);
	ck_assert_msg(r.status == 200 && r.complete, "%s: HTTP %ld exit %d err %s", cmd, r.status,
		      r.exit_code, r.err);
	char *out = h_out_lines(&r);
	h_exec_free(&r);
	return out;
}

long h_session_delete(const char *id, const char *sid)
{
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/session/%s", id, sid);
	long st = h_http("DELETE", path, NULL, NULL);
	free(path);
	return st;
}

void h_exec_free(struct h_exec *res)
{
	free(res->out);
	free(res->err);
	free(res->cmd_id);
	json_decref(res->error);
	json_decref(res->events);
	json_decref(res->body);
	memset(res, 0, sizeof(*res));
}

int h_exec(const char *id, const char *cmd, const struct h_exec_opts *opts, struct h_exec *res)
{
	return h_world_exec(&H, id, cmd, opts, res);
}

char *h_world_sh(struct h_world *w, const char *id, const char *cmd)
{
	struct h_exec r;
	h_world_exec(w, id, cmd, NULL, &r);
	ck_assert_msg(r.status == 200 && r.complete && r.exit_code == 0 && !r.bad_events,
		      "`%s` in %s: HTTP %ld, exit %d, complete %d, bad events %d\nstdout: %s\n"
		      "stderr: %s",
		      cmd, id, r.status, r.exit_code, r.complete, r.bad_events, r.out, r.err);
	char *out = r.out;
	r.out = NULL;
	h_exec_free(&r);
	return out;
}

char *h_sh(const char *id, const char *cmd)
{
	return h_world_sh(&H, id, cmd);
}

int h_world_sh_code(struct h_world *w, const char *id, const char *cmd)
{
	struct h_exec r;
	h_world_exec(w, id, cmd, NULL, &r);
	int code = r.status == 200 ? r.exit_code : -1;
	h_exec_free(&r);
	return code;
}

int h_sh_code(const char *id, const char *cmd)
{
	return h_world_sh_code(&H, id, cmd);
}

/* ------------------------------------------------------------------------------------ */
/* files                                                                                  */

long h_upload(const char *id, const char *path, const void *data, size_t len, int mode,
	      struct h_resp *resp)
{
	return h_world_upload(&H, id, path, data, len, mode, resp);
}

long h_world_upload(struct h_world *w, const char *id, const char *path, const void *data,
		    size_t len, int mode, struct h_resp *resp)
{
	memset(resp, 0, sizeof(*resp));
	const char *slash = strrchr(path, '/');
	struct cell_client_resp cr;
	struct cell_client_upload up = {.id = id,
					.dest = path,
					.mode = mode,
					.fd = -1,
					.data = data,
					.len = len,
					.filename = slash ? slash + 1 : path,
					.answer = &cr};
	struct cell_client c = world_client(w, H_UNIX, 300);
	struct cell_error err = {0};
	int rc = cell_client_upload(&c, &up, &err);
	cell_client_close(&c);
	return resp_take(resp, rc, &cr);
}

json_t *h_command_wait(const char *id, const char *cmd_id, int timeout_s)
{
	char *path = h_fmt(EXECD_PREFIX "/command/status/%s", id, cmd_id);
	json_t *status = NULL;
	for (int64_t end = now_ms() + timeout_s * 1000LL;;) {
		struct h_resp r;
		h_http("GET", path, NULL, &r);
		json_decref(status);
		status = json_incref(r.json);
		h_resp_free(&r);
		if (json_is_false(json_object_get(status, "running")) || now_ms() >= end)
			break;
		h_sleep_ms(100);
	}
	free(path);
	return status;
}

void h_upload_helper(const char *id, const char *name)
{
	h_world_upload_helper(&H, id, name);
}

void h_world_upload_helper(struct h_world *w, const char *id, const char *name)
{
	char *path = h_fmt("%s/tests/integration/%s", H.bin, name);
	char *data = NULL;
	size_t len = 0;
	ck_assert_msg(cell_read_file_at(AT_FDCWD, path, 64u << 20, &data, &len, NULL) == 0 && len,
		      "%s is missing (make integration-build builds it)", path);
	char *dest = h_fmt("/root/%s", name);
	struct h_resp r;
	long st = h_world_upload(w, id, dest, data, len, 0755, &r);
	ck_assert_msg(st == 200, "upload of %s: HTTP %ld %.200s", name, st, r.body ? r.body : "");
	h_resp_free(&r);
	free(dest);
	free(data);
	free(path);
}

json_t *h_sh_pairs(const char *id, const char *cmd)
{
	char *out = h_sh(id, cmd);
	json_t *res = json_object();
	for (char *save = NULL, *line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' ');
		ck_assert_msg(sp, "%s printed '%s', not a \"key value\" line", cmd, line);
		*sp = '\0';
		json_object_set_new(res, line, json_string(sp + 1));
	}
	free(out);
	return res;
}

static long files_get(const char *id, const char *route, const char *path, struct h_resp *resp)
{
	char *enc = h_urlencode(path);
	char *url = h_fmt(EXECD_PREFIX "/files/%s?path=%s", id, route, enc);
	long status = h_http("GET", url, NULL, resp);
	free(enc);
	free(url);
	return status;
}

long h_download(const char *id, const char *path, struct h_resp *resp)
{
	return files_get(id, "download", path, resp);
}

long h_file_info(const char *id, const char *path, struct h_resp *resp)
{
	return files_get(id, "info", path, resp);
}

/* ------------------------------------------------------------------------------------ */
/* celld                                                                                  */

bool h_world_alive(const struct h_world *w)
{
	if (!w || w->celld_pid <= 0)
		return false;
	return h_pid_alive(w->celld_pid) && h_proc_starttime(w->celld_pid, NULL) == w->celld_start;
}

bool h_celld_alive(void)
{
	return shared && h_world_alive(&H);
}

/* A registries.conf in which docker.io (where a name that is no image cell built would be
 * pulled from) is blocked: no test's celld sends a packet off this machine. A test with a
 * registry of its own passes its own --registries-conf, later on the line. */
static const char *blocked_registries(void)
{
	static const char path[] = "/tmp/cell-test-registries-blocked.conf";
	static const char text[] =
	    "# cell's tests: nothing is pulled from outside this machine\n"
	    "unqualified-search-registries = [\"docker.io\"]\n"
	    "[[registry]]\nprefix = \"docker.io\"\nlocation = \"docker.io\"\n"
	    "blocked = true\n";
	/* Plain stdio: the runner calls this outside any test too. Written whole to a temp
	 * name, then renamed, so a celld starting beside never reads half of it. */
	char tmp[sizeof(path) + 16];
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (f) {
		fputs(text, f);
		if (fclose(f) == 0)
			rename(tmp, path);
		else
			unlink(tmp);
	}
	return path;
}

pid_t h_spawn_celld_netns(char *const argv[], const char *log, int netns_fd)
{
	/* Every test's celld runs with --network-default none unless its argv says otherwise:
	 * a celld whose sandboxes have no network never touches the host's netfilter or
	 * sysctls, and only a test that runs celld in a namespace of its own asks for one. */
	bool has_default = false;
	size_t argc = 0;
	for (; argv[argc]; argc++)
		if (!strcmp(argv[argc], "--network-default") ||
		    !strncmp(argv[argc], "--network-default=", 18))
			has_default = true;
	char **full = calloc(argc + 5, sizeof(*full));
	if (!full)
		return -1;
	size_t n = 0;
	full[n++] = argv[0];
	if (!has_default) {
		full[n++] = "--network-default";
		full[n++] = "none";
	}
	full[n++] = "--registries-conf";
	full[n++] = (char *)blocked_registries();
	for (size_t i = 1; i < argc; i++)
		full[n++] = argv[i];
	full[n] = NULL;
	int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	pid_t pid = fork();
	if (pid == 0) {
		/* Own session: ^C on the terminal and Check's process-group kills reach the
		 * runner, which then stops celld in order. */
		setsid();
		int devnull = open("/dev/null", O_RDONLY);
		dup2(devnull, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		/* Only the network namespace: celld keeps the host's cgroups and mounts. */
		if (netns_fd > 0 && setns(netns_fd, CLONE_NEWNET) < 0) {
			fprintf(stderr, "harness: entering netns fd %d: %s\n", netns_fd,
				strerror(errno));
			_exit(127);
		}
		if (netns_fd == H_NETNS_FRESH && unshare(CLONE_NEWNET) < 0) {
			fprintf(stderr, "harness: a fresh netns: %s\n", strerror(errno));
			_exit(127);
		}
		/* No fd of the test runner (Check's message pipes) leaks into celld. */
		close_range(3, ~0u, 0);
		execv(full[0], full);
		fprintf(stderr, "harness: exec %s: %s\n", full[0], strerror(errno));
		_exit(127);
	}
	int e = errno;
	if (logfd >= 0)
		close(logfd);
	free(full);
	errno = e;
	return pid;
}

pid_t h_spawn_celld(char *const argv[], const char *log)
{
	return h_spawn_celld_netns(argv, log, -1);
}

/* Start w's celld with its flags; 0, or -1 with why filled. */
static int celld_exec(struct h_world *w, char *why, size_t why_len)
{
	char *celld = h_fmt("%s/celld", w->bin);
	char *init = h_fmt("%s/cell-init", w->bin);
	char *policies = h_fmt("%s/policies", w->src);
	char *argv[16 + H_EXTRA_FLAGS_MAX + 1];
	size_t n = 0;
	char *const base[] = {celld,	 "--state-dir", w->state,  "--images",
			      w->images, "--socket",	w->socket, "--init",
			      init,	 "--policies",	policies};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(base); i++)
		argv[n++] = base[i];
	if (w->tcp) {
		argv[n++] = "--listen";
		argv[n++] = w->listen;
		argv[n++] = "--api-key-file";
		argv[n++] = w->key_file;
	} else {
		argv[n++] = "--no-tcp";
	}
	/* Sandboxes of the suites have no network unless a world asks for one (its extra
	 * flags come later and win): no suite touches the host's network. */
	argv[n++] = "--network-default";
	argv[n++] = "none";
	for (int i = 0; i < w->n_extra; i++)
		argv[n++] = w->extra[i];
	argv[n] = NULL;
	/* The test that gave the namespace's fd may start celld in it; anyone else (the
	 * runner restarting it to clean up after the test ended) starts it in a fresh empty
	 * namespace: the fd number means nothing there, and the host's network is never the
	 * place for a celld a test meant to keep inside a lab. */
	int netns = -1;
	if (w->netns_fd > 0)
		netns = w->netns_owner == getpid() ? w->netns_fd : H_NETNS_FRESH;
	pid_t pid = h_spawn_celld_netns(argv, w->log, netns);
	int e = errno;
	free(celld);
	free(init);
	free(policies);
	if (pid < 0) {
		snprintf(why, why_len, "fork: %s", strerror(e));
		return -1;
	}
	w->celld_pid = pid;
	w->celld_start = 0;
	for (int i = 0; i < 100 && !w->celld_start; i++) {
		w->celld_start = h_proc_starttime(pid, NULL);
		if (!w->celld_start)
			h_sleep_ms(1);
	}
	return 0;
}

static off_t log_size(const struct h_world *w)
{
	struct stat st;
	return stat(w->log, &st) == 0 ? st.st_size : 0;
}

/* Whether w's log holds needle past offset from. */
static bool logged_since(const struct h_world *w, off_t from, const char *needle)
{
	int fd = open(w->log, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct body_buf b = {0};
	char chunk[8192];
	ssize_t n;
	while ((n = pread(fd, chunk, sizeof(chunk), from)) > 0) {
		buf_append(&b, chunk, (size_t)n);
		from += n;
	}
	close(fd);
	bool hit = b.data && strstr(b.data, needle);
	free(b.data);
	return hit;
}

/* What this start of w's celld said of its port in its log (from offset from): its own
 * listener's line (a world without TCP has none to wait for), its refusal of a port taken
 * since it was picked, or nothing yet. */
enum port_news { PORT_NOTHING_YET, PORT_LISTENING, PORT_TAKEN };

static enum port_news port_news(const struct h_world *w, off_t from)
{
	if (!w->tcp)
		return PORT_LISTENING;
	char *ok = h_fmt("listening on tcp:%s (", w->listen);
	char *taken = h_fmt("listening on %s: %s", w->listen, strerror(EADDRINUSE));
	enum port_news news = logged_since(w, from, ok)	     ? PORT_LISTENING
			      : logged_since(w, from, taken) ? PORT_TAKEN
							     : PORT_NOTHING_YET;
	free(taken);
	free(ok);
	return news;
}

/* Wait until w's celld, started when its log was from bytes long, answers on its socket
 * and listens on its port. 0; -EADDRINUSE when another process took the port; -1 (why
 * filled either way). */
static int celld_wait(struct h_world *w, off_t from, char *why, size_t why_len)
{
	int64_t end = now_ms() + 60000;
	while (now_ms() < end) {
		enum port_news news = port_news(w, from);
		if (!h_pid_alive(w->celld_pid)) {
			snprintf(why, why_len, "celld of %s exited during start; log tail:\n%s",
				 w->dir, h_world_log_tail(w));
			return port_news(w, from) == PORT_TAKEN ? -EADDRINUSE : -1;
		}
		struct h_resp resp;
		long status = h_world_http(w, "GET", "/v1/info", NULL, &resp);
		h_resp_free(&resp);
		if (status > 0 && news == PORT_LISTENING)
			return 0;
		h_sleep_ms(50);
	}
	snprintf(why, why_len, "celld did not answer on %s%s%s within 60 s; log tail:\n%s",
		 w->socket, w->tcp ? " and listen on " : "", w->tcp ? w->listen : "",
		 h_world_log_tail(w));
	return -1;
}

/* Start w's celld and wait until it answers. Its TCP port is picked afresh at every start
 * (see struct h_world), and picked again when another process took it between the pick
 * and celld's bind. Returns 0, or -1 with why filled. */
static int celld_spawn(struct h_world *w, char *why, size_t why_len)
{
	int r = -EADDRINUSE;
	for (int i = 0; i < 5 && r == -EADDRINUSE; i++) {
		if (w->tcp)
			world_new_port(w);
		off_t from = log_size(w);
		r = celld_exec(w, why, why_len);
		if (r == 0)
			r = celld_wait(w, from, why, why_len);
		if (r == -EADDRINUSE)
			hlog("port %s was taken before celld of %s bound it", w->listen, w->dir);
	}
	return r == 0 ? 0 : -1;
}

bool h_world_spawn(struct h_world *w, char *why, size_t why_len)
{
	return celld_spawn(w, why, why_len) == 0;
}

void h_world_start(struct h_world *w)
{
	char why[8192];
	ck_assert_msg(celld_spawn(w, why, sizeof(why)) == 0, "%s", why);
}

void h_celld_start(void)
{
	h_world_start(&H);
}

void h_world_kill(struct h_world *w)
{
	pid_t pid = w->celld_pid;
	if (h_world_alive(w))
		kill(pid, SIGKILL);
	ck_assert_msg(wait_gone(pid, 30000), "celld %d still alive 30 s after SIGKILL", (int)pid);
}

void h_celld_kill(void)
{
	h_world_kill(&H);
}

pid_t h_world_pid(const struct h_world *w)
{
	return h_world_alive(w) ? w->celld_pid : -1;
}

static void celld_stop(struct h_world *w)
{
	pid_t pid = w->celld_pid;
	if (!h_world_alive(w))
		return;
	kill(pid, SIGTERM);
	if (!wait_gone(pid, 20000)) {
		hlog("celld %d ignored SIGTERM for 20 s; SIGKILL", (int)pid);
		kill(pid, SIGKILL);
		wait_gone(pid, 10000);
	}
}

/* ------------------------------------------------------------------------------------ */
/* leak probes                                                                            */

bool h_mountinfo_mentions(const char *needle)
{
	char *mi = h_read_file("/proc/self/mountinfo");
	bool hit = mi && strstr(mi, needle);
	free(mi);
	return hit;
}

/* Calls fn for <hierarchy>/<rel> for every cgroup hierarchy under /sys/fs/cgroup (the v2
 * root itself, each v1 controller dir, the unified mount). Stops when fn returns true. */
static bool each_cgroup_dir(const char *rel, bool (*fn)(const char *path, void *ud), void *ud)
{
	char path[H_PATH * 2];
	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s", rel);
	if (fn(path, ud))
		return true;
	DIR *d = opendir("/sys/fs/cgroup");
	if (!d)
		return false;
	struct dirent *de;
	bool hit = false;
	while (!hit && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/cgroup.procs", de->d_name);
		struct stat st;
		if (stat(path, &st) < 0) /* not a hierarchy root (or a v2 knob) */
			continue;
		snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/%s", de->d_name, rel);
		hit = fn(path, ud);
	}
	closedir(d);
	return hit;
}

struct found {
	char *where;
	size_t size;
};

static bool dir_exists_cb(const char *path, void *ud)
{
	struct found *f = ud;
	struct stat st;
	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return false;
	if (f->where)
		snprintf(f->where, f->size, "%s", path);
	return true;
}

bool h_cgroup_exists(const char *id, char *where, size_t size)
{
	char rel[128];
	snprintf(rel, sizeof(rel), "%s/%s", H.cg_instance, id);
	struct found f = {where, size};
	return each_cgroup_dir(rel, dir_exists_cb, &f);
}

/* Another celld on this host (a second instance, another test run) allocates uid slots
 * from the same space; its sandboxes' processes sit in its own cgroup instance. Those are
 * not ours; anything else in the range (in our instance, or in no cell cgroup at all,
 * i.e. escaped) is. */
static bool in_other_instance(const char *pid)
{
	char path[300];
	snprintf(path, sizeof(path), "/proc/%s/cgroup", pid);
	char *cg = h_read_file(path);
	if (!cg)
		return false;
	bool other = false;
	for (char *p = cg; (p = strstr(p, ":/cell")); p++) {
		const char *inst = p + 2;
		size_t n = strcspn(inst, "/\n");
		if (n != strlen(H.cg_instance) || strncmp(inst, H.cg_instance, n))
			other = true;
	}
	free(cg);
	return other;
}

int h_procs_in_uid_range(uint32_t base, uint32_t len, pid_t *first)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/proc/%s/status", de->d_name);
		char *st = h_read_file(path);
		/* A zombie reparented to host init (its celld was killed) is that init's to
		 * reap; one still parented by celld would count. */
		if (st && strstr(st, "\nState:\tZ") && strstr(st, "\nPPid:\t1\n")) {
			free(st);
			continue;
		}
		const char *u = st ? strstr(st, "\nUid:") : NULL;
		unsigned long ids[4];
		if (u &&
		    sscanf(u + 5, "%lu %lu %lu %lu", &ids[0], &ids[1], &ids[2], &ids[3]) == 4) {
			for (int i = 0; i < 4; i++)
				if (ids[i] >= base && ids[i] - base < len &&
				    !in_other_instance(de->d_name)) {
					if (!n && first)
						*first = atoi(de->d_name);
					n++;
					break;
				}
		}
		free(st);
	}
	closedir(d);
	return n;
}

/* ------------------------------------------------------------------------------------ */
/* skips                                                                                  */

static bool runner_forks = true;

bool h_strict(void)
{
	const char *v = getenv("CELL_TEST_STRICT");
	return v && !strcmp(v, "1");
}

/* The run's list of skips: CELL_TEST_SKIPS, else "skips" beside the ledger; NULL when
 * neither is set (a suite run by hand: its own list in T still reports them). */
static char *run_skips_file(void)
{
	const char *env = getenv("CELL_TEST_SKIPS");
	if (env && *env)
		return strdup(env);
	const char *ledger = getenv("CELL_TEST_LEDGER");
	const char *slash = ledger ? strrchr(ledger, '/') : NULL;
	if (!slash)
		return NULL;
	return h_fmt("%.*s/skips", (int)(slash - ledger), ledger);
}

/* "suite<TAB>test<TAB>kind<TAB>probe<TAB>reason": one line, no tab or newline inside. */
static void skip_record(const char *kind, const char *probe, const char *reason)
{
	char *line = h_fmt("%s\t%s\t%s\t%s\t%s", program_invocation_short_name, tcase_name(), kind,
			   probe, reason);
	int tabs = 0;
	for (char *c = line; *c; c++)
		if (*c == '\n' || (*c == '\t' && ++tabs > 4)) /* only the separators stay */
			*c = ' ';
	append_line(skips_file, line);
	char *run = run_skips_file();
	if (run)
		append_line(run, line);
	free(run);
	hlog("SKIP %s: %s (%s%s%s)", tcase_name(), reason, kind, *probe ? ", probe " : "", probe);
	free(line);
}

/* Ends the test as passed: the child exits the way Check's own child does after a test. */
static void skip_end(const char *reason) __attribute__((noreturn));

static void skip_end(const char *reason)
{
	if (!runner_forks) {
		ck_abort_msg("not run (%s); CK_FORK=no cannot end a test early as passed", reason);
		abort(); /* not reached: Check's abort leaves the test */
	}
	fflush(NULL);
	exit(EXIT_SUCCESS);
}

void h_skip_host(const char *probe, const char *fmt, ...)
{
	char *reason = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&reason, fmt, ap) < 0)
		abort();
	va_end(ap);
	skip_record("host", probe, reason);
	skip_end(reason);
}

void h_skip_host_part(const char *probe, const char *fmt, ...)
{
	char *reason = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&reason, fmt, ap) < 0)
		abort();
	va_end(ap);
	skip_record("host", probe, reason);
	free(reason);
}

void h_skip(const char *fmt, ...)
{
	char *reason = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&reason, fmt, ap) < 0)
		abort();
	va_end(ap);
	bool strict = h_strict();
	skip_record(strict ? "other-strict" : "other", "", reason);
	if (strict)
		ck_abort_msg("not run: %s; CELL_TEST_STRICT=1 allows only skips a host capability "
			     "probe decided (h_skip_host)",
			     reason);
	skip_end(reason);
}

/* At the end of the suite: what it did not run, so that no skip passes unseen. */
static void skips_report(void)
{
	char *text = h_read_file(skips_file);
	if (!text || !*text) {
		free(text);
		return;
	}
	int n = 0;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save), n++)
		hlog("skipped: %s", l);
	hlog("%d test(s) of %s skipped", n, program_invocation_short_name);
	free(text);
}

char h_kernel_config(const char *option)
{
	struct utsname u;
	char *text = NULL;
	if (uname(&u) == 0) {
		char *path = h_fmt("/boot/config-%s", u.release);
		text = h_read_file(path);
		free(path);
	}
	if (!text && access("/proc/config.gz", R_OK) == 0) {
		char *const argv[] = {"/bin/gzip", "-dc", "/proc/config.gz", NULL};
		struct h_proc p;
		if (h_run(argv, NULL, 30, &p) == 0)
			text = strdup(p.out);
		h_proc_free(&p);
	}
	if (!text)
		return 0;
	/* A config lists every option it knows: "X=y", "X=m", or "# X is not set". */
	char *set = h_fmt("\n%s=", option);
	const char *hit = strstr(text, set);
	char v = hit ? hit[strlen(set)] : 'n';
	free(set);
	free(text);
	return v;
}

/* ------------------------------------------------------------------------------------ */
/* per-test cleanup                                                                       */

static void kill_registered_pids(void)
{
	FILE *f = fopen(pids_file, "re");
	if (!f)
		return;
	int pid;
	unsigned long long start;
	while (fscanf(f, "%d %llu", &pid, &start) == 2) {
		if (pid > 0 && start && h_proc_starttime(pid, NULL) == start)
			kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	fclose(f);
	if (truncate(pids_file, 0) < 0)
		hlog("truncate %s: %s", pids_file, strerror(errno));
}

/* The host's sysctls a test changed go back to what they were: "<path> <value>" lines,
 * the first line of a path holding its value before any test touched it. */
static void restore_sysctls(void)
{
	FILE *f = fopen(sysctls_file, "re");
	if (!f)
		return;
	char path[H_PATH], value[256];
	while (fscanf(f, "%511s %255s", path, value) == 2) {
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, value, strlen(value)) != (ssize_t)strlen(value))
			hlog("restoring %s to %s: %s", path, value, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	fclose(f);
	if (unlink(sysctls_file) < 0)
		hlog("unlink %s: %s", sysctls_file, strerror(errno));
}

void h_sysctl_set(const char *path, const char *value)
{
	char *old = h_read_file(path);
	ck_assert_msg(old, "reading %s: %s", path, strerror(errno));
	char *line = h_fmt("%s %s", path, h_trim(old));
	bool known = false;
	char *recorded = h_read_file(sysctls_file);
	for (char *l = recorded ? strtok(recorded, "\n") : NULL; l; l = strtok(NULL, "\n"))
		known = known || (!strncmp(l, path, strlen(path)) && l[strlen(path)] == ' ');
	/* Recorded before the write: whatever happens next, the teardown puts it back. */
	if (!known)
		append_line(sysctls_file, line);
	free(recorded);
	free(line);
	free(old);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "opening %s: %s", path, strerror(errno));
	ck_assert_msg(write(fd, value, strlen(value)) == (ssize_t)strlen(value),
		      "writing %s to %s: %s", value, path, strerror(errno));
	close(fd);
}

static void delete_registered_sandboxes(struct h_world *w)
{
	FILE *f = fopen(w->created, "re");
	if (!f)
		return;
	char id[128];
	while (fscanf(f, "%127s", id) == 1) {
		long st = h_world_delete(w, id);
		if (st != 204 && st != 404 && st != 200)
			hlog("cleanup: DELETE %s answered %ld", id, st);
	}
	fclose(f);
	if (truncate(w->created, 0) < 0)
		hlog("truncate %s: %s", w->created, strerror(errno));
}

/* Tests may leave celld dead (on purpose or not); cleanup goes through its API. */
static void ensure_celld(struct h_world *w, const char *why_restart)
{
	if (h_world_alive(w))
		return;
	char why[8192];
	hlog("%s (%s)", why_restart, w->dir);
	if (celld_spawn(w, why, sizeof(why)) < 0)
		hlog("%s", why);
}

static void case_setup(void)
{
	ensure_celld(&H, "celld is not running before a test; starting it");
}

static int world_dial(const struct h_world *w, enum h_via via, int rcvbuf)
{
	int fd;
	if (via == H_UNIX) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		ck_assert_uint_lt(strlen(w->socket), sizeof(sa.sun_path));
		memcpy(sa.sun_path, w->socket, strlen(w->socket) + 1);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(fd, 0);
		if (rcvbuf)
			setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
		ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	} else {
		struct sockaddr_in sa = {.sin_family = AF_INET};
		ck_assert_msg(w->listen[0], "%s has no TCP listener", w->dir);
		sa.sin_port = htons((uint16_t)atoi(strrchr(w->listen, ':') + 1));
		inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(fd, 0);
		if (rcvbuf)
			setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
		ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	return fd;
}

/* Send method path (with the key on TCP, then headers, then body) on a new connection and
 * read the answer's status line: 12 bytes, "HTTP/1.1 NNN". */
static int world_send_request(const struct h_world *w, enum h_via via, int rcvbuf,
			      const char *method, const char *path, const char *headers,
			      const char *body, char line[12])
{
	int fd = world_dial(w, via, rcvbuf);
	char *key = via == H_TCP ? h_fmt("OPEN-SANDBOX-API-KEY: %s\r\n", w->key) : strdup("");
	char *len =
	    body ? h_fmt("Content-Type: application/json\r\nContent-Length: %zu\r\n", strlen(body))
		 : strdup("");
	char *req = h_fmt("%s %s HTTP/1.1\r\nHost: cell\r\n%s%s%s\r\n%s", method, path, key, len,
			  headers ? headers : "", body ? body : "");
	ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	free(req);
	free(len);
	free(key);
	ck_assert_int_eq(recv(fd, line, 12, MSG_WAITALL), 12);
	return fd;
}

static int world_open_stream(const struct h_world *w, enum h_via via, const char *path, int rcvbuf)
{
	char line[12];
	int fd = world_send_request(w, via, rcvbuf, "GET", path, NULL, NULL, line);
	ck_assert_msg(!strncmp(line, "HTTP/1.1 200", 12), "GET %s: %.12s", path, line);
	return fd;
}

int h_open_request(enum h_via via, const char *method, const char *path, const char *headers,
		   const char *body, long *status)
{
	char line[13] = {0};
	int fd = world_send_request(&H, via, 0, method, path, headers, body, line);
	ck_assert_msg(!strncmp(line, "HTTP/1.1 ", 9), "%s %s: %.12s", method, path, line);
	*status = strtol(line + 9, NULL, 10);
	/* The rest of the head, byte by byte: what follows it is the stream's. */
	char last[4] = {0};
	while (memcmp(last, "\r\n\r\n", 4)) {
		char c;
		ck_assert_msg(recv(fd, &c, 1, 0) == 1, "%s %s: the head broke off", method, path);
		memmove(last, last + 1, 3);
		last[3] = c;
	}
	return fd;
}

int h_open_stream(enum h_via via, const char *path, int rcvbuf)
{
	return world_open_stream(&H, via, path, rcvbuf);
}

const char *h_state_dir(void)
{
	return H.state;
}

pid_t h_celld_pid(void)
{
	return h_world_pid(&H);
}

long h_celld_rss_kib(void)
{
	char *path = h_fmt("/proc/%d/status", (int)h_celld_pid());
	char *text = h_read_file(path);
	free(path);
	const char *line = text ? strstr(text, "\nVmRSS:") : NULL;
	long kib = line ? strtol(line + 7, NULL, 10) : -1;
	free(text);
	return kib;
}

static void world_set_flags(struct h_world *w, const char *const *extra)
{
	w->n_extra = 0;
	for (; extra && *extra; extra++) {
		ck_assert_int_lt(w->n_extra, H_EXTRA_FLAGS_MAX);
		ck_assert_uint_lt(strlen(*extra), H_PATH);
		strcpy(w->extra[w->n_extra++], *extra);
	}
}

void h_celld_restart_with(const char *const *extra)
{
	h_celld_kill();
	world_set_flags(&H, extra);
	h_celld_start();
}

const char *const h_alice[] = {"OPEN-SANDBOX-API-KEY: " H_ALICE_KEY, NULL};
const char *const h_bob[] = {"OPEN-SANDBOX-API-KEY: " H_BOB_KEY, NULL};

void h_two_tenants_with(const char *const *more)
{
	char *file = h_fmt("%s/api-keys", H.dir);
	h_write_file(file, "# tenants\nalice " H_ALICE_KEY "\n\nbob\t" H_BOB_KEY "\n", 0600);
	const char *extra[H_EXTRA_FLAGS_MAX + 1] = {"--api-keys-file", file};
	size_t n = 2;
	for (size_t i = 0; more && more[i] && n < H_EXTRA_FLAGS_MAX; i++)
		extra[n++] = more[i];
	extra[n] = NULL;
	h_celld_restart_with(extra);
	free(file);
}

void h_two_tenants(void)
{
	h_two_tenants_with(NULL);
}

/* A policies dir: the suite's seccomp, resources and network, and this quotas file. */
char *h_policies_with_quotas(const char *name, const char *quotas)
{
	char *dir = h_fmt("%s/%s", H.dir, name);
	char *q = h_fmt("%s/quotas", dir);
	mkdir(dir, 0755);
	mkdir(q, 0755);
	static const char *const kept[] = {"seccomp", "resources", "network"};
	for (size_t i = 0; i < 3; i++) {
		char *from = h_fmt("%s/policies/%s", H.src, kept[i]);
		char *to = h_fmt("%s/%s", dir, kept[i]);
		if (access(to, F_OK) != 0)
			ck_assert_int_eq(symlink(from, to), 0);
		free(to);
		free(from);
	}
	char *file = h_fmt("%s/default.json", q);
	h_write_file(file, quotas, 0644);
	free(file);
	free(q);
	return dir;
}

/* Symlink every entry of dir src into dst (made), but skip. */
static void link_entries(const char *src, const char *dst, const char *skip)
{
	mkdir(dst, 0755);
	DIR *d = opendir(src);
	ck_assert_msg(d, "opening %s", src);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || (skip && !strcmp(e->d_name, skip)))
			continue;
		char *from = h_fmt("%s/%s", src, e->d_name), *to = h_fmt("%s/%s", dst, e->d_name);
		if (access(to, F_OK) != 0)
			ck_assert_int_eq(symlink(from, to), 0);
		free(to);
		free(from);
	}
	closedir(d);
}

char *h_policies_with(const char *name, const char *file, const char *content)
{
	const char *slash = strchr(file, '/');
	ck_assert_msg(slash && !strchr(slash + 1, '/'), "policy file %s: not sub/name", file);
	char *sub = h_fmt("%.*s", (int)(slash - file), file);
	char *dir = h_fmt("%s/%s", H.dir, name), *src = h_fmt("%s/policies", H.src);
	char *src_sub = h_fmt("%s/%s", src, sub), *dir_sub = h_fmt("%s/%s", dir, sub);
	link_entries(src, dir, sub);
	struct stat st;
	if (stat(src_sub, &st) == 0)
		link_entries(src_sub, dir_sub, slash + 1);
	else
		mkdir(dir_sub, 0755);
	char *path = h_fmt("%s/%s", dir, file);
	h_write_file(path, content, 0644);
	free(path);
	free(dir_sub);
	free(src_sub);
	free(src);
	free(sub);
	return dir;
}

long h_as(const char *const *headers, const char *method, const char *path, const char *body,
	  struct h_resp *resp)
{
	struct h_req req = {
	    .method = method, .path = path, .body = body, .via = H_TCP_NOKEY, .headers = headers};
	return h_request(&req, resp);
}

bool h_listed(const char *const *headers, const char *path, const char *needle)
{
	struct h_resp r;
	long st = headers ? h_as(headers, "GET", path, NULL, &r) : h_http("GET", path, NULL, &r);
	bool found = st == 200 && strstr(r.body, needle) != NULL;
	h_resp_free(&r);
	return found;
}

static int world_close(struct h_world *w);

static void case_teardown(void)
{
	restore_sysctls();
	kill_registered_pids();
	for (int i = 1; i < WORLDS_MAX; i++)
		if (shared->worlds[i].in_use)
			added_world_leaks += world_close(&shared->worlds[i]);
	ensure_celld(&H, "a test left celld dead; restarting it to clean up");
	delete_registered_sandboxes(&H);
	if (H.n_extra) {
		char why[8192];
		hlog("a test ran celld with extra flags; restarting the suite's celld");
		if (h_celld_alive())
			kill(H.celld_pid, SIGKILL);
		wait_gone(H.celld_pid, 30000);
		H.n_extra = 0;
		if (celld_spawn(&H, why, sizeof(why)) < 0)
			hlog("%s", why);
	}
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

TCase *h_tcase(Suite *s, const char *name, int timeout_s)
{
	TCase *tc = tcase_create(name);
	tcase_add_unchecked_fixture(tc, case_setup, case_teardown);
	tcase_set_timeout(tc, timeout_s);
	suite_add_tcase(s, tc);
	return tc;
}

/* ------------------------------------------------------------------------------------ */
/* the world                                                                              */

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "harness: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(EXIT_FAILURE);
}

static void canon(const char *in, char *out, size_t size)
{
	char buf[PATH_MAX];
	if (!realpath(in, buf))
		die("%s: %s", in, strerror(errno));
	if (snprintf(out, size, "%s", buf) >= (int)size)
		die("%s: path too long", buf);
}

unsigned h_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0)
		die("picking a free port: %s", strerror(errno));
	close(fd);
	return ntohs(a.sin_port);
}

/* A fresh random API key, in w->key and w->key_file. Returns 0 or -errno. */
static int world_key(struct h_world *w)
{
	unsigned char raw[16];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, raw, sizeof(raw)) != (ssize_t)sizeof(raw))
		return -EIO;
	close(fd);
	for (size_t i = 0; i < sizeof(raw); i++)
		sprintf(w->key + 2 * i, "%02x", raw[i]);
	fd = open(w->key_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int r = fd >= 0 && write(fd, w->key, strlen(w->key)) == (ssize_t)strlen(w->key) ? 0 : -EIO;
	if (fd >= 0)
		close(fd);
	return r;
}

/* The paths of a world in dir (canonical); state NULL: <dir>/state. */
static void world_paths(struct h_world *w, const char *state)
{
	if (state)
		snprintf(w->state, sizeof(w->state), "%s", state);
	else
		snprintf(w->state, sizeof(w->state), "%.400s/state", w->dir);
	snprintf(w->socket, sizeof(w->socket), "%.400s/cell.sock", w->dir);
	snprintf(w->key_file, sizeof(w->key_file), "%.400s/key", w->dir);
	snprintf(w->log, sizeof(w->log), "%.400s/celld.log", w->dir);
	snprintf(w->created, sizeof(w->created), "%.400s/test-sandboxes", w->dir);
	char hex[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(w->state, strlen(w->state), hex);
	snprintf(w->cg_instance, sizeof(w->cg_instance), "cell-%.8s", hex);
}

static void world_init(void)
{
	const char *tmp = getenv("CELL_TEST_TMP");
	char t[H_PATH];
	snprintf(t, sizeof(t), "%s/cell-it.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(t))
		die("mkdtemp %s: %s", t, strerror(errno));
	canon(t, H.dir, sizeof(H.dir));
	if (chmod(H.dir, 0711) < 0)
		die("chmod %s: %s", H.dir, strerror(errno));
	const char *ledger = getenv("CELL_TEST_LEDGER");
	if (ledger && *ledger)
		append_line(ledger, H.dir);

	const char *bin = getenv("CELL_TEST_BIN");
	const char *src = getenv("CELL_TEST_SRC");
	canon(bin && *bin ? bin : "build", H.bin, sizeof(H.bin));
	canon(src && *src ? src : ".", H.src, sizeof(H.src));
	world_paths(&H, NULL);
	snprintf(pids_file, sizeof(pids_file), "%.400s/test-pids", H.dir);
	snprintf(sysctls_file, sizeof(sysctls_file), "%.400s/test-sysctls", H.dir);
	snprintf(skips_file, sizeof(skips_file), "%.400s/test-skips", H.dir);
	if (world_key(&H) < 0)
		die("writing %s", H.key_file);
	H.tcp = true;
	world_new_port(&H);
	world_clients(&H);
	H.in_use = true;
}

struct h_world *h_world_add(const struct h_world_opts *opts)
{
	ck_assert_msg(opts->name && *opts->name && !strchr(opts->name, '/'), "a world's name");
	struct h_world *w = NULL;
	for (int i = 1; i < WORLDS_MAX && !w; i++)
		if (!shared->worlds[i].in_use)
			w = &shared->worlds[i];
	ck_assert_msg(w, "more than %d worlds at once", WORLDS_MAX);
	memset(w, 0, sizeof(*w));
	snprintf(w->dir, sizeof(w->dir), "%.400s/%s", H.dir, opts->name);
	ck_assert_msg(mkdir(w->dir, 0711) == 0, "mkdir %s: %s", w->dir, strerror(errno));
	/* In use from here: the teardown removes the dir whatever happens next. */
	w->in_use = true;
	snprintf(w->images, sizeof(w->images), "%s", opts->images ? opts->images : H.images);
	snprintf(w->bin, sizeof(w->bin), "%s", H.bin);
	snprintf(w->src, sizeof(w->src), "%s", H.src);
	world_paths(w, opts->state);
	ck_assert_msg(world_key(w) == 0, "writing %s", w->key_file);
	ck_assert_msg(!(opts->tcp && opts->netns_fd > 0), "a world in a netns has no TCP");
	w->netns_fd = opts->netns_fd > 0 ? opts->netns_fd : 0;
	w->netns_owner = getpid();
	w->tcp = opts->tcp;
	if (w->tcp)
		world_new_port(w);
	world_clients(w);
	world_set_flags(w, opts->flags);
	if (!opts->unstarted)
		h_world_start(w);
	return w;
}

static bool image_ready(void)
{
	char *p = h_fmt("%s/busybox/rootfs/bin/sh", H.images);
	struct stat st;
	bool ok = stat(p, &st) == 0;
	free(p);
	return ok;
}

/* The busybox image, built by rootfs/build-image; a copy of the prototype image while that
 * script does not exist yet. */
static void image_prepare(void)
{
	const char *shared_dir = getenv("CELL_TEST_IMAGES");
	char dir[H_PATH];
	if (shared_dir && *shared_dir)
		snprintf(dir, sizeof(dir), "%s", shared_dir);
	else
		snprintf(dir, sizeof(dir), "%.400s/images", H.dir);
	struct cell_error err = {0};
	if (cell_mkdir_p(dir, 0755, &err) < 0)
		die("%s", err.msg);
	canon(dir, H.images, sizeof(H.images));

	/* Several suites may share the dir: one builds, the others wait. */
	char *lockp = h_fmt("%s/.cell-test.lock", H.images);
	int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	free(lockp);
	if (lock < 0 || flock(lock, LOCK_EX) < 0)
		die("locking %s: %s", H.images, strerror(errno));
	if (!image_ready()) {
		char *script = h_fmt("%s/rootfs/build-image", H.src);
		struct h_proc p;
		if (access(script, X_OK) == 0) {
			hlog("building the busybox image into %s", H.images);
			char *const argv[] = {script, "busybox", H.images, NULL};
			h_run(argv, NULL, 600, &p);
			if (p.status != 0)
				die("%s busybox %s failed (%d):\n%s%s", script, H.images, p.status,
				    p.out, p.err);
		} else {
			hlog("%s missing: copying %s", script, PROTO_IMAGE);
			char *dst = h_fmt("%s/busybox", H.images);
			char *rootfs = h_fmt("%s/rootfs", dst);
			if (mkdir(dst, 0755) < 0 && errno != EEXIST)
				die("mkdir %s: %s", dst, strerror(errno));
			char *const argv[] = {"/bin/cp", "-a", PROTO_IMAGE, rootfs, NULL};
			h_run(argv, NULL, 120, &p);
			if (p.status != 0)
				die("cp -a %s %s: %s", PROTO_IMAGE, rootfs, p.err);
			char *manifest = h_fmt("%s/manifest.json", dst);
			FILE *f = fopen(manifest, "we");
			if (!f)
				die("%s: %s", manifest, strerror(errno));
			fprintf(f, "{\"name\":\"busybox\",\"suite\":\"\",\"mirror\":\"\","
				   "\"packages\":[\"busybox-static\"],"
				   "\"builtAt\":\"2026-01-01T00:00:00Z\",\"sizeBytes\":0}\n");
			fclose(f);
			free(manifest);
			free(rootfs);
			free(dst);
		}
		h_proc_free(&p);
		free(script);
		if (!image_ready())
			die("no busybox image in %s after building it", H.images);
	}
	close(lock);
}

/* ---- the default image (h_main_image(s, "default")) ---- */

#define DEFAULT_BUILD_TIMEOUT_S 1800 /* debootstrap + apt from a slow mirror */

/* `build-image default DIR --check`: 0 when DIR/default is current (same recipe, suite and
 * package list as rootfs/default.packages, same accounts as the recipe makes). */
static bool default_image_current(const char *script)
{
	char *const argv[] = {(char *)script, "default", H.images, "--check", NULL};
	struct h_proc p;
	h_run(argv, NULL, 60, &p);
	bool ok = p.status == 0;
	h_proc_free(&p);
	return ok;
}

/* Run the build with its output in log (a minute or more of apt; shown on failure). On
 * timeout the build gets SIGTERM first: its trap removes the partial image dir. */
static int default_image_build(const char *script, const char *log)
{
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		die("%s: %s", log, strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		setpgid(0, 0);
		int devnull = open("/dev/null", O_RDONLY);
		dup2(devnull, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		close_range(3, ~0u, 0);
		char *const argv[] = {(char *)script, "default", H.images, "--if-changed", NULL};
		execv(script, argv);
		fprintf(stderr, "exec %s: %s\n", script, strerror(errno));
		_exit(127);
	}
	close(fd);
	int status = 0;
	int64_t deadline = now_ms() + DEFAULT_BUILD_TIMEOUT_S * 1000LL;
	bool termed = false;
	while (waitpid(pid, &status, WNOHANG) != pid) {
		if (now_ms() > deadline && !termed) {
			hlog("the default image build ran %d s: stopping it",
			     DEFAULT_BUILD_TIMEOUT_S);
			kill(-pid, SIGTERM);
			termed = true;
			deadline = now_ms() + 60000;
		} else if (now_ms() > deadline) {
			kill(-pid, SIGKILL);
		}
		h_sleep_ms(200);
	}
	kill(-pid, SIGKILL); /* anything of the build's group left behind */
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The default image in CELL_TEST_DEFAULT_IMAGES (else <bin>/tests/images-cache), built
 * there by rootfs/build-image when missing or stale and otherwise reused across runs:
 * a build takes minutes. */
static void default_image_prepare(void)
{
	const char *env = getenv("CELL_TEST_DEFAULT_IMAGES");
	char dir[H_PATH];
	if (env && *env)
		snprintf(dir, sizeof(dir), "%s", env);
	else
		snprintf(dir, sizeof(dir), "%.400s/tests/images-cache", H.bin);
	struct cell_error err = {0};
	if (cell_mkdir_p(dir, 0755, &err) < 0)
		die("%s", err.msg);
	canon(dir, H.images, sizeof(H.images));
	char *script = h_fmt("%s/rootfs/build-image", H.src);
	if (default_image_current(script)) {
		hlog("reusing the default image in %s", H.images);
		free(script);
		return;
	}
	/* Concurrent suites (or runs) sharing the dir: one builds, the others wait. */
	char *lockp = h_fmt("%s/.cell-test.lock", H.images);
	int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0)
		die("locking %s: %s", lockp, strerror(errno));
	if (!default_image_current(script)) {
		char *log = h_fmt("%s/.default-build.log", H.images);
		hlog("building the default image into %s (a few minutes; log: %s)", H.images, log);
		int64_t t0 = now_ms();
		int rc = default_image_build(script, log);
		if (rc != 0) {
			char *text = h_read_file(log);
			size_t n = text ? strlen(text) : 0;
			die("%s default %s failed (%d); last lines of %s:\n%s", script, H.images,
			    rc, log, text ? text + (n > 6000 ? n - 6000 : 0) : "");
		}
		hlog("built the default image in %lld s", (long long)(now_ms() - t0) / 1000);
		free(log);
	}
	close(lock);
	free(lockp);
	if (!default_image_current(script))
		die("no current default image in %s after building it", H.images);
	free(script);
}

/* Delete every sandbox celld knows, then stop it. */
static void delete_all_sandboxes(struct h_world *w)
{
	delete_registered_sandboxes(w);
	for (int round = 0; round < 5; round++) {
		struct h_resp resp;
		long st = h_world_http(w, "GET", "/v1/sandboxes?pageSize=1000", NULL, &resp);
		json_t *items = h_jget(resp.json, "items");
		size_t n = json_array_size(items);
		if (st == 200 && n == 0) {
			h_resp_free(&resp);
			return;
		}
		for (size_t i = 0; i < n; i++) {
			const char *id = h_jstr(json_array_get(items, i), "id");
			long ds = h_world_delete(w, id);
			if (ds != 204 && ds != 404)
				hlog("final cleanup: DELETE %s answered %ld", id, ds);
		}
		h_resp_free(&resp);
		if (st != 200)
			return;
	}
}

struct kill_ctx {
	int found;
};

/* Kill what is left in one cgroup dir (and its children), then remove the dirs. */
static bool reap_cgroup_cb(const char *path, void *ud)
{
	struct kill_ctx *k = ud;
	struct stat st;
	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return false;
	k->found++;
	hlog("LEAK: cgroup %s still exists", path);
	char *find[] = {"/usr/bin/find", (char *)path, "-depth", "-type", "d", "-print", NULL};
	struct h_proc p;
	h_run(find, NULL, 30, &p);
	for (char *save = NULL, *dirp = strtok_r(p.out, "\n", &save); dirp;
	     dirp = strtok_r(NULL, "\n", &save)) {
		char *procs = h_fmt("%s/cgroup.procs", dirp);
		for (int round = 0; round < 50; round++) {
			char *text = h_read_file(procs);
			bool any = false;
			for (char *s2 = NULL, *l = text ? strtok_r(text, "\n", &s2) : NULL; l;
			     l = strtok_r(NULL, "\n", &s2)) {
				hlog("LEAK: process %s in %s", l, dirp);
				kill(atoi(l), SIGKILL);
				any = true;
			}
			free(text);
			if (!any)
				break;
			h_sleep_ms(100);
		}
		free(procs);
		if (rmdir(dirp) < 0 && errno != ENOENT)
			hlog("cannot remove %s: %s", dirp, strerror(errno));
	}
	h_proc_free(&p);
	return false;
}

static int world_state_dirs(const struct h_world *w, bool log);

/* After celld stopped: whatever of this world is still there leaked. Remove it (the host
 * must stay clean) and count it (the run must fail). */
static int world_sweep(struct h_world *w)
{
	int leaks = 0;
	/* mounts under the world's dir, newest first */
	for (int round = 0; round < 100 && h_mountinfo_mentions(w->dir); round++) {
		char *mi = h_read_file("/proc/self/mountinfo");
		char last[H_PATH * 2] = "";
		for (char *save = NULL, *l = mi ? strtok_r(mi, "\n", &save) : NULL; l;
		     l = strtok_r(NULL, "\n", &save)) {
			char mp[H_PATH * 2];
			if (sscanf(l, "%*s %*s %*s %*s %1023s", mp) == 1 &&
			    !strncmp(mp, w->dir, strlen(w->dir)))
				snprintf(last, sizeof(last), "%s", mp);
		}
		free(mi);
		if (!*last)
			break;
		hlog("LEAK: mount %s", last);
		leaks++;
		umount2(last, MNT_DETACH);
	}
	struct kill_ctx k = {0};
	each_cgroup_dir(w->cg_instance, reap_cgroup_cb, &k);
	leaks += k.found;
	leaks += world_state_dirs(w, true);
	return leaks;
}

/* The sandboxes' dirs left in w's state dir; logged as leaks when log. */
static int world_state_dirs(const struct h_world *w, bool log)
{
	int n = 0;
	char *sdir = h_fmt("%s/sandboxes", w->state);
	DIR *d = opendir(sdir);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.') {
			if (log)
				hlog("LEAK: state dir %s/%s", sdir, de->d_name);
			n++;
		}
	if (d)
		closedir(d);
	free(sdir);
	return n;
}

static void world_remove(const struct h_world *w)
{
	if (getenv("CELL_TEST_KEEP")) {
		hlog("CELL_TEST_KEEP: leaving %s", w->dir);
		return;
	}
	char parent[H_PATH];
	snprintf(parent, sizeof(parent), "%s", w->dir);
	char *slash = strrchr(parent, '/');
	*slash = '\0';
	int pfd = open(parent[0] ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct cell_error err = {0};
	if (pfd < 0 || cell_remove_tree_at(pfd, slash + 1, &err) < 0)
		hlog("removing %s: %s", w->dir, err.msg);
	if (pfd >= 0)
		close(pfd);
}

/* End a world a test added: its sandboxes go through its API (restarting a celld the test
 * left dead when it still has sandboxes), then it stops and its dir goes. Returns the
 * leaks found. */
static int world_close(struct h_world *w)
{
	if (!h_world_alive(w) && world_state_dirs(w, false))
		ensure_celld(w, "a test left an added world's celld dead with sandboxes");
	if (h_world_alive(w))
		delete_all_sandboxes(w);
	celld_stop(w);
	int leaks = world_sweep(w);
	if (leaks)
		hlog("%d leak(s) of the added world %s (see LEAK lines)", leaks, w->dir);
	world_remove(w);
	w->in_use = false;
	return leaks;
}

static int world_teardown(void)
{
	restore_sysctls();
	int leaks = 0;
	for (int i = 1; i < WORLDS_MAX; i++)
		if (shared->worlds[i].in_use)
			leaks += world_close(&shared->worlds[i]);
	ensure_celld(&H, "celld is not running at the end; starting it to clean up");
	if (h_celld_alive())
		delete_all_sandboxes(&H);
	kill_registered_pids();
	celld_stop(&H);
	leaks += world_sweep(&H);
	skips_report();
	world_remove(&H);
	return leaks;
}

/* The guardian outlives a runner killed by a signal (Check answers ^C by SIGKILLing its
 * own process group) and then does the final cleanup in its place. It learns of the end
 * from the pipe: 'D' when the runner cleaned up itself, EOF once every holder (the runner
 * and its test children) is gone. A test child in its own process group can outlive the
 * runner and hang; so once the runner is dead, the cleanup waits at most a short grace. */
static int guardian_fd = -1;

#define GUARDIAN_GRACE_MS 10000

static void guardian_start(void)
{
	int p[2];
	pid_t runner = getpid();
	int runner_fd = (int)syscall(SYS_pidfd_open, runner, 0);
	if (runner_fd < 0 || pipe2(p, O_CLOEXEC) < 0)
		die("pidfd_open/pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		setsid();
		prctl(PR_SET_NAME, "cell-it-guard");
		close(p[1]);
		struct pollfd pfd[2] = {{.fd = p[0], .events = POLLIN},
					{.fd = runner_fd, .events = POLLIN}};
		int timeout = -1;
		for (;;) {
			int n = poll(pfd, 2, timeout);
			if (n < 0 && errno == EINTR)
				continue;
			if (n == 0)
				break; /* grace over: orphaned tests must not block cleanup */
			if (pfd[0].revents) {
				char c = 0;
				if (read(p[0], &c, 1) == 1 && c == 'D')
					_exit(0);
				break;
			}
			if (pfd[1].revents) {
				pfd[1].fd = -1;
				timeout = GUARDIAN_GRACE_MS;
			}
		}
		hlog("test runner died: cleaning up %s", H.dir);
		world_teardown();
		_exit(0);
	}
	close(p[0]);
	close(runner_fd);
	guardian_fd = p[1];
}

static void guardian_done(void)
{
	ssize_t w = write(guardian_fd, "D", 1);
	(void)w;
	close(guardian_fd);
}

static int world_run(Suite *s, const char *image)
{
	if (geteuid() != 0) {
		fprintf(stderr, "integration tests start celld: run them as root\n");
		return EXIT_FAILURE;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	/* Held for the run: each request's client takes and releases libcurl's global state,
	 * which is then set up once, not once per request. */
	if (curl_global_init(CURL_GLOBAL_ALL) != CURLE_OK)
		die("curl_global_init failed");
	shared =
	    mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	h_default_world = &shared->worlds[0];
	world_init();
	guardian_start();
	if (!strcmp(image, "default"))
		default_image_prepare();
	else
		image_prepare();
	char why[8192];
	int failed;
	if (celld_spawn(&H, why, sizeof(why)) < 0) {
		hlog("%s", why);
		failed = 1;
	} else {
		SRunner *sr = srunner_create(s);
		runner_forks = srunner_fork_status(sr) != CK_NOFORK;
		srunner_run_all(sr, CK_ENV);
		failed = srunner_ntests_failed(sr);
		srunner_free(sr);
	}
	int leaks = world_teardown() + added_world_leaks;
	guardian_done();
	if (leaks)
		hlog("%d leak(s) of this suite's celld found and removed (see LEAK lines)", leaks);
	return failed || leaks ? EXIT_FAILURE : EXIT_SUCCESS;
}

int h_main(Suite *s)
{
	return world_run(s, "busybox");
}

int h_main_image(Suite *s, const char *image)
{
	if (strcmp(image, "busybox") && strcmp(image, "default")) {
		fprintf(stderr, "harness: no test image '%s' (busybox, default)\n", image);
		return EXIT_FAILURE;
	}
	return world_run(s, image);
}

/* ---- network namespaces held by children ---- */

int h_netns_enter_private(void)
{
	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	int r = fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0 ||
			(ifr.ifr_flags |= IFF_UP, ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		    ? -errno
		    : 0;
	if (fd >= 0)
		close(fd);
	return r;
}

void h_netns_hold(struct h_netns *ns)
{
	int ready[2], hold[2];
	ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(hold, O_CLOEXEC), 0);
	pid_t parent = getpid();
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		close(ready[0]);
		close(hold[1]);
		char c = unshare(CLONE_NEWNET) == 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		close(ready[1]);
		while (read(hold[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(ready[1]);
	close(hold[0]);
	char c = 0;
	ssize_t n = read(ready[0], &c, 1);
	close(ready[0]);
	ns->pid = pid;
	ns->hold = hold[1];
	ck_assert_msg(n == 1 && c == 'y', "a child could not unshare a network namespace");
	snprintf(ns->path, sizeof(ns->path), "/proc/%d/ns/net", (int)pid);
	ns->fd = open(ns->path, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(ns->fd >= 0, "open %s: %s", ns->path, strerror(errno));
}

void h_netns_release(struct h_netns *ns)
{
	if (ns->pid <= 0)
		return;
	close(ns->hold);
	if (ns->fd >= 0)
		close(ns->fd);
	kill(ns->pid, SIGKILL);
	waitpid(ns->pid, NULL, 0);
	ns->pid = 0;
	ns->fd = -1;
}
