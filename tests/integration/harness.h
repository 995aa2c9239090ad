/* Integration test harness: one real celld per test program, in a temp dir T.
 *
 *   T/state  T/cell.sock  T/key  T/celld.log  (and T/images unless the run shares one)
 *
 * h_main() builds the busybox image (once per run when CELL_TEST_IMAGES names a shared
 * dir); h_main_image(s, "default") uses the default image instead (see below). Then it starts
 * `celld --state-dir T/state --images ... --socket T/cell.sock --listen 127.0.0.1:<free port>
 * --api-key-file T/key --init <bin>/cell-init` (a port picked afresh at every start of a celld),
 * runs the suite, then deletes every sandbox, stops celld, checks that nothing under T leaked
 * and removes T.
 *
 * Tests run in forked children (Check's default). Every TCase made with h_tcase() gets a
 * teardown that runs in the parent, so it runs even when the test failed or crashed: it
 * deletes the sandboxes the test created and kills the host processes it started, and
 * restarts celld if a test left it dead. A guardian process does the final cleanup if the
 * runner itself is killed.
 *
 * Environment: CELL_TEST_BIN (dir of celld, cell, cell-init; default ./build),
 * CELL_TEST_SRC (source tree; default .), CELL_TEST_IMAGES (shared images dir),
 * CELL_TEST_LEDGER (file to which T is appended, for tools/leakcheck), CELL_TEST_TMP
 * (parent of T; default /tmp), CELL_TEST_KEEP=1 (keep T after the run, for debugging),
 * CELL_TEST_DEFAULT_IMAGES (images dir of the default image, for h_main_image(s,
 * "default"); default <bin>/tests/images-cache: the image is built there by
 * rootfs/build-image when missing or stale, a few minutes, and reused by later runs). */
#pragma once

#include <check.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cell/client.h"

#define H_PATH		  512
#define H_EXTRA_FLAGS_MAX 12

/* A world: one celld with its own dir, state dir, socket, TCP address and API key. The
 * suite's own world is H (dir T); a test may start more (h_world_add, dir T/<name>) and
 * talk to each of them at once through the h_world_* functions. Worlds live in memory
 * shared with the forked test children, so a test may kill and restart a celld and the
 * runner still knows which process to stop. A world's TCP port is picked afresh at every
 * start of its celld, never kept across one (once celld is gone, anyone may take it): read
 * listen after a restart, never before. */
struct h_world {
	char dir[H_PATH];      /* T or T/<name>, canonical */
	char state[H_PATH];    /* <dir>/state unless given */
	char images[H_PATH];   /* images dir given to celld */
	char socket[H_PATH];   /* <dir>/cell.sock */
	char key_file[H_PATH]; /* <dir>/key */
	char key[65];	       /* the TCP API key */
	bool tcp;	       /* a TCP listener too (else --no-tcp) */
	char listen[64];       /* 127.0.0.1:<port> of its running celld; "" without TCP */
	char url[80];	       /* http://<listen>; "" without TCP */
	char log[H_PATH];      /* <dir>/celld.log */
	char bin[H_PATH];      /* dir of celld, cell, cell-init */
	char src[H_PATH];      /* source tree (rootfs/build-image) */
	char cg_instance[32];  /* cgroup instance dir: "cell-<8 hex of sha256(state)>" */
	char created[H_PATH];  /* <dir>/test-sandboxes: ids to delete in the teardown */
	bool in_use;
	pid_t celld_pid;
	uint64_t celld_start; /* starttime of that pid, so a recycled pid is never signalled */
	/* Flags on top of the world's own (h_celld_restart_with, h_world_add's flags). */
	char extra[H_EXTRA_FLAGS_MAX][H_PATH];
	int n_extra;
	/* The network namespace its celld runs in (h_world_opts.netns_fd): an fd of the
	 * process netns_owner (the test that added the world), 0 for the runner's own. */
	int netns_fd;
	pid_t netns_owner;
	/* Its endpoints for the client library (include/cell/client.h): the Unix socket, and
	 * TCP with the API key. Templates, never used in place: every request goes out on a
	 * copy, its own connection, because a world lives in memory shared with forked test
	 * children and tests send from several threads, while a libcurl handle belongs to one
	 * process and thread. */
	struct cell_client unix_client, tcp_client;
};
extern struct h_world *h_default_world;
#define H (*h_default_world)

/* Run the suite inside a fresh world; returns the process exit status. */
int h_main(Suite *s);
/* Same with celld's images dir holding image ("busybox": h_main; "default": the Debian
 * image of rootfs/default.packages, from CELL_TEST_DEFAULT_IMAGES, which is then the only
 * image of that world). */
int h_main_image(Suite *s, const char *image);
/* A TCase with the harness's per-test cleanup and a generous hang guard (seconds). */
TCase *h_tcase(Suite *s, const char *name, int timeout_s);

/* ---- HTTP ---- */

enum h_via {
	H_UNIX,	      /* celld's Unix socket (trusted, no key) */
	H_TCP,	      /* 127.0.0.1:<port> with the API key header */
	H_TCP_NOKEY,  /* TCP without the header */
	H_TCP_BADKEY, /* TCP with a wrong key */
};

struct h_req {
	const char *method;
	const char *path;	  /* sent as is (no normalisation of "..") */
	const void *body;	  /* NULL: no body */
	size_t body_len;	  /* 0 with a body: strlen(body) */
	const char *content_type; /* default application/json when there is a body */
	enum h_via via;
	bool chunked;		    /* send the body with chunked transfer encoding */
	const char *const *headers; /* extra "Name: value" lines, NULL-terminated */
};

struct h_resp {
	long status;   /* 0 when no HTTP response arrived */
	int curl_code; /* 0 when one did, else the errno of why not (kept name) */
	char *body;    /* NUL-terminated */
	size_t len;
	json_t *json; /* parsed body when it is JSON */
	char *request_id;
	char *content_type;
};

long h_request(const struct h_req *req, struct h_resp *resp);
/* A GET (via H_UNIX or H_TCP, with the key) whose answer the caller leaves unread after
 * its status line, which must be 200: the rest waits in celld (a streamed answer stays
 * open). rcvbuf > 0 shrinks the socket's receive buffer first. Returns the connection. */
int h_open_stream(enum h_via via, const char *path, int rcvbuf);
/* Any request on a new connection, held open: method path with extra headers ("Name:
 * value\r\n" lines, may be NULL) and a JSON body (may be NULL). Reads the answer's head,
 * its status into *status, and returns the connection (what follows is the answer's body,
 * or after a 101 the upgraded stream). */
int h_open_request(enum h_via via, const char *method, const char *path, const char *headers,
		   const char *body, long *status);
/* Shorthand over the Unix socket; json_body may be NULL. resp may be NULL. */
long h_http(const char *method, const char *path, const char *json_body, struct h_resp *resp);
void h_resp_free(struct h_resp *resp);
/* "code" of an error body, or "" */
const char *h_err_code(const struct h_resp *resp);

/* ---- sandboxes ---- */

/* POST /v1/sandboxes {"image":{"uri":image}} merged with extra (not stolen, may be NULL).
 * Every 2xx result is registered for cleanup. Returns the status. */
long h_create_ex(const char *image, json_t *extra, enum h_via via, struct h_resp *resp);
/* Same, asserting 202/200; returns the malloc'd id. */
char *h_create(const char *image, json_t *extra);
long h_delete(const char *id);
/* GET /v1/sandboxes/{id}/inspect, asserting 200; new reference. */
json_t *h_inspect(const char *id);
/* GET /v1/sandboxes/{id} until status.state == state (or timeout); returns the last state
 * seen (static buffer). */
const char *h_wait_state(const char *id, const char *state, int timeout_s);
/* Register an id created some other way (CLI) for cleanup. */
void h_track_sandbox(const char *id);

/* ---- exec (POST .../proxy/44772/command, SSE) ---- */

struct h_exec_opts {
	const char *cwd;
	long timeout_ms; /* 0: none */
	bool background;
	const char *const *envs; /* "K", "V", ..., NULL */
	const char *const *argv; /* cell's argv extension instead of a shell command */
	bool hash_stdout;	 /* keep only sha256 + byte count of stdout (huge outputs) */
	enum h_via via;
	long max_seconds;    /* hang guard for the whole request; default 300 */
	bool as_user;	     /* run as uid:gid (execd's uid and gid) instead of root */
	bool lines;	     /* execd's output events, one per line (default: rawOutput, exact) */
	int uid, gid;	     /* gid < 0: uid alone (no gid sent) */
	const char *session; /* run in this bash session (POST .../session/{id}/run) instead */
	/* Called with the command id when the init event comes (from the calling thread). */
	void (*on_init)(const char *cmd_id, void *arg);
	void *on_init_arg;
};

struct h_exec {
	long status;	 /* HTTP status */
	char *out, *err; /* NUL-terminated; out stays empty with hash_stdout */
	size_t out_len, err_len;
	char out_sha256[65];
	size_t out_hashed;
	int exit_code;	/* 0 on execution_complete, evalue on error, -1 without an end */
	bool complete;	/* execution_complete seen */
	bool errored;	/* error event seen */
	json_t *error;	/* the error event's "error" object */
	char *cmd_id;	/* text of the init event */
	json_t *events; /* every event (stdout/stderr text omitted with hash_stdout) */
	int bad_events; /* events that were not a JSON object with a "type", output events
			 * with bad text or encoding, and a 200 stream that broke off (events
			 * are framed by the client library: cell_client_sse) */
	json_t *body;	/* the JSON body of an answer that was not 200 */
};

int h_exec(const char *id, const char *cmd, const struct h_exec_opts *opts, struct h_exec *res);
/* GET .../command/status/{cmd_id} until "running" is false, at most timeout_s; the last
 * status (new reference, NULL when none came). */
json_t *h_command_wait(const char *id, const char *cmd_id, int timeout_s);
void h_exec_free(struct h_exec *res);
/* Bash sessions (POST .../session, .../session/{sid}/run, DELETE .../session/{sid}). Open one
 * with body (may be NULL), asserting 200 and that it runs shell ("bash" or "sh"); its id. */
char *h_session_open(const char *id, const char *body, const char *shell);
/* One run in session sid (execd's line events; timeout_ms 0: none), asserting an answer. */
void h_session_run(const char *id, const char *sid, const char *cmd, long timeout_ms,
		   struct h_exec *r);
/* A run that must complete: its stdout lines, each ended by a newline (malloc'd). */
char *h_session_ok(const char *id, const char *sid, const char *cmd);
/* The stdout events of r, each ended by a newline again (malloc'd). */
char *h_out_lines(const struct h_exec *r);
long h_session_delete(const char *id, const char *sid);
/* Run cmd through /bin/sh, assert it exits 0, return its stdout (malloc'd). */
char *h_sh(const char *id, const char *cmd);
/* Run cmd and return its exit code (-1 without an end event). */
int h_sh_code(const char *id, const char *cmd);

/* Formerly a prefix defining a nohup function for the busybox image; the image now has a
 * /bin/nohup (rootfs/build-image), so this is empty and kept only for older callers. */
#define H_NOHUP ""

/* Shell prefix: wait (at most 5 s) until `pidof NAME` lists at least N processes. A command
 * started with `&` is forked before the exec that ends, but may not have exec'd its program
 * yet (pidof would still see the shell's name). */
#define H_WAIT_PIDOF(name, n)                                                                      \
	"i=0; while [ $(pidof " name " | wc -w) -lt " #n " ] && [ $i -lt 100 ]; do "               \
	"usleep 50000; i=$((i+1)); done; "

/* Shell function `fetch PORT PATH`: prints the body served on 127.0.0.1:PORT/PATH inside
 * the sandbox. wget of Debian's busybox-static segfaults (on the host too), so nc with a
 * bare HTTP/1.0 request is the fallback. */
#define H_FETCH                                                                                    \
	"fetch() { wget -qO- -T 5 \"http://127.0.0.1:$1/$2\" 2>/dev/null || "                      \
	"{ printf 'GET /%s HTTP/1.0\\r\\n\\r\\n' \"$2\" | nc 127.0.0.1 \"$1\" 2>/dev/null | "      \
	"tr -d '\\r' | sed '1,/^$/d'; }; }; "

/* ---- files ---- */

/* Multipart upload (cell_client_upload; the file part named after path's last component).
 * mode < 0: none sent. h_download and h_file_info are plain GETs (h_http): a test reads the
 * answer's status and body whatever they are. */
long h_upload(const char *id, const char *path, const void *data, size_t len, int mode,
	      struct h_resp *resp);
long h_download(const char *id, const char *path, struct h_resp *resp);
/* Copy the static helper <bin>/tests/integration/NAME (built with the suites) into the
 * sandbox as /root/NAME, mode 0755; asserts. */
void h_upload_helper(const char *id, const char *name);
/* Run cmd through /bin/sh (it must exit 0) and read its "key value" lines into
 * {"key": "value"}; new reference. */
json_t *h_sh_pairs(const char *id, const char *cmd);
long h_file_info(const char *id, const char *path, struct h_resp *resp);

/* ---- celld ---- */

bool h_celld_alive(void);
/* The running celld's pid (-1 when none) and its resident memory (VmRSS, KiB). */
pid_t h_celld_pid(void);
const char *h_state_dir(void); /* the default celld's --state-dir */
long h_celld_rss_kib(void);
/* SIGKILL celld and wait until it is gone. */
void h_celld_kill(void);
/* These act on the suite's world H. */
/* Start celld with the suite's flags and wait until its socket answers; asserts. */
void h_celld_start(void);
/* SIGKILL celld and start it again with the suite's flags plus extra (NULL-terminated, at
 * most 12; a later flag wins over the suite's own). The test's teardown brings the suite's
 * own celld back. */
void h_celld_restart_with(const char *const *extra);

/* ---- tenants ---- */

/* The suite's celld restarted with a keys file (--api-keys-file) of two tenants, alice and
 * bob (plus extra flags, NULL-terminated, may be NULL); h_alice and h_bob are their key
 * headers for h_req.headers. */
#define H_ALICE_KEY "alice-0123456789abcdef0123456789"
#define H_BOB_KEY   "bob-0123456789abcdef0123456789ab"
extern const char *const h_alice[], *const h_bob[];
void h_two_tenants(void);
void h_two_tenants_with(const char *const *extra);
/* A policies dir T/<name> (made; malloc'd path): the suite's seccomp, resources and
 * network, and quotas/default.json holding quotas; for --policies. */
char *h_policies_with_quotas(const char *name, const char *quotas);
/* A policies dir T/<name> (made; malloc'd path): every policy of the tree, but file
 * ("sub/name.json") holding content; for --policies. */
char *h_policies_with(const char *name, const char *file, const char *content);
/* method path (body may be NULL) as the tenant whose key headers hold (TCP). */
long h_as(const char *const *headers, const char *method, const char *path, const char *body,
	  struct h_resp *resp);
/* Whether GET path as headers (NULL: the Unix socket) answers 200 with a body holding
 * needle. */
bool h_listed(const char *const *headers, const char *path, const char *needle);

/* ---- more worlds ---- */

struct h_world_opts {
	const char *name;	  /* its dir is T/<name> (required, unique in the test) */
	const char *state;	  /* state dir; NULL: <dir>/state */
	bool tcp;		  /* also listen on 127.0.0.1 with an API key (else --no-tcp) */
	const char *const *flags; /* extra celld flags, NULL-terminated, may be NULL */
	/* > 0: an fd of a network namespace (e.g. netlab_host_fd) in which celld runs: only
	 * that namespace is entered, so the cgroups and mounts stay the host's. Needs tcp
	 * false (the harness reaches celld on its Unix socket). A celld the runner restarts
	 * for cleanup after the test ended (it cannot use the test's fd) runs in a fresh,
	 * empty namespace instead: never in the host's. */
	int netns_fd;
	bool unstarted;	    /* leave it to h_world_spawn (a start that must fail) */
	const char *images; /* its celld's images dir; NULL: H's */
};
/* Start another celld (same images unless opts->images, init and policies as H) and wait
 * until it answers;
 * asserts. The test's teardown (in the runner, also after a failure) deletes its
 * sandboxes, restarting it first when the test left it dead with sandboxes, stops it,
 * counts whatever of it leaked and removes its dir. */
struct h_world *h_world_add(const struct h_world_opts *opts);
/* (Re)start a world's celld with its flags; false with why filled (never asserts). */
bool h_world_spawn(struct h_world *w, char *why, size_t why_len);
void h_world_start(struct h_world *w); /* the same, asserting */
bool h_world_alive(const struct h_world *w);
pid_t h_world_pid(const struct h_world *w); /* -1 when not running */
void h_world_kill(struct h_world *w);	    /* SIGKILL and wait until gone */
const char *h_world_log_tail(const struct h_world *w);

/* The requests of the h_* functions above and below, to world w. */
long h_world_request(struct h_world *w, const struct h_req *req, struct h_resp *resp);
long h_world_http(struct h_world *w, const char *method, const char *path, const char *json_body,
		  struct h_resp *resp);
/* The value of the sample of celld's /metrics text whose line starts with "series " (a
 * name, with its labels: cell_dns_answers_total, cell_proxy_bytes_total{direction="to_app"}),
 * -1 when there is none. h_world_metric scrapes world w's /metrics (asserting 200) first. */
double h_metric(const char *text, const char *series);
double h_world_metric(struct h_world *w, const char *series);
long h_world_create_ex(struct h_world *w, const char *image, json_t *extra, enum h_via via,
		       struct h_resp *resp);
char *h_world_create(struct h_world *w, const char *image, json_t *extra);
long h_world_delete(struct h_world *w, const char *id);
json_t *h_world_inspect(struct h_world *w, const char *id);
const char *h_world_wait_state(struct h_world *w, const char *id, const char *state, int timeout_s);
void h_world_track_sandbox(struct h_world *w, const char *id);
int h_world_sandbox_count(struct h_world *w);
int h_world_exec(struct h_world *w, const char *id, const char *cmd, const struct h_exec_opts *opts,
		 struct h_exec *res);
char *h_world_sh(struct h_world *w, const char *id, const char *cmd);
long h_world_upload(struct h_world *w, const char *id, const char *path, const void *data,
		    size_t len, int mode, struct h_resp *resp);
void h_world_upload_helper(struct h_world *w, const char *id, const char *name);
int h_world_sh_code(struct h_world *w, const char *id, const char *cmd);

/* ---- skips ---- */

/* A test that does not run ends through one of these: the skip (suite, test, kind,
 * probe, reason) is appended to CELL_TEST_SKIPS (else <dir of CELL_TEST_LEDGER>/skips),
 * printed on stderr, and the test ends as passed. `make check` lists the skips.
 *
 * h_skip_host: the host cannot provide what the test needs, as the capability probe named
 * by probe decided (a short name that says what was checked, e.g. "kernel-qfmt-v2").
 * Allowed in strict mode. Use it only after such a probe; a failure of the feature itself
 * (an error answer, a failed mount the probe said would work) is a test failure.
 * h_skip: any other reason. Under CELL_TEST_STRICT=1 (CI) it fails the test instead.
 * Both need Check's fork mode (the default); with CK_FORK=no they fail the test. */
void h_skip_host(const char *probe, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
void h_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* One part of a test that judges many on its own (a battery of attempts) did not run: the
 * host lacks it, as the probe named decided. Recorded as h_skip_host's skips are; the test
 * goes on. A part that did not run for any other reason is the test's failure. */
void h_skip_host_part(const char *probe, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool h_strict(void); /* CELL_TEST_STRICT=1 */
/* The value of a kernel config option ('y', 'm', 'n' when unset) from
 * /boot/config-$(uname -r) or /proc/config.gz; 0 when neither is readable. */
char h_kernel_config(const char *option);

/* ---- host ---- */

/* Start a host process (registered: killed by the test's teardown). */
pid_t h_spawn(char *const argv[]);
/* The same with its stdout and stderr appended to log (NULL: /dev/null). */
pid_t h_spawn_log(char *const argv[], const char *log);
/* A TCP port of 127.0.0.1 free a moment ago (bound, read back, closed). */
unsigned h_free_port(void);
/* Start a celld (argv[0] its path) in its own session with stdin /dev/null and stdout and
 * stderr appended to log; not registered. The pid, or -1 with errno set. Unless argv names
 * --network-default, celld gets `--network-default none`: no test's celld touches the
 * host's network unless the test runs it in a namespace of its own and asks for more. */
pid_t h_spawn_celld(char *const argv[], const char *log);
/* The same inside a network namespace: netns_fd > 0 an fd of one (setns in the child before
 * the exec; only the network namespace), H_NETNS_FRESH a new empty one, -1 the caller's. */
#define H_NETNS_FRESH (-2)
pid_t h_spawn_celld_netns(char *const argv[], const char *log, int netns_fd);

struct h_proc {
	int status; /* exit code, 128+N when killed by signal N, -1 on timeout */
	char *out, *err;
	size_t out_len, err_len;
};
/* Run argv (env: extra "K=V" strings, NULL-terminated, may be NULL), capture output, kill
 * it after timeout_s. */
int h_run(char *const argv[], char *const env[], int timeout_s, struct h_proc *res);
void h_proc_free(struct h_proc *res);
/* Run `cell --socket H.socket ARGS...` (ap: NULL-terminated strings, at most 28 are used)
 * like h_run; returns res->status. */
int h_cell_v(struct h_proc *res, int timeout_s, va_list ap);
/* The same with a 120 s timeout: h_cell(&p, "ls", NULL). */
int h_cell(struct h_proc *res, ...);
/* A process's start time (field 22 of /proc/PID/stat; 0 when it is gone) and, when state
 * is not NULL, its state letter. */
uint64_t h_proc_starttime(pid_t pid, char *state);

/* Leak probes. */
bool h_mountinfo_mentions(const char *needle);
/* Any cgroup dir <hierarchy>/<instance>/<id> under /sys/fs/cgroup. Writes the first one
 * found into where (may be NULL). */
bool h_cgroup_exists(const char *id, char *where, size_t size);
/* Number of processes with any uid in [base, base + len); the first pid into *first. */
int h_procs_in_uid_range(uint32_t base, uint32_t len, pid_t *first);
bool h_pid_alive(pid_t pid);

/* Set a host sysctl (path under /proc/sys) for this test: its value before goes back in the
 * test's teardown, which runs in the runner whether the test passed, failed or crashed (and
 * in the final cleanup, also when the runner is killed). */
void h_sysctl_set(const char *path, const char *value);

/* ---- small utilities ---- */

/* Number of sandboxes the server lists (asserts the listing succeeds). */
int h_sandbox_count(void);
/* Strip trailing newlines and spaces in place; returns s. */
char *h_trim(char *s);
/* Value at a dotted path ("status.state", "uidMap.hostStart") or NULL. */
json_t *h_jget(json_t *root, const char *path);
const char *h_jstr(json_t *root, const char *path); /* "" when missing */
long long h_jint(json_t *root, const char *path);   /* -1 when missing */
char *h_urlencode(const char *s);
/* asprintf that asserts; the result is malloc'd. */
char *h_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void h_write_file(const char *path, const char *content, mode_t mode);
char *h_read_file(const char *path);
void h_sleep_ms(long ms);
/* Tail of celld's log, for failure messages (static buffer). */
const char *h_celld_log_tail(void);

/* A network namespace held by a child of the test: it lives while the child does, and the
 * child dies with the test process (failed or not), so the namespace cannot outlive it. */
struct h_netns {
	pid_t pid;     /* 0 when not held */
	int hold;      /* write end of the pipe the child waits on */
	int fd;	       /* the namespace (O_CLOEXEC) */
	char path[64]; /* /proc/<pid>/ns/net */
};
/* Move this process into a new network namespace with its loopback up (nothing else): 0,
 * or -errno. */
int h_netns_enter_private(void);
void h_netns_hold(struct h_netns *ns);	  /* asserts */
void h_netns_release(struct h_netns *ns); /* ends the child, closes fd; twice is fine */
