/* proc_view.c: the texts of /proc/<pid> a sandbox's process shapes (stat, status, cgroup,
 * uid_map, cmdline), read as hostile input: parsed without trusting a name, every field
 * bounded, and text escaped before it leaves celld. Pure: no I/O. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The fields of stat that top shows, and the name between its parentheses. */
struct proc_stat {
	char state;
	unsigned long long utime, stime, starttime; /* clock ticks */
	long rss_pages;
	char comm[32];
};

/* stat's text: its name is what lies between the first '(' and the last ')' (a name may hold
 * any byte, parentheses and spaces included); the fields after it. 0, or -EPROTO. */
int proc_view_stat(const char *text, struct proc_stat *out);
/* Whether a line of cgroup's text ("hierarchy:controllers:/path") ends in "/" rel. */
bool proc_view_in_cgroup(const char *text, const char *rel);
/* The last number of status's "key:" line (NSpid: the innermost namespace's), or -1. */
long proc_view_status_last(const char *status, const char *key);
/* The effective uid of status mapped through uid_map's text ("inside outside count" lines,
 * as the reader's namespace sees them): the uid inside, or -1 when unmapped. */
long proc_view_inner_uid(const char *status, const char *uid_map);
/* s (len bytes) with every byte outside printable ASCII and the backslash written as \xNN,
 * NULs (between arguments) as spaces, trailing NULs dropped; malloc'd, NULL without
 * memory. */
char *proc_view_escape(const char *s, size_t len);
