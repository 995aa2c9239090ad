/* celld internals: one section per file of src/celld/.
 *
 * Threads: libmicrohttpd runs one thread per client connection (a handler may block on a
 * sandbox's relay socket), plus the init watcher, the expiry reaper and one small thread per
 * background command. Shared state lives in the registry (one mutex, one condition
 * variable); long work (spawn, teardown, relay I/O) never runs under that mutex. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>

#include "cell/cgroup.h"
#include "cell/error.h"
#include "cell/id.h"
#include "cell/proto.h"
#include "cell/runtime.h"
#include "cell/seccomp.h"

struct sandbox;
struct cell_quota_usage;

/* Sections that moved to a header of their own. */
#include "api.h"
#include "auth.h"
#include "errors.h"
#include "fields.h"
#include "gate.h"
#include "head.h"
#include "http.h"
#include "limits.h"
#include "multipart.h"
#include "router.h"
#include "server.h"
#include "sse.h"
#include "transport.h"
#include "url.h"

/* ---- main.c: configuration, fixed once the daemons start ---- */

struct celld_config {
	char *state_dir;  /* canonical absolute path */
	char *images_dir; /* canonical absolute path */
	char *socket_path;
	char *listen;	  /* HOST:PORT, NULL with --no-tcp */
	char *api_key;	  /* required on TCP; NULL with --no-tcp */
	int init_fd;	  /* sealed memfd holding cell-init */
	int sandboxes_fd; /* <state>/sandboxes */
	const struct cell_cgroup_ops *cgroup;
	char cgroup_prefix[32]; /* cgroup instance dir, for the log: "cell" or "cell-<8 hex>" */
	char *policies_dir;	/* canonical absolute path: seccomp/, resources/ */
	int policies_fd;	/* O_PATH of policies_dir */
	/* The TCP gate (gate.c): connections not yet authenticated. */
	unsigned tcp_pending_max;    /* held at once, in all */
	unsigned tcp_pending_per_ip; /* held at once from one client (IPv6: one /64) */
	unsigned tcp_head_timeout_s; /* for the whole head of the first request */
};

extern struct celld_config celld;

/* ---- admission.c: quotas per API key and for all keys together ---- */

enum adm_kind { ADM_SANDBOXES, ADM_COMMANDS, ADM_STREAMS, ADM_KINDS };
/* Who a request acts for: an API key (never the key itself), or NULL for the Unix socket,
 * which no quota limits. Principals live as long as celld. */
struct adm_principal;

/* policies/quotas/default.json (built-in quotas when missing), fitted to celld's fd limit;
 * a bad file refuses the start, naming the field. */
int admission_load(struct cell_error *err);
struct adm_principal *admission_principal(const char *key);
/* From a record's "owner" ("key:<hex>"; anything else is the Unix socket's, NULL). */
struct adm_principal *admission_principal_by_id(const char *id);
const char *admission_principal_id(const struct adm_principal *p);
/* One more of kind for p: 0, or -EUSERS with err naming the quota (429). force counts it
 * whatever the quota (a sandbox adopted at start). NULL p: always 0, nothing counted. */
int admission_take(struct adm_principal *p, enum adm_kind kind, bool force, struct cell_error *err);
void admission_put(struct adm_principal *p, enum adm_kind kind);
/* /v1/info's "quotas". */
json_t *admission_json(void);
/* How many key holders' connections the TCP server may hold (fitted to the fd limit). */
unsigned admission_tcp_connections(void);

/* ---- timefmt.c: clocks and RFC 3339 ---- */

#define CELLD_TIME_LEN 32

int64_t celld_now_ms(void);
/* "2026-11-22T05:00:00Z" (UTC, whole seconds). */
void celld_format_time(time_t t, char buf[CELLD_TIME_LEN]);
/* Parse RFC 3339 ("2026-11-22T05:00:00Z", fractions and ±hh:mm offsets allowed). */
int celld_parse_time(const char *text, time_t *out);
/* The same as a JSON string; JSON null for 0 (never set). */
json_t *celld_time_json(time_t t);

/* ---- registry.c: the table of sandboxes ---- */

enum sbx_state { SBX_PENDING, SBX_RUNNING, SBX_PAUSED, SBX_STOPPED, SBX_FAILED };
enum sbx_busy { SBX_IDLE, SBX_CREATING, SBX_DELETING, SBX_RECOVERING, SBX_FREEZING };

#define CELLD_SLOTS	16384u
#define CELLD_UID_FIRST 0x40000000u

struct cmd_table;

struct sandbox {
	/* Fixed once the entry is published. */
	char id[CELL_ID_MAX + 1];
	char *dir;	      /* <state>/sandboxes/<id> */
	int dirfd;	      /* O_PATH of dir, for state.json and init.sock */
	char cgroup_rel[100]; /* <prefix>/<id> */
	uint64_t serial;      /* unique per entry in this process, for the watcher */
	char *image;
	char *session_key;	     /* NULL unless created with cell.sessionKey */
	struct adm_principal *owner; /* who created it (NULL: the Unix socket) */
	json_t *env, *entrypoint, *resource_limits, *volumes;
	time_t created_at;
	/* Name of the profile in policies/seccomp/ ("" for a sandbox recorded before
	 * profiles existed); an array, so the entry owns no extra allocation. */
	char seccomp_profile[CELL_SECCOMP_NAME_MAX + 1];
	bool seccomp_log;	   /* denied calls are logged (user-notification listener) */
	struct cell_limits limits; /* resourceLimits as enforced (policy defaults filled in) */
	int slot;
	uint32_t uid_base;
	pthread_mutex_t store_lock; /* serialises state.json writes */
	pthread_mutex_t meta_lock;  /* serialises metadata patches (read, merge, swap, save) */
	struct cmd_table *cmds;

	int refs; /* atomic */

	/* Under the registry lock. Only O(1) work happens under it: the json members of an
	 * entry are immutable once published (metadata is replaced whole), so readers take a
	 * reference and copy or serialise it after the lock is released. */
	bool in_table;
	enum sbx_state state;
	enum sbx_busy busy; /* long work in progress (spawn, teardown): one at a time */
	json_t *metadata;
	time_t expires_at; /* 0: never */
	time_t transition_at;
	char *reason; /* why Failed */
	pid_t pid;    /* host pid of cell-init, 0 when none */
	int pidfd;    /* -1 when none */
	uint64_t starttime;
	bool watched; /* pidfd registered with the watcher */
};

void registry_lock(void);
void registry_unlock(void);
/* Wait on the registry condition (signalled whenever an entry's busy flag drops). */
void registry_wait(void);
void registry_broadcast(void);

/* A new, unpublished entry (one reference, no slot yet). */
struct sandbox *sandbox_new(const char *id);
void sandbox_ref(struct sandbox *sb);
void sandbox_unref(struct sandbox *sb);
const char *sandbox_state_name(enum sbx_state state);
int sandbox_state_parse(const char *name, enum sbx_state *out);
/* Set state (and reason for Failed), stamping transition_at. Registry lock held. */
void sandbox_set_state_locked(struct sandbox *sb, enum sbx_state state, const char *reason);

/* A new reference, or NULL. */
struct sandbox *registry_get(const char *id);
/* No reference taken: the registry lock must be held while it is used. */
struct sandbox *registry_find_serial_locked(uint64_t serial);
/* Referenced copy of every entry, oldest first; free with registry_put_all. */
size_t registry_snapshot(struct sandbox ***out);
void registry_put_all(struct sandbox **v, size_t n);
size_t registry_count(void);

/* Publish a new entry (busy CREATING) under id, with the lowest uid slot free host-wide
 * (reserved in uidrange.c), counted as one of its owner's sandboxes (-EUSERS with err when
 * that is over a quota). When the id exists and sb has a session key: wait while that
 * entry is being created and return it referenced in *existing (returns 1) when it was
 * created with the same key, else -EADDRINUSE (another key, or no key, shares the id).
 * Returns 0 when sb was published, -EEXIST (id taken, no session key), -ENOSPC (no free
 * slot) or another -errno (the reservation failed; logged). */
int registry_claim(struct sandbox *sb, struct sandbox **existing, struct cell_error *err);
/* Publish an adopted entry with the slot recorded in its state.json, re-reserving that
 * slot. When another live owner holds it, the sandbox's processes are stopped and it is
 * published Failed with the reason (logged, naming both) rather than sharing the range.
 * -EALREADY (not published, untouched) when another celld on this state dir holds it. */
int registry_adopt(struct sandbox *sb, struct cell_error *err);
/* Drop an entry: its reservation is released (its state dir is gone). */
void registry_remove_locked(struct sandbox *sb);
/* Slot n → first host uid of its range. */
uint32_t registry_uid_base(int slot);

/* ---- uidrange.c: host-wide uid range reservations, shared by every celld ---- */

#define CELLD_UID_RANGES_DIR "/run/cell/uid-ranges"

/* Refuse (EEXIST, naming the account) when /etc/passwd or /etc/group has an id inside the
 * range space, then create/open the reservations dir (NULL: the default), 0700 root. */
int uidrange_init(const char *dir, struct cell_error *err);
const char *uidrange_dir(void);
/* Reserve the lowest slot that is free (or stale) host-wide for sandbox id: 0 with *slot,
 * -ENOSPC when every slot is reserved, -errno. Waits on a lock other celld share: never
 * call it with the registry lock held. */
int uidrange_reserve(const char *id, int *slot, struct cell_error *err);
/* Re-reserve an adopted sandbox's recorded slot (recreating a missing file, reclaiming a
 * stale one). -EBUSY with err naming both sandboxes when another live owner holds it;
 * -EALREADY when a running celld on this same state dir holds it for this sandbox. */
int uidrange_adopt(const char *id, int slot, struct cell_error *err);
/* Drop our reservation of slot for id; nothing when we do not hold it for id. Quick (no
 * waiting on other processes): may run under the registry lock. */
void uidrange_release(const char *id, int slot);

/* ---- store.c: <dir>/state.json ---- */

/* Snapshot sb under the registry lock, then write it atomically (0600): the temp file is
 * synced to disk before it replaces state.json. */
int store_save(struct sandbox *sb, struct cell_error *err);
/* The same with a choice of syncing, for the two writes of a create (lifecycle_create says
 * why): STORE_SYNCED is store_save; STORE_UNSYNCED replaces the file atomically but leaves
 * it to the kernel's writeback; STORE_SYNC_RENAMED syncs the new file once it is in place,
 * so data and rename are both durable when it returns. */
enum store_sync { STORE_SYNCED, STORE_UNSYNCED, STORE_SYNC_RENAMED };
int store_save_sync(struct sandbox *sb, enum store_sync how, struct cell_error *err);
/* Load <sandboxes>/<id>/state.json into a new entry (not published). */
int store_load(const char *id, struct sandbox **out, struct cell_error *err);

/* ---- images.c ---- */

/* uri names a local image; writes <images>/<name>/rootfs into buf. -ENOENT (not there)
 * or -EINVAL (not a valid name), with err naming image.uri. */
int image_resolve(const char *uri, char *buf, size_t size, struct cell_error *err);

/* ---- pause.c: freezing a sandbox ---- */

/* Pause (freeze every process, memory kept) or resume: 0; -EALREADY (already in that
 * state), -EBUSY (neither Running nor Paused), -ENOENT (gone), or another -errno (the
 * freezer failed; err says why). */
int lifecycle_pause(struct sandbox *sb, struct cell_error *err);
int lifecycle_resume(struct sandbox *sb, struct cell_error *err);
/* Resume sb when it is Paused (exec, files, ping and create-or-resume use it first). */
int lifecycle_resume_if_paused(struct sandbox *sb, struct cell_error *err);

/* ---- seccomp_policy.c: policies/seccomp/<name>.json, compiled at start ---- */

/* Load, validate and compile every profile (default.json is required); a bad profile
 * refuses the start, naming file and field. */
int seccomp_policies_load(struct cell_error *err);
bool seccomp_policy_exists(const char *name);
/* The compiled program (with a notification listener when log), or NULL when unknown. */
const struct cell_seccomp_prog *seccomp_policy_prog(const char *name, bool log);
const struct cell_seccomp_profile *seccomp_policy_profile(const char *name);
/* "default, strict" into buf, for error messages. */
void seccomp_policy_names(char *buf, size_t size);

/* ---- seccomp_log.c: denied calls of sandboxes created with cell.seccompLog ---- */

int seccomp_log_start(struct cell_error *err);
/* Take over the listener of sandbox id (closed on failure too); its denied calls are
 * answered with the profile's errno and recorded. */
int seccomp_log_attach(const char *id, const char *profile, int listener, struct cell_error *err);
/* Close the listener and forget the record (the sandbox is deleted). */
void seccomp_log_detach(const char *id);
/* inspect's "seccomp": {profile, log, and with log: denied, listening, recent[]}. */
json_t *seccomp_log_json(const char *id, const char *profile, bool log);

/* ---- lifecycle.c ---- */

struct create_spec {
	const char *image;
	char rootfs[4096];
	json_t *entrypoint;					 /* array of strings or NULL */
	json_t *env, *metadata, *resource_limits, *volumes_json; /* owned references */
	const char *session_key;
	struct adm_principal *owner; /* who asks (NULL: the Unix socket) */
	int64_t timeout;	     /* seconds, 0 = none */
	const char *seccomp_profile; /* extensions["cell.seccomp"]; NULL: "default" */
	bool seccomp_log;	     /* extensions["cell.seccompLog"] */
	struct cell_limits limits;   /* resourceLimits, validated, defaults filled in */
	struct cell_volume *volumes; /* pointing into volumes_json */
	size_t n_volumes;
	json_t *warnings; /* strings for the create's answer, or NULL */
};

/* ---- volumes.c: cell.volumes, each volume's id mapping chosen ---- */

/* Parse extensions["cell.volumes"] into spec->volumes_json (the record: host resolved, map,
 * owner ids, why) and spec->volumes; warnings for the create's answer are appended to
 * spec->warnings. -EINVAL with err naming the field. */
int volumes_parse(const char *text, struct create_spec *spec, struct cell_error *err);
/* The runtime's volumes from a record's volumes (strings point into arr); refused when the
 * record would map the sandbox's root to a system account. */
int volumes_from_json(json_t *arr, struct cell_volume **out, size_t *n, struct cell_error *err);

/* Create (or, with a session key, find) a sandbox. *created tells which. */
int lifecycle_create(const struct create_spec *spec, struct sandbox **out, bool *created,
		     struct cell_error *err);
/* Tear down and remove everything; -ENOENT when it was already gone. */
int lifecycle_delete(struct sandbox *sb, struct cell_error *err);
/* Re-adopt every sandbox dir left by an earlier run. */
void lifecycle_adopt_all(void);
/* Init of a running sandbox died: mark it Failed, clean its processes and cgroup. */
void lifecycle_init_died(struct sandbox *sb, const char *why);
/* The environment every command starts with (request envs are added on top). */
json_t *lifecycle_base_env(const struct sandbox *sb);

/* ---- watch.c: init watcher (pidfds in epoll) and expiry reaper ---- */

int watch_start(struct cell_error *err);
/* Registry lock held. */
void watch_add_locked(struct sandbox *sb);
void watch_remove_locked(struct sandbox *sb);

/* ---- relay.c: client side of the frame protocol (init is hostile) ---- */

#define RELAY_CONTROL_MAX (64u << 10) /* JSON frames from init */

struct relay_error {
	int errnum; /* validated, 1..4095 */
	char message[256];
};

struct relay_exit {
	int exit_code; /* 0..255 */
	int signal;    /* 0..64 */
	bool timed_out;
	int64_t duration_ms;
};

enum relay_ev { RELAY_EV_STDOUT, RELAY_EV_STDERR, RELAY_EV_EXIT };

struct relay_event {
	enum relay_ev kind;
	struct cell_frame frame; /* STDOUT/STDERR bytes; cell_frame_free afterwards */
	struct relay_exit exit;
};

struct relay_stat {
	char type[16]; /* file, directory, symlink, other */
	int64_t size;
	uint32_t mode; /* permission bits */
	int64_t uid, gid;
	char owner[64], group[64];
	double mtime, ctime;
};

/* What one API request may spend waiting on cell-init in its control steps (connect, send a
 * request, wait for its answer), all steps together: a file info over many paths, a ranged
 * download (a stat, then a read), the files of one upload, a command's start. A stalled or
 * hostile init pins a celld thread for this long at most, not for a fresh timeout per step.
 * Streamed bytes (command output, download and upload data) are paced by the client and
 * have only the socket's idle timeout per frame (RELAY_IO_TIMEOUT_MS, relay.c). */
#define RELAY_BUDGET_MS 30000
struct relay_budget {
	int64_t left_ms;
};
#define RELAY_BUDGET_INIT                                                                          \
	{                                                                                          \
		RELAY_BUDGET_MS                                                                    \
	}

/* Connect to <dir>/init.sock; the socket has send/receive timeouts so a stalled init can
 * never hold a thread inside a frame. */
int relay_connect(const struct sandbox *sb, struct relay_budget *b, struct cell_error *err);
/* Wait for data, up to timeout_ms (-1: forever). 1 readable, 0 timeout, -errno. */
int relay_wait(int fd, int timeout_ms);
/* PING → PONG within timeout_ms, all steps together. */
int relay_ping(const struct sandbox *sb, int timeout_ms, struct cell_error *err);
/* EXEC: send req, read STARTED (returns 0, *pid set) or ERROR (returns 1, rerr set). */
int relay_exec_start(int fd, json_t *req, pid_t *pid, struct relay_error *rerr,
		     struct relay_budget *b, struct cell_error *err);
/* Next event of a running EXEC conversation. */
int relay_exec_next(int fd, struct relay_event *ev, struct cell_error *err);
/* The same with the payload read into rd's buffer (reused from frame to frame, no
 * allocation per chunk): ev->frame.payload points into it, valid until the next call, and
 * is not to be freed. */
struct relay_reader {
	uint8_t *buf;
	size_t cap;
};
int relay_exec_read(int fd, struct relay_reader *rd, struct relay_event *ev,
		    struct cell_error *err);
void relay_reader_free(struct relay_reader *rd);
/* SIGNAL, sent within RELAY_BUDGET_MS. */
int relay_signal(int fd, int sig, struct cell_error *err);
/* FILE_STAT: 0 with st, 1 with rerr (init refused), -errno. */
int relay_file_stat(const struct sandbox *sb, const char *path, struct relay_stat *st,
		    struct relay_error *rerr, struct relay_budget *b, struct cell_error *err);
/* FILE_READ: on 0, *fd is the open conversation positioned after STAT. */
int relay_file_read(const struct sandbox *sb, const char *path, int64_t offset, int64_t limit,
		    int *fd, struct relay_stat *st, struct relay_error *rerr,
		    struct relay_budget *b, struct cell_error *err);
/* Next DATA chunk (returns 1 with frame) or END (returns 0); ERROR → -EIO with message. */
int relay_file_read_next(int fd, struct cell_frame *frame, struct cell_error *err);
/* FILE_WRITE: opens the conversation; then DATA frames; relay_file_write_end sends END and
 * reads OK (0, *size) or ERROR (1, rerr). */
int relay_file_write(const struct sandbox *sb, json_t *req, int *fd, struct relay_budget *b,
		     struct cell_error *err);
int relay_file_write_end(int fd, int64_t *size, struct relay_error *rerr, struct relay_budget *b,
			 struct cell_error *err);
/* Read an ERROR init sent (after a failed send, or early during a write) into rerr: 1 when
 * found, 0 when nothing came within timeout_ms, -EPROTO for any other frame. */
int relay_take_error(int fd, struct relay_error *rerr, int timeout_ms);

/* ---- commands.c: per-sandbox command table ---- */

#define CMD_LOG_MAX   (8u << 20) /* combined output kept: 4 MiB per stream */
#define CMD_TABLE_MAX 256	 /* commands remembered per sandbox */
/* Kept output of all a sandbox's commands together (their log buffers), so that a sandbox
 * never grows celld's memory by more than this however many commands it runs. */
#define CMD_TABLE_LOG_MAX      (64u << 20)
#define CMD_TABLE_LOG_MAX_TEXT "64 MiB"

struct command;

struct cmd_table *cmd_table_new(void);
void cmd_table_free(struct cmd_table *t);
struct command *cmd_table_get(struct cmd_table *t, const char *id);

void command_ref(struct command *c);
void command_unref(struct command *c);
const char *command_id(const struct command *c);
int64_t command_started_ms(const struct command *c);
/* Finished: exit code (or -1 with error text when the relay failed). */
void command_finish(struct command *c, int exit_code, const char *error);
/* The relay connection a SIGNAL goes to (-1 when none). */
void command_set_relay(struct command *c, int fd);
int command_signal(struct command *c, int sig, struct cell_error *err);
/* Status JSON; "log_dropped":true and "log_note" when its log went to the table's cap. */
json_t *command_status_json(struct command *c);
/* The end offset of everything c ever wrote (monotonic). */
uint64_t command_logs_end(struct command *c);
/* Copy up to max bytes of c's kept output from *pos (moved up to the oldest kept byte when
 * older ones are gone) up to end into buf, advancing *pos; 0 once *pos reaches end. */
size_t command_logs_read(struct command *c, uint64_t *pos, uint64_t end, char *buf, size_t max);
/* celld's output budget (every sandbox's kept output together) and what is kept now. */
#define CMD_OUTPUT_BUDGET_DEFAULT (1ull << 30)
void cmd_output_budget_set(uint64_t bytes);
void cmd_output_usage(uint64_t *kept, uint64_t *budget);
/* Apply one relay event (output → log; exit → finish). Returns true on EXIT. */
bool command_apply(struct command *c, const struct relay_event *ev);
/* Keep reading the relay in a detached thread until EXIT; takes ownership of fd. */
int command_drain(struct command *c, int fd, struct cell_error *err);
/* The EXEC payload for a shell command (command) or a direct exec (argv, an array of
 * strings): the sandbox's environment plus envs (may be NULL), base64-encoded text. *content
 * gets the text shown as the command's content. NULL on allocation failure. */
json_t *command_exec_request(const struct sandbox *sb, const char *command, json_t *argv,
			     json_t *envs, const char *cwd, int64_t timeout_ms, int64_t uid,
			     int64_t gid, char **content);
/* Start a command for who on a new relay connection: 0 running (*out, *fdp: the caller
 * reads it or hands it to command_drain), 1 init refused it (*out finished with 127/126,
 * rerr says why), -errno (nothing was recorded; -EUSERS: who's running commands are at
 * their quota). It counts as one of who's running commands until it finishes. */
int command_start(struct sandbox *sb, json_t *req, const char *content, struct adm_principal *who,
		  struct command **out, int *fdp, struct relay_error *rerr, struct cell_error *err);
/* The reported exit code: 124 on timeout, else exit_code (128+N for signal N). */
int relay_exit_code(const struct relay_exit *ex);
/* Human text for a non-zero exit. */
void relay_exit_text(const struct relay_exit *ex, char *buf, size_t size);
/* The same, noting an OOM kill when the command died by SIGKILL while its sandbox's
 * cgroup counted one more. */
void command_exit_text(const struct command *c, const struct relay_exit *ex, char *buf,
		       size_t size);
