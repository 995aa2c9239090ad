#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cell/log.h"

#define LINE_MAX_BYTES 2048

static enum cell_log_level min_level = CELL_LOG_INFO;
static const char *log_prefix = "cell";
static bool log_json;
static bool log_runtime_json;
static int log_fd = STDERR_FILENO;

void cell_log_set_level(enum cell_log_level level)
{
	min_level = level;
}

void cell_log_set_prefix(const char *prefix)
{
	log_prefix = prefix;
}

void cell_log_set_json(bool json)
{
	log_json = json;
}

void cell_log_set_runtime_json(bool json)
{
	log_runtime_json = json;
}

void cell_log_set_fd(int fd)
{
	log_fd = fd >= 0 ? fd : STDERR_FILENO;
}

/* How many bytes of s, at most left, make one valid UTF-8 character after its lead byte
 * s[0] (>= 0x80): 0 when they do not. */
static size_t utf8_tail(const unsigned char *s, size_t left)
{
	size_t tail = s[0] >= 0xf0 && s[0] < 0xf5 ? 3 : s[0] >= 0xe0 ? 2 : s[0] >= 0xc2 ? 1 : 0;
	if (s[0] >= 0xf5 || tail >= left)
		return 0;
	for (size_t i = 1; i <= tail; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return tail;
}

/* msg as a JSON string's contents into out (size > 7), cut short rather than overrun. */
static size_t json_escape(char *out, size_t size, const char *msg)
{
	const unsigned char *s = (const unsigned char *)msg;
	size_t n = 0, len = strlen(msg);
	for (size_t i = 0; i < len && n + 7 < size; i++) {
		size_t tail = s[i] >= 0x80 ? utf8_tail(s + i, len - i) : 0;
		if (s[i] == '"' || s[i] == '\\') {
			out[n++] = '\\';
			out[n++] = (char)s[i];
		} else if (s[i] < 0x20) {
			n += (size_t)snprintf(out + n, size - n, "\\u%04x", s[i]);
		} else if (s[i] < 0x80) {
			out[n++] = (char)s[i];
		} else if (!tail) {
			n += (size_t)snprintf(out + n, size - n, "\\ufffd");
		} else if (n + tail + 1 < size - 7) {
			memcpy(out + n, s + i, tail + 1);
			n += tail + 1;
			i += tail;
		} else {
			break;
		}
	}
	return n;
}

void cell_log(enum cell_log_level level, const char *fmt, ...)
{
	static const char *const names[] = {"debug", "info", "warn", "error"};
	if (level < min_level)
		return;
	char line[LINE_MAX_BYTES * 2], msg[LINE_MAX_BYTES], when[64];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	int n;
	if (log_runtime_json) {
		/* The shape OCI runtimes write to --log, whose last "error" line containerd's
		 * shim shows as the failure: logrus' level names ("warning"), "msg", "time". */
		static const char *const runtime_names[] = {"debug", "info", "warning", "error"};
		char esc[LINE_MAX_BYTES + 64];
		size_t e = json_escape(esc, sizeof(esc), msg);
		n = snprintf(line, sizeof(line),
			     "{\"level\":\"%s\",\"msg\":\"%.*s\",\"time\":\"%s\"}",
			     runtime_names[level], (int)e, esc, when);
	} else if (log_json) {
		char esc[LINE_MAX_BYTES + 64];
		size_t e = json_escape(esc, sizeof(esc), msg);
		n = snprintf(line, sizeof(line),
			     "{\"time\":\"%s\",\"level\":\"%s\",\"program\":\"%s\",\"pid\":%d,"
			     "\"message\":\"%.*s\"}",
			     when, names[level], log_prefix, (int)getpid(), (int)e, esc);
	} else {
		n = snprintf(line, sizeof(line), "%s %s[%d] %s: %s", when, log_prefix,
			     (int)getpid(), names[level], msg);
	}
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line so concurrent threads never interleave inside a line. */
	ssize_t w = write(log_fd, line, n);
	(void)w;
}
