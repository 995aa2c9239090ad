/* commands.c: per-sandbox command table */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "admission.h"
#include "cell/error.h"
#include "cmdlog.h"

struct sandbox;
/* relay.h's, for the core's callers that read the relay (a front reads none of them). */
struct relay_error;
struct relay_event;
struct relay_exit;

#define CMD_TABLE_MAX 256 /* commands remembered per sandbox */
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
/* It was started with EXEC "stdin":true: command_stdin feeds it. */
void command_take_stdin(struct command *c);
/* Feed len bytes to its stdin, then close it when close_it. -ESRCH when it has ended,
 * -EPIPE when it takes no stdin or it was closed. Serialised with command_signal. */
int command_stdin(struct command *c, const void *data, size_t len, bool close_it,
		  struct cell_error *err);
/* Status JSON; "log_dropped":true and "log_note" when its log went to the table's cap. */
json_t *command_status_json(struct command *c);
/* The end offset of everything c ever wrote (monotonic). */
uint64_t command_logs_end(struct command *c);
/* Copy up to max bytes of c's kept output from *pos (moved up to the oldest kept byte when
 * older ones are gone) up to end into buf, advancing *pos; 0 once *pos reaches end. */
size_t command_logs_read(struct command *c, uint64_t *pos, uint64_t end, char *buf, size_t max);
/* ---- the entrypoint, background commands, and their logs for a reader ---- */

/* c is the sandbox's entrypoint's latest run (each start runs it again). */
void cmd_table_set_entrypoint(struct cmd_table *t, struct command *c);
/* The entrypoint's latest run, referenced; NULL when the sandbox has none (or it was
 * forgotten: a celld restart keeps no command). */
struct command *cmd_table_entrypoint(struct cmd_table *t);
/* What a sandbox's logs show by default, as docker logs shows a container's main process:
 * its entrypoint's latest run, else its latest background command (cell run -d's),
 * referenced; NULL when neither. */
struct command *cmd_table_main(struct cmd_table *t);
/* It was started in the background (POST /command with "background": true). */
void command_set_background(struct command *c);
/* "entrypoint" (a run of the sandbox's entrypoint), "background" or "command". */
const char *command_kind(struct command *c);
#define CMD_LIST_CONTENT_MAX 256 /* bytes of a command's text a list shows */
/* The commands the table remembers, oldest first: command_state_json's members with
 * "kind" and "content" (cut at CMD_LIST_CONTENT_MAX, "contentTruncated" then); NULL when
 * out of memory. */
json_t *cmd_table_list_json(struct cmd_table *t);

struct command_state {
	bool running, has_exit, log_dropped;
	int exit_code;
	int64_t started_ms, finished_ms;
	char error[256];
};
void command_state(struct command *c, struct command_state *st);
/* {"commandId", "running", "exitCode"?, "error"?, "startedAt", "finishedAt"?,
 * "logDropped"?}: the sandbox's entrypointStatus. */
json_t *command_state_json(struct command *c);
/* The offset of c's oldest kept byte written at ms (Unix milliseconds) or later, to the
 * time index's resolution (cmdlog.h); its end when none. */
uint64_t command_logs_since(struct command *c, int64_t ms);
/* The offset where c's last `lines` kept lines begin. */
uint64_t command_logs_tail(struct command *c, uint64_t lines);
/* Wait at most timeout_ms for c to write past pos or end, holding no lock meanwhile: true
 * when it did (or had), false on timeout or when c was forgotten (its sandbox deleted). */
bool command_logs_wait(struct command *c, uint64_t pos, int timeout_ms);

/* celld's output budget (every sandbox's kept output together) and what is kept now. */
#define CMD_OUTPUT_BUDGET_DEFAULT (1ull << 30)
void cmd_output_budget_set(uint64_t bytes);
void cmd_output_usage(uint64_t *kept, uint64_t *budget);
/* Apply one relay event (output → log; exit → finish). Returns true on EXIT. */
bool command_apply(struct command *c, const struct relay_event *ev);
/* Keep reading the relay in a detached thread until EXIT; takes ownership of fd. */
int command_drain(struct command *c, int fd, struct cell_error *err);
/* What ends a sandbox whose command was marked by command_delete_sandbox_at_end, called
 * with the sandbox's serial by the command's reader once the command has ended (celld's
 * main sets lifecycle's: a layer above this one). */
typedef void (*command_sandbox_end_fn)(uint64_t sandbox_serial);
void command_set_sandbox_end(command_sandbox_end_fn fn);
/* c's sandbox (sb) is deleted once c ends, however it ends (run -d --rm). Before c is
 * handed to its reader (command_stream_drain). */
void command_delete_sandbox_at_end(struct command *c, const struct sandbox *sb);
/* The EXEC payload for a shell command (command) or a direct exec (argv, an array of
 * strings): the sandbox's environment plus envs (may be NULL), base64-encoded text. *content
 * gets the text shown as the command's content; gid < 0 leaves the group to cell-init (uid's
 * primary group in the sandbox's passwd); uid < 0 is the image's User (root when it names
 * none), and a NULL cwd its WorkingDir. NULL on allocation failure. */
json_t *command_exec_request(const struct sandbox *sb, const char *command, json_t *argv,
			     json_t *envs, const char *cwd, int64_t timeout_ms, int64_t uid,
			     int64_t gid, char **content);
/* Start a command for who on a new relay connection: 0 running (*out, *fdp: the caller
 * reads it or hands it to command_drain), 1 init refused it (*out finished with 127/126,
 * rerr says why), -errno (nothing was recorded; -EUSERS: who's running commands are at
 * their quota). It counts as one of who's running commands until it finishes. */
int command_start(struct sandbox *sb, json_t *req, const char *content, struct adm_principal *who,
		  struct command **out, int *fdp, struct relay_error *rerr, struct cell_error *err);
/* A run in a bash session: SESSION_RUN with command_session_run's payload. As command_start,
 * except that a refusal (1: no such session, one busy or dead, rerr says which) records
 * nothing and leaves *out NULL. */
int command_start_session(struct sandbox *sb, json_t *req, const char *content,
			  struct adm_principal *who, struct command **out, int *fdp,
			  struct relay_error *rerr, struct cell_error *err);
/* SESSION_OPEN's payload: the session id, its first working directory (NULL: the image's
 * WorkingDir, if any), the sandbox's environment plus envs (may be NULL). */
json_t *command_session_open(const struct sandbox *sb, const char *id, const char *cwd,
			     json_t *envs);
/* SESSION_RUN's payload (*content: the text shown as the command's content). */
json_t *command_session_run(const char *id, const char *command, const char *cwd,
			    int64_t timeout_ms, char **content);
/* The reported exit code: 124 on timeout, else exit_code (128+N for signal N). */
int relay_exit_code(const struct relay_exit *ex);
/* Human text for a non-zero exit. */
void relay_exit_text(const struct relay_exit *ex, char *buf, size_t size);
/* The same, noting an OOM kill when the command died by SIGKILL while its sandbox's
 * cgroup counted one more. */
void command_exit_text(const struct command *c, const struct relay_exit *ex, char *buf,
		       size_t size);

/* ---- a command's events, for a front (which never reads the relay itself) ---- */

/* Why cell-init refused a command or a run: its errno and its message. */
struct command_refusal {
	int errnum;
	char message[256];
};

/* A started command's conversation: the events its front reads until the end. */
struct command_stream;

enum command_ev { COMMAND_EV_STDOUT, COMMAND_EV_STDERR, COMMAND_EV_STDIN_TAKEN, COMMAND_EV_EXIT };

struct command_event {
	enum command_ev kind;
	const uint8_t *data; /* output, valid until the next read */
	size_t len;
	int code;	     /* EXIT: the reported exit code (124 on timeout, 128+N) */
	int64_t duration_ms; /* EXIT: as cell-init measured it (0: unknown) */
	char text[128];	     /* EXIT: why, for a non-zero code (an OOM kill noted) */
};

/* command_start (session false) or command_start_session (true) for a front: 0 with *out
 * and *stream (the command running), 1 refused (why; *out, unless NULL, finished), -errno. */
int command_open(struct sandbox *sb, bool session, json_t *req, const char *content,
		 struct adm_principal *who, struct command **out, struct command_stream **stream,
		 struct command_refusal *why, struct cell_error *err);
/* 1 an event is waiting, 0 none within timeout_ms, -errno. */
int command_stream_wait(struct command_stream *s, int timeout_ms);
/* The next event, applied to the command (its log, its end) before it is returned. */
int command_stream_read(struct command_stream *s, struct command_event *ev, struct cell_error *err);
/* The rest read by a thread of its own (the command runs on unwatched); s is freed. */
void command_stream_drain(struct command_stream *s);
/* The conversation closed (its command's signals go nowhere from now on); s is freed. */
void command_stream_close(struct command_stream *s);
/* PING → PONG within timeout_ms: cell-init answers. */
int command_ping(const struct sandbox *sb, int timeout_ms, struct cell_error *err);
