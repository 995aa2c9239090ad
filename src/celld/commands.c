/* Per-sandbox command table: what ran, whether it still runs, how it ended, and a bounded
 * log of its combined output (the cursor of /command/{id}/logs is a byte offset into it).
 *
 * Three bounds keep output from growing celld's memory: each command keeps its newest
 * CMD_LOG_MAX bytes, all the logs of one table together hold at most CMD_TABLE_LOG_MAX bytes
 * of buffer, and all the tables of celld together about the output budget (celld
 * --output-budget). Past a bound, the logs of the oldest finished commands go first (their
 * status says so), then running commands' logs are halved, largest first: within the table
 * for its own cap, across every table for the budget. Cursors stay byte offsets into
 * everything a command ever wrote: dropping only moves the start of what is kept, never the
 * end. A log is read out in pieces (command_logs_read), never copied whole. The log itself
 * (its window, halving, dropping, reading) is cmdlog.c; the two outer bounds are here.
 *
 * Locks: the list of tables (budget.lock), then a table's lock, then at most one command's
 * lock. Every change to a log (append, drop, trim) happens under the table's and the
 * command's, so a command's log layout cannot change while its table's lock is held;
 * readers (logs, status) take only the command's lock.
 *
 * A follower of a log (GET /v1/sandboxes/{id}/logs?follow=true) waits on its table's
 * condition variable, which every append and every end broadcasts: the wait releases the
 * table's lock, and is bounded so that the caller looks at its client and its sandbox.
 *
 * The table remembers which command is its sandbox's entrypoint (its latest run: each start
 * runs it again), and which commands were started in the background, for the sandbox's
 * JSON and its logs.
 *
 * A command keeps its relay connection open until EXIT: a foreground one in the HTTP
 * thread streaming its events, a background one (or a foreground one whose client went
 * away) in a small detached thread here. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell/codec.h"
#include "cell/log.h"
#include "admission.h"
#include "audit.h"
#include "cmdlog.h"
#include "commands.h"
#include "config.h"
#include "events.h"
#include "relay.h"
#include "sandbox.h"
#include "secrets.h"
#include "timefmt.h"

struct command {
	char id[CELL_ID_RANDOM_LEN + 1];
	char *content;
	int refs; /* atomic */
	pthread_mutex_t lock;
	struct adm_principal *who; /* counted as one of its running commands while running */
	/* Under lock. */
	bool running;
	bool has_exit;
	int exit_code;
	char *error;
	int64_t started_ms, finished_ms;
	struct cmdlog log; /* its newest output; dropped: went to the table's cap or budget */
	int relay_fd;	   /* where SIGNAL goes while it runs; owned by the reader */
	/* Under the table's lock: started in the background (command_set_background), or as
	 * a run of the sandbox's entrypoint (cmd_table_set_entrypoint). */
	bool background, entrypoint_run;
	bool stdin_open; /* it takes STDIN frames (EXEC "stdin":true), not closed yet */
	/* Input sent and not yet taken by the command (CELL_STDIN_WINDOW at most); stdin_cond
	 * tells a waiting writer that some was taken, or that the command ended. */
	uint64_t stdin_unacked;
	pthread_cond_t stdin_cond;
	/* Frames celld writes to the relay (SIGNAL, STDIN, STDIN_CLOSE) go one whole frame at a
	 * time: two requests never interleave their bytes. Taken without c->lock. */
	pthread_mutex_t write_lock;
	/* The sandbox's cgroup and its OOM-kill count when the command started: a SIGKILL
	 * while the count grew is reported as an OOM kill. */
	char cgroup_rel[sizeof(((struct sandbox *)0)->cgroup_rel)];
	uint64_t oom_before;
	/* For its record in the audit log when it ends (audit.h): the request that started
	 * it, whose, in which sandbox, how (exec, session.run), its cwd and the names of its
	 * environment (never the values). NULL audit: not recorded. */
	json_t *audit;
	char rid[136], who_text[80], sandbox[CELL_ID_MAX + 1];
	/* Set before its reader starts: the sandbox of this serial is deleted when it ends. */
	uint64_t delete_serial;
	/* Under the table's lock. */
	struct cmd_table *table; /* referenced */
	bool in_table;
};

struct cmd_table {
	pthread_mutex_t lock;
	int refs; /* atomic: the sandbox's, and one per command made here */
	/* Under lock. */
	struct command *v[CMD_TABLE_MAX];
	size_t n;
	size_t kept; /* sum of log.cap of the commands in v (others have no log) */
	char entrypoint[CELL_ID_RANDOM_LEN + 1]; /* its entrypoint's latest run ("": none) */
	pthread_cond_t changed;			 /* an append or an end, for followers */
	/* Under budget.lock: every live table, for reclaiming across sandboxes. */
	struct cmd_table *next, **pprev;
};

/* celld's whole output budget. */
static struct {
	pthread_mutex_t lock; /* the list of tables; taken before any table's lock */
	struct cmd_table *tables;
	uint64_t kept;	 /* atomic: sum of every table's kept */
	uint64_t budget; /* bytes; set once at start */
} budget = {.lock = PTHREAD_MUTEX_INITIALIZER, .budget = CMD_OUTPUT_BUDGET_DEFAULT};

static bool command_running(struct command *c);

void cmd_output_budget_set(uint64_t bytes)
{
	budget.budget = bytes;
}

void cmd_output_usage(uint64_t *kept, uint64_t *limit)
{
	*kept = __atomic_load_n(&budget.kept, __ATOMIC_RELAXED);
	*limit = budget.budget;
}

/* Change t->kept (table lock held) and the sum across tables with it. */
static void kept_add_locked(struct cmd_table *t, int64_t delta)
{
	t->kept = (size_t)((int64_t)t->kept + delta);
	__atomic_add_fetch(&budget.kept, (uint64_t)delta, __ATOMIC_RELAXED);
}

struct cmd_table *cmd_table_new(void)
{
	struct cmd_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->changed, NULL);
	t->refs = 1;
	pthread_mutex_lock(&budget.lock);
	t->next = budget.tables;
	t->pprev = &budget.tables;
	if (budget.tables)
		budget.tables->pprev = &t->next;
	budget.tables = t;
	pthread_mutex_unlock(&budget.lock);
	return t;
}

static void table_unref(struct cmd_table *t)
{
	if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL))
		return;
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->changed);
	free(t);
}

/* Free c's whole log (table lock held). The end offset stays: cursors remain valid. noted:
 * its status tells that its output is gone. */
static void drop_log_locked(struct cmd_table *t, struct command *c, bool noted)
{
	pthread_mutex_lock(&c->lock);
	kept_add_locked(t, -(int64_t)cmdlog_drop(&c->log, noted));
	pthread_mutex_unlock(&c->lock);
}

/* Take v[i] out of the table, freeing its log (table lock held); returns the table's
 * reference to it, for the caller to drop once the lock is released. */
static struct command *remove_at_locked(struct cmd_table *t, size_t i)
{
	struct command *c = t->v[i];
	drop_log_locked(t, c, false);
	c->in_table = false;
	memmove(t->v + i, t->v + i + 1, (t->n - i - 1) * sizeof(*t->v));
	t->n--;
	return c;
}

/* The sandbox is gone. Commands still draining may outlive it: they keep the table (not
 * its logs: their output is discarded from now on) alive until they end. */
void cmd_table_free(struct cmd_table *t)
{
	if (!t)
		return;
	struct command *gone[CMD_TABLE_MAX];
	size_t n = 0;
	pthread_mutex_lock(&budget.lock);
	*t->pprev = t->next;
	if (t->next)
		t->next->pprev = t->pprev;
	pthread_mutex_lock(&t->lock);
	while (t->n)
		gone[n++] = remove_at_locked(t, t->n - 1);
	pthread_cond_broadcast(&t->changed); /* followers see their command forgotten */
	pthread_mutex_unlock(&t->lock);
	pthread_mutex_unlock(&budget.lock);
	for (size_t i = 0; i < n; i++)
		command_unref(gone[i]);
	table_unref(t);
}

void command_ref(struct command *c)
{
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

void command_unref(struct command *c)
{
	if (!c || __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL))
		return;
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->write_lock);
	pthread_cond_destroy(&c->stdin_cond);
	free(c->content);
	free(c->error);
	json_decref(c->audit);
	cmdlog_free(&c->log);
	table_unref(c->table);
	free(c);
}

static struct command *find_locked(struct cmd_table *t, const char *id)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->v[i]->id, id))
			return t->v[i];
	return NULL;
}

/* Make room by forgetting the oldest finished command; returns it (see remove_at_locked).
 * The entrypoint's latest run stays: the sandbox's status and logs show it. */
static struct command *evict_locked(struct cmd_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		if (!command_running(t->v[i]) && strcmp(t->v[i]->id, t->entrypoint))
			return remove_at_locked(t, i);
	return NULL;
}

/* A new running command (referenced; the table keeps its own reference). -EBUSY when
 * CMD_TABLE_MAX commands are still running. */
static int cmd_table_add(struct cmd_table *t, const char *content, struct command **out,
			 struct cell_error *err)
{
	struct command *c = calloc(1, sizeof(*c));
	if (!c || !(c->content = strdup(content))) {
		free(c);
		return cell_err(err, ENOMEM, "command");
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->write_lock, NULL);
	pthread_cond_init(&c->stdin_cond, NULL);
	c->refs = 2; /* the table's and the caller's */
	c->running = true;
	c->relay_fd = -1;
	c->started_ms = celld_now_ms();
	pthread_mutex_lock(&t->lock);
	int r = 0;
	struct command *evicted = NULL;
	if (t->n == CMD_TABLE_MAX && !(evicted = evict_locked(t))) {
		r = cell_err(err, EBUSY, "%d commands are already running in this sandbox",
			     CMD_TABLE_MAX);
	} else {
		do
			r = cell_id_random(c->id);
		while (r == 0 && find_locked(t, c->id));
		if (r < 0) {
			cell_err(err, -r, "command id");
		} else {
			t->v[t->n++] = c;
			c->in_table = true;
			c->table = t;
			__atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_unlock(&t->lock);
	command_unref(evicted);
	if (r < 0) {
		c->refs = 1;
		command_unref(c);
		return r;
	}
	*out = c;
	return 0;
}

struct command *cmd_table_get(struct cmd_table *t, const char *id)
{
	pthread_mutex_lock(&t->lock);
	struct command *c = find_locked(t, id);
	if (c)
		command_ref(c);
	pthread_mutex_unlock(&t->lock);
	return c;
}

/* Forget a command that never started. */
static void cmd_table_drop(struct cmd_table *t, struct command *c)
{
	struct command *gone = NULL;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->n; i++) {
		if (t->v[i] == c) {
			gone = remove_at_locked(t, i);
			break;
		}
	}
	pthread_mutex_unlock(&t->lock);
	command_unref(gone);
}

const char *command_id(const struct command *c)
{
	return c->id;
}

int64_t command_started_ms(const struct command *c)
{
	return c->started_ms;
}

static bool command_running(struct command *c)
{
	pthread_mutex_lock(&c->lock);
	bool r = c->running;
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* Halve c's log, keeping its newest bytes, and give the memory back (table lock held). */
static void trim_log_locked(struct cmd_table *t, struct command *c)
{
	pthread_mutex_lock(&c->lock);
	kept_add_locked(t, -(int64_t)cmdlog_trim(&c->log));
	pthread_mutex_unlock(&c->lock);
}

/* Free buffer space until `need` more bytes fit in the table's cap, never touching self
 * (whose lock the caller has released). Table lock held. Always succeeds: need is at most
 * CMD_LOG_MAX - self's cap, and with every other log empty the table holds only self's. */
static void make_room_locked(struct cmd_table *t, struct command *self, size_t need)
{
	/* The oldest finished commands' logs first: nobody waits on those any more. */
	for (size_t i = 0; i < t->n && t->kept + need > CMD_TABLE_LOG_MAX; i++)
		if (t->v[i] != self && !command_running(t->v[i]))
			drop_log_locked(t, t->v[i], true);
	/* Then running commands share what is left: the largest log gives up half. */
	while (t->kept + need > CMD_TABLE_LOG_MAX) {
		struct command *big = NULL;
		size_t big_cap = 0;
		for (size_t i = 0; i < t->n; i++) {
			struct command *c = t->v[i];
			if (c == self)
				continue;
			pthread_mutex_lock(&c->lock);
			size_t cap = c->log.cap;
			pthread_mutex_unlock(&c->lock);
			if (cap > big_cap) {
				big = c;
				big_cap = cap;
			}
		}
		if (!big)
			break;
		trim_log_locked(t, big);
	}
}

/* ---- the budget across tables ---- */

struct reclaim_candidate {
	int64_t finished_ms;
	struct command *c; /* referenced */
};

static int by_finish(const void *a, const void *b)
{
	const struct reclaim_candidate *x = a, *y = b;
	return (x->finished_ms > y->finished_ms) - (x->finished_ms < y->finished_ms);
}

/* Finished commands that still keep a log, in every table (budget.lock held). A log holds
 * at least 4 KiB, so there are at most budget / 4 KiB of them. */
static size_t finished_logs(struct reclaim_candidate **out)
{
	struct reclaim_candidate *v = NULL;
	size_t n = 0, cap = 0;
	for (struct cmd_table *t = budget.tables; t; t = t->next) {
		pthread_mutex_lock(&t->lock);
		for (size_t i = 0; i < t->n; i++) {
			struct command *c = t->v[i];
			pthread_mutex_lock(&c->lock);
			bool take = !c->running && c->log.cap;
			int64_t when = c->finished_ms;
			pthread_mutex_unlock(&c->lock);
			if (!take)
				continue;
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				struct reclaim_candidate *nv = realloc(v, ncap * sizeof(*nv));
				if (!nv)
					break;
				v = nv;
				cap = ncap;
			}
			command_ref(c);
			v[n++] = (struct reclaim_candidate){when, c};
		}
		pthread_mutex_unlock(&t->lock);
	}
	*out = v;
	return n;
}

/* The running log with the largest buffer anywhere (budget.lock held), referenced, or
 * NULL. */
static struct command *largest_running(void)
{
	struct command *big = NULL;
	size_t big_cap = 0;
	for (struct cmd_table *t = budget.tables; t; t = t->next) {
		pthread_mutex_lock(&t->lock);
		for (size_t i = 0; i < t->n; i++) {
			struct command *c = t->v[i];
			pthread_mutex_lock(&c->lock);
			bool bigger = c->running && c->log.cap > big_cap;
			if (bigger)
				big_cap = c->log.cap;
			pthread_mutex_unlock(&c->lock);
			if (bigger) {
				command_ref(c);
				command_unref(big);
				big = c;
			}
		}
		pthread_mutex_unlock(&t->lock);
	}
	return big;
}

static bool over(uint64_t target)
{
	return __atomic_load_n(&budget.kept, __ATOMIC_RELAXED) > target;
}

/* Bring the output kept by every table back under the budget (to 7/8 of it, so that this
 * does not run again at the next append): the logs of finished commands go first, oldest
 * first, in whichever sandbox they are; then the largest running logs are halved. Called
 * with no table or command lock held. */
static void budget_reclaim(void)
{
	uint64_t target = budget.budget - budget.budget / 8;
	pthread_mutex_lock(&budget.lock);
	if (!over(budget.budget)) {
		pthread_mutex_unlock(&budget.lock);
		return;
	}
	struct reclaim_candidate *v;
	size_t n = finished_logs(&v);
	qsort(v, n, sizeof(*v), by_finish);
	for (size_t i = 0; i < n; i++) {
		if (over(target)) {
			pthread_mutex_lock(&v[i].c->table->lock);
			drop_log_locked(v[i].c->table, v[i].c, true);
			pthread_mutex_unlock(&v[i].c->table->lock);
		}
		command_unref(v[i].c);
	}
	free(v);
	struct command *big;
	while (over(target) && (big = largest_running())) {
		pthread_mutex_lock(&big->table->lock);
		trim_log_locked(big->table, big);
		pthread_mutex_unlock(&big->table->lock);
		command_unref(big);
	}
	pthread_mutex_unlock(&budget.lock);
}

static void command_append(struct command *c, const void *data, size_t len)
{
	struct cmd_table *t = c->table;
	const char *p = data;
	pthread_mutex_lock(&t->lock);
	pthread_mutex_lock(&c->lock);
	if (!c->in_table) {
		/* Forgotten (evicted, or its sandbox is gone): the output is not kept. */
		cmdlog_lose(&c->log, len);
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(&t->lock);
		return;
	}
	cmdlog_mark(&c->log, celld_now_ms());
	size_t grow = cmdlog_fit(&c->log, &p, &len);
	if (grow && t->kept + grow > CMD_TABLE_LOG_MAX) {
		/* Other commands' locks are taken one at a time, never inside ours. The table
		 * lock keeps c's layout as it is meanwhile. */
		pthread_mutex_unlock(&c->lock);
		make_room_locked(t, c, grow);
		pthread_mutex_lock(&c->lock);
	}
	/* Out of memory, what was kept and this output are lost (nothing added); the offsets
	 * stay right. */
	kept_add_locked(t, (int64_t)cmdlog_append(&c->log, p, len, grow));
	pthread_mutex_unlock(&c->lock);
	pthread_cond_broadcast(&t->changed);
	pthread_mutex_unlock(&t->lock);
	if (over(budget.budget))
		budget_reclaim();
}

void command_finish(struct command *c, int exit_code, const char *error)
{
	pthread_mutex_lock(&c->lock);
	bool was_running = c->running;
	if (c->running) {
		c->running = false;
		c->has_exit = exit_code >= 0;
		c->exit_code = exit_code;
		c->error = error ? strdup(error) : NULL;
		c->finished_ms = celld_now_ms();
		pthread_cond_broadcast(&c->stdin_cond);
	}
	json_t *rec = was_running ? c->audit : NULL;
	c->audit = NULL;
	pthread_mutex_unlock(&c->lock);
	if (was_running && c->table) {
		pthread_mutex_lock(&c->table->lock);
		pthread_cond_broadcast(&c->table->changed);
		pthread_mutex_unlock(&c->table->lock);
	}
	if (was_running)
		admission_put(c->who, ADM_COMMANDS);
	if (rec) {
		/* A kill may have been the OOM killer's: the sandbox's events say so. */
		if (exit_code < 0 || exit_code >= 128)
			events_check_oom(c->sandbox, c->cgroup_rel);
		const char *action = json_string_value(json_object_get(rec, "kind"));
		char act[32];
		snprintf(act, sizeof(act), "%s", action ? action : "exec");
		json_object_del(rec, "kind");
		json_object_set_new(rec, "durationMs",
				    json_integer(celld_now_ms() - c->started_ms));
		json_object_set_new(rec, "exitCode",
				    exit_code >= 0 ? json_integer(exit_code) : json_null());
		if (error)
			json_object_set_new(rec, "error", json_string(error));
		audit_log_as(c->rid, c->who_text, c->sandbox, act, rec);
	}
}

void command_set_relay(struct command *c, int fd)
{
	pthread_mutex_lock(&c->lock);
	c->relay_fd = fd;
	pthread_mutex_unlock(&c->lock);
}

int command_signal(struct command *c, int sig, struct cell_error *err)
{
	pthread_mutex_lock(&c->lock);
	/* A duplicate: the reader may close its fd at any moment. */
	int fd = c->running && c->relay_fd >= 0 ? fcntl(c->relay_fd, F_DUPFD_CLOEXEC, 0) : -1;
	bool running = c->running;
	pthread_mutex_unlock(&c->lock);
	if (!running)
		return cell_err(err, ESRCH, "command %s is not running", c->id);
	if (fd < 0)
		return cell_err(err, errno, "command %s: relay", c->id);
	pthread_mutex_lock(&c->write_lock);
	int r = relay_signal(fd, sig, err);
	pthread_mutex_unlock(&c->write_lock);
	close(fd);
	return r;
}

void command_take_stdin(struct command *c)
{
	pthread_mutex_lock(&c->lock);
	c->stdin_open = true;
	pthread_mutex_unlock(&c->lock);
}

/* Wait (c->lock held) until len more bytes fit in the window: 0, or -EAGAIN after
 * STDIN_WAIT_MS without room (the command does not read), or 1 when it stopped taking input
 * (ended, or its stdin closed). Reserves the room on 0. */
#define STDIN_WAIT_MS 10000
static int stdin_room(struct command *c, size_t len)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += STDIN_WAIT_MS / 1000;
	while (c->running && c->stdin_open && c->stdin_unacked + len > CELL_STDIN_WINDOW)
		if (pthread_cond_timedwait(&c->stdin_cond, &c->lock, &until) == ETIMEDOUT)
			return -EAGAIN;
	if (!c->running || !c->stdin_open)
		return 1;
	c->stdin_unacked += len;
	return 0;
}

int command_stdin(struct command *c, const void *data, size_t len, bool close_it,
		  struct cell_error *err)
{
	pthread_mutex_lock(&c->lock);
	int room = len ? stdin_room(c, len) : 0;
	pthread_mutex_unlock(&c->lock);
	if (room == -EAGAIN)
		return cell_err(err, EAGAIN,
				"command %s has not taken its input for %d s: send it again later",
				c->id, STDIN_WAIT_MS / 1000);
	pthread_mutex_lock(&c->write_lock);
	pthread_mutex_lock(&c->lock);
	bool open = c->stdin_open, running = c->running;
	int fd = running && open && c->relay_fd >= 0 ? fcntl(c->relay_fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (fd >= 0 && close_it)
		c->stdin_open = false;
	pthread_mutex_unlock(&c->lock);
	int r = 0;
	if (!running)
		r = cell_err(err, ESRCH, "command %s has ended", c->id);
	else if (!open)
		r = cell_err(err, EPIPE, "command %s takes no stdin (or it was closed)", c->id);
	else if (fd < 0)
		r = cell_err(err, errno, "command %s: relay", c->id);
	if (r == 0 && len)
		r = relay_send_bytes(fd, CELL_FRAME_STDIN, data, len, err);
	if (r == 0 && close_it)
		r = relay_send_bytes(fd, CELL_FRAME_STDIN_CLOSE, NULL, 0, err);
	pthread_mutex_unlock(&c->write_lock);
	if (fd >= 0)
		close(fd);
	return r;
}

json_t *command_status_json(struct command *c)
{
	json_t *o = json_pack("{s:s, s:s}", "id", c->id, "content", c->content);
	if (!o)
		o = json_pack("{s:s, s:s}", "id", c->id, "content", "");
	pthread_mutex_lock(&c->lock);
	json_object_set_new(o, "running", json_boolean(c->running));
	if (c->has_exit)
		json_object_set_new(o, "exit_code", json_integer(c->exit_code));
	if (c->error)
		json_object_set_new(o, "error", json_string(c->error));
	json_object_set_new(o, "started_at", celld_time_json((time_t)(c->started_ms / 1000)));
	if (!c->running)
		json_object_set_new(o, "finished_at",
				    celld_time_json((time_t)(c->finished_ms / 1000)));
	if (c->log.dropped) {
		json_object_set_new(o, "log_dropped", json_true());
		json_object_set_new(o, "log_note",
				    json_string("output log dropped: kept command output reached "
						"its cap (" CMD_TABLE_LOG_MAX_TEXT " per sandbox, "
						"celld --output-budget for all)"));
	}
	pthread_mutex_unlock(&c->lock);
	return o;
}

uint64_t command_logs_end(struct command *c)
{
	pthread_mutex_lock(&c->lock);
	uint64_t end = cmdlog_end(&c->log);
	pthread_mutex_unlock(&c->lock);
	return end;
}

size_t command_logs_read(struct command *c, uint64_t *pos, uint64_t end, char *buf, size_t max)
{
	pthread_mutex_lock(&c->lock);
	size_t n = cmdlog_read(&c->log, pos, end, buf, max);
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* ---- the entrypoint, background commands, and their logs for a reader ---- */

void cmd_table_set_entrypoint(struct cmd_table *t, struct command *c)
{
	pthread_mutex_lock(&t->lock);
	snprintf(t->entrypoint, sizeof(t->entrypoint), "%s", c->id);
	c->entrypoint_run = true;
	pthread_mutex_unlock(&t->lock);
}

struct command *cmd_table_entrypoint(struct cmd_table *t)
{
	pthread_mutex_lock(&t->lock);
	struct command *c = t->entrypoint[0] ? find_locked(t, t->entrypoint) : NULL;
	if (c)
		command_ref(c);
	pthread_mutex_unlock(&t->lock);
	return c;
}

struct command *cmd_table_main(struct cmd_table *t)
{
	struct command *c = cmd_table_entrypoint(t);
	if (c)
		return c;
	pthread_mutex_lock(&t->lock);
	for (size_t i = t->n; i-- > 0 && !c;)
		if (t->v[i]->background)
			c = t->v[i];
	if (c)
		command_ref(c);
	pthread_mutex_unlock(&t->lock);
	return c;
}

void command_set_background(struct command *c)
{
	pthread_mutex_lock(&c->table->lock);
	c->background = true;
	pthread_mutex_unlock(&c->table->lock);
}

/* Its kind (the table's lock held). */
static const char *kind_locked(const struct command *c)
{
	return c->entrypoint_run ? "entrypoint" : c->background ? "background" : "command";
}

const char *command_kind(struct command *c)
{
	pthread_mutex_lock(&c->table->lock);
	const char *kind = kind_locked(c);
	pthread_mutex_unlock(&c->table->lock);
	return kind;
}

/* The length of s's first max bytes at most, cut at a character's start: what is kept of
 * it stays UTF-8. */
static size_t utf8_cut(const char *s, size_t max)
{
	size_t cut = strlen(s);
	if (cut > max) {
		cut = max;
		while (cut && ((unsigned char)s[cut] & 0xC0) == 0x80)
			cut--;
	}
	return cut;
}

json_t *cmd_table_list_json(struct cmd_table *t)
{
	struct command *v[CMD_TABLE_MAX];
	const char *kinds[CMD_TABLE_MAX];
	size_t n = 0;
	pthread_mutex_lock(&t->lock);
	for (; n < t->n; n++) {
		v[n] = t->v[n];
		kinds[n] = kind_locked(v[n]);
		command_ref(v[n]);
	}
	pthread_mutex_unlock(&t->lock);
	json_t *items = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *o = items ? command_state_json(v[i]) : NULL;
		size_t cut = utf8_cut(v[i]->content, CMD_LIST_CONTENT_MAX);
		if (!o || json_object_set_new(o, "kind", json_string(kinds[i])) < 0 ||
		    json_object_set_new(o, "content", json_stringn(v[i]->content, cut)) < 0 ||
		    (cut < strlen(v[i]->content) &&
		     json_object_set_new(o, "contentTruncated", json_true()) < 0) ||
		    json_array_append_new(items, o) < 0) {
			json_decref(items);
			items = NULL;
		}
		command_unref(v[i]);
	}
	return items;
}

void command_state(struct command *c, struct command_state *st)
{
	pthread_mutex_lock(&c->lock);
	*st = (struct command_state){.running = c->running,
				     .has_exit = c->has_exit,
				     .exit_code = c->exit_code,
				     .started_ms = c->started_ms,
				     .finished_ms = c->finished_ms,
				     .log_dropped = c->log.dropped};
	if (c->error)
		snprintf(st->error, sizeof(st->error), "%s", c->error);
	pthread_mutex_unlock(&c->lock);
}

json_t *command_state_json(struct command *c)
{
	struct command_state st;
	command_state(c, &st);
	json_t *o = json_pack("{s:s, s:b, s:o}", "commandId", c->id, "running", st.running,
			      "startedAt", celld_time_json((time_t)(st.started_ms / 1000)));
	if (o && st.has_exit)
		json_object_set_new(o, "exitCode", json_integer(st.exit_code));
	if (o && st.error[0])
		json_object_set_new(o, "error", json_string(st.error));
	if (o && !st.running)
		json_object_set_new(o, "finishedAt",
				    celld_time_json((time_t)(st.finished_ms / 1000)));
	if (o && st.log_dropped)
		json_object_set_new(o, "logDropped", json_true());
	return o;
}

uint64_t command_logs_since(struct command *c, int64_t ms)
{
	pthread_mutex_lock(&c->lock);
	uint64_t off = cmdlog_since(&c->log, ms);
	pthread_mutex_unlock(&c->lock);
	return off;
}

uint64_t command_logs_tail(struct command *c, uint64_t lines)
{
	pthread_mutex_lock(&c->lock);
	uint64_t off = cmdlog_tail(&c->log, lines);
	pthread_mutex_unlock(&c->lock);
	return off;
}

/* Has c written past pos, or ended? (Its table's lock held.) */
static bool news_locked(struct command *c, uint64_t pos)
{
	pthread_mutex_lock(&c->lock);
	bool news = cmdlog_end(&c->log) > pos || !c->running;
	pthread_mutex_unlock(&c->lock);
	return news;
}

bool command_logs_wait(struct command *c, uint64_t pos, int timeout_ms)
{
	struct cmd_table *t = c->table;
	struct timespec until;
	celld_deadline(timeout_ms, &until);
	pthread_mutex_lock(&t->lock);
	bool news;
	while (!(news = news_locked(c, pos)) && c->in_table)
		if (pthread_cond_timedwait(&t->changed, &t->lock, &until) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&t->lock);
	return news;
}

int relay_exit_code(const struct relay_exit *ex)
{
	return ex->timed_out ? 124 : ex->exit_code;
}

void relay_exit_text(const struct relay_exit *ex, char *buf, size_t size)
{
	if (ex->timed_out)
		snprintf(buf, size, "timed out after %lld ms", (long long)ex->duration_ms);
	else if (ex->signal)
		snprintf(buf, size, "killed by signal %d", ex->signal);
	else
		snprintf(buf, size, "exited with code %d", ex->exit_code);
}

void command_exit_text(const struct command *c, const struct relay_exit *ex, char *buf, size_t size)
{
	relay_exit_text(ex, buf, size);
	size_t len = strlen(buf);
	if (ex->signal == SIGKILL && !ex->timed_out && c->cgroup_rel[0] &&
	    celld.cgroup->oom_kills(c->cgroup_rel) > c->oom_before)
		snprintf(buf + len, size - len,
			 " (OOM killed: the sandbox reached its memory limit)");
}

bool command_apply(struct command *c, const struct relay_event *ev)
{
	if (ev->kind == RELAY_EV_STDIN_TAKEN) {
		pthread_mutex_lock(&c->lock);
		c->stdin_unacked -= ev->taken < c->stdin_unacked ? ev->taken : c->stdin_unacked;
		pthread_cond_broadcast(&c->stdin_cond);
		pthread_mutex_unlock(&c->lock);
		return false;
	}
	if (ev->kind != RELAY_EV_EXIT) {
		command_append(c, ev->frame.payload, ev->frame.len);
		return false;
	}
	char text[128];
	command_exit_text(c, &ev->exit, text, sizeof(text));
	int code = relay_exit_code(&ev->exit);
	bool abnormal = ev->exit.timed_out || ev->exit.signal;
	command_finish(c, code, abnormal ? text : NULL);
	return true;
}

struct drain {
	struct command *c;
	int fd;
};

static command_sandbox_end_fn sandbox_end_fn;

void command_set_sandbox_end(command_sandbox_end_fn fn)
{
	sandbox_end_fn = fn;
}

void command_delete_sandbox_at_end(struct command *c, const struct sandbox *sb)
{
	c->delete_serial = sb->serial;
}

static void *drain_thread(void *arg)
{
	struct drain *d = arg;
	struct cell_error err = {0};
	for (;;) {
		int r = relay_wait(d->fd, -1);
		if (r < 0) {
			cell_err(&err, -r, "waiting on the relay");
			break;
		}
		struct relay_event ev;
		r = relay_exec_next(d->fd, &ev, &err);
		if (r < 0)
			break;
		bool done = command_apply(d->c, &ev);
		cell_frame_free(&ev.frame);
		if (done)
			break;
	}
	/* No-op when EXIT already finished it. */
	command_finish(d->c, -1, err.msg[0] ? err.msg : "relay closed");
	command_set_relay(d->c, -1);
	close(d->fd);
	if (d->c->delete_serial && sandbox_end_fn)
		sandbox_end_fn(d->c->delete_serial);
	command_unref(d->c);
	free(d);
	return NULL;
}

int command_drain(struct command *c, int fd, struct cell_error *err)
{
	struct drain *d = malloc(sizeof(*d));
	if (!d) {
		close(fd);
		return cell_err(err, ENOMEM, "command reader");
	}
	command_ref(c);
	d->c = c;
	d->fd = fd;
	command_set_relay(c, fd);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	pthread_t th;
	int r = pthread_create(&th, &attr, drain_thread, d);
	pthread_attr_destroy(&attr);
	if (r) {
		command_set_relay(c, -1);
		command_finish(c, -1, "could not start a reader thread");
		close(fd);
		command_unref(c);
		free(d);
		return cell_err(err, r, "starting a command reader");
	}
	return 0;
}

/* {"K":"V"} → ["K=V"], the whole environment of the command. */
static json_t *env_array(json_t *env)
{
	json_t *arr = json_array();
	const char *k;
	json_t *v;
	json_object_foreach(env, k, v)
	{
		char *kv;
		if (!arr || asprintf(&kv, "%s=%s", k, json_string_value(v)) < 0) {
			json_decref(arr);
			return NULL;
		}
		json_array_append_new(arr, json_string(kv));
		free(kv);
	}
	return arr;
}

/* Commands travel base64-encoded: decoded only inside the sandbox, never near a shell. */
static json_t *b64_string(const char *s)
{
	char *b = cell_base64_encode(s, strlen(s));
	json_t *j = b ? json_string(b) : NULL;
	free(b);
	return j;
}

static json_t *argv_b64(json_t *argv, char **content)
{
	json_t *out = json_array();
	size_t i, len = 0;
	json_t *v;
	FILE *f = open_memstream(content, &len);
	bool ok = out && f;
	json_array_foreach(argv, i, v)
	{
		json_t *b = b64_string(json_string_value(v));
		if (!b || json_array_append_new(out, b) < 0)
			ok = false;
		if (f)
			fprintf(f, "%s%s", i ? " " : "", json_string_value(v));
	}
	if (f)
		fclose(f);
	if (!ok) {
		json_decref(out);
		return NULL;
	}
	return out;
}

/* The environment every command starts with (request envs are added on top). */
static json_t *base_env(const struct sandbox *sb)
{
	json_t *env = json_pack("{s:s, s:s, s:s, s:s}", "PATH",
				"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				"HOME", "/root", "LANG", "C.UTF-8", "TERM", "xterm");
	if (env && sb->env)
		json_object_update(env, sb->env);
	/* The sandbox's secrets (secrets.h), read where they are kept: a restarted celld
	 * needs nothing more, and celld holds no copy of them between commands. */
	json_t *secrets = env ? secrets_load(sb->dirfd) : NULL;
	if (secrets)
		json_object_update(env, secrets);
	json_decref(secrets);
	return env;
}

json_t *command_exec_request(const struct sandbox *sb, const char *command, json_t *argv,
			     json_t *envs, const char *cwd, int64_t timeout_ms, int64_t uid,
			     int64_t gid, char **content)
{
	*content = NULL;
	json_t *env = base_env(sb);
	/* No user named: the image's (cell-init looks a name up in the sandbox's passwd), else
	 * root; no directory named: the image's WorkingDir. */
	const char *user = uid < 0 ? sb->image_user : NULL;
	if (uid < 0 && !user)
		uid = 0;
	if (!cwd)
		cwd = sb->image_workdir;
	/* A command run as another user gets that user's home (cell-init reads it from the
	 * sandbox's passwd), not root's, unless its client named one. */
	bool home_from_passwd = uid != 0 && !json_object_get(envs, "HOME");
	if (env && home_from_passwd)
		json_object_del(env, "HOME");
	if (env && envs)
		json_object_update(env, envs);
	json_t *req = env ? json_pack("{s:o, s:I, s:b}", "env", env_array(env), "timeout_ms",
				      (json_int_t)timeout_ms, "home_from_passwd", home_from_passwd)
			  : NULL;
	if (req && json_object_set_new(req, user ? "user" : "uid",
				       user ? json_string(user) : json_integer(uid)) < 0) {
		json_decref(req);
		req = NULL;
	}
	/* gid < 0: cell-init takes the user's primary group from the sandbox's passwd. */
	if (req && gid >= 0 && json_object_set_new(req, "gid", json_integer(gid)) < 0) {
		json_decref(req);
		req = NULL;
	}
	json_decref(env);
	json_t *cmd = NULL;
	if (req && argv) {
		cmd = argv_b64(argv, content);
	} else if (req && command) {
		cmd = b64_string(command);
		*content = strdup(command);
	}
	bool ok = cmd && *content &&
		  json_object_set_new(req, argv ? "argv" : "command", json_incref(cmd)) == 0 &&
		  (!cwd || json_object_set_new(req, "cwd", json_string(cwd)) == 0);
	json_decref(cmd);
	if (!ok) {
		json_decref(req);
		free(*content);
		*content = NULL;
		return NULL;
	}
	return req;
}

#define AUDIT_COMMAND_MAX 4096 /* bytes of a command's text the audit log keeps */

/* What the audit log will say of c when it ends: the command's text (cut at
 * AUDIT_COMMAND_MAX), cwd, and the names of its environment, never their values. */
static void audit_prepare(struct command *c, const struct sandbox *sb, uint16_t type, json_t *req)
{
	snprintf(c->rid, sizeof(c->rid), "%s", audit_request_id());
	snprintf(c->who_text, sizeof(c->who_text), "%s", audit_who());
	snprintf(c->sandbox, sizeof(c->sandbox), "%s", sb->id);
	size_t n = strlen(c->content), cut = utf8_cut(c->content, AUDIT_COMMAND_MAX);
	json_t *rec =
	    json_pack("{s:s, s:s, s:s%}", "kind", type == CELL_FRAME_EXEC ? "exec" : "session.run",
		      "commandId", c->id, "command", c->content, cut);
	if (!rec)
		rec =
		    json_pack("{s:s, s:s}", "kind",
			      type == CELL_FRAME_EXEC ? "exec" : "session.run", "commandId", c->id);
	if (!rec)
		return;
	if (n > cut)
		json_object_set_new(rec, "commandTruncated", json_true());
	json_t *cwd = json_object_get(req, "cwd");
	if (json_is_string(cwd))
		json_object_set(rec, "cwd", cwd);
	json_t *sid = json_object_get(req, "id");
	if (type != CELL_FRAME_EXEC && json_is_string(sid))
		json_object_set(rec, "session", sid);
	json_t *env = json_object_get(req, "env"), *names = json_array(), *v;
	size_t i;
	json_array_foreach(env, i, v)
	{
		const char *kv = json_string_value(v);
		const char *eq = kv ? strchr(kv, '=') : NULL;
		if (eq && names)
			json_array_append_new(names, json_stringn(kv, (size_t)(eq - kv)));
	}
	if (names && json_array_size(names))
		json_object_set_new(rec, "envNames", names);
	else
		json_decref(names);
	c->audit = rec;
}

static int start_as(struct sandbox *sb, uint16_t type, json_t *req, const char *content,
		    struct adm_principal *who, struct command **out, int *fdp,
		    struct relay_error *rerr, struct cell_error *err)
{
	struct command *c = NULL;
	*out = NULL;
	*fdp = -1;
	int r = admission_take(who, ADM_COMMANDS, false, err);
	if (r < 0)
		return r;
	r = cmd_table_add(sb->cmds, content, &c, err);
	if (r < 0) {
		admission_put(who, ADM_COMMANDS);
		return r;
	}
	c->who = who; /* command_finish gives the count back */
	snprintf(c->cgroup_rel, sizeof(c->cgroup_rel), "%s", sb->cgroup_rel);
	audit_prepare(c, sb, type, req);
	c->oom_before = celld.cgroup->oom_kills(sb->cgroup_rel);
	/* Connecting and the wait for STARTED share one budget. */
	struct relay_budget b = RELAY_BUDGET_INIT;
	int fd = relay_connect(sb, &b, err);
	if (fd < 0) {
		command_finish(c, -1, err->msg);
		cmd_table_drop(sb->cmds, c);
		command_unref(c);
		return fd;
	}
	pid_t pid;
	r = relay_exec_start(fd, type, req, &pid, rerr, &b, err);
	if (r < 0) {
		close(fd);
		command_finish(c, -1, err->msg);
		cmd_table_drop(sb->cmds, c);
		command_unref(c);
		return r;
	}
	if (r == 1 && type != CELL_FRAME_EXEC) {
		/* A session refused the run: nothing ran, nothing is listed. */
		close(fd);
		command_finish(c, -1, rerr->message);
		cmd_table_drop(sb->cmds, c);
		command_unref(c);
		return 1;
	}
	if (r == 1) {
		/* init could not start it (bad cwd, no such program): it stays listed, finished
		 * with the code a shell would give. */
		close(fd);
		command_finish(c, rerr->errnum == ENOENT ? 127 : 126, rerr->message);
		*out = c;
		return 1;
	}
	command_set_relay(c, fd);
	*out = c;
	*fdp = fd;
	return 0;
}

int command_start(struct sandbox *sb, json_t *req, const char *content, struct adm_principal *who,
		  struct command **out, int *fdp, struct relay_error *rerr, struct cell_error *err)
{
	return start_as(sb, CELL_FRAME_EXEC, req, content, who, out, fdp, rerr, err);
}

int command_start_session(struct sandbox *sb, json_t *req, const char *content,
			  struct adm_principal *who, struct command **out, int *fdp,
			  struct relay_error *rerr, struct cell_error *err)
{
	return start_as(sb, CELL_FRAME_SESSION_RUN, req, content, who, out, fdp, rerr, err);
}

json_t *command_session_open(const struct sandbox *sb, const char *id, const char *cwd,
			     json_t *envs)
{
	json_t *env = base_env(sb);
	if (env && envs)
		json_object_update(env, envs);
	json_t *req = env ? json_pack("{s:s, s:o}", "id", id, "env", env_array(env)) : NULL;
	json_decref(env);
	if (!cwd)
		cwd = sb->image_workdir; /* the image's WorkingDir, as for commands */
	if (req && cwd && json_object_set_new(req, "cwd", json_string(cwd)) < 0) {
		json_decref(req);
		return NULL;
	}
	return req;
}

json_t *command_session_run(const char *id, const char *command, const char *cwd,
			    int64_t timeout_ms, char **content)
{
	*content = strdup(command);
	json_t *cmd = b64_string(command);
	json_t *req = *content && cmd ? json_pack("{s:s, s:O, s:I}", "id", id, "command", cmd,
						  "timeout_ms", (json_int_t)timeout_ms)
				      : NULL;
	json_decref(cmd);
	if (req && cwd && json_object_set_new(req, "cwd", json_string(cwd)) < 0) {
		json_decref(req);
		req = NULL;
	}
	if (!req) {
		free(*content);
		*content = NULL;
	}
	return req;
}

/* ---- a command's events, for a front ---- */

struct command_stream {
	struct command *c; /* referenced */
	int fd;
	struct relay_reader rd;
};

static void stream_free(struct command_stream *s)
{
	relay_reader_free(&s->rd);
	command_unref(s->c);
	free(s);
}

int command_open(struct sandbox *sb, bool session, json_t *req, const char *content,
		 struct adm_principal *who, struct command **out, struct command_stream **stream,
		 struct command_refusal *why, struct cell_error *err)
{
	*stream = NULL;
	struct command_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return cell_err(err, ENOMEM, "out of memory");
	struct relay_error rerr = {0};
	int rc = start_as(sb, session ? CELL_FRAME_SESSION_RUN : CELL_FRAME_EXEC, req, content, who,
			  out, &s->fd, &rerr, err);
	if (rc == 1) {
		why->errnum = rerr.errnum;
		snprintf(why->message, sizeof(why->message), "%s", rerr.message);
	}
	if (rc != 0) {
		free(s);
		return rc;
	}
	command_ref(*out);
	s->c = *out;
	*stream = s;
	return 0;
}

int command_stream_wait(struct command_stream *s, int timeout_ms)
{
	return relay_wait(s->fd, timeout_ms);
}

static const enum command_ev stream_kinds[] = {
    [RELAY_EV_STDOUT] = COMMAND_EV_STDOUT,
    [RELAY_EV_STDERR] = COMMAND_EV_STDERR,
    [RELAY_EV_EXIT] = COMMAND_EV_EXIT,
    [RELAY_EV_STDIN_TAKEN] = COMMAND_EV_STDIN_TAKEN,
};

int command_stream_read(struct command_stream *s, struct command_event *ev, struct cell_error *err)
{
	struct relay_event re;
	memset(ev, 0, sizeof(*ev));
	int rc = relay_exec_read(s->fd, &s->rd, &re, err);
	if (rc < 0)
		return rc;
	command_apply(s->c, &re);
	ev->kind = stream_kinds[re.kind];
	ev->data = re.frame.payload;
	ev->len = re.frame.len;
	if (re.kind == RELAY_EV_EXIT) {
		ev->code = relay_exit_code(&re.exit);
		ev->duration_ms = re.exit.duration_ms;
		if (ev->code)
			command_exit_text(s->c, &re.exit, ev->text, sizeof(ev->text));
	}
	return 0;
}

void command_stream_drain(struct command_stream *s)
{
	/* Frames are read whole, so the reader hands over at a frame boundary. */
	struct cell_error err = {0};
	if (command_drain(s->c, s->fd, &err) < 0)
		cell_err_drop(&err, "a command whose client went away");
	stream_free(s);
}

void command_stream_close(struct command_stream *s)
{
	command_set_relay(s->c, -1);
	close(s->fd);
	stream_free(s);
}

int command_ping(const struct sandbox *sb, int timeout_ms, struct cell_error *err)
{
	return relay_ping(sb, timeout_ms, err);
}
