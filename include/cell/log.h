/* Logging to stderr (or a chosen fd) with a timestamp and level. Thread-safe (one write
 * per line). */
#pragma once

#include <stdbool.h>

enum cell_log_level { CELL_LOG_DEBUG, CELL_LOG_INFO, CELL_LOG_WARN, CELL_LOG_ERROR };

void cell_log_set_level(enum cell_log_level level);
void cell_log_set_prefix(const char *prefix); /* e.g. "celld" */
/* Each line one JSON object instead of text: {"time", "level", "program", "pid",
 * "message"}, the text line's fields, the message escaped (invalid UTF-8 as U+FFFD). */
void cell_log_set_json(bool json);
/* Each line in the shape OCI runtimes write to their --log file instead: {"level", "msg",
 * "time"}, levels debug, info, warning, error (cell-oci's --log-format json). */
void cell_log_set_runtime_json(bool json);
/* Where lines go (default, and fd < 0: stderr). */
void cell_log_set_fd(int fd);
void cell_log(enum cell_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_debug(...) cell_log(CELL_LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  cell_log(CELL_LOG_INFO, __VA_ARGS__)
#define log_warn(...)  cell_log(CELL_LOG_WARN, __VA_ARGS__)
#define log_error(...) cell_log(CELL_LOG_ERROR, __VA_ARGS__)
