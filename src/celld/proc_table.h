/* proc_table.c: what a sandbox's started processes were given, and its open bash sessions.
 *
 * One table per sandbox, hung off its object (sb->procs) and freed with it, so nothing
 * polls the registry for the tables of sandboxes that are gone. cell-init knows what runs;
 * the table knows only what it was started with (its config, its tag, which API), which
 * cell-init never keeps. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#define PROC_TABLE_MAX 64  /* started processes remembered per sandbox (cell-init's PTY_MAX) */
#define PROC_TAG_MAX   256 /* a tag's bytes */
/* Bash sessions: per sandbox (cell-init's SESSION_MAX too) and in all of celld. */
#define PROC_SHELLS_PER_SANDBOX 64
#define PROC_SHELLS_MAX		4096

/* The API that started a process: its List shows only its own. */
enum proc_api { PROC_API_OPENSANDBOX, PROC_API_E2B };

struct proc_table;

/* What the table holds of one process. */
struct proc_info {
	int pid; /* 0 until a client attached (the process starts then) */
	enum proc_api api;
	bool has_tag;
	char tag[PROC_TAG_MAX + 1];
	json_t *config; /* what it was given, the front's shape (a new reference) */
};

struct proc_table *proc_table_new(void);
void proc_table_free(struct proc_table *t);

/* The mark to take before asking cell-init what runs: a prune with that answer may drop only
 * entries added up to the mark, as later ones may have started after the answer was made. */
uint64_t proc_table_mark(struct proc_table *t);
/* Remember session sid (config taken, tag may be NULL); at the cap the oldest entry goes.
 * -ENOMEM leaves the table as it was. */
int proc_table_add(struct proc_table *t, const char *sid, int pid, enum proc_api api,
		   const char *tag, json_t *config);
/* Drop the entries added up to mark whose session is not in running (PTY_LIST's
 * "sessions": objects with an "id", asked for after mark was taken). */
void proc_table_prune(struct proc_table *t, json_t *running, uint64_t mark);
void proc_table_remove(struct proc_table *t, const char *sid);
/* The pid of the process tagged tag (-1: none). */
int proc_table_tag_pid(struct proc_table *t, const char *tag);
/* What session sid was given: true with *out (its config to be released), false when the
 * table does not know it (started before a restart of celld). */
bool proc_table_get(struct proc_table *t, const char *sid, struct proc_info *out);

/* A bash session opened: 0, -EUSERS (the sandbox's PROC_SHELLS_PER_SANDBOX), -ENOSPC
 * (celld's PROC_SHELLS_MAX) or -ENOMEM. */
int proc_table_shell_add(struct proc_table *t, const char *id);
void proc_table_shell_forget(struct proc_table *t, const char *id);
