/* The texts of /proc/<pid> as hostile input (proc_view.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc_view.h"

int proc_view_stat(const char *text, struct proc_stat *out)
{
	const char *open = strchr(text, '(');
	const char *close = strrchr(text, ')');
	if (!open || !close || close < open)
		return -EPROTO;
	size_t n = (size_t)(close - open - 1);
	if (n >= sizeof(out->comm))
		n = sizeof(out->comm) - 1;
	memcpy(out->comm, open + 1, n);
	out->comm[n] = '\0';
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
	 * cutime cstime priority nice threads itrealvalue starttime vsize rss */
	int got = sscanf(close + 1,
			 " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
			 "%*d %*d %llu %*u %ld",
			 &out->state, &out->utime, &out->stime, &out->starttime, &out->rss_pages);
	return got == 5 ? 0 : -EPROTO;
}

bool proc_view_in_cgroup(const char *text, const char *rel)
{
	size_t rl = strlen(rel);
	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		if (len > rl + 1 && line[len - rl - 1] == '/' && !memcmp(line + len - rl, rel, rl))
			return true;
		line += len + (end ? 1 : 0);
	}
	return false;
}

/* The start of key's line in status, or NULL. */
static const char *status_line(const char *status, const char *key)
{
	size_t kl = strlen(key);
	for (const char *line = status; line && *line; line = strchr(line, '\n'), line += !!line)
		if (!strncmp(line, key, kl) && line[kl] == ':')
			return line + kl + 1;
	return NULL;
}

long proc_view_status_last(const char *status, const char *key)
{
	long v = -1;
	const char *c = status_line(status, key);
	while (c && *c && *c != '\n') {
		char *end;
		long n = strtol(c, &end, 10);
		if (end == c)
			break;
		v = n;
		c = end;
	}
	return v;
}

long proc_view_inner_uid(const char *status, const char *uid_map)
{
	const char *c = status_line(status, "Uid");
	if (!c)
		return -1;
	char *end;
	strtol(c, &end, 10); /* real */
	long host = strtol(end, &end, 10);
	if (host < 0)
		return -1;
	for (const char *m = uid_map; *m;) {
		unsigned long in, out, count;
		if (sscanf(m, "%lu %lu %lu", &in, &out, &count) == 3 &&
		    (unsigned long)host >= out && (unsigned long)host - out < count)
			return (long)(in + ((unsigned long)host - out));
		const char *nl = strchr(m, '\n');
		if (!nl)
			break;
		m = nl + 1;
	}
	return -1;
}

char *proc_view_escape(const char *s, size_t len)
{
	while (len && s[len - 1] == '\0')
		len--;
	char *out = malloc(len * 4 + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\0')
			*o++ = ' ';
		else if (c < 0x20 || c >= 0x7f || c == '\\')
			o += sprintf(o, "\\x%02x", c);
		else
			*o++ = (char)c;
	}
	*o = '\0';
	return out;
}
