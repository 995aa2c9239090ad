/* Shared runner for the unit test programs: one Check suite per program, Check's standard
 * summary on stdout, exit status non-zero when anything failed. */
#pragma once

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline int unit_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* ---- skips ----
 *
 * A test that cannot run never just returns: it ends through UNIT_SKIP_HOST(probe, fmt, ...)
 * when a capability check, run before the feature is used, finds this host lacking (probe
 * names what was checked, e.g. "tool-tar"), otherwise through UNIT_SKIP(fmt, ...). Both
 * record the skip as the integration harness does (tests/integration/harness.h): one
 * "suite<TAB>test<TAB>kind<TAB>probe<TAB>reason" line appended to CELL_TEST_SKIPS, the
 * run's list that `make unit` and `make check` print, and a line on stderr. Then the test
 * returns, so its checked teardown still runs. Under CELL_TEST_STRICT=1 (CI) UNIT_SKIP fails
 * the test instead: strict mode allows only skips a host probe decided. A part of a test
 * the host lacks, the rest still running: unit_skip_record(__func__, "host", probe, ...). */

static inline int unit_strict(void)
{
	const char *v = getenv("CELL_TEST_STRICT");
	return v && !strcmp(v, "1");
}

/* "suite<TAB>test<TAB>kind<TAB>probe<TAB>reason" appended to path in one write, so that the
 * lines of programs appending at once never mix; only the separators are tabs. */
static inline void unit_skip_append(const char *path, const char *const f[5])
{
	char *line = NULL;
	int n = asprintf(&line, "%s\t%s\t%s\t%s\t%s\n", f[0], f[1], f[2], f[3], f[4]);
	ck_assert_int_gt(n, 0);
	int tabs = 0;
	for (char *c = line; c < line + n - 1; c++)
		if (*c == '\n' || (*c == '\t' && ++tabs > 4))
			*c = ' ';
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, line, (size_t)n), n);
	close(fd);
	free(line);
}

/* Records the skip of test fn (its START_TEST function, "<name>_fn"). */
static inline void unit_skip_record(const char *fn, const char *kind, const char *probe,
				    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static inline void unit_skip_record(const char *fn, const char *kind, const char *probe,
				    const char *fmt, ...)
{
	char *reason = NULL;
	va_list ap;
	va_start(ap, fmt);
	ck_assert_int_ge(vasprintf(&reason, fmt, ap), 0);
	va_end(ap);
	size_t len = strlen(fn);
	char *test = strndup(fn, len > 3 && !strcmp(fn + len - 3, "_fn") ? len - 3 : len);
	ck_assert_ptr_nonnull(test);
	int strict = unit_strict() && strcmp(kind, "host");
	const char *fields[5] = {program_invocation_short_name, test,
				 strict ? "other-strict" : kind, probe, reason};
	fprintf(stderr, "%s: SKIP %s: %s (%s%s%s)\n", fields[0], test, reason, fields[2],
		*probe ? ", probe " : "", probe);
	const char *path = getenv("CELL_TEST_SKIPS");
	if (path && *path)
		unit_skip_append(path, fields);
	ck_assert_msg(!strict,
		      "not run: %s; CELL_TEST_STRICT=1 allows only skips a host capability probe "
		      "decided (UNIT_SKIP_HOST)",
		      reason);
	free(test);
	free(reason);
}

#define UNIT_SKIP_HOST(probe, ...)                                                                 \
	do {                                                                                       \
		unit_skip_record(__func__, "host", probe, __VA_ARGS__);                            \
		return;                                                                            \
	} while (0)

#define UNIT_SKIP(...)                                                                             \
	do {                                                                                       \
		unit_skip_record(__func__, "other", "", __VA_ARGS__);                              \
		return;                                                                            \
	} while (0)
